"""Proposals: disjoint Plans covering every Part, combined by dynamic programming.

Parts run in the graph's (deterministic) topological order and a Plan covers a contiguous
interval of it. Then the tensors live while a Plan runs depend only on its interval: those
produced before it and read at or after its start, its own output, and the network outputs
already made. So a Proposal's peak memory is the max over its Plans of (Plan buffers + live
boundary tensors) and its cycles the sum, both monotone: culling dominated partial Proposals
at every prefix of the order loses nothing, and the frontier is exact.
"""
from __future__ import annotations

import multiprocessing
import os
from dataclasses import dataclass

from planner.device import Device
from planner.errors import PlannerError
from planner.forked import Forked
from planner.graph import PlannerGraph
from planner.options import PlannerOptions
from planner.pareto import combine, frontier, thin
from planner.plans import Plan, PlanGenerator, PlanSpec, make_spec


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


def _sink_frontiers(gen: PlanGenerator, j: int) -> tuple[int, dict[int, list]]:
    """Candidates for every interval ending at ``j``, culled per interval.

    Memory here excludes the live boundary tensors, which are the same for every candidate of
    an interval, so culling before adding them loses nothing.
    """
    return gen.interval_frontiers(j)


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:       # not on Linux
        return os.cpu_count() or 1


#: Below this many Parts a search takes a few tens of milliseconds: forking would cost more
#: than the split saves.
PARALLEL_MIN_PARTS = 16


def _default_workers(parts: int) -> int:
    """Two processes when that can pay: fork is available, two CPUs are usable, this is the
    main process (a pool's worker already shares the cores out) and the graph has at least
    PARALLEL_MIN_PARTS Parts; one otherwise. Measured on MobileNetV1-224 (2 cores): two
    processes each walking a contiguous run of sinks (so their cost caches barely overlap)
    take 0.6x the wall time of one; the same frontier (rfcs/0001)."""
    if parts < PARALLEL_MIN_PARTS or _usable_cpus() < 2 or \
            multiprocessing.parent_process() is not None or \
            "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return 2


class _SinkClaims:
    """Which sinks are left, shared by the processes of one search: the sinks are cut into one
    contiguous run per process, each process takes its own run front to back, and one whose
    run is done takes from the back of the run with most left. Each process so walks a
    contiguous stretch of the graph, and the Parts (and cost-cache entries) it meets are
    mostly its own, while the finishing times even out whatever the sinks cost."""

    def __init__(self, ctx, sinks: int, workers: int) -> None:
        cuts = [sinks * w // workers for w in range(workers + 1)]
        bounds = []
        for w in range(workers):
            bounds += [cuts[w], cuts[w + 1] - 1]      # [first, last] of run w
        self._bounds = ctx.Array("i", bounds)

    def take(self, worker: int) -> int | None:
        """The next sink for ``worker``, or None when every sink is taken."""
        with self._bounds.get_lock():
            b = self._bounds
            if b[2 * worker] <= b[2 * worker + 1]:
                b[2 * worker] += 1
                return b[2 * worker] - 1
            left = [b[2 * w + 1] - b[2 * w] + 1 for w in range(len(b) // 2)]
            most = max(range(len(left)), key=lambda w: (left[w], -w))
            if left[most] <= 0:
                return None
            b[2 * most + 1] -= 1
            return b[2 * most + 1] + 1


def _walk_claimed(gen: PlanGenerator, claims: _SinkClaims, worker: int) -> dict[int, tuple]:
    """A forked worker's share: {sink: result} for the sinks it takes (plain tuples and the
    shared spec objects: pickling them back is a few milliseconds)."""
    done = {}
    while (j := claims.take(worker)) is not None:
        done[j] = _sink_frontiers(gen, j)
    return done


def _cost_fed(gen: PlanGenerator, inbox) -> list[tuple]:
    """A forked costing worker: cost the (position, stripe) batches it is sent until None,
    and return the values in the order received."""
    out = []
    while (batch := inbox.recv()) is not None:
        out.extend(gen.warm_cost(gen.topo[i], stripe) for i, stripe in batch)
    return out


#: The parent finds the cost requests while its children cost them (about a quarter of the
#: work on MobileNetV1-224), so it takes a new signature as if its load were this much higher.
PARENT_LOAD_FACTOR = 2


def _warm_costs(gen: PlanGenerator, workers: int) -> None:
    """Cost everything the walks will ask for (``PlanGenerator.cost_requests``) over
    ``workers`` processes, so that the walks, forked afterwards, inherit one warm cost cache
    and no process costs what another has costed. This process finds the requests sink by
    sink and streams them to forked children as it goes; each Part signature has one owner
    (its stripes share shapes, and a shape's lowering and block search are the bulk of the
    work), chosen when first met as the least loaded process (load: stripe shapes new to the
    signature)."""
    with Forked() as forked:
        feeds = [forked.start_fed(_cost_fed, gen) for _ in range(workers - 1)]
        owner: dict = {}
        shapes: dict = {}
        load = [0] * workers
        seen: set = set()
        share: list[list] = [[] for _ in range(workers)]
        for j in range(len(gen.topo)):
            batch: list[list] = [[] for _ in range(workers)]
            for p, stripe in gen.cost_requests(j):
                key = gen.cost_key(p, stripe)
                if key in seen:
                    continue
                seen.add(key)
                sig = key[0]
                w = owner.get(sig)
                if w is None:
                    w = owner[sig] = min(range(workers), key=lambda k: (
                        load[k] * (PARENT_LOAD_FACTOR if k == 0 else 1), -k))
                known = shapes.setdefault(sig, set())
                new = set(stripe.count_stripes()) - known
                known |= new
                load[w] += 1 + len(new)
                batch[w].append((p, stripe))
            for w in range(1, workers):
                if batch[w]:
                    feeds[w - 1].send([(gen.position[p.name], s) for p, s in batch[w]])
            for w in range(workers):
                share[w].extend(batch[w])
        for feed in feeds:
            feed.send(None)
        for p, stripe in share[0]:
            gen.warm_cost(p, stripe)
        for w, values in enumerate(forked.results(), 1):
            for (p, stripe), value in zip(share[w], values):
                gen.adopt_cost(p, stripe, value)


def _interval_frontiers(gen: PlanGenerator, workers: int):
    """(count, {start: plan frontier}) per sink, in sink order, whatever the worker count:
    every sink's result depends on that sink alone, so the results, and the Proposals, are
    the same with one process or several. With several, the costs are computed first
    (``_warm_costs``), then forked children walk sinks beside this process (see
    _SinkClaims), which yields its own results as soon as they are next in order, so the
    caller's DP overlaps the children's walks."""
    n = len(gen.topo)
    workers = min(workers, n)
    if workers <= 1:
        for j in range(n):
            yield _sink_frontiers(gen, j)
        return
    _warm_costs(gen, workers)
    with Forked() as forked:
        claims = _SinkClaims(forked.ctx, n, workers)
        for w in range(1, workers):
            forked.start(_walk_claimed, gen, claims, w)
        done: dict[int, tuple] = {}
        following = 0
        while (j := claims.take(0)) is not None:
            done[j] = _sink_frontiers(gen, j)
            while following in done:
                yield done.pop(following)
                following += 1
        for payload in forked.results():
            done.update(payload)
        for j in range(following, n):
            yield done.pop(j)


@dataclass(frozen=True)
class _Point:
    memory: int
    cycles: int
    prev: int          # prefix length this point extends
    prev_index: int    # index in that prefix's frontier
    start: int
    end: int
    spec: tuple | None   # raw candidate spec (see plans.make_spec)


class ProposalSearch:
    """Runs the DP and keeps what is needed to rebuild any frontier Proposal."""

    def __init__(self, graph: PlannerGraph, device: Device,
                 options: PlannerOptions | None = None, workers: int | None = None) -> None:
        if not graph.parts:
            raise PlannerError("the graph has no parts to plan")
        self.workers = _default_workers(len(graph.parts)) if workers is None else workers
        self.graph = graph
        self.device = device
        self.options = options or PlannerOptions()
        self.gen = PlanGenerator(graph, device, self.options)
        self.fronts: list[list[_Point]] = []
        self.plan_candidates = 0
        self._run()

    def _run(self) -> None:
        n = len(self.gen.topo)
        base, own = live_boundary_bytes(self.graph, self.device)
        fronts: list[list[_Point]] = [[_Point(0, 0, -1, -1, 0, -1, None)]]
        points = [[(0, 0, 0)]]    # fronts as (memory, cycles, index), what combine takes
        for j, (count, by_start) in enumerate(_interval_frontiers(self.gen, self.workers)):
            self.plan_candidates += count
            cands = []
            for start in sorted(by_start):
                live = base[start] + own[j]
                plans = [(m + live, c, spec) for m, c, spec in by_start[start]]
                for m, c, (ia, ib) in combine(points[start], plans):
                    cands.append((m, c, start, ia, plans[ib][2]))
            # only the survivors become _Points
            front = [_Point(m, c, start, ia, start, j, spec)
                     for m, c, start, ia, spec in frontier(cands)]
            if self.options.thin_frontier:
                front = [pt for _, _, pt in thin([(p.memory, p.cycles, p) for p in front],
                                                 self.options.thin_frontier)]
            fronts.append(front)
            points.append([(p.memory, p.cycles, k) for k, p in enumerate(front)])
        self.fronts = fronts

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
            k, pt = pt.prev, self.fronts[pt.prev][pt.prev_index]
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
