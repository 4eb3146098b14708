"""SQUARED_DIFFERENCE (int8) as TFLite Micro's prepare and kernel compute it, and where the
Ethos-U's form of it differs.

The kernel widens each input's offset code ``v = code - zp`` by ``2**7``, brings both to the
larger input scale with a multiplier below one (``MultiplyByQuantizedMultiplierSmallerThanOneExp``:
the doubling high multiply, then a rounding right shift), squares their difference in int32 and
requantizes that with ``(2 * max scale)**2 / (2**14 * s_out)`` (``MultiplyByQuantizedMultiplier``),
every multiplier formed in double from the float32 scales.

The NPU runs the same steps with the same roundings (its TFL rounding is the doubling high
multiply and rounding shift), so the two agree wherever the kernel's int32 arithmetic does not
overflow. One place can: an output multiplier above one shifts the squared difference left
before multiplying, and the kernel's ``x * (1 << left_shift)`` wraps in 32 bits where the NPU's
64-bit product does not (a saturated code on the NPU, a wrapped one in TFLite Micro). The inputs
are two int8 codes, so :func:`npu_refusal` decides a quantization by running both on all 65,536
pairs. Plain numpy, no TVM.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tvm_ethos.compute.quant import f32, quantize_multiplier, rdbpot_np, srdhm_np

#: the kernel's widening of an int8 offset code before rescaling (``left_shift``)
LEFT_SHIFT = 7

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


def scales(in1_q: tuple, in2_q: tuple, out_q: tuple) -> SquaredDifferenceScales:
    """The multipliers TFLite Micro's prepare computes, in double from the float32 scales."""
    s1, s2, s_out = f32(in1_q[0]), f32(in2_q[0]), f32(out_q[0])
    twice_max = 2.0 * max(s1, s2)
    real_out = twice_max * twice_max / (float(1 << (2 * LEFT_SHIFT)) * s_out)
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


def _kernel(a: np.ndarray, b: np.ndarray, in1_q: tuple, in2_q: tuple, out_q: tuple,
            act: tuple[int, int], wrap: bool) -> np.ndarray:
    sc = scales(in1_q, in2_q, out_q)
    x1 = _mbqm((np.asarray(a, np.int64) - int(in1_q[1])) << LEFT_SHIFT, sc.input1, False)
    x2 = _mbqm((np.asarray(b, np.int64) - int(in2_q[1])) << LEFT_SHIFT, sc.input2, False)
    diff = x1 - x2
    out = _mbqm(diff * diff, sc.output, wrap) + int(out_q[1])
    return np.clip(out, act[0], act[1]).astype(np.int8)


def tflite_micro(a: np.ndarray, b: np.ndarray, in1_q: tuple, in2_q: tuple, out_q: tuple,
                 act: tuple[int, int] = (-128, 127)) -> np.ndarray:
    """TFLite Micro's int8 SQUARED_DIFFERENCE of the codes ``a`` and ``b`` (broadcast), to the
    bit, clamped to the codes ``act``."""
    return _kernel(a, b, in1_q, in2_q, out_q, act, wrap=True)


def npu(a: np.ndarray, b: np.ndarray, in1_q: tuple, in2_q: tuple, out_q: tuple,
        act: tuple[int, int] = (-128, 127)) -> np.ndarray:
    """What the Ethos-U's form computes: the same steps in 64-bit arithmetic."""
    return _kernel(a, b, in1_q, in2_q, out_q, act, wrap=False)


def npu_refusal(in1_q: tuple, in2_q: tuple, out_q: tuple,
                act: tuple[int, int] = (-128, 127)) -> str:
    """Why the NPU's form is not TFLite Micro's kernel for this quantization (a clause naming
    the first pair of codes that differ), or ``""`` when they agree on all 65,536 pairs."""
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
