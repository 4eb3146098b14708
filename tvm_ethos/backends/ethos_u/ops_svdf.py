"""SVDF (int8 input, int8 state) as TFLite Micro's integer kernel computes it, read from the
TFLite graph: what the Ethos-U stream (``stream_svdf``) needs of the operator, and why an
instance is refused.

TFLite Micro's step (``EvalIntegerSvdfReference``), per batch:

- the state (``filters`` rows of ``memory`` values, newest last) moves one value left;
- the newest column is ``zp + clamp(requant(input x weights_feature))``, the clamp to the
  state type's range before the zero point is added, the sum stored as the state type;
- per filter the dot product of its row (less the zero point) with its ``weights_time``
  row, summed over the ``rank`` filters of each unit, plus the bias, requantized into the
  output (int8, its zero point, the int8 range: the integer kernel applies no fused
  activation).

Both requantizations use the multipliers TFLite Micro's prepare computes: the scales'
expression in double precision, ``QuantizeMultiplier``'d. What the stream cannot
reproduce bit for bit is refused by name (the operator then stays a TFLite operator): a
float SVDF, an int16 state (its ``weights_time`` are int16, and the NPU's weights are 8-bit),
a state whose type differs from ``weights_time``'s (TFLite Micro then reads one as the
other), no bias (TFLite Micro's prepare reads the bias's scale), an effective scale of 1 or
more (TFLite Micro's left shift wraps in int32 where the NPU's does not), and sums that may
leave int32 (TFLite Micro's wrap).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tvm_ethos.backends.ethos_u.ops_lstm import Quant
from tvm_ethos.backends.ethos_u.source_operator import source_operator
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError

KIND = "SVDF"
#: input positions of the SVDF operator (TFLite's schema)
_INPUT, _WEIGHTS_FEATURE, _WEIGHTS_TIME, _BIAS, _STATE = range(5)
#: TFLite's tensor types this reads
_INT8, _INT16, _INT32 = 9, 7, 2
_TYPE_NAMES = {0: "float32", 2: "int32", 3: "uint8", 7: "int16", 9: "int8"}
#: the largest magnitude of one int8 weight times one state or input code less its zero point
_TERM = 128 * 255
_INT32_MAX = 2 ** 31 - 1
#: the most values an NPU operation reads along one axis (its 16-bit size registers): the
#: time step reads a batch's whole state as one FULLY_CONNECTED's depth, the copies the
#: state's rows as one width
_NPU_AXIS = 65536


@dataclass(frozen=True)
class Svdf:
    """What the stream needs of one SVDF: its sizes, the quantization of its input, state
    and output, its constants (raw codes: TFLite Micro's kernel subtracts no weight zero
    point) and TFLite Micro's two effective scales (``feature_scale`` into the state,
    ``time_scale`` into the output)."""

    batches: int
    input_size: int
    filters: int
    rank: int
    memory: int
    input_q: Quant
    state_q: Quant
    output_q: Quant
    weights_feature: np.ndarray
    weights_time: np.ndarray
    bias: np.ndarray
    feature_scale: float
    time_scale: float

    @property
    def units(self) -> int:
        return self.filters // self.rank

    @property
    def state_size(self) -> int:
        """Values of state a batch holds (``filters`` rows of ``memory``)."""
        return self.filters * self.memory


def _scale_ratio(a: float, b: float, c: float) -> float:
    """``a * b / c`` of three float32 scales in double precision, as TFLite Micro's prepare
    computes an effective scale (each scale widened first: in float32 the product of
    0.37's multiplier and 225 rounds to 84 where TFLite Micro gives 83)."""
    return float(np.float32(a)) * float(np.float32(b)) / float(np.float32(c))


def read_svdf(graph, index: int) -> Svdf:
    """The SVDF that operator ``index`` of the source graph (``tflite_export.SourceGraph``)
    is, or UnsupportedOperatorError saying what in it the stream does not reproduce."""
    import tflite

    g, model = graph.g, graph.model
    op, name, ins, outs = source_operator(graph, index, KIND, 5)

    def refuse(why: str):
        raise UnsupportedOperatorError(name, why)

    def tensor(t: int):
        return g.Tensors(t)

    def type_name(t: int) -> str:
        return _TYPE_NAMES.get(tensor(t).Type(), str(tensor(t).Type()))

    def shape(t: int) -> tuple[int, ...]:
        return tuple(int(d) for d in tensor(t).ShapeAsNumpy()) if tensor(t).ShapeLength() \
            else ()

    def quant(t: int, what: str) -> Quant:
        q = tensor(t).Quantization()
        if q is None or not q.ScaleLength():
            refuse(f"{what} is not quantized")
        if q.ScaleLength() != 1:
            refuse(f"{what} has {q.ScaleLength()} scales; TFLite Micro's SVDF reads one")
        zp = int(q.ZeroPointAsNumpy()[0]) if q.ZeroPointLength() else 0
        return Quant(float(np.float32(q.ScaleAsNumpy()[0])), zp)

    def data(t: int, dtype) -> np.ndarray:
        buf = model.Buffers(tensor(t).Buffer())
        if not buf.DataLength():
            refuse(f"input {ins.index(t)} is not a constant")
        return np.frombuffer(buf.DataAsNumpy().tobytes(), dtype).reshape(shape(t))

    if any(ins[p] < 0 for p in (_INPUT, _WEIGHTS_FEATURE, _WEIGHTS_TIME, _STATE)) or \
            len(outs) != 1:
        refuse("an input or the output is missing")
    if ins[_BIAS] < 0:
        refuse("it has no bias (TFLite Micro's prepare reads the bias's scale)")
    x, wf, wt, b, s, y = (ins[_INPUT], ins[_WEIGHTS_FEATURE], ins[_WEIGHTS_TIME], ins[_BIAS],
                          ins[_STATE], outs[0])
    if tensor(x).Type() != _INT8:
        refuse(f"its input is {type_name(x)}; the stream takes an int8 SVDF (a float one "
               "stays on the CPU)")
    if tensor(s).Type() != tensor(wt).Type():
        refuse(f"its state is {type_name(s)} and its weights_time {type_name(wt)}; TFLite "
               "Micro reads both as one type")
    if tensor(s).Type() != _INT8:
        refuse(f"its state and weights_time are {type_name(s)}; the NPU's weights are 8-bit, "
               "so the stream takes an int8 state")
    for t, want, what in ((wf, _INT8, "weights_feature"), (b, _INT32, "the bias"),
                          (y, _INT8, "the output")):
        if tensor(t).Type() != want:
            refuse(f"{what} is {type_name(t)}, not {_TYPE_NAMES[want]}")
    options = tflite.SVDFOptions()
    table = op.BuiltinOptions()
    if table is None:
        refuse("it has no options (TFLite Micro reads its rank there)")
    options.Init(table.Bytes, table.Pos)
    rank = int(options.Rank())
    if len(shape(x)) != 2 or len(shape(wf)) != 2 or len(shape(wt)) != 2:
        refuse(f"input, weights_feature and weights_time shapes {list(shape(x))}, "
               f"{list(shape(wf))}, {list(shape(wt))}; TFLite Micro's kernel takes 2-D ones")
    batches, input_size = shape(x)
    filters, memory = shape(wt)
    if rank < 1 or filters % rank:
        refuse(f"rank {rank} does not divide its {filters} filters")
    units = filters // rank
    if shape(wf) != (filters, input_size) or shape(b) != (units,) or \
            int(np.prod(shape(s))) != batches * filters * memory or \
            int(np.prod(shape(y))) != batches * units:
        refuse(f"shapes {list(shape(wf))}, {list(shape(b))}, {list(shape(s))}, "
               f"{list(shape(y))} do not fit {batches} batches of {input_size} inputs, "
               f"{filters} filters of memory {memory}, rank {rank}")
    for what, n in (("a batch's state (filters x memory)", filters * memory),
                    ("the state's rows (batches x filters)", batches * filters),
                    ("the input", input_size)):
        if n > _NPU_AXIS:
            refuse(f"{what} holds {n:,} values; an NPU operation reads at most "
                   f"{_NPU_AXIS:,} along one axis")
    input_q, state_q, output_q = quant(x, "the input"), quant(s, "the state"), \
        quant(y, "the output")
    s_wf, s_wt = quant(wf, "weights_feature").scale, quant(wt, "weights_time").scale
    feature_scale = _scale_ratio(input_q.scale, s_wf, state_q.scale)
    time_scale = _scale_ratio(state_q.scale, s_wt, output_q.scale)
    for what, scale in (("input x weights_feature / state", feature_scale),
                        ("state x weights_time / output", time_scale)):
        if not 0.0 < scale < 1.0:
            refuse(f"effective scale {what} = {scale:g}; the stream takes one in (0, 1) "
                   "(TFLite Micro's left shift for a larger one wraps in int32)")
    bias = data(b, np.int32)
    worst = int(np.abs(bias.astype(np.int64)).max(initial=0)) + rank * memory * _TERM
    if max(input_size, 1) * _TERM > _INT32_MAX or worst > _INT32_MAX:
        refuse("its sums may leave int32, where TFLite Micro wraps and the NPU saturates")
    return Svdf(batches, input_size, filters, rank, memory, input_q, state_q, output_q,
                data(wf, np.int8), data(wt, np.int8), bias, feature_scale, time_scale)


def svdf_tensors(graph, index: int) -> tuple[int, int, int]:
    """The source tensors of operator ``index``'s input, state and output."""
    ins = graph.all_inputs(index)
    return ins[_INPUT], ins[_STATE], graph.writes[index][0]


def refusal(graph, index: int) -> str:
    """Why the stream does not reproduce operator ``index`` as an SVDF, or ``""``."""
    try:
        read_svdf(graph, index)
    except UnsupportedOperatorError as err:
        return str(err)
    return ""
