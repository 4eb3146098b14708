"""Performance model of the Arm Ethos-U55 and Ethos-U65 NPUs, after Vela's.

The planner ranks cascading options by their cycle counts, so the model must agree with the
numbers Arm's own compiler uses to make the same decisions. It follows the estimator of Vela
5.2.0; the NPU primitives it builds on (accelerator constants, block search, the cycle
formulas of one command, with their Vela sources) are in planner/perf/ethos_u_npu.py. Known
differences are listed in ``rfcs/0001-appendix-cost-model.md``.

Structure of the estimate, per NPU operation (one stripe):

1. A *block configuration* is chosen (``regor/ethos_u55.cpp: FindBlockConfig``): the OFM
   block that fits the shared buffer (SHRAM) and minimises the weight and IFM re-fetches per
   output element: once per Part, for its whole output, each stripe running it clipped
   (``BlockPolicy.PART``), or for each stripe as Vela does (``STRIPE``), or the cheaper of
   the two per stripe (``BEST``, what the devices use). Small or odd stripes fill their
   blocks and micro-blocks partly; a stripe run back to back with others does not pay the
   per-command fill and drain (``fill_drain_cycles``), which the planner charges once per
   Part.
2. MAC-based operations (convolution, depthwise, pooling, reduce-sum) cost
   ``max(MAC cycles, cmd) * blocks + tail`` where the MAC cycles per block come from the
   micro-block (ublock) count and the kernel steps, the output stage (AO) costs a per-element
   figure per accelerator, and the first IFM block / last OFM block transfers are paid once per
   stripe (``regor/ethos_u55_performance.cpp:EstimateMacOpCycles``).
3. Elementwise operations cost ``max(AO cycles, command-issue limit)`` over the OFM elements
   (``EstimateElementwiseCycles``).

Part kinds that Vela lowers to several NPU operations (MEAN, PAD, CONCATENATION, resize) are
lowered here the same way and their costs summed.
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Sequence

from ethos_arch.ops import Op
from planner.errors import PlannerError
from planner.graph import Part
from planner.npu_dilation import npu_kernel
from planner.parts import svdf_shift_rows
from planner.perf import ethos_u_batch as _batched
from planner.perf import ethos_u_npu
from planner.perf.base import PerfModel, StripeTerms
from planner.perf.ethos_u_npu import (
    ACCELERATORS,
    CONV,
    DEFAULT_CONST_TIMING,
    DEFAULT_FM_TIMING,
    DEPTHWISE,
    ELEMENTWISE,
    LUT_ACTIVATIONS,
    MAC_OPS,
    NHCWB16,
    NHWC,
    POOLING,
    REDUCE_SUM,
    BlockConfig,
    BlockPolicy,
    CycleBreakdown,
    NpuOp,
    PortTiming,
    Shape4,
    StripeSummary,
    ceil_div,
    estimate_elementwise,
    estimate_mac_op,
    find_block_config,
    fm_access_bytes,
)

# Members bound once: read through their Enum class, each costs a Python-level lookup, and
# these are read on the hot paths.
_PART, _STRIPE = BlockPolicy.PART, BlockPolicy.STRIPE


# --------------------------------------------------------------------------------------------
# Lowering Parts to NPU operations
# --------------------------------------------------------------------------------------------

def _bits(t) -> int:
    return t.itemsize * 8


def _to4(shape: Sequence[int]) -> Shape4:
    """Any-rank shape as NHWC, folding leading axes into N as Vela's reshapes do."""
    shape = tuple(map(int, shape))
    if len(shape) == 4:
        return shape
    if len(shape) > 4:
        return (math.prod(shape[:-3]),) + shape[-3:]
    return (1,) * (4 - len(shape)) + shape


def _input_region(part: Part, index: int, out_shape: Sequence[int]) -> tuple[int, ...]:
    """The input extent one output stripe needs, clipped to the input tensor.

    The whole output reads the whole input, as Vela's unstriped operations do ("IFM Stripe"
    = the IFM in ``--verbose-schedule``) even where the window skips rows or columns (a 1x1
    stride-2 convolution of a 16x16 map needs 15x15 of it): the IFM shape enters the block
    search, so the two differ (resnet8's 1x1 shortcuts: 2688 vs 3000 cycles on U55-128).
    """
    full = part.inputs[index].shape
    if tuple(out_shape) == part.output.shape:
        return tuple(full)
    prop = part.propagators[index]
    maps = prop.integer_axis_maps()
    if maps is not None:    # apply_shape's sums in plain integers
        return tuple(max(1, min(const if j is None else lin * out_shape[j] + const, f))
                     for (j, lin, const, _), f in zip(maps, full))
    need = prop.apply_shape(out_shape)
    # (``type is int`` first: most extents are ints, and Fraction() of one is slow.)
    return tuple(max(1, min(n if type(n) is int else int(math.ceil(Fraction(n))), f))
                 for n, f in zip(need, full))


def _window_strides(part: Part) -> tuple[int, int]:
    """Strides as Vela runs them. Where a stride changes nothing computed Vela sets it to 1
    (legacy core ``tflite_graph_optimiser.py``: ``fixup_pool_strides`` for a pooling whose
    kernel and stride both equal the IFM's H and W, a global pooling written as
    AVERAGE_POOL_2D; ``fixup_strided_conv`` for a convolution along an axis where the OFM is
    1 wide). Regor does the same (``Kernel: size=5,25 stride=1,1`` for ds_cnn's 25x5 pool in
    ``--verbose-schedule``). The stride changes the IFM block, hence the block search and the
    first-block fill (ds_cnn's pool: 5476 cycles on U55-256, 5194 with stride 25x5)."""
    sh, sw = tuple(part.attr("strides", (1, 1)))
    kh, kw = tuple(part.attr("kernel", (1, 1)))
    if part.kind == Op.POOL:
        _, ih, iw, _ = part.inputs[0].shape
        if kh == sh == ih and kw == sw == iw:
            return (1, 1)
    elif part.kind == Op.CONV2D:
        _, oh, ow, _ = part.output.shape
        return (1 if oh == 1 else sh, 1 if ow == 1 else sw)
    return (sh, sw)


def _format(part: Part, key: str) -> str:
    fmt = part.attr(key, NHCWB16)
    if fmt not in (NHWC, NHCWB16):
        raise PlannerError(f"part {part.name!r}: {key} must be {NHWC!r} or {NHCWB16!r}")
    return fmt


def _copy_op(ifm: Shape4, ofm: Shape4, bits: int, fmt_in: str, fmt_out: str,
             activation: str | None = None, op: str = "MemoryCopy", lut: int = 0) -> NpuOp:
    """A 1x1 AvgPool no-op: how the Ethos-U55 copies, rescales and applies standalone
    activations (regor/ethos_u55.cpp:UseAvgPoolNop, GetHWOp)."""
    return NpuOp(POOLING, op, ifm, ofm, ifm_bits=bits, ofm_bits=bits, activation=activation,
                 lut_bytes=lut, ifm_format=fmt_in, ofm_format=fmt_out)


def _lstm_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """An LSTM as its Ethos-U stream runs it (Vela's ``lstm.py`` decomposition), one step of
    one batch at a time: per gate a FULLY_CONNECTED of the input and one of the hidden state
    (int8 -> int16) added with the gate's activation fused, the cell update (two MULs and
    an ADD), the cell's TANH, its MUL by the output gate into the int8 hidden state, and a
    copy of it into the output; every step of every batch in the stripe."""
    x = part.inputs[0]
    n, features = part.attr("cells"), x.shape[2]
    row = (1, 1, 1, n)
    fc = [NpuOp(CONV, "FullyConnected", (1, 1, 1, k), row, ifm_bits=8, ofm_bits=16,
                has_bias=True, ifm_format=NHWC, ofm_format=NHWC) for k in (features, n)]

    def elementwise(op: str, bits_in: int, bits_out: int, act: str | None = None) -> NpuOp:
        return NpuOp(ELEMENTWISE, op, row, row, row, ifm_bits=bits_in, ofm_bits=bits_out,
                     activation=act, ifm_format=NHWC, ifm2_format=NHWC, ofm_format=NHWC)

    step = []
    for act in ("sigmoid", "sigmoid", "tanh", "sigmoid"):
        step += fc + [elementwise("Add", 16, 16, act)]
    step += [elementwise("Mul", 16, 16), elementwise("Mul", 16, 16),
             elementwise("Add", 16, 16),
             _copy_op(row, row, 16, NHWC, NHWC, activation="tanh", op="tanh"),
             elementwise("Mul", 16, 8), _copy_op(row, row, 8, NHWC, NHWC)]
    return step * (int(out_shape[0]) * int(out_shape[1]))


def _svdf_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """An SVDF as its Ethos-U stream runs it, for the stripe's batches: pairs of 1x1 pools
    shifting the state's rows one value left, a few rows at a time
    (:func:`planner.parts.svdf_shift_rows`), the FULLY_CONNECTED of the input into the new
    column (int16), the pool copying its low bytes into the state's last column, and the
    time step's FULLY_CONNECTED of the whole state into the stripe's units."""
    x = part.inputs[0]
    batches, size = x.shape
    units, rank, memory = part.attr("units"), part.attr("rank"), part.attr("memory")
    filters = units * rank
    b, u = int(out_shape[0]), int(out_shape[1])
    rows = b * filters
    step = svdf_shift_rows(batches * filters, memory)
    ops = []
    for first in range(0, rows, step) if step else ():
        shifted = (1, 1, min(step, rows - first), memory - 1)
        ops += [_copy_op(shifted, shifted, 8, NHWC, NHWC)] * 2
    ops.append(NpuOp(CONV, "FullyConnected", (1, 1, b, size), (1, 1, b, filters), ifm_bits=8,
                     ofm_bits=16, has_bias=True, ifm_format=NHWC, ofm_format=NHWC))
    column = (1, 1, rows, 1)
    ops.append(_copy_op(column, column, 8, NHWC, NHWC))
    ops.append(NpuOp(CONV, "FullyConnected", (1, 1, b, filters * memory), (1, 1, b, u),
                     ifm_bits=8, ofm_bits=8, has_bias=True, ifm_format=NHWC, ofm_format=NHWC))
    return ops

def _mean_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """MEAN over H, W or both as Vela lowers it (regor/tflite_graph_optimiser.cpp:
    ConvertMeanOps): depthwise convolutions with the reduced extents as kernel (at most 64
    rows and 4096 taps each; more rows over both within 4096 taps read as one row) writing
    32-bit sums, ADDs to combine them, and a 32-bit MUL to scale, over the rows and columns
    an output stripe reads. A tensor of fewer than four axes is its NHWC view
    (``ethos_arch.mean_window``)."""
    x = part.inputs[0]
    region = _input_region(part, 0, out_shape)   # what this output stripe reads
    _, h, w, _ = (1,) * (4 - len(region)) + tuple(region)
    kh, kw = tuple(part.attr("kernel", (h, w)))
    oh, ow = h - kh + 1, w - kw + 1
    oc = out_shape[-1]
    n_out = out_shape[0] if len(x.shape) == 4 else 1
    if kh > 64 and kh * kw <= 4096 and (oh, ow) == (1, 1):
        kh, kw = 1, kh * kw
    rows = min(4096 // kw, kh, 64) if kw <= 4096 else 1
    count = ceil_div(kh, rows)
    fmt = _format(part, "ifm_format")
    acc = (n_out, oh, ow, oc)
    ops = []
    for i in range(count):
        k = rows if (i < count - 1 or kh % rows == 0) else kh % rows
        ops.append(NpuOp(DEPTHWISE, "DepthwiseConv2D", (n_out, k + oh - 1, kw + ow - 1, oc),
                         acc, kernel=(k, kw), ifm_bits=_bits(x), ofm_bits=32, has_bias=True,
                         ifm_format=fmt))
        if i > 0:
            ops.append(NpuOp(ELEMENTWISE, "Add", acc, acc, acc, ifm_bits=32, ofm_bits=32))
    ops.append(NpuOp(ELEMENTWISE, "Mul", acc, acc, (1, 1, 1, 1), ifm_bits=32,
                     ofm_bits=_bits(part.output), ofm_format=_format(part, "ofm_format")))
    return ops


def _squared_difference_ops(part: Part, ra: Shape4, rb: Shape4, out: Shape4) -> list[NpuOp]:
    """int8 SQUARED_DIFFERENCE as the stream and Vela 5.2 run it: each input widened into
    32 bits and multiplied by its constant multiplier, their SUB, the square, and a 32-bit
    MUL by the output multiplier into the output (the intermediates in NHWC scratch); where
    both inputs broadcast, the first, widened, is first expanded to the output's shape (an
    ADD to zeros of that shape)."""
    ops = []
    wide = dict(ifm_bits=32, ofm_bits=32, ifm_format=NHWC, ifm2_format=NHWC, ofm_format=NHWC)
    for k, (region, t) in enumerate(((ra, part.inputs[0]), (rb, part.inputs[1]))):
        ops += [NpuOp(POOLING, "AvgPool", region, region, ifm_bits=_bits(t), ofm_bits=32,
                      ifm_format=_format(part, "ifm_format"), ofm_format=NHWC),
                NpuOp(ELEMENTWISE, "Mul", region, region, (1, 1, 1, 1), ifm_bits=32,
                      ofm_bits=32, ifm_format=NHWC, ofm_format=NHWC, ifm2_const=True,
                      ifm2_format=NHWC)]
        if k == 0 and out not in (ra, rb):
            ops.append(NpuOp(ELEMENTWISE, "Add", out, out, ra, **wide))
    ops += [NpuOp(ELEMENTWISE, "Sub", out, out, ra if rb == out != ra else rb, **wide),
            NpuOp(ELEMENTWISE, "Mul", out, out, out, **wide),
            NpuOp(ELEMENTWISE, "Mul", out, out, (1, 1, 1, 1), ifm_bits=32,
                  ofm_bits=_bits(part.output), activation=part.attr("activation"),
                  ifm_format=NHWC, ifm2_const=True, ifm2_format=NHWC,
                  ofm_format=_format(part, "ofm_format"))]
    return ops


def _batch_matmul_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """int8 BATCH_MATMUL as Vela 5.2 lowers it for the Ethos-U55/U65 (its MatMul, as
    ``vela --verbose-register-command-stream`` shows it): each operand not already laid out
    with the reduced axis innermost transposed by copies, and each broadcast along its
    batches (but a second operand of one batch) copied to every output batch, then per
    output column one 32-bit MUL of the batches' rows by that column (broadcast along the
    rows) and a REDUCE_SUM of the products along the reduced axis into the column."""
    a, b = part.inputs
    out_batch = tuple(out_shape[:-2])
    batch = math.prod(out_batch)
    m, n = out_shape[-2], out_shape[-1]
    k = a.shape[-2] if part.attr("adj_x", False) else a.shape[-1]
    rows = (1, batch, m, k)
    col = (1, batch, 1, k)
    ops = []
    laid_out = []
    # the copies lay out the whole operand, whatever the stripe
    for t, transposed, single_ok in ((a, part.attr("adj_x", False), False),
                                     (b, not part.attr("adj_y", False), True)):
        own = (1,) * (len(out_batch) - len(t.shape[:-2])) + tuple(t.shape[:-2])
        spread = own != out_batch and not (single_ok and math.prod(own) == 1)
        laid_out.append(transposed or spread)
        if transposed or spread:
            count = batch if spread else math.prod(own)
            shape = (1, count * t.shape[-2], t.shape[-1], 1)
            ops.append(_copy_op(shape, shape, _bits(t), NHWC, NHWC))
    b_in_flash = b.is_constant and not laid_out[1]
    for _ in range(n):
        ops += [NpuOp(ELEMENTWISE, "Mul", rows, rows, col, ifm_bits=_bits(a), ofm_bits=32,
                      ifm_format=NHWC, ifm2_format=NHWC, ofm_format=NHWC,
                      ifm2_const=b_in_flash),
                NpuOp(REDUCE_SUM, "ReduceSum", rows, (1, batch, m, 1), ifm_bits=32,
                      ofm_bits=_bits(part.output), ifm_format=NHWC, ofm_format=NHWC)]
    return ops

def _arg_max_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """ARG_MAX along the depth as Vela lowers it (tflite_graph_optimiser.py:
    convert_argmax_to_depthwise_conv_and_max_pool): a 1x1 depthwise convolution packing each
    code and its channel's index into int16, a max pool over each pixel's channels (one row
    of C per pixel) through a 2 KiB int16 LUT, and a depthwise cast of the indices to int32
    (an int64 output: a second one writing the high words)."""
    x = part.inputs[0]
    c = x.shape[-1]
    pixels = math.prod(int(s) for s in out_shape)
    full = _to4(tuple(out_shape) + (c,))
    column = (1, pixels, 1, 1)
    cast = NpuOp(DEPTHWISE, "DepthwiseConv2D", column, column, ifm_bits=16, ofm_bits=32,
                 has_bias=True, ofm_format=_format(part, "ofm_format"))
    return [NpuOp(DEPTHWISE, "DepthwiseConv2D", full, full, ifm_bits=_bits(x), ofm_bits=16,
                  has_bias=True, ifm_format=_format(part, "ifm_format")),
            NpuOp(POOLING, "MaxPool", (1, pixels, c, 1), column, kernel=(1, c), ifm_bits=16,
                  ofm_bits=16, lut_bytes=2048)] + [cast] * max(1, part.output.itemsize // 4)


def _reduce_over_depth_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """SUM, REDUCE_MAX and REDUCE_MIN over the depth (height, width or both with it: the
    Part's ``axis``) as the stream runs them (tvm_ethos ``ops_reduce_depth``), Vela 5.2's
    forms: SUM one convolution into one channel, its kernel the reduced height and width;
    REDUCE_MAX a max pool over each pixel's channels (one row of C per pixel), then one over
    the reduced height and width; REDUCE_MIN the same between two lookups of a NOT table
    (the first a 1x1 pool over the whole input), or for int16 codes (no table of 65536
    entries) between two elementwise SUBs from a constant -1 (``ops_reduce.negated``): one
    over the whole input, one over the output, the pools looking nothing up."""
    x = part.inputs[0]
    _, h, w, c = x.shape
    axes = tuple(part.attr("axis", (3,)))
    kh, kw = (h if 1 in axes else 1), (w if 2 in axes else 1)
    bits, act = _bits(x), part.attr("activation")
    fin, fout = _format(part, "ifm_format"), _format(part, "ofm_format")
    if part.kind == Op.REDUCE_SUM:
        ifm = _to4(_input_region(part, 0, out_shape))
        return [NpuOp(CONV, "Conv2D", ifm, (1, ifm[1] - kh + 1, ifm[2] - kw + 1, 1),
                      kernel=(kh, kw),
                      ifm_bits=bits, ofm_bits=_bits(part.output), activation=act,
                      has_bias=True, ifm_format=fin, ofm_format=fout)]
    wide = part.kind == Op.REDUCE_MIN and bits == 16
    lut = 256 if part.kind == Op.REDUCE_MIN and not wide else 0
    full = (1, h, w, c)
    out = (1, h - kh + 1, w - kw + 1, 1)
    ops = [_copy_op(full, full, bits, fin, NHWC, lut=lut)] if lut else []
    if wide:
        ops.append(_not16_op(full, fin, NHWC))
    pixels = h * w
    for start in range(0, pixels, 65536):
        n = min(65536, pixels - start)
        ops.append(NpuOp(POOLING, "MaxPool", (1, n, c, 1), (1, n, 1, 1), kernel=(1, c),
                         ifm_bits=bits, ofm_bits=bits, ifm_format=NHWC, ofm_format=NHWC,
                         lut_bytes=0 if kh * kw > 1 else lut))
    if kh * kw > 1:
        ops.append(NpuOp(POOLING, "MaxPool", (1, h, w, 1), out,
                         kernel=(kh, kw), ifm_bits=bits, ofm_bits=bits, ifm_format=NHWC,
                         ofm_format=NHWC if wide else fout, lut_bytes=lut))
    if wide:
        ops.append(_not16_op(out, NHWC, fout))
    return ops


def _not16_op(shape: Shape4, fmt_in: str, fmt_out: str) -> NpuOp:
    """The int16 NOT ``-1 - v``: an elementwise SUB of the map from a constant -1 in flash
    (tvm_ethos ``ops_reduce.not16_op``)."""
    return NpuOp(ELEMENTWISE, "Sub", shape, shape, (1, 1, 1, 1), ifm_bits=16, ofm_bits=16,
                 ifm_format=fmt_in, ifm2_const=True, ifm2_format=NHWC, ofm_format=fmt_out)


def _softmax_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """int8 SOFTMAX along the last axis as Vela lowers it (regor/softmax.cpp: GetGraph8bit):
    a max over the channels; SUB with an exp LUT and a shift over the whole tensor; a sum
    over the channels; 20 passes of 32-bit arithmetic on one value per row (a reciprocal by
    Newton-Raphson); then a broadcast, a multiply and a shift over the whole tensor. Vela keeps
    these tensors in NHWC (the input follows a reshape), the per-row values in NHCWB16."""
    n, h, w, c = _to4(out_shape)
    rows = n * h * w
    full = (1, h * n, w, c)
    row = (1, h * n, w, 1)
    one = (1, 1, 1, 1)
    bits = _bits(part.inputs[0])
    ops = [NpuOp(POOLING, "MaxPool", (1, rows, c, 1), (1, rows, 1, 1), kernel=(1, c),
                 ifm_bits=bits, ofm_bits=bits),
           NpuOp(ELEMENTWISE, "Sub", full, full, row, ifm_bits=bits, ofm_bits=32,
                 activation="lut", lut_bytes=1024, ifm_format=NHWC),
           NpuOp(ELEMENTWISE, "Asr", full, full, one, ifm_bits=32, ofm_bits=32,
                 ofm_format=NHWC, ifm2_const=True, ifm2_format=NHWC),
           NpuOp(REDUCE_SUM, "ReduceSum", full, row, ifm_bits=32, ofm_bits=32,
                 ifm_format=NHWC),
           NpuOp(ELEMENTWISE, "CLZ", row, row, ifm_bits=32, ofm_bits=32)]
    # (operation, has a 32-bit constant operand, which is read from the weights' memory)
    per_row = [("Sub", True), ("Sub", True), ("SHL", False), ("Mul", True), ("Add", True)] + \
        [("Mul", False), ("Sub", True), ("Mul", False), ("Mul", True), ("Add", False)] * 3
    ops += [NpuOp(ELEMENTWISE, op, row, row, row, ifm_bits=32, ofm_bits=32, ifm2_const=const,
                  ifm2_format=NHWC if const else NHCWB16) for op, const in per_row]
    ops += [NpuOp(ELEMENTWISE, "Mul", full, full, row, ifm_bits=32, ofm_bits=32,
                  ifm_format=NHWC),
            NpuOp(ELEMENTWISE, "Add", full, full, one, ifm_bits=32, ofm_bits=32,
                  ifm2_const=True, ifm2_format=NHWC),
            NpuOp(ELEMENTWISE, "Asr", full, full, row, ifm_bits=32, ofm_bits=_bits(part.output),
                  ofm_format=_format(part, "ofm_format"))]
    return ops


def _softmax16_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """int16 SOFTMAX along the last axis as the Ethos-U stream runs it
    (``tvm_ethos.backends.ethos_u.npu_softmax.softmax16_ops``, Vela's int16 form with TFLite
    Micro's tables): a max over the channels; the difference to it, scaled by a 32-bit MUL
    and looked up in the exp table by an int16 ADD (its 2 KiB LUT copied into SHRAM first),
    over the whole tensor; the sum over the channels; four operations of 32-bit arithmetic
    on one value per row, the reciprocal's lookup (the second LUT) and the output shift;
    then the product with the exponentials and the shift to the output over the whole
    tensor: thirteen operations and two LUT DMAs."""
    n, h, w, c = _to4(out_shape)
    rows = n * h * w
    full = (1, h * n, w, c)
    row = (1, h * n, w, 1)
    one = (1, 1, 1, 1)
    ops = [NpuOp(POOLING, "MaxPool", (1, rows, c, 1), (1, rows, 1, 1), kernel=(1, c),
                 ifm_bits=16, ofm_bits=16, ifm_format=_format(part, "ifm_format")),
           NpuOp(ELEMENTWISE, "Sub", full, full, row, ifm_bits=16, ofm_bits=32,
                 ifm_format=_format(part, "ifm_format"), ofm_format=NHWC),
           NpuOp(ELEMENTWISE, "Mul", full, full, one, ifm_bits=32, ofm_bits=32,
                 ifm_format=NHWC, ofm_format=NHWC, ifm2_const=True, ifm2_format=NHWC),
           NpuOp(ELEMENTWISE, "Add", full, full, one, ifm_bits=32, ofm_bits=16,
                 activation="lut", lut_bytes=2048, ifm_format=NHWC, ofm_format=NHWC,
                 ifm2_const=True, ifm2_format=NHWC),
           NpuOp(REDUCE_SUM, "ReduceSum", full, row, ifm_bits=16, ofm_bits=32,
                 ifm_format=NHWC),
           NpuOp(ELEMENTWISE, "CLZ", row, row, ifm_bits=32, ofm_bits=32)]
    # (operation, its second operand a 32-bit constant, read from the weights' memory)
    per_row = [("Sub", True), ("SHL", False), ("Asr", True)]
    ops += [NpuOp(ELEMENTWISE, op, row, row, row, ifm_bits=32, ofm_bits=32, ifm2_const=const,
                  ifm2_format=NHWC if const else NHCWB16) for op, const in per_row]
    ops += [NpuOp(ELEMENTWISE, "Sub", row, row, one, ifm_bits=32, ofm_bits=16,
                  activation="lut", lut_bytes=2048, ifm2_const=True, ifm2_format=NHWC),
            NpuOp(ELEMENTWISE, "Sub", row, row, one, ifm_bits=32, ofm_bits=32,
                  ifm2_const=True, ifm2_format=NHWC),
            NpuOp(ELEMENTWISE, "Mul", full, full, row, ifm_bits=16, ofm_bits=32,
                  ifm_format=NHWC, ofm_format=NHWC),
            NpuOp(ELEMENTWISE, "Asr", full, full, row, ifm_bits=32, ofm_bits=16,
                  ifm_format=NHWC, ofm_format=_format(part, "ofm_format"))]
    return ops


_ELEMENTWISE_OPS = {"add": "Add", "sub": "Sub", "mul": "Mul", "maximum": "Maximum",
                    "minimum": "Minimum"}
# Unary ops the Ethos-U55 runs on its elementwise unit (regor s_ElementwiseMap).
_UNARY_ELEMENTWISE = {"abs": "Abs", "clz": "CLZ", "not": "Not", "neg": "Sub",
                      "shl": "SHL", "shr": "SHR", "asr": "Asr"}


_WINDOW_KINDS = (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.POOL)
#: the largest stride the NPU's kernel register takes along an axis
NPU_MAX_STRIDE = 3


def clear_caches() -> None:
    """Forget the module-level memos of the Ethos-U model (lowering and NPU primitives); the
    per-model caches go with the EthosUPerfModel."""
    _window_op.cache_clear()
    ethos_u_npu.clear_caches()


@lru_cache(maxsize=1 << 12)
def _window_op(part: Part) -> tuple[str, str, dict, int, dict]:
    """What every stripe's NpuOp of a convolution, depthwise or pooling Part shares: the NPU
    class, Vela's op name, the fields besides the IFM and OFM shapes, the group count, and
    every field of its NpuOp (for ``_reshaped``). Cached per Part: the planner lowers
    hundreds of stripe shapes of each."""
    npu, name, fields, groups = _window_fields(part)
    return npu, name, fields, groups, vars(NpuOp(npu, name, (1,) * 4, (1,) * 4, **fields))


def _window_fields(part: Part) -> tuple[str, str, dict, int]:
    """``_window_op`` but the whole NpuOp's fields."""
    fields = dict(kernel=tuple(part.attr("kernel", (1, 1))), stride=_window_strides(part),
                  ifm_bits=_bits(part.inputs[0]), ofm_bits=_bits(part.output),
                  activation=part.attr("activation"), ifm_format=_format(part, "ifm_format"),
                  ofm_format=_format(part, "ofm_format"))
    if part.kind == Op.POOL:
        name = "MaxPool" if part.attr("pool_type") == "max" else "AvgPool"
        return POOLING, name, fields, 1
    # a dilation above 2 runs as a kernel spread with zero taps (planner.npu_dilation)
    run = npu_kernel(fields["kernel"], tuple(part.attr("dilation", (1, 1))))
    fields.update(kernel=run.kernel, dilation=run.dilation, has_bias=True)
    if part.kind == Op.DEPTHWISE_CONV2D:
        return DEPTHWISE, "DepthwiseConv2D", fields, 1
    return CONV, "Conv2D", fields, int(part.attr("groups", 1))


def _reshaped(fields: dict, ifm: Shape4, ofm: Shape4) -> NpuOp:
    """The NpuOp of ``fields`` (an NpuOp's, ``vars``) with other IFM and OFM shapes, equal to
    building it with them: without the frozen dataclass's checked per-field assignments,
    which were a quarter of a lowering and the planner lowers thousands of stripes."""
    op = object.__new__(NpuOp)
    op.__dict__.update(fields, ifm=ifm, ofm=ofm)
    return op


def lower_stripes(part: Part, shapes: Sequence[tuple[int, ...]]) -> list[list[NpuOp]]:
    """``[lower_part(part, shape) for shape in shapes]`` for stripe shapes of ints, each
    at least 1: the planner's costing lowers thousands of stripe shapes at once. A
    convolution, depthwise or pooling Part of one operation per stripe (no groups, no
    per-column pools) over 4-D tensors read through integer maps is lowered here in one
    loop, without lower_part's per-call checks and dispatch; any other Part, or shape, by
    lower_part."""
    if part.kind not in _WINDOW_KINDS or len(part.output.shape) != 4 or \
            len(part.inputs[0].shape) != 4:
        return [lower_part(part, shape) for shape in shapes]
    _, _, _, groups, whole = _window_op(part)
    maps = part.propagators[0].integer_axis_maps()
    if groups > 1 or maps is None or \
            (part.kind == Op.POOL and whole["stride"][1] > NPU_MAX_STRIDE):
        return [lower_part(part, shape) for shape in shapes]
    full, out_full = part.inputs[0].shape, part.output.shape
    rows = [(j, lin, const, f) for (j, lin, const, _), f in zip(maps, full)]
    out = []
    for shape in shapes:
        if type(shape) is not tuple or len(shape) != 4 or min(shape) < 1:
            out.append(lower_part(part, shape))      # (which names what is wrong)
            continue
        # _input_region's integer sums, clipped to the input
        ifm = full if shape == out_full else \
            tuple([max(1, min(const if j is None else lin * shape[j] + const, f))
                   for j, lin, const, f in rows])
        out.append([_reshaped(whole, ifm, shape)])
    return out


def lower_part(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """The NPU operations Vela would emit to compute one output stripe of ``part``.

    Optional Part attrs ``ifm_format``, ``ifm2_format`` and ``ofm_format`` ("NHWC" or
    "NHCWB16", default "NHCWB16") say how feature maps are laid out: Vela keeps network inputs
    and outputs in NHWC and intermediates in NHCWB16, which changes burst efficiency.
    """
    out_shape = tuple(map(int, out_shape))
    if len(out_shape) != len(part.output.shape):
        raise PlannerError(f"part {part.name!r}: stripe {out_shape} does not have the rank of "
                           f"its output {part.output.shape}")
    if out_shape and min(out_shape) < 1:
        raise PlannerError(f"part {part.name!r}: stripe {out_shape} has an empty axis")
    kind = part.kind
    if kind in _WINDOW_KINDS:
        npu, name, fields, groups, whole = _window_op(part)
        ifm = _to4(_input_region(part, 0, out_shape))
        ofm = _to4(out_shape)
        if groups > 1:
            # Vela has no grouped convolution; it is costed as one convolution per group.
            ifm_g = ifm[:3] + (max(1, ifm[3] // groups),)
            ofm_g = ofm[:3] + (max(1, ceil_div(ofm[3], groups)),)
            return [NpuOp(npu, name, ifm_g, ofm_g, **fields)] * min(groups, ofm[3])
        if kind == Op.POOL and whole["stride"][1] > NPU_MAX_STRIDE:
            # past the NPU's strides (an average pool's width): one pool per output column,
            # each over its own kernel's columns (tvm_ethos' ops_wide_stride)
            kw = whole["kernel"][1]
            column = _reshaped(dict(whole, stride=(whole["stride"][0], 1)),
                               (ifm[0], ifm[1], min(kw, ifm[2]), ifm[3]),
                               (ofm[0], ofm[1], 1, ofm[3]))
            return [column] * ofm[2]
        return [_reshaped(whole, ifm, ofm)]
    out_bits = _bits(part.output)
    fin, fout = _format(part, "ifm_format"), _format(part, "ofm_format")
    act = part.attr("activation")

    if kind == Op.FULLY_CONNECTED:
        # A 1x1 convolution over (1, 1, batch, features) (regor GetHWOp: FullyConnected ->
        # Convolution).
        x = part.inputs[0]
        batch, units = out_shape
        k = x.shape[1]
        return [NpuOp(CONV, "FullyConnected", (1, 1, batch, k), (1, 1, batch, units),
                      ifm_bits=_bits(x), ofm_bits=out_bits, activation=act, has_bias=True,
                      ifm_format=fin, ofm_format=fout)]

    if kind == Op.MEAN:
        return _mean_ops(part, out_shape)

    if kind == Op.ELEMENTWISE:
        a, b = part.inputs
        ra = _to4(_input_region(part, 0, out_shape))
        rb = _to4(_input_region(part, 1, out_shape))
        if part.attr("op") == Op.SQUARED_DIFFERENCE.value:
            return _squared_difference_ops(part, ra, rb, _to4(out_shape))
        op = _ELEMENTWISE_OPS.get(part.attr("op", "add"), "Add")
        return [NpuOp(ELEMENTWISE, op, ra, _to4(out_shape), rb, ifm_bits=_bits(a),
                      ofm_bits=out_bits, activation=act, ifm_format=fin,
                      ifm2_format=_format(part, "ifm2_format"), ofm_format=fout)]

    if kind == Op.UNARY:
        x = part.inputs[0]
        shape = _to4(out_shape)
        opname = str(part.attr("op", "relu"))
        if opname in _UNARY_ELEMENTWISE:
            return [NpuOp(ELEMENTWISE, _UNARY_ELEMENTWISE[opname], shape, shape,
                          ifm_bits=_bits(x), ofm_bits=out_bits, ifm_format=fin,
                          ofm_format=fout)]
        if opname == "leaky_relu" and _bits(x) == 16:
            # no 16-bit table: Vela 5.2 and the stream (ops_lut.leaky_relu16_ops) requantize
            # the two branches apart and keep their MAX (the identity branch in NHWC scratch)
            return [_copy_op(shape, shape, 16, fin, fout, op=opname),
                    _copy_op(shape, shape, 16, fin, NHWC, op=opname),
                    NpuOp(ELEMENTWISE, "Maximum", shape, shape, shape, ifm_bits=16, ofm_bits=16,
                          ifm_format=fout, ifm2_format=NHWC, ofm_format=fout)]
        lut = (256 if _bits(x) == 8 else 2048) if opname in LUT_ACTIVATIONS else 0
        # Standalone activations, LUT lookups and requantisation: AvgPool no-ops.
        return [_copy_op(shape, shape, _bits(x), fin, fout, op=opname, lut=lut)]

    if kind == Op.CONCATENATE:
        ops = []
        for i, t in enumerate(part.inputs):
            region = _to4(_input_region(part, i, out_shape))
            ops.append(_copy_op(region, region, _bits(t), fin, fout))
        return ops

    if kind == Op.SLICE:
        shape = _to4(out_shape)
        return [_copy_op(shape, shape, out_bits, fin, fout)]

    if kind == Op.PAD:
        # regor/graphir_optimiser.cpp:RewritePad: one fill per padded side (spanning the whole
        # output on the other axes), then a copy of the IFM into the middle.
        pads = part.attr("pads", ())
        ops = []
        for axis, (before, after) in enumerate(pads):
            for amount in (before, after):
                if amount:
                    region = list(out_shape)
                    region[axis] = min(amount, out_shape[axis])
                    r4 = _to4(region)
                    ops.append(_copy_op(r4, r4, out_bits, fin, fout))
        inner = _to4(_input_region(part, 0, out_shape))
        ops.append(_copy_op(inner, inner, out_bits, fin, fout))
        return ops

    if kind == Op.RESIZE:
        # Vela upscales by two per step with IFM resampling on an AvgPool (nearest: 1x1
        # kernel; bilinear: 2x2) (regor UpscaleAndRounding); larger factors take log2 steps.
        x = part.inputs[0]
        sh, sw = part.attr("scale", (2, 2))
        bilinear = part.attr("method", "nearest") == "bilinear"
        ofm = _to4(out_shape)
        steps = max(1, math.ceil(math.log2(max(sh, sw, 2))))
        ops = []
        for s in range(steps):
            div = 2 ** (steps - 1 - s)
            o = (ofm[0], max(1, ceil_div(ofm[1], div)), max(1, ceil_div(ofm[2], div)), ofm[3])
            i = (o[0], max(1, ceil_div(o[1], 2)), max(1, ceil_div(o[2], 2)), o[3])
            ops.append(NpuOp(POOLING, "AvgPool", i, o, kernel=(2, 2) if bilinear else (1, 1),
                             ifm_bits=_bits(x), ofm_bits=out_bits, upscale=2,
                             rounding=0 if bilinear else 1, ifm_format=fin, ofm_format=fout))
        return ops

    if kind == Op.SOFTMAX:
        if part.inputs[0].dtype == "int16":
            return _softmax16_ops(part, out_shape)
        return _softmax_ops(part, out_shape)

    if kind == Op.LSTM:
        return _lstm_ops(part, out_shape)

    if kind == Op.SVDF:
        return _svdf_ops(part, out_shape)

    if kind == Op.BATCH_MATMUL:
        return _batch_matmul_ops(part, out_shape)

    if kind == Op.ARG_MAX:
        return _arg_max_ops(part, out_shape)

    if kind in (Op.REDUCE_SUM, Op.REDUCE_MAX, Op.REDUCE_MIN):
        return _reduce_over_depth_ops(part, out_shape)

    if kind in (Op.RESHAPE, Op.TRANSPOSE, Op.DEPTH_TO_SPACE):
        return []  # handled by EthosUPerfModel (free, or memory bound)

    raise PlannerError(f"the Ethos-U performance model has no rule for part kind '{kind}' "
                       f"(part {part.name!r})")


# --------------------------------------------------------------------------------------------
# The PerfModel
# --------------------------------------------------------------------------------------------

class EthosUPerfModel(PerfModel):
    """``PerfModel`` for one Ethos-U55/U65 configuration and system memory timing.

    ``fm_timing`` is the memory feature maps are read from and written to (the planner keeps
    them in SRAM); ``const_timing`` the memory scales and biases are read from (its read
    latency bounds the output stage, as in Vela).

    ``block_policy`` (a BlockPolicy, or its string value) says which block configuration a
    stripe runs with:

    * ``PART`` (default): the one Vela chooses for the Part's whole output, clipped to the
      stripe. A whole layer costs exactly what Vela estimates, and the estimate is monotone in
      the stripe shape: Vela's block search optimises memory fetches, not cycles, so letting
      every stripe shape pick its own block makes some taller stripes cheaper than shorter
      ones, which a planner would exploit (rfcs/0001-appendix-cost-model.md).
    * ``STRIPE``: the block Vela would choose for the stripe shape, as Vela itself costs the
      stripes of its cascades. Same numbers for whole layers; not monotone.
    * ``BEST`` (what ``planner.devices`` uses): per stripe, the cheaper of the two, judged
      on the cycles a stripe pays back to back. Every command programs its own block, so
      either is what the NPU can run; never more than ``PART`` back to back (a stripe
      alone, its fill and drain paid, can cost a little more), same whole-layer figures.
    """

    #: Cycles to issue one more stripe. Vela charges none beyond the fill and drain already in
    #: compute_cycles; we charge the register commands that re-point the feature maps and
    #: start the operation, one cycle each (an estimate, rfcs/0001-appendix-cost-model.md).
    COMMANDS_PER_FEATURE_MAP = 6
    COMMANDS_PER_STRIPE = 4
    BLOCK_POLICIES = tuple(p.value for p in BlockPolicy)

    def __init__(self, accelerator: str, fm_timing: PortTiming = DEFAULT_FM_TIMING,
                 const_timing: PortTiming = DEFAULT_CONST_TIMING,
                 block_policy: BlockPolicy | str = BlockPolicy.PART) -> None:
        if accelerator not in ACCELERATORS:
            raise PlannerError(f"unknown Ethos-U configuration {accelerator!r}; known: "
                               f"{sorted(ACCELERATORS)}")
        if block_policy not in self.BLOCK_POLICIES:
            raise PlannerError(f"block_policy must be one of {self.BLOCK_POLICIES}, got "
                               f"{block_policy!r}")
        block_policy = BlockPolicy(block_policy)
        self.accelerator = ACCELERATORS[accelerator]
        self.name = accelerator
        self.micro_block: tuple[int, int, int] = self.accelerator.ofm_ublock
        self.fm_timing = fm_timing
        self.const_timing = const_timing
        self.block_policy = block_policy
        self._config = lru_cache(maxsize=1 << 16)(self._config_uncached)
        self._estimate = lru_cache(maxsize=1 << 18)(self._estimate_uncached)
        self._part_ops = lru_cache(maxsize=1 << 14)(self._part_ops_uncached)
        # Stripe summaries keyed by (lowering signature, stripe shape): the planner asks for
        # the cycles, fill/drain and weight fetches of the same stripe of the same layer, and
        # of identical layers under other names (MobileNet's five 512-channel blocks), many
        # times; one lowering answers all of them.
        self._signatures: dict[Part, int] = {}
        self._signature_ids: dict[tuple, int] = {}
        self._summaries: dict[tuple[int, tuple[int, ...]], StripeSummary] = {}
        self._by_part: dict[tuple[Part, tuple[int, ...]], StripeSummary] = {}

    def __repr__(self) -> str:
        return f"EthosUPerfModel({self.name!r}, block_policy={self.block_policy.value!r})"

    def _config_uncached(self, op: NpuOp) -> BlockConfig:
        return find_block_config(self.accelerator, op)

    def block_config(self, op: NpuOp) -> BlockConfig:
        """The block configuration Vela chooses for one NPU operation."""
        return self._config(op)

    def _estimate_uncached(self, op: NpuOp, cfg: BlockConfig,
                           whole: NpuOp | None) -> CycleBreakdown:
        if op.npu in MAC_OPS:
            return estimate_mac_op(self.accelerator, self.fm_timing,
                                    self.const_timing.read_latency, op, cfg, whole)
        return estimate_elementwise(self.accelerator, self.fm_timing, op, cfg,
                                     self.const_timing)

    def _part_ops_uncached(self, part: Part) -> tuple[NpuOp, ...]:
        return tuple(lower_part(part, part.output.shape))

    def breakdown(self, part: Part, out_shape: Sequence[int]) -> list[CycleBreakdown]:
        """Per-NPU-operation estimates of one stripe (what compute_cycles sums)."""
        return self._breakdown_of(part, lower_part(part, out_shape))

    def _breakdown_of(self, part: Part, ops: Sequence[NpuOp],
                      own: Sequence[BlockConfig] | None = None) -> list[CycleBreakdown]:
        """``own``: the block configurations Vela chooses for ``ops`` themselves, when
        known (:meth:`summarise_stripes` searches them in a batch)."""
        if own is None and self.block_policy != _PART:
            own = [self._config(op) for op in ops]
        if self.block_policy == _STRIPE:
            return [self._estimate(op, cfg, None) for op, cfg in zip(ops, own)]
        whole = self._part_ops(part)
        # (The estimates of stripes skip the estimate cache: stripe_summary already asks for
        # each stripe once, and hashing the NpuOps for the key would cost more.)
        estimate = self._estimate_uncached
        mine = [estimate(op, self._config(w), w) for op, w in zip(ops, whole)]
        if self.block_policy == _PART:
            return mine
        # BEST: each stripe runs the cheaper of the Part's block (clipped) and the block
        # Vela chooses for the stripe itself, judged back to back (fill and drain aside); the
        # Part's on a tie.
        out = []
        for op, a, cfg in zip(ops, mine, own):
            b = estimate(op, cfg, None)
            back_to_back_a, back_to_back_b = a.cycles - a.fill_drain_cycles, \
                b.cycles - b.fill_drain_cycles
            out.append(b if (back_to_back_b, b.cycles) < (back_to_back_a, a.cycles) else a)
        return out

    def compute_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """NPU cycles of one output stripe of ``out_shape``, as Vela estimates a command of
        that shape (first-block fill and last-block drain included), excluding DMA of weights
        and feature maps."""
        if part.kind == Op.RESHAPE:
            return 0  # Vela turns reshapes into aliases of the same memory
        if part.kind in (Op.TRANSPOSE, Op.DEPTH_TO_SPACE):
            return self._transpose_cycles(part, tuple(int(s) for s in out_shape))
        return self.stripe_summary(part, out_shape).cycles

    def fill_drain_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """Cycles of ``compute_cycles(part, out_shape)`` that a stripe run back to back with
        the commands before and after it does not pay: each NPU command's first IFM block,
        last OFM block and the one block by which its slower pipeline stage (MAC or output)
        trails the other. Vela's estimator charges
        them only to the first and last of a run of back-to-back commands (regor
        ``OpScheduling::First/BackToBack/Last``), and reports a cascaded operation as one
        command over its whole OFM: they are paid once per operation, not per stripe.
        (regor's BackToBack keeps the one-block MAC lead of an output-bound command; its
        reported cascade figures do not, and those are what this follows.)"""
        if part.kind in (Op.RESHAPE, Op.TRANSPOSE, Op.DEPTH_TO_SPACE):
            return 0
        return self.stripe_summary(part, out_shape).fill_drain_cycles

    def weight_fetches(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """How many times one stripe reads the Part's weights from their memory: the NPU
        fetches a block's weights for every OFM block in H x W (Vela: ``weightsRefetch``;
        unbuffered weights cost encoded bytes x OFM blocks of flash reads)."""
        if not part.constant_inputs:
            return 1
        return self.stripe_summary(part, out_shape).weight_fetches

    def stripe_summary(self, part: Part, out_shape: Sequence[int]) -> StripeSummary:
        """Cycles, fill/drain, MACs and weight fetches of one stripe, from one lowering,
        shared by every Part that lowers the same way (see :meth:`_lowering_signature`)."""
        # Asked for four or five times per stripe (cycles, fill/drain, fetches, traffic): the
        # first lookup is by the Part and the shape as given, no conversion, no signature.
        try:
            return self._by_part[part, out_shape]
        except (KeyError, TypeError):
            pass
        shape = tuple(int(s) for s in out_shape)
        key = (self._lowering_signature(part), shape)
        hit = self._summaries.get(key)
        if hit is None:
            hit = self._summaries[key] = self._summarise(part, shape)
        self._by_part[part, shape] = hit
        return hit

    def _lowering_signature(self, part: Part) -> int:
        """A small int naming everything :func:`lower_part` reads of a Part (not its name),
        so that identical layers share stripe summaries."""
        sig = self._signatures.get(part)
        if sig is None:
            full = (part.kind, part.attrs,
                    tuple((t.shape, t.dtype, t.is_constant) for t in part.inputs),
                    part.output.shape, part.output.dtype, part.propagators)
            sig = self._signature_ids.setdefault(full, len(self._signature_ids))
            self._signatures[part] = sig
        return sig

    #: Part kinds without stripe summaries (compute_cycles and the rest answer directly).
    _UNSUMMARISED = (Op.RESHAPE, Op.TRANSPOSE, Op.DEPTH_TO_SPACE)

    def summarise_stripes(self, part: Part, shapes) -> None:
        """Summarise the stripe shapes of ``part`` in ``shapes`` not summarised yet, their
        block searches in one batch (:func:`planner.perf.ethos_u_batch.find_block_configs`,
        the same configurations as one search per stripe), so that later
        :meth:`stripe_summary` calls find them. The planner's costing workers call it with
        every shape a batch of requests needs: the block search is most of a summary's work
        and, run a stripe at a time, mostly numpy's per-call overhead."""
        if part.kind in self._UNSUMMARISED:
            return
        sig = self._lowering_signature(part)
        summaries = self._summaries
        todo = sorted({shape for shape in (tuple(map(int, s)) for s in shapes)
                       if 0 not in shape and (sig, shape) not in summaries})
        if not todo:
            return
        lowered = lower_stripes(part, todo)
        flat = [op for ops in lowered for op in ops]
        own = None if self.block_policy == _PART else \
            _batched.find_block_configs(self.accelerator, flat)
        if len(flat) == len(todo) and part.kind in _WINDOW_KINDS and \
                len({(c.traversal, c.acc_bits) for c in own or ()}) <= 1:
            # One MAC operation per stripe (convolution, depthwise, pooling): all the
            # stripes' estimates on arrays at once.
            whole = self._part_ops(part)[0]
            for shape, summary in zip(todo, _batched.summarise_window_stripes(
                    self, whole, self._config(whole), flat, own)):
                summaries[sig, shape] = summary
            return
        configs = iter(own or ())
        for shape, ops in zip(todo, lowered):
            mine = None if own is None else [next(configs) for _ in ops]
            summaries[sig, shape] = self._summarise_ops(part, ops, mine)

    def _summarise(self, part: Part, out_shape: tuple[int, ...]) -> StripeSummary:
        return self._summarise_ops(part, lower_part(part, out_shape), None)

    def _summarise_ops(self, part: Part, ops: list[NpuOp],
                       own: list[BlockConfig] | None) -> StripeSummary:
        parts = self._breakdown_of(part, ops, own)
        fetches = 1
        cycles = fill_drain = macs = access = 0
        acc, burst = self.accelerator, self.fm_timing.burst
        for op, b in zip(ops, parts):
            if op.npu in (CONV, DEPTHWISE):
                bh, bw = b.config.ofm_block[:2]
                fetches = max(fetches, ceil_div(op.ofm[1], bh) * ceil_div(op.ofm[2], bw))
            cycles += b.cycles
            fill_drain += b.fill_drain_cycles
            macs += b.macs
            access += fm_access_bytes(acc, burst, op, b.config)
        return StripeSummary(int(cycles), int(fill_drain), int(macs), fetches, int(access))

    def stripe_terms(self, part: Part, shapes: list[tuple[int, ...]], back_to_back: bool
                     ) -> StripeTerms:
        """The four terms of each shape read off its one stripe summary (the same values
        as the four methods)."""
        if part.kind in self._UNSUMMARISED:
            return super().stripe_terms(part, shapes, back_to_back)
        # (summarise_stripes has just made most of them: read them by the signature, once)
        sig, made = self._lowering_signature(part), self._summaries
        summaries = [made.get((sig, s)) or self.stripe_summary(part, s) for s in shapes]
        rate = self.fm_timing.read_bytes_per_cycle
        return StripeTerms(
            [s.cycles for s in summaries],
            [s.fill_drain_cycles for s in summaries] if back_to_back else [0] * len(shapes),
            [math.ceil(s.fm_access_bytes / rate) for s in summaries],
            [s.weight_fetches for s in summaries] if part.constant_inputs
            else [1] * len(shapes))

    def fm_access_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """Cycles the feature-map memory port is busy with one stripe's IFM block fetches and
        OFM writes (:func:`fm_access_bytes`), weights aside. Transposes and reshapes: 0 (their
        traffic is their compute cycles, or none)."""
        if part.kind in (Op.RESHAPE, Op.TRANSPOSE, Op.DEPTH_TO_SPACE):
            return 0
        nbytes = self.stripe_summary(part, out_shape).fm_access_bytes
        return math.ceil(nbytes / self.fm_timing.read_bytes_per_cycle)

    def _transpose_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """Transposes (and depth-to-space, a transpose of blocks) are costed by their memory
        traffic, the slower of reading and writing (regor/ethos_u55_performance.cpp:
        MeasureCycleCost, Compound branch)."""
        nbytes = math.prod(out_shape) * part.output.itemsize
        fm = self.fm_timing
        read = int(nbytes / fm.read_bytes_per_cycle) + fm.read_latency
        write = int(nbytes / fm.write_bytes_per_cycle) + fm.write_latency
        return max(read, write)

    def stripe_overhead_cycles(self, part: Part) -> int:
        """Fixed cost of issuing one more stripe: the register writes that re-point the
        feature maps and start the operation (an estimate; Vela models none)."""
        if part.kind == Op.RESHAPE:
            return 0
        fms = 1 + len(part.activation_inputs)
        return self.COMMANDS_PER_STRIPE + self.COMMANDS_PER_FEATURE_MAP * fms

    def macs(self, part: Part, out_shape: Sequence[int]) -> int:
        """Multiply-accumulates of one stripe, as Vela counts them."""
        if part.kind in (Op.RESHAPE, Op.TRANSPOSE, Op.DEPTH_TO_SPACE):
            return 0
        return self.stripe_summary(part, out_shape).macs
