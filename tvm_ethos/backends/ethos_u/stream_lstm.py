"""An UNIDIRECTIONAL_SEQUENCE_LSTM's command stream emitted from its Plan.

The LSTM is planned as the planner sees it (``planner.parts.lstm``, alone: the importer has
no LSTM, so it is no Part of a Relax subgraph's plan) and its stream is the stream table's
row for it (``stream_ops.STREAM_OPS[Op.LSTM]``) emitted at the offsets the Plan's blocks
get: its output sequence, its working memory (``<part>:work``) and its states
(``<part>:state``, held by every Plan since they persist between invocations). The blocks
are laid out with its input sequence by ``ops_lstm.LstmArena``, which lines the sequences
up with the ethos-u operators beside it and keeps the states clear of their stretches.
"""
from __future__ import annotations

from typing import NamedTuple

from ethos_arch.ops import Op
from planner import parts as planner_parts
from planner.graph import GraphBuilder
from planner.plan import Plan
from planner.proposals import ProposalSearch
from tvm_ethos.backends.ethos_u.npu_ops import block_config
from tvm_ethos.backends.ethos_u.ops_lstm import (
    KIND,
    Lstm,
    LstmArena,
    LstmBlocks,
    Neighbour,
    lstm_payload,
    operand_slots,
)
from tvm_ethos.backends.ethos_u.payload import EthosUPayload
from tvm_ethos.backends.ethos_u.stream_base import (
    Flash,
    UnsupportedOperatorError,
    lut_address,
    npu_accelerator,
)
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
    """The LSTM's payload and the planner's peak it is held to (None where the planner's
    SRAM is not the arena: an Ethos-U65 plans in its fast scratch, the stream keeps every
    block in the arena, where the states persist)."""

    payload: EthosUPayload
    planned_peak: int | None


class LstmPlan(NamedTuple):
    """The planner's least-memory Plan of the LSTM alone and that proposal's peak."""

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


def planned_lstm_stream(lstm: Lstm, accelerator: str, names: tuple[str, str, str, str],
                        input_from: Neighbour | None = None,
                        output_to: Neighbour | None = None) -> LstmStream:
    """The stream of ``lstm`` for ``accelerator`` emitted from its Plan; ``names`` are the
    source tensors' names of its input, hidden state, cell state and output; the neighbours
    (the ethos-u operators writing its input or reading its output) place the Plan's blocks
    (:class:`~tvm_ethos.backends.ethos_u.ops_lstm.LstmArena`)."""
    planned = plan_lstm(lstm, accelerator)
    arena = LstmArena.of(lstm, plan_blocks(planned.plan), input_from, output_to)
    acc = npu_accelerator(accelerator)
    flash = Flash()
    operands, ofm = operand_slots(lstm, arena)
    emission = Emission(flash, lut_address(accelerator), lambda npu: block_config(npu, acc),
                        work=arena.gates[0], accelerator=accelerator)
    ops = STREAM_OPS[Op.LSTM].sequence(lstm, operands, ofm, emission)
    payload = lstm_payload(lstm, accelerator, names, arena, ops, flash)
    return LstmStream(payload, planned.memory_bytes if planned.sram_is_arena else None)
