"""Output scaling of accumulators: a 32-bit multiplier and a 6-bit right shift, rounded the
way the OFM_PRECISION register's rounding field selects.

TFL reproduces TensorFlow Lite's ``MultiplyByQuantizedMultiplier`` (a rounding doubling
high multiply, then a rounding right shift, ties away from zero), reading Vela's
``(scale, shift)`` as TFLite's ``(multiplier, 31 - shift)``; NATURAL adds half and shifts
(ties up); TRUNCATE rounds toward zero.
"""
from __future__ import annotations

import numpy as np

TFL, TRUNCATE, NATURAL = 0, 1, 2


def rounding_divide_by_pot(x: np.ndarray, exponent: np.ndarray) -> np.ndarray:
    x = np.asarray(x, np.int64)
    e = np.asarray(exponent, np.int64)
    mask = (np.int64(1) << e) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> e) + (remainder > threshold)


def scale(acc: np.ndarray, multiplier, shift, mode: int) -> np.ndarray:
    """``acc * multiplier / 2**shift`` rounded per ``mode`` (int64 in, int64 out);
    ``multiplier`` and ``shift`` broadcast against ``acc`` (per-channel scales).

    TFL with ``shift > 31`` is TFLite's double rounding: the doubling high multiply (ties
    up), then a rounding right shift by ``shift - 31`` (ties away from zero). With
    ``shift <= 31`` TFLite shifts left first, which is exact, so one rounding (ties up)
    remains; ``(1, 0)`` is the identity."""
    acc = np.asarray(acc, np.int64)
    m = np.asarray(multiplier, np.int64)
    s = np.asarray(shift, np.int64)
    if mode == TFL:
        high = np.maximum(s - 31, 0)
        single = np.minimum(s, 31)
        # acc * m may not fit 64 bits for 32-bit operands: split m into 16-bit halves
        m_hi, m_lo = m >> 16, m & 0xFFFF
        first = _mul_round_shift(acc, m_hi, m_lo, single)
        # a rounding divide by 2**0 is the identity
        return rounding_divide_by_pot(first, high) if np.any(high > 0) else first
    prod = acc * m
    if mode == NATURAL:
        half = np.where(s > 0, np.int64(1) << np.maximum(s - 1, 0), 0)
        return (prod + half) >> s
    if mode == TRUNCATE:
        return np.where(prod >= 0, prod >> s, -((-prod) >> s))
    raise ValueError(f"rounding mode {mode} is not one the hardware has (TFL 0, TRUNCATE 1, "
                     "NATURAL 2)")


def _mul_round_shift(
    x: np.ndarray, m_hi: np.ndarray, m_lo: np.ndarray, s: np.ndarray
) -> np.ndarray:
    """floor((x * (m_hi * 2**16 + m_lo) + 2**(s-1)) / 2**s) without 64-bit overflow while
    the result fits in 64 bits (x up to 2**47, m below 2**32)."""
    if x.size == 0 or (x.max() < (1 << 31) and x.min() > -(1 << 31)):
        p = x * ((m_hi << 16) + m_lo)
        half = np.where(s > 0, np.int64(1) << np.maximum(s - 1, 0), 0)
        return (p + half) >> s
    xs = np.asarray(x, dtype=object)
    p = xs * (np.asarray(m_hi, dtype=object) * 65536 + np.asarray(m_lo, dtype=object))
    sh = np.asarray(s, dtype=object)
    out = (p + np.where(sh > 0, 2 ** np.maximum(sh - 1, 0), 0)) // 2 ** sh
    # past 64 bits only saturation downstream can follow; keep the sign and the magnitude
    return np.asarray(np.clip(out, -(1 << 62), 1 << 62), dtype=np.int64)
