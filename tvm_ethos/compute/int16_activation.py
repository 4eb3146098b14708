"""TFLite's int16 LOGISTIC and TANH (``reference_integer_ops::Logistic`` / ``Tanh``, which
TFLite Micro runs) as a table of one output code per input code.

The kernels rescale the input to units of 1/(3 * 4096) with an integer multiplier and a
rounding shift their prepare derives from the input scale (a power-of-two scale of 2**-12, or
2**-11 for TANH, takes the exact multiplier 3 or 6), then interpolate TFLite's 256-entry
sigmoid table. That interpolation is the Ethos-U output unit's own int16 tanh / sigmoid
activation (``ethosu_stream.activation16`` models it), so the NPU runs the operator as one
operation; the llvm host gathers from the 65536-entry table computed here. The kernels take
zero points 0 and an output scale of 2**-15 only (``refusal``).
"""
from __future__ import annotations

import math

import numpy as np

from ethos_arch.ops import Op
from ethosu_stream import activation16

#: the operator kinds this module computes
KINDS = (Op.SIGMOID, Op.TANH)


def _checked_log2(x: float) -> tuple[bool, int]:
    """TFLite's ``CheckedLog2`` in float32: (whether ``x`` is a power of two within 1e-3 of
    its log2, that log2 rounded)."""
    log2 = np.float32(np.float32(math.log(np.float32(x))) * np.float32(1 / math.log(2.0)))
    rounded = np.float32(np.round(log2))
    return bool(abs(log2 - rounded) < np.float32(1e-3)), int(rounded)


def input_scaling(kind: str, in_scale: float) -> tuple[int, int]:
    """(multiplier, right shift) taking an input code to units of 1/(3 * 4096), as TFLite's
    prepare and kernel compute them: ``(x * multiplier + 2**(shift - 1)) >> shift``."""
    pot, log2 = _checked_log2(in_scale)
    shift = 12 + log2
    if pot and (shift == 0 or (kind == Op.TANH and shift == 1)):
        return 3 << shift, 0
    multiplier, shift = float(np.float32(in_scale)) * 4096.0 * 3.0, 0
    while multiplier <= 32767.0 / 2.0 and shift <= 30:
        shift += 1
        multiplier *= 2.0
    return int(multiplier), shift


def refusal(kind: str, in_q: tuple, out_q: tuple) -> str:
    """Why TFLite's int16 kernel does not run ``kind`` with these quantizations (a clause),
    or ``""``."""
    if int(in_q[1]) or int(out_q[1]):
        return f"zero points {in_q[1]} -> {out_q[1]}; TFLite's int16 kernel takes 0 -> 0"
    pot, log2 = _checked_log2(out_q[0])
    if not pot or log2 != -15:
        return f"output scale {out_q[0]:g}; TFLite's int16 kernel writes 2**-15"
    return ""


def _activation16():
    """The functional model's int16 tanh / sigmoid (TFLite's table and interpolation), the
    one statement of the data the results depend on; imported here, as it needs the vela
    extra (every Ethos-U path does)."""
    return activation16


def int16_lut(kind: str, in_q: tuple, out_q: tuple) -> np.ndarray:
    """``kind`` on every int16 code (entry ``code + 32768``); ValueError (:func:`refusal`'s
    reason) where TFLite's kernel refuses the quantization."""
    why = refusal(kind, in_q, out_q)
    if why:
        raise ValueError(why)
    multiplier, shift = input_scaling(kind, in_q[0])
    x = np.arange(-32768, 32768, dtype=np.int64)
    scaled = (x * multiplier + ((1 << shift) >> 1)) >> shift
    functions = _activation16()
    out = functions.tanh16(scaled) if kind == Op.TANH else functions.sigmoid16(scaled)
    return np.clip(out, -32768, 32767).astype(np.int16)
