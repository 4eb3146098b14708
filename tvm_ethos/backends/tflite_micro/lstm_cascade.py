"""An UNIDIRECTIONAL_SEQUENCE_LSTM and an NPU group beside it as ONE ``ethos-u`` operator:
one plan, one command stream.

The importer has no LSTM, so the group is compiled through Relax without it
(``compile.py``). Where the group reads nothing but the LSTM's output, or writes nothing
the graph reads but the LSTM's input, and the Ethos-U took all of it as one subgraph, the
group's planner graph (``emulator.part_matchers``, as the compile path plans it) gets the
LSTM's Part first or last (``stream_lstm.with_lstm``), the whole is planned within the
compile's budget, and ``stream_cascade`` emits the LSTM's step and the group's in one
stream, at the addresses that one plan's layout gives (its sequences, its ``<part>:work``
block, its ``<part>:state`` block under every Plan). The operator's inputs are the
LSTM's sequence (first) or the group's, then the LSTM's two states (variable tensors,
persistent in the arena); its outputs the group's (first) or the LSTM's. On an Ethos-U65
the plan's SRAM is the fast scratch, a cache: the planner homes the states with the
network's inputs and outputs (the arena), so they persist there, the gate buffers and the
group's tensors in the fast scratch. Elsewhere (a group that reads or writes other
tensors too, an unplanned compile, any refusal) the LSTM is its own ``ethos-u`` operator
(``graph_operators``) and the refusal is kept in its placement's reason.
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
from tvm_ethos.backends.ethos_u.stream_gen import output_source
from tvm_ethos.backends.ethos_u.stream_lstm import JoinedLstm, with_lstm
from tvm_ethos.backends.ethos_u.stream_run import stream_report
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph
from tvm_ethos.backends.registry import get_backend
from tvm_ethos.backends.tflite_micro.cut import Cut
from tvm_ethos.errors import CompileError, TvmEthosError
from tvm_ethos.pipeline.matched_plan import planned_allocation
from tvm_ethos.pipeline.planning import budget_for, check_devices, planning_options
from tvm_ethos.pipeline.report import PlanReport, StreamReport, SubgraphPlan, jsonable
from tvm_ethos.pipeline.subgraph_stream import check_stream_memory
from tvm_ethos.targets import parse_targets


class LstmGroup(NamedTuple):
    """The LSTM and its group as one ``ethos-u`` operator: its payload, whether the LSTM
    is first, the source tensors of the LSTM's sequence the group does not hold (its input,
    first, else its output) and of its two states, and the plan report (the compile path's,
    with the LSTM's Part first or last of the subgraph's). The payload's inputs are that
    sequence and the states (first), or the group's inputs and the states; its outputs the
    group's (first) or that sequence."""

    payload: EthosUPayload
    first: bool
    lstm_tensors: tuple[int, int, int]
    plan_report: dict


def lstm_side(graph: SourceGraph, index: int, cut: Cut) -> bool | None:
    """True where the group ``cut`` reads no tensor but the output of LSTM ``index`` and
    holds every reader of it (the LSTM goes first), False where the group writes no tensor
    the rest of the graph reads but the LSTM's input and the LSTM is that input's only
    reader (the LSTM goes last), None otherwise (also where the tensor between them is a
    network output)."""
    ops = set(cut.operators)
    ins, outs = graph.boundary(ops)
    seq, out = graph.all_inputs(index)[0], graph.writes[index][0]

    def readers(t: int) -> set[int]:
        return {j for j in range(len(graph.kinds)) if t in graph.reads[j]}

    network_outputs = set(graph.graph_outputs)
    if ins == [out] and readers(out) <= ops and out not in network_outputs:
        return True
    if outs == [seq] and readers(seq) == {index} and seq not in network_outputs:
        return False
    return None


def lstm_group(graph: SourceGraph, index: int, cut: Cut, first: bool, target: str,
               options: dict) -> LstmGroup:
    """LSTM ``index`` of ``graph`` and the group ``cut`` (compiled for ``target``, the
    Ethos-U with the llvm host, with ``options``) as one operator, the LSTM ``first`` or
    last (:func:`lstm_side`); an error (a CompileError, or the compile's own error) naming
    what is in the way."""
    # lazy: the group goes through TVM's importer; a .tflite compile without an LSTM beside
    # a group never loads TVM (tvm_ethos.tflite_direct)
    from tvm_ethos.emulator.part_matchers import match_subgraph
    from tvm_ethos.frontend import load_model
    from tvm_ethos.partition import partition
    from tvm_ethos.pipeline.npu_subgraphs import attach_npu_constants

    lstm = ops_lstm.read_lstm(graph, index)
    seq, h, c = ops_lstm.state_and_sequence_tensors(graph, index)
    own = seq if first else graph.writes[index][0]   # the LSTM's sequence the group lacks
    names = tuple((graph.g.Tensors(t).Name() or b"").decode() for t in (own, h, c))
    joined = JoinedLstm(lstm, names, first)
    where = "after" if first else "before"
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
        raise CompileError(f"the operators {where} it are {len(lowered)} NPU subgraphs")
    ((sym, lw),) = lowered.items()
    match = match_subgraph(lw, sym, work=get_backend(spec.backend_id).planner_work)
    if [t.op.name for t in lw.input_tensors] != [t.name for t in match.graph.inputs] or \
            [output_source(lw, t).op.name for t in lw.outputs] != \
            [t.name for t in match.graph.outputs]:
        raise CompileError(f"the operators {where} it do not match their planner graph's "
                           "inputs and outputs")
    graph_with = with_lstm(match.graph, joined)
    search = ProposalSearch(graph_with, device, opts.planner)
    budget, whence = budget_for(opts, device)
    proposal = select(search, budget, whence)
    accelerator = str(spec.options["accelerator_config"])
    try:
        payload = generate_planned(lw, accelerator, dataclasses.replace(match, graph=graph_with),
                                   proposal, device, joined)
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
    return LstmGroup(payload, first, (own, h, c), report.to_json())
