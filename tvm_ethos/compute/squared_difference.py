"""SQUARED_DIFFERENCE (int8 and int16) as TFLite Micro's prepare and kernel compute it, and
where the Ethos-U's form of it differs.

The kernel widens each input's offset code ``v = code - zp`` by ``2**7`` (int8; int16 codes,
their zero points 0, are not widened: ``2**0``), brings both to the
larger input scale with a multiplier below one (``MultiplyByQuantizedMultiplierSmallerThanOneExp``:
the doubling high multiply, then a rounding right shift), squares their difference in int32 and
requantizes that with ``(2 * max scale)**2 / (2**(2 * widening) * s_out)``
(``MultiplyByQuantizedMultiplier``),
every multiplier formed in double from the float32 scales.

The NPU runs the same steps with the same roundings (its TFL rounding is the doubling high
multiply and rounding shift), so the two agree wherever the kernel's int32 arithmetic does not
overflow. One place can: an output multiplier above one shifts the squared difference left
before multiplying, and the kernel's ``x * (1 << left_shift)`` wraps in 32 bits where the NPU's
64-bit product does not (a saturated code on the NPU, a wrapped one in TFLite Micro). For int8
:func:`npu_refusal` decides a quantization by running both on all 65,536 pairs of codes; for
int16 (4,294,967,296 pairs) it finds whether the shift wraps on the largest square two codes
reach. Plain numpy, no TVM.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tvm_ethos.compute.quant import f32, quantize_multiplier, rdbpot_np, srdhm_np

#: the kernel's widening of an int8 offset code before rescaling (``left_shift``)
LEFT_SHIFT = 7

#: the kernel's widening of an offset code, by the tensors' type (int16 codes already fill
#: the 16 bits the square keeps within int32)
LEFT_SHIFTS = {"int8": LEFT_SHIFT, "int16": 0}

_CODES = np.arange(-128, 128, dtype=np.int64)


class Multiplier(NamedTuple):
    """A Q31 multiplier and TFLite's shift (positive: a left shift before the multiply)."""

    multiplier: int
    shift: int


class SquaredDifferenceScales(NamedTuple):
    """TFLite Micro's three multipliers: each input's to the larger scale, and the output's."""

    input1: Multiplier
    input2: Multiplier
    output: Multiplier


def left_shift(dtype: str) -> int:
    """The kernel's widening of an offset code of ``dtype`` (int8 or int16)."""
    if dtype not in LEFT_SHIFTS:
        raise ValueError(f"SQUARED_DIFFERENCE of {dtype} codes; TFLite Micro's integer kernel "
                         "takes int8 or int16")
    return LEFT_SHIFTS[dtype]


def scales(in1_q: tuple, in2_q: tuple, out_q: tuple,
           dtype: str = "int8") -> SquaredDifferenceScales:
    """The multipliers TFLite Micro's prepare computes, in double from the float32 scales."""
    s1, s2, s_out = f32(in1_q[0]), f32(in2_q[0]), f32(out_q[0])
    twice_max = 2.0 * max(s1, s2)
    real_out = twice_max * twice_max / (float(1 << (2 * left_shift(dtype))) * s_out)
    return SquaredDifferenceScales(Multiplier(*quantize_multiplier(s1 / twice_max)),
                                   Multiplier(*quantize_multiplier(s2 / twice_max)),
                                   Multiplier(*quantize_multiplier(real_out)))


def _wrap32(x: np.ndarray) -> np.ndarray:
    """``x`` as a two's-complement int32 would hold it."""
    return ((np.asarray(x, np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def _mbqm(x: np.ndarray, m: Multiplier, wrap: bool) -> np.ndarray:
    """MultiplyByQuantizedMultiplier, the left shift in 32 bits (``wrap``, TFLite Micro) or
    in 64 (the NPU)."""
    left, right = max(m.shift, 0), max(-m.shift, 0)
    shifted = np.asarray(x, np.int64) * (1 << left)
    if wrap:
        shifted = _wrap32(shifted)
    return rdbpot_np(srdhm_np(shifted, m.multiplier), right)


def _scaled(codes: np.ndarray, q: tuple, m: Multiplier, dtype: str) -> np.ndarray:
    """An input's offset codes widened and brought to twice the larger scale."""
    return _mbqm((np.asarray(codes, np.int64) - int(q[1])) << left_shift(dtype), m, False)


def _output(diff: np.ndarray, out_q: tuple, m: Multiplier, act, dtype: str,
            wrap: bool) -> np.ndarray:
    out = _mbqm(diff * diff, m, wrap) + int(out_q[1])
    lo, hi = act if act is not None else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    return np.clip(out, lo, hi).astype(dtype)


def _kernel(a: np.ndarray, b: np.ndarray, in1_q: tuple, in2_q: tuple, out_q: tuple,
            act, wrap: bool, dtype: str) -> np.ndarray:
    sc = scales(in1_q, in2_q, out_q, dtype)
    diff = _scaled(a, in1_q, sc.input1, dtype) - _scaled(b, in2_q, sc.input2, dtype)
    return _output(diff, out_q, sc.output, act, dtype, wrap)


def tflite_micro(a: np.ndarray, b: np.ndarray, in1_q: tuple, in2_q: tuple, out_q: tuple,
                 act: tuple[int, int] | None = None, dtype: str = "int8") -> np.ndarray:
    """TFLite Micro's SQUARED_DIFFERENCE of the ``dtype`` codes ``a`` and ``b`` (broadcast), to
    the bit, clamped to the codes ``act`` (the type's range where ``None``)."""
    return _kernel(a, b, in1_q, in2_q, out_q, act, True, dtype)


def npu(a: np.ndarray, b: np.ndarray, in1_q: tuple, in2_q: tuple, out_q: tuple,
        act: tuple[int, int] | None = None, dtype: str = "int8") -> np.ndarray:
    """What the Ethos-U's form computes: the same steps in 64-bit arithmetic (for int16, where
    the output's left shift keeps the square within int32)."""
    return _kernel(a, b, in1_q, in2_q, out_q, act, False, dtype)


def _int16_refusal(in1_q: tuple, in2_q: tuple, out_q: tuple) -> str:
    """The square grows with the difference's magnitude, so TFLite Micro's left shift wraps
    somewhere iff it wraps on the largest difference two codes reach (``x1.max() - x2.min()``
    or ``x2.max() - x1.min()``); where it never wraps, every step is the NPU's."""
    codes = np.array([-32768, 32767], np.int64)
    sc = scales(in1_q, in2_q, out_q, "int16")
    x1 = _scaled(codes, in1_q, sc.input1, "int16")
    x2 = _scaled(codes, in2_q, sc.input2, "int16")
    pairs = [((0, 1), int(x1[0] - x2[1])), ((1, 0), int(x1[1] - x2[0]))]
    (i, j), d = max(pairs, key=lambda p: abs(p[1]))
    shifted = d * d << max(sc.output.shift, 0)
    if shifted < 1 << 31:
        return ""
    return (f"the output multiplier shifts left by {sc.output.shift}, and TFLite Micro's "
            f"32-bit shift wraps: codes ({int(codes[i])}, {int(codes[j])}) square to {d * d}, "
            f"shifted {shifted} (beyond int32; the NPU's 64-bit product does not wrap); an "
            "output scale of at least (2 * max input scale)**2 keeps it exact")


def npu_refusal(in1_q: tuple, in2_q: tuple, out_q: tuple,
                act: tuple[int, int] | None = None, dtype: str = "int8") -> str:
    """Why the NPU's form is not TFLite Micro's kernel for this quantization (a clause naming
    a pair of codes that differ), or ``""`` when they agree on every pair of codes."""
    if dtype == "int16":
        return _int16_refusal(in1_q, in2_q, out_q)
    a, b = _CODES[:, None], _CODES[None, :]
    want = tflite_micro(a, b, in1_q, in2_q, out_q, act)
    got = npu(a, b, in1_q, in2_q, out_q, act)
    bad = np.argwhere(want != got)
    if not len(bad):
        return ""
    i, j = (int(v) for v in bad[0])
    m = scales(in1_q, in2_q, out_q).output
    return (f"the output multiplier shifts left by {m.shift}, and TFLite Micro's 32-bit "
            f"shift wraps: codes ({i - 128}, {j - 128}) give {int(want[i, j])} there and "
            f"{int(got[i, j])} on the NPU ({len(bad)} of 65536 pairs differ); an output "
            "scale of at least (2 * max input scale)**2 / 2**14 keeps it exact")
