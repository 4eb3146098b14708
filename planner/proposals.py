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
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass

from planner.device import Device
from planner.errors import PlannerError
from planner.graph import PlannerGraph
from planner.options import PlannerOptions
from planner.pareto import combine, frontier, thin
from planner.plans import Plan, PlanGenerator, PlanSpec, make_spec
from planner.sink_walks import default_workers, interval_frontiers


@dataclass(frozen=True)
class Proposal:
    plans: tuple[Plan, ...]
    memory_bytes: int
    cycles: int

    def to_json(self) -> dict:
        return {"memory_bytes": self.memory_bytes, "cycles": self.cycles,
                "plans": [p.to_json() for p in self.plans]}


def live_boundary_bytes(graph: PlannerGraph, device: Device, size=None
                        ) -> tuple[list[int], list[int]]:
    """(base, own): base[i] = bytes of boundary tensors live when a Plan starts at i,
    own[j] = bytes of the output of the Part at j. Only feature-map-region tensors count.
    ``size(tensor)`` sizes each tensor (default: its bytes; a peer's allocator may round)."""
    size = size or (lambda t: t.bytes)
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
        cons = [pos[q.name] for q in graph.consumers(t)]
        # a network input is in memory when the first Plan starts, read or not
        last = n if t.name in outputs else max(cons, default=max(made, 0))
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


@contextmanager
def _collector_paused():
    """Pause Python's cyclic garbage collector while the search runs (and its forked workers,
    which inherit the pause). The search builds hundreds of thousands of small tuples (the
    candidates' points) that live until it ends; every few hundred allocations the collector
    rescans them, up to a third of the search's CPU on MobileNetV1-224 (rfcs/0001). The search makes
    no reference cycles worth collecting meanwhile; the collector runs again afterwards (if
    it ran before: a caller who paused it keeps it paused)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            # Every object made meanwhile is in the youngest generation, so the collector's
            # next pass would scan all of them (~150k on MobileNetV1: 10-40 ms): promote
            # them to the oldest, scanned only by the rare full collections, as if they had
            # survived the young passes they missed.
            gc.freeze()
            gc.unfreeze()
            gc.enable()


class ProposalSearch:
    """Runs the DP and keeps what is needed to rebuild any frontier Proposal."""

    def __init__(self, graph: PlannerGraph, device: Device,
                 options: PlannerOptions | None = None, workers: int | None = None) -> None:
        if not graph.parts:
            raise PlannerError("the graph has no parts to plan")
        if workers is not None and (type(workers) is not int or workers < 1):
            raise PlannerError(f"workers must be an integer >= 1 (processes for the search), "
                               f"got {workers!r}")
        self.workers = default_workers(len(graph.parts)) if workers is None else workers
        self.graph = graph
        self.device = device
        self.options = options or PlannerOptions()
        self.gen = PlanGenerator(graph, device, self.options)
        self.fronts: list[list[_Point]] = []
        self.prefetch_fronts: list[list[_Point]] = []   # prefixes that prefetched the next
        self.plan_candidates = 0
        with _collector_paused():
            self._run()

    def _run(self) -> None:
        n = len(self.gen.topo)
        base, own = live_boundary_bytes(self.graph, self.device)
        fronts: list[list[_Point]] = [[_Point(0, 0, -1, -1, 0, -1, None)]]
        points = [[(0, 0, 0)]]    # fronts as (memory, cycles, index), what combine takes
        pre_fronts: list[list[_Point]] = [[]]     # the same for prefixes with the bit set
        pre_points: list[list[tuple]] = [[]]
        for j, (count, by_start) in enumerate(interval_frontiers(self.gen, self.workers)):
            self.plan_candidates += count
            cands = []
            for start in sorted(by_start):
                live = base[start] + own[j]
                plans = [(m + live, c, spec) for m, c, spec in by_start[start]]
                for m, c, (ia, ib) in combine(points[start], plans):
                    cands.append((m, c, start, ia, plans[ib][2], 0))
            pre_cands = []
            variants = self.gen.prefetch_variants(j)
            self.plan_candidates += len(variants)
            for pre, nxt, m, c, raw in variants:
                prefix = pre_points[j] if pre else points[j]
                for pm, pc, (ia, _) in combine(prefix, [(m + base[j] + own[j], c, raw)]):
                    (pre_cands if nxt else cands).append((pm, pc, j, ia, raw, int(pre)))
            front = self._front(cands, j)
            pre_front = self._front(pre_cands, j)
            fronts.append(front)
            points.append([(p.memory, p.cycles, k) for k, p in enumerate(front)])
            pre_fronts.append(pre_front)
            pre_points.append([(p.memory, p.cycles, k) for k, p in enumerate(pre_front)])
        self.fronts = fronts
        self.prefetch_fronts = pre_fronts

    def _front(self, cands: list[tuple], j: int) -> list[_Point]:
        """The survivors of ``cands`` (memory, cycles, start, index, raw spec, prefix bit) as
        _Points, thinned if the options ask."""
        front = [_Point(m, c, start, ia, start, j, spec, bit)
                 for m, c, start, ia, spec, bit in frontier(cands)]
        if self.options.thin_frontier:
            front = [pt for _, _, pt in thin([(p.memory, p.cycles, p) for p in front],
                                             self.options.thin_frontier)]
        return front

    @property
    def frontier(self) -> list[tuple[int, int]]:
        """The whole Pareto frontier of Proposals: (memory bytes, cycles), memory ascending."""
        return [(p.memory, p.cycles) for p in self.fronts[-1]]

    def proposal(self, index: int) -> Proposal:
        """Rebuild the frontier Proposal at ``index`` with all its Plans."""
        pts = []
        k, pt = len(self.fronts) - 1, self.fronts[-1][index]
        top = pt
        while pt.spec is not None:
            pts.append(pt)
            fronts = self.prefetch_fronts if pt.prev_state else self.fronts
            k, pt = pt.prev, fronts[pt.prev][pt.prev_index]
        plans = tuple(self.gen.build(p.start, p.end, make_spec(p.spec)) for p in reversed(pts))
        return Proposal(plans, top.memory, top.cycles)

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
