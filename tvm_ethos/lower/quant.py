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
    """(Q31 multiplier, shift) with real ~= multiplier * 2**(shift - 31); shift > 0 is a left shift."""
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
    return rdbpot_np(srdhm_np(np.asarray(x, dtype=np.int64) * (np.int64(1) << left), multiplier), right)
