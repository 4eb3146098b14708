"""Proposals: disjoint Plans covering every Part, combined by dynamic programming.

Parts run in the graph's (deterministic) topological order and a Plan covers a contiguous
interval of it. Then the tensors live while a Plan runs depend only on its interval: those
produced before it and read at or after its start, its own output, and the network outputs
already made. So a Proposal's peak memory is the max over its Plans of (Plan buffers + live
boundary tensors) and its cycles the sum, both monotone: culling dominated partial Proposals
at every prefix of the order loses nothing, and the frontier is exact.

One coupling crosses Plans: weights prefetched under the previous Plan
(``PlanGenerator.prefetch_variants``). The Plan that prefetches takes the credit and holds the
buffer, and the Plan after it must use the prefetched weights, so a prefix carries one bit of
state (did its last Plan prefetch the next Part's weights?) and the DP keeps one frontier per
prefix and bit: still exact.

The DP runs on int64 columns (``_sink_on_arrays``: one numpy pass per sink instead of Python
loops over every memory threshold, rfcs/0001) while every value stays within
``pareto.INT64_SAFE``; past it, it goes on with Python lists (``_sink_on_lists``), the
definition the columns follow, with the same candidates in the same order and so the same
Proposals.
"""
from __future__ import annotations

import gc
from collections.abc import Sequence
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from planner.aliases import alias_roots, may_alias
from planner.device_model import Device
from planner.errors import PlannerError
from planner.graph import PlannerGraph
from planner.options import PlannerOptions
from planner.pareto import INT64_SAFE, combine, combine_segments, frontier, frontier_order, thin
from planner.plan import Plan
from planner.plans import PlanGenerator, make_spec
from planner.sink_walks import interval_frontiers
from planner.stream_estimate import stream_bytes
from planner.walk_bound import SinkBound


@dataclass(frozen=True)
class Proposal:
    """A schedule of the whole network: disjoint Plans covering every Part once, in order.

    Invariants: the Plans' intervals tile the topological order from 0 to its end;
    ``memory_bytes`` is the peak over the Plans of their own memory plus the boundary
    tensors live while each runs; ``cycles`` is the sum of the Plans' cycles;
    ``estimated_stream_bytes`` the flash of the whole command stream, estimated
    (planner.stream_estimate: the Plans' and the stream's own header; 0 on a device without
    one), reported and not optimised (rfcs/0001, "Stream bytes").
    """
    plans: tuple[Plan, ...]
    memory_bytes: int
    cycles: int
    estimated_stream_bytes: int = 0

    def to_json(self) -> dict:
        return {"memory_bytes": self.memory_bytes, "cycles": self.cycles,
                "estimated_stream_bytes": self.estimated_stream_bytes,
                "plans": [p.to_json() for p in self.plans]}


def live_boundary_bytes(graph: PlannerGraph, device: Device, size=None
                        ) -> tuple[list[int], list[int]]:
    """(base, own): base[i] = bytes of boundary tensors live when a Plan starts at i,
    own[j] = bytes of the output of the Part at j. Only feature-map-region tensors count.
    ``size(tensor)`` sizes each tensor (default: its bytes; a peer's allocator may round).
    A reshape that may alias its input (``aliases``) counts as its root's bytes, live until
    the alias's last reader: the same number whether the reshape is a Plan of its own (one
    buffer) or inside a longer Plan (its own buffer, its root then dead)."""
    size = size or (lambda t: t.bytes)
    roots = alias_roots(graph)
    topo = graph.topological_parts()
    n = len(topo)
    pos = {p.name: i for i, p in enumerate(topo)}
    outputs = {t.name for t in graph.outputs}
    inputs = {t.name for t in graph.inputs}
    fm = device.fm_region

    def home(name: str) -> str:
        return device.io_region if (name in outputs or name in inputs) else fm

    diff = [0] * (n + 2)
    tensors = [(t, -1) for t in graph.inputs] + [(p.output, pos[p.name]) for p in topo]
    for t, made in tensors:
        if home(t.name) != fm:
            continue
        if t.name in roots:
            continue
        cons = [pos[q.name] for a in [t.name, *(k for k, r in roots.items() if r == t.name)]
                for q in graph.consumers(a)]
        # a network input is in memory when the first Plan starts, read or not; a root whose
        # alias is a network output (``aliases.in_place``) holds it to the end
        held = t.name in outputs or any(r == t.name and k in outputs for k, r in roots.items())
        last = n if held else max(cons, default=max(made, 0))
        # live for plans starting at i with made < i <= last
        if last > made:
            diff[made + 1] += size(t)
            diff[last + 1] -= size(t)
    base, acc = [], 0
    for i in range(n):
        acc += diff[i]
        base.append(acc)
    own = [size(p.output) if home(p.output.name) == fm else 0 for p in topo]
    return base, own


@dataclass(frozen=True)
class _Point:
    memory: int
    cycles: int
    prev: int          # prefix length this point extends
    prev_index: int    # index in that prefix's frontier
    start: int
    end: int
    spec: tuple | None   # raw candidate spec (see plans.make_spec)
    prev_state: int = 0  # the bit of the prefix this point extends (1: weights prefetched)


@dataclass(frozen=True, eq=False)
class _Front(Sequence):
    """A prefix's frontier as the DP's columns, read as _Points: a _Point is built when one
    is read (``proposal`` reads one per Plan, ``frontier`` and ``select`` the last front),
    not for every survivor of every prefix (building those was a third of the DP's time).
    Plans run from ``prev`` (the prefix they extend) to ``end``."""
    memory: np.ndarray
    cycles: np.ndarray
    prev: np.ndarray
    prev_index: np.ndarray
    specs: list               # raw candidate specs (see plans.make_spec)
    prev_state: np.ndarray
    end: int

    def __len__(self) -> int:
        return len(self.memory)

    def __getitem__(self, k):
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        start = int(self.prev[k])
        return _Point(int(self.memory[k]), int(self.cycles[k]), start, int(self.prev_index[k]),
                      start, self.end, self.specs[k], int(self.prev_state[k]))

    def __iter__(self):
        return (self[k] for k in range(len(self)))


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector while the search runs (and its forked workers,
    which inherit the pause). The search builds hundreds of thousands of small tuples (the
    candidates' points) that live until it ends; every few hundred allocations the collector
    rescans them, a large share of the search's CPU (rfcs/0001, performance notes). The
    search makes no reference cycles worth collecting meanwhile; the collector runs again
    afterwards (if it ran before: a caller who paused it keeps it paused), with the search's
    objects promoted to its oldest generation."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            # Every object made meanwhile is in the youngest generation, so the collector's
            # next pass would scan all of them (hundreds of thousands): promote
            # them to the oldest, scanned only by the rare full collections, as if they had
            # survived the young passes they missed.
            # A caller's own frozen objects (gc.freeze before forking workers, say) stay
            # frozen: unfreeze would thaw them too, so then nothing is promoted.
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


class ProposalSearch:
    """Runs the DP and keeps what is needed to rebuild any frontier Proposal.

    ``plan_candidates``: the (Plan, prefix) candidates on every prefix's frontier, plain
    and prefetching: the same whether the walks were bounded, on one process or several."""

    def __init__(self, graph: PlannerGraph, device: Device,
                 options: PlannerOptions | None = None, workers: int | None = None,
                 prune: bool = True) -> None:
        """``prune``: on one process, stop the walks whose every future Plan a Proposal
        already found beats (``walk_bound``): the same frontier and Proposals, with less
        work; False walks everything (the definition the bounded search is tested against).
        Several processes walk unbounded: their walks run before the DP that bounds them.
        ``workers``: processes for the search, one by default. The bound saves about what a
        second process would, without its second core (rfcs/0001, "One process by default"),
        so a second one only adds CPU; a caller with cores to spare may still ask for more,
        which never changes a result."""
        if not graph.parts:
            raise PlannerError("the graph has no parts to plan")
        if workers is not None and (type(workers) is not int or workers < 1):
            raise PlannerError(f"workers must be an integer >= 1 (processes for the search), "
                               f"got {workers!r}")
        if not isinstance(prune, bool):
            raise PlannerError(f"prune must be True or False (whether to bound the walks), "
                               f"got {prune!r}")
        self.workers = 1 if workers is None else workers
        self.prune = prune
        self.graph = graph
        self.device = device
        self.options = options or PlannerOptions()
        self.gen = PlanGenerator(graph, device, self.options)
        self.fronts: list[Sequence[_Point]] = []
        self.prefetch_fronts: list[Sequence[_Point]] = []   # prefixes that prefetched the next
        self.plan_candidates = 0
        #: (start, end, raw spec): the Plan built for it; frontier Proposals share most of
        #: their Plans, and the ``size`` rule rebuilds many Proposals
        self._built: dict[tuple, Plan] = {}
        with _collector_paused():
            self._run()

    def _run(self) -> None:
        base, own = live_boundary_bytes(self.graph, self.device)
        topo = self.graph.topological_parts()
        self.fronts = [[_Point(0, 0, -1, -1, 0, -1, None)]]
        self.prefetch_fronts = [[]]     # prefixes whose last Plan prefetched the next Part
        # the same fronts as int64 (memory, cycles) columns, while every value fits
        columns: list | None = [(np.zeros(1, np.int64), np.zeros(1, np.int64))]
        pre_columns: list = [(np.zeros(0, np.int64), np.zeros(0, np.int64))]
        floors: list[int] = []

        def bound_of(j: int) -> SinkBound | None:
            # the prefix fronts as columns up to the sink (the DP of every earlier sink is
            # done when the walk of ``j`` starts); none once the DP runs on lists. Every
            # request is costed before the first walk: the floors are read then.
            if columns is None:
                return None
            if not floors:
                floors.extend(self.gen.least_cycles())
            lowest = max(0, j - self.options.max_plan_size + 1)
            live = _LiveAt(base, own[j], j, 0 if may_alias(topo[j], self.graph) else own[j])
            return SinkBound(lowest, j, [m for m, _ in columns], [c for _, c in columns],
                             [live[s] if s >= lowest else 0 for s in range(j + 1)], floors)

        bounded = bound_of if self.prune and self.workers <= 1 else None
        for j, (_, by_start) in enumerate(interval_frontiers(self.gen, self.workers, bounded)):
            variants = self.gen.prefetch_variants(j)
            live = _LiveAt(base, own[j], j, 0 if may_alias(topo[j], self.graph) else own[j])
            step = None
            if columns is not None:
                try:
                    step = self._sink_on_arrays(j, by_start, variants, live, columns,
                                                pre_columns)
                except OverflowError:     # a value past INT64_SAFE: lists from here on
                    columns = None
            if step is None:
                step = self._sink_on_lists(j, by_start, variants, live)
            (front, pre_front), arrays = step
            self.fronts.append(front)
            self.prefetch_fronts.append(pre_front)
            if columns is not None:
                columns.append(arrays[0])
                pre_columns.append(arrays[1])
        # What the search kept, not what it walked: the bounded walk makes fewer points than
        # the unbounded, and one process bounds while several do not, so only the fronts,
        # the same either way, give a count that is the same for the same model and options.
        self.plan_candidates = sum(len(f) for f in self.fronts[1:]) + \
            sum(len(f) for f in self.prefetch_fronts[1:])

    def _sink_on_arrays(self, j: int, by_start: dict, variants: list, live: _LiveAt,
                        columns: list, pre_columns: list) -> tuple:
        """The DP step of the sink at ``j`` on int64 columns: the candidates of
        ``_sink_on_lists`` in its order, from one ``pareto.combine_segments`` over a segment
        per start (that prefix's frontier x the Plans from there) and then one per prefetch
        variant (the prefix ending at j, with the bit the variant's ``prefetched`` says, x its
        one point), culled per frontier at once (plain, or prefetching for a variant whose
        ``prefetch_next`` is set). Raises OverflowError, before changing anything, where a
        value would not fit."""
        starts = sorted(by_start)
        plans = [plan for start in starts for plan in by_start[start]]
        plans += [(v.memory, v.cycles, v.raw) for v in variants]
        plan_memory, plan_cycles, specs = zip(*plans) if plans else ((), (), ())
        b_lengths = [len(by_start[start]) for start in starts] + [1] * len(variants)
        prev = starts + [j] * len(variants)
        # a Plan from ``start`` meets the live tensors of a Plan starting there
        b_memory = _ints(plan_memory) + np.repeat(_ints([live[s] for s in prev]), b_lengths)
        _check_safe(b_memory)
        a_memory, a_cycles, a_lengths, a_first = _stacked(
            [columns[s] for s in starts]
            + [pre_columns[j] if v.prefetched else columns[j] for v in variants])
        memory, cycles, segment, ia, ib = combine_segments(
            a_memory, a_cycles, a_lengths, b_memory, _ints(plan_cycles), b_lengths)
        _check_safe(cycles)   # sums; each memory is one of two safe values
        prefetched = [int(v.prefetched) for v in variants]
        by_segment = (np.array(prev, np.int64), a_first,
                      np.array([0] * len(starts) + prefetched, np.int64))
        prefetching = np.array([False] * len(starts) + [v.prefetch_next for v in variants], bool)
        rows = np.arange(len(memory))
        if prefetching.any():
            ahead = prefetching[segment]
            rows, pre_rows = rows[~ahead], rows[ahead]
        else:
            pre_rows = rows[:0]
        cands = (memory, cycles, segment, ia, ib)
        front = self._front_of_columns(rows, cands, by_segment, specs, j)
        pre_front = self._front_of_columns(pre_rows, cands, by_segment, specs, j)
        return (front, pre_front), ((front.memory, front.cycles),
                                    (pre_front.memory, pre_front.cycles))

    def _front_of_columns(self, rows: np.ndarray, cands: tuple, by_segment: tuple,
                          specs: tuple, j: int) -> _Front:
        """The survivors among ``rows`` of ``combine_segments``' candidates (memory, cycles,
        segment, ia, ib) as a _Front, thinned if the options ask. Per segment: the prefix it
        extends, that prefix's first index in ia, and its bit."""
        memory, cycles, segment, ia, ib = cands
        keep = rows[frontier_order(memory[rows], cycles[rows])]
        if self.options.thin_frontier:
            keep = _ints(thin(keep.tolist(), self.options.thin_frontier))
        prev, first, bit = by_segment
        seg = segment[keep]
        return _Front(memory[keep], cycles[keep], prev[seg], ia[keep] - first[seg],
                      [specs[k] for k in ib[keep].tolist()], bit[seg], j)

    def _front(self, cands: list[tuple], j: int) -> list[_Point]:
        """The survivors of ``cands`` (memory, cycles, start, index, raw spec, prefix bit) as
        _Points, thinned if the options ask."""
        front = [_Point(m, c, start, ia, start, j, spec, bit)
                 for m, c, start, ia, spec, bit in frontier(cands)]
        if self.options.thin_frontier:
            front = [pt for _, _, pt in thin([(p.memory, p.cycles, p) for p in front],
                                             self.options.thin_frontier)]
        return front

    def _sink_on_lists(self, j: int, by_start: dict, variants: list, live: _LiveAt
                       ) -> tuple:
        """The DP step of the sink at ``j`` on Python lists (``pareto.combine``), exact for
        any integers: the definition ``_sink_on_arrays`` follows."""
        def points(front):
            return [(p.memory, p.cycles, k) for k, p in enumerate(front)]
        cands = []
        for start in sorted(by_start):
            plans = [(m + live[start], c, spec) for m, c, spec in by_start[start]]
            for m, c, (ia, ib) in combine(points(self.fronts[start]), plans):
                cands.append((m, c, start, ia, plans[ib][2], 0))
        pre_cands = []
        for v in variants:
            prefix = points(self.prefetch_fronts[j] if v.prefetched else self.fronts[j])
            for pm, pc, (ia, _) in combine(prefix, [(v.memory + live[j], v.cycles, v.raw)]):
                (pre_cands if v.prefetch_next else cands).append(
                    (pm, pc, j, ia, v.raw, int(v.prefetched)))
        return (self._front(cands, j), self._front(pre_cands, j)), None

    @property
    def frontier(self) -> list[tuple[int, int]]:
        """The whole Pareto frontier of Proposals: (memory bytes, cycles), memory ascending."""
        return [(p.memory, p.cycles) for p in self.fronts[-1]]

    def proposal(self, index: int) -> Proposal:
        """Rebuild the frontier Proposal at ``index`` with all its Plans."""
        pts = []
        pt = top = self.fronts[-1][index]
        while pt.spec is not None:
            pts.append(pt)
            fronts = self.prefetch_fronts if pt.prev_state else self.fronts
            pt = fronts[pt.prev][pt.prev_index]
        plans = tuple(self._plan(p) for p in reversed(pts))
        return Proposal(plans, top.memory, top.cycles,
                        stream_bytes(plans, self.graph, self.device))

    def _plan(self, pt: _Point) -> Plan:
        """The Plan of frontier point ``pt``, built once (Plans are immutable)."""
        key = (pt.start, pt.end, pt.spec)
        hit = self._built.get(key)
        if hit is None:
            hit = self._built[key] = self.gen.build(pt.start, pt.end, make_spec(pt.spec))
        return hit

    def select(self, budget: int | None = None) -> Proposal:
        """The fastest Proposal whose peak memory fits ``budget`` (the fastest overall if
        None). Raises PlannerError naming the budget and the smallest reachable memory."""
        front = self.fronts[-1]
        if budget is None:
            return self.proposal(len(front) - 1)
        if budget < 0:
            raise PlannerError(f"budget must be >= 0 bytes, got {budget}")
        fits = [k for k, p in enumerate(front) if p.memory <= budget]
        if not fits:
            raise PlannerError(
                f"no schedule fits the memory budget of {budget} bytes; the smallest any "
                f"Proposal needs is {front[0].memory} bytes")
        return self.proposal(fits[-1])


def _ints(values) -> np.ndarray:
    """``values`` as an int64 array; OverflowError for anything but integers within
    ``INT64_SAFE`` (a float, a huge integer), so that the caller takes the list path."""
    if len(values) == 0:
        return np.zeros(0, np.int64)
    array = np.array(values)
    _check_safe(array)
    return array


def _check_safe(array: np.ndarray) -> None:
    """OverflowError unless ``array`` holds int64 values within ``INT64_SAFE``: sums of two
    such values are exact."""
    if array.dtype != np.int64:
        raise OverflowError(f"values of type {array.dtype} are not int64")
    if len(array) and (array.max() >= INT64_SAFE or array.min() <= -INT64_SAFE):
        raise OverflowError("a memory or cycle count past INT64_SAFE")


def _stacked(columns: list[tuple[np.ndarray, np.ndarray]]) -> tuple:
    """Fronts' (memory, cycles) columns end to end: (memory, cycles, lengths, first index
    of each)."""
    lengths = [len(memory) for memory, _ in columns]
    first = np.cumsum([0] + lengths, dtype=np.int64)[:-1]
    if not columns:
        return _ints([]), _ints([]), lengths, first
    return (np.concatenate([m for m, _ in columns]), np.concatenate([c for _, c in columns]),
            lengths, first)


@dataclass(frozen=True)
class _LiveAt:
    """Bytes of boundary tensors live while a Plan from ``start`` to the sink runs: those
    live at its start and the sink's own output (``live_boundary_bytes``); ``alone``: the
    sink's own output when the Plan is the sink alone (none for a reshape that aliases its
    input, ``aliases``)."""
    base: list[int]
    own: int
    sink: int = -1
    alone: int = 0

    def __getitem__(self, start: int) -> int:
        return self.base[start] + (self.alone if start == self.sink else self.own)
