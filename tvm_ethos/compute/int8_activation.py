"""TFLite Micro's int8 TANH and LOGISTIC (``reference_integer_ops::Tanh`` / ``Logistic``) as a
table of one output code per input code.

TFLite Micro does not tabulate these operators in float as LiteRT's kernels do
(``quant.tanh_lut`` / ``quant.logistic_lut``): its prepare scales the input to gemmlowp's Q4.27
with a multiplier and shift taken from ``in_scale * 2**27`` (``frexp``), sends codes at or past
a radius straight to -128 / 127, and computes the rest with gemmlowp's fixed-point ``tanh`` /
``logistic`` (an exp of negative values and a Newton-Raphson reciprocal in Q2.29), rounding
the Q0.31 result to the output. Where a code lies near a rounding boundary of the output the
two disagree (input scale 1/256: TANH of one input step is 0.49999 of an output step). The
kernels read no output scale: they write TANH as (1/128, 0) and LOGISTIC as (1/256, -128), the
output quantizations TFLite requires. A large input scale (at least 8: radius 0) sends every
code, the zero point too, to -128 or 127.

Only the input code enters, so 256 entries are exact for every input; the Ethos-U LUT and the
TIR emulator of an NPU subgraph use this table (rfcs/0007, the LUT section). Plain Python
integers, no TVM.
"""
from __future__ import annotations

import math

import numpy as np

from ethos_arch.ops import Op
from tvm_ethos.compute.fixed_point import (
    C48_OVER_17,
    CNEG32_OVER_17,
    exp_on_negative_values,
    mbqm,
    rdbpot,
    srdhm,
    srmpot,
    wrap32,
)
from tvm_ethos.compute.quant import INT32_MAX, logistic_lut, tanh_lut

#: the operator kinds this module computes
KINDS = (Op.SIGMOID, Op.TANH)
#: integer bits of the scaled input (``kInputIntegerBits``)
INPUT_INTEGER_BITS = 4
#: the output quantization TFLite Micro's kernel writes (it reads none)
OUTPUT_Q = {Op.TANH: (1 / 128, 0), Op.SIGMOID: (1 / 256, -128)}
_ONE_Q2 = 1 << 29       # 1.0 in Q2.29
_ONE_Q0 = INT32_MAX     # gemmlowp's One() of a Q0.31 (saturated)


def input_scaling(in_scale: float) -> tuple[int, int, int]:
    """(multiplier, left shift, radius) of TFLite Micro's prepare: ``in_scale`` (a float32,
    widened to double) times 2**27 split by ``frexp`` into a Q31 multiplier and a shift, and
    the radius (``CalculateInputRadius``) beyond which an input saturates."""
    mant, shift = math.frexp(float(np.float32(in_scale)) * (1 << (31 - INPUT_INTEGER_BITS)))
    multiplier = wrap32(int(math.floor(abs(mant) * (1 << 31) + 0.5)) * (1 if mant >= 0 else -1))
    max_rescaled = ((1 << INPUT_INTEGER_BITS) - 1) * (1 << (31 - INPUT_INTEGER_BITS))
    radius = int(math.floor(max_rescaled / 2.0 ** shift))
    return multiplier, shift, radius


def _half_denominator(a: int) -> int:
    """gemmlowp ``RoundingHalfSum(a, One())`` of a Q0.31 ``a``: (a + 1) / 2 rounded away."""
    s = a + _ONE_Q0
    return (s + 1) // 2 if s >= 0 else -((1 - s) // 2)


def _reciprocal_q2(half_denominator: int) -> int:
    """1 / half_denominator in Q2.29 by gemmlowp's three Newton-Raphson steps."""
    x = wrap32(C48_OVER_17 + srdhm(half_denominator, CNEG32_OVER_17))
    for _ in range(3):
        one_minus = wrap32(_ONE_Q2 - srdhm(half_denominator, x))
        x = wrap32(x + srmpot(srdhm(x, one_minus), 2))
    return x


def _tanh_q0(a: int) -> int:
    """gemmlowp ``tanh`` of a Q4.27 ``a``, in Q0.31."""
    if a == 0:
        return 0
    n = a if a < 0 else wrap32(-a)
    e = exp_on_negative_values(n, INPUT_INTEGER_BITS + 1)   # exp(2n): the raw read as Q5.26
    t = srmpot(wrap32(_reciprocal_q2(_half_denominator(e)) - _ONE_Q2), 2)
    return wrap32(-t) if a < 0 else t


def _logistic_q0(a: int) -> int:
    """gemmlowp ``logistic`` of a Q4.27 ``a``, in Q0.31."""
    if a == 0:
        return 1 << 30
    positive = a > 0
    e = exp_on_negative_values(wrap32(-a) if positive else a, INPUT_INTEGER_BITS)
    x = _reciprocal_q2(_half_denominator(e))                 # read as Q1.30: x / 2
    r = srmpot(x, 1)
    return r if positive else wrap32(_ONE_Q0 - r)


def _code(kind: Op, value_q0: int) -> int:
    if kind == Op.TANH:
        return max(-128, min(127, rdbpot(value_q0, 31 - 7)))
    return max(-128, min(127, rdbpot(value_q0, 31 - 8) - 128))


def tflm_lut(kind: Op, in_q: tuple) -> np.ndarray:
    """TFLite Micro's int8 ``kind`` (TANH or LOGISTIC) on every input code, entry
    ``code + 128``, for an input quantized as ``in_q`` (scale, zero point)."""
    if kind not in KINDS:
        raise ValueError(f"{kind}: TFLite Micro's int8 fixed-point kernels are "
                         f"{', '.join(k.tflite_name for k in KINDS)}")
    multiplier, shift, radius = input_scaling(in_q[0])
    fn = _tanh_q0 if kind == Op.TANH else _logistic_q0
    out = np.empty(256, dtype=np.int8)
    for code in range(-128, 128):
        x = code - int(in_q[1])
        if x <= -radius:
            out[code + 128] = -128
        elif x >= radius:
            out[code + 128] = 127
        else:
            out[code + 128] = _code(kind, fn(mbqm(x, multiplier, shift)))
    return out


def npu_lut(kind: Op, in_q: tuple, out_q: tuple) -> np.ndarray:
    """The int8 table an Ethos-U subgraph applies for ``kind`` (entry ``code + 128``): TFLite
    Micro's fixed point (:func:`tflm_lut`), the runtime beside the NPU, where the output is
    quantized as TFLite requires (:data:`OUTPUT_Q`). TFLite Micro refuses any other LOGISTIC
    output and writes any other TANH output as if it were (1/128, 0), which is no table of the
    model's quantization; there the NPU keeps LiteRT's float table, the model's meaning."""
    want = OUTPUT_Q[kind]
    if np.float32(out_q[0]) == np.float32(want[0]) and int(out_q[1]) == want[1]:
        return tflm_lut(kind, in_q)
    lut = tanh_lut if kind == Op.TANH else logistic_lut
    return lut("int8", in_q, out_q)
