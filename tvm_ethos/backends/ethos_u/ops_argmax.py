"""ARG_MAX along the depth as NPU operations, in Vela's form.

The NPU has no arg-max, but its max pool keeps the largest int16. Each code ``x`` (int8 or
uint8, read at unit quantization: a positive scale orders codes as their real values) and its
channel ``c`` of ``C`` are packed into one int16 ``x * 128 + (C - 1 - c)`` (at most 32766 for a
uint8 255 and 127 channels): a larger code always wins, and among equal codes the smaller
channel, whose reversed index is larger, which is TFLite's rule (the first maximum). So:

1. a 1x1 depthwise convolution into int16 working memory: weights 128, each channel's bias
   its reversed index, unit scale;
2. a max pool over each pixel's channels, the int16 map read as one row of ``C`` per pixel
   (kernel 1 x C), through an int16 table of 512 (base, slope) words, every one base
   ``C - 1`` and slope -128: ``C - 1 - (v & 127)``, the reversed index turned back into the
   index (the functional model's ``ethosu_stream.ops_common.apply_lut16``);
3. a 1x1 depthwise convolution casting the int16 indices into the int32 output (an int64
   output: into the low word of each int32 pair, and a second one, weight 0, zeroing the
   high words; Vela casts twice through int16 pairs instead).

Every operation reads and writes only its own pixels, so a planner's stripe (``box``: output
rows and columns, the tensors held whole) is the same operations over that box, and a box
larger than the registers take (the max pool reads one row per pixel, at most 65536; a
feature map at most 65536 wide) is the same operations over pieces of it, as Vela cuts it:
bands of whole rows, a row wider than 65536 pixels cut into columns.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from planner.parts import (
    ARG_MAX_PIECE_PIXELS,
    arg_max_piece_pixels,
    arg_max_rows_cols,
    arg_max_work_bytes,
)
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, attach_constants
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    SCRATCH_REGION,
    npu_accelerator,
    vela_api,
)

#: the deepest input: the reversed channel index lives in the packed int16's seven low bits
MAX_DEPTH = 127
#: the most pixels of one piece: the max pool reads one row per pixel (its IFM height
#: register), and a feature map's width register holds no more either
MAX_PIXELS = ARG_MAX_PIECE_PIXELS
#: base-pointer index of SHRAM as a DMA destination (Vela's ``BASE_PTR_INDEX_MEM2MEM``)
_SHRAM_REGION = 0x103
#: words of an int16 table: a 16-bit base (low half) and slope (high half) each
_LUT16_WORDS = 512


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _pixels_depth(q) -> tuple[int, int, int]:
    """(rows, columns, depth) of ARG_MAX's input: every axis before the last two folds into
    the rows (batch 1, ``CHECKS``), as its output's box reads them."""
    shape = tuple(int(s) for s in q.in_shapes[0])
    return (*arg_max_rows_cols(shape), shape[-1])


def pieces(box: tuple[tuple[int, int], tuple[int, int]], most: int = MAX_PIXELS) -> list:
    """``box`` ((rows), (columns), each [start, stop)) cut into boxes of at most ``most``
    (at most :data:`MAX_PIXELS`) pixels and columns, in order: bands of as many whole rows as
    fit, or one row at a time in column pieces when a row is wider."""
    (y0, y1), (x0, x1) = box
    band = max(1, most // (x1 - x0))
    return [((r, min(y1, r + band)), (c, min(x1, c + most)))
            for r in range(y0, y1, band) for c in range(x0, x1, most)]


def _most(q) -> int:
    """The pixels of the largest of the whole output's :func:`pieces`: every box's pieces
    are cut to at most that many, so that they fit the working memory the planner holds."""
    return arg_max_piece_pixels(*_pixels_depth(q)[:2])


def argmax_work_bytes(q) -> int:
    """The working memory of one ARG_MAX: the packed int16 map of its largest piece, then
    one int16 per pixel of it, which every piece reuses in turn (what the planner holds for
    its Part, ``planner.parts.arg_max_work_bytes``)."""
    return arg_max_work_bytes(_most(q), _pixels_depth(q)[2])


def lut16_words(depth: int) -> np.ndarray:
    """The int16 table that turns a packed value's reversed index into the index:
    ``depth - 1 - (v & 127)`` for every int16 ``v``."""
    return np.full(_LUT16_WORDS, ((-128 & 0xFFFF) << 16) | (depth - 1), np.uint32)


def _fm(api, region: int, offset: int, shape: tuple[int, int, int], dtype: str,
        strides: tuple[int, int] | None = None):
    """A feature map at unit quantization (codes and indices as they are); ``strides`` the
    (row, column) byte strides of a box inside a larger tensor, None for dense."""
    fm = api.NpuFeatureMap()
    fm.data_type = {"int8": api.NpuDataType.INT8, "uint8": api.NpuDataType.UINT8,
                    "int16": api.NpuDataType.INT16, "int32": api.NpuDataType.INT32}[dtype]
    fm.region = region
    h, w, c = shape
    fm.shape = api.NpuShape3D(h, w, c)
    fm.tiles = api.NpuTileBox(h, 0, w, [offset, 0, 0, 0])
    if strides is not None:
        fm.strides = api.NpuShape3D(strides[0], strides[1], np.dtype(dtype).itemsize)
    fm.quantization = api.NpuQuantization(1.0, 0)
    fm.layout = api.NpuLayout.NHWC
    return fm


def argmax_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The operations of one ARG_MAX from ``operands[0]`` into ``ofm`` (whole tensors), over
    output rows and columns ``box`` (None: all), its working memory at ``em.work``
    (:func:`argmax_work_bytes`): each of the box's :func:`pieces` packed, pooled and cast in
    turn, every piece's int16 maps at the same place (a piece's packing writes only after
    the previous piece's pool, which read them, has been followed by its cast), so the
    working memory is one piece's, as Vela's ARG_MAX holds its intermediates piece by
    piece."""
    api = vela_api()
    rows, cols, depth = _pixels_depth(q)
    acc = npu_accelerator(em.accelerator)
    most = _most(q)
    packed, index = em.work, em.work + _aligned(most * depth * 2)
    ops = []
    unit = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)

    def conv(ifm, out, weights: np.ndarray, bias: np.ndarray, in_dtype: str, name: str):
        npu = api.NpuConvDepthWiseOperation()
        npu.ifm, npu.ofm = ifm, out
        npu.kernel = api.NpuKernel(1, 1)
        npu.padding = api.NpuPadding(0, 0, 0, 0)
        npu.activation = unit
        npu.rounding_mode = api.NpuRoundingMode.TFL
        npu.block_config = em.block(npu)
        qc = dataclasses.replace(q, in_dtypes=[in_dtype], bias=bias.astype(np.int64),
                                 attrs={})
        attach_constants(npu, qc, len(bias), acc, em.flash, weights,
                         [(1, 0)] * len(bias))
        npu.name = name
        ops.append(npu)

    table = None
    for piece in pieces(box if box is not None else ((0, rows), (0, cols)), most):
        table = _piece_ops(api, q, operands[0], ofm, piece, (packed, index), conv, table, em,
                           ops)
    return ops


def _piece_ops(api, q, x: FmSlot, ofm: FmSlot, piece, work: tuple[int, int], conv, table, em,
               ops: list):
    """One piece's operations (at most :data:`MAX_PIXELS` pixels and columns) appended to
    ``ops``: its packed int16 map at ``work[0]``, its int16 indices at ``work[1]``; the
    table's flash range returned (``table``, or added after the first piece's packing)."""
    rows, cols, depth = _pixels_depth(q)
    (y0, y1), (x0, x1) = piece
    h, w = y1 - y0, x1 - x0
    packed, index = work
    esize = np.dtype(x.dtype).itemsize

    # 1. each code times 128 plus its channel's reversed index, into int16
    row, col = cols * depth * esize, depth * esize
    src = _fm(api, x.region, x.offset + y0 * row + x0 * col, (h, w, depth), x.dtype, (row, col))
    conv(src, _fm(api, SCRATCH_REGION, packed, (h, w, depth), "int16"),
         np.full((depth, 1, 1, 1), 128, np.int16), np.arange(depth - 1, -1, -1),
         x.dtype, "arg_max_pack")

    # 2. the largest packed value of each pixel's row, its reversed index turned back (the
    # table loaded before each pool: the convolutions between may use its SHRAM)
    if table is None:
        table = em.flash.add(lut16_words(depth).astype("<u4").tobytes())
    ops.append(api.NpuDmaOperation(table, api.NpuAddressRange(_SHRAM_REGION, em.lut_address,
                                                              table.length)))
    pool = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    pool.ifm = _fm(api, SCRATCH_REGION, packed, (h * w, depth, 1), "int16")
    pool.ofm = _fm(api, SCRATCH_REGION, index, (h * w, 1, 1), "int16")
    pool.kernel = api.NpuKernel(depth, 1)
    pool.padding = api.NpuPadding(0, 0, 0, 0)
    pool.activation = api.NpuActivation(api.NpuActivationOp.TABLE_LOOKUP)
    pool.activation.lookup_table_index = 0
    pool.rounding_mode = api.NpuRoundingMode.TFL
    pool.block_config = em.block(pool)
    pool.name = "arg_max"
    ops.append(pool)

    # 3. the int16 indices cast into the int32 output's box; an int64 output is int32 pairs
    # (little endian): the indices into the low words, zeros (weight 0) into the high words
    words = np.dtype(q.out_dtype).itemsize // 4
    out_row, out_col = cols * 4 * words, 4 * words
    indices = _fm(api, SCRATCH_REGION, index, (h, w, 1), "int16")
    for k, (weight, name) in enumerate(((1, "arg_max_cast"), (0, "arg_max_high"))[:words]):
        dst = _fm(api, ofm.region, ofm.offset + y0 * out_row + x0 * out_col + 4 * k,
                  (h, w, 1), "int32", (out_row, out_col))
        conv(indices, dst, np.full((1, 1, 1, 1), weight, np.int16), np.zeros(1), "int16",
             name)
    return table
