"""TFLite's 16x8 requantization: CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED with int16
activations, int8 weights and an int64 bias (:func:`wide_accumulator`).

TFLite's reference kernels accumulate such an operator in int64 and scale the sum with the
int64 ``MultiplyByQuantizedMultiplier``: the Q31 multiplier reduced to 15 bits (rounded, at
most 0x7FFF) and one rounding shift, ties up, by ``15 - shift``. The Ethos-U computes the same
with Vela's ``reduced_quantise_scale`` in the scale stream and the NATURAL rounding mode (one
rounding, ties up), so the host kernel (``te_ops``) and the stream (``npu_ops.conv_scales``)
take their constants from here.
"""
from __future__ import annotations

import numpy as np

#: TFLite's largest reduced multiplier, taken for every Q31 multiplier from 0x7FFF0000 up
REDUCED_MAX = 0x7FFF


def wide_accumulator(in_dtype: str, bias: np.ndarray | None) -> bool:
    """Whether TFLite's kernel for an operator with ``in_dtype`` activations and ``bias``
    accumulates in int64 with the reduced multiplier: int16 activations with an int64 bias
    (with an int32 bias its 16x8 kernels accumulate in int32 and round as the int8 ones)."""
    return in_dtype == "int16" and bias is not None and np.asarray(bias).dtype == np.int64


def reduced_scales(multiplier: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(15-bit multipliers, right shifts) of TFLite's Q31 ``multiplier`` and ``shift``
    (positive: left) as its int64 ``MultiplyByQuantizedMultiplier`` uses them: ``x * m +
    2**(r - 1) >> r``."""
    m = np.asarray(multiplier, np.int64)
    reduced = np.where(m < REDUCED_MAX << 16, (m + (1 << 15)) >> 16, REDUCED_MAX)
    return reduced.astype(np.int64), (15 - np.asarray(shift, np.int64))


def refusal(shift: np.ndarray) -> str:
    """Why TFLite's 16x8 kernel cannot scale with ``shift`` (an output scale so small that the
    rounding shift vanishes), or ``""``."""
    right = 15 - np.asarray(shift, np.int64)
    if right.size and right.min() < 1:
        return (f"a 16x8 scale of 2**{int(15 - right.min())} or more: TFLite's int64 "
                "requantization needs a right shift of at least 1")
    return ""


def requantize(acc: np.ndarray, multiplier: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """The int32 TFLite's 16x8 kernel makes of the int64 sums ``acc`` (bias included), per
    channel along the last axis, wrapping as its int32 result does: the numpy form of what
    ``te_ops.output_16x8`` and the NPU's NATURAL rounding compute from :func:`reduced_scales`,
    for checking those constants against TFLite's formula."""
    m, r = reduced_scales(multiplier, shift)
    out = (np.asarray(acc, np.int64) * m + (np.int64(1) << (r - 1))) >> r
    return out.astype(np.int32)
