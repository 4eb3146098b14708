"""The compile pipeline's typed stage results and the plan report they make.

:class:`PlanReport` (the plan stage's report, with :class:`StreamReport` per generated command
stream) stays a typed value through the pipeline and becomes JSON only at the edge
(:meth:`PlanReport.to_json`: ``CompiledModel.plan_report``, the package's ``meta.json``, the
CLI), as ``planner.PlanResult.to_json`` does. The table functions read that JSON, since a
loaded model has only it.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import TYPE_CHECKING, NamedTuple

from planner.budgets import budget_line
from planner.device_model import Device
from planner.proposals import Proposal
from planner.report import kib, table_lines, total_line
from planner.size_choice import SizeObjective
from tvm_ethos.backends.registry import get_backend

if TYPE_CHECKING:  # the types only: the report loads without TVM (tvm_ethos.tflite_direct)
    from tvm_ethos.emulator.part_matchers import MatchResult
    from tvm_ethos.emulator.schedule import ScheduledSubgraph


class PlannedSubgraph(NamedTuple):
    """What a command-stream generator executes for one planned NPU subgraph
    (``Backend.command_stream``): the planner graph matched from its TE graph, the Proposal
    chosen, and the Device whose performance model costed it."""

    match: MatchResult
    proposal: Proposal
    device: Device


@dataclass(frozen=True)
class PlannedAllocation:
    """What a Proposal allocates, per memory scope, per Plan and at its peak, where no TIR is
    scheduled from it (an output that holds the command streams only: the streams' own check
    on the functional model stands in for the scheduled TIR's); the JSON of a
    :class:`~tvm_ethos.emulator.schedule.ScheduledSubgraph` without its ``scheduled_*``
    keys."""

    planned_bytes: Mapping[str, int]
    planned_peak: int
    plans: tuple[Mapping[str, object], ...]

    def to_json(self) -> dict:
        return {"planned_bytes": dict(self.planned_bytes),
                "planned_peak_bytes": self.planned_peak,
                "plans": [dict(p) for p in self.plans]}


@dataclass(frozen=True)
class SubgraphPlan:
    """One planned NPU subgraph in the report: the Proposal chosen within its budget, the
    memory / cycles frontier it was chosen from, and what the scheduled TIR allocates (or,
    where none was scheduled, what the plan allocates)."""

    backend: str
    device: str
    budget_bytes: int | None
    budget_source: str
    peak_memory_bytes: int
    cycles: int
    frontier: tuple[tuple[int, int], ...]   # (memory bytes, cycles), smallest memory first
    scheduled: ScheduledSubgraph | PlannedAllocation
    #: what the ``size`` budget (Vela's --optimise Size) minimised, where it chose the plan
    objective: SizeObjective | None = None

    def to_json(self) -> dict:
        # no timings: the report is saved and must be byte-identical run to run
        out = {
            "backend": self.backend, "device": self.device, "planned": True,
            "budget_bytes": self.budget_bytes, "budget_source": self.budget_source,
            "peak_memory_bytes": self.peak_memory_bytes, "cycles": self.cycles,
            "smallest_memory_bytes": self.frontier[0][0], "fastest_cycles": self.frontier[-1][1],
            "frontier": [{"memory_bytes": m, "cycles": c} for m, c in self.frontier],
        }
        out.update(self.scheduled.to_json())
        if self.objective is not None:
            out["size_objective"] = self.objective.to_json()
        return out


@dataclass(frozen=True)
class UnplannedSubgraph:
    """An NPU subgraph on an accelerator the planner has no model of: it runs layer by layer."""

    backend: str
    reason: str

    def to_json(self) -> dict:
        return {"backend": self.backend, "planned": False, "reason": self.reason}


@dataclass(frozen=True)
class StreamReport:
    """What one subgraph's command stream did on the functional model (``figures``: the
    backend's ``stream_report``), and whether it is the plan's schedule itself
    (``realizes_plan``: then it touches exactly the SRAM the plan predicts). A subgraph the
    generator cannot express has no stream (``generated`` False) and says why (``reason``)."""

    generated: bool
    figures: Mapping[str, object] = field(default_factory=dict)
    realizes_plan: bool = False
    reason: str = ""

    @classmethod
    def refused(cls, reason: str) -> StreamReport:
        return cls(False, reason=reason)

    def to_json(self) -> dict:
        if not self.generated:
            return {"generated": False, "reason": self.reason}
        return dict(self.figures, realizes_plan=self.realizes_plan)


@dataclass(frozen=True)
class PlanReport:
    """The plan stage's report: per NPU subgraph its plan (or why it has none), one row per
    planned Part (``planner.report.layer_rows``, numbered across the network's cascades), the
    network's NPU peak and cycles (None: nothing planned), each accelerator's planner device,
    and the command streams generated from the plans."""

    planned: bool
    options: Mapping[str, object]
    subgraphs: Mapping[str, SubgraphPlan | UnplannedSubgraph] = field(default_factory=dict)
    layers: tuple[Mapping[str, object], ...] = ()
    peak_memory_bytes: int | None = None
    cycles: int | None = None
    devices: Mapping[str, str | None] = field(default_factory=dict)
    streams: Mapping[str, StreamReport] = field(default_factory=dict)

    def with_streams(self, streams: Mapping[str, StreamReport]) -> PlanReport:
        return replace(self, streams=dict(streams))

    def to_json(self) -> dict:
        """The JSON the package saves and ``CompiledModel.plan_report`` gives: lists, not
        tuples, str keys, fractions as ``"n/d"``; ``"streams"`` only where one was made."""
        rep = {"planned": self.planned, "options": self.options,
               "subgraphs": {k: v.to_json() for k, v in self.subgraphs.items()},
               "layers": list(self.layers), "peak_memory_bytes": self.peak_memory_bytes,
               "cycles": self.cycles, "devices": dict(self.devices)}
        out = json.loads(json.dumps(jsonable(rep)))   # exactly what save / load round-trips
        if self.streams:
            out["streams"] = {k: v.to_json() for k, v in self.streams.items()}
        return out


def jsonable(v):
    """``v`` with the planner's values made JSON's: Fractions as ints or ``"n/d"``, enums as
    their values, tuples as lists, keys as strings."""
    if isinstance(v, Mapping):
        return {str(k): jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, Fraction):
        return f"{v.numerator}/{v.denominator}" if v.denominator != 1 else int(v)
    if hasattr(v, "value") and not isinstance(v, (int, float, str)):
        return v.value
    return v


# ------------------------------------------------------------------------------- the table
def format_table(rep: dict) -> str:
    """The per-layer plan table, in the spirit of Vela's --verbose-schedule /
    --verbose-performance: one row per Part, totals per subgraph and for the network. Its
    columns and units are the plan table's (planner.report); a subgraph or a network the
    planner did not plan says "not planned", never 0 cycles."""
    if not rep or not rep.get("planned"):
        return "planner: off (compile(..., plan=False)): not planned"
    out = []
    planned = 0
    for sym, sub in rep.get("subgraphs", {}).items():
        if not sub.get("planned"):
            out.append(f"{sym} on {sub.get('backend', '?')}: not planned "
                       f"({sub.get('reason', 'no planner')})")
            continue
        planned += 1
        out.append(f"{sym} on {sub['device']}")
        out.append(budget_line(sub["budget_bytes"], sub.get("budget_source", "given")))
        if "size_objective" in sub:
            out.append(SizeObjective.from_json(sub["size_objective"]).line())
        out.extend(table_lines([r for r in rep["layers"] if r.get("subgraph") == sym]))
        out.append(total_line(sym, len(sub["plans"]), sub["peak_memory_bytes"], sub["cycles"]))
        given = ", ".join(f"{k} {v:,} B" for k, v in sub["planned_bytes"].items())
        sched = ""
        if "scheduled_bytes" in sub:   # no TIR is scheduled for a stream-only output
            scopes = ", ".join(f"{k} {v:,} B" for k, v in sub["scheduled_bytes"].items())
            sched = (f"; scheduled {scopes} (scheduled TIR peak "
                     f"{sub['scheduled_peak_bytes']:,} B)")
        out.append(f"   allocated per scope (every buffer of every cascade summed; the peak "
                   f"above sizes the arena): planned {given}{sched}")
        if sym in rep.get("streams", {}):
            out.extend(get_backend(sub["backend"]).stream_report_lines(rep["streams"][sym]))
    if not planned:
        out.append("network: not planned (no NPU subgraph on an accelerator the planner models)")
    else:
        out.append(f"network NPU peak {kib(rep['peak_memory_bytes'])} KiB "
                   f"({rep['peak_memory_bytes']:,} B), {rep['cycles']:,} NPU cycles (estimated)")
    return "\n".join(out)
