"""TFLite's 8-bit SOFTMAX (the reference kernel, gemmlowp fixed point) in Python integers.

LiteRT's BUILTIN_REF resolver and TFLite Micro run ``reference_ops::Softmax`` for int8 and
uint8 inputs (int8, uint8 or, from int8, int16 outputs): ``exp`` of the scaled distance to the
row maximum in Q0.31, a Q12.19 sum, a reciprocal by Newton-Raphson in Q2.29 and a rounding
shift to the output. (The optimized kernel of the other resolvers tabulates ``expf`` in float32
instead and differs by 1 LSB on rare ties, so only this arithmetic is exact against the
project's oracle.) The exponential depends only on the distance ``x - max`` (256 values for
8-bit inputs), so it is a table computed here at compile time; the rest runs per row and per
element in the kernels that use it: the host TE kernel (``te_ops.lower_softmax``) and the
Ethos-U stream (``npu_softmax``). :func:`softmax_8bit` is the whole kernel in numpy, the
statement both are checked against. Plain numpy, no TVM: the planner-free layers import it too.

The arithmetic is gemmlowp's (``fixedpoint.h``): a rounding doubling high multiply that
rounds half up and saturates, a rounding divide by a power of two that rounds half away from
zero, and the exp of negative values as a polynomial on [-1/4, 0) times a barrel of constant
factors ``exp(-2**k)``.
"""

from __future__ import annotations

import math

import numpy as np

from tvm_ethos.compute.quant import INT32_MAX, INT32_MIN, quantize_multiplier

#: integer bits of the scaled input difference (``kScaledDiffIntegerBits``)
DIFF_INTEGER_BITS = 5
#: integer bits of the sum of exponentials (``kAccumulationIntegerBits``)
SUM_INTEGER_BITS = 12
#: Q0.31 constants of gemmlowp: exp(-1/8), 1/3, 48/17, -32/17 (the last two in Q2.29)
EXP_MINUS_EIGHTH = 1895147668
ONE_THIRD = 715827883
C48_OVER_17 = 1515870810
CNEG32_OVER_17 = -1010580540
#: exp(-2**k) in Q0.31 for k = -2..4: the barrel of factors for the whole part of the input
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def srdhm(a: int, b: int) -> int:
    """Saturating rounding doubling high multiply: round(a * b / 2**31), ties up."""
    if a == b == INT32_MIN:
        return INT32_MAX
    return (a * b + (1 << 30)) >> 31


def rdbpot(x: int, exponent: int) -> int:
    """Rounding divide by 2**exponent, ties away from zero."""
    if exponent == 0:
        return x
    q, r = divmod(x, 1 << exponent)
    half = 1 << (exponent - 1)
    return q + (r > half or (r == half and x >= 0))


def wrap32(x: int) -> int:
    """int32 two's-complement wrap-around (gemmlowp's plain add, sub and negate)."""
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def srmpot(x: int, exponent: int) -> int:
    """Saturating rounding multiply by 2**exponent (a negative one divides, rounding as
    :func:`rdbpot`)."""
    if exponent <= 0:
        return rdbpot(x, -exponent)
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return INT32_MAX
    if x < -threshold:
        return INT32_MIN
    return x << exponent


def mbqm(x: int, multiplier: int, shift: int) -> int:
    """TFLite's ``MultiplyByQuantizedMultiplier`` with double rounding: a left shift, the
    doubling high multiply, then a rounding right shift."""
    left, right = max(shift, 0), max(-shift, 0)
    return rdbpot(srdhm(wrap32(x * (1 << left)), multiplier), right)


def _sat(x: int) -> int:
    return max(INT32_MIN, min(INT32_MAX, x))


def _exp_on_quarter_interval(a: int) -> int:
    """exp(a) for a Q0.31 ``a`` in [-1/4, 0): exp(-1/8) times the 4th-order Taylor
    polynomial of exp around -1/8."""
    x = a + (1 << 28)  # a + 1/8
    x2 = srdhm(x, x)
    x3 = srdhm(x2, x)
    x4_over_4 = rdbpot(srdhm(x2, x2), 2)
    poly = rdbpot(srdhm(_sat(x4_over_4 + x3), ONE_THIRD) + x2, 1)
    return _sat(EXP_MINUS_EIGHTH + srdhm(EXP_MINUS_EIGHTH, _sat(x + poly)))


def exp_on_negative_values(a: int, integer_bits: int = DIFF_INTEGER_BITS) -> int:
    """exp of a non-positive fixed-point value with ``integer_bits``, in Q0.31."""
    if a == 0:
        return INT32_MAX
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a_mod = (a & (quarter - 1)) - quarter  # the part in [-1/4, 0)
    result = _exp_on_quarter_interval(a_mod << integer_bits)  # to Q0.31, exact
    rest = a_mod - a  # the non-negative multiple of 1/4 still to apply
    for k, factor in _EXP_BARREL:
        if integer_bits > k and rest & (1 << (frac + k)):
            result = srdhm(result, factor)
    if integer_bits > 5 and a < -(1 << (frac + 5)):
        result = 0
    return result


def input_scaling(in_scale: float, beta: float) -> tuple[int, int, int]:
    """(multiplier, left shift, diff_min) of TFLite's ``PreprocessSoftmaxScaling`` and
    ``CalculateInputRadius``: ``beta * in_scale`` in Q5.26 as a multiplier > 1; differences
    below ``diff_min`` give exp 0.

    Both factors are float32 first, as TFLite holds them (``TfLiteSoftmaxParams::beta`` and the
    tensor's scale are ``float``; only their product is taken in double): a beta such as 0.03,
    which float32 cannot hold, otherwise moves the multiplier by a few units and flips a
    rounding of the output now and then."""
    real = min(float(np.float32(beta)) * float(np.float32(in_scale))
               * (1 << (31 - DIFF_INTEGER_BITS)),
               float((1 << 31) - 1))
    mult, shift = quantize_multiplier(real)
    radius = math.floor(((1 << DIFF_INTEGER_BITS) - 1) * (1 << (31 - DIFF_INTEGER_BITS))
                        / (1 << shift))
    return int(mult), int(shift), -radius


def exp_table(in_scale: float, beta: float) -> np.ndarray:
    """The int32 Q0.31 exponential of every distance ``d = x - max`` in [-255, 0], entry
    ``d + 255``: what the NPU's LUT returns for the subtraction ``x - max``."""
    mult, shift, diff_min = input_scaling(in_scale, beta)
    out = np.zeros(256, np.int64)
    for d in range(-255, 1):
        if d >= diff_min:
            out[d + 255] = exp_on_negative_values(srdhm(d * (1 << shift), mult))
    return out.astype(np.int32)


def reciprocal(total: int) -> tuple[int, int]:
    """(Q2.29 reciprocal of the half sum, right shift of the output) for a Q12.19 sum of
    exponentials,
    as TFLite's ``GetReciprocal`` and the output shift ``num_bits_over_unit + 23``.

    ``half = total << (clz - 1)`` is gemmlowp's ``RoundingHalfSum(shifted_sum - 1, 1)`` exactly
    (the sum with its top bit at bit 30), the Newton-Raphson of
    ``one_over_one_plus_x_for_x_in_0_1`` runs in Q2.29, and its result doubled (Q1 to Q0,
    :func:`output_scale`) is left to the caller."""
    clz = 32 - total.bit_length()
    half = total << (clz - 1)
    x = _sat(C48_OVER_17 + srdhm(half, CNEG32_OVER_17))
    for _ in range(3):
        one_minus = _sat((1 << 29) - srdhm(half, x))
        x = _sat(x + _sat(4 * srdhm(x, one_minus)))
    return x, 35 - clz


def output_scale(x_recip: int) -> int:
    """The Q0.31 reciprocal ``one_over_one_plus_x_for_x_in_0_1`` returns for the Q2.29
    Newton-Raphson result: twice it, saturated (``Rescale<0>`` of a Q1.30 view of the same
    raw value). It saturates only where the sum is a power of two (``x_recip == 2**30``)."""
    return min(2 * x_recip, INT32_MAX)


#: output codes of the 8-bit kernel: (lowest, highest) code, the zero point being the lowest
OUTPUT_RANGES = {"int8": (-128, 127), "uint8": (0, 255), "int16": (-32768, 32767)}


def output_shift_drop(dtype: str) -> int:
    """How much less the output's rounding shift is than the 8-bit one: TFLite shifts by
    ``num_bits_over_unit + 31 - bits(output)``, so an int16 output (int8 input, the one wider
    output TFLite's 8-bit kernel writes) keeps 8 more bits."""
    return 8 * (np.dtype(dtype).itemsize - 1)


def softmax_8bit(x: np.ndarray, in_scale: float, beta: float, dtype: str = "int8") -> np.ndarray:
    """TFLite's reference SOFTMAX of 8-bit inputs over the last axis, step by step: to int8 or
    uint8 (output scale 1/256) or, from int8, to int16 (scale 1/65536), the zero point the
    lowest code of ``dtype``."""
    lo, hi = OUTPUT_RANGES[dtype]
    table = exp_table(in_scale, beta).astype(np.int64)
    rows = np.asarray(x, np.int64).reshape(-1, np.asarray(x).shape[-1])
    out = np.empty(rows.shape, np.int64)
    for i, row in enumerate(rows):
        e = table[row - row.max() + 255]
        total = sum(rdbpot(int(v), SUM_INTEGER_BITS) for v in e)
        x_recip, shift = reciprocal(total)
        scale = output_scale(x_recip)
        shift -= output_shift_drop(dtype)
        out[i] = [rdbpot(srdhm(scale, int(v)), shift) + lo for v in e]
    return np.clip(out, lo, hi).reshape(np.asarray(x).shape).astype(dtype)
