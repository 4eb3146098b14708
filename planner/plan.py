"""Plans: how one interval of the graph runs as a cascade, and the choices that define it.

A Plan covers an interval ``[start, end]`` of the graph's topological order whose last Part
(the sink) is the only one whose output leaves the interval. The sink's output is cut into
stripes (a StripeConfig); each intermediate tensor is held as a buffer whose mode the
PlanSpec names (planner/plans.py generates them, planner/plan_costing.py costs them).

Memory of a Plan counts what it allocates beyond its boundary tensors (which the Proposal
accounts as live tensors): intermediate buffers, staging buffers for tensors homed in DRAM,
and weights copied to SRAM.
"""
from __future__ import annotations

from dataclasses import dataclass

from planner.memory import TensorConfig
from planner.stripes import StripeConfig


@dataclass(frozen=True)
class PartSchedule:
    """How one Part of a Plan runs: the stripes of its output it computes, and their cost."""
    part: str
    stripe: StripeConfig
    executions: int
    cycles: int
    weights_region: str

    def to_json(self) -> dict:
        return {"part": self.part, "stripe": self.stripe.to_json(),
                "executions": self.executions, "cycles": self.cycles,
                "weights_region": self.weights_region}


@dataclass(frozen=True)
class PlanSpec:
    """The choices that define a Plan for a given interval (enough to rebuild it)."""
    stripe: StripeConfig
    mode: str            # "rolling", "lockstep" (planner.lockstep) or "recompute"
    granule: int         # rolling chunk rows; 0 = natural
    weights: tuple[str, ...] = ()   # Parts whose weights are copied to SRAM once
    #: Cross-Plan weight prefetch (one-Part unstriped Plans, PlanGenerator.prefetch_cost):
    #: this Plan's Part finds its weights already in SRAM, copied during the previous Plan;
    #: this Plan copies the next Part's weights to SRAM while its own Part runs.
    prefetched: bool = False
    prefetch_next: bool = False

    def label(self) -> str:
        if self.mode == "rolling":
            return f"rolling(g={self.granule or 'natural'})"
        if self.mode == "lockstep":
            return "lockstep"
        return "recompute"

    def weights_for(self, part: str) -> str:
        return "sram" if part in self.weights else "flash"


@dataclass(frozen=True)
class Plan:
    start: int
    end: int
    parts: tuple[str, ...]
    output: str
    spec: PlanSpec
    tensor_configs: tuple[TensorConfig, ...]
    part_schedules: tuple[PartSchedule, ...]
    memory_bytes: int
    cycles: int
    #: Cycles of the next Part's weight copy hidden under this Plan (``spec.prefetch_next``);
    #: already taken off ``cycles``.
    prefetch_credit: int = 0

    def to_json(self) -> dict:
        out = {
            "parts": list(self.parts), "output": self.output,
            "output_stripe": self.spec.stripe.to_json(), "buffering": self.spec.label(),
            "weights_in_sram": list(self.spec.weights), "memory_bytes": self.memory_bytes,
            "cycles": self.cycles,
            "tensors": [tc.to_json() for tc in self.tensor_configs],
            "schedule": [ps.to_json() for ps in self.part_schedules],
        }
        if self.spec.prefetched or self.spec.prefetch_next:
            out["prefetch"] = {"weights_prefetched": self.spec.prefetched,
                               "prefetches_next": self.spec.prefetch_next,
                               "credit_cycles": self.prefetch_credit}
        return out
