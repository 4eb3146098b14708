"""An UNIDIRECTIONAL_SEQUENCE_LSTM's command stream emitted from a Plan.

The importer has no LSTM, so the LSTM is planned as the planner sees it
(``planner.parts.lstm``) and its operations are the stream table's row for it
(``stream_ops.STREAM_OPS[Op.LSTM]``) emitted at the offsets the Plan's blocks get: its
sequences, its working memory (``<part>:work``) and its states (``<part>:state``, held by
every Plan since they persist between invocations). Two ways:

* alone (:func:`planned_lstm_stream`): its one Plan's blocks laid out with its input
  sequence by ``ops_lstm.LstmArena``, which lines the sequences up with the ethos-u
  operators beside it and keeps the states clear of their stretches;
* joined to an NPU subgraph whose one input is its output, or whose one output is its
  input (:class:`JoinedLstm`): the LSTM's Part goes first or last in the subgraph's
  planner graph (:func:`with_lstm`), which is planned as one, and ``stream_cascade``
  emits its step with :func:`joined_ops` among the subgraph's, in one stream.
"""
from __future__ import annotations

from typing import NamedTuple

from ethos_arch.ops import Op
from planner import parts as planner_parts
from planner.graph import GraphBuilder, PlannerGraph, Tensor
from planner.plan import Plan
from planner.proposals import ProposalSearch
from tvm_ethos.backends.ethos_u.npu_ops import block_config
from tvm_ethos.backends.ethos_u.ops_lstm import (
    KIND,
    Lstm,
    LstmArena,
    LstmBlocks,
    Neighbour,
    Regions,
    lstm_payload,
    operand_slots,
)
from tvm_ethos.backends.ethos_u.payload import ArenaTensor, EthosUPayload
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    FAST_SCRATCH_REGION,
    Flash,
    UnsupportedOperatorError,
    lut_address,
    npu_accelerator,
)
from tvm_ethos.backends.ethos_u.stream_memo import generator
from tvm_ethos.backends.ethos_u.stream_ops import (
    SOLITARY_OPS,
    STREAM_OPS,
    WHOLE_OUTPUT_OPS,
    Emission,
)
from tvm_ethos.backends.planner_device import planning_device

#: the LSTM's Part in its planner graph
PART = "lstm"


class LstmStream(NamedTuple):
    """The LSTM's payload and the planner's peak it is held to: the arena's blocks, or on
    an Ethos-U65, whose plan's SRAM is the fast scratch, the working memory there (the
    sequences and the states, which persist, stay in the arena); and its Plan's cycles
    (estimated)."""

    payload: EthosUPayload
    planned_peak: int
    cycles: int


class LstmPlan(NamedTuple):
    """The planner's least-memory Plan of the LSTM alone, that proposal's peak, and
    whether the plan's SRAM is the arena (else an Ethos-U65's fast scratch)."""

    plan: Plan
    memory_bytes: int
    sram_is_arena: bool


def plan_lstm(lstm: Lstm, accelerator: str) -> LstmPlan:
    """``lstm`` planned alone for ``accelerator`` as the compile path plans (the stream
    table's solitary and whole-output operators): one Plan, the least memory."""
    device = planning_device(accelerator, solitary=SOLITARY_OPS, whole_output=WHOLE_OUTPUT_OPS)
    graph = GraphBuilder(KIND.lower())
    x = graph.input("sequence", lstm.sequence_shape(lstm.features))
    graph.add(planner_parts.lstm(PART, x, lstm.cells, time_major=lstm.time_major))
    proposal = ProposalSearch(graph.build(), device).proposal(0)
    (plan,) = proposal.plans
    return LstmPlan(plan, proposal.memory_bytes, device.io_region == device.fm_region)


def plan_blocks(plan: Plan) -> LstmBlocks:
    """The bytes the Plan holds for the LSTM's output sequence, working memory and
    states."""
    configs = {tc.tensor: tc.buffer_bytes for tc in plan.tensor_configs}
    names = (f"{PART}:0", f"{PART}:work", f"{PART}:state")
    missing = [n for n in names if n not in configs]
    if missing:
        raise UnsupportedOperatorError(KIND, f"its plan holds no {', '.join(missing)}")
    return LstmBlocks(*(configs[n] for n in names))


@generator
def planned_lstm_stream(lstm: Lstm, accelerator: str, names: tuple[str, str, str, str],
                        input_from: Neighbour | None = None,
                        output_to: Neighbour | None = None) -> LstmStream:
    """The stream of ``lstm`` for ``accelerator`` emitted from its Plan; ``names`` are the
    source tensors' names of its input, hidden state, cell state and output; the neighbours
    (the ethos-u operators writing its input or reading its output) place the Plan's blocks
    (:class:`~tvm_ethos.backends.ethos_u.ops_lstm.LstmArena`)."""
    planned = plan_lstm(lstm, accelerator)
    blocks = plan_blocks(planned.plan)
    fast = not planned.sram_is_arena   # the working memory in the fast scratch
    arena = LstmArena.of(lstm, blocks, input_from, output_to, work_apart=fast)
    acc = npu_accelerator(accelerator)
    flash = Flash()
    operands, ofm = operand_slots(lstm, arena)
    emission = Emission(flash, lut_address(accelerator), lambda npu: block_config(npu, acc),
                        work=arena.gates[0], accelerator=accelerator,
                        work_region=FAST_SCRATCH_REGION if fast else None)
    ops = STREAM_OPS[Op.LSTM].sequence(lstm, operands, ofm, emission)
    payload = lstm_payload(lstm, accelerator, names, arena, ops, flash,
                           fast_scratch_bytes=blocks.work if fast else 0)
    return LstmStream(payload, planned.memory_bytes, planned.plan.cycles)


class JoinedLstm(NamedTuple):
    """An LSTM planned and emitted in one stream with an NPU subgraph: ``first``, its output
    is the subgraph's one input, else its input is the subgraph's one output; ``names``:
    the source tensors' names of that other sequence (its input, first, else its output),
    of its hidden state and of its cell state."""

    lstm: Lstm
    names: tuple[str, str, str]
    first: bool = True

    def sequence(self, at: int) -> ArenaTensor:
        """The payload's tensor of the LSTM's own sequence (an input, first, else an
        output) at ``at``."""
        lstm = self.lstm
        depth = lstm.features if self.first else lstm.cells
        return ArenaTensor(self.names[0], lstm.sequence_shape(depth), "int8", at)

    def states(self, state_at: int) -> tuple[ArenaTensor, ArenaTensor]:
        """The payload's inputs of the states (updated in place, kept between invocations)
        from ``state_at``."""
        lstm, (_, h, c) = self.lstm, self.names
        b, n = lstm.batches, lstm.cells
        return (ArenaTensor(h, (b, n), "int8", state_at),
                ArenaTensor(c, (b, n), "int16", _cell_at(lstm, state_at)))


def _cell_at(lstm: Lstm, state_at: int) -> int:
    """The cell state's offset: after the hidden state's rows, on an ALIGN boundary."""
    return state_at + -(-lstm.batches * lstm.cells // ALIGN) * ALIGN


def with_lstm(graph: PlannerGraph, joined: JoinedLstm) -> PlannerGraph:
    """``graph`` with the LSTM's Part (named :data:`PART`) before it, writing its one input
    (``joined.first``), or after it, reading its one output; the LSTM's own sequence named
    as in the source."""
    lstm = joined.lstm
    ends = graph.inputs if joined.first else graph.outputs
    where = "after" if joined.first else "before"
    if len(ends) != 1:
        raise UnsupportedOperatorError(KIND, f"the subgraph {where} it has {len(ends)} "
                                             f"{'inputs' if joined.first else 'outputs'}")
    (end,) = ends
    if any(p.name == PART for p in graph.parts):
        raise UnsupportedOperatorError(KIND, f"the subgraph {where} it has a Part {PART!r}")
    if joined.first:
        seq = Tensor(joined.names[0], lstm.sequence_shape(lstm.features), "int8")
        part = planner_parts.lstm(PART, seq, lstm.cells, time_major=lstm.time_major,
                                  output_name=end.name)
        if part.output != end:
            raise UnsupportedOperatorError(KIND, f"its output {part.output.shape} is read as "
                                                 f"{end.shape} {end.dtype}")
        return PlannerGraph((part,) + graph.parts, (seq,), graph.outputs, graph.name)
    want = lstm.sequence_shape(lstm.features)
    if tuple(end.shape) != want or end.dtype != "int8":
        raise UnsupportedOperatorError(KIND, f"it reads {want} int8, the subgraph before it "
                                             f"writes {end.shape} {end.dtype}")
    part = planner_parts.lstm(PART, end, lstm.cells, time_major=lstm.time_major,
                              output_name=joined.names[0])
    return PlannerGraph(graph.parts + (part,), graph.inputs, (part.output,), graph.name)


def joined_ops(joined: JoinedLstm, sequence: tuple[int, int], output: tuple[int, int],
               state: tuple[int, int], work_at: int, flash: Flash, accelerator: str) -> list:
    """The LSTM's operations (the stream table's row) with its input and output sequences
    and its states at these (offset, region) places and its working memory at ``work_at``
    of the scratch arena, its constants added to ``flash``."""
    lstm = joined.lstm
    acc = npu_accelerator(accelerator)
    row = -(-2 * lstm.cells // ALIGN) * ALIGN
    arena = LstmArena(_cell_at(lstm, state[0]), state[0], sequence[0], output[0],
                      tuple(work_at + k * row for k in range(4)), work_at + 4 * row, 0)
    operands, ofm = operand_slots(lstm, arena, Regions(sequence[1], state[1], output[1]))
    emission = Emission(flash, lut_address(accelerator), lambda npu: block_config(npu, acc),
                        work=work_at, accelerator=accelerator)
    return STREAM_OPS[Op.LSTM].sequence(lstm, operands, ofm, emission)
