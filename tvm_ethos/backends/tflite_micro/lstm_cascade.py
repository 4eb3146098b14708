"""An UNIDIRECTIONAL_SEQUENCE_LSTM and the NPU group reading its output as ONE ``ethos-u``
operator: one plan, one command stream.

The importer has no LSTM, so the group after it is compiled through Relax without it
(``compile.py``). Where that group reads nothing but the LSTM's output and the Ethos-U took
all of it as one subgraph, the group's planner graph (``emulator.part_matchers``, as the
compile path plans it) gets the LSTM's Part first (``stream_lstm.with_lead``), the whole is
planned within the compile's budget, and ``stream_cascade`` emits the LSTM's step and the
group's in one stream, at the addresses that one plan's layout gives (its sequences, its
``<part>:work`` block, its ``<part>:state`` block under every Plan). The operator's inputs
are the LSTM's sequence and its two states (variable tensors, persistent in the arena); its
outputs the group's. On an Ethos-U65 the plan's SRAM is the fast scratch, a cache: the
planner homes the states with the network's inputs and outputs (the arena), so they persist
there, the gate buffers and the group's tensors in the fast scratch. Elsewhere (a group
that reads other tensors too, an unplanned compile, any refusal) the LSTM is its own
``ethos-u`` operator (``graph_operators``) and the refusal is kept in its placement's
reason.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

from planner.api import select
from planner.budgets import SIZE_SOURCE
from planner.errors import PlannerError
from planner.proposals import ProposalSearch
from planner.report import layer_rows
from planner.size_choice import size_objective
from tvm_ethos.backends.ethos_u import ops_lstm
from tvm_ethos.backends.ethos_u.payload import EthosUPayload
from tvm_ethos.backends.ethos_u.stream_cascade import generate_planned
from tvm_ethos.backends.ethos_u.stream_lstm import LeadLstm, with_lead
from tvm_ethos.backends.ethos_u.stream_run import stream_report
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph
from tvm_ethos.backends.registry import get_backend
from tvm_ethos.backends.tflite_micro.cut import Cut
from tvm_ethos.emulator.part_matchers import match_subgraph
from tvm_ethos.errors import CompileError, TvmEthosError
from tvm_ethos.frontend import load_model
from tvm_ethos.partition import partition
from tvm_ethos.pipeline.npu_subgraphs import attach_npu_constants
from tvm_ethos.pipeline.plan import planned_allocation
from tvm_ethos.pipeline.planning import budget_for, check_devices, planning_options
from tvm_ethos.pipeline.report import PlanReport, StreamReport, SubgraphPlan, jsonable
from tvm_ethos.pipeline.streams import check_stream_memory
from tvm_ethos.targets import parse_targets


class LstmGroup(NamedTuple):
    """The LSTM and its group as one ``ethos-u`` operator: its payload, the source tensors
    of its inputs (the LSTM's sequence, hidden state, cell state) and its plan report (the
    compile path's, with the LSTM's Part as the first of the subgraph's)."""

    payload: EthosUPayload
    ifms: tuple[int, int, int]
    plan_report: dict


def reads_only_lstm_output(graph: SourceGraph, index: int, cut: Cut) -> bool:
    """Whether the group ``cut`` reads no tensor but the output of LSTM ``index``, and
    every reader of that output is in the group (the output is no network output)."""
    out = graph.writes[index][0]
    ins, _ = graph.boundary(set(cut.operators))
    readers = {j for j in range(len(graph.kinds)) if out in graph.reads[j]}
    return ins == [out] and readers <= set(cut.operators) and \
        out not in set(graph.graph_outputs)


def lstm_group(graph: SourceGraph, index: int, cut: Cut, target: str,
               options: dict) -> LstmGroup:
    """LSTM ``index`` of ``graph`` and the group ``cut`` (compiled for ``target``, the
    Ethos-U with the llvm host, with ``options``) as one operator; an error
    (a CompileError, or the compile's own error) naming what is in the way."""
    lstm = ops_lstm.read_lstm(graph, index)
    ifms = ops_lstm.state_and_sequence_tensors(graph, index)
    names = tuple((graph.g.Tensors(t).Name() or b"").decode() for t in ifms)
    tl = parse_targets(target, {})
    (spec,) = tl.accelerators
    opts = planning_options(dict(options))
    if not opts.enabled:
        raise CompileError("the compile plans nothing (plan=False)")
    device = check_devices(tl, opts)[spec.backend_id]
    pmod, _ = partition(load_model(cut.data), tl)
    lowered: dict = {}
    attach_npu_constants(pmod, {spec.backend_id}, lowered_out=lowered, with_primfunc=False)
    if len(lowered) != 1:
        raise CompileError(f"the operators after it are {len(lowered)} NPU subgraphs")
    ((sym, lw),) = lowered.items()
    match = match_subgraph(lw, sym, work=get_backend(spec.backend_id).planner_work)
    if [t.op.name for t in lw.input_tensors] != [t.name for t in match.graph.inputs]:
        raise CompileError("the operators after it read more than its output")
    graph_with = with_lead(match.graph, LeadLstm(lstm, names))
    search = ProposalSearch(graph_with, device, opts.planner)
    budget, whence = budget_for(opts, device)
    proposal = select(search, budget, whence)
    accelerator = str(spec.options["accelerator_config"])
    try:
        payload = generate_planned(lw, accelerator, dataclasses.replace(match, graph=graph_with),
                                   proposal, device, LeadLstm(lstm, names))
        figures = stream_report(payload, proposal.memory_bytes)
    except (TvmEthosError, PlannerError):
        raise
    except Exception as err:   # Vela's own checks, the functional model's: as the backend's
        raise CompileError(f"the joined stream was refused: {type(err).__name__}: "
                           f"{err}") from err
    # as the compile's stream stage: it realizes the plan unless its arena grew past it
    stream = StreamReport(True, figures, figures["schedule"] == "plan")
    check_stream_memory(sym, stream.to_json())
    objective = size_objective(proposal, search) if whence == SIZE_SOURCE else None
    sub = SubgraphPlan(spec.backend_id, device.name, budget, whence, proposal.memory_bytes,
                       proposal.cycles, tuple((m, c) for m, c in search.frontier),
                       planned_allocation(dataclasses.replace(match, graph=graph_with),
                                          proposal), objective)
    layers = tuple(jsonable(dict(row, subgraph=sym)) for row in layer_rows(graph_with, proposal))
    report = PlanReport(True, opts.key(), {sym: sub}, layers, proposal.memory_bytes,
                        proposal.cycles, {spec.backend_id: device.name}, {sym: stream})
    return LstmGroup(payload, ifms, report.to_json())
