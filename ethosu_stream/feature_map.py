"""Feature maps as the registers describe them: up to four tiles, strides, NHWC or NHCWB16.

Only the placement lives here; the shape an operation reads comes from the operation (the
hardware derives the IFM extent from the OFM shape, the kernel and the padding).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from .registers import RegisterState

BRICK = 16
# IFM/IFM2 precision bits 2-3 and OFM precision bits 1-2: element width
_IFM_BITS = {0: 8, 1: 16, 2: 32}


@dataclass(frozen=True)
class FeatureMap:
    region: int
    bases: tuple[int, int, int, int]
    height0: int
    height1: int
    width0: int
    stride_x: int
    stride_y: int
    stride_c: int
    nhcwb16: bool
    dtype: np.dtype
    zero_point: int

    def addresses(self, ys: np.ndarray, xs: np.ndarray, cs: np.ndarray) -> np.ndarray:
        """Byte address of element (y, x, c) for broadcastable coordinate arrays. The tile
        rule follows Vela's addressing: right of ``width0`` is tile 1 (tile 3 below
        ``height1``); left of it, below ``height0`` is tile 2."""
        ys, xs, cs = np.broadcast_arrays(np.asarray(ys, np.int64), np.asarray(xs, np.int64),
                                         np.asarray(cs, np.int64))
        right = xs >= self.width0
        lower = np.where(right, ys >= self.height1, ys >= self.height0)
        tile = right.astype(np.int64) + 2 * lower
        y = ys - np.where(lower, np.where(right, self.height1, self.height0), 0)
        x = xs - np.where(right, self.width0, 0)
        base = np.asarray(self.bases, np.int64)[tile]
        esize = self.dtype.itemsize
        if self.nhcwb16:
            return base + y * self.stride_y + x * BRICK * esize + (cs // BRICK) * self.stride_c \
                + (cs % BRICK) * esize
        return base + y * self.stride_y + x * self.stride_x + cs * esize

    def grid(self, h: int, w: int, c: int) -> np.ndarray:
        """Addresses of the whole (h, w, c) box from the origin."""
        ys, xs, cs = np.arange(h)[:, None, None], np.arange(w)[None, :, None], \
            np.arange(c)[None, None, :]
        if h > self.height0 or w > self.width0:
            return self.addresses(ys, xs, cs)
        # the box lies in tile 0: one base, no tile selection
        esize = self.dtype.itemsize
        if self.nhcwb16:
            return self.bases[0] + ys * self.stride_y + xs * (BRICK * esize) + \
                (cs // BRICK) * self.stride_c + (cs % BRICK) * esize
        return self.bases[0] + ys * self.stride_y + xs * self.stride_x + cs * esize


@functools.lru_cache(maxsize=None)
def ifm_dtype(precision: int) -> np.dtype:
    bits = _IFM_BITS.get((precision >> 2) & 3)
    if bits is None:
        raise ValueError(f"IFM precision 0x{precision:x} names no element width")
    signed = bool(precision & 1)
    return np.dtype(f"{'i' if signed else 'u'}{bits // 8}")


@functools.lru_cache(maxsize=None)
def ofm_dtype(precision: int) -> np.dtype:
    bits = _IFM_BITS.get((precision >> 1) & 3)
    if bits is None:
        raise ValueError(f"OFM precision 0x{precision:x} names no element width")
    return np.dtype(f"{'i' if precision & 1 else 'u'}{bits // 8}")


def from_registers(state: RegisterState, prefix: str) -> FeatureMap:
    """The feature map the ``IFM``, ``IFM2`` or ``OFM`` registers describe."""
    prec = state.param(f"{prefix}_PRECISION")
    dtype = ofm_dtype(prec) if prefix == "OFM" else ifm_dtype(prec)
    return FeatureMap(
        region=state.param(f"{prefix}_REGION"),
        bases=tuple(state.address(f"{prefix}_BASE{i}") for i in range(4)),
        height0=state.param(f"{prefix}_HEIGHT0_M1") + 1,
        height1=state.param(f"{prefix}_HEIGHT1_M1") + 1,
        width0=state.param(f"{prefix}_WIDTH0_M1") + 1,
        stride_x=state.address(f"{prefix}_STRIDE_X"),
        stride_y=state.address(f"{prefix}_STRIDE_Y"),
        stride_c=state.address(f"{prefix}_STRIDE_C"),
        nhcwb16=bool(prec & (1 << 6)),
        dtype=dtype,
        zero_point=state.signed(f"{prefix}_ZERO_POINT"),
    )
