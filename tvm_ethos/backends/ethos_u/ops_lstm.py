"""UNIDIRECTIONAL_SEQUENCE_LSTM (int8 activations, int16 cell state) as one Ethos-U command
stream, unrolled over its batches and time steps the way TFLite Micro's integer kernel
computes each step:

- each gate is two FULLY_CONNECTED operations, int8 x int8 -> int16 at the fixed scale
  2**-12 (the input with the gate's bias, the previous hidden state without one), added
  with the NPU's int16 SIGMOID or TANH fused (Q3.12 in, Q0.15 out);
- the cell state (int16, a power-of-two scale) becomes ``forget * cell + input * cell
  gate``, each product rescaled by TFLite Micro's own multiplier, clipped to the quantized
  cell clip;
- the hidden state is ``tanh(cell) * output gate`` rescaled to the hidden state's
  quantization (int8), and copied into the output at its time step.

The hidden and cell states are the operator's variable tensors: they live in the scratch
arena (inputs of the ``ethos-u`` operator that its stream updates in place, as Vela's files
have them), so they carry over from one invocation to the next as on a board. Every
multiplier is the one TFLite Micro's prepare computes (``QuantizeMultiplier`` of the real
scale in double, the FULLY_CONNECTED input x weight scale product in float32), so the stream
rounds as the kernel does.

Variants the stream does not express (no input gate, peephole, projection, layer
normalization, float or int16 activations, per-channel weights, another
cell activation, a cell scale that is no power of two from 2**-18 to 2**-5) are refused with
:class:`UnsupportedOperatorError` naming what is in the way; the operator then stays a
TFLite operator.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from tvm_ethos.backends.ethos_u.encode_ahead import encode_weights
from tvm_ethos.backends.ethos_u.npu_ops import (
    FmSlot,
    feature_map,
    fully_connected_op,
    real_bound,
)
from tvm_ethos.backends.ethos_u.payload import ArenaTensor, EthosUPayload
from tvm_ethos.backends.ethos_u.source_operator import source_operator
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    SCRATCH_REGION,
    Flash,
    UnsupportedOperatorError,
    npu_accelerator,
    vela_api,
)
from tvm_ethos.backends.ethos_u.stream_memo import generator
from tvm_ethos.backends.ethos_u.stream_payload import driver_payload
from tvm_ethos.compute.quant import f32, quantize_multiplier

KIND = "UNIDIRECTIONAL_SEQUENCE_LSTM"
#: the scale TFLite Micro gives every gate's pre-activation (Q3.12) and activation (Q0.15)
GATE_INPUT_SCALE = 2.0 ** -12
GATE_OUTPUT_SCALE = 2.0 ** -15
#: the NPU's int16 SIGMOID and TANH read their input at this real scale (Vela's generator
#: sets an elementwise operation's output scale to it when one is fused)
_NONLINEAR_SCALE = 1.0 / 0x3000
#: the codes TFLite Micro's int16 logistic reaches (its table's extremes): the NPU's
#: sigmoid is wider, so the fused activation clamps to these
_SIGMOID_MIN, _SIGMOID_MAX = 11, 32757
#: cell state scales (as powers of two) whose tanh the NPU computes as TFLite Micro does:
#: 2**-11 and 2**-12 are the generator's special cases, the others an exact power-of-two
#: rescale of its input (tests/tvm_ethos/test_stream_lstm.py samples the whole range)
CELL_SCALE_POWERS = tuple(range(-18, -4))
_TANH = 4   # ActivationFunctionType.TANH
#: TFLite's tensor types this stream reads
_INT8, _INT16, _INT32 = 9, 7, 2
_TYPE_NAMES = {0: "float32", 2: "int32", 3: "uint8", 7: "int16", 9: "int8"}
#: input positions of the UNIDIRECTIONAL_SEQUENCE_LSTM operator (TFLite's schema)
_INPUT, _STATE_H, _STATE_C = 0, 18, 19
_INPUT_WEIGHTS = (1, 2, 3, 4)          # input, forget, cell, output gates
_RECURRENT_WEIGHTS = (5, 6, 7, 8)
_PEEPHOLE = (9, 10, 11)
_BIASES = (12, 13, 14, 15)
_PROJECTION = (16, 17)
_LAYER_NORM = (20, 21, 22, 23)


class Quant(NamedTuple):
    """A tensor's quantization: real = scale * (code - zero_point)."""

    scale: float
    zero_point: int


@dataclass(frozen=True)
class Gate:
    """One gate's constants: (cells, features) and (cells, cells) int8 weights with their
    per-tensor scales, and the int32 bias of the input product."""

    input_weights: np.ndarray
    input_scale: float
    recurrent_weights: np.ndarray
    recurrent_scale: float
    bias: np.ndarray


@dataclass(frozen=True)
class Lstm:
    """What the stream needs of one UNIDIRECTIONAL_SEQUENCE_LSTM: its sizes, the
    quantization of its input, hidden state and cell state, the quantized cell clip (None:
    none; TFLite Micro clips to [-clip, clip] whenever the real clip is positive, even where
    it quantizes to 0) and its four gates (input, forget, cell, output)."""

    batches: int
    steps: int
    features: int
    cells: int
    input_q: Quant
    hidden_q: Quant
    cell_scale: float
    cell_clip: int | None
    gates: tuple[Gate, Gate, Gate, Gate]
    time_major: bool = False

    def row(self, batch: int, t: int) -> int:
        """The row of step ``t`` of batch ``batch`` in the input and output sequences:
        (time, batch) order for a time-major LSTM, (batch, time) otherwise."""
        return t * self.batches + batch if self.time_major else batch * self.steps + t

    def sequence_shape(self, depth: int) -> tuple[int, int, int]:
        """The shape of a sequence of ``depth`` values a step, in the operator's order."""
        if self.time_major:
            return (self.steps, self.batches, depth)
        return (self.batches, self.steps, depth)


class Neighbour(NamedTuple):
    """An ethos-u operator that shares a sequence with the LSTM: that tensor's offset in
    its stretch of the arena and the stretch's bytes."""

    offset: int
    stretch_bytes: int


class LstmBlocks(NamedTuple):
    """The bytes of the blocks the LSTM's Plan holds besides its input sequence: the output
    sequence, the working memory (``<part>:work``: four gate buffers and one scratch row)
    and the states (``<part>:state``: the hidden state's rows, then the cell state's)."""

    output: int
    work: int
    states: int

    @classmethod
    def of(cls, lstm: "Lstm") -> "LstmBlocks":
        """What the stream needs of each block (the planner's Part states the same)."""
        b, t, n = lstm.batches, lstm.steps, lstm.cells
        return cls(b * t * n, work_bytes(lstm), _up(b * n) + 2 * b * n)


def _graph_lstm(q) -> "Lstm":
    """``q`` where it is an LSTM read from the TFLite graph; an imported one (a ``QOp`` of
    an ``ethos-u,llvm`` package) is refused: its stream would need the states' slots, which
    only the tflite-micro host lays out (``stream_lstm``), so it keeps the emulator."""
    if not isinstance(q, Lstm):
        raise UnsupportedOperatorError(KIND, "an imported LSTM (ethos-u,llvm) runs on the "
                                       "emulator: only the tflite-micro host lays out the "
                                       "states its stream updates")
    return q


def work_bytes(lstm: "Lstm") -> int:
    """The stream's working memory: four gate buffers and one scratch row, int16, one row of
    cells each, every one on an :data:`ALIGN` boundary, up to the scratch row's last byte."""
    lstm = _graph_lstm(lstm)
    return 4 * _up(2 * lstm.cells) + 2 * lstm.cells


class LstmArena(NamedTuple):
    """Offsets in the scratch arena: the output sequence, four gate buffers and one scratch
    buffer (int16, one row of cells each), the input sequence, and the hidden state (int8)
    and cell state (int16); ``bytes`` the arena's size.

    A sequence the LSTM shares with another ethos-u operator fixes where that operator's
    stretch lies against the LSTM's (``arena_layout``): the sequence starts at the same
    offset modulo :data:`ALIGN` as in that stretch (which then starts aligned). The states
    persist between invocations, so no neighbour's stretch may cover them: they come after
    everything (the consumer's stretch included) when no ethos-u operator writes the input,
    else first, below every neighbour's stretch, the input then highest, so that the
    operator writing it (another LSTM) has none of its own states inside this stretch."""

    cell: int
    hidden: int
    input: int
    output: int
    gates: tuple[int, int, int, int]
    scratch: int
    bytes: int

    @classmethod
    def of(cls, lstm: Lstm, blocks: LstmBlocks | None = None,
           input_from: Neighbour | None = None,
           output_to: Neighbour | None = None, work_apart: bool = False) -> "LstmArena":
        """The arena of ``lstm`` holding ``blocks`` (default: what the stream needs, a Plan's
        may be larger), its sequences lined up with its neighbours'; ``work_apart``: the
        working memory is elsewhere (an Ethos-U65's fast scratch, from its offset 0), the
        arena holds the sequences and the states only."""
        b, t, n = lstm.batches, lstm.steps, lstm.cells
        need = LstmBlocks.of(lstm)
        blocks = need if blocks is None else blocks
        short = [f"{what} {got:,} B < {want:,} B" for what, got, want in
                 zip(LstmBlocks._fields, blocks, need) if got < want]
        if short:
            raise UnsupportedOperatorError(KIND, "its plan holds less than its stream needs: "
                                           + ", ".join(short))
        phase_out = output_to.offset % ALIGN if output_to else 0
        phase_in = input_from.offset % ALIGN if input_from else 0
        # (size, phase) of the output, the working memory, the input
        parts = [(blocks.output, phase_out), (0 if work_apart else blocks.work, 0),
                 (b * t * lstm.features, phase_in)]
        near = [(0, output_to), (2, input_from)]

        def place(start: int) -> tuple[list[int], int]:
            offsets, end = [], start
            for size, phase in parts:
                offsets.append(end + phase)
                end = _up(end + phase + size)
            return offsets, end

        def stretch(offsets, k, theirs) -> tuple[int, int]:
            """A neighbour's stretch in the LSTM's offsets."""
            low = offsets[k] - theirs.offset
            return low, low + theirs.stretch_bytes

        states = _up(blocks.states)
        if input_from is None:
            # the states after everything, the consumer's stretch included
            offsets, end = place(0)
            for k, theirs in near:
                if theirs is not None:
                    end = max(end, _up(stretch(offsets, k, theirs)[1]))
            hidden = end
        else:
            # an operator before the LSTM wrote its input: the input is highest, the states
            # lowest, below every neighbour's stretch (one reading this LSTM's input as its
            # output, another LSTM, then spans no state of the one before)
            start = states
            while True:
                offsets, end = place(start)
                low = min(stretch(offsets, k, theirs)[0] for k, theirs in near
                          if theirs is not None)
                if low >= states:
                    break
                start += _up(states - low)
            hidden = 0
        cell = _up(hidden + b * n)
        output, work, input_ = offsets
        work = 0 if work_apart else work
        row = _up(2 * n)
        return cls(cell, hidden, input_, output, tuple(work + k * row for k in range(4)),
                   work + 4 * row, max(end, hidden + states))


def _up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


# ------------------------------------------------------------------------- reading the model
def read_lstm(graph, index: int) -> Lstm:
    """The LSTM that operator ``index`` of the source graph (``tflite_export.SourceGraph``)
    is, or UnsupportedOperatorError saying what in it the stream does not express."""
    import tflite

    g, model = graph.g, graph.model
    op, name, ins, outs = source_operator(graph, index, KIND, 24)

    def refuse(why: str):
        raise UnsupportedOperatorError(name, why)

    def present(pos) -> bool:
        return ins[pos] >= 0

    options = tflite.UnidirectionalSequenceLSTMOptions()
    table = op.BuiltinOptions()
    if table is None:
        refuse("it has no options (TFLite Micro reads its activation and cell clip there)")
    options.Init(table.Bytes, table.Pos)
    time_major = bool(options.TimeMajor())
    if options.FusedActivationFunction() != _TANH:
        refuse(f"cell activation {options.FusedActivationFunction()}; the NPU's int16 "
               "activation for it is TANH")
    if not present(_INPUT_WEIGHTS[0]) or not present(_RECURRENT_WEIGHTS[0]):
        refuse("no input gate (coupled input and forget gates, CIFG), which TFLite Micro's "
               "integer kernel does not run either")
    if any(present(p) for p in _PEEPHOLE):
        refuse("peephole connections (cell-to-gate weights)")
    if any(present(p) for p in _PROJECTION):
        refuse("a projection layer")
    if any(present(p) for p in _LAYER_NORM):
        refuse("layer normalization")
    if options.ProjClip():
        refuse("a projection clip")

    def tensor(pos: int):
        return g.Tensors(ins[pos])

    def quant(pos: int, what: str) -> tuple[list, list]:
        q = tensor(pos).Quantization()
        if q is None or not q.ScaleLength():
            refuse(f"{what} is not quantized (a float LSTM stays on the CPU)")
        zps = q.ZeroPointAsNumpy().tolist() if q.ZeroPointLength() else [0]
        return q.ScaleAsNumpy().tolist(), zps

    def data(pos: int, dtype) -> np.ndarray:
        t = tensor(pos)
        buf = model.Buffers(t.Buffer())
        if not buf.DataLength():
            refuse(f"input {pos} is not a constant")
        shape = tuple(int(d) for d in t.ShapeAsNumpy())
        return np.frombuffer(buf.DataAsNumpy().tobytes(), dtype).reshape(shape)

    for pos, want, what in ((_INPUT, _INT8, "the input"), (_STATE_H, _INT8, "the hidden state"),
                            (_STATE_C, _INT16, "the cell state")):
        if not present(pos):
            refuse(f"{what} is missing")
        got = tensor(pos).Type()
        if got != want:
            refuse(f"{what} is {_TYPE_NAMES.get(got, got)}; the stream takes int8 "
                   "activations with an int16 cell state")
    got = g.Tensors(outs[0]).Type()
    if got != _INT8:                    # TFLite Micro's kernel writes the input's type
        refuse(f"the output is {_TYPE_NAMES.get(got, got)}; TFLite Micro's LSTM writes its "
               "input's type, int8")
    for pos in _INPUT_WEIGHTS + _RECURRENT_WEIGHTS:
        if tensor(pos).Type() != _INT8:
            refuse(f"weights {pos} are {_TYPE_NAMES.get(tensor(pos).Type())}, not int8")
    for pos in _BIASES:
        if not present(pos) or tensor(pos).Type() != _INT32:
            refuse(f"bias {pos} is missing or not int32")
    shape = tuple(int(d) for d in tensor(_INPUT).ShapeAsNumpy())
    if len(shape) != 3:
        order = "(time, batch, features)" if time_major else "(batch, time, features)"
        refuse(f"input shape {list(shape)}; TFLite Micro's kernel takes {order}")
    steps, batches, features = shape if time_major else (shape[1], shape[0], shape[2])
    (s_in,), (zp_in,) = quant(_INPUT, "the input")
    (s_h,), (zp_h,) = quant(_STATE_H, "the hidden state")
    (s_c,), (zp_c,) = quant(_STATE_C, "the cell state")
    if zp_c:
        refuse(f"cell state zero point {zp_c}; TFLite Micro's is 0")
    power = int(np.round(np.log2(s_c)))
    if f32(s_c) != f32(2.0 ** power) or power not in CELL_SCALE_POWERS:
        refuse(f"cell state scale {s_c:g}; the stream takes a power of two from "
               f"2**{CELL_SCALE_POWERS[0]} to 2**{CELL_SCALE_POWERS[-1]}")
    gates = []
    cells = None
    for wi, wr, b in zip(_INPUT_WEIGHTS, _RECURRENT_WEIGHTS, _BIASES):
        scales = []
        for pos in (wi, wr):
            s, zp = quant(pos, f"weights {pos}")
            if len(s) != 1:
                refuse(f"weights {pos} are quantized per channel; TFLite Micro's LSTM takes "
                       "one scale per weight tensor")
            if any(zp):
                refuse(f"weights {pos} have zero point {zp[0]}; they must be symmetric")
            scales.append(s[0])
        w_in, w_rec, bias = data(wi, np.int8), data(wr, np.int8), data(b, np.int32)
        cells = w_in.shape[0] if cells is None else cells
        if w_in.shape != (cells, features) or w_rec.shape != (cells, cells) or \
                bias.shape != (cells,):
            refuse(f"gate shapes {w_in.shape}, {w_rec.shape}, {bias.shape} do not fit "
                   f"{features} features and {cells} cells")
        gates.append(Gate(w_in, scales[0], w_rec, scales[1], bias))
    for pos in (_STATE_H, _STATE_C):
        if int(np.prod(tensor(pos).ShapeAsNumpy())) != batches * cells:
            refuse(f"state {pos} does not hold {batches} x {cells} values")
    clip = None
    if options.CellClip() > 0:
        clip = int(min(max(float(f32(options.CellClip())) / float(f32(s_c)), -32768.0),
                       32767.0))
    return Lstm(batches, steps, features, cells, Quant(f32(s_in), int(zp_in)),
                Quant(f32(s_h), int(zp_h)), f32(s_c), clip, tuple(gates), time_major)


def state_and_sequence_tensors(graph, index: int) -> tuple[int, int, int]:
    """The source tensors of operator ``index``'s input, hidden state and cell state (the
    order of :func:`lstm_payload`'s inputs)."""
    ins = graph.all_inputs(index)
    return ins[_INPUT], ins[_STATE_H], ins[_STATE_C]


def refusal(graph, index: int) -> str:
    """Why the stream does not express operator ``index`` as an LSTM, or ``""``."""
    try:
        read_lstm(graph, index)
    except UnsupportedOperatorError as err:
        return str(err)
    return ""


# ------------------------------------------------------------------------------ the stream
def _fm(offset: int, cells: int, dtype: str, q: Quant, region: int = SCRATCH_REGION) -> FmSlot:
    return FmSlot(region, offset, (1, 1, cells), dtype, q.scale, q.zero_point)


class Regions(NamedTuple):
    """The memory region of the input sequence, the states, the output sequence and the
    working memory: all the scratch arena, but for an LSTM whose plan keeps its working
    memory and output in an Ethos-U65's fast scratch, its input and states in the arena."""

    input: int = SCRATCH_REGION
    state: int = SCRATCH_REGION
    output: int = SCRATCH_REGION
    work: int = SCRATCH_REGION


def _mul_scale(a: float, b: float, out: float) -> tuple[int, int]:
    """TFLite Micro's multiplier of an inter-gate product (double precision), in the NPU's
    (multiplier, right shift) form."""
    m, s = quantize_multiplier(float(f32(a)) * float(f32(b)) / float(f32(out)))
    return int(m), 31 - int(s)


class _Emitter:
    """Builds the NPU operations of one LSTM: the weights of each gate encoded once, the
    operations of every (batch, step) reusing them."""

    def __init__(self, lstm: Lstm, accelerator: str, arena: LstmArena, flash: Flash, block,
                 regions: Regions = Regions()):
        self.lstm, self.acc = lstm, npu_accelerator(accelerator)
        self.block = block
        self.regions = regions
        self.api = vela_api()
        self.flash = flash
        self.arena = arena
        self._constants: dict = {}
        self.ops: list = []

    def fully_connected(self, key, ifm: FmSlot, weights: np.ndarray, w_scale: float,
                        bias: np.ndarray | None, ofm: FmSlot) -> None:
        api = self.api
        npu = fully_connected_op(api, ifm, ofm)
        npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        npu.block_config = self.block(npu)
        if key not in self._constants:
            cells = weights.shape[0]
            enc = encode_weights(
                self.acc, weights.astype(np.int16)[:, None, None, :], (1, 1), 8,
                npu.block_config.depth, False, api.NpuBlockTraversal.DEPTH_FIRST)
            # TFLite Micro's FULLY_CONNECTED multiplier: the scales' product in float32
            m, s = quantize_multiplier(float(np.float32(ifm.scale) * np.float32(w_scale))
                                       / GATE_INPUT_SCALE)
            b = bias if bias is not None else np.zeros(cells, np.int64)
            entries = b"".join(bytes(api.npu_encode_bias(np.int64(v), int(m), 31 - int(s)))
                               for v in b.tolist())
            self._constants[key] = (self.flash.add(enc), self.flash.add(entries))
        w, b = self._constants[key]
        npu.weights, npu.biases = [w], [b]
        npu.name = f"lstm {key}"
        self.ops.append(npu)

    def elementwise(self, kind, a: FmSlot, b: FmSlot, ofm: FmSlot, *, rescale=None,
                    activation=None) -> None:
        api = self.api
        npu = api.NpuElementWiseOperation(kind)
        npu.ifm, npu.ifm2, npu.ofm = feature_map(a), feature_map(b), feature_map(ofm)
        npu.rounding_mode = api.NpuRoundingMode.TFL
        npu.activation = activation or api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        if rescale is not None:
            npu.rescale = rescale
        npu.block_config = self.block(npu)
        self.ops.append(npu)

    def pool(self, ifm: FmSlot, ofm: FmSlot, activation, rescale=None) -> None:
        api = self.api
        npu = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
        npu.ifm, npu.ofm = feature_map(ifm), feature_map(ofm)
        npu.kernel = api.NpuKernel(1, 1)
        npu.padding = api.NpuPadding(0, 0, 0, 0)
        npu.rounding_mode = api.NpuRoundingMode.TFL
        npu.activation = activation
        if rescale is not None:
            from ethosu.vela.operation import ExplicitScaling

            npu.rescale = ExplicitScaling(False, [rescale[1]], [rescale[0]])
        npu.block_config = self.block(npu)
        self.ops.append(npu)

    def gate(self, k: int, x: FmSlot, h: FmSlot, sigmoid: bool) -> FmSlot:
        """Gate ``k`` of one step into its buffer (Q0.15)."""
        api, lstm, arena = self.api, self.lstm, self.arena
        g = lstm.gates[k]
        pre = Quant(GATE_INPUT_SCALE, 0)
        work = self.regions.work
        out = _fm(arena.gates[k], lstm.cells, "int16", pre, work)
        tmp = _fm(arena.scratch, lstm.cells, "int16", pre, work)
        self.fully_connected(("input", k), x, g.input_weights, g.input_scale, g.bias, out)
        self.fully_connected(("recurrent", k), h, g.recurrent_weights, g.recurrent_scale,
                             None, tmp)
        op = api.NpuActivationOp.SIGMOID if sigmoid else api.NpuActivationOp.TANH
        act = api.NpuActivation(op)
        if sigmoid:
            act.min = _SIGMOID_MIN * _NONLINEAR_SCALE
            act.max = _SIGMOID_MAX * _NONLINEAR_SCALE
        self.elementwise(api.NpuElementWiseOp.ADD, out, tmp,
                         dataclasses.replace(out, scale=_NONLINEAR_SCALE), activation=act)
        return dataclasses.replace(out, scale=GATE_OUTPUT_SCALE)

    def step(self, batch: int, t: int) -> None:
        api, lstm, arena, regions = self.api, self.lstm, self.arena, self.regions
        n = lstm.cells
        x = FmSlot(regions.input, arena.input + lstm.row(batch, t) * lstm.features,
                   (1, 1, lstm.features), "int8", lstm.input_q.scale, lstm.input_q.zero_point)
        h = _fm(arena.hidden + batch * n, n, "int8", lstm.hidden_q, regions.state)
        c = _fm(arena.cell + 2 * batch * n, n, "int16", Quant(lstm.cell_scale, 0),
                regions.state)
        i_gate, f_gate, c_gate, o_gate = (self.gate(k, x, h, sigmoid=k != 2) for k in range(4))
        q15 = GATE_OUTPUT_SCALE
        # cell = forget * cell + input * cell gate, each product TFLite Micro's rescale
        self.elementwise(api.NpuElementWiseOp.MUL, c, f_gate, c,
                         rescale=_mul_scale(lstm.cell_scale, q15, lstm.cell_scale))
        tmp = _fm(arena.scratch, n, "int16", Quant(lstm.cell_scale, 0), regions.work)
        self.elementwise(api.NpuElementWiseOp.MUL, c_gate, i_gate, tmp,
                         rescale=_mul_scale(q15, q15, lstm.cell_scale))
        clip = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        if lstm.cell_clip is not None:
            clip.min = real_bound(-lstm.cell_clip, lstm.cell_scale, 0)
            clip.max = real_bound(lstm.cell_clip, lstm.cell_scale, 0)
        self.elementwise(api.NpuElementWiseOp.ADD, c, tmp, c, rescale=(1, 0), activation=clip)
        # hidden = tanh(cell) * output gate, in the hidden state's quantization
        tanh = _fm(arena.scratch, n, "int16", Quant(q15, 0), regions.work)
        self.pool(c, tanh, api.NpuActivation(api.NpuActivationOp.TANH))
        self.elementwise(api.NpuElementWiseOp.MUL, tanh, o_gate, h,
                         rescale=_mul_scale(q15, q15, lstm.hidden_q.scale))
        # the output at (batch, t) is the hidden state's bytes
        unit = Quant(1.0, 0)
        out = FmSlot(regions.output, arena.output + lstm.row(batch, t) * n, (1, 1, n),
                     "int8", 1.0, 0)
        self.pool(_fm(h.offset, n, "int8", unit, regions.state), out,
                  api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU), rescale=(1, 0))


def lstm_ops(lstm: Lstm, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The NPU operations of ``lstm`` (the stream table's ``sequence``): ``operands`` are
    its input sequence, hidden state and cell state (the states updated in place), ``ofm``
    its output sequence, every one held whole where its slot says; ``em`` (an
    ``Emission``) gives the flash its weights go to, the block of each operation (a
    convolution's chosen before its weights are encoded for the block's depth), the
    Ethos-U configuration and where its working memory (:func:`work_bytes`) starts (in the
    scratch arena, the region the stream paths lay a plan's buffers out in, unless
    ``em.work_region`` names another)."""
    lstm = _graph_lstm(lstm)
    if box is not None or em.work is None or em.accelerator is None:
        raise UnsupportedOperatorError(KIND, "it is emitted whole, with its working memory")
    x, h, c = operands
    if h.region != c.region:
        raise UnsupportedOperatorError(KIND, "its hidden and cell states are in two regions")
    row = _up(2 * lstm.cells)
    arena = LstmArena(c.offset, h.offset, x.offset, ofm.offset,
                      tuple(em.work + k * row for k in range(4)), em.work + 4 * row, 0)
    work = SCRATCH_REGION if em.work_region is None else em.work_region
    emitter = _Emitter(lstm, em.accelerator, arena, em.flash, em.block,
                       Regions(x.region, h.region, ofm.region, work))
    for b in range(lstm.batches):
        for t in range(lstm.steps):
            emitter.step(b, t)
    return emitter.ops


def operand_slots(lstm: Lstm, arena: LstmArena, regions: Regions = Regions()
                  ) -> tuple[list[FmSlot], FmSlot]:
    """(input sequence, hidden state, cell state) and the output sequence as whole slots
    at ``arena``'s offsets in ``regions`` (flat rows: the operations address rows)."""
    b, t, n, f = lstm.batches, lstm.steps, lstm.cells, lstm.features
    q_in, q_h = lstm.input_q, lstm.hidden_q
    return ([FmSlot(regions.input, arena.input, (1, b * t, f), "int8", q_in.scale,
                    q_in.zero_point),
             FmSlot(regions.state, arena.hidden, (1, b, n), "int8", q_h.scale, q_h.zero_point),
             FmSlot(regions.state, arena.cell, (1, b, n), "int16", lstm.cell_scale, 0)],
            FmSlot(regions.output, arena.output, (1, b * t, n), "int8", q_h.scale,
                   q_h.zero_point))


@generator
def lstm_payload(lstm: Lstm, accelerator: str, names: tuple[str, str, str, str],
                 arena: LstmArena, ops: list, flash: Flash, schedule: str = "plan",
                 fast_scratch_bytes: int = 0) -> EthosUPayload:
    """The payload running ``ops`` (:func:`lstm_ops` at ``arena``'s offsets, constants in
    ``flash``; ``fast_scratch_bytes``: the working memory in an Ethos-U65's fast scratch)
    for ``accelerator``; ``names`` are the source tensors' names of its input, hidden
    state, cell state and output. Inputs are (input, hidden state, cell state), in the arena
    where the stream updates the states in place; the output is the whole output
    sequence."""
    acc = npu_accelerator(accelerator)
    payload = driver_payload(ops, acc)
    a = arena
    n = lstm.cells
    ins = (ArenaTensor(names[0], lstm.sequence_shape(lstm.features), "int8", a.input),
           ArenaTensor(names[1], (lstm.batches, n), "int8", a.hidden),
           ArenaTensor(names[2], (lstm.batches, n), "int16", a.cell))
    outs = (ArenaTensor(names[3], lstm.sequence_shape(n), "int8", a.output),)
    return EthosUPayload(accelerator, bytes(payload), bytes(flash.data), a.bytes,
                         fast_scratch_bytes, ins, outs,
                         work_bytes=a.scratch + 2 * n - a.gates[0], schedule=schedule)
