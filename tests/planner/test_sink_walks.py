"""Sink walks on several forked processes: the same results as one, errors and deaths of
children named in the parent, one process where forking cannot pay."""
import multiprocessing
import os
import re
import threading
from dataclasses import replace
from typing import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.errors import PlannerError
from planner.options import PlannerOptions
from planner.plans import PlanGenerator
from planner.proposals import ProposalSearch
from tests.helpers.fresh_process import in_fresh_process
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs

SMALL = PlannerOptions(stripe_factors=3, max_width_tiles=2, rolling_granules=(1, 0),
                       weight_placements=("flash", "sram"))


def _everything(search):
    return (search.frontier, search.plan_candidates,
            [search.proposal(k).to_json() for k in range(len(search.frontier))])


# The tests that make the search fork (workers=2 or more) run it in a fresh process
# (tests/helpers/fresh_process.py): forking is safe only from a process without other threads.

def _one_and_many(workers: int) -> tuple:
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 4)
    one = ProposalSearch(g, simple_device("dram"), SMALL, workers=1)
    many = ProposalSearch(g, simple_device("dram"), SMALL, workers=workers)
    return _everything(one), _everything(many)


@pytest.mark.parametrize("workers", [2, 3])
def test_forked_workers_give_the_one_process_result(workers):
    """Children walk contiguous runs of sinks and take from each other's runs when done; the
    merged result (frontier, every Proposal, candidate count) is the one-process result."""
    one, many = in_fresh_process(_one_and_many, workers)
    assert many == one


def _what_remains(search: Callable[[], object]) -> tuple[str | None, int, int]:
    """The error ``search()`` raised (type: message, or None), and the threads and child
    processes it left behind."""
    threads = threading.active_count()
    try:
        search()
        error = None
    except Exception as e:    # noqa: BLE001 - handed to the test, which names what it wants
        error = f"{type(e).__name__}: {e}"
    return error, threading.active_count() - threads, len(multiprocessing.active_children())


def _failing_walk() -> tuple[str | None, int, int]:
    from planner import sink_walks
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 2)
    half = len(g.parts) // 2
    real = sink_walks._sink_frontiers

    def failing(gen, j):       # every sink of the child's run fails, whoever takes it
        if j >= half:
            raise PlannerError(f"sink {j} failed on purpose")
        return real(gen, j)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(sink_walks, "_sink_frontiers", failing)
        return _what_remains(lambda: ProposalSearch(g, simple_device(), SMALL, workers=2))


def test_a_failing_walk_worker_raises_its_error_in_the_parent():
    error, threads_left, children_left = in_fresh_process(_failing_walk)
    assert error is not None and re.fullmatch(r"PlannerError: sink \d+ failed on purpose", error)
    assert threads_left == 0        # the results' reader is gone too
    assert children_left == 0


def _failing_and_dying_costing() -> list[str | None]:
    from planner import sink_walks
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 2)

    def failing(gen, inbox):   # only forked costing children run this
        raise ValueError("costing failed on purpose")

    errors = []
    for costing in (failing, lambda gen, inbox: os._exit(3)):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(sink_walks, "_cost_fed", costing)
            errors.append(_what_remains(
                lambda: ProposalSearch(g, simple_device(), SMALL, workers=2))[0])
    return errors


def test_a_costing_worker_that_fails_or_dies_is_named_in_the_parent():
    failed, died = in_fresh_process(_failing_and_dying_costing)
    assert failed == "ValueError: costing failed on purpose"
    assert died is not None and re.fullmatch(r"PlannerError: .*died without a result.*workers=1",
                                             died)


def _streamed_walks() -> tuple:
    from planner import sink_walks
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 4)
    sent = []
    real = sink_walks._read_streams

    def counting(streams, arrivals):       # the parent's reader thread
        class Seen:
            def put(self, item):
                sent.append(item if item is None else item[0])
                arrivals.put(item)
        real(streams, Seen())

    searches = []
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sink_walks, "_read_streams", counting)
        left = _what_remains(lambda: searches.append(
            ProposalSearch(g, simple_device("dram"), SMALL, workers=2)))
    one = ProposalSearch(g, simple_device("dram"), SMALL, workers=1)
    return sent, left, _everything(searches[0]) if searches else None, _everything(one)


def test_walk_workers_stream_sinks_and_leave_no_thread_or_child():
    """A walk worker sends each sink as soon as it is walked (the parent reads them on a
    thread), not all at the end; when the search ends, that thread and the children are
    gone, so the next search may fork again (a fork wants a single thread)."""
    sent, (error, threads_left, children_left), many, one = in_fresh_process(_streamed_walks)
    assert error is None
    assert sent and sent[-1] is None and len(set(sent[:-1])) == len(sent) - 1 > 1
    assert threads_left == 0 and children_left == 0
    assert many == one


def test_a_second_process_is_forked_only_onto_an_idle_core_from_one_thread(monkeypatch):
    from planner import sink_walks
    from planner.sink_walks import second_process_pays
    monkeypatch.setattr(sink_walks, "_usable_cpus", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.9, 0.0, 0.0))
    # threads already running (tests that ran before in this process may leave some: dask's
    # offload thread) do not count: only the thread this test starts does
    runner, count = threading.active_count() - 1, threading.active_count
    monkeypatch.setattr(threading, "active_count", lambda: count() - runner)
    assert second_process_pays()
    monkeypatch.setattr(os, "getloadavg", lambda: (1.6, 0.0, 0.0))      # cores busy
    assert not second_process_pays()
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not second_process_pays()                                 # not forked
    finally:
        stop.set()
        other.join()
    assert second_process_pays()
    # idle, but a pool's worker (not forked here: a fork of a process with other threads, as a
    # pytest-xdist worker is, can deadlock on a lock one of them held)
    with monkeypatch.context() as m:
        m.setattr(multiprocessing, "parent_process", lambda: object())
        assert not second_process_pays()
    monkeypatch.setattr(sink_walks, "_usable_cpus", lambda: 1)
    assert not second_process_pays()


def test_the_search_runs_on_one_process_unless_asked(monkeypatch):
    """The bound prunes only one process's walks, and saves about what a second process
    would: the default is one process, even with an idle core; ``workers`` asks for more."""
    from planner import sink_walks
    from tests.helpers.mobilenet import mobilenet_v1
    monkeypatch.setattr(sink_walks, "second_process_pays", lambda: True)
    g = mobilenet_v1(96, 0.25, 4)
    assert ProposalSearch(g, simple_device("dram"), SMALL).workers == 1
    assert ProposalSearch(g, simple_device("dram"), SMALL, workers=2).workers == 2


@pytest.mark.parametrize("workers", [0, -1, 1.5, "2", True])
def test_bad_worker_counts_are_named(workers):
    from tests.helpers.mobilenet import mobilenet_v1
    with pytest.raises(PlannerError, match=r"workers must be an integer >= 1.*got"):
        ProposalSearch(mobilenet_v1(96, 0.25, 2), simple_device(), SMALL, workers=workers)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(1, 4), st.lists(st.integers(0, 3), max_size=200))
def test_sink_claims_hand_out_every_sink_once(sinks, workers, turns):
    """Whatever order the processes ask in, every sink is taken exactly once, a process
    takes its own contiguous run front to back before taking from others, worker 0 (the
    parent, whose DP goes in sink order) others' sinks in ascending order, the rest in
    descending order."""
    from planner.sink_walks import SinkClaims
    claims = SinkClaims(multiprocessing.get_context("fork"), sinks, workers)
    cuts = [sinks * w // workers for w in range(workers + 1)]
    taken: list[int] = []
    by_worker: dict[int, list[int]] = {w: [] for w in range(workers)}
    order = [t % workers for t in turns] + list(range(workers)) * (sinks + 1)
    for w in order:
        j = claims.take(w)
        if j is not None:
            taken.append(j)
            by_worker[w].append(j)
    assert sorted(taken) == list(range(sinks))
    for w, js in by_worker.items():
        own = [j for j in js if cuts[w] <= j < cuts[w + 1]]
        first_foreign = next((k for k, j in enumerate(js) if not cuts[w] <= j < cuts[w + 1]),
                             len(js))
        assert len(own) == first_foreign       # own run first, then others'
        assert own == list(range(cuts[w], cuts[w] + len(own))) or w != 0 and own == sorted(own)
        foreign = js[first_foreign:]
        for run in range(workers):             # per run taken from: its front or its back
            theirs = [j for j in foreign if cuts[run] <= j < cuts[run + 1]]
            assert theirs == sorted(theirs, reverse=w != 0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=7), st.sampled_from(["sram", "dram"]))
def test_cost_requests_are_all_the_walk_costs(g, io_region):
    """After costing what ``cost_requests`` lists (here in another generator, handed over
    with ``adopt_cost``, as a forked child does), the walks cost nothing more, and give what a
    cold generator gives."""
    device = simple_device(io_region)
    cold = PlanGenerator(g, device, SMALL)
    costing = PlanGenerator(g, device, SMALL)
    warm = PlanGenerator(g, device, SMALL)
    for j in range(len(warm.topo)):
        for p, stripe in warm.cost_requests(j):
            warm.adopt_cost(p, stripe, costing.warm_cost(p, stripe))
    asked = []

    class Unasked:      # the performance model, recording every question but the micro block
        def __getattr__(self, name):
            if name != "micro_block":
                asked.append(name)
            return getattr(device.perf, name)

    warm.device = replace(device, perf=Unasked())
    for j in range(len(warm.topo)):
        assert warm.interval_frontiers(j) == cold.interval_frontiers(j)
    assert asked == []


def test_one_process_costs_window_parts_in_batches(monkeypatch):
    """With one process too, the search costs ahead (``warm_costs``): every stripe of a
    convolution or depthwise Part is summarised by the batched path, none one at a time, and
    the result is a cold search's where each stripe is summarised alone."""
    from planner import devices
    from planner.perf.ethos_u import EthosUPerfModel
    from planner.plans import clear_caches
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 2)
    alone = []
    real = EthosUPerfModel._summarise

    def recording(self, part, shape):
        alone.append(part.kind)
        return real(self, part, shape)

    monkeypatch.setattr(EthosUPerfModel, "_summarise", recording)
    clear_caches()
    devices.clear_caches()
    batched = ProposalSearch(g, devices.get_device("ethos-u55-128"), SMALL, workers=1)
    assert not {"conv2d", "depthwise_conv2d"} & set(alone)
    monkeypatch.setattr(EthosUPerfModel, "summarise_stripes", lambda self, part, shapes: None)
    devices.clear_caches()
    unbatched = ProposalSearch(g, devices.get_device("ethos-u55-128"), SMALL, workers=1)
    assert {"conv2d", "depthwise_conv2d"} <= set(alone)
    assert _everything(batched) == _everything(unbatched)
