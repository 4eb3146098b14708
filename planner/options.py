"""The planner's user-facing options, validated up front.

The defaults are the settings tvm-ethos's compile path realizes in TensorIR
(``tvm_ethos.pipeline.planning``), so that ``python -m planner``, ``tvmc plan``, the budget sweep
and ``tvmc compile`` find the same frontier and choose the same Proposal for a budget. The
other values stay available for planner studies; ``tvmc compile`` refuses them.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields

from planner.errors import PlannerError


def _option(default, help: str):
    """A PlannerOptions field with the help line every command line shows for it."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class PlannerOptions:
    """Knobs of the search. The defaults are what the compile path realizes (module docstring).

    max_plan_size: most Parts in one cascade.
    stripe_factors: how many candidate stripe heights per axis (spread geometrically over the
        number of stripes, so sizes are not limited to powers of two).
    max_width_tiles: most tiles across the width in multi-dimensional striping.
    multi_dimensional: stripe height and width together (on by default).
    rolling_granules: row chunk heights a rolling producer computes at once; 0 means "as many
        rows as its consumer advances per stripe" (the TVM rolling_buffer shape), 1 the fully
        pipelined line-buffer cascade with the smallest rings. The compile path realizes
        (1,) and () only.
    rolling_mixed: a demand-driven rolling Plan may hold the tensors that cannot roll (several
        consumers, no single striped axis, a window that does not move forward) as RECOMPUTE
        windows. False drops those Plans, and also those whose windows advance a fractional
        number of rows: what the compile path's line-buffer cascades
        (tvm_ethos.emulator.line_buffer) realize is every intermediate tensor rolling at an
        integer rate.
    lockstep_rolling: hold each intermediate tensor of a cascade as the window its consumers read
        per stripe, as a ring that the producer extends by the rows it has not computed yet
        (planner.lockstep: at most RECOMPUTE's memory, each row computed once; what one
        TensorIR loop realizes). It replaces recompute cascades where a tensor can roll.
        "prologue": lockstep rings whose stripe loop starts before the sink's first stripe,
        so that every step computes only new rows and every ring is the steady one.
    weight_placements: "flash" streams weights from their home per stripe, "sram" copies a
        Part's weights to SRAM once per Plan when it runs more than one stripe.
    weight_prefetch: on a device that can (``Device.weight_prefetch``), copy the next Part's
        weights to SRAM while an unstriped Part runs (Vela's weight pre-buffering). The
        compile path has no TensorIR form for a copy that crosses Plans.
    thin_frontier: keep at most this many points on each intermediate frontier (None: exact).
    """
    max_plan_size: int = _option(16, "most Parts in one cascade (1 to 256)")
    stripe_factors: int = _option(10, "candidate stripe heights per axis (1 to 64)")
    max_width_tiles: int = _option(8, "most tiles across the width (1 to 64)")
    multi_dimensional: bool = _option(True, "stripe height and width together (true/false)")
    rolling_granules: tuple[int, ...] = _option(
        (1,), "rows a rolling producer computes at once, a comma list (1: line buffers; 0: "
              "as many as its consumer advances; none: no rolling buffers)")
    weight_placements: tuple[str, ...] = _option(
        ("flash", "sram"), "where a Part's weights may be read from: flash, sram or both")
    allow_recompute: bool = _option(True, "allow recompute cascades (true/false)")
    rolling_mixed: bool = _option(
        False, "rolling Plans may keep tensors that cannot roll as recompute windows "
               "(true/false; a planner study setting)")
    lockstep_rolling: bool | str = _option(
        "prologue", "intermediate tensors as lockstep rings: true, false or prologue (rings "
                    "that start before the first output stripe)")
    weight_prefetch: bool = _option(
        False, "copy the next Part's weights to SRAM during an unstriped Part, as Vela "
               "pre-buffers (true/false; a planner study setting)")
    thin_frontier: int | None = _option(
        None, "keep at most this many points per intermediate frontier (none: exact; >= 2)")

    def __post_init__(self) -> None:
        def bad(name, value, allowed):
            raise PlannerOptionError(name, value, allowed)

        def is_int(v) -> bool:          # bool is an int to Python, never to an option
            return isinstance(v, int) and not isinstance(v, bool)

        if not is_int(self.max_plan_size) or not 1 <= self.max_plan_size <= 256:
            bad("max_plan_size", self.max_plan_size, "an integer from 1 to 256")
        if not is_int(self.stripe_factors) or not 1 <= self.stripe_factors <= 64:
            bad("stripe_factors", self.stripe_factors, "an integer from 1 to 64")
        if not is_int(self.max_width_tiles) or not 1 <= self.max_width_tiles <= 64:
            bad("max_width_tiles", self.max_width_tiles, "an integer from 1 to 64")
        for name in ("multi_dimensional", "allow_recompute", "rolling_mixed", "weight_prefetch"):
            if not isinstance(getattr(self, name), bool):
                bad(name, getattr(self, name), "True or False")
        if not isinstance(self.lockstep_rolling, bool) and self.lockstep_rolling != "prologue":
            bad("lockstep_rolling", self.lockstep_rolling, "True, False or 'prologue'")
        if isinstance(self.rolling_granules, (str, bytes)) or \
                not hasattr(self.rolling_granules, "__iter__"):
            bad("rolling_granules", self.rolling_granules,
                "a sequence of non-negative integers (0 = natural; empty = no rolling buffers)")
        object.__setattr__(self, "rolling_granules", tuple(self.rolling_granules))
        if any(not is_int(g) or g < 0 for g in self.rolling_granules):
            bad("rolling_granules", self.rolling_granules,
                "a sequence of non-negative integers (0 = natural; empty = no rolling buffers)")
        if isinstance(self.weight_placements, (str, bytes)) or \
                not hasattr(self.weight_placements, "__iter__"):
            bad("weight_placements", self.weight_placements,
                "a non-empty subset of ('flash', 'sram')")
        object.__setattr__(self, "weight_placements", tuple(self.weight_placements))
        if not self.weight_placements or any(w not in ("flash", "sram")
                                             for w in self.weight_placements):
            bad("weight_placements", self.weight_placements, "a non-empty subset of "
                "('flash', 'sram')")
        if self.thin_frontier is not None and (not is_int(self.thin_frontier)
                                               or self.thin_frontier < 2):
            bad("thin_frontier", self.thin_frontier, "None (exact) or an integer >= 2")

    @classmethod
    def from_mapping(cls, options) -> "PlannerOptions":
        """Options from a dict (JSON, a config file); an unknown key is a PlannerError."""
        known = [f.name for f in fields(cls)]
        for key in options:
            if key not in known:
                raise PlannerError(f"unknown planner option {key!r}; known options: "
                                   f"{', '.join(known)}")
        return cls(**options)


class PlannerOptionError(PlannerError):
    """A PlannerOptions field has a bad value: ``option``, ``value`` and ``allowed`` say which,
    so that a front end can name its own spelling of the option (``--planner-max_plan_size``)."""

    def __init__(self, option: str, value, allowed: str) -> None:
        self.option, self.value, self.allowed = option, value, allowed
        super().__init__(f"option {option}={value!r} is invalid; allowed: {allowed}")
