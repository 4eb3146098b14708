"""TFLite Micro's int8 RSQRT as a table of one output code per input code.

TFLite Micro's kernel (``RsqrtEvalQuantized<int8_t>``, ``micro/kernels/elementwise.cc``) takes
``v = code - zp_in``, finds ``1 / sqrt(v)`` as a Q31 multiplier and shift with TFLite's
fixed-point Newton-Raphson (``GetInvSqrtQuantizedMultiplierExp``, five iterations in gemmlowp's
Q3 arithmetic), applies it to 1 scaled by 2**20, then rescales the result by its prepare's
``1 / (sqrt(s_in) * s_out)`` (double, ``QuantizeMultiplier``) with the 2**20 taken back. The
result depends on one input code only, so the whole operator is a 256-entry table computed
here at compile time: the llvm host and the TIR emulator gather from it (``te_ops``) and the
Ethos-U applies it as its LUT activation (``ops_lut``), as Vela 5.2 does. ``v = 0`` gives the
largest code, as the kernel does; a code below the input zero point (a negative real input)
makes TFLite Micro fail the invocation, so its entry (the largest code too) is no result
anyone compares with. TFLite Micro runs the same kernel on int16 (zero points 0, 32,768
defined codes), but no table of the NPU's holds that: its 16-bit LUT is 512 linear intervals
of 128 codes, and the Newton-Raphson's results are not linear in any of most of them; so the
table here is int8's. Plain Python integers, no TVM.
"""
from __future__ import annotations

import math

import numpy as np

from tvm_ethos.compute.fixed_point import mbqm, rdbpot, srdhm, srmpot, wrap32
from tvm_ethos.compute.quant import INT32_MAX, f32, quantize_multiplier

#: the one quantized type whose RSQRT is a table here (an NPU LUT of 256 entries)
TYPES = ("int8",)
#: the kernel's scaling of the intermediate 1 / sqrt(v) ("shift to keep value integer")
_KSHIFT = 20


def inv_sqrt_multiplier(value: int) -> tuple[int, int]:
    """TFLite's ``GetInvSqrtQuantizedMultiplierExp(value, kReverseShift)``: (Q31 multiplier,
    left shift) with ``multiplier * 2**(shift - 31) ~= 1 / sqrt(value)``."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= (1 << 29):
        value //= 4
        shift += 1
    pairs = ((32 - value.bit_length()) - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    half = rdbpot(value >> 1, 1)                    # F3 input / 2
    half_three = (1 << 28) + (1 << 27)               # F3 1.5
    x = 1 << 28                                      # F3 1.0
    for _ in range(5):
        x3 = srmpot(srdhm(srdhm(x, x), x), 6)     # Rescale<3> of an F9
        x = srmpot(wrap32(srdhm(half_three, x) - srdhm(half, x3)), 3)
    x = srdhm(x, 1518500250)                        # times sqrt(2) / 2 (F0)
    if shift < 0:
        x, shift = wrap32(x << -shift), 0
    return x, -shift


def output_multiplier(in_q: tuple, out_q: tuple) -> tuple[int, int]:
    """The prepare's ``QuantizeMultiplier(1 / (sqrt(s_in) * s_out))``, in double."""
    return quantize_multiplier(1.0 / (math.sqrt(f32(in_q[0])) * f32(out_q[0])))


def rsqrt_lut(dtype: str, in_q: tuple, out_q: tuple) -> np.ndarray:
    """RSQRT on every ``dtype`` code (entry ``code + 128``); ValueError naming the type where
    TFLite Micro's kernel does not take it."""
    if dtype not in TYPES:
        raise ValueError(f"{dtype}; the RSQRT table is computed for {', '.join(TYPES)} (an "
                         "int16 RSQRT is TFLite Micro's Newton-Raphson on each code, which no "
                         "16-bit NPU table equals)")
    multiplier, shift = output_multiplier(in_q, out_q)
    out = np.empty(256, np.int64)
    for code in range(-128, 128):
        value = code - int(in_q[1])
        if value <= 0:
            out[code + 128] = 127
            continue
        m, s = inv_sqrt_multiplier(value)
        data = mbqm(1, m, s + _KSHIFT)
        out[code + 128] = mbqm(data, multiplier, shift - _KSHIFT) + int(out_q[1])
    return np.clip(out, -128, 127).astype(np.int8)
