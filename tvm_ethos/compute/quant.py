"""Quantization arithmetic computed at compile time, the way TFLite computes it.

TFLite turns every real-valued rescale factor into a Q31 fixed-point multiplier and a
power-of-two shift (``QuantizeMultiplier``), in double precision from the float32 scales
stored in the model. These helpers do exactly that, so the integer kernels in ``te_ops``
produce the same numbers as TFLite's reference kernels.
"""
from __future__ import annotations

import math

import numpy as np

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def tflite_round(x: float) -> int:
    """std::round: half away from zero."""
    return int(math.floor(abs(x) + 0.5)) * (1 if x >= 0 else -1)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """(Q31 multiplier, shift) with real ~= multiplier * 2**(shift - 31); shift > 0 is a left
    shift."""
    if real == 0.0:
        return 0, 0
    mant, shift = math.frexp(real)
    q = tflite_round(mant * (1 << 31))
    if q == (1 << 31):
        q //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    if shift > 30:  # TFLite saturates very large multipliers
        return INT32_MAX, 30
    return int(q), int(shift)


def quantize_multipliers(reals) -> tuple[np.ndarray, np.ndarray]:
    pairs = [quantize_multiplier(float(r)) for r in np.asarray(reals, dtype=np.float64).ravel()]
    return (np.array([p[0] for p in pairs], dtype=np.int32),
            np.array([p[1] for p in pairs], dtype=np.int32))


def f32(x) -> float:
    """A scale as TFLite stores it: float32, then widened to double."""
    return float(np.float32(x))


def quantize_value(real: float, scale: float, zero_point: int) -> int:
    """TFLite's quantization of a float constant (activation bounds): zp + round(real / scale)."""
    return int(zero_point + tflite_round(float(np.float32(real) / np.float32(scale))))


def dtype_range(dtype: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


# ------------------------------------------------------- numpy reference of the fixed point
def srdhm_np(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """SaturatingRoundingDoublingHighMul on int64 numpy arrays (for tests and constant folding)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 30, 1 - (1 << 30))
    num = ab + nudge
    res = np.where(num >= 0, num // (1 << 31), -((-num) // (1 << 31)))
    overflow = (a == INT32_MIN) & (b == INT32_MIN)
    return np.where(overflow, INT32_MAX, res)


def rdbpot_np(x: np.ndarray, exponent) -> np.ndarray:
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def mbqm_np(x, multiplier, shift) -> np.ndarray:
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    return rdbpot_np(
        srdhm_np(np.asarray(x, dtype=np.int64) * (np.int64(1) << left), multiplier), right
    )


# ------------------------------------------------------- lookup tables built at compile time
# TFLite computes LOGISTIC / TANH (int8, uint8) in float32 at prepare time, with the C
# library's expf / tanhf. numpy's own float32 exp may differ from glibc's by one ulp, which
# can move a table entry across a rounding boundary; so the tables are computed with the very
# functions TFLite calls, through ctypes.
def _libm_fn(name: str):
    import ctypes
    import ctypes.util

    lib = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    fn = getattr(lib, name)
    fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
    return fn


_LIBM: dict = {}


def libm_f32(name: str, x) -> np.float32:
    """``name`` (``expf`` / ``tanhf``) of the C library on one float32 value."""
    if name not in _LIBM:
        _LIBM[name] = _libm_fn(name)
    return np.float32(_LIBM[name](float(np.float32(x))))


def round_half_away_f32(v) -> np.float32:
    """std::round on a float32 (half away from zero); np.round rounds half to even, and
    ``floor(|v| + 0.5f)`` rounds 0.49999997f up (the sum rounds to 1.0f)."""
    a = np.abs(np.float32(v))
    fl = np.floor(a)
    r = fl + np.float32(1) if a - fl >= np.float32(0.5) else fl  # a - fl is exact
    return np.float32(np.copysign(r, v))


def _float_lut(dtype: str, in_q: tuple, out_q: tuple, transform) -> np.ndarray:
    """TFLite's 8-bit ``PopulateLookupTable`` / ``LUTPopulate``: for every input code ``v``,
    ``clamp(int(round(transform(s_in * (v - zp_in)) * (1 / s_out)) + zp_out))``, all in float32.
    Entry ``v - min(dtype)``. A transform past float32's range (EXP of a large input) is
    infinite and saturates at the type's largest code, as LiteRT's kernel does."""
    lo, hi = dtype_range(dtype)
    s_in, z_in = np.float32(in_q[0]), int(in_q[1])
    inv = np.float32(1) / np.float32(out_q[0])
    z_out = np.float32(int(out_q[1]))
    out = np.empty(hi - lo + 1, dtype=np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        for v in range(lo, hi + 1):
            t = np.float32(transform(np.float32(s_in * np.float32(v - z_in))))
            q = np.float32(round_half_away_f32(np.float32(t * inv)) + z_out)
            out[v - lo] = int(min(np.float32(hi), max(np.float32(lo), q)))
    return out.astype(dtype)


def logistic_lut(dtype: str, in_q: tuple, out_q: tuple) -> np.ndarray:
    """LOGISTIC: ``1.0f / (1.0f + expf(-x))`` tabulated (TFLite's SigmoidPrepare)."""
    one = np.float32(1)
    return _float_lut(dtype, in_q, out_q, lambda x: one / np.float32(one + libm_f32("expf", -x)))


def tanh_lut(dtype: str, in_q: tuple, out_q: tuple) -> np.ndarray:
    """TANH: ``tanhf(x)`` tabulated (TFLite's TanhPrepare)."""
    return _float_lut(dtype, in_q, out_q, lambda x: libm_f32("tanhf", x))


def elu_lut(dtype: str, in_q: tuple, out_q: tuple) -> np.ndarray:
    """ELU: ``x < 0 ? expf(x) - 1.0f : x`` tabulated (TFLite's EluPrepare)."""
    one = np.float32(1)
    return _float_lut(dtype, in_q, out_q,
                      lambda x: np.float32(libm_f32("expf", x) - one) if x < 0 else x)


def exp_lut(dtype: str, in_q: tuple, out_q: tuple) -> np.ndarray:
    """EXP: ``expf(x)`` tabulated (TFLite's EXP prepare; TFLite Micro's EXP is float only, so
    LiteRT's reference kernel defines the int8 result)."""
    return _float_lut(dtype, in_q, out_q, lambda x: libm_f32("expf", x))


def log_lut(dtype: str, in_q: tuple, out_q: tuple) -> np.ndarray:
    """LOG: ``logf(x)`` tabulated (TFLite's LOG prepare; TFLite Micro's LOG is float only, so
    LiteRT's reference kernel defines the int8 result). A code at or below the input zero point
    (no logarithm) is the lowest code, as LiteRT's table has it."""
    return _float_lut(dtype, in_q, out_q,
                      lambda x: libm_f32("logf", x) if x > 0 else np.float32(-np.inf))


def neg_lut(dtype: str) -> np.ndarray:
    """NEG on every code: TFLite's quantized kernel negates the codes and reads neither
    quantization, the lowest code wrapping to itself (two's complement)."""
    lo, hi = dtype_range(dtype)
    return (-np.arange(lo, hi + 1, dtype=np.int64)).astype(dtype)


#: TFLite's ``kSqrt2dPi``: sqrt(2 / pi) as a float32 constant (its tanh GELU)
_SQRT_2_OVER_PI = np.float32(math.sqrt(2.0 / math.pi))
_HALF, _GELU_CUBIC = np.float32(0.5), np.float32(0.044715)


def gelu_transform(x, approximate: bool = False) -> np.float32:
    """TFLite's ``GeluTransform`` on one float32 value: ``0.5f * x * (1 + erf(x * M_SQRT1_2))``
    with ``M_SQRT1_2`` a double, so erf and the product are double and only the result float32;
    ``approximate``: ``GeluTransformApproximate``, float32 throughout with the C library's
    ``tanhf``."""
    x = np.float32(x)
    if not approximate:
        return np.float32(float(_HALF * x) * (1.0 + math.erf(float(x) * math.sqrt(0.5))))
    inner = np.float32(_SQRT_2_OVER_PI * np.float32(x + np.float32(_GELU_CUBIC * x * x * x)))
    return np.float32(_HALF * x * np.float32(np.float32(1) + libm_f32("tanhf", inner)))


def gelu_lut(dtype: str, in_q: tuple, out_q: tuple, approximate: bool = False) -> np.ndarray:
    """GELU tabulated (TFLite's GeluPrepare; TFLite Micro has no GELU kernel, so LiteRT's
    reference kernel defines the int8 result)."""
    return _float_lut(dtype, in_q, out_q, lambda x: gelu_transform(x, approximate))


def leaky_relu_lut(dtype: str, in_q: tuple, out_q: tuple, alpha: float) -> np.ndarray:
    """LEAKY_RELU (``QuantizeLeakyRelu``) for every input code: the identity or the alpha
    multiplier, each a Q31 multiplier of a float32 ratio (``LeakyReluPrepare`` multiplies and
    divides the float32 scales and alpha in float32), applied to ``v - zp_in`` with
    MultiplyByQuantizedMultiplier (the alpha one by :func:`leaky_relu_alpha_np`). A table is
    exact: the operator is a function of one code."""
    lo, hi = dtype_range(dtype)
    s_in, s_out = np.float32(in_q[0]), np.float32(out_q[0])
    mi, si = quantize_multiplier(float(np.float32(s_in / s_out)))
    v = np.arange(lo, hi + 1, dtype=np.int64) - int(in_q[1])
    alpha_ratio = float(np.float32(np.float32(s_in * np.float32(alpha)) / s_out))
    negative = leaky_relu_alpha_np(v, alpha_ratio)
    out = np.where(v >= 0, mbqm_np(v, mi, si), negative) + int(out_q[1])
    return np.clip(out, lo, hi).astype(dtype)


def leaky_relu_alpha_np(v: np.ndarray, alpha_ratio: float) -> np.ndarray:
    """``QuantizeLeakyRelu``'s branch for ``v < 0``: MultiplyByQuantizedMultiplier takes only a
    non-negative multiplier, so TFLite (and TFLite Micro) quantize ``|alpha_ratio|``, apply it
    and negate the result for a negative alpha. Feeding the negative multiplier in directly
    rounds a tie the other way (SaturatingRoundingDoublingHighMul is not odd-symmetric)."""
    m, s = quantize_multiplier(abs(alpha_ratio))
    scaled = mbqm_np(v, m, s)
    return -scaled if alpha_ratio < 0 else scaled


def prelu_multipliers(in_scale: float, alpha_scale: float,
                      out_scale: float) -> tuple[tuple[int, int], tuple[int, int]]:
    """PRELU's two (multiplier, shift) pairs as TFLite Micro's prepare forms them, in double
    from the float32 scales: ``s_in / s_out`` for ``x >= 0`` and ``s_in * s_alpha / s_out``
    for the product ``(x - zp_in) * (alpha - zp_alpha)`` below."""
    s_in, s_a, s_out = f32(in_scale), f32(alpha_scale), f32(out_scale)
    return quantize_multiplier(s_in / s_out), quantize_multiplier(s_in * s_a / s_out)


def prelu_alpha_codes(values: np.ndarray, x_shape: list[int]) -> np.ndarray | None:
    """PRELU's alpha as one code per channel of ``x_shape``'s last axis (the only alpha the
    integer kernels take), or None when it varies along another axis or does not broadcast
    to the input."""
    try:
        full = np.broadcast_to(np.asarray(values), tuple(x_shape))
    except ValueError:
        return None
    flat = full.reshape(-1, x_shape[-1]) if len(x_shape) else full.reshape(1, 1)
    if flat.size == 0 or not (flat == flat[:1]).all():
        return None
    return np.ascontiguousarray(flat[0])


def prelu_alpha_map(values: np.ndarray, x_shape: list[int]) -> np.ndarray | None:
    """PRELU's alpha of a 4-D NHWC input as a (height, width, depth) map of codes, each axis
    the input's where alpha varies along it and 1 where it does not (the NPU broadcasts a
    second operand along an axis of 1, as TFLite broadcasts alpha), or None where it does
    not broadcast to the input or varies along the batch."""
    if len(x_shape) != 4:
        return None
    try:
        full = np.broadcast_to(np.asarray(values), tuple(x_shape))
    except ValueError:
        return None
    if full.size == 0 or not (full == full[:1]).all():
        return None
    alpha = full[0]
    for axis in range(3):
        first = np.take(alpha, [0], axis=axis)
        if (alpha == first).all():
            alpha = first
    return np.ascontiguousarray(alpha)


def prelu_alpha(attrs: dict) -> np.ndarray:
    """A PRELU QOp's alpha codes as a (height, width, depth) map (``alpha_shape``; one code
    per channel where the attrs give none)."""
    codes = np.asarray(attrs["alpha"])
    return codes.reshape(tuple(attrs.get("alpha_shape", (1, 1, codes.size))))


def batch_matmul_multiplier(op) -> tuple[int, int]:
    """TFLite's (multiplier, shift) of an int8 BATCH_MATMUL ``op``: ``s_a * s_b / s_out``, the
    product of the two scales taken in float32 (``GetQuantizedConvolutionMultipler``)."""
    real = float(f32(op.in_q[0][0]) * f32(op.in_q[1][0])) / float(f32(op.out_q[0]))
    m, s = quantize_multiplier(real)
    return int(m), int(s)


#: TFLite's fused activations (``ActivationFunctionType``) that clamp to a real range:
#: RELU (1), RELU_N1_TO_1 (2) and RELU6 (3), (low, high; None: none)
FUSED_BOUNDS = {1: (0.0, None), 3: (0.0, 6.0), 2: (-1.0, 1.0)}


def fused_activation_codes(fused_activation_fn: int, scale: float, zero_point: int,
                           dtype: str) -> tuple[int, int] | None:
    """The codes a quantized operator's fused RELU, RELU6 or RELU_N1_TO_1 clamps to, as
    TFLite's kernels compute them (``CalculateActivationRangeQuantized``: ``zero_point +
    round(f / scale)``, divided in float32 and rounded half away from zero, within the type);
    None for any other activation."""
    bounds = FUSED_BOUNDS.get(int(fused_activation_fn))
    if bounds is None:
        return None
    qmin, qmax = dtype_range(dtype)

    def code(f: float) -> int:   # past the type (a tiny scale): the type's end
        with np.errstate(over="ignore", invalid="ignore"):
            steps = round_half_away_f32(np.float32(f) / np.float32(scale))
        return int(zero_point) + int(np.clip(steps, qmin - int(zero_point),
                                             qmax - int(zero_point)))

    lo, hi = bounds
    return max(qmin, code(lo)), qmax if hi is None else min(qmax, code(hi))
