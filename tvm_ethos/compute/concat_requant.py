"""A requantizing CONCATENATION (inputs quantized unlike the output) as LiteRT computes it,
and where the Ethos-U's integer form of it differs.

TFLite Micro refuses such a model (its kernel copies codes and requires one quantization), and
LiteRT's int8 kernel does too; LiteRT's uint8 kernel (``ConcatenationWithScaling``) rescales
each input whose quantization differs from the output's in float32: ``scale = s_in * (1 /
s_out)``, ``bias = -zp_in * scale``, then ``round(code * scale + bias) + zp_out`` (``round``
half away from zero) saturated to the type. That arithmetic is the only definition a runtime
gives, so it is the reference for int8 too.

The NPU (and the emulator and host lowering, ``te_ops.lower_concatenate``) rescales in integers
instead: ``code - zp_in`` times TFLite's Q31 multiplier of ``s_in / s_out`` (formed in double
from the float32 scales), shifted right with one rounding, half up (the NPU's NATURAL
rounding: TFLite's ``MultiplyByQuantizedMultiplier`` rounds twice, which moves a tenth of the
codes of some quantizations), plus ``zp_out``. The two agree except where the float32 sum
lands on the other side of a rounding tie than the exact value (and on exact ties of negative
values, which float rounds away from zero and the NPU up), so :func:`refusal` runs both on
every code of the type and names the first code where they differ. Plain numpy, no TVM.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tvm_ethos.compute.quant import dtype_range, f32, quantize_multiplier

#: the types whose requantizing concatenation is taken (LiteRT's scaling kernel is uint8's;
#: int16's kernels, LiteRT's and TFLite Micro's, require one quantization)
TYPES = ("int8", "uint8")


class Rescale(NamedTuple):
    """One input's requantization into the output: its (scale, zero point), the output's, and
    the NPU's (multiplier, right shift) of ``s_in / s_out``: TFLite's Q31 multiplier and
    ``31 - shift``, applied as ``(v * multiplier + 2**(right_shift - 1)) >> right_shift``."""
    in_q: tuple[float, int]
    out_q: tuple[float, int]
    multiplier: int
    right_shift: int


#: the NPU's shift field holds 0..63
MAX_RIGHT_SHIFT = 63


def rescale(in_q: tuple[float, int], out_q: tuple[float, int]) -> Rescale:
    """The integer rescale of an input quantized ``in_q`` into ``out_q``."""
    m, shift = quantize_multiplier(f32(in_q[0]) / f32(out_q[0]))
    return Rescale((float(in_q[0]), int(in_q[1])), (float(out_q[0]), int(out_q[1])), m,
                   31 - shift)


def natural_scale(v: np.ndarray, multiplier: int, right_shift: int) -> np.ndarray:
    """``v * multiplier / 2**right_shift`` rounded half up (int64 in and out)."""
    prod = np.asarray(v, np.int64) * np.int64(multiplier)
    half = np.int64(1) << np.int64(right_shift - 1) if right_shift > 0 else np.int64(0)
    return (prod + half) >> np.int64(right_shift)


def _codes(dtype: str) -> np.ndarray:
    lo, hi = dtype_range(dtype)
    return np.arange(lo, hi + 1, dtype=np.int64)


def litert_codes(dtype: str, in_q: tuple[float, int], out_q: tuple[float, int]) -> np.ndarray:
    """LiteRT's ``ConcatenationWithScaling`` of every ``dtype`` code (lowest first), in its
    float32 arithmetic."""
    codes = _codes(dtype)
    scale = np.float32(in_q[0]) * (np.float32(1) / np.float32(out_q[0]))
    bias = np.float32(-int(in_q[1])) * scale
    v = codes.astype(np.float32) * scale + bias
    a = np.abs(v)
    fl = np.floor(a)
    r = np.where(a - fl >= np.float32(0.5), fl + np.float32(1), fl)   # std::round
    out = np.copysign(r, v).astype(np.int64) + int(out_q[1])
    return np.clip(out, *dtype_range(dtype))


def npu_codes(dtype: str, in_q: tuple[float, int], out_q: tuple[float, int]) -> np.ndarray:
    """The NPU's requantization of every ``dtype`` code (lowest first)."""
    r = rescale(in_q, out_q)
    out = natural_scale(_codes(dtype) - r.in_q[1], r.multiplier, r.right_shift) + r.out_q[1]
    return np.clip(out, *dtype_range(dtype))


def _fmt(q) -> str:
    return f"({float(q[0]):.6g}, {int(q[1])})"


def refusal(dtype: str, in_qs: list, out_q: tuple[float, int]) -> str:
    """Why the NPU's form of a concatenation of inputs quantized ``in_qs`` into ``out_q`` is
    not LiteRT's (``""`` where it is, or where every input is quantized as the output)."""
    moved = [(k, tuple(q)) for k, q in enumerate(in_qs) if tuple(q) != tuple(out_q)]
    if not moved:
        return ""
    if dtype not in TYPES:
        return (f"a {dtype} concatenation with input quantizations "
                f"{', '.join(map(_fmt, in_qs))} and output {_fmt(out_q)}; TFLite's {dtype} "
                "kernels copy codes and need them equal")
    for k, q in moved:
        if not 0 <= rescale(q, out_q).right_shift <= MAX_RIGHT_SHIFT:
            return (f"input {k} requantized from {_fmt(q)} to {_fmt(out_q)}: a scale ratio "
                    "the NPU's shift does not hold")
        want, got = litert_codes(dtype, q, out_q), npu_codes(dtype, q, out_q)
        bad = np.flatnonzero(want != got)
        if bad.size:
            code = int(_codes(dtype)[bad[0]])
            return (f"input {k} requantized from {_fmt(q)} to {_fmt(out_q)}: LiteRT's float32 "
                    f"scaling gives code {code} {int(want[bad[0]])}, the NPU's integer "
                    f"rescale {int(got[bad[0]])}")
    return ""
