"""Lockstep rolling buffers: the rolling buffer a single stripe loop realizes.

In a cascade compiled as one loop over the sink's stripes (TensorIR ``compute_at`` at the
stripe loop), every producer computes, per step, the region its consumers read in that step
(the RECOMPUTE window). A lockstep rolling buffer keeps that window's buffer as a ring along
the innermost striped axis and has the producer compute only the rows the previous step did
not: at the first step of each sweep along that axis the whole window, then the rows past the
previous window's end: each row once. Its consumer, rolling too, reads only the window of its
own new rows, so the ring holds from that window's start to the producer's frontier: near the
kernel's height at every depth, except at the first step of a sweep, whose windows are whole
(clipped at the top by the padding). The windows are propagated as for RECOMPUTE, so the
buffers are at most RECOMPUTE's. ``tvm_ethos.emulator.schedule`` realizes it exactly (its own ring
addressing: TVM's ``rolling_buffer`` refuses windows clipped by padding, and sizes every ring
by the whole window).

With a *prologue* (``PlannerOptions(lockstep_rolling="prologue")``) the stripe loop starts
before the sink's first stripe: each producer's windows are extended backwards by the steps
that still reach into the tensor (``prologue`` of them), steps whose sink stripe lies above
the tensor only advance the producers. Then every step of every level computes only new
rows, the first ones included, and every ring is the steady one (``a + k - 1`` rows) instead
of holding the whole top-clipped first window (``h + d`` rows at depth ``d`` of a SAME 3x3
chain).

The planner's demand-driven rolling buffers (``rolling_granules``) have smaller rings for deep
cascades but need each producer to run on its own chunk grid, which one loop does not express
(rfcs/0005 section 4). Lockstep is the realizable one; ``PlannerOptions.lockstep_rolling``
turns it on.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from planner.propagator import Propagator
from planner.stripes import StripeConfig, _axis_ranges, _is_int, range_sizes, unchecked_config
from planner.windows import window


@dataclass(frozen=True, eq=True)
class LockstepStripes(StripeConfig):
    """A lockstep producer's windows (what its consumer's whole stripes read per step, so what
    it propagates to its own inputs) with the work it does (``work_ranges``, which the cost
    model counts): along ``rolling_axis`` only the rows past the previous step's window,
    except at the first step of each sweep. ``prologue``: how many of the steps along the
    rolling axis come before the sink's first stripe (the windows, offset and stripe count
    include them)."""
    rolling_axis: int = -1
    prologue: int = 0

    def __hash__(self) -> int:
        # Kept once computed, like StripeConfig's: the search's memos hash these configs
        # hundreds of thousands of times.
        try:
            return self._lockstep_hash
        except AttributeError:
            h = hash((StripeConfig.__hash__(self), self.rolling_axis, self.prologue))
            object.__setattr__(self, "_lockstep_hash", h)
            return h

    def work_ranges(self, axis: int) -> tuple[tuple[int, int], ...]:
        """The rows computed at each step along ``axis`` (the windows, trimmed on the rolling
        axis to what the previous step did not compute)."""
        if axis != self.rolling_axis:
            return self.axis_ranges(axis)
        return _trimmed_ranges(self.axis_ranges(axis))

    def work_sizes(self, axis: int) -> tuple[tuple[int, int], ...]:
        """``work_ranges`` counted (``StripeConfig.work_sizes``), the rolling axis's memoised
        on its scalars too."""
        if axis != self.rolling_axis:
            return StripeConfig.work_sizes(self, axis)
        return _trimmed_sizes(self.offset[axis], self.strides[axis], self.shape[axis],
                              self.stripes[axis], self.extent[axis])

    def _every_work_sizes(self) -> list[tuple[tuple[int, int], ...]]:
        """``work_sizes`` of every axis (``StripeConfig._every_work_sizes``), the rolling
        axis's trimmed."""
        sizes = StripeConfig._every_work_sizes(self)
        if 0 <= self.rolling_axis < len(sizes):
            sizes[self.rolling_axis] = self.work_sizes(self.rolling_axis)
        return sizes

    def to_json(self) -> dict:
        return dict(super().to_json(), rolling_axis=self.rolling_axis, prologue=self.prologue)


@lru_cache(maxsize=200_000)
def _trimmed_ranges(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """``ranges`` with each one trimmed to the rows past the previous one's end."""
    out, prev_hi = [], None
    for lo, hi in ranges:
        start = lo if prev_hi is None else max(lo, prev_hi)
        out.append((start, max(start, hi)))
        prev_hi = hi
    return tuple(out)


@lru_cache(maxsize=200_000)
def _trimmed_sizes(offset, stride, shape: int, stripes: int, extent: int
                   ) -> tuple[tuple[int, int], ...]:
    """(rows computed, how many steps compute that many) along a lockstep producer's
    rolling axis of these scalars (``LockstepStripes.work_sizes``)."""
    return range_sizes(_trimmed_ranges(_axis_ranges(offset, stride, shape, stripes, extent)))


def prologue_of(config: StripeConfig) -> int:
    """Steps before the sink's first stripe that ``config``'s stripes include (0 for a
    config that is not a lockstep producer's)."""
    return getattr(config, "prologue", 0)


def stepping_axis(window: StripeConfig) -> int | None:
    """The one innermost striped axis of ``window`` (the stripe loop's), at an integer step.
    Kept on the config once found, as its hash is: the walks ask for it of the same configs
    again and again."""
    found = window.__dict__.get("_stepping", window)
    if found is window:
        found = window.__dict__["_stepping"] = _stepping_axis(window)
    return found


def _stepping_axis(window: StripeConfig) -> int | None:
    if not any(window.order):
        return None
    inner = max(window.order)
    axes = [a for a in range(len(window.shape))
            if window.order[a] == inner and window.stripes[a] > 1]
    if len(axes) != 1 or not (_is_int(window.strides[axes[0]]) and
                              _is_int(window.offset[axes[0]])):
        return None
    return axes[0]


def lockstep_axis(window: StripeConfig) -> int | None:
    """The axis a lockstep ring rolls along: the one innermost striped axis, when consecutive
    windows overlap along it at an integer step (a fractional step, an upscaling, moves the
    window by a varying number of rows, which one ring predicate cannot follow)."""
    a = stepping_axis(window)
    if a is None:
        return None
    stride = window.strides[a]
    if not 0 < stride < window.shape[a]:
        return None
    return a


def lockstep_config(region: StripeConfig, prologue: int | None = None
                    ) -> LockstepStripes | None:
    """``region`` (the windows a producer's consumer reads per step) as a lockstep producer's
    config, or None where no axis can roll.

    ``prologue``: None for no prologue; otherwise the steps before the sink's first stripe
    that ``region`` already includes (its consumer's prologue), and the windows are extended
    backwards by as many more steps as still reach into the tensor (``with_prologue``)."""
    axis = lockstep_axis(region)
    if axis is None:
        return None
    if prologue is None:
        return _unchecked_lockstep(region, region.stripes, region.offset, axis, 0)
    return with_prologue(region, prologue, axis)


def _unchecked_lockstep(region: StripeConfig, stripes: tuple[int, ...], offset: tuple,
                        rolling_axis: int, prologue: int) -> LockstepStripes:
    """A LockstepStripes of ``region``'s fields but ``stripes`` and ``offset``, built without
    the dataclass's checks (like ``stripes.unchecked_config``): its fields come from a checked
    config of the same rank, and the walks build thousands of these. Both its hashes (the
    StripeConfig fields' and its own) are kept from the start, as ``unchecked_config``
    keeps its one."""
    sc = object.__new__(LockstepStripes)
    fields_hash = hash((region.shape, region.extent, region.strides, region.order, stripes,
                        offset))
    sc.__dict__.update(shape=region.shape, extent=region.extent, strides=region.strides,
                       order=region.order, stripes=stripes, offset=offset,
                       rolling_axis=rolling_axis, prologue=prologue, _hash=fields_hash,
                       _lockstep_hash=hash((fields_hash, rolling_axis, prologue)))
    return sc


def with_prologue(region: StripeConfig, prologue: int, rolling_axis: int = -1
                  ) -> StripeConfig:
    """``region``, which includes ``prologue`` steps before the sink's first stripe, extended
    backwards along its stepping axis by the steps whose windows still reach into the tensor:
    before its first step every window then ends above row 0 (is empty), so the loop may start
    as early as the deepest Part of the Plan needs without this Part computing more. Its first
    step computes no more rows than a step advances. ``rolling_axis`` -1: a window that does
    not roll (RECOMPUTE), marked with its prologue so that its producers align on it.
    Windows that do not step (no single integer innermost striped axis) are the same at every
    step: they are returned as they are."""
    axis = stepping_axis(region)
    if axis is None:
        return region
    extra = steps_before(region.offset[axis], region.strides[axis], region.shape[axis])
    stripes, offset = _extended(region, axis, extra)
    return _unchecked_lockstep(region, stripes, offset, rolling_axis, prologue + extra)


def steps_before(offset: int, stride: int, rows: int) -> int:
    """How many windows of ``rows`` rows, moving ``stride`` rows a step, come before the one
    at ``offset`` and still end inside the tensor (below row 0): the prologue steps that
    compute the first window's rows a stride at a time."""
    end = offset + rows   # the window's end, one step before: end - stride
    return max(0, -(-(end - stride) // stride)) if end > stride else 0


def lockstep_ring(producer: LockstepStripes, consumer: StripeConfig, prop: Propagator,
                  extent: int) -> int:
    """Rows the ring of a lockstep producer must hold along its rolling axis.

    At each step the producer first computes its new rows, up to the end of its window, then
    its consumer computes its own rows (all of them at the first step of a sweep, the new ones
    after), reading the window of those rows: the ring holds from that window's start to the
    producer's frontier. Consumers that roll read less than their whole window, so the rings
    stay near the kernel's height at every depth instead of growing with the receptive field;
    the first step of a sweep, which computes whole (top-clipped) windows, sets the rest.
    With a prologue the producer has steps before its consumer's first; they are aligned on
    the steps of the sink."""
    axis = producer.rolling_axis
    b = prop.driving_axis(axis)
    lin, const, off = prop.linear(axis, b), prop.const(axis), prop.offset[axis]
    lead = producer.prologue - prologue_of(consumer)
    if type(consumer) not in (StripeConfig, LockstepStripes):
        return _ring(consumer.work_ranges(b), producer.axis_ranges(axis)[lead:], lin, const,
                     off, extent)
    # Memoised on the scalars the ranges are made of: the walks ask again and again for few
    # distinct rings, and keyed on the ranges every lookup would hash tuples as long as the
    # stripe count.
    return _ring_of(consumer.offset[b], consumer.strides[b], consumer.shape[b],
                    consumer.stripes[b], consumer.extent[b],
                    getattr(consumer, "rolling_axis", -1) == b,
                    producer.offset[axis], producer.strides[axis], producer.shape[axis],
                    producer.stripes[axis], producer.extent[axis], lead, lin, const, off,
                    extent)


@lru_cache(maxsize=200_000)
def _ring_of(c_off, c_stride, c_shape: int, c_stripes: int, c_extent: int, c_trimmed: bool,
             p_off, p_stride, p_shape: int, p_stripes: int, p_extent: int, lead: int,
             lin, const, off, extent: int) -> int:
    """``_ring`` of a consumer's work ranges along its axis (its stripes, trimmed when it
    rolls along that axis) and a producer's windows along its rolling axis, from ``lead``."""
    reads = _axis_ranges(c_off, c_stride, c_shape, c_stripes, c_extent)
    if c_trimmed:
        reads = _trimmed_ranges(reads)
    windows = _axis_ranges(p_off, p_stride, p_shape, p_stripes, p_extent)[lead:]
    return _ring(reads, windows, lin, const, off, extent)


def _ring(reads, windows, lin, const, off, extent: int) -> int:
    """The most rows from the start of what each consumer step reads (``reads``, its rows
    computed, skipped when empty) to the end of the producer's window at that step."""
    ring = 0
    for (c0, c1), (_, hi) in zip(reads, windows):
        if c1 > c0:
            lo, _ = window(c0, c1, lin, const, off, extent)
            ring = max(ring, hi - lo)
    return ring


def extend_steps(config: StripeConfig, steps: int) -> StripeConfig:
    """``config`` with ``steps`` more windows before its first along its innermost striped
    axis (the same affine sequence, continued backwards)."""
    if steps == 0:
        return config
    axis = stepping_axis(config)
    if axis is None:
        raise ValueError("extend_steps: the config has no axis to extend")
    stripes, offset = _extended(config, axis, steps)
    # (unchecked: the same rank as ``config``, and no fewer stripes)
    return unchecked_config(config.shape, config.extent, config.strides, config.order,
                            stripes, offset)


def _extended(config: StripeConfig, axis: int, steps: int) -> tuple[tuple, tuple]:
    """(stripes, offset) of ``config`` with ``steps`` more windows before its first along
    ``axis``."""
    if steps == 0:
        return config.stripes, config.offset
    return (tuple(n + steps if a == axis else n for a, n in enumerate(config.stripes)),
            tuple(o - steps * config.strides[axis] if a == axis else o
                  for a, o in enumerate(config.offset)))


def aligned_windows(windows: list[StripeConfig], prologues: list[int]
                    ) -> tuple[list[StripeConfig], int]:
    """The windows several consumers read, extended to the largest of their prologues (so
    that their steps line up on the sink's), with that prologue. Windows that do not step
    are the same at every step and stay as they are."""
    most = max(prologues)
    return [w if stepping_axis(w) is None else extend_steps(w, most - p)
            for w, p in zip(windows, prologues)], most


def clear_caches() -> None:
    """Forget this module's memos of trimmed ranges and rings, so a benchmark times a cold
    search."""
    for fn in (_trimmed_ranges, _trimmed_sizes, _ring_of):
        fn.cache_clear()
