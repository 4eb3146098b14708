"""A device the planner targets: its performance model and its memory regions."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ethos_arch.ops import Op
from planner.errors import PlannerError
from planner.graph import Part, part_operator
from planner.memory import MemoryRegion
from planner.perf.base import PerfModel
from planner.stripes import StripeConfig


@dataclass(frozen=True)
class Device:
    """An NPU configuration: the cost model plus where tensors may live.

    ``fm_region`` holds feature maps (the region the budget applies to); ``weight_region``
    holds constants; ``io_region`` holds the network's inputs and outputs (the feature-map
    region unless the user streams them from DRAM).
    """
    name: str
    family: str
    perf: PerfModel = field(compare=False)
    regions: tuple[MemoryRegion, ...]
    fm_region: str = "sram"
    weight_region: str = "flash"
    io_region: str = "sram"
    #: The NPU reads streamed weights straight from ``weight_region`` (Ethos-U: its weight
    #: decoder fetches the encoded stream over AXI from any region, once per OFM block), so a
    #: Plan stages in SRAM only weights a stripe would read more than once
    #: (``perf.weight_fetches``); False: weights always reach the NPU through SRAM (Ethos-N).
    weights_read_in_place: bool = False
    #: A convolution whose weights are staged runs each stripe as one NPU operation per
    #: weight slice, each with its own issue overhead (Ethos-U's command stream:
    #: ``planner.staged_slices``); False: a stripe is one operation whatever its weights.
    sliced_staging: bool = False
    #: The weight DMA may run ahead by one operation: while an unstriped Part runs, its idle
    #: weight-memory port copies the next Part's weights into SRAM, hiding that copy
    #: (Vela's weight pre-buffering; rfcs/0001 appendix, "Weights prefetched across Parts").
    weight_prefetch: bool = False
    #: The NPU reads the network's inputs and writes its outputs where they live
    #: (``io_region``), over that memory's port, with no stripes staged through
    #: ``fm_region`` (Ethos-U: a feature map may sit in any AXI region, and Vela's
    #: Dedicated_Sram mode leaves them in the DRAM arena); False: an input or output homed
    #: outside ``fm_region`` is streamed through a staging buffer there (a DMA engine's way).
    io_read_in_place: bool = False
    #: Operators (``planner.graph.part_operator``) the device runs only over whole tensors
    #: held whole: it cannot address their operands in a cascade's buffers (rings or
    #: windows), so each of their Parts is a Plan of its own, though it may still be striped
    #: there. Empty: every Part may sit inside a cascade.
    solitary: frozenset[Op | str] = frozenset()
    #: Operators (``part_operator``) the device computes only over their whole output in one
    #: step: a Part of one is never striped, alone or in a Plan with other Parts (a cascade
    #: striped through it is not offered; one that holds it whole is, a flat SOFTMAX after
    #: its FULLY_CONNECTED). Empty: every Part may be striped.
    whole_output: frozenset[Op | str] = frozenset()

    def __post_init__(self) -> None:
        names = [r.name for r in self.regions]
        for role in ("fm_region", "weight_region", "io_region"):
            if getattr(self, role) not in names:
                raise PlannerError(f"device {self.name}: {role}={getattr(self, role)!r} is not "
                                   f"one of its regions {names}")

    def cascadable(self, part: Part) -> bool:
        """Whether ``part`` may share a Plan with other Parts (see ``solitary``)."""
        return not self.solitary or part_operator(part) not in self.solitary

    def computes(self, part: Part, stripe: StripeConfig) -> bool:
        """Whether ``part`` may be computed in stripes of ``stripe`` (see ``whole_output``)."""
        return not self.whole_output or part_operator(part) not in self.whole_output or \
            stripe.covers(part.output.shape)

    def region(self, name: str) -> MemoryRegion:
        for r in self.regions:
            if r.name == name:
                return r
        raise PlannerError(f"device {self.name} has no memory region {name!r}; "
                           f"it has {[r.name for r in self.regions]}")

    def with_regions(self, *regions: MemoryRegion, **roles) -> "Device":
        """A copy with regions replaced or added by name, and roles changed."""
        by_name = {r.name: r for r in self.regions}
        for r in regions:
            by_name[r.name] = r
        return replace(self, regions=tuple(by_name.values()), **roles)
