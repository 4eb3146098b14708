"""The interface every device family's performance model implements."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Iterable, NamedTuple

from planner.graph import Part


class StripeTerms(NamedTuple):
    """Per stripe shape, what the planner's costing reads of the model (the methods of
    :class:`PerfModel` of the same names)."""
    compute: list[int]
    fill_drain: list[int]       # 0 each where the stripes do not run back to back
    fm_access: list[int]
    weight_fetches: list[int]


class PerfModel(ABC):
    """Estimates the NPU's compute time for one stripe of a Part.

    Memory traffic is not part of this estimate: the planner knows where every buffer lives and
    costs transfers with the MemoryRegion bandwidths, then combines both (see
    planner/plan_costing.py). Models subclass this; the methods with a body are optional
    refinements whose defaults leave the planner's costing as if the model had none.
    """

    name: str
    #: (height, width, channels) granule of the output; stripe sizes are rounded to it.
    micro_block: tuple[int, int, int]

    @abstractmethod
    def compute_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """NPU cycles to compute one output stripe of ``out_shape`` (MACs, output and
        activation stages, weight decode), excluding memory transfers."""

    @abstractmethod
    def stripe_overhead_cycles(self, part: Part) -> int:
        """Fixed cost of issuing one stripe (command set-up, pipeline fill)."""

    @abstractmethod
    def fill_drain_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """Cycles of ``compute_cycles`` that a stripe does not pay when it runs back to back
        with the stripes before and after it (pipeline fill and drain); the planner charges
        them once per Part of a Plan instead of once per stripe."""

    @abstractmethod
    def weight_fetches(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """How many times one stripe reads the Part's weights (1 for a Part without them):
        where it is 1 the weights need no SRAM staging to be read only once."""

    def fm_access_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """Cycles the feature-map memory port is busy with the NPU's own block fetches of one
        stripe (IFM blocks re-read per OFM block, the OFM written once), weights aside. They
        bound the port when they exceed the windows the planner moves once. 0: the model
        does not see block fetches, and the windows alone bound the port."""
        return 0

    def summarise_stripes(self, part: Part, shapes: Iterable[tuple[int, ...]]) -> None:
        """Prepare the answers for every stripe shape in ``shapes`` of ``part`` at once,
        before the planner asks for them one by one (a model whose per-stripe work batches
        well does it here). Default: nothing to prepare."""

    def stripe_terms(self, part: Part, shapes: list[tuple[int, ...]], back_to_back: bool
                     ) -> StripeTerms:
        """``compute_cycles``, ``fill_drain_cycles`` (when ``back_to_back``),
        ``fm_access_cycles`` and ``weight_fetches`` of each shape in ``shapes``, which the
        planner's costing reads for hundreds of shapes of a Part at once (a model that
        answers all four from one record per stripe overrides this). Default: the four
        methods, shape by shape."""
        return StripeTerms(
            [part.performance(self, s) for s in shapes],
            [self.fill_drain_cycles(part, s) for s in shapes] if back_to_back
            else [0] * len(shapes),
            [self.fm_access_cycles(part, s) for s in shapes],
            [self.weight_fetches(part, s) for s in shapes])
