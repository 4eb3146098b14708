"""Plan generation: every way to run a group of Parts as one cascade, costed exactly.

A Plan (planner/plan.py) covers an interval of the topological order ending at its sink.
Walking the interval backwards, each intermediate tensor is held either as a RECOMPUTE buffer
(the window its consumer reads per stripe) or as a ROLLING ring along the innermost striped
axis, whose producer computes rows on demand in chunks (``rolling_granules``: 1 row at a time
gives the smallest rings; 0 gives the chunk its consumer advances per stripe). Because
extending an interval backwards never changes what is downstream, all intervals with the same
sink and stripe config are costed in one backward walk.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Iterator, NamedTuple

from planner import lockstep, plan_costing, stream_estimate, stripes
from planner.device_model import Device
from planner.errors import PlannerError
from planner.graph import Part, PlannerGraph, Tensor
from planner.lockstep import (
    aligned_windows,
    lockstep_config,
    lockstep_ring,
    prologue_of,
    with_prologue,
)
from planner.memory import BufferMode, TensorConfig
from planner.options import PlannerOptions
from planner.perf import ethos_u
from planner.plan import Buffering, PartSchedule, Plan, PlanSpec, WeightPlacement
from planner.plan_costing import PlanCosting, _rolled_axis
from planner.point_sets import PointSet, culled, extended, merged, staged_frontier
from planner.propagator import Propagator
from planner.stripes import StripeConfig, unchecked_config
from planner.walk_bound import SinkBound
from planner.whole_on_a_tie import whole_on_a_tie

# Members bound once: read through their Enum class, each costs a Python-level lookup, and
# these are read on the hot paths.
_ROLLING, _LOCKSTEP, _SRAM = Buffering.ROLLING, Buffering.LOCKSTEP, WeightPlacement.SRAM
_RING_BUFFER, _WINDOW_BUFFER = BufferMode.ROLLING, BufferMode.RECOMPUTE

_new = tuple.__new__

# The Plan values are still imported from here by callers outside planner/.
__all__ = ["FrontierPoint", "PartSchedule", "Plan", "PlanGenerator", "PlanSpec", "PrefetchVariant",
           "RawSpec", "clear_caches", "make_spec"]


class RawSpec(NamedTuple):
    """A candidate's PlanSpec left unbuilt (``make_spec`` builds it): most candidates are
    culled, so building their PlanSpec would be wasted."""
    base: PlanSpec            # every choice but the weights copied to SRAM
    copied: tuple[str, ...]   # Parts whose weights are copied to SRAM once


class FrontierPoint(NamedTuple):
    """One point of an interval's Pareto frontier (``interval_frontiers``)."""
    memory: int
    cycles: int
    raw: RawSpec


def frontiers_to_wire(by_start: dict[int, list[FrontierPoint]]) -> dict[int, list[tuple]]:
    """``interval_frontiers``' frontiers as plain tuples, to send to another process: pickle
    writes and reads plain tuples in C, but calls Python for every NamedTuple (several times
    slower over the thousands of points of a network; rfcs/0001, performance notes)."""
    return {start: [(m, c, (raw[0], raw[1])) for m, c, raw in points]
            for start, points in by_start.items()}


def frontiers_from_wire(wire: dict[int, list[tuple]]) -> dict[int, list[FrontierPoint]]:
    """The inverse of ``frontiers_to_wire``."""
    return {start: [FrontierPoint(m, c, RawSpec(*raw)) for m, c, raw in points]
            for start, points in wire.items()}


class PrefetchVariant(NamedTuple):
    """The one-Part unstriped Plan [j, j] run with cross-Plan weight prefetch
    (``prefetch_variants``)."""
    prefetched: bool          # its weights were copied to SRAM under the previous Plan
    prefetch_next: bool       # it copies the next Part's weights while it runs
    memory: int
    cycles: int
    raw: RawSpec


#: The most stripes a sink is cut into along one axis. Every later step of the search (the
#: ranges of the stripes, their windows, rings and costs) walks the stripes of an axis, so
#: this bounds the planner's work by the model's size rather than its tensors' extents; no
#: real network's sink is taller than this, and past it per-stripe overheads dominate.
MAX_STRIPES_PER_AXIS = 1024


def _distinct_sizes(extent: int, granule: int, factors: int) -> list[int]:
    """Stripe sizes along one axis: one per distinct stripe count up to
    ``MAX_STRIPES_PER_AXIS``, aligned to ``granule``, thinned to ``factors`` values spread
    evenly (so not only powers of two).

    The stripe counts are walked in blocks that share one size (``_ceil_quotients``), never
    one by one, so a 2^30-row axis costs no more than a 1024-row one."""
    ordered = sorted({min(extent, -(-q // granule) * granule)
                      for q in _ceil_quotients(extent, MAX_STRIPES_PER_AXIS)})
    if len(ordered) <= factors:
        return ordered
    if factors == 1:          # one size: the whole axis (no striping along it)
        return [ordered[-1]]
    picks = {ordered[round(k * (len(ordered) - 1) / (factors - 1))] for k in range(factors)}
    return sorted(picks)


def _ceil_quotients(extent: int, most: int) -> list[int]:
    """The distinct values of ceil(extent / n) for n = 1 .. min(extent, most), descending.

    Walks the blocks of stripe counts n that share one quotient q, at most
    O(sqrt(extent)) of them: ceil(extent / n) >= q exactly when n <= (extent - 1) // (q - 1),
    so the block of q ends there and the next block starts one count later."""
    out = []
    n = 1
    while n <= min(extent, most):
        q = -(-extent // n)
        out.append(q)
        if q == 1:
            break
        n = (extent - 1) // (q - 1) + 1
    return out


class PlanGenerator(PlanCosting):
    """Generates the candidate Plans of one graph on one device: stripe configs and buffer
    modes per sink, costed by walking each sink's intervals backwards (PlanCosting costs the
    Parts), and builds the chosen ones in full."""

    def __init__(self, graph: PlannerGraph, device: Device, options: PlannerOptions) -> None:
        super().__init__(graph, device, options)
        self.position = {p.name: i for i, p in enumerate(self.topo)}
        self._step_cache: dict = {}
        self._specs_cache: dict[int, list[PlanSpec]] = {}
        self._interior_cache: dict = {}
        self._placed: dict = {}
        self._junction_ids: dict = {}
        self._junction_of: dict[int, int] = {}
        self._readers_of: dict = {}
        self._steps_cache: dict[int, tuple[list, Iterator]] = {}

    # ----- stripe candidates ---------------------------------------------------------------
    def sink_configs(self, t: Tensor) -> list[StripeConfig]:
        shape = t.shape
        configs = [StripeConfig.whole(shape)]
        if len(shape) != 4:
            return configs
        mh, mw, _ = self.device.perf.micro_block
        _, h, w, _ = shape
        heights = _distinct_sizes(h, mh, self.options.stripe_factors)
        widths = [w]
        if self.options.multi_dimensional and w > 1:
            for n in range(2, self.options.max_width_tiles + 1):
                tile = min(w, -(-(-(-w // n)) // mw) * mw)
                if tile < w and tile not in widths:
                    widths.append(tile)
        for tw in widths:
            for th in heights:
                if th == h and tw == w:
                    continue
                order = (0, 2 if tw < w else 1, 1, 0) if th < h else (0, 0, 1, 0)
                configs.append(StripeConfig.tiled(shape, (shape[0], th, tw, shape[3]), order))
        return configs

    def modes(self) -> list[tuple[Buffering, int]]:
        out = [(Buffering.ROLLING, g) for g in self.options.rolling_granules]
        out.extend(self._windowed_modes())
        return out

    def _windowed_modes(self) -> list[tuple[Buffering, int]]:
        """Modes whose buffers are the windows: lockstep rolling (planner.lockstep) holds the
        same windows as recompute with each row computed once, so it replaces recompute."""
        if self.options.lockstep_rolling:
            return [(Buffering.LOCKSTEP, 0)]
        return [(Buffering.RECOMPUTE, 0)] if self.options.allow_recompute else []

    def prefetch_variants(self, j: int) -> list[PrefetchVariant]:
        """The Plan [j, j] run whole with cross-Plan prefetch, beside its plain candidate
        (``interval_frontiers``). A prefetch that hides nothing (credit 0) is not offered."""
        p = self.topo[j]
        ins = [False, True] if self.can_prefetch(p) else [False]
        outs = [False, True] if j + 1 < len(self.topo) and \
            self.can_prefetch(self.topo[j + 1]) else [False]
        whole = StripeConfig.whole(p.output.shape)
        out = []
        for pre in ins:
            for nxt in outs:
                if not (pre or nxt):
                    continue
                mem, cyc, credit = self.prefetch_cost(j, pre, nxt)
                if nxt and credit <= 0:
                    continue
                spec = PlanSpec(whole, Buffering.RECOMPUTE, 0, (), pre, nxt)
                out.append(PrefetchVariant(pre, nxt, mem, cyc,
                                           RawSpec(spec, (p.name,) if pre else ())))
        return out

    def _build_prefetch(self, j: int, spec: PlanSpec) -> Plan:
        """The Plan [j, j] of a prefetch variant: the plain unstriped Plan with its Part's
        weights held in SRAM (``prefetched``: no staging buffer then) and/or the next Part's
        weights held while they are copied (``prefetch_next``)."""
        plain = self.build(j, j, replace(spec, weights=(), prefetched=False, prefetch_next=False))
        memory, cycles, credit = self.prefetch_cost(j, spec.prefetched, spec.prefetch_next)
        p = self.topo[j]
        configs = list(plain.tensor_configs)
        schedules = list(plain.part_schedules)

        def held(part: Part) -> list[TensorConfig]:
            return [TensorConfig(t.name, self.device.weight_region, self.device.fm_region,
                                 BufferMode.RECOMPUTE, t.shape, t.bytes)
                    for _, t in part.constant_inputs]

        if spec.prefetched:
            consts = {t.name for _, t in p.constant_inputs}
            configs = [tc for tc in configs if tc.tensor not in consts] + held(p)
            ps = schedules[0]
            schedules[0] = PartSchedule(ps.part, ps.stripe, ps.executions,
                                        cycles + credit, self.device.fm_region)
        if spec.prefetch_next:
            configs += held(self.topo[j + 1])
        return replace(plain, spec=spec, tensor_configs=tuple(configs),
                       part_schedules=tuple(schedules), memory_bytes=memory, cycles=cycles,
                       prefetch_credit=credit)

    # ----- one Plan in full --------------------------------------------------------------
    def build(self, start: int, end: int, spec: PlanSpec) -> Plan:
        """The Plan for interval [start, end] under ``spec``, with every buffer and schedule.

        Walks backwards like ``generate`` and costs with the same ``_placements`` and
        ``_interior``, so a built Plan always has the memory and cycles its candidate had.
        """
        if spec.prefetched or spec.prefetch_next:
            return self._build_prefetch(start, spec)
        sink = self.topo[end]
        compute: dict[str, StripeConfig] = {sink.name: spec.stripe}
        memory = cycles = 0
        configs: list[TensorConfig] = []
        schedules: list[PartSchedule] = []

        def add(p: Part, is_sink: bool) -> None:
            nonlocal memory, cycles
            st = compute[p.name]
            wp = spec.weights_for(p.name)
            options = self._placements(p, st, spec, is_sink, 0, 0, ())
            copied = wp == _SRAM
            mem, cyc, _ = next(o for o in options if (p.name in o[2]) == copied)
            memory += mem
            cycles += cyc
            wbytes = self.weight_copy_bytes(p, st, wp)
            schedules.append(PartSchedule(
                p.name, st, st.total_stripes, cyc,
                self.device.fm_region if wbytes else self.device.weight_region))
            configs.extend(self._input_staging(p, st, spec, True)[1])
            configs.extend(self.held_memory(p, st, is_sink))
            if wbytes:
                for _, t in p.constant_inputs:
                    configs.append(TensorConfig(t.name, self.device.weight_region,
                                                self.device.fm_region, BufferMode.RECOMPUTE,
                                                t.shape, t.bytes))

        out = sink.output
        if self.staged(out):
            biggest = max(spec.stripe.count_stripes(), key=lambda s: (math.prod(s), s))
            configs.append(TensorConfig(out.name, self.home_of(out), self.device.fm_region,
                                        BufferMode.RECOMPUTE, biggest,
                                        2 * out.region_bytes(biggest), double_buffer=True))
        else:
            configs.append(TensorConfig(out.name, self.home_of(out), self.home_of(out),
                                        BufferMode.RECOMPUTE, out.shape, out.bytes))
        add(sink, True)
        for i in range(end - 1, start - 1, -1):
            p = self.topo[i]
            res = self._interior(p.output, self.graph.consumers(p.output), compute,
                                 spec.mode == _ROLLING, spec.granule,
                                 lockstep=spec.mode == _LOCKSTEP)
            if res is None:
                raise PlannerError(f"internal: interval [{start}, {end}] cannot be built "
                                   f"with {spec}")
            cfg, buf_shape, nbytes, mode = res
            compute[p.name] = cfg
            memory += nbytes
            configs.append(TensorConfig(p.output.name, self.device.fm_region,
                                        self.device.fm_region, mode, buf_shape, nbytes))
            add(p, False)
        parts = self.topo[start:end + 1]
        widest = max(parts, key=lambda p: (self.weight_stage_bytes(p, compute[p.name]),
                                           -parts.index(p)))
        for t, shape, nbytes in self.weight_stages(widest, compute[widest.name]):
            # the Plan's one weight staging double buffer, sized by its widest slice pair
            configs.append(TensorConfig(t.name, self.device.weight_region, self.device.fm_region,
                                        BufferMode.RECOMPUTE, shape, nbytes, double_buffer=True))
            memory += nbytes
        plan = Plan(start, end, tuple(p.name for p in parts), out.name, spec,
                    tuple(configs), tuple(reversed(schedules)), memory, cycles)
        stream = stream_estimate.plan_stream(plan, self.graph, self.device)
        return replace(plan, estimated_stream_bytes=stream.bytes)

    def _windows(self, t: Tensor, cons: tuple[Part, ...], compute: dict
                 ) -> list[tuple[Part, int, StripeConfig]]:
        """(consumer, input index, window it reads of ``t`` per stripe) for every input of
        ``cons`` that is ``t``."""
        shape = t.shape
        return [(q, k, compute[q.name].propagate(prop, shape))
                for q, k, prop in self._readers(t, cons)]

    def _readers(self, t: Tensor, cons: tuple[Part, ...]
                 ) -> tuple[tuple[Part, int, Propagator], ...]:
        """(consumer, input index, propagator) of every input of ``cons`` (``t``'s
        consumers, as every caller passes) that is ``t``, found once per tensor: every
        interior buffer the walks size asks."""
        hit = self._readers_of.get(t.name)
        if hit is None:
            hit = self._readers_of[t.name] = tuple(
                (q, k, prop) for q in cons
                for k, (inp, prop) in enumerate(zip(q.inputs, q.propagators))
                if inp.name == t.name)
        return hit

    def _interior(self, t: Tensor, cons: tuple[Part, ...], compute: dict, rolling: bool,
                  granule: int, lockstep: bool = False):
        """Compute config and buffer of an intermediate tensor; None if it cannot be held."""
        wins = self._windows(t, cons, compute)
        for q, k, _ in wins:
            # a window over a merged axis is more than a stripe reads unless the stripe
            # covers the axes folded into it: a buffer sized by it would not be the one a
            # schedule of the exact reads holds
            prop, st = q.propagators[k], compute[q.name]
            if prop.whole_axes and not prop.covers_whole_axes(
                    [st.axis_ranges(a) for a in range(len(st.shape))], q.output.shape):
                return None
        prologue = None
        if lockstep and self.options.lockstep_rolling == "prologue":
            # lockstep with a prologue: consumers' steps aligned on the sink's (one window is
            # aligned on itself)
            if len(wins) == 1:
                prologue = prologue_of(compute[wins[0][0].name])
            else:
                ws, prologue = aligned_windows([w for _, _, w in wins],
                                               [prologue_of(compute[q.name])
                                                for q, _, _ in wins])
                wins = [(q, k, w) for (q, k, _), w in zip(wins, ws)]
        first = wins[0][2]
        for _, _, w in wins[1:]:
            if (w.strides, w.stripes, w.order) != (first.strides, first.stripes, first.order):
                return None   # consumers step through the tensor differently
        rank = len(t.shape)
        if len(wins) == 1:
            union = first
        else:
            offset = tuple(min(w.offset[a] for _, _, w in wins) for a in range(rank))
            shape = tuple(math.ceil(max(w.offset[a] + w.shape[a] for _, _, w in wins)
                                    - offset[a]) for a in range(rank))
            union = StripeConfig(shape, t.shape, first.strides, first.order, first.stripes,
                                 offset)
        # at least one element per axis: where no stripe of a consumer reads the tensor (it
        # reads only a PAD's border) the tensor is still computed, into a buffer nothing reads
        buf = [max(1, n) for n in union.max_spans()]
        if lockstep and len(wins) == 1:
            cfg = lockstep_config(union, prologue)
            if cfg is not None:
                q, k, _ = wins[0]
                buf[cfg.rolling_axis] = lockstep_ring(cfg, compute[q.name], q.propagators[k],
                                                      t.shape[cfg.rolling_axis])
                return cfg, tuple(buf), t.region_bytes(buf), _RING_BUFFER
        axis = None
        if rolling and len(wins) == 1 and any(union.order):
            inner = max(union.order)
            cand = [a for a in range(rank) if union.order[a] == inner and union.stripes[a] > 1]
            if len(cand) == 1:
                axis = cand[0]
        if axis is None:
            if rolling and not self.options.rolling_mixed:
                return None
            if prologue is not None:   # windows held whole, stepping with the prologue
                union = with_prologue(union, prologue)
            return union, tuple(buf), t.region_bytes(buf), _WINDOW_BUFFER
        q, k, _ = wins[0]
        prop = q.propagators[k]
        b = prop.driving_axis(axis)
        lin = prop.linear(axis, b)
        if not self.options.rolling_mixed and (lin <= 0 or lin != int(lin)):
            return None
        if lin <= 0:
            return union, tuple(buf), t.region_bytes(buf), _WINDOW_BUFFER
        h, rows, lo, hi = _rolled_axis(compute[q.name], b, lin, prop.const(axis),
                                       prop.offset[axis], t.shape[axis],
                                       granule or max(1, math.floor(union.strides[axis])))
        if hi <= lo:          # the consumer's windows all fall in padding: nothing to roll
            if not self.options.rolling_mixed:
                return None
            return union, tuple(buf), t.region_bytes(buf), _WINDOW_BUFFER
        n = -(-(hi - lo) // h)
        shape, strides, stripes, offset = (list(union.shape), list(union.strides),
                                           list(union.stripes), list(union.offset))
        shape[axis] = strides[axis] = h
        stripes[axis] = n
        offset[axis] = lo
        cfg = unchecked_config(tuple(shape), t.shape, tuple(strides), union.order,
                               tuple(stripes), tuple(offset))
        buf[axis] = rows
        return cfg, tuple(buf), t.region_bytes(buf), _RING_BUFFER

    def specs(self, end: int) -> list[PlanSpec]:
        """The stripe and buffering choices tried for intervals ending at ``end``.

        Width tiling only pays in memory (its halos are recomputed), so it is paired with the
        smallest-ring buffering only (and with the windowed mode too where rolling Plans may
        not hold a window, ``rolling_mixed=False``: otherwise no tile would cross a residual
        fork); height striping is tried with every mode.

        Memoised per sink: the costing pre-walk (``cost_requests``) and the walk both ask,
        and with the same StripeConfig objects the cost and config memos they fill find each
        other's keys by identity (no field-by-field comparison).
        """
        hit = self._specs_cache.get(end)
        if hit is None:
            hit = self._specs_cache[end] = list(self._specs(end))
        return hit

    def _specs(self, end: int) -> Iterator[PlanSpec]:
        sink = self.topo[end]
        positive = [g for g in self.options.rolling_granules if g > 0]
        smallest = min(positive) if positive else (0 if self.options.rolling_granules else None)
        # the modes of each kind of stripe, found once per sink rather than once per stripe
        whole = [(Buffering.RECOMPUTE, 0)]
        tiled = [(Buffering.ROLLING, smallest)] if smallest is not None else \
            self._windowed_modes()[:1] or [(Buffering.RECOMPUTE, 0)]
        if smallest is not None and not self.options.rolling_mixed:
            tiled += self._windowed_modes()[:1]
        others = self.modes()
        for stripe in self.sink_configs(sink.output):
            if not self.device.computes(sink, stripe):
                continue
            if stripe.total_stripes == 1:
                modes = whole
            elif len(stripe.shape) == 4 and stripe.stripes[2] > 1 and stripe.stripes[1] > 1:
                modes = tiled
            else:
                modes = others
            for mode, g in modes:
                yield PlanSpec(stripe, mode, g, ())

    def generate(self, end: int) -> Iterator[tuple[int, int, int, PlanSpec]]:
        """Every useful (start, memory, cycles, spec) candidate for intervals ending at ``end``
        (see ``candidates``)."""
        for start, mem, cyc, raw in self.candidates(end):
            yield start, mem, cyc, make_spec(raw)

    def candidates(self, end: int) -> Iterator[tuple[int, int, int, RawSpec]]:
        """Like ``generate`` but with the spec left raw (``make_spec`` builds it): most
        candidates are culled at once, so building their PlanSpec would be wasted."""
        for start, point_sets in self._walk(end):
            for stage, points in point_sets:
                for mem, cyc, (spec, copied) in zip(*points):
                    yield start, mem + stage, cyc, RawSpec(spec, copied)

    def interval_frontiers(self, end: int, bound: SinkBound | None = None
                           ) -> tuple[int, dict[int, list[FrontierPoint]]]:
        """(candidate count, {start: Pareto frontier}) for every
        interval ending at ``end``: the frontiers of ``candidates`` culled per interval, with
        the same points and tie-breaks, but built for the survivors only.

        With a ``bound`` (one process, the DP of every earlier sink done) each frontier is
        recorded in it as it is made, and the walk stops a group whose future it bounds: the
        frontiers then lack only points that can never enter the DP's frontier at ``end``
        (rfcs/0001, "Bounded walks"); the count is of the points the walk made."""
        count = 0
        by_start: dict[int, list] = {}
        for start, point_sets in self._walk(end, bound):
            count += sum(len(points.memory) for _, points in point_sets)
            if len(point_sets) == 1:        # one group: already a Pareto set, shifted
                stage, points = point_sets[0]
                front = zip([mem + stage for mem in points.memory], points.cycles,
                            points.payloads)
            else:
                front = zip(*staged_frontier(point_sets))
            # named once culled: most candidates are not (built with tuple.__new__, as
            # NamedTuple._make does, without a Python-level __new__ call per point)
            points = by_start[start] = [_new(FrontierPoint, (mem, cyc, _new(RawSpec, raw)))
                                        for mem, cyc, raw in front]
            if bound is not None:
                bound.found(start, [pt[0] for pt in points], [pt[1] for pt in points])
        return count, by_start

    def _walk(self, end: int, bound: SinkBound | None = None
              ) -> Iterator[tuple[int, list[tuple[int, PointSet]]]]:
        """(start, [(weight staging bytes, Pareto set) of each group]) for the intervals
        ``[start, end]``, start descending; a point is (memory, cycles, (spec, Parts copied))
        without the group's staging buffer, held in columns (``point_sets``).

        All specs are walked backwards in lockstep. What a walk adds when it extends depends
        only on its buffering mode and on the compute stripes of the Parts that still read
        from outside the interval (the open Parts), so walks that agree on those form a group
        with one future: each extension is costed once per group, and the group keeps a single
        Pareto set of (memory, cycles) points over its members and their weight placements. A
        dropped point is dominated now and, its future being the same, forever: the frontier
        stays exact. A group remembers the stripes of its open Parts only: every later
        interior tensor is read by open Parts alone.

        Weight placement is chosen per Part: streaming a Part's weights from their home on
        every stripe, or copying them to SRAM once (when the Part runs several stripes and
        both placements are allowed). That knapsack is carried exactly by the Pareto sets.

        ``bound`` (``interval_frontiers``): once a start is yielded, a group none of whose
        descendants can enter the DP's frontier (``SinkBound.ends``) is not extended.
        """
        sink = self.topo[end]
        groups: dict = {}
        # a sink's placements depend on its spec's stripe, and on its granule only where it
        # stages an input (``_input_staging``): the modes of one stripe share them
        placed: dict = {}
        by_granule = bool(self.staged_inputs(sink))
        for spec in self.specs(end):
            at = (spec.stripe, spec.granule) if by_granule else spec.stripe
            options = placed.get(at)
            if options is None:
                options = placed[at] = self._placements(sink, spec.stripe, spec, True, 0, 0, ())
            pts = [(m, c, spec, copied) for m, c, copied in options]
            # the staging buffer (a max over the Parts) is part of the group: equal in it
            key = (spec.mode, spec.granule, spec.stripe,
                   self.weight_stage_bytes(sink, spec.stripe))
            groups.setdefault(key, ({sink.name: spec.stripe}, []))[1].extend(pts)
        groups = {k: (c, culled(p)) for k, (c, p) in groups.items()}
        steps = self._steps(end)
        i = end
        if groups and len(self.topo) == 1:
            # a graph of one Part: on a tie of memory (and of DMA: no weights) its whole
            # output's candidate, one operation, over stripes (planner.whole_on_a_tie)
            yield i, whole_on_a_tie(sink, [(stripe, stage, points) for (_, _, stripe, stage),
                                           (_, points) in groups.items()])
        elif groups:
            yield i, [(stage, points) for (_, _, _, stage), (_, points) in groups.items()]
        while groups:
            step = next(steps, None)
            if step is None:
                return
            if bound is not None:       # only where the walk goes on
                self._bounded(bound, i, groups)
            i, p, cons, readers, open_parts = step
            grown: dict = {}
            name = p.name
            for (mode, granule, _, stage), (compute, points) in groups.items():
                reads = tuple(map(compute.__getitem__, readers))
                ext = self._extension(i, mode, granule, reads, cons, compute,
                                      points.payloads[0][0])
                if ext is None:
                    continue
                stripe, options, cfg_stage = ext
                if bound is not None:
                    bound.check(i, options)
                new_compute = {q: stripe if q == name else compute[q] for q in open_parts}
                key = (mode, granule, tuple(new_compute.values()), max(stage, cfg_stage))
                grow = extended(points, options)
                slot = grown.get(key)
                if slot is None:
                    grown[key] = (new_compute, [grow])
                else:
                    slot[1].append(grow)
            groups = {k: (c, merged(sets)) for k, (c, sets) in grown.items()}
            if groups:
                yield i, [(stage, points) for (_, _, _, stage), (_, points) in groups.items()]

    @staticmethod
    def _bounded(bound: SinkBound, i: int, groups: dict) -> None:
        """Drop from ``groups`` (the walk's, at start ``i``) those the bound stops, and trim
        the others' points, in place: a group's key holds stripes whose hashes are Python
        calls, so the groups are not copied into a new dict."""
        changed = []
        for key, (compute, points) in groups.items():
            stage = key[3]
            if bound.ends(i, stage + points.memory[0], points.cycles[-1]):
                changed.append((key, None))
                continue
            trimmed = bound.trimmed(i, stage, points)
            if trimmed is not points:
                changed.append((key, (compute, trimmed) if trimmed.memory else None))
        for key, value in changed:
            if value is None:
                del groups[key]
            else:
                groups[key] = value

    def _steps(self, end: int) -> Iterator[tuple[int, Part, tuple, list, list]]:
        """``_walk_steps(end)``, each step found once per sink: the request walk
        (``cost_requests``) and the walk both go over them. Found as far as a walk asks
        (a walk whose groups all end stops early), kept for the next. Their lists are
        shared: never changed."""
        memo = self._steps_cache.get(end)
        if memo is None:
            memo = self._steps_cache[end] = ([], self._walk_steps(end))
        found, more = memo
        k = 0
        while True:
            if k == len(found):
                step = next(more, None)
                if step is None:
                    return
                found.append(step)
            yield found[k]
            k += 1

    def _walk_steps(self, end: int) -> Iterator[tuple[int, Part, tuple, list, list]]:
        """(position, Part, its consumers, their names, the open Parts after it) for each Part
        a backward walk from ``end`` may extend over, nearest first; it stops at the plan size
        limit, at a Part whose output leaves the interval (read later, or a network
        output) and at a Part the device runs only in a Plan of its own
        (``Device.cascadable``; a sink that is one extends over nothing). The walks and
        ``_specs`` leave out the stripes a Part cannot be computed in
        (``Device.computes``). Open Parts: those still reading from outside the interval."""
        min_start = max(0, end - self.options.max_plan_size + 1)
        members = [self.topo[end]]
        if not self.device.cascadable(members[0]):
            return
        for i in range(end - 1, min_start - 1, -1):
            p = self.topo[i]
            t = p.output
            cons = self.graph.consumers(t)
            if t.name in self.output_names or not cons or \
                    any(self.position[q.name] > end for q in cons) or \
                    not self.device.cascadable(p):
                return
            members.append(p)
            open_parts = [q.name for q in members if any(
                not x.is_constant and (self.graph.producer(x) is None or
                                       self.position[self.graph.producer(x).name] < i)
                for x in q.inputs)]
            yield i, p, cons, [q.name for q in cons], open_parts

    def _interior_config(self, i: int, mode: Buffering, granule: int, reads: tuple, cons: tuple,
                         compute: dict):
        """(compute stripe of the Part at ``i``, its interior buffer bytes) when a group whose
        readers of that Part's output compute ``reads`` extends over it; None if it cannot
        (no interior buffer, or a stripe the device does not compute the Part in,
        ``Device.computes``). Memoised: the answer depends on nothing else (no cost), and
        walks from many sinks, and the costing pre-walk (``cost_requests``), repeat it; keyed
        on the position's ``_junction`` rather than the position, so that repeated blocks
        share it."""
        key = (self._junction(i), mode, granule, reads)
        hit = self._interior_cache.get(key, self)
        if hit is self:
            p = self.topo[i]
            res = self._interior(p.output, cons, compute, mode == _ROLLING,
                                 granule, lockstep=mode == _LOCKSTEP)
            hit = self._interior_cache[key] = \
                None if res is None or not self.device.computes(p, res[0]) else (res[0], res[2])
        return hit

    def _junction(self, i: int) -> int:
        """A small int naming everything ``_interior_config`` reads of the Part at ``i`` and
        its output's consumers but their names: the Part's and each consumer's signature
        (``_signature``: shapes, propagators, attributes), which of a consumer's inputs the
        Part's output is, and that output's bytes per element. Positions with equal ones
        (identical layers one after another) hold their output in the same buffers."""
        jid = self._junction_of.get(i)
        if jid is None:
            t = self.topo[i].output
            full = (self._signature(self.topo[i]), t.itemsize, t.compression_ratio,
                    tuple((self._signature(q),
                           tuple(k for k, x in enumerate(q.inputs) if x.name == t.name))
                          for q in self.graph.consumers(t)))
            jid = self._junction_of[i] = self._junction_ids.setdefault(
                full, len(self._junction_ids))
        return jid

    def _extension(self, i: int, mode: Buffering, granule: int, reads: tuple, cons: tuple,
                   compute: dict, spec: PlanSpec):
        """(compute stripe, placement options, weight staging bytes) of the Part at ``i``
        when a group whose readers of its output compute ``reads`` extends over it (its
        ``_interior_config``); None if it cannot. Memoised on the same key, in one lookup:
        the answer depends on nothing else, and walks from many sinks repeat it."""
        key = (i, mode, granule, reads)
        hit = self._step_cache.get(key, self)
        if hit is self:
            cfg = self._interior_config(i, mode, granule, reads, cons, compute)
            if cfg is None:
                hit = None
            else:
                p = self.topo[i]
                stripe, nbytes = cfg
                hit = (stripe, self._interior_placements(p, stripe, spec, nbytes),
                       self.weight_stage_bytes(p, stripe))
            self._step_cache[key] = hit
        return hit

    def _interior_placements(self, p: Part, stripe: StripeConfig, spec: PlanSpec, nbytes: int
                             ) -> list[tuple[int, int, tuple[str, ...]]]:
        """``_placements`` of an interior Part whose output buffer holds ``nbytes``: found
        once per signature and stripe (and granule, where the Part stages an input), as
        Parts of one signature cost the same, then shifted by the buffer and named for
        ``p``. Walks reach the same stripe of repeated layers at many positions."""
        key = (self._signature(p), stripe, spec.granule if self.staged_inputs(p) else None)
        base = self._placed.get(key)
        if base is None:
            base = self._placed[key] = [(m, c, bool(copied)) for m, c, copied in
                                        self._placements(p, stripe, spec, False, 0, 0, ())]
        name = (p.name,)
        return [(m + nbytes, c, name if copies else ()) for m, c, copies in base]

    # ----- costing ahead of the walk (to spread it over processes) ----------------------------
    def cost_requests(self, end: int) -> list[tuple[Part, StripeConfig]]:
        """Every (Part, compute stripe) whose cost the walk of ``end`` asks for, found
        without costing anything: which Parts a walk reaches and with which stripes depends
        on the modes and the open Parts' stripes only, never on costs (costs decide only
        which points survive). Once ``warm_cost`` (or ``adopt_cost``) has seen them all,
        the walk asks the performance model nothing."""
        sink = self.topo[end]
        out = []
        fronts: dict = {}
        for spec in self.specs(end):
            out.append((sink, spec.stripe))
            fronts.setdefault((spec.mode, spec.granule, spec.stripe), {sink.name: spec.stripe})
        for i, p, cons, readers, open_parts in self._steps(end):
            if not fronts:
                break
            grown: dict = {}
            for (mode, granule, _), compute in fronts.items():
                cfg = self._interior_config(i, mode, granule,
                                            tuple(map(compute.__getitem__, readers)), cons,
                                            compute)
                if cfg is None:
                    continue
                out.append((p, cfg[0]))
                new_compute = {q: cfg[0] if q == p.name else compute[q] for q in open_parts}
                grown.setdefault((mode, granule, tuple(new_compute.values())), new_compute)
            fronts = grown
        return out


def make_spec(raw: tuple) -> PlanSpec:
    """The PlanSpec of a RawSpec (or a (base, copied) pair)."""
    base, copied = raw
    return replace(base, weights=copied)





def clear_caches() -> None:
    """Forget every module-level memo (stripe ranges, propagations, windows, rings), so a
    benchmark times a cold search rather than one warmed by the run before it."""
    lockstep.clear_caches()
    plan_costing.clear_caches()
    stripes.clear_caches()
    stream_estimate.clear_caches()
    ethos_u.clear_caches()

