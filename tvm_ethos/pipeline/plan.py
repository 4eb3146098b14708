"""The plan stage: every NPU subgraph of a partitioned module planned and scheduled.

For each subgraph on an accelerator the planner models: TE graph -> ``PlannerGraph``
(``emulator.part_matchers``) -> ``ProposalSearch`` on the target's device (``planning``: the
accelerator config / variant, memory regions overridden by ``memory_pools``) -> the fastest
Proposal within the budget -> ``emulator.schedule.apply_proposal`` -> ``schedule.measure`` and
``schedule.check`` (planned == scheduled bytes per scope, per Plan, and the peak; a mismatch is
a :class:`~tvm_ethos.emulator.schedule.MemoryMismatchError`). The scheduled PrimFuncs go to
``relax.ext.<npu>`` (``codegen.scheduled_primfuncs``), which builds them instead of the
unscheduled ones; the Proposals go to the command-stream generators (``streams``). An output
that holds the command streams only builds no emulator, so nothing is scheduled for it
(``schedule=False``): its report gives what the plan allocates, and the streams' run on the
functional model checks the plan's memory.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

from tvm_ethos.backends.registry import get_backend
from tvm_ethos.emulator import schedule as S
from tvm_ethos.emulator.part_matchers import match_subgraph
from tvm_ethos.pipeline.matched_plan import (
    layer_entries,
    plan_matched,
    planned_allocation,
    subgraph_plan,
)
from tvm_ethos.pipeline.npu_subgraphs import lower_npu_subgraphs, npu_functions
from tvm_ethos.pipeline.planning import PlanningOptions, budget_for
from tvm_ethos.pipeline.report import (
    PlannedSubgraph,
    PlanReport,
    UnplannedSubgraph,
)


class NpuPlan(NamedTuple):
    """The plan stage's result: its report, the scheduled PrimFunc of every planned subgraph
    (what ``relax.ext.<npu>`` builds) and what each one's command stream executes, by
    symbol."""

    report: PlanReport
    scheduled: Mapping[str, object]
    planned: Mapping[str, PlannedSubgraph]


def plan_subgraphs(pmod, tl, opts: PlanningOptions, devices: dict,
                   lowered: dict | None = None, schedule: bool = True) -> NpuPlan:
    """Plan and schedule every NPU subgraph of ``pmod`` (constants attached). ``lowered``: the
    subgraphs already lowered by ``attach_npu_constants(..., lowered_out=...)``, by symbol;
    ``schedule``: False plans without scheduling the emulator's TIR (no emulator is built)."""
    subgraphs: dict = {}
    layers: list = []
    device_names: dict = {}
    peak = cycles = None   # None: not planned
    scheduled: dict = {}
    planned: dict = {}
    if not opts.enabled:
        return NpuPlan(PlanReport(False, opts.key()), scheduled, planned)
    cascade = 0
    for spec in tl.accelerators:
        device = devices.get(spec.backend_id)
        fns = npu_functions(pmod, {spec.backend_id})
        if not fns:
            continue
        if device is None:
            device_names[spec.backend_id] = None
            for gv, f in fns:
                subgraphs[str(f.attrs["global_symbol"])] = UnplannedSubgraph(
                    spec.backend_id, f"the planner has no model of {spec}")
            continue
        device_names[spec.backend_id] = device.name
        budget, whence = budget_for(opts, device)
        syms = {str(f.attrs["global_symbol"]) for _, f in fns}
        have = {k: v for k, v in (lowered or {}).items() if k in syms}
        if set(have) != syms:
            have = lower_npu_subgraphs(pmod, {spec.backend_id})
        for sym in sorted(have, key=_natural):
            lw = have[sym]
            match = match_subgraph(lw, sym, work=get_backend(spec.backend_id).planner_work)
            planned_one = plan_matched(match.graph, sym, spec.backend_id, device, opts, budget,
                                       whence)
            proposal = planned_one.proposal
            if schedule:
                func = S.apply_proposal(lw, match, proposal, device)
                result = S.measure(lw, match, proposal, func, device, tvm_count=False)
                S.check(result)
                scheduled[sym] = func
            else:
                result = planned_allocation(match, proposal)
            planned[sym] = PlannedSubgraph(match, proposal, device)
            subgraphs[sym] = subgraph_plan(planned_one, spec.backend_id, device, budget, whence,
                                           result)
            layers.extend(layer_entries(match.graph, proposal, sym, cascade))
            cascade += len(proposal.plans)
            peak = max(peak or 0, proposal.memory_bytes)
            cycles = (cycles or 0) + proposal.cycles
    report = PlanReport(True, opts.key(), subgraphs, tuple(layers), peak, cycles, device_names)
    return NpuPlan(report, scheduled, planned)


def _natural(sym: str):
    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", sym)]
