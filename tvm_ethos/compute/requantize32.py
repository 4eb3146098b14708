"""QUANTIZE of int16 into int32 as TFLite Micro's kernel computes it, and where the Ethos-U's
form of it is that kernel.

TFLite Micro's kernel (``Requantize``) computes ``MultiplyByQuantizedMultiplier(x - zp_in, M,
shift) + zp_out`` in int32, ``(M, shift)`` quantized in double from ``scale_in / scale_out``:
a left shift by ``max(shift, 0)``, the doubling high multiply (ties up), a rounding right
shift by ``max(-shift, 0)`` (ties away from zero), then ``+ zp_out`` and the clamp to int32.

The NPU's form is one 1x1 average pool with an int32 OFM whose explicit scale is ``(M, 31 -
shift)`` in the TFL rounding mode: the same roundings on a product that never wraps. The two
agree where the kernel's int32 arithmetic does not wrap (its left shift of ``x - zp_in`` keeps
within 32 bits for every input code) and where the output's zero point is 0: a 32-bit OFM
takes no zero point (rfcs/0007 section 7, rule 2), and TFLite's converter writes int32
tensors with zero point 0. Plain numpy, no TVM.
"""
from __future__ import annotations

from tvm_ethos.compute.quant import dtype_range, f32, quantize_multiplier

#: the input types the pool takes into int32 (TFLite Micro's int8 -> int32 has no LiteRT
#: kernel to check the host against; it stays a TFLite operator)
INPUT_TYPES = ("int16",)

_INT32_MIN, _INT32_MAX = dtype_range("int32")


def multiplier(in_q: tuple[float, int], out_q: tuple[float, int]) -> tuple[int, int]:
    """TFLite's ``(M, shift)`` of the requantization (shift > 0: a left shift first)."""
    return quantize_multiplier(f32(in_q[0]) / f32(out_q[0]))


def widest_left_shift(in_dtype: str, zero_point: int) -> int:
    """The largest left shift of ``x - zero_point`` that keeps every code of ``in_dtype`` within
    int32."""
    lo, hi = dtype_range(in_dtype)

    def fits(shift: int) -> bool:
        return (lo - zero_point) << shift >= _INT32_MIN and (hi - zero_point) << shift <= _INT32_MAX

    shift = 0
    while fits(shift + 1):
        shift += 1
    return shift


def npu_refusal(in_dtype: str, in_q: tuple[float, int], out_q: tuple[float, int]) -> str:
    """Why the NPU's pool is not TFLite Micro's int32 QUANTIZE of ``in_dtype`` codes quantized
    ``in_q`` into ``out_q``, naming what would make it so; ``""`` where it is."""
    if in_dtype not in INPUT_TYPES:
        return (f"a QUANTIZE of {in_dtype} into int32; the NPU takes "
                f"{', '.join(INPUT_TYPES)} into int32 (LiteRT has no {in_dtype} -> int32 "
                "kernel to run the host's against)")
    if out_q[1] != 0:
        return (f"a QUANTIZE into int32 with output zero point {out_q[1]}; the NPU's 32-bit "
                "output adds no zero point (quantize the output with zero point 0, as "
                "TFLite's converter does)")
    _, shift = multiplier(in_q, out_q)
    widest = widest_left_shift(in_dtype, in_q[1])
    if shift > widest:
        return (f"a QUANTIZE into int32 whose scales ({in_q[0]:g} -> {out_q[0]:g}) make "
                f"TFLite Micro's kernel shift (x - {in_q[1]}) left by {shift} bits in int32, "
                f"which wraps for the input's extreme codes where the NPU's product does not "
                f"(an output scale of at least the input's / 2**{widest - 1} keeps it within "
                "32 bits)")
    return ""
