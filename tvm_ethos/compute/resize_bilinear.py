"""RESIZE_BILINEAR's two integer kernels, by the tensors' type.

LiteRT's reference resolver (TFLite Micro has int8 only) runs:

* int8 and int16: ``reference_ops::ResizeBilinearInteger``, the four neighbouring codes
  weighted by 10-bit fixed-point fractions in int64 and rounded half away from zero at
  ``2**20`` (``te_ops.lower_resize_bilinear``);
* uint8: ``reference_ops::ResizeBilinear<uint8_t>``, the same interpolation in float32 (the
  scale ``in / out`` divided in float32, each weight ``1 - (pos - lo)`` or ``pos - lo``
  formed per tap, the four products summed in order, ``0.5f`` added and the sum truncated).

Neither kernel reads the quantization: both interpolate the codes themselves, so the output
is exact only where it is quantized as the input.

The Ethos-U's form (``backends.ethos_u.ops_resize``) averages boxes of the input enlarged by
the factor (2, 4 or 8), rounding half away from zero; both kernels compute that exactly for
those factors: the integer one's fractions are multiples of ``2**10 / factor``, and the float
one's weights are multiples of 1/8 (1/4 for half-pixel centres), so every product and partial
sum of codes below 2**8 is exact in float32 and its ``+ 0.5f``, truncated, rounds the
non-negative sum half up. Plain numpy, no TVM.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

#: the tensor types and the kernel LiteRT's reference resolver runs for each
INTEGER_DTYPES = frozenset({"int8", "int16"})
FLOAT_DTYPES = frozenset({"uint8"})


class AxisTaps(NamedTuple):
    """The float kernel along one axis, per output index: the two input indices it reads
    and their float32 weights (``1 - (pos - lo)`` and ``pos - lo``, as the kernel forms them)."""

    lo: np.ndarray
    hi: np.ndarray
    w_lo: np.ndarray
    w_hi: np.ndarray


def float_kernel(dtype: str) -> bool:
    """Whether LiteRT interpolates ``dtype`` codes in float32 (else in fixed point); a type
    neither kernel takes is refused by name."""
    if dtype in FLOAT_DTYPES:
        return True
    if dtype in INTEGER_DTYPES:
        return False
    raise ValueError(f"RESIZE_BILINEAR of {dtype} codes; TFLite's integer kernels take int8, "
                     "int16 (fixed point) and uint8 (float32)")


def float_taps(in_size: int, out_size: int, align_corners: bool,
               half_pixel: bool) -> AxisTaps:
    """``ComputeInterpolationValues`` of the float kernel for every output index of one axis,
    in float32 as the kernel computes it."""
    if align_corners and out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    o = np.arange(out_size, dtype=np.float32)
    if half_pixel:
        pos = (o + np.float32(0.5)) * scale - np.float32(0.5)
    else:
        pos = o * scale
    lo = np.maximum(np.floor(pos).astype(np.int32), 0)
    hi = np.minimum(np.ceil(pos).astype(np.int32), in_size - 1)
    frac = (pos - lo.astype(np.float32)).astype(np.float32)
    return AxisTaps(lo, hi, (np.float32(1) - frac).astype(np.float32), frac)


def litert_float(x: np.ndarray, out_hw: tuple[int, int], align_corners: bool,
                 half_pixel: bool) -> np.ndarray:
    """``reference_ops::ResizeBilinear`` of the NHWC codes ``x`` (uint8), to the bit: each
    product and sum in float32 in the kernel's order."""
    _, ih, iw, _ = x.shape
    ty = float_taps(ih, out_hw[0], align_corners, half_pixel)
    tx = float_taps(iw, out_hw[1], align_corners, half_pixel)
    v = x.astype(np.float32)

    def tap(rows, cols, wy, wx):
        return (v[:, rows][:, :, cols] * wy[None, :, None, None]) * wx[None, None, :, None]

    acc = tap(ty.lo, tx.lo, ty.w_lo, tx.w_lo)
    acc = acc + tap(ty.hi, tx.lo, ty.w_hi, tx.w_lo)
    acc = acc + tap(ty.lo, tx.hi, ty.w_lo, tx.w_hi)
    acc = acc + tap(ty.hi, tx.hi, ty.w_hi, tx.w_hi)
    acc = acc + np.float32(0.5)
    return np.trunc(acc).astype(x.dtype)
