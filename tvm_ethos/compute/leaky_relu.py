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
    """Why the NPU's form of LEAKY_RELU (two requantizations and one elementwise operation)
    is not TFLite Micro's kernel on every code (a clause), or ``""``.

    For ``alpha >= 0`` the form is the larger (``alpha <= 1``) or the smaller (``alpha > 1``)
    of the two branches requantized alone: the real branches cross only at zero, so the
    comparison picks the kernel's branch wherever their roundings keep that order. A negative
    alpha's branch is negated after its rounding (:func:`negated_branches`). Either way the
    check runs the form on every code rather than trust the argument."""
    if alpha < 0:
        got = negated_branches(dtype, in_q, out_q, alpha)
        clause = "the alpha branch saturates before TFLite Micro negates it"
    else:
        identity, scaled = branches(dtype, in_q, out_q, alpha)
        got = np.maximum(identity, scaled) if alpha <= 1 else np.minimum(identity, scaled)
        clause = "the two branches' roundings cross, so neither picks TFLite Micro's result"
    wrong = np.flatnonzero(got != tflm_lut(dtype, in_q, out_q, alpha))
    if wrong.size:
        code = int(wrong[0]) + dtype_range(dtype)[0]
        return f"scales {in_q} -> {out_q} with alpha {alpha:g}: at code {code} {clause}"
    return ""


def negated_zero_point(out_q: tuple) -> int:
    """The zero point a negative alpha's ``|alpha|`` branch is written at: the output's, or
    ``-1 - zp_out`` where that is larger. Saturating at the lowest code ``lo`` then leaves
    ``zp_out - (lo - z)``, at least the highest code, where the kernel's negated branch is
    past the highest code too."""
    return max(int(out_q[1]), -1 - int(out_q[1]))


def negated_branches(dtype: str, in_q: tuple, out_q: tuple, alpha: float) -> np.ndarray:
    """A negative alpha's NPU form on every ``dtype`` code. The kernel's result is
    ``zp_out + identity(v)`` for ``v >= 0`` and ``zp_out - |alpha|(v)`` below, each branch a
    rounding by a positive multiplier, which keeps the sign of ``v``. So the identity branch
    requantized with its clamp below at ``zp_out`` is the kernel's where ``v >= 0`` and
    ``zp_out`` elsewhere; the ``|alpha|`` branch requantized to zero point ``z``
    (:func:`negated_zero_point`) with its clamp above at ``z`` is ``z`` where ``v >= 0``; and
    an elementwise SUB of the two at one scale is the kernel on every code."""
    lo, hi = dtype_range(dtype)
    zp, z = int(out_q[1]), negated_zero_point(out_q)
    ratios = scales(in_q, out_q, alpha)
    v = np.arange(lo, hi + 1, dtype=np.int64) - int(in_q[1])
    identity = np.clip(mbqm_np(v, *ratios.identity_multiplier) + zp, zp, hi)
    scaled = np.clip(mbqm_np(v, *ratios.alpha_multiplier) + z, lo, z)
    return np.clip((identity - zp) - (scaled - z) + zp, lo, hi)
