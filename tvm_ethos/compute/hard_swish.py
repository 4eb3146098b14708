"""TFLite's quantized HARD_SWISH as a table of one output code per input code.

TFLite's reference kernel (``reference_ops::HardSwish``, which TFLite Micro runs for int8 and
uint8) computes ``x * relu6(x + 3) / 6`` in int16 fixed point from multipliers its prepare
derives from the float32 scales. The result depends on one input code only, so the whole
operator is a 256-entry table computed here at compile time: the llvm host gathers from it
(``te_ops.lower_lut``) and the Ethos-U applies it as its LUT activation (``ops_lut``). Plain
numpy, no TVM.
"""
from __future__ import annotations

import numpy as np

from tvm_ethos.compute.quant import INT32_MAX, dtype_range, quantize_multiplier

#: the types TFLite's quantized kernel takes (input and output of one type)
TYPES = ("int8", "uint8")


def _sat16(v):
    return np.clip(v, -32768, 32767)


def _srdhm16(a, b: int):
    """gemmlowp's int16 SaturatingRoundingDoublingHighMul (``b`` is never -32768 here)."""
    ab = a.astype(np.int64) * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    return _sat16(np.trunc((ab + nudge) / (1 << 15)).astype(np.int64))


def _sdhm16(a, b):
    """TFLite's int16 SaturatingDoublingHighMul: the product's high half, truncated."""
    ab = a.astype(np.int64) * b.astype(np.int64)
    high = np.trunc(ab / (1 << 15)).astype(np.int64)
    return np.where((a == b) & (a == -32768), 32767, _sat16(high))


def _rdbpot16(x, exponent: int):
    if exponent == 0:
        return x
    mask = (1 << exponent) - 1
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + ((x & mask) > threshold)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier then DownScaleInt32ToInt16Multiplier."""
    m, shift = quantize_multiplier(real)
    if m >= INT32_MAX - (1 << 15):
        return 32767, shift
    return (m + (1 << 15)) >> 16, shift


def _multipliers(in_q: tuple, out_q: tuple) -> tuple[tuple[int, int], tuple[int, int]]:
    """The (int16 multiplier, exponent) of the output and of the "reluish" term, from the
    float32 scales as TFLite's prepare computes them."""
    hires = np.float32(np.float32(1 / 128) * np.float32(in_q[0]))
    out = _int16_multiplier(float(np.float32(hires / np.float32(out_q[0]))))
    relu = _int16_multiplier(float(np.float32(hires / np.float32(3 / 32768))))
    return out, relu


def refusal(dtype: str, in_q: tuple, out_q: tuple) -> str:
    """Why TFLite's kernel does not run HARD_SWISH of these types and scales (a clause to put
    after the operator's name), or ``""``."""
    if dtype not in TYPES:
        return f"{dtype} tensors; TFLite's quantized kernel takes {' or '.join(TYPES)}"
    (_, out_e), _ = _multipliers(in_q, out_q)
    if out_e > 0:
        return (f"input scale {in_q[0]:g} over 128 times the output scale {out_q[0]:g}; "
                "TFLite's kernel requires at most that ratio")
    return ""


def hard_swish_lut(dtype: str, in_q: tuple, out_q: tuple) -> np.ndarray:
    """HARD_SWISH on every code of ``dtype`` (entry ``code - lowest code``), TFLite's reference
    kernel step by step; ValueError (:func:`refusal`'s reason) where that kernel refuses."""
    why = refusal(dtype, in_q, out_q)
    if why:
        raise ValueError(why)
    (out_m, out_e), (relu_m, relu_e) = _multipliers(in_q, out_q)
    lo, hi = dtype_range(dtype)
    x = (np.arange(lo, hi + 1, dtype=np.int64) - int(in_q[1])) * (1 << 7)
    preshift = _srdhm16(x, out_m)
    reluish = x
    if relu_e > 0:
        reluish = _sat16(reluish * (1 << (relu_e - 1)))
    reluish = _srdhm16(reluish, relu_m)
    if relu_e > 0:
        reluish = _sat16(reluish * 2)
    if relu_e < 0:
        reluish = _rdbpot16(reluish, -relu_e)
    reluish = (reluish + (1 << 15)) >> 1
    out = _rdbpot16(_sdhm16(reluish, preshift), -out_e) + int(out_q[1])
    return np.clip(out, lo, hi).astype(dtype)
