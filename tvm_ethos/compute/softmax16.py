"""TFLite's int16 SOFTMAX (``reference_ops::SoftmaxInt16``, what TFLite Micro runs) in numpy.

The kernel reads exp and 1/(1 + x) from two 513-entry int16 tables that TFLite Micro builds at
prepare time (``gen_lut`` in float32: 512 samples, each less half the midpoint error of
linear interpolation, and the end point) and interpolates them on an int16 input (the high
nine bits pick the entry, the low seven interpolate, rounding half up: the same lookup the
Ethos-U's 16-bit LUT does, ``ethosu_stream.lut16``). The input difference to the row maximum
is scaled so that [-65535, 0] covers [-10, 0] and recentred to int16; the sum of
exponentials is normalised by its leading zeros to index the reciprocal table; the output is
Q0.15.

LiteRT (the oracle of the llvm host) runs the same kernel with tables it builds in double
(``LUTPopulate<double>``) and an input multiplier whose scale x beta is a float32 product;
TFLite Micro builds them in float32 and multiplies in double. The exp tables agree; the
reciprocal tables differ in two entries (160 and 294, by one each), so the two runtimes are
one code apart on rows whose reciprocal interpolates next to them. :class:`Kernel` names
whose arithmetic a caller wants: the Ethos-U paths follow TFLite Micro, the llvm host LiteRT.

Vela writes LiteRT's tables as fixed constants (``SoftMax.EXP_LUT``,
``ONE_OVER_ONE_PLUS_X_LUT``, in the NPU's base and slope form), so Vela's streams are one
code off TFLite Micro where the reciprocal tables differ; the streams here carry TFLite
Micro's.
"""
from __future__ import annotations

import enum
import functools

import numpy as np

from tvm_ethos.compute.quant import quantize_multiplier

#: entries of an int16 interpolation table (512 intervals and the end point)
TABLE_ENTRIES = 513
#: the scaled input difference's real range: [-65535, 0] codes are [-10, 0]
DIFF_RANGE = 10.0 / 65535.0
#: the largest left shift of the input multiplier under which the kernel's int32
#: ``difference << shift`` cannot overflow (a difference reaches -65535)
MAX_LEFT_SHIFT = 15
#: the longest row whose int32 sum of exponentials (each at most 32767) cannot overflow
MAX_DEPTH = 65536


class Kernel(enum.Enum):
    """Whose int16 SOFTMAX: the runtimes build the kernel's tables and input multiplier in
    different precisions (module docstring)."""

    TFLITE_MICRO = "tflite-micro"
    LITERT = "litert"


def _round(v: np.floating) -> np.floating:
    """``std::round`` in ``v``'s float type: half away from zero."""
    return v.dtype.type(np.sign(v) * np.floor(np.abs(v) + v.dtype.type(0.5)))


def gen_lut(func, input_min: float, input_max: float, f=np.float32) -> np.ndarray:
    """TFLite's ``gen_lut<FloatT, int16_t, int16_t>`` of ``func`` (``f`` -> ``f``) over
    [input_min, input_max] with output range [-1, 1]: 513 int16 values, computed in the
    float type ``f`` (float32: TFLite Micro; float64: LiteRT)."""
    lo, hi = f(input_min), f(input_max)
    steps = TABLE_ENTRIES - 1
    step = f((hi - lo) / f(steps))
    half = f(step / f(2))
    inv = f(f(65536) / f(f(1) - f(-1)))
    out = np.empty(TABLE_ENTRIES, np.int64)
    for i in range(steps):
        x = f(lo + f(f(i) * step))
        val = func(x)
        mid = func(f(x + half))
        nxt = func(f(lo + f(f(i + 1) * step)))
        sample = _round(f(val * inv))
        mid_interp = _round(f(f(f(nxt * inv) + _round(f(val * inv))) / f(2)))
        bias = _round(f(f(mid_interp - _round(f(mid * inv))) / f(2)))
        out[i] = int(min(max(f(sample - bias), f(-32768)), f(32767)))
    out[steps] = int(min(max(_round(f(func(hi) * inv)), f(-32768)), f(32767)))
    return out


@functools.lru_cache(maxsize=2)
def tables(kernel: Kernel = Kernel.TFLITE_MICRO) -> tuple[np.ndarray, np.ndarray]:
    """(exp on [-10, 0], 1/(1 + x) on [0, 1]) as ``kernel``'s prepare builds them (the
    same for every model; read-only)."""
    f = np.float32 if kernel is Kernel.TFLITE_MICRO else np.float64
    exp = gen_lut(lambda v: np.exp(v, dtype=f), -10.0, 0.0, f)
    reciprocal = gen_lut(lambda v: f(f(1) / f(f(1) + v)), 0.0, 1.0, f)
    for t in (exp, reciprocal):
        t.flags.writeable = False
    return exp, reciprocal


def npu_table(values: np.ndarray) -> np.ndarray:
    """A 513-entry table as the NPU's 512 32-bit entries: base in bits 0-15, the rise to the
    next entry (its slope) in bits 16-31."""
    values = np.asarray(values, np.int64)
    base, slope = values[:-1], values[1:] - values[:-1]
    return ((slope & 0xFFFF) << 16 | (base & 0xFFFF)).astype(np.uint32)


def lookup(table: np.ndarray, x: np.ndarray) -> np.ndarray:
    """TFLite's ``lut_lookup_with_interpolation`` of int16 values ``x`` in a 513-entry
    table."""
    x = np.asarray(x, np.int64)
    index = 256 + (x >> 7)
    offset = x & 0x7F
    return table[index] + (((table[index + 1] - table[index]) * offset + 64) >> 7)


def input_multiplier(in_scale: float, beta: float,
                     kernel: Kernel = Kernel.TFLITE_MICRO) -> tuple[int, int]:
    """``kernel``'s (Q31 multiplier, shift) of the input difference: scale x beta in units
    of 10/65535, from the float32 scale and beta (TFLite Micro multiplies them in double,
    LiteRT in float32)."""
    scale, b = np.float32(in_scale), np.float32(beta)
    product = float(scale * b) if kernel is Kernel.LITERT else float(scale) * float(b)
    return quantize_multiplier(product / DIFF_RANGE)


def _multiply(x: np.ndarray, multiplier: int, shift: int) -> np.ndarray:
    """``MultiplyByQuantizedMultiplier``: a rounding doubling high multiply after the left
    shift, then a rounding right shift (ties away from zero)."""
    x = np.asarray(x, np.int64) * (1 << max(shift, 0))
    prod = x * multiplier
    high = (prod + np.where(prod >= 0, 1 << 30, 1 - (1 << 30)))
    high = np.where(high >= 0, high >> 31, -((-high) >> 31))
    right = max(-shift, 0)
    if not right:
        return high
    mask = (1 << right) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + (remainder > threshold)


def softmax_int16(x: np.ndarray, in_scale: float, beta: float,
                  exp_table: np.ndarray | None = None,
                  reciprocal_table: np.ndarray | None = None,
                  kernel: Kernel = Kernel.TFLITE_MICRO) -> np.ndarray:
    """``kernel``'s kernel over the last axis of int16 codes ``x`` (input zero point 0), to
    Q0.15 codes; the tables default to ``kernel``'s (:func:`tables`)."""
    if exp_table is None or reciprocal_table is None:
        exp_table, reciprocal_table = tables(kernel)
    x = np.asarray(x, np.int64)
    multiplier, shift = input_multiplier(in_scale, beta, kernel)
    scaled = _multiply(x - x.max(axis=-1, keepdims=True), multiplier, shift)
    exps = lookup(exp_table, np.clip(scaled + 32767, -32768, 32767))
    total = exps.sum(axis=-1, keepdims=True)
    headroom = 32 - np.vectorize(int.bit_length, otypes=[np.int64])(total)
    shifted = ((total << (headroom - 1)) + (1 << 13)) >> 14
    reciprocal = lookup(reciprocal_table, np.clip(shifted - 98304, -32768, 32767))
    right = 31 - headroom
    out = (exps * reciprocal + (np.int64(1) << (right - 1))) >> right
    return np.clip(out, 0, 32767).astype(np.int16)
