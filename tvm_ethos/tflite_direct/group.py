"""One NPU group of a ``.tflite`` compiled to its Ethos-U stream without TVM: read
(``operators``), lowered (``lowering``), matched (``planner_graph``), planned and streamed
by the functions the TVM path's plan and stream stages call (``pipeline.matched_plan``,
``pipeline.subgraph_stream``), so its payload and plan report are the ones the TVM path
makes of the same group.

The group is taken only where the TVM path would make one Ethos-U subgraph of it: every
operator read, each one the Ethos-U's own checks accept, one output, and a plan asked
for. Anything else is :class:`~tvm_ethos.tflite_direct.operators.Declined` and
goes through TVM.
"""
from __future__ import annotations

from typing import NamedTuple

from planner.errors import PlannerError
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph, read_source
from tvm_ethos.backends.registry import get_backend
from tvm_ethos.compute.lowered import subgraph_symbol
from tvm_ethos.pipeline.matched_plan import (
    layer_entries,
    plan_matched,
    planned_allocation,
    subgraph_plan,
)
from tvm_ethos.pipeline.planning import budget_for, check_devices, planning_options
from tvm_ethos.pipeline.report import PlannedSubgraph, PlanReport
from tvm_ethos.pipeline.subgraph_stream import subgraph_stream
from tvm_ethos.runtime.options import RUNTIME_OPTIONS
from tvm_ethos.stages import stage
from tvm_ethos.targets import parse_targets
from tvm_ethos.tflite_direct.lowering import lower_layers
from tvm_ethos.tflite_direct.operators import Declined, read_layers
from tvm_ethos.tflite_direct.planner_graph import planner_graph


class GroupSubgraph(NamedTuple):
    """The Ethos-U subgraph a group became, named as the partition names it."""

    name: str


class DirectGroup(NamedTuple):
    """A group compiled without TVM, as ``tflite_micro.compile`` reads a compiled group: its
    plan report (``CompiledModel.plan_report``'s), its (subgraph, payload) pairs and, by
    subgraph, (the group's operators, its IFM and OFM tensors), indices into the cut model."""

    plan_report: dict
    parts: list
    taken: dict
    #: no partition ran: every operator of the group is on the Ethos-U
    partition_report: None = None


def compile_group(data: bytes, target: str, options: dict) -> DirectGroup | Declined:
    """The group cut out as the model ``data`` compiled for ``target`` (the Ethos-U and a
    host, as the TVM path's group compile takes it) with ``compile``'s ``options``, or why
    it goes through TVM."""
    graph = SourceGraph(read_source(data))
    ops = tuple(range(len(graph.kinds)))
    ins, outs = graph.boundary(set(ops))
    if len(outs) != 1:
        return Declined(f"{len(outs)} outputs (one is read)")
    with stage("read without TVM"):
        layers = read_layers(graph, ops)
    if isinstance(layers, Declined):
        return layers
    tl = parse_targets(target, {})
    (spec,) = tl.accelerators
    backend = get_backend(spec.backend_id)
    checks = backend.layer_support()
    for layer in layers:
        if checks.why_not(layer.qop, spec.options):
            return Declined(f"the Ethos-U rejects its {layer.qop.tflite_name}")
    planning = {k: v for k, v in options.items() if k not in RUNTIME_OPTIONS + ("cache_dir",)}
    opts = planning_options(planning)
    if not opts.enabled:
        return Declined("nothing is planned (plan=False)")
    device = check_devices(tl, opts).get(spec.backend_id)
    if device is None:
        return Declined(f"the planner has no model of {spec}")
    sym = subgraph_symbol(spec.backend_id, 0)
    with stage("lower without TVM"):
        lw = lower_layers(layers, ins, outs, sym)
        try:
            match = planner_graph(lw, backend.planner_work)
        except PlannerError as err:   # a graph the planner refuses: TVM's path says why
            return Declined(f"its planner graph: {err}")
    budget, whence = budget_for(opts, device)
    with stage("plan"):
        planned = plan_matched(match.graph, sym, spec.backend_id, device, opts, budget, whence)
    proposal = planned.proposal
    sub = subgraph_plan(planned, spec.backend_id, device, budget, whence,
                        planned_allocation(match, proposal))
    with stage("streams"):
        stream = subgraph_stream(backend, sym, lw, spec.options,
                                 PlannedSubgraph(match, proposal, device), sub)
    if stream.payload is None:
        return Declined("no stream was written for it")
    report = PlanReport(True, opts.key(), {sym: sub},
                        tuple(layer_entries(match.graph, proposal, sym, 0)),
                        proposal.memory_bytes, proposal.cycles,
                        {spec.backend_id: device.name}).with_streams({sym: stream.report})
    return DirectGroup(report.to_json(), [(GroupSubgraph(sym), stream.payload)],
                       {sym: (ops, tuple(ins), tuple(outs))})
