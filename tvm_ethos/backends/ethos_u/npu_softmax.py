"""An 8-bit SOFTMAX (int8 to int8, or to int16 as TFLite writes a wider output; uint8 to uint8)
as a sequence of NPU operations, bit-exact with TFLite's reference kernel.

The arithmetic is ``fixed_point.softmax_8bit`` step by step; what the NPU offers for it was
read from Vela 5.2 (``softmax.py`` and the streams of its C++ core): a 256-entry LUT with
int32 entries applied to an elementwise result whose OFM is int32 (indexed by the clamped
value, so the subtraction ``x - max`` with OFM zero point 127 indexes entry ``d + 255``),
REDUCE_SUM over the depth, CLZ/SHL/SHR, and 32-bit MUL whose 64-bit product is rounded by the
OFM shift alone (shift 31 is gemmlowp's doubling high multiply). LUTs live in SHRAM and are
copied there from flash by a DMA before the operation that uses them.

Layout: the ``R`` rows of ``n`` values are a ``1 x R x n`` feature map (the row maximum a
max pool over an ``R x n x 1`` view of the same bytes); each per-row value is a
``1 x R x 1`` int32 map the NPU broadcasts over the depth as IFM2. Every int32 map has zero
point 0 and no scale, so no step depends on how the hardware treats zero points of 32-bit
maps; constants are 1x1x1 int32 maps in flash.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from planner.parts import softmax16_work_bytes
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, feature_map
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError, vela_api
from tvm_ethos.compute import fixed_point as fp
from tvm_ethos.compute import softmax16 as sm16

#: base-pointer index of SHRAM as a DMA destination (Vela's ``BASE_PTR_INDEX_MEM2MEM``)
SHRAM_REGION = 0x103
_ALIGN = 16
#: per output type: (1 / output scale, zero point) of TFLite's 8-bit-input SOFTMAX
OUTPUT_QUANTIZATION = {"int8": (256, -128), "int16": (65536, -32768), "uint8": (256, 0)}
#: the (input, output) types of TFLite's 8-bit SOFTMAX kernel the lowering takes: the kernel
#: reads only differences of input codes (``x - max``), so int8 and uint8 inputs are one
#: arithmetic, and the output is the rounded quotient plus the output type's lowest code
#: (LiteRT's reference kernel also writes uint8 to int16, which Vela and TFLite Micro do not)
TYPES = frozenset({("int8", "int8"), ("int8", "int16"), ("uint8", "uint8")})
#: rows of n values the sum of exponentials (each at most 2**19 in Q12.19) cannot overflow
MAX_DEPTH = 4095
#: per-row int32 maps the lowering keeps (sum, clz, clz - 1, half, the Newton-Raphson's
#: intermediates and its two alternating estimates, the output shift)
_ROW_MAPS = 12


def _align(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def geometry(q) -> tuple[int, int]:
    """(rows, depth) of the SOFTMAX, or UnsupportedOperatorError saying why not."""
    shape = tuple(int(s) for s in q.in_shapes[0])
    if (q.in_dtypes[0], q.out_dtype) not in TYPES:
        raise UnsupportedOperatorError(
            "SOFTMAX", f"{q.in_dtypes[0]} -> {q.out_dtype}; the NPU lowering takes int8 -> "
            "int8, int8 -> int16 or uint8 -> uint8")
    scale, zp = q.out_q
    steps, lowest = OUTPUT_QUANTIZATION[q.out_dtype]
    if zp != lowest or abs(float(scale) * steps - 1) > 1e-3:
        raise UnsupportedOperatorError(
            "SOFTMAX", f"output quantization ({scale}, {zp}); TFLite's {q.in_dtypes[0]} -> "
            f"{q.out_dtype} SOFTMAX requires (1/{steps}, {lowest})")
    n = shape[-1]
    if n > MAX_DEPTH:
        raise UnsupportedOperatorError(
            "SOFTMAX", f"a depth of {n}; over {MAX_DEPTH} values the int32 sum of "
            "exponentials can overflow")
    return int(np.prod(shape[:-1])), n


def work_bytes(q) -> int:
    """Scratch the lowering needs beside its input and output (int32 intermediates), up to
    the last byte of its last row map (which the lowering writes), so that a Plan holding it
    touches all it holds."""
    rows, n = geometry(q)
    return 2 * _align(4 * rows * n) + _align(rows) + (_ROW_MAPS - 1) * _align(4 * rows) + \
        4 * rows


@dataclass
class _Builder:
    """Appends NPU operations; ``block_config`` picks each block config."""

    api: object
    rows: int
    work: int  # scratch offset of the lowering's own maps
    flash: object
    block_config: object
    ops: list = field(default_factory=list)
    _next: int = 0
    _end: int = 0   # the end of the last map allocated

    def scratch(self, shape, dtype="int32") -> FmSlot:
        nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
        slot = FmSlot(1, self.work + self._next, shape, dtype, None, 0)
        self._end = self._next + nbytes
        self._next += _align(nbytes)
        return slot

    def row(self) -> FmSlot:
        return self.scratch((1, self.rows, 1))

    def const(self, value: int) -> FmSlot:
        rng = self.flash.add(np.int32(value).tobytes())
        return FmSlot(0, rng.address, (1, 1, 1), "int32", None, 0)

    def _add(self, npu, name: str):
        npu.block_config = self.block_config(npu)
        npu.name = f"softmax_{name}"
        self.ops.append(npu)

    def elementwise(self, kind: str, a: FmSlot, b: FmSlot | None, out: FmSlot, *, reverse=False,
                    rescale=None, natural=False, lut=False):
        """``out = a <kind> b`` (``b <kind> a`` with ``reverse``: the NPU broadcasts only
        its second operand; ``b`` None for a unary operation)."""
        api = self.api
        npu = api.NpuElementWiseOperation(getattr(api.NpuElementWiseOp, kind))
        npu.ifm, npu.ofm = feature_map(a), feature_map(out)
        if b is not None:
            npu.ifm2 = feature_map(b)
        npu.reversed_operands = reverse
        npu.rounding_mode = api.NpuRoundingMode.NATURAL if natural else api.NpuRoundingMode.TFL
        if lut:
            npu.activation = api.NpuActivation(api.NpuActivationOp.TABLE_LOOKUP)
            npu.activation.lookup_table_index = 0
        else:
            npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        if rescale is not None:
            npu.rescale = rescale
        self._add(npu, kind.lower())
        return out

    def pool(self, kind: str, ifm: FmSlot, out: FmSlot, kernel_width: int):
        api = self.api
        npu = api.NpuPoolingOperation(getattr(api.NpuPoolingOp, kind))
        npu.ifm, npu.ofm = feature_map(ifm), feature_map(out)
        npu.kernel = api.NpuKernel(kernel_width, 1)
        npu.padding = api.NpuPadding(0, 0, 0, 0)
        npu.rounding_mode = api.NpuRoundingMode.TFL
        npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        self._add(npu, kind.lower())
        return out

    def multiply(self, a: FmSlot, b: FmSlot, out: FmSlot, shift: int):
        """round(a * b / 2**shift), ties up, saturated: 31 is a doubling high multiply.
        Vela's streams write the multiplier 2**30 (never applied to a 32-bit product)."""
        return self.elementwise("MUL", a, b, out, rescale=(1 << 30, shift))


def softmax_ops(q, ifm: FmSlot, ofm: FmSlot, work: int, flash, lut_address: int,
                block_config) -> list:
    """The NPU operations of one 8-bit SOFTMAX (int8 to int8 or int16, uint8 to uint8) reading
    ``ifm`` and writing ``ofm`` (both in the scratch arena), its intermediates at ``work``
    (``work_bytes(q)`` bytes). The input is read as codes of its own type with zero point 0:
    only the differences to the row maximum matter, which are the same for either type."""
    api = vela_api()
    rows, n = geometry(q)
    b = _Builder(api, rows, work, flash, block_config)
    full = (1, rows, n)
    codes = q.in_dtypes[0]
    x = FmSlot(ifm.region, ifm.offset, full, codes, None, 0)
    exps = b.scratch(full)
    spare = b.scratch(full)  # e >> 12, later the scaled exponentials
    row_max = b.scratch((1, rows, 1), codes)

    # the row maximum: a max pool across the depth of an R x n x 1 view of the same bytes
    b.pool("MAX", FmSlot(x.region, x.offset, (rows, n, 1), codes, None, 0),
           FmSlot(1, row_max.offset, (rows, 1, 1), codes, None, 0), n)
    # exp(x - max) from the LUT: OFM zero point 127 makes d in [-255, 0] index d + 255
    table = fp.exp_table(float(q.in_q[0][0]), float(q.attrs.get("beta", 1.0)))
    src = flash.add(table.astype("<i4").tobytes())
    b.ops.append(api.NpuDmaOperation(src, api.NpuAddressRange(SHRAM_REGION, lut_address,
                                                               src.length)))
    b.elementwise("SUB", x, row_max, FmSlot(1, exps.offset, full, "int32", None, 127), lut=True)

    # the Q12.19 sum of the exponentials and the reciprocal's operands
    acc = b.elementwise("SHR", exps, b.const(fp.SUM_INTEGER_BITS), spare, natural=True)
    total = b.pool("REDUCE_SUM", acc, b.row(), 1)
    clz = b.elementwise("CLZ", total, None, b.row())
    clz_m1 = b.elementwise("SUB", clz, b.const(1), b.row())
    half = b.elementwise("SHL", total, clz_m1, b.row())
    # Newton-Raphson for 1 / (1 + x) in Q2.29, from 48/17 - 32/17 * half
    start = b.multiply(half, b.const(fp.CNEG32_OVER_17), b.row(), 31)
    est = b.elementwise("ADD", start, b.const(fp.C48_OVER_17), b.row())
    one_q229, four = b.const(1 << 29), b.const(4)
    p, r, scaled, spare_est = b.row(), b.row(), b.row(), b.row()
    one_minus = b.row()
    for _ in range(3):
        b.multiply(half, est, p, 31)
        b.elementwise("SUB", p, one_q229, one_minus, reverse=True)  # 1 - half * x
        b.multiply(est, one_minus, r, 31)
        b.elementwise("MUL", r, four, scaled, rescale=(1, 0))  # Q4 -> Q2, saturating
        b.elementwise("ADD", est, scaled, spare_est)
        est, spare_est = spare_est, est
    # num_bits_over_unit + 31 - bits(output): 35 - clz for 8 bits, 27 - clz for int16
    top = 35 - fp.output_shift_drop(q.out_dtype)
    shift = b.elementwise("SUB", clz, b.const(top), b.row(), reverse=True)
    # e * 2x / 2**31 = e * x / 2**30, then the rounding shift to the output
    product = b.multiply(exps, est, spare, 30)
    b.elementwise("SHR", product, shift,
                  FmSlot(ofm.region, ofm.offset, full, q.out_dtype, None,
                         OUTPUT_QUANTIZATION[q.out_dtype][1]), natural=True)
    assert b._end <= work_bytes(q), "work_bytes must cover every intermediate"
    return b.ops


#: rows of an int16 SOFTMAX: its feature maps are 1 x rows x depth
MAX_ROWS = 65535
#: TFLite's recentring of the normalised sum (2**16 + 2**15) for the 1/(1 + x) table
_RECIPROCAL_CENTRE = (1 << 15) + (1 << 16)


def geometry16(shape: tuple[int, ...]) -> tuple[int, int]:
    """(rows, depth) of an int16 SOFTMAX over the last axis of ``shape``, or
    UnsupportedOperatorError saying why not."""
    n, rows = int(shape[-1]), int(np.prod(shape[:-1]))
    if n > MAX_DEPTH:
        raise UnsupportedOperatorError(
            "SOFTMAX", f"a depth of {n}; the int16 lowering takes rows of at most {MAX_DEPTH} "
            "values (its row maximum is one pooling kernel across the row)")
    if rows > MAX_ROWS:
        raise UnsupportedOperatorError(
            "SOFTMAX", f"{rows} rows; the int16 lowering takes at most {MAX_ROWS} (one feature "
            "map width, as Vela's IFM H*W < 65536)")
    return rows, n


def softmax16_ops(rows: int, n: int, in_scale: float, beta: float, ifm: FmSlot, ofm: FmSlot,
                  work: int, flash, lut_address: int, block_config) -> list:
    """The NPU operations of TFLite's int16 SOFTMAX (``compute.softmax16``) over ``rows``
    rows of ``n`` int16 codes at ``ifm`` into Q0.15 codes at ``ofm``, its intermediates at
    ``work`` (``planner.parts.softmax16_work_bytes``); the exponentials live in the output's
    bytes until the last operation overwrites them with the result.

    Vela's form (``softmax.py``'s int16 graph): the row maximum, the difference scaled by
    the input multiplier (a 32-bit MUL rounded by the shift alone, TFLite's two roundings),
    recentred and looked up in the exp table by an int16 ADD's 16-bit LUT, the sum, its
    leading zeros, the normalised sum recentred and looked up in the 1/(1 + x) table, and
    the product with each exponential shifted to Q0.15. The tables are the ones TFLite
    Micro builds (Vela's fixed reciprocal table differs from them in two entries), each
    copied into SHRAM before the operation that reads it; the sum is normalised as TFLite
    does (shift left by clz - 1, round off 14 bits), which fits 32 bits without Vela's
    subtraction of the leading one first."""
    api = vela_api()
    b = _Builder(api, rows, work, flash, block_config)
    full = (1, rows, n)
    x = FmSlot(ifm.region, ifm.offset, full, "int16", None, 0)
    diff = b.scratch(full)                  # x - max, then the product with 1/sum
    exps = FmSlot(ofm.region, ofm.offset, full, "int16", None, 0)
    row_max = b.scratch((1, rows, 1), "int16")
    exp_table, reciprocal_table = sm16.tables()

    def lut(table):
        src = flash.add(sm16.npu_table(table).astype("<u4").tobytes())
        b.ops.append(api.NpuDmaOperation(src, api.NpuAddressRange(SHRAM_REGION, lut_address,
                                                                   src.length)))

    b.pool("MAX", FmSlot(x.region, x.offset, (rows, n, 1), "int16", None, 0),
           FmSlot(1, row_max.offset, (rows, 1, 1), "int16", None, 0), n)
    b.elementwise("SUB", x, row_max, diff)
    multiplier, shift = sm16.input_multiplier(in_scale, beta)
    # a 32-bit MUL: the product rounded by the shift alone, ties up at 31 bits, then away
    # from zero past them (TFLite's doubling high multiply and rounding divide)
    b.elementwise("MUL", diff, b.const(multiplier), diff, rescale=(1 << 30, 31 - shift))
    lut(exp_table)
    b.elementwise("ADD", diff, b.const(32767), exps, lut=True)
    # three row maps, each reused in place once what it held is read for the last time
    total, clz, clz_m1 = b.row(), b.row(), b.row()
    b.pool("REDUCE_SUM", exps, total, 1)
    b.elementwise("CLZ", total, None, clz)
    b.elementwise("SUB", clz, b.const(1), clz_m1)
    shifted = b.elementwise("SHL", total, clz_m1, total)
    b.elementwise("SHR", shifted, b.const(14), shifted, natural=True)
    reciprocal = b.scratch((1, rows, 1), "int16")
    lut(reciprocal_table)
    b.elementwise("SUB", shifted, b.const(_RECIPROCAL_CENTRE), reciprocal, lut=True)
    right = b.elementwise("SUB", clz, b.const(31), clz_m1, reverse=True)
    b.elementwise("MUL", exps, reciprocal, diff, rescale=(1, 0))
    b.elementwise("SHR", diff, right, FmSlot(ofm.region, ofm.offset, full, "int16", None, 0),
                  natural=True)
    assert b._end == softmax16_work_bytes(rows, n), "the planned work must end at the last map"
    return b.ops
