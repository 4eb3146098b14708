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
from enum import Enum

from planner.memory import TensorConfig
from planner.stripes import StripeConfig


class Buffering(str, Enum):
    """How a Plan holds its intermediate tensors (``PlanSpec.mode``).

    ROLLING: a ring of rows along the innermost striped axis, its producer computing rows on
    demand in chunks (``PlanSpec.granule``). LOCKSTEP: the windows its consumers read, each
    row computed once as the stripes advance together (planner/lockstep.py). RECOMPUTE: the
    windows, overlapping rows computed again. Members are their string values (JSON, labels).
    """
    ROLLING = "rolling"
    LOCKSTEP = "lockstep"
    RECOMPUTE = "recompute"
    __str__ = str.__str__
    __format__ = str.__format__


class WeightPlacement(str, Enum):
    """Where a Part's weights are read from while it runs: FLASH streams them from their home
    region every stripe, SRAM copies them to SRAM once per Plan (or prefetches them under the
    previous Plan). Members are their string values (JSON, options)."""
    FLASH = "flash"
    SRAM = "sram"
    __str__ = str.__str__
    __format__ = str.__format__


@dataclass(frozen=True)
class PartSchedule:
    """How one Part of a Plan runs: the stripes of its output it computes, and their cost."""
    part: str
    stripe: StripeConfig
    executions: int
    cycles: int
    weights_region: WeightPlacement

    def to_json(self) -> dict:
        return {"part": self.part, "stripe": self.stripe.to_json(),
                "executions": self.executions, "cycles": self.cycles,
                "weights_region": self.weights_region}


@dataclass(frozen=True)
class PlanSpec:
    """The choices that define a Plan for a given interval (enough to rebuild it)."""
    stripe: StripeConfig
    mode: Buffering      # a plain string naming one is converted
    granule: int         # rolling chunk rows; 0 = natural
    weights: tuple[str, ...] = ()   # Parts whose weights are copied to SRAM once
    #: Cross-Plan weight prefetch (one-Part unstriped Plans, PlanGenerator.prefetch_cost):
    #: this Plan's Part finds its weights already in SRAM, copied during the previous Plan;
    #: this Plan copies the next Part's weights to SRAM while its own Part runs.
    prefetched: bool = False
    prefetch_next: bool = False

    def __post_init__(self) -> None:
        if type(self.mode) is not Buffering:
            object.__setattr__(self, "mode", Buffering(self.mode))

    def label(self) -> str:
        if self.mode == Buffering.ROLLING:
            return f"rolling(g={self.granule or 'natural'})"
        return self.mode.value

    def weights_for(self, part: str) -> WeightPlacement:
        return WeightPlacement.SRAM if part in self.weights else WeightPlacement.FLASH


@dataclass(frozen=True)
class Plan:
    """One interval ``[start, end]`` of the topological order run as a cascade, costed.

    Invariants: ``parts`` are the Parts at positions start..end in order, the last the sink
    whose tensor ``output`` is the only one leaving the interval; ``memory_bytes`` is what
    the Plan allocates beyond its boundary tensors (intermediate and staging buffers, weights
    held in SRAM); ``cycles`` is the sum of ``part_schedules``' cycles less
    ``prefetch_credit``. A Plan is rebuilt exactly from (start, end, spec).
    """
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
    #: Flash its command stream takes, estimated (planner.stream_estimate; 0 on a device
    #: without one): reported beside the weights, not part of the search's objective.
    estimated_stream_bytes: int = 0

    def to_json(self) -> dict:
        out = {
            "parts": list(self.parts), "output": self.output,
            "output_stripe": self.spec.stripe.to_json(), "buffering": self.spec.label(),
            "weights_in_sram": list(self.spec.weights), "memory_bytes": self.memory_bytes,
            "cycles": self.cycles, "estimated_stream_bytes": self.estimated_stream_bytes,
            "tensors": [tc.to_json() for tc in self.tensor_configs],
            "schedule": [ps.to_json() for ps in self.part_schedules],
        }
        if self.spec.prefetched or self.spec.prefetch_next:
            out["prefetch"] = {"weights_prefetched": self.spec.prefetched,
                               "prefetches_next": self.spec.prefetch_next,
                               "credit_cycles": self.prefetch_credit}
        return out
