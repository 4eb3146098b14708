"""The Ethos-U stream's operator table: one :class:`StreamEmitter` per :class:`Op` it generates.

Both stream paths read it: the layer-by-layer one (``stream_gen``: every operator over its
whole tensors) and the planned one (``stream_cascade``: every step of the planner's schedule
over a box of its output). An emitter says what its operator becomes and the paths supply
where the feature maps are, how a block is chosen and where constants go, so one operator's
stream code lives here and nowhere else. The operators a stream is generated for are the
table's keys (:data:`STREAM_OPS`); any other raises ``UnsupportedOperatorError`` and its
subgraph keeps the "tir" emulator.

To add an operator to the stream: write its NPU operation (``npu_ops`` or an ``ops_*``
module) and give it a row here.
"""
from __future__ import annotations

import dataclasses
from enum import Enum
from typing import Callable, NamedTuple

from ethos_arch.ops import Op
from planner.work_memory import WorkMemory
from tvm_ethos.backends.ethos_u import (
    npu_softmax,
    ops_argmax,
    ops_batch_matmul,
    ops_elementwise,
    ops_lstm,
    ops_lut,
    ops_prelu,
    ops_reduce,
    ops_reduce_depth,
    ops_reduce_split,
    ops_resize,
    ops_softmax16,
    ops_squared_difference,
    ops_wide_stride,
)
from tvm_ethos.backends.ethos_u.npu_ops import (
    FmSlot,
    conv_op,
    elementwise_op,
    mean_op,
    mean_scales,
    mean_weights,
    pool_op,
)
from tvm_ethos.backends.ethos_u.ops_fc import fc_views
from tvm_ethos.backends.ethos_u.ops_movement import (
    RING_KINDS,
    movement_ops,
    split_batch_rows,
    split_origin,
    split_ring_ops,
    split_step,
    strided_read,
    transpose_ops,
    transpose_work_bytes,
)
from tvm_ethos.backends.ethos_u.ops_transpose_conv import (
    transpose_conv_constants,
    transpose_conv_op,
    transpose_conv_window,
)
from tvm_ethos.backends.ethos_u.stream_base import Flash, UnsupportedOperatorError


class Form(Enum):
    """What an operator becomes in the stream."""

    #: one block operation (per output box where it stripes), built by ``build``
    BLOCK = "block"
    #: several operations with working memory of their own (``sequence``), over whole tensors
    #: (or, with ``Extent.STRIPES``, over a stripe's box of them: each reads its own elements)
    SEQUENCE = "sequence"
    #: copies between feature maps (``sequence``; the planned path passes the output box)
    MOVEMENT = "movement"
    #: the same bytes read with another shape: no operation layer by layer, a copy where the
    #: plan keeps input and output apart
    ALIAS = "alias"


class Extent(Enum):
    """Which output boxes an operator can be emitted over."""

    STRIPES = "stripes"              # any rows and columns of a 4-D output
    WHOLE = "whole"                  # only the whole output, its operands held whole
    WHOLE_IF_FLAT = "whole_if_flat"  # stripes of a 4-D output; a flatter one has no rows


class Geometry(NamedTuple):
    """The window of a windowed operator: kernel (h, w), strides, dilation, padding (top,
    left, bottom, right)."""

    kernel: tuple[int, int]
    strides: tuple[int, int]
    dilation: tuple[int, int]
    padding: tuple[int, int, int, int]


#: the window of an operator that reads only its output's own box
POINTWISE = Geometry((1, 1), (1, 1), (1, 1), (0, 0, 0, 0))


@dataclasses.dataclass(frozen=True)
class Emission:
    """What a stream path gives a multi-operation emitter: flash for its constants, the SHRAM
    address of lookup tables, the block chooser of operations the planner did not cost,
    the arena offset of the operator's working memory (None when it has none), and, for a
    sequence over a stripe, ``place(fm, slot)``: gives a feature map the emitter built from
    one of the slots it was handed (an operand's or the output's box) that box's tiles,
    strides and region in its buffer (None: the slots are where the data is); the
    Ethos-U configuration, for an emitter that encodes weights of its own (ARG_MAX); and the
    region of the working memory where it is not the scratch arena (an LSTM alone on an
    Ethos-U65 keeps it in the fast scratch)."""

    flash: Flash
    lut_address: int
    block: Callable
    work: int | None = None
    place: Callable | None = None
    accelerator: str | None = None
    work_region: int | None = None


@dataclasses.dataclass(frozen=True)
class StreamEmitter:
    """How one operator is emitted (see :class:`Form`); the callables take the QOp first.

    * ``build(q, operands, ofm)``: the block operation over FmSlots, no block config yet;
    * ``constants(q, channels)``: (weights, scales) its encoded constants are made of (None
      for the operator's own); None when it has no constants (its block is chosen alone);
    * ``before(q, flash, lut_address)``: operations that must run before each of its own
      (a LUT's DMA);
    * ``views(q, ifm, ofm)``: the (ifm, ofm) the operation reads them as;
    * ``geometry(q)``: the window it reads (None: its output's own box);
    * ``sequence(q, operands, ofm, emission, box)``: the operations of a SEQUENCE or
      MOVEMENT operator (``box``: the output rows and columns of a stripe, None for whole);
    * ``work_bytes(q)``: the working memory a SEQUENCE needs (``work_bytes(q, box)`` over
      one output box, for a row with ``work``);
    * ``work(q)``: that working memory over any stripe, as the planner holds it for the
      operator's Part (a ``planner.work_memory.WorkMemory``), for a row whose working memory
      scales with the stripe; None: ``work_bytes(q)`` whatever the stripe;
    * ``ring(q, ins, out, box, full, box_fm, block)``: the operations of a stripe read
      from and written to buffers that may be rings (SPLIT);
    * ``stripe_window(q, rows, cols, input_hw)``: the input (rows, cols) a stripe's output
      rows and columns read and its (top, left, bottom, right) padding, where the window is
      not ``geometry``'s (the build reads the padding as ``q.attrs["stripe_padding"]``);
    * ``stageable``: its weights may be staged slice by slice through a Plan's buffer;
    * ``boxed``: a SEQUENCE over stripes whose operations read and write the stripe's boxes
      wherever the plan holds them (rings too): its ``sequence`` gets box slots, placed
      through ``Emission.place``, and working memory of one box; otherwise it gets whole
      tensors and the box's rows and columns (PRELU).
    """

    form: Form
    extent: Extent = Extent.STRIPES
    build: Callable | None = None
    constants: Callable | None = None
    before: Callable | None = None
    views: Callable | None = None
    geometry: Callable | None = None
    sequence: Callable | None = None
    work_bytes: Callable | None = None
    work: Callable | None = None
    ring: Callable | None = None
    stripe_window: Callable | None = None
    stageable: bool = False
    boxed: bool = False

    def whole(self, rank: int) -> bool:
        """Whether an output of ``rank`` dimensions is emitted only whole."""
        return self.extent is Extent.WHOLE or (self.extent is Extent.WHOLE_IF_FLAT
                                               and rank != 4)


# --- builders: (q, operands, ofm) -> the block operation
def _conv(q, operands: list[FmSlot], ofm: FmSlot):
    return conv_op(q, operands[0], ofm)


def _pool(q, operands: list[FmSlot], ofm: FmSlot):
    return pool_op(q, operands[0], ofm)


def _binary(q, operands: list[FmSlot], ofm: FmSlot):
    return elementwise_op(q, operands[0], operands[1], ofm)


def _abs(q, operands: list[FmSlot], ofm: FmSlot):
    return ops_elementwise.abs_op(q, operands[0], ofm)


def _relu(q, operands: list[FmSlot], ofm: FmSlot):
    return ops_elementwise.relu_op(q, operands[0], ofm)


def _table(q, operands: list[FmSlot], ofm: FmSlot):
    return ops_lut.npu_op(q, operands[0], ofm)


def _mean(q, operands: list[FmSlot], ofm: FmSlot):
    return mean_op(q, operands[0], ofm)


def _reduce_max(q, operands: list[FmSlot], ofm: FmSlot):
    return ops_reduce.reduce_max_op(q, operands[0], ofm)


# --- constants: (q, channels) -> (weights, scales)
def operator_constants(q, channels: int) -> tuple[None, None]:
    """The operator's own weights and requantization scales."""
    return None, None


def _mean_constants(q, channels: int) -> tuple:
    return mean_weights(q), [mean_scales(q)] * channels


# --- windows
def _conv_geometry(q) -> Geometry:
    kh, kw = (int(v) for v in q.weights.shape[:2])
    return Geometry((kh, kw), tuple(q.attrs["strides"]), tuple(q.attrs["dilation"]),
                    tuple(int(v) for v in q.attrs["padding"]))


def _pool_geometry(q) -> Geometry:
    return Geometry(tuple(q.attrs["pool_size"]), tuple(q.attrs["strides"]), (1, 1),
                    tuple(int(v) for v in q.attrs["padding"]))


# --- sequences: (q, operands, ofm, emission, box) -> operations
def _softmax(q, operands: list[FmSlot], ofm: FmSlot, em: Emission, box=None) -> list:
    return npu_softmax.softmax_ops(q, operands[0], ofm, em.work, em.flash, em.lut_address,
                                   em.block)


def _reduce_min(q, operands: list[FmSlot], ofm: FmSlot, em: Emission, box=None) -> list:
    return ops_reduce.reduce_min_ops(q, operands, ofm, em, box)


def _movement(q, operands: list[FmSlot], ofm: FmSlot, em: Emission, box=None) -> list:
    return movement_ops(q, operands, ofm, em.flash, em.block, box)


def _bilinear(q, operands: list[FmSlot], ofm: FmSlot, em: Emission, box=None) -> list:
    """A bilinear upscale by 2, 4 or 8 (``ops_resize``); a replication (1x1 input, equal
    shape) is copies."""
    if ops_resize.bilinear_factor(q) is None:
        return movement_ops(q, operands, ofm, em.flash, em.block, box)
    return ops_resize.bilinear_ops(q, operands[0], ofm, em.work, em.block, box)


def _transpose(q, operands: list[FmSlot], ofm: FmSlot, em: Emission, box=None) -> list:
    return transpose_ops(q, operands[0], ofm, em.work, em.block)


def _split_ring(q, ins, out, box, full, box_fm: Callable, block: Callable) -> list:
    """One SPLIT stripe, any rows, columns and channels of it: read from the input's box,
    each buffer held whole or in a ring (``box_fm(tensor, rows, cols, quantization)``;
    a buffer of fewer channels than its tensor folds them as its rows). A batch above 1 is
    its tensors' outer rows (``npu_ops.shape3``): each output batch's rows read from its
    input batch's (``split_batch_rows``); a tensor of fewer than four axes is a box with
    unit outer axes."""
    box, full = _four_axes(box), _four_axes(full)
    (b0, b1), (y0, y1), (x0, x1), channels = box
    if (b0, b1) != tuple(full[0]):
        raise UnsupportedOperatorError(q.tflite_name, f"the plan stripes it as {box}")
    by, bx, _ = split_origin(q)
    sy, sx = split_step(q)
    h_out = full[1][1]
    h_in = int(q.in_shapes[0][1]) if len(q.in_shapes[0]) == 4 else h_out
    batches = split_batch_rows(q)
    if len(q.in_shapes[0]) == 4 and (len(batches) > 1 or int(q.in_shapes[0][0]) > 1):
        _batches_held_whole(q, ins[0], out, full, box_fm)
    ops = []
    for k, i in batches:
        def read(rows, cols, i=i):
            """The input box of output ``rows`` x ``cols``: every (sy, sx)-th row and
            column, in input batch ``i``."""
            first = i * h_in + by
            return box_fm(ins[0], (first + sy * rows[0], first + sy * (rows[1] - 1) + 1),
                          (bx + sx * cols[0], bx + sx * (cols[1] - 1) + 1), None)

        for rows, cols in _unwrapped(read, (y0, y1), (x0, x1), (sy, sx)):
            ops += split_ring_ops(
                q, lambda rows=rows, cols=cols, read=read: strided_read(
                    read(rows, cols), (sy, sx), (rows[1] - rows[0], cols[1] - cols[0]),
                    q.tflite_name),
                lambda rows=rows, cols=cols, k=k: box_fm(
                    out, (k * h_out + rows[0], k * h_out + rows[1]), cols, None),
                tuple(channels), block)
    return ops


def _batches_held_whole(q, src, dst, full, box_fm: Callable) -> None:
    """A batch above 1 is read and written as rows of its folded tensor: its buffers must
    hold every row and column (a ring of fewer channels folds only them), or one batch's
    rows would land on another's."""
    n_in, h_in, w_in = (int(d) for d in q.in_shapes[0][:3])
    for t, rows, cols in ((src, n_in * h_in, w_in),
                          (dst, full[0][1] * full[1][1], full[2][1])):
        try:
            box_fm(t, (0, rows), (0, cols), None)
        except UnsupportedOperatorError as e:
            raise UnsupportedOperatorError(
                q.tflite_name, f"a batch of {full[0][1]} whose buffer is a ring of rows or "
                               "columns; its batches are rows of whole tensors") from e


def _four_axes(box) -> tuple:
    """A box of a tensor of fewer than four axes as its 4-D view's (unit outer axes)."""
    box = tuple(tuple(b) for b in box)
    return ((0, 1),) * (4 - len(box)) + box


def _unwrapped(read: Callable, rows, cols, step) -> list:
    """Output (rows, cols) boxes covering ``rows`` x ``cols`` whose input boxes (``read``)
    wrap no ring, where the read is strided (a ring's tiles take unit strides only): cut
    at the first output row or column whose input lies past the ring's end."""
    if step == (1, 1):
        return [(rows, cols)]
    fm = read(rows, cols)
    (y0, y1), (x0, x1) = rows, cols
    if fm.tiles.height_0 < fm.shape.height:
        cut = y0 + -(-fm.tiles.height_0 // step[0])
        return _unwrapped(read, (y0, cut), cols, step) + _unwrapped(read, (cut, y1), cols, step)
    if fm.tiles.width_0 < fm.shape.width:
        cut = x0 + -(-fm.tiles.width_0 // step[1])
        return _unwrapped(read, rows, (x0, cut), step) + _unwrapped(read, rows, (cut, x1), step)
    return [(rows, cols)]


_CONV = StreamEmitter(Form.BLOCK, build=_conv, constants=operator_constants,
                      geometry=_conv_geometry, stageable=True)
_POOL = StreamEmitter(Form.BLOCK, build=_pool, geometry=_pool_geometry)
_BINARY = StreamEmitter(Form.BLOCK, Extent.WHOLE_IF_FLAT, build=_binary)
_TABLE = StreamEmitter(Form.BLOCK, Extent.WHOLE_IF_FLAT, build=_table, before=ops_lut.before)
_MOVEMENT = StreamEmitter(Form.MOVEMENT, sequence=_movement)


def _leaky_relu16(q, operands: list[FmSlot], ofm: FmSlot, em: Emission, box=None) -> list:
    return ops_lut.leaky_relu16_ops(q, operands[0], ofm, em.work, em.block, em.place)


#: an int16 LEAKY_RELU: two requantizations and their MAX / MIN, or SUB for a negative
#: alpha (no int16 table holds it; ``ops_lut``), over any stripe (its working memory holds
#: the whole output)
LEAKY_RELU16 = StreamEmitter(Form.SEQUENCE, Extent.STRIPES, sequence=_leaky_relu16,
                             work_bytes=ops_lut.leaky_relu16_work_bytes,
                             work=ops_lut.leaky_relu16_work, boxed=True)

#: an AVERAGE_POOL_2D with a width stride past 3: one pool per output column
#: (``ops_wide_stride``), over any stripe's boxes
WIDE_STRIDE_POOL = StreamEmitter(Form.SEQUENCE, Extent.STRIPES,
                                 sequence=ops_wide_stride.column_pool_ops,
                                 geometry=_pool_geometry,
                                 work_bytes=ops_wide_stride.work_bytes, boxed=True)

#: an int16 SOFTMAX: TFLite Micro's int16 kernel as thirteen operations and two LUT DMAs
#: (``ops_softmax16``), over the whole tensors, as the 8-bit SOFTMAX
SOFTMAX16 = StreamEmitter(Form.SEQUENCE, Extent.WHOLE, sequence=ops_softmax16.softmax16_ops,
                          work_bytes=ops_softmax16.work_bytes)

#: SUM, REDUCE_MAX and REDUCE_MIN over the depth (``ops_reduce_depth``): SUM one
#: convolution into one channel, striped as any; REDUCE_MAX / REDUCE_MIN max pools over each
#: pixel's channels (and over the reduced height and width), over whole tensors
REDUCE_OVER_DEPTH: dict[Op, StreamEmitter] = {
    Op.REDUCE_SUM: StreamEmitter(
        Form.BLOCK, Extent.WHOLE_IF_FLAT, build=ops_reduce_depth.sum_op,
        constants=ops_reduce_depth.sum_constants,
        geometry=lambda q: Geometry(*ops_reduce_depth.sum_window(q))),
    **{op: StreamEmitter(Form.SEQUENCE, Extent.WHOLE, sequence=ops_reduce_depth.min_max_ops,
                         work_bytes=ops_reduce_depth.work_bytes)
       for op in (Op.REDUCE_MAX, Op.REDUCE_MIN)},
}

#: SUM, MEAN, REDUCE_MAX and REDUCE_MIN over height and width past one NPU kernel: pools of
#: bands of rows and their combination (``ops_reduce_split``), over whole tensors
REDUCE_SPLIT = StreamEmitter(Form.SEQUENCE, Extent.WHOLE, sequence=ops_reduce_split.split_ops,
                             work_bytes=ops_reduce_split.work_bytes)

#: every operator a stream is generated for, and how
STREAM_OPS: dict[Op, StreamEmitter] = {
    Op.CONV2D: _CONV,
    Op.DEPTHWISE_CONV2D: _CONV,
    # a stride-1 convolution over the IFM upscaled with zeros (ops_transpose_conv)
    Op.TRANSPOSE_CONV2D: StreamEmitter(
        Form.BLOCK, build=lambda q, operands, ofm: transpose_conv_op(q, operands[0], ofm),
        constants=transpose_conv_constants, stripe_window=transpose_conv_window),
    # a 1x1 convolution over the rows x K IFM (ops_fc)
    Op.FULLY_CONNECTED: StreamEmitter(Form.BLOCK, Extent.WHOLE, build=_conv,
                                      constants=operator_constants, views=fc_views),
    Op.AVG_POOL2D: _POOL,
    Op.MAX_POOL2D: _POOL,
    # one depthwise convolution with constant weights
    Op.MEAN: StreamEmitter(Form.BLOCK, Extent.WHOLE, build=_mean, constants=_mean_constants),
    # a single-window max pool (ops_reduce)
    Op.REDUCE_MAX: StreamEmitter(Form.BLOCK, Extent.WHOLE, build=_reduce_max),
    # NOT through a table, then the single-window max pool through it again (ops_reduce)
    Op.REDUCE_MIN: StreamEmitter(Form.SEQUENCE, Extent.WHOLE, sequence=_reduce_min,
                                 work_bytes=ops_reduce.reduce_min_work_bytes),
    # code and reversed channel packed into int16, a max pool of each pixel's channels
    # through an int16 table, a cast to int32 (ops_argmax); each reads its own pixels
    Op.ARG_MAX: StreamEmitter(Form.SEQUENCE, sequence=ops_argmax.argmax_ops,
                              work_bytes=ops_argmax.argmax_work_bytes),
    # MEAN's depthwise convolution, TFLite's SUM scale (ops_reduce)
    Op.REDUCE_SUM: StreamEmitter(Form.BLOCK, Extent.WHOLE, build=_mean,
                                 constants=ops_reduce.reduce_sum_constants),
    Op.ADD: _BINARY,
    Op.MUL: _BINARY,
    Op.SUB: _BINARY,
    Op.MINIMUM: _BINARY,
    Op.MAXIMUM: _BINARY,
    Op.ABS: StreamEmitter(Form.BLOCK, Extent.WHOLE_IF_FLAT, build=_abs),
    # a 1x1 depthwise convolution with unit weights
    Op.RELU: StreamEmitter(Form.BLOCK, Extent.WHOLE_IF_FLAT, build=_relu,
                           constants=ops_elementwise.relu_constants),
    Op.SIGMOID: _TABLE,
    Op.TANH: _TABLE,
    Op.LEAKY_RELU: _TABLE,
    Op.HARD_SWISH: _TABLE,
    Op.ELU: _TABLE,
    # four operations: one per branch of TFLite's kernel and their sum (ops_prelu), their
    # intermediates of the stripe's size
    Op.PRELU: StreamEmitter(Form.SEQUENCE, sequence=ops_prelu.prelu_ops,
                            work_bytes=ops_prelu.prelu_work_bytes, work=ops_prelu.prelu_work),
    # seven operations, each step of TFLite Micro's kernel (ops_squared_difference)
    Op.SQUARED_DIFFERENCE: StreamEmitter(
        Form.SEQUENCE, Extent.WHOLE_IF_FLAT,
        sequence=ops_squared_difference.squared_difference_ops,
        work_bytes=ops_squared_difference.squared_difference_work_bytes,
        work=ops_squared_difference.squared_difference_work, boxed=True),
    # per output column a MUL of a's rows by b's column and its REDUCE_SUM, b transposed
    # first (ops_batch_matmul); a stripe's box of whole tensors, its products the stripe's
    Op.BATCH_MATMUL: StreamEmitter(Form.SEQUENCE, sequence=ops_batch_matmul.batch_matmul_ops,
                                   work_bytes=ops_batch_matmul.work_bytes,
                                   work=ops_batch_matmul.work),
    Op.RSQRT: _TABLE,
    Op.EXP: _TABLE,
    Op.GELU: _TABLE,
    Op.LOG: _TABLE,
    Op.NEG: _TABLE,
    Op.REQUANTIZE: _TABLE,
    Op.SOFTMAX: StreamEmitter(Form.SEQUENCE, Extent.WHOLE, sequence=_softmax,
                              work_bytes=npu_softmax.work_bytes),
    Op.RESHAPE: StreamEmitter(Form.ALIAS, Extent.WHOLE),
    Op.PAD: _MOVEMENT,
    Op.MIRROR_PAD: _MOVEMENT,
    Op.REVERSE: _MOVEMENT,
    Op.TILE: _MOVEMENT,
    Op.SPLIT: StreamEmitter(Form.MOVEMENT, sequence=_movement, ring=_split_ring),
    Op.CONCATENATE: _MOVEMENT,
    Op.RESIZE_NEAREST: _MOVEMENT,
    # an average pool over a nearest upscale, enlarged first through working memory for 4x, 8x
    Op.RESIZE_BILINEAR: StreamEmitter(Form.MOVEMENT, sequence=_bilinear,
                                      work_bytes=ops_resize.work_bytes),
    # strided copies straight into the output (ops_movement.transpose_form); past
    # MAX_STRIDED_COPIES, rotations of its axes alternating through working memory
    Op.TRANSPOSE: StreamEmitter(Form.SEQUENCE, Extent.WHOLE, sequence=_transpose,
                                work_bytes=transpose_work_bytes),
    # UNIDIRECTIONAL_SEQUENCE_LSTM, unrolled over batches and steps (ops_lstm); its ``q`` is
    # the ``ops_lstm.Lstm`` read from the TFLite graph (the importer has no LSTM), its
    # operands the sequence and the two states, which it updates in place
    Op.LSTM: StreamEmitter(Form.SEQUENCE, Extent.WHOLE, sequence=ops_lstm.lstm_ops,
                           work_bytes=ops_lstm.work_bytes),
}

#: operators the Ethos-U's checks accept that have no stream yet: their subgraphs run on the
#: "tir" emulator only (none today; tests/ethos_arch/test_ops.py holds the two sets apart)
EMULATOR_ONLY: frozenset[Op] = frozenset()


def takes_ring_operands(op: Op, em: StreamEmitter) -> bool:
    """Whether the planned stream can emit ``op`` (its row ``em``) with an operand or its
    output held in a cascade's buffer: a block operation addresses any box of any buffer; the
    copies of a :data:`~ops_movement.RING_KINDS` operator and an emitter's ``ring`` are
    clipped to each box, and a ``boxed`` sequence reads and writes the boxes; any other
    copies or sequence address their tensors whole."""
    return em.form not in (Form.MOVEMENT, Form.SEQUENCE) or op in RING_KINDS or \
        em.ring is not None or em.boxed


#: rows of operator forms, beside :data:`STREAM_OPS`' own, whose planner Parts have their
#: operator's kind: a reduction over the depth (one over height and width is a MEAN Part),
#: so that the sets below hold a REDUCE_MAX over the depth as its row says
_PART_FORMS = tuple(REDUCE_OVER_DEPTH.items())

#: operators the planner must keep out of cascades (``planner.device_model.Device.solitary``):
#: the stream emits them only from and into tensors held whole, so each is a Plan of its own
#: (which may stripe it, where the row takes stripes). A computation emitted only over whole
#: tensors (``Extent.WHOLE``: SOFTMAX, REDUCE_MIN) is left out: it ends a network on a flat
#: or 1x1 tensor, which a cascade holds whole (a flat SOFTMAX after its FULLY_CONNECTED), and
#: so stays in the cascades it runs in today; a whole-tensor data movement (TRANSPOSE) sits
#: between feature maps the planner stripes, so it is in.
SOLITARY_OPS: frozenset[Op] = frozenset(
    op for op, em in (*STREAM_OPS.items(), *_PART_FORMS)
    if not takes_ring_operands(op, em) and (em.extent is not Extent.WHOLE or op.info.data_move))

#: the Ethos-U planner device's ``solitary`` set: :data:`SOLITARY_OPS` and SPLIT, whose Part
#: names it only for a slice of a batch above 1 (``part_matchers``; a slice of one batch is a
#: SLICE Part, cascaded): the stream copies a batch as rows of whole tensors (``_split_ring``
#: refuses it in a ring of rows)
PLANNER_SOLITARY: frozenset[Op] = SOLITARY_OPS | {Op.SPLIT}

#: the computations left out of :data:`SOLITARY_OPS` (SOFTMAX, REDUCE_MIN): the planner keeps
#: them in a cascade only where it computes their whole output in one stripe
#: (``planner.device_model.Device.whole_output``), so a cascade striped through a 4-D SOFTMAX
#: becomes Plans around it, and a flat one stays in the cascade that holds it whole
WHOLE_OUTPUT_OPS: frozenset[Op] = frozenset(
    op for op, em in (*STREAM_OPS.items(), *_PART_FORMS)
    if not takes_ring_operands(op, em) and em.extent is Extent.WHOLE and not op.info.data_move)


def planned_work(q) -> WorkMemory | None:
    """The working memory of ``q``'s operations, which the planner holds in its Plan
    (``planner.work_memory``, the Part's ``work``): its row's ``work``, over each stripe
    (an int16 LEAKY_RELU, a SQUARED_DIFFERENCE, a PRELU, a BATCH_MATMUL), else its
    ``work_bytes``; None where it needs none and where the stream cannot take ``q`` (its
    subgraph then keeps the emulator, which needs none)."""
    em = emitter(q)
    if em is None or em.work_bytes is None:
        return None
    if em.work is not None:
        return em.work(q)
    try:
        n = em.work_bytes(q)
    except UnsupportedOperatorError:
        return None
    return WorkMemory(n) if n else None


def emitter(q) -> StreamEmitter | None:
    """The table's row of ``q``'s operator (None: no stream is generated for it); an int16
    LEAKY_RELU is :data:`LEAKY_RELU16`, an int16 SOFTMAX :data:`SOFTMAX16`, a reduction over
    the depth its :data:`REDUCE_OVER_DEPTH` row, an average pool with a width stride past
    3 :data:`WIDE_STRIDE_POOL`, a reduction past one kernel :data:`REDUCE_SPLIT`."""
    if ops_lut.is_leaky_relu16(q):
        return LEAKY_RELU16
    if ops_softmax16.is_softmax16(q):
        return SOFTMAX16
    if ops_reduce_split.bands(q) is not None:
        return REDUCE_SPLIT
    if ops_reduce_depth.over_depth(q):
        return REDUCE_OVER_DEPTH[q.kind]
    if ops_wide_stride.wide_stride(q):
        return WIDE_STRIDE_POOL
    return STREAM_OPS.get(q.kind)
