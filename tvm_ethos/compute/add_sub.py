"""ADD and SUB (int8, int16) as TFLite Micro's kernel computes them, as the Ethos-U55/U65 runs
Vela's registers for them, and the quantizations where the two differ.

TFLite Micro widens each offset code ``x = code - zp`` by ``2**20`` (``2**15`` for int16) and
brings both inputs to twice the larger input scale with
``MultiplyByQuantizedMultiplierSmallerThanOneExp``: a rounding doubling high multiply, then a
rounding right shift, so the smaller-scaled input is rounded twice. Vela's "advanced" scaling
leaves the larger-scaled input as ``x << 19`` (``x << 14``), exact either way, and rescales the
other with one register pair, OPA_SCALE: a 32-bit multiplier and a 6-bit shift that the
U55/U65 apply to the 64-bit product with a single rounding. Their scale registers have no
field for a second rounding; the U85's have one (Arm's regor compiler sets its "double round"
to 20 or 15 for TFLite ADD/SUB to compensate for exactly that left shift). Where TFLite's first
rounding makes a tie that its second rounding resolves differently from the single one, the
rescaled input is one unit of ``2 * max scale / 2**20`` off, and the output requantization can
carry that into a code off by one. Equal input scales rescale by a power of two, exactly.

:func:`npu_refusal` decides a quantization: for int8 by running both forms on all 65,536 pairs
of codes; for int16 (2**32 pairs) by comparing the rescaled input itself over every code, a
sufficient condition for exactness. Plain numpy, no TVM.
"""
from __future__ import annotations

import math
from enum import IntEnum
from typing import NamedTuple

import numpy as np

from ethosu_stream import rounding
from tvm_ethos.compute.quant import f32, mbqm_np, quantize_multiplier


class Scaled(IntEnum):
    """Which operand OPA_SCALE rescales (IFM_PRECISION bits 8-9): none (both operands take
    their own multiplier, no shift), the first, or the second."""

    NONE = 0
    FIRST = 1
    SECOND = 2


class AddSubRegisters(NamedTuple):
    """The elementwise scale registers Vela 5.2 writes for a TFLite ADD/SUB."""

    opa_scale: int
    opa_shift: int
    opb_scale: int
    ofm_scale: int
    ofm_shift: int
    scaled: Scaled


def _left_shift(bits: int) -> int:
    if bits not in (8, 16):
        raise ValueError(f"ADD/SUB of {bits}-bit codes has no TFLite kernel; the inputs must be "
                         "int8 or int16")
    return 20 if bits == 8 else 15


def _vela_quantise(real: float) -> tuple[int, int]:
    """A real scale as Vela writes a (multiplier, right shift) register pair: the frexp
    significand rounded half away from zero to 31 bits; (0, 16) where the shift leaves 0..63."""
    significand, exponent = math.frexp(real)
    multiplier = int(math.floor(abs(significand) * (1 << 31) + 0.5)) * (1 if real >= 0 else -1)
    shift = 31 - exponent
    return (multiplier, shift) if 0 <= shift < 64 else (0, 16)


def vela_registers(in1_q: tuple, in2_q: tuple, out_q: tuple, bits: int = 8) -> AddSubRegisters:
    """What Vela 5.2's register generator writes for an ADD/SUB whose first input is
    quantized ``in1_q``, its second ``in2_q`` and its output ``out_q`` (scale, zero point), the
    operands in their TFLite order: every rescale computed in double from the float32 scales."""
    s1, s2, so = f32(in1_q[0]), f32(in2_q[0]), f32(out_q[0])
    shift = _left_shift(bits)
    twice_max = 2.0 * max(s1, s2)
    if s1 == s2:
        unit = (1 << 16) / 2.0  # each input rescaled by 2**16 / (2 * scale) * scale
        ofm = _vela_quantise(twice_max / (so * (1 << 16)))
        if bits == 16:
            return AddSubRegisters(int(unit) // 2, 0, int(unit) // 2, ofm[0], ofm[1] - 1,
                                   Scaled.NONE)
        if ofm[0] & 0xFFF == 0:
            return AddSubRegisters(int(unit), 0, int(unit), *ofm, Scaled.NONE)
    opa = _vela_quantise(min(s1, s2) * (1 << shift) / twice_max)
    ofm = _vela_quantise(twice_max / (so * (1 << shift)))
    return AddSubRegisters(opa[0], opa[1], 0, ofm[0], ofm[1],
                           Scaled.FIRST if s1 < s2 else Scaled.SECOND)


def _offsets(a, b, in1_q, in2_q) -> tuple[np.ndarray, np.ndarray]:
    return (np.asarray(a, np.int64) - int(in1_q[1]), np.asarray(b, np.int64) - int(in2_q[1]))


def _clamp(v: np.ndarray, act: tuple[int, int] | None, bits: int) -> np.ndarray:
    lo, hi = _full_range(bits)
    if act is not None:
        lo, hi = (lo if act[0] is None else act[0]), (hi if act[1] is None else act[1])
    return np.clip(v, lo, hi).astype(np.int8 if bits == 8 else np.int16)


def tflite_rescaled(x: np.ndarray, in_scale: float, other_scale: float, bits: int = 8
                    ) -> np.ndarray:
    """TFLite Micro's rescaled input: the offset codes ``x`` of an input quantized with
    ``in_scale`` (the other input's scale ``other_scale``), widened and brought to twice the
    larger scale with two roundings."""
    s, t = f32(in_scale), f32(other_scale)
    m, sh = quantize_multiplier(s / (2.0 * max(s, t)))
    return mbqm_np(np.asarray(x, np.int64) << _left_shift(bits), m, sh)


def tflite_micro(a, b, in1_q: tuple, in2_q: tuple, out_q: tuple,
                 act: tuple[int, int] | None = None, subtract: bool = False,
                 bits: int = 8) -> np.ndarray:
    """TFLite Micro's ADD (SUB with ``subtract``) of the codes ``a`` and ``b`` (broadcast), to
    the bit, clamped to the codes ``act`` (the data type's range when ``None``)."""
    x1, x2 = _offsets(a, b, in1_q, in2_q)
    s1, s2, so = f32(in1_q[0]), f32(in2_q[0]), f32(out_q[0])
    r1 = tflite_rescaled(x1, s1, s2, bits)
    r2 = tflite_rescaled(x2, s2, s1, bits)
    mo, sho = quantize_multiplier(2.0 * max(s1, s2) / ((1 << _left_shift(bits)) * so))
    raw = r1 - r2 if subtract else r1 + r2
    return _clamp(mbqm_np(raw, mo, sho) + int(out_q[1]), act, bits)


def npu_rescaled(x: np.ndarray, regs: AddSubRegisters, bits: int = 8) -> np.ndarray:
    """The NPU's rescaled OPA_SCALE operand (offset codes ``x``), one rounding."""
    return rounding.scale(np.asarray(x, np.int64), regs.opa_scale, regs.opa_shift,
                          rounding.TFL)


def npu(a, b, in1_q: tuple, in2_q: tuple, out_q: tuple, act: tuple[int, int] | None = None,
        subtract: bool = False, bits: int = 8) -> np.ndarray:
    """What the Ethos-U55/U65 computes from Vela's registers (``ethosu_stream``'s arithmetic:
    one rounding of the rescaled operand, the other shifted left, TFL rounding of the sum)."""
    regs = vela_registers(in1_q, in2_q, out_q, bits)
    x1, x2 = _offsets(a, b, in1_q, in2_q)
    plain = _left_shift(bits) - 1
    if regs.scaled == Scaled.NONE:
        x1, x2 = x1 * regs.opa_scale, x2 * regs.opb_scale
    elif regs.scaled == Scaled.FIRST:
        x1, x2 = npu_rescaled(x1, regs, bits), x2 << plain
    else:
        x1, x2 = x1 << plain, npu_rescaled(x2, regs, bits)
    raw = x1 - x2 if subtract else x1 + x2
    out = rounding.scale(raw, regs.ofm_scale, regs.ofm_shift, rounding.TFL)
    return _clamp(out + int(out_q[1]), act, bits)


def _full_range(bits: int) -> tuple[int, int]:
    info = np.iinfo(np.int8 if bits == 8 else np.int16)
    return int(info.min), int(info.max)


def _rescale_clause(in1_q, in2_q, out_q, bits) -> str:
    """Names the first offset code whose NPU rescale differs from TFLite Micro's."""
    regs = vela_registers(in1_q, in2_q, out_q, bits)
    if regs.scaled == Scaled.NONE:
        return ""
    q, other = (in1_q, in2_q) if regs.scaled == Scaled.FIRST else (in2_q, in1_q)
    lo, hi = _full_range(bits)
    x = np.arange(lo, hi + 1, dtype=np.int64) - int(q[1])
    bad = np.flatnonzero(tflite_rescaled(x, q[0], other[0], bits) != npu_rescaled(x, regs, bits))
    if not len(bad):
        return ""
    which = "first" if regs.scaled == Scaled.FIRST else "second"
    return (f"the {which} input (scale {f32(q[0]):.6g}) is rescaled with one rounding on the "
            f"Ethos-U55/U65 and two in TFLite Micro, which differ for {len(bad)} of its "
            f"{hi - lo + 1} codes (first {int(x[bad[0]]) + int(q[1])})")


_CODES8 = np.arange(-128, 128, dtype=np.int64)


def npu_refusal(in1_q: tuple, in2_q: tuple, out_q: tuple, act: tuple[int, int] | None = None,
                subtract: bool = False, bits: int = 8) -> str:
    """Why the NPU's ADD/SUB is not TFLite Micro's for this quantization (a clause naming the
    first codes that differ and what would make it exact), or ``""`` when the two agree on
    every input: all 65,536 pairs for int8; for int16, the rescaled input on every code."""
    name = "SUB" if subtract else "ADD"
    fix = "equal input scales (the NPU then rescales by a power of two, exactly)"
    if bits == 16:
        why = _rescale_clause(in1_q, in2_q, out_q, bits)
        return f"int16 {name}: {why}; {fix} keep it exact" if why else ""
    a, b = _CODES8[:, None], _CODES8[None, :]
    want = tflite_micro(a, b, in1_q, in2_q, out_q, act, subtract, bits)
    got = npu(a, b, in1_q, in2_q, out_q, act, subtract, bits)
    bad = np.argwhere(want != got)
    if not len(bad):
        return ""
    i, j = (int(v) for v in bad[0])
    why = _rescale_clause(in1_q, in2_q, out_q, bits) or \
        "the output requantization rounds the NPU's sum differently"
    return (f"int8 {name} codes ({i - 128}, {j - 128}) give {int(want[i, j])} in TFLite Micro "
            f"and {int(got[i, j])} on the Ethos-U ({len(bad)} of 65536 pairs differ): {why}; "
            f"{fix} keep it exact")
