"""One NPU subgraph's planner graph planned: the Proposal search on its device, the Proposal
chosen within the budget, and what the plan report says of it. No TVM: the plan stage
(``plan``) calls it for every subgraph it matched from TE, and the TVM-free ``.tflite``
path (``tvm_ethos.tflite_direct``) for the graph it reads from the TFLite operators."""
from __future__ import annotations

from typing import NamedTuple

from planner.api import select
from planner.budgets import SIZE_SOURCE
from planner.device_model import Device
from planner.errors import PlannerError
from planner.graph import PlannerGraph
from planner.proposals import Proposal, ProposalSearch
from planner.report import layer_rows
from planner.size_choice import size_objective
from tvm_ethos.emulator.planned_memory import planned_bytes
from tvm_ethos.errors import CompileError, MemoryBudgetError
from tvm_ethos.pipeline.planning import PlanningOptions
from tvm_ethos.pipeline.report import PlannedAllocation, SubgraphPlan, jsonable


class MatchedPlan(NamedTuple):
    """A planned subgraph: the search (its frontier) and the Proposal chosen."""

    search: ProposalSearch
    proposal: Proposal


def plan_matched(graph: PlannerGraph, sym: str, backend_id: str, device: Device,
                 opts: PlanningOptions, budget, whence: str) -> MatchedPlan:
    """The Proposal of ``graph`` (NPU subgraph ``sym`` of ``backend_id``) on ``device`` within
    ``budget`` (``whence`` says where the budget came from); a planner failure is one
    CompileError, a budget no Proposal fits one MemoryBudgetError, both naming ``sym``."""
    try:
        search = ProposalSearch(graph, device, opts.planner)
    except PlannerError as err:
        raise CompileError(f"planning NPU subgraph {sym} ({backend_id}, "
                           f"{device.name}) failed: {err}") from None
    try:
        proposal = select(search, budget, whence)
    except PlannerError as err:
        raise MemoryBudgetError(f"NPU subgraph {sym} ({backend_id}, {device.name}): "
                                f"{err}", budget, search.frontier[0][0], sym) from None
    return MatchedPlan(search, proposal)


def subgraph_plan(planned: MatchedPlan, backend_id: str, device: Device, budget, whence: str,
                  result) -> SubgraphPlan:
    """The plan report's entry of a planned subgraph; ``result``: what the scheduled TIR
    allocates, or what the Proposal does where nothing is scheduled
    (:func:`planned_allocation`)."""
    search, proposal = planned
    objective = size_objective(proposal, search) if whence == SIZE_SOURCE else None
    return SubgraphPlan(backend_id, device.name, budget, whence, proposal.memory_bytes,
                        proposal.cycles, tuple((m, c) for m, c in search.frontier), result,
                        objective)


def layer_entries(graph: PlannerGraph, proposal: Proposal, sym: str, cascade: int) -> list:
    """The plan report's per-layer rows of a subgraph, its cascades numbered from
    ``cascade`` (the subgraphs before it hold that many)."""
    out = []
    for row in layer_rows(graph, proposal):
        row = dict(row)
        row["cascade"] = cascade + row["cascade"]
        row["subgraph"] = sym
        out.append(jsonable(row))
    return out


def planned_allocation(match, proposal) -> PlannedAllocation:
    """What ``proposal`` allocates, as ``schedule.measure`` reports its planned side."""
    return PlannedAllocation(
        planned_bytes(match, proposal), proposal.memory_bytes,
        tuple({"parts": list(plan.parts), "planned_bytes": plan.memory_bytes,
               "stripes": plan.spec.stripe.total_stripes, "buffering": plan.spec.label(),
               "weights": plan.spec.weights} for plan in proposal.plans))
