"""ELEMENTWISE: binary add/sub/mul/min/max/shr/shl with IFM2 broadcast or a scalar, and
unary abs/clz/lrelu.

Add/sub scaling: with an operand singled out by IFM_PRECISION bits 8-9 (Vela's "advanced"
form) it is rescaled by OPA_SCALE/shift and the other is shifted left by 19 (14 for 16-bit
inputs), the factor Vela's scales assume for the larger-scaled input; otherwise each operand
is multiplied by its OPA/OPB_SCALE. The sum is then scaled by OFM_SCALE.
"""
from __future__ import annotations

import numpy as np

from . import rounding
from .errors import StreamError
from .feature_map import from_registers
from .memory import Memory
from .ops_common import (
    ShramInfo,
    global_scale,
    ofm_box,
    read_fm,
    rounding_mode,
    uses_global_scale,
    write_ofm,
)
from .registers import RegisterState

MUL, ADD, SUB, MIN, MAX, LRELU, ABS, CLZ, SHR, SHL = range(10)
UNARY = (LRELU, ABS, CLZ)
_NAMES = ("MUL", "ADD", "SUB", "MIN", "MAX", "LRELU", "ABS", "CLZ", "SHR", "SHL")
_BCAST_H, _BCAST_W, _BCAST_C, _REVERSED, _SCALAR = 1, 2, 4, 64, 128


def _ifm2(mem: Memory, state: RegisterState, shape) -> np.ndarray:
    b = state.param("IFM2_BROADCAST")
    ifm2 = from_registers(state, "IFM2")
    if b & _SCALAR:
        if mem.dry:
            return None
        return np.full(shape, state.signed("IFM2_SCALAR") - ifm2.zero_point, np.int64)
    h, w, c = shape
    h2, w2, c2 = (1 if b & _BCAST_H else h), (1 if b & _BCAST_W else w), (1 if b & _BCAST_C else c)
    x = read_fm(mem, ifm2, h2, w2, c2, "the IFM2")
    return None if x is None else np.broadcast_to(x - ifm2.zero_point, shape)


def _clz32(x: np.ndarray) -> np.ndarray:
    u = np.asarray(x, np.int64) & 0xFFFFFFFF
    out = np.full(u.shape, 32, np.int64)
    nz = u > 0
    out[nz] = 31 - np.floor(np.log2(u[nz].astype(np.float64))).astype(np.int64)
    return out


# the modes whose result goes through OFM_SCALE, and those that take no output scaling
_SCALED = (MUL, ADD, SUB, ABS)


def _check_scale_mode(state: RegisterState, mode: int) -> None:
    """OFM_PRECISION bit 8 picks the global OFM_SCALE (Vela's choice for MUL/ADD/SUB/ABS/LRELU)
    or per-channel scales (its choice for MIN/MAX/SHR/SHL/CLZ, which it leaves unscaled).
    The other pairings are not modelled."""
    if mode in _SCALED and not uses_global_scale(state):
        raise StreamError(f"elementwise {_NAMES[mode]} with per-channel scaling (OFM_PRECISION "
                          "bit 8 clear) is not modelled; only the global OFM_SCALE is")
    if mode not in _SCALED and uses_global_scale(state) and global_scale(state) != (1, 0):
        raise StreamError(f"elementwise {_NAMES[mode]} with OFM_SCALE {global_scale(state)} "
                          "is not modelled; it runs unscaled (OFM_SCALE (1, 0) or OFM_PRECISION "
                          "bit 8 clear)")


def run_elementwise(mem: Memory, state: RegisterState, mode: int, shram: ShramInfo) -> None:
    if mode >= len(_NAMES):
        raise StreamError(f"elementwise mode {mode} is unknown")
    if mode != LRELU:
        _check_scale_mode(state, mode)
    if mode == SHR and rounding_mode(state) not in (rounding.NATURAL, rounding.TFL):
        # Vela writes SHR with NATURAL (its softmaxes' "HalfUp" shifts), and with TFL in
        # Vela 3.x's int16 softmax (rfcs/0007 section 7, rule 6)
        raise StreamError(f"SHR with rounding mode {rounding_mode(state)} is not modelled; only "
                          f"NATURAL ({rounding.NATURAL}), which adds half before shifting, and "
                          f"TFL ({rounding.TFL}), which rounds ties away from zero")
    shape = ofm_box(mem, state)
    ifm = from_registers(state, "IFM")
    a = read_fm(mem, ifm, *shape, "the IFM")
    if a is None:  # a dry run: what the operation reads and writes, its faults
        if mode not in UNARY:
            _ifm2(mem, state, shape)
        if mode not in (ABS, CLZ) and mode in UNARY:
            raise StreamError(f"elementwise {_NAMES[mode]} is not modelled")
        write_ofm(mem, state, None, shram, shape)
        return
    a -= ifm.zero_point
    rmode = rounding_mode(state)
    scale, shift = global_scale(state)
    if mode in UNARY:
        if mode == ABS:
            out = rounding.scale(np.abs(a), scale, shift, rmode)
        elif mode == CLZ:
            out = _clz32(a)
        else:
            raise StreamError(f"elementwise {_NAMES[mode]} is not modelled")
        write_ofm(mem, state, out, shram)
        return
    b = _ifm2(mem, state, shape)
    if state.param("IFM2_BROADCAST") & _REVERSED:
        a, b = b, a
    if mode in (ADD, SUB):
        op_to_scale = (state.param("IFM_PRECISION") >> 8) & 3
        plain_shift = 19 if ifm.dtype.itemsize == 1 else 14
        opa, opa_shift = state.payload("OPA_SCALE"), state.param("OPA_SCALE") & 0x3F
        opb = state.payload("OPB_SCALE")
        if op_to_scale:
            scaled = rounding.scale(a if op_to_scale == 1 else b, opa, opa_shift, rounding.TFL)
            plain = (b if op_to_scale == 1 else a) << plain_shift
            a, b = (scaled, plain) if op_to_scale == 1 else (plain, scaled)
        else:
            a, b = a * opa, b * opb
        acc = a + b if mode == ADD else a - b
        out = rounding.scale(acc, scale, shift, rmode)
    elif mode == MUL and ifm.dtype.itemsize == 4:
        # a 32-bit product goes through the shift alone (the multiplier is not applied):
        # Vela writes multiplier 1 or 2**30 with the shift that makes the product the
        # intended Q-format (31 for gemmlowp's doubling high multiply in its softmax, 31 + n
        # for MEAN's multiply-then-shift), so applying 2**30 as well would halve those
        out = rounding.scale(a * b, 1, shift, rmode)
    elif mode == MUL:
        out = rounding.scale(a * b, scale, shift, rmode)
    elif mode in (MIN, MAX):
        out = np.minimum(a, b) if mode == MIN else np.maximum(a, b)
    elif mode == SHR:
        s = np.clip(b, 0, 63)
        if rmode == rounding.TFL:
            out = rounding.rounding_divide_by_pot(a, s)
        else:
            half = np.where(s > 0, np.int64(1) << np.maximum(s - 1, 0), 0)
            out = (a + half) >> s
    elif mode == SHL:
        out = (a << np.clip(b, 0, 31)).astype(np.int64)
        out = ((out + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)
    else:
        raise StreamError(f"elementwise {_NAMES[mode]} is not modelled")
    write_ofm(mem, state, out, shram)
