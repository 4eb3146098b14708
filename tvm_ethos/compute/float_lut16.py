"""TFLite's int16 EXP and LOG: a 513-entry table of a float32 function, read with linear
interpolation between entries (``lut_lookup_with_interpolation``).

The table is LiteRT's ``LUTPopulateInt16`` in float32: entry ``i`` samples the function at
``input_min + i * step`` (``step`` = the input range over 512), scaled by ``65536 / output
range`` and rounded half away from zero, less half the error the interpolation makes at the
step's midpoint; the last entry samples the input's largest value. Both scales are read as
float32, the kernels require zero points 0 (so the output zero point never enters). Where
there is no logarithm (an input at or below 0) LOG's function is the output's lowest real
value, which makes the table LiteRT's on every code (inferred from the oracle: BUILTIN_REF
on all 65,536 codes). The 512 base-and-slope words of ``softmax16.npu_table`` are the same
table for the NPU's 16-bit LUT (``ethosu_stream.lut16``), which interpolates the same way.
TFLite Micro's EXP and LOG are float only, so LiteRT's reference kernel defines the result.
"""
from __future__ import annotations

import numpy as np

from ethos_arch.ops import Op
from tvm_ethos.compute import softmax16
from tvm_ethos.compute.quant import libm_f32, round_half_away_f32

#: operators with an int16 float table here
KINDS = (Op.EXP, Op.LOG)
#: intervals of the table (its entries are one more)
STEPS = 512
_LO, _HI = -32768, 32767
_F = np.float32


def refusal(kind: Op, in_q: tuple, out_q: tuple) -> str:
    """Why LiteRT's int16 ``kind`` kernel refuses the quantization ('' where it takes it):
    its prepare requires zero points 0 on both tensors."""
    if kind not in KINDS:
        return f"{kind} has no int16 float table (only {', '.join(k.value for k in KINDS)})"
    for name, q in (("input", in_q), ("output", out_q)):
        if int(q[1]) != 0:
            return (f"an int16 {kind.value} {name} zero point of {int(q[1])}; TFLite's int16 "
                    f"{kind.value} kernel takes zero points 0 (quantize the {name} "
                    "symmetrically)")
    return ""


def _transform(kind: Op, out_q: tuple):
    if kind == Op.EXP:
        return lambda v: libm_f32("expf", v)
    lowest = _F(_F(out_q[0]) * _F(_LO))
    return lambda v: libm_f32("logf", v) if v > 0 else lowest


def table(kind: Op, in_q: tuple, out_q: tuple) -> np.ndarray:
    """The 513 int16 entries of LiteRT's table of ``kind`` (int64), or ValueError naming
    why LiteRT's kernel refuses the quantization."""
    why = refusal(kind, in_q, out_q)
    if why:
        raise ValueError(why)
    fn = _transform(kind, out_q)
    s_in, s_out = _F(in_q[0]), _F(out_q[0])
    input_min, input_max = _F(s_in * _F(_LO)), _F(s_in * _F(_HI))
    output_range = _F(_F(s_out * _F(_HI)) - _F(s_out * _F(_LO)))
    step = _F(_F(input_max - input_min) / _F(STEPS))
    half_step = _F(step / _F(2))
    inv = _F(_F(65536) / output_range)
    rnd = round_half_away_f32
    out = np.empty(STEPS + 1, np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(STEPS):
            at = _F(input_min + _F(_F(i) * step))
            val = fn(at)
            midpoint = fn(_F(at + half_step))
            after = fn(_F(input_min + _F(_F(i + 1) * step)))
            sample = rnd(_F(val * inv))
            interpolated = rnd(_F(_F(_F(after * inv) + sample) / _F(2)))
            bias = rnd(_F(_F(interpolated - rnd(_F(midpoint * inv))) / _F(2)))
            out[i] = _clamp(_F(sample - bias))
        out[STEPS] = _clamp(rnd(_F(fn(input_max) * inv)))
    return out


def _clamp(v: np.float32) -> int:
    """``std::min(std::max(v, lo), hi)`` cast to int16 as LiteRT's x86 build does: NaN (an
    EXP sampled past float32's range, infinity less infinity) passes both comparisons and
    converts to 0 (the 32-bit conversion's ``0x80000000`` truncated to 16 bits)."""
    if np.isnan(v):
        return 0
    return int(min(_F(_HI), max(_F(_LO), v)))


def every_code(kind: Op, in_q: tuple, out_q: tuple) -> np.ndarray:
    """The int16 output of ``kind`` on every int16 code, entry ``code + 32768``: the table
    read as TFLite reads it (int16 arithmetic: the slope wraps to 16 bits, as the NPU's
    16-bit slope field holds it)."""
    values = table(kind, in_q, out_q)
    codes = np.arange(_LO, _HI + 1, dtype=np.int64)
    index = STEPS // 2 + (codes >> 7)
    base = values[index]
    slope = _wrap16(values[index + 1] - base)
    return _wrap16(base + ((slope * (codes & 0x7F) + 64) >> 7)).astype(np.int16)


def npu_refusal(kind: Op, in_q: tuple, out_q: tuple) -> str:
    """Why the NPU's 16-bit LUT cannot give LiteRT's output on every code ('' where it can):
    TFLite wraps ``base + delta`` to int16 where the NPU's output stage saturates it, which
    differs only where an interval's wrapped slope crosses the type's end (an EXP that
    overflows float32 inside the input range, its table jumping between -32768 and 0)."""
    why = refusal(kind, in_q, out_q)
    if why:
        return why
    values = table(kind, in_q, out_q)
    codes = np.arange(_LO, _HI + 1, dtype=np.int64)
    index = STEPS // 2 + (codes >> 7)
    slope = _wrap16(values[index + 1] - values[index])
    npu = np.clip(values[index] + ((slope * (codes & 0x7F) + 64) >> 7), _LO, _HI)
    wrong = np.flatnonzero(npu != every_code(kind, in_q, out_q))
    if wrong.size:
        return (f"an int16 {kind.value} whose TFLite table wraps past int16 on {wrong.size} "
                f"codes (from {int(codes[wrong[0]])}), where the NPU's 16-bit LUT saturates: "
                f"input scale {in_q[0]:g} with output scale {out_q[0]:g} (a smaller input "
                "scale or a larger output scale keeps the function in range)")
    return ""


def _wrap16(v: np.ndarray) -> np.ndarray:
    return ((v + 0x8000) & 0xFFFF) - 0x8000


def npu_words(kind: Op, in_q: tuple, out_q: tuple) -> np.ndarray:
    """The table as the NPU's 512 little-endian base-and-slope words (uint32)."""
    return softmax16.npu_table(table(kind, in_q, out_q))
