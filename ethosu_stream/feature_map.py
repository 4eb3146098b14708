"""Feature maps as the registers describe them: up to four tiles, strides, NHWC or NHCWB16.
A stride may be negative (the register's 40-bit two's complement): the box is then laid out
backwards from its base along that axis, as Vela's mirrored copies write it.

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

    def tile_views(self, h: int, w: int, c: int) -> tuple["TileView", ...]:
        """The (h, w, c) box from the origin as one strided block per tile it covers (the
        rule of :meth:`addresses`), each with its byte span (remembered: a stream runs the
        same boxes at every inference)."""
        return _tile_views(self, h, w, c)

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
    """The feature map the ``IFM``, ``IFM2`` or ``OFM`` registers describe (remembered until
    the next register write)."""
    fm = state.derived.get(prefix)
    if fm is None:
        fm = state.derived[prefix] = _from_registers(state, prefix)
    return fm


@functools.lru_cache(maxsize=None)
def _register_names(prefix: str) -> tuple[str, ...]:
    return tuple(f"{prefix}_{n}" for n in (
        "PRECISION", "REGION", "BASE0", "BASE1", "BASE2", "BASE3", "HEIGHT0_M1", "HEIGHT1_M1",
        "WIDTH0_M1", "STRIDE_X", "STRIDE_Y", "STRIDE_C", "ZERO_POINT"))


def _from_registers(state: RegisterState, prefix: str) -> FeatureMap:
    prec_r, region, b0, b1, b2, b3, h0, h1, w0, sx, sy, sc, zp = _register_names(prefix)
    prec = state.param(prec_r)
    dtype = ofm_dtype(prec) if prefix == "OFM" else ifm_dtype(prec)
    address, stride = state.address, state.stride
    return FeatureMap(
        region=state.param(region),
        bases=(address(b0), address(b1), address(b2), address(b3)),
        height0=state.param(h0) + 1,
        height1=state.param(h1) + 1,
        width0=state.param(w0) + 1,
        stride_x=stride(sx),
        stride_y=stride(sy),
        stride_c=stride(sc),
        nhcwb16=bool(prec & (1 << 6)),
        dtype=dtype,
        zero_point=state.signed(zp),
    )


@dataclass(frozen=True)
class TileView:
    """The part of a box that lies in one tile: box rows ``ys:ye`` and columns ``xs:xe``, a
    strided block at byte ``offset`` (shape, byte strides; NHCWB16 in whole bricks plus the
    remainder) spanning bytes [lo, hi) of the region."""

    ys: int
    ye: int
    xs: int
    xe: int
    lo: int
    hi: int
    blocks: tuple[tuple[int, tuple[int, ...], tuple[int, ...]], ...]
    self_disjoint: bool

    def _arrays(self, mem: np.ndarray, dtype: np.dtype) -> list[np.ndarray]:
        le = dtype.newbyteorder("<")
        return [np.ndarray(shape, le, buffer=mem, offset=off, strides=strides)
                for off, shape, strides in self.blocks]

    def view(self, mem: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """The (rows, cols, c) elements (a view for NHWC, a copy for NHCWB16)."""
        arrays = self._arrays(mem, dtype)
        if len(arrays) == 1 and arrays[0].ndim == 3:
            return arrays[0]
        flat = [a.reshape(a.shape[0], a.shape[1], -1) for a in arrays]
        return flat[0] if len(flat) == 1 else np.concatenate(flat, axis=2)

    def assign(self, mem: np.ndarray, dtype: np.dtype, values: np.ndarray) -> None:
        c0 = 0
        for a in self._arrays(mem, dtype):
            if a.ndim == 3:
                a[...] = values[:, :, c0:c0 + a.shape[2]]
                c0 += a.shape[2]
            else:
                n = a.shape[2] * a.shape[3]
                a[...] = values[:, :, c0:c0 + n].reshape(a.shape)
                c0 += n


def _no_overlap(shape: tuple[int, ...], strides: tuple[int, ...], esize: int) -> bool:
    """A sufficient test that no two elements of a strided block share a byte: taken from
    the smallest stride up, each stride clears everything the smaller ones span. A stride's
    sign only mirrors its axis, so magnitudes decide."""
    strides = tuple(abs(s) for s in strides)
    extent = esize
    for n, s in zip(reversed(shape), reversed(strides)):  # the usual order, innermost last
        if n > 1:
            if s < extent:
                break
            extent = s * (n - 1) + extent
    else:
        return True
    extent = esize
    for n, s in sorted(((n, s) for n, s in zip(shape, strides) if n > 1), key=lambda t: t[1]):
        if s < extent:
            return False
        extent = s * (n - 1) + extent
    return True


def _lowest(offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """The lowest byte address of a strided block (its negative strides step below
    ``offset``)."""
    return offset + sum((n - 1) * s for n, s in zip(shape, strides) if s < 0)


def _highest(offset: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """The address of the highest element of a strided block."""
    return offset + sum((n - 1) * s for n, s in zip(shape, strides) if s > 0)


@functools.lru_cache(maxsize=1 << 14)
def _tile_views(fm: FeatureMap, h: int, w: int, c: int) -> tuple[TileView, ...]:
    esize = fm.dtype.itemsize
    h0, h1, w0 = fm.height0, fm.height1, fm.width0
    rects = [(0, min(h, h0), 0, min(w, w0), 0)]
    if h > h0:
        rects.append((h0, h, 0, min(w, w0), 2))
    if w > w0:
        rects.append((0, min(h, h1), w0, w, 1))
        if h > h1:
            rects.append((h1, h, w0, w, 3))
    xstep = BRICK * esize if fm.nhcwb16 else fm.stride_x
    out = []
    for ys, ye, xs, xe, tile in rects:
        if ye <= ys or xe <= xs:
            continue
        th, tw = ye - ys, xe - xs
        base = fm.bases[tile]
        if fm.nhcwb16:
            full, rem = divmod(c, BRICK)
            blocks = []
            if full:
                blocks.append((base, (th, tw, full, BRICK),
                               (fm.stride_y, xstep, fm.stride_c, esize)))
            if rem:
                blocks.append((base + full * fm.stride_c, (th, tw, rem),
                               (fm.stride_y, xstep, esize)))
            disjoint = _no_overlap((th, tw, (c + BRICK - 1) // BRICK, min(c, BRICK)),
                                   (fm.stride_y, xstep, fm.stride_c, esize), esize)
        else:
            blocks = [(base, (th, tw, c), (fm.stride_y, xstep, esize))]
            disjoint = _no_overlap((th, tw, c), (fm.stride_y, xstep, esize), esize)
        lo = min(_lowest(*b) for b in blocks)
        hi = max(_highest(*b) for b in blocks) + esize
        out.append(TileView(ys, ye, xs, xe, lo, hi, tuple(blocks), disjoint))
    return tuple(out)
