"""Where TFLite's integer PRELU kernels leave int32, and so where the Ethos-U's form is not
theirs.

The kernels (TFLite Micro's int8 and int16, LiteRT's uint8: one template over the code type)
take ``v = x - zp_in`` to ``MultiplyByQuantizedMultiplier(v, s_in / s_out)`` where ``v >= 0``
and to ``MultiplyByQuantizedMultiplier(v * (alpha - zp_alpha), s_in * s_alpha / s_out)``
below (``compute.quant.prelu_multipliers``). A multiplier above one is a left shift of its
operand before the doubling high multiply, done in int32: ``x * (1 << shift)`` wraps where
the shifted value leaves int32, and the kernel goes on with the wrapped value. The NPU's
product is 64 bits wide and never wraps, so the two differ exactly where the shift wraps.

Every input code reaches every alpha code (alpha is a constant broadcast over the input),
and a shift grows with its operand's magnitude, so a branch wraps for some input iff it wraps
on its largest operand: the highest code on the identity branch, the lowest code times the
alpha offset of either sign on the alpha branch. Plain numpy, no TVM.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from tvm_ethos.compute.quant import INT32_MAX, INT32_MIN, dtype_range, prelu_multipliers


class WrappingShift(NamedTuple):
    """One branch's shift that wraps: the branch, its left shift, the operand it wraps on and
    the input (and alpha) codes that give that operand."""

    branch: str
    shift: int
    operand: int
    input_code: int
    alpha_code: int | None


def _wraps(operand: int, shift: int) -> bool:
    return shift > 0 and not INT32_MIN <= operand * (1 << shift) <= INT32_MAX


def wrapping_shifts(dtype: str, in_q: tuple, alpha_q: tuple, out_q: tuple,
                    alpha_codes) -> tuple[WrappingShift, ...]:
    """The branches of the ``dtype`` kernel whose left shift wraps for some input code, with
    the codes it wraps on (none: the kernel's int32 arithmetic is exact for every input)."""
    (_, s1), (_, s2) = prelu_multipliers(in_q[0], alpha_q[0], out_q[0])
    lo, hi = dtype_range(dtype)
    zp_in, zp_alpha = int(in_q[1]), int(alpha_q[1])
    out = []
    if hi - zp_in > 0 and _wraps(hi - zp_in, s1):
        out.append(WrappingShift("identity", s1, hi - zp_in, hi, None))
    codes = np.asarray(alpha_codes, np.int64).ravel()
    if lo - zp_in < 0 and codes.size:
        for a in (int(codes.max()), int(codes.min())):
            operand = (lo - zp_in) * (a - zp_alpha)
            if _wraps(operand, s2):
                out.append(WrappingShift("alpha", s2, operand, lo, a))
                break
    return tuple(out)


def npu_refusal(dtype: str, in_q: tuple, alpha_q: tuple, out_q: tuple, alpha_codes) -> str:
    """Why the NPU's form is not the ``dtype`` kernel for this quantization (its left shift
    wraps int32 for some code), or ``""``."""
    found = wrapping_shifts(dtype, in_q, alpha_q, out_q, alpha_codes)
    if not found:
        return ""
    w = found[0]
    codes = f"input code {w.input_code}" + (
        "" if w.alpha_code is None else f" and alpha code {w.alpha_code}")
    return (f"TFLite's {dtype} PRELU shifts its {w.branch} branch left by {w.shift} bits in "
            f"int32, which wraps for {codes} ({w.operand} << {w.shift}); the NPU's 64-bit "
            "product does not wrap (a larger output scale keeps the shift within int32)")
