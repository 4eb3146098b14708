"""The interval frontiers of every sink (``PlanGenerator.interval_frontiers``), in sink
order, on one process or several.

With several (forked: children inherit the graph and caches copy-on-write), the work runs in
two phases, so that no process costs what another has: first the costs, found by a walk that
costs nothing (``PlanGenerator.cost_requests``) and computed by forked children while this
process finds them (``warm_costs``); then the walks, over sinks shared out in contiguous runs
(``SinkClaims``), by children forked with every cost in their cache, each result sent to
this process as soon as it is walked. One process costs ahead as well (the performance model
then costs each Part's stripes in batches). Each sink's result depends on that sink alone,
so the results are the same whatever the worker count.
"""
from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import queue
import threading
import time

from planner.errors import PlannerError
from planner.forked import Forked
from planner.plans import PlanGenerator, frontiers_from_wire, frontiers_to_wire
from planner.progress import refresher_threads

#: When a list, a search on several processes appends (event, time.perf_counter()) to it at
#: the end of each of its phases, as this process sees them (benchmarks/planner_speed.py
#: prints them): "requests found", "costs in", "own walks done" (this process found no sink
#: left to walk), "all walks in" (every sink's result is here).
TIMELINE: list | None = None


def _mark(event: str) -> None:
    if TIMELINE is not None:
        TIMELINE.append((event, time.perf_counter()))


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


#: A second process pays only with a core to run on: the 1-minute load average must leave at
#: least this much of one idle (``usable CPUs - load``): on busy cores two processes are
#: slower than one (rfcs/0001).
IDLE_CORE_NEEDED = 0.5


def _idle_cores() -> float:
    try:
        return _usable_cpus() - os.getloadavg()[0]
    except (AttributeError, OSError):     # no load average here: assume the cores are free
        return float(_usable_cpus())


def second_process_pays() -> bool:
    """Whether forking a second process for some work can pay and is safe: fork is
    available, two CPUs are usable and a core is idle (IDLE_CORE_NEEDED), this is the main
    process (a pool's worker already shares the cores out) and runs no other thread (a fork
    copies only the forking thread, and whatever lock another one holds stays held in the
    child: a notebook kernel, an inference thread pool; rfcs/0004 spawns for the same
    reason) but progress bars' refreshers, which stop while it forks
    (``progress.paused_for_fork``). The stream generation's weight encoding asks it
    (``tvm_ethos.backends.ethos_u.encode_ahead``); the plan search runs on one process unless
    its caller asks for more (``ProposalSearch(workers=...)``)."""
    return _usable_cpus() >= 2 and multiprocessing.parent_process() is None and \
        threading.active_count() - refresher_threads() <= 1 and \
        "fork" in multiprocessing.get_all_start_methods() and \
        _idle_cores() >= IDLE_CORE_NEEDED


class SinkClaims:
    """Which sinks are left, shared by the processes of one search: the sinks are cut into one
    contiguous run per process, each process takes its own run front to back, and one whose
    run is done takes from the run with most left: worker 0 (the parent, which runs the DP
    in sink order) from its front, the sinks the DP needs next, the others from its back.
    Each process so walks a contiguous stretch of the graph, where neighbouring sinks share
    the memoised extensions it builds, while the finishing times even out whatever the
    sinks cost, and the DP is not left with a stretch of sinks to do after the walks."""

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
            if worker == 0:
                b[2 * most] += 1
                return b[2 * most] - 1
            b[2 * most + 1] -= 1
            return b[2 * most + 1] + 1


def _walk_claimed(gen: PlanGenerator, claims: SinkClaims, worker: int, outbox) -> None:
    """A forked worker's share: sends (sink, result) for each sink it takes as soon as it
    is walked (plain tuples and the shared spec objects), so that the parent's in-order DP
    can use it while the walks go on."""
    while (j := claims.take(worker)) is not None:
        count, by_start = _sink_frontiers(gen, j)
        outbox.send((j, count, frontiers_to_wire(by_start)))


def _read_streams(streams: list, arrivals: queue.SimpleQueue) -> None:
    """Move what the walk workers send into ``arrivals`` as it comes (a thread of the
    parent: a worker whose result is larger than the pipe's buffer would otherwise wait for
    the parent to finish its own walk); then None, once every worker has ended."""
    live = list(streams)
    try:
        while live:
            for conn in multiprocessing.connection.wait(live):
                try:
                    arrivals.put(conn.recv())
                except EOFError:
                    live.remove(conn)
    except (OSError, ValueError):    # closed under it: the search ended early (an error)
        pass
    arrivals.put(None)


def _cost_fed(gen: PlanGenerator, inbox) -> list[tuple]:
    """A forked costing worker: cost the (position, stripe) batches it is sent until None,
    and return the values in the order received. A thread keeps reading the inbox meanwhile:
    a batch larger than the pipe's buffer would otherwise stall the sender until this worker
    had costed the batch before (rfcs/0001, performance notes)."""
    batches: queue.SimpleQueue = queue.SimpleQueue()

    def read() -> None:
        while True:
            batch = inbox.recv()
            batches.put(batch)
            if batch is None:
                return

    threading.Thread(target=read, daemon=True).start()
    out = []
    done = False
    while not done:
        # Every batch already here is costed together: the model batches its work per Part.
        todo = [batches.get()]
        while not batches.empty():
            todo.append(batches.get())
        if None in todo:
            todo, done = todo[:todo.index(None)], True
        out.extend(gen.warm_costs([(gen.topo[i], stripe) for b in todo for i, stripe in b]))
    return out


#: This process also finds the requests (the cost-free walk, about half as long as the
#: costing), so it takes a new signature as if its load were this much higher: with two
#: processes it costs about a third, and both finish costing together (the factors tried
#: and their timings: rfcs/0001, performance notes).
PARENT_LOAD_FACTOR = 2


def warm_costs(gen: PlanGenerator, workers: int) -> None:
    """Cost everything the walks will ask for (``PlanGenerator.cost_requests``) over
    ``workers`` processes, so that the walks, forked afterwards, inherit one warm cost cache
    and no process costs what another has costed. This process finds the requests sink by
    sink and streams them to forked children as it goes; each Part signature has one owner
    (its stripes share shapes, and a shape's lowering and block search are the bulk of the
    work), chosen when first met as the least loaded process (load: requests, plus stripe
    shapes new to the signature)."""
    if workers <= 1:
        _warm_costs_here(gen)
        return
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
                # (A stripe's own shape stands for its edge stripes' too: counting those
                # would cost this process more than the balance gains.)
                known = shapes.setdefault(sig, set())
                load[w] += 1 + (stripe.shape not in known)
                known.add(stripe.shape)
                batch[w].append((p, stripe))
            for w in range(1, workers):
                if batch[w]:
                    forked.send(feeds[w - 1], [(gen.position[p.name], s) for p, s in batch[w]])
            for w in range(workers):
                share[w].extend(batch[w])
        _mark("requests found")
        for feed in feeds:
            forked.send(feed, None)
        gen.warm_costs(share[0])
        for w, values in enumerate(forked.results(), 1):
            for (p, stripe), value in zip(share[w], values):
                gen.adopt_cost(p, stripe, value)


def distinct_cost_requests(gen: PlanGenerator) -> list:
    """Every distinct (Part, stripe) cost request of the walks, in the order they make them."""
    seen: set = set()
    todo = []
    for j in range(len(gen.topo)):
        for p, stripe in gen.cost_requests(j):
            key = gen.cost_key(p, stripe)
            if key not in seen:
                seen.add(key)
                todo.append((p, stripe))
    return todo


def _warm_costs_here(gen: PlanGenerator) -> None:
    """``warm_costs`` on this process alone: every distinct request costed in one batch (no
    owners or loads to keep)."""
    todo = distinct_cost_requests(gen)
    _mark("requests found")
    gen.warm_costs(todo)


def interval_frontiers(gen: PlanGenerator, workers: int, bound_of=None):
    """(count, {start: plan frontier}) per sink, in sink order, whatever the worker count:
    every sink's result depends on that sink alone, so the results, and the Proposals, are
    the same with one process or several. With several, the costs are computed first
    (``warm_costs``), then forked children walk sinks beside this process (see
    SinkClaims) and send each sink's result as soon as it is walked; this process yields
    every result, its own or a child's, as soon as it is next in order, so the caller's DP
    overlaps the walks (with the children's results sent at their end, the DP of their
    sinks, the back of the graph, would all come after the walks).

    ``bound_of(j)`` (one process only): the ``walk_bound.SinkBound`` of sink ``j``'s walk,
    asked for when that walk starts, after the caller's DP has taken every earlier sink."""
    n = len(gen.topo)
    workers = min(workers, n)
    if workers <= 1:
        # Costed up front too (the requests' walk is memoised for the walks): the model
        # then costs each Part's stripes in batches, not one at a time.
        warm_costs(gen, 1)
        for j in range(n):
            yield gen.interval_frontiers(j, bound_of(j)) if bound_of is not None \
                else _sink_frontiers(gen, j)
        return
    warm_costs(gen, workers)
    _mark("costs in")
    reader: threading.Thread | None = None
    try:
        with Forked() as forked:
            claims = SinkClaims(forked.ctx, n, workers)
            streams = [forked.start_streamed(_walk_claimed, gen, claims, w)
                       for w in range(1, workers)]
            arrivals: queue.SimpleQueue = queue.SimpleQueue()
            reader = threading.Thread(target=_read_streams, args=(streams, arrivals),
                                      daemon=True)
            reader.start()
            done: dict[int, tuple] = {}
            following = 0
            ended = all_in = False
            own = True
            while following < n:
                j = claims.take(0) if own else None
                if j is not None:
                    done[j] = _sink_frontiers(gen, j)
                elif own:
                    own = False
                    _mark("own walks done")
                while not ended and (j is None and following not in done or
                                     not arrivals.empty()):
                    item = arrivals.get()
                    if item is None:
                        ended = True
                    else:
                        j_sent, count, wire = item
                        done[j_sent] = count, frontiers_from_wire(wire)
                if ended and j is None and following not in done:
                    forked.results()      # raises the error of the worker that did not send
                    raise PlannerError(f"a planner worker ended without walking sink "
                                       f"{following}")
                if following + len(done) == n and not all_in:     # nothing left to walk
                    all_in = True
                    if own:
                        own = False
                        _mark("own walks done")
                    _mark("all walks in")
                while following in done:
                    yield done.pop(following)
                    following += 1
            forked.results()
    finally:
        # The reader ends when the children have (done, or terminated on an error): no
        # thread of the search outlives it (a fork is safe only from one thread).
        if reader is not None:
            reader.join()
