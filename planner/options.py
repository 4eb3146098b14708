"""The planner's user-facing options, validated up front."""
from __future__ import annotations

from dataclasses import dataclass, field

from planner.errors import PlannerError


@dataclass(frozen=True)
class PlannerOptions:
    """Knobs of the search. The defaults are what most users should keep.

    max_plan_size: most Parts in one cascade.
    stripe_factors: how many candidate stripe heights per axis (spread geometrically over the
        number of stripes, so sizes are not limited to powers of two).
    max_width_tiles: most tiles across the width in multi-dimensional striping.
    multi_dimensional: stripe height and width together (on by default).
    rolling_granules: row chunk heights a rolling producer computes at once; 0 means "as many
        rows as its consumer advances per stripe" (the TVM rolling_buffer shape), 1 the fully
        pipelined line-buffer cascade with the smallest rings.
    weight_placements: "flash" streams weights from their home per stripe, "sram" copies a
        Part's weights to SRAM once per Plan when it runs more than one stripe.
    thin_frontier: keep at most this many points on each intermediate frontier (None: exact).
    """
    max_plan_size: int = 16
    stripe_factors: int = 10
    max_width_tiles: int = 8
    multi_dimensional: bool = True
    rolling_granules: tuple[int, ...] = (1, 0)
    weight_placements: tuple[str, ...] = ("flash", "sram")
    allow_recompute: bool = True
    thin_frontier: int | None = None

    def __post_init__(self) -> None:
        def bad(name, value, allowed):
            raise PlannerError(f"option {name}={value!r} is invalid; allowed: {allowed}")
        if not isinstance(self.max_plan_size, int) or not 1 <= self.max_plan_size <= 256:
            bad("max_plan_size", self.max_plan_size, "an integer from 1 to 256")
        if not isinstance(self.stripe_factors, int) or not 1 <= self.stripe_factors <= 64:
            bad("stripe_factors", self.stripe_factors, "an integer from 1 to 64")
        if not isinstance(self.max_width_tiles, int) or not 1 <= self.max_width_tiles <= 64:
            bad("max_width_tiles", self.max_width_tiles, "an integer from 1 to 64")
        object.__setattr__(self, "rolling_granules", tuple(self.rolling_granules))
        if any(not isinstance(g, int) or g < 0 for g in self.rolling_granules):
            bad("rolling_granules", self.rolling_granules, "non-negative integers (0 = natural)")
        object.__setattr__(self, "weight_placements", tuple(self.weight_placements))
        if not self.weight_placements or any(w not in ("flash", "sram")
                                             for w in self.weight_placements):
            bad("weight_placements", self.weight_placements, "a non-empty subset of "
                "('flash', 'sram')")
        if self.thin_frontier is not None and (not isinstance(self.thin_frontier, int)
                                               or self.thin_frontier < 2):
            bad("thin_frontier", self.thin_frontier, "None (exact) or an integer >= 2")
