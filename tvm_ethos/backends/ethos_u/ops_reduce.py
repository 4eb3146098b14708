"""REDUCE_MAX, REDUCE_MIN and SUM over the height, the width or both of an NHWC input on the
NPU.

REDUCE_MAX is a max pool whose window is the reduced extents (Vela's form of a global max;
over one axis alone the window sweeps the kept one with stride 1). TFLite's 8-bit
REDUCE_MAX picks a code and requires the output quantized as the input
(``patterns._read_reduce`` refuses any other), so the pool's comparison of codes is
TFLite's.

SUM is MEAN's depthwise convolution with all-one weights over the reduced extents
(``npu_ops.mean_op``, the IFM zero point subtracted by the NPU, as TFLite sums ``x - zp``):
TFLite's int8 SUM rescales that sum by the ``s_in / s_out`` multiplier alone, so the
per-channel scale is MEAN's with an element count of one and the only rounding is TFLite's
``MultiplyByQuantizedMultiplier``.

REDUCE_MIN has no pool of its own: the NPU pools by MAX, AVERAGE or SUM. Bitwise NOT
(``~v = -1 - v``; uint8 ``255 - v``) maps the 8-bit codes onto themselves reversing their
order, so
``min(x) = ~max(~x)``, both NOTs a 256-entry table: a 1x1 pool looks every code up in the NOT
table into working memory (``reduce_min_work_bytes``), then the single-window max pool looks
its result up in the same table (clamped to a fused activation's codes). Like REDUCE_MAX it
requires the output quantized as the input, so codes are what is compared. No table holds
the 65536 int16 codes: an int16 NOT ``-1 - v`` is an elementwise SUB from a constant -1 with
unit scales (Vela's form), before the pool into working memory and after it into the
output.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ethos_arch.mean_window import MeanWindow
from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u.npu_ops import (
    FmSlot,
    activation,
    feature_map,
    mean_weights,
    pool_op,
)
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    FLASH_REGION,
    SCRATCH_REGION,
    UnsupportedOperatorError,
    vela_api,
)
from tvm_ethos.compute.quant import f32, quantize_multiplier

#: the axes of an NHWC input whose reduction is one window
SPATIAL_AXES = ((1,), (2,), (1, 2))


def reduction_window(op) -> MeanWindow:
    """The window of a reduction over the height, the width or both of an NHWC input (a
    MEAN's window: the whole of a reduced axis, 1 along a kept one, swept along it)."""
    axes = tuple(op.attrs.get("axis") or ())
    if axes not in SPATIAL_AXES or len(op.in_shapes[0]) != 4:
        raise UnsupportedOperatorError(op.tflite_name,
                                       f"a reduction over axes {op.attrs.get('axis')}")
    _, h, w, c = (int(s) for s in op.in_shapes[0])
    return MeanWindow((h, w, c), (h if 1 in axes else 1, w if 2 in axes else 1))


def reduce_max_op(op, ifm: FmSlot, ofm: FmSlot):
    """The max pool of REDUCE_MAX: one window of the reduced extents (the whole input where
    both are reduced), stride 1 along a kept axis."""
    win = reduction_window(op)
    pool = dataclasses.replace(op, kind=Op.MAX_POOL2D,
                               attrs={"pool_size": win.kernel, "strides": (1, 1),
                                      "padding": (0, 0, 0, 0)})
    return pool_op(pool, dataclasses.replace(ifm, shape=win.view),
                   dataclasses.replace(ofm, shape=win.out_view))


def reduce_sum_constants(op, channels: int) -> tuple:
    """(all-one weights, per-channel (multiplier, NPU shift)) of SUM's depthwise
    convolution: TFLite's ``s_in / s_out`` multiplier."""
    reduction_window(op)
    m, s = quantize_multiplier(f32(op.in_q[0][0]) / f32(op.out_q[0]))
    if not 0 <= 31 - s <= 63:
        raise UnsupportedOperatorError(op.tflite_name, f"a scale shift of {s}")
    return mean_weights(op), [(int(m), 31 - int(s))] * channels


#: base-pointer index of SHRAM as a DMA destination (Vela's ``BASE_PTR_INDEX_MEM2MEM``)
_SHRAM_REGION = 0x103
#: every int8 code's bitwise NOT, entry ``code + 128``
NOT_TABLE = np.bitwise_not(np.arange(-128, 128, dtype=np.int64))
#: every uint8 code's bitwise NOT (``255 - v``, which reverses their order too), entry ``code``
UINT8_NOT_TABLE = 255 - np.arange(256, dtype=np.int64)


def not_table(dtype: str) -> np.ndarray:
    """The bitwise-NOT table of an 8-bit type's codes, in the order the NPU's 256-entry
    table is indexed (its least code first)."""
    tables = {"int8": NOT_TABLE, "uint8": UINT8_NOT_TABLE}
    if dtype not in tables:
        raise UnsupportedOperatorError("REDUCE_MIN", f"{dtype} codes; the bitwise-NOT table "
                                       "holds the 256 codes of int8 or uint8")
    return tables[dtype]


def _dense_bytes(shape: tuple[int, ...], dtype: str) -> int:
    return int(np.prod(shape)) * np.dtype(dtype).itemsize


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def reduce_min_work_bytes(q) -> int:
    """The working memory of REDUCE_MIN: its input's NOT in its own type (every byte
    written, so that a Plan holding it touches all it holds); int16 the pool's result too,
    NOT-ed by a last SUB into the output."""
    win = reduction_window(q)
    flipped = _dense_bytes(win.view, q.in_dtypes[0])
    if q.in_dtypes[0] != "int16":
        return flipped
    return _aligned(flipped) + _dense_bytes(win.out_view, q.in_dtypes[0])


def looked_up(npu, table: np.ndarray, em) -> list:
    """``npu`` looking its output up in ``table`` (put in SHRAM slot 0 by the DMA returned
    just before it: the operations between may use that SHRAM), its block not chosen; zero
    points 0 and unit scales, so the table sees codes."""
    api = vela_api()
    src = em.flash.add(table.astype(np.int8).tobytes())
    dma = api.NpuDmaOperation(src, api.NpuAddressRange(_SHRAM_REGION, em.lut_address,
                                                       src.length))
    npu.activation = api.NpuActivation(api.NpuActivationOp.TABLE_LOOKUP)
    npu.activation.lookup_table_index = 0
    npu.rounding_mode = api.NpuRoundingMode.TFL
    return [dma, npu]


def _table_lookup(npu, table: np.ndarray, em) -> list:
    """:func:`looked_up`, the block chosen."""
    ops = looked_up(npu, table, em)
    npu.block_config = em.block(npu)
    return ops


def not_op(x: FmSlot, flipped: FmSlot):
    """The 1x1 identity pool from ``x`` into ``flipped`` that, looked up in
    :data:`NOT_TABLE`, writes each code's NOT: a max pool of the NOTs is the NOT of the
    minimum."""
    api = vela_api()
    from ethosu.vela.operation import ExplicitScaling  # Vela is the optional 'vela' extra

    negate = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
    negate.ifm, negate.ofm = feature_map(x), feature_map(flipped)
    negate.kernel = api.NpuKernel(1, 1)
    negate.padding = api.NpuPadding(0, 0, 0, 0)
    negate.rescale = ExplicitScaling(False, [0], [1])   # no rescale: the codes themselves
    negate.name = "reduce_min_not"
    return negate


def not16_op(x: FmSlot, flipped: FmSlot, em):
    """The int16 bitwise NOT ``-1 - v`` of ``x`` into ``flipped``: an elementwise SUB of
    ``x`` from a constant -1 (the operands reversed, the NPU broadcasting the second one),
    every scale one, so no rescale; ``-1 - v`` of an int16 code is an int16 code."""
    api = vela_api()
    src = em.flash.add(np.int16(-1).tobytes())
    minus_one = FmSlot(FLASH_REGION, src.address, (1, 1, 1), "int16", 1.0, 0)
    npu = api.NpuElementWiseOperation(api.NpuElementWiseOp.SUB)
    npu.ifm, npu.ifm2, npu.ofm = feature_map(x), feature_map(minus_one), feature_map(flipped)
    npu.reversed_operands = True
    npu.rounding_mode = api.NpuRoundingMode.TFL
    npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    npu.name = "reduce_min_not"
    npu.block_config = em.block(npu)
    return npu


def negated(x: FmSlot, flipped: FmSlot, em) -> list:
    """The operations writing the NOT of ``x`` into ``flipped``, blocks chosen: an int16
    SUB from -1 (:func:`not16_op`), an 8-bit identity pool looked up in the NOT table."""
    if x.dtype == "int16":
        return [not16_op(x, flipped, em)]
    return _table_lookup(not_op(x, flipped), not_table(x.dtype), em)


def reduce_min_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The operations of one REDUCE_MIN: NOT into working memory (``em.work``), then the
    single-window max pool whose output is NOT-ed (and clamped) by its table; int16 (no
    table of 65536 codes) NOT-s with SUBs from -1, the pool's result in working memory."""
    api = vela_api()
    win = reduction_window(q)
    (h, w, c), (kh, kw) = win.view, win.kernel
    if q.in_q[0] != q.out_q:
        raise UnsupportedOperatorError(q.tflite_name, "an output quantized unlike its input")
    unit = {"scale": 1.0, "zero_point": 0}
    x = dataclasses.replace(operands[0], shape=(h, w, c), **unit)
    flipped = FmSlot(SCRATCH_REGION, em.work, (h, w, c), x.dtype, 1.0, 0)
    out = dataclasses.replace(ofm, shape=win.out_view, **unit)
    wide = x.dtype == "int16"
    maxima = FmSlot(SCRATCH_REGION, em.work + _aligned(_dense_bytes(win.view, x.dtype)),
                    win.out_view, x.dtype, 1.0, 0) if wide else out

    pool = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    pool.ifm, pool.ofm = feature_map(flipped), feature_map(maxima)
    pool.kernel = api.NpuKernel(kw, kh)
    pool.padding = api.NpuPadding(0, 0, 0, 0)
    pool.name = "reduce_min"
    if wide:
        pool.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        pool.block_config = em.block(pool)
        last = not16_op(maxima, out, em)
        last.activation = activation(q, out)   # a fused clamp, in codes
        return [not16_op(x, flipped, em), pool, last]
    negate = not_op(x, flipped)
    # the zero point moves the fused clamp to codes: ofm codes are the table's entries
    table = not_table(x.dtype)
    last = np.clip(table, q.act_min, q.act_max)
    return _table_lookup(negate, table, em) + _table_lookup(pool, last, em)
