"""LEAKY_RELU as TFLite Micro's prepare and kernel compute it, for int8 and int16 codes.

``QuantizeLeakyRelu`` maps ``v = code - zp_in`` to ``zp_out + MultiplyByQuantizedMultiplier(v,
M)`` with the identity multiplier ``s_in / s_out`` where ``v >= 0`` and the alpha one
``s_in * alpha / s_out`` elsewhere. The pinned TFLite Micro wheel forms both ratios in double
from the float32 scales and alpha (LiteRT's prepare does it in float32,
``quant.leaky_relu_lut``), and applies a negative alpha by its magnitude and negates the result
(``quant.leaky_relu_alpha_np``); rfcs/0010 "LEAKY_RELU's table" says where those differ. The
int16 kernel is the same template, so one function serves both types. Plain numpy, no TVM.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tvm_ethos.compute.quant import (
    dtype_range,
    f32,
    leaky_relu_alpha_np,
    mbqm_np,
    quantize_multiplier,
)


class LeakyReluScales(NamedTuple):
    """TFLite Micro's two ratios (double, from the float32 scales and alpha)."""

    identity: float
    alpha: float

    @property
    def identity_multiplier(self) -> tuple[int, int]:
        """(Q31 multiplier, left shift) of the ``v >= 0`` branch."""
        return quantize_multiplier(self.identity)

    @property
    def alpha_multiplier(self) -> tuple[int, int]:
        """(Q31 multiplier, left shift) of ``|alpha ratio|``, the ``v < 0`` branch's."""
        return quantize_multiplier(abs(self.alpha))


def scales(in_q: tuple, out_q: tuple, alpha: float) -> LeakyReluScales:
    """The ratios TFLite Micro's prepare computes, each in double."""
    s_in, s_out = f32(in_q[0]), f32(out_q[0])
    return LeakyReluScales(s_in / s_out, s_in * f32(alpha) / s_out)


def tflm_lut(dtype: str, in_q: tuple, out_q: tuple, alpha: float) -> np.ndarray:
    """LEAKY_RELU on every ``dtype`` code (entry ``code - min(dtype)``), to the bit TFLite
    Micro's int8 / int16 kernel."""
    lo, hi = dtype_range(dtype)
    ratios = scales(in_q, out_q, alpha)
    mi, si = ratios.identity_multiplier
    v = np.arange(lo, hi + 1, dtype=np.int64) - int(in_q[1])
    negative = leaky_relu_alpha_np(v, ratios.alpha)
    out = np.where(v >= 0, mbqm_np(v, mi, si), negative) + int(out_q[1])
    return np.clip(out, lo, hi).astype(dtype)


def branches(dtype: str, in_q: tuple, out_q: tuple, alpha: float) -> tuple[np.ndarray, ...]:
    """(identity, alpha) branches on every ``dtype`` code, each requantized alone into the
    output's codes: what two NPU requantizations of the whole input write."""
    lo, hi = dtype_range(dtype)
    ratios = scales(in_q, out_q, alpha)
    v = np.arange(lo, hi + 1, dtype=np.int64) - int(in_q[1])
    return tuple(np.clip(mbqm_np(v, *m) + int(out_q[1]), lo, hi)
                 for m in (ratios.identity_multiplier, ratios.alpha_multiplier))


def two_branch_refusal(dtype: str, in_q: tuple, out_q: tuple, alpha: float) -> str:
    """Why LEAKY_RELU is not, on every code, the larger (``0 <= alpha <= 1``) or the smaller
    (``alpha > 1``) of its two branches requantized alone (a clause), or ``""``. The real
    branches cross only at zero, so the comparison picks the kernel's branch wherever their
    roundings keep that order; the check runs the kernel on every code rather than trust it.
    A negative alpha's branch is negated after its rounding, which no requantization
    writes."""
    if alpha < 0:
        return (f"alpha {alpha:g}; the NPU's form (the larger or smaller of two "
                "requantizations) needs alpha >= 0")
    identity, scaled = branches(dtype, in_q, out_q, alpha)
    picked = np.maximum(identity, scaled) if alpha <= 1 else np.minimum(identity, scaled)
    wrong = np.flatnonzero(picked != tflm_lut(dtype, in_q, out_q, alpha))
    if wrong.size:
        code = int(wrong[0]) + dtype_range(dtype)[0]
        return (f"scales {in_q} -> {out_q} with alpha {alpha:g}: at code {code} the two "
                "branches' roundings cross, so neither picks TFLite Micro's result")
    return ""
