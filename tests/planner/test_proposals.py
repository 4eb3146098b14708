"""The Proposal DP against exhaustive search, budget selection, and determinism."""
import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.errors import PlannerError
from planner.options import PlannerOptions
from planner.pareto import frontier
from planner.plans import PlanGenerator
from planner.proposals import ProposalSearch
from planner.stripes import StripeConfig
from tests.helpers.exhaustive import SMALL, exhaustive
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs

#: cross-Plan weight prefetch is a planner study setting (off by default: the compile path has
#: no form for it)
PREFETCH = PlannerOptions(weight_prefetch=True)


def prefetch_device(io_region="sram"):
    """The test device with cross-Plan weight prefetch on (its weights live in flash)."""
    import dataclasses
    return dataclasses.replace(simple_device(io_region), weight_prefetch=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=5), st.booleans())
def test_dp_frontier_equals_exhaustive_search(g, prefetch):
    """The DP against every segmentation; with cross-Plan weight prefetch, also against every
    consistent chain of prefetch flags: its one bit of state (did the prefix prefetch the
    next Part's weights?) keeps it exact."""
    device = prefetch_device() if prefetch else simple_device()
    search = ProposalSearch(g, device, SMALL)
    assert search.frontier == exhaustive(g, device, SMALL)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=7), st.sampled_from(["sram", "dram"]))
def test_interval_frontiers_are_the_culled_candidates(g, io_region):
    """What the DP reads (each interval's frontier, built inside the walk for survivors only)
    equals culling the full candidate stream per interval: same points, same specs (so the
    same tie-breaks), same candidate count."""
    device = simple_device(io_region)
    gen = PlanGenerator(g, device, SMALL)
    oracle = PlanGenerator(g, device, SMALL)
    for j in range(len(gen.topo)):
        by_start = {}
        for start, mem, cyc, raw in oracle.candidates(j):
            by_start.setdefault(start, []).append((mem, cyc, raw))
        count, fronts = gen.interval_frontiers(j)
        assert count == sum(map(len, by_start.values()))
        assert fronts == {s: frontier(c) for s, c in by_start.items()}


def _search_on_lists_from(limit, *args):
    """A search whose int64 columns refuse values at or past ``limit``: from the first sink
    that meets one the DP goes on with Python lists (``_sink_on_lists``); 0: lists from the
    start, the definition the columns follow."""
    from planner import proposals
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proposals, "INT64_SAFE", limit)
        return ProposalSearch(*args)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=7), st.booleans(), st.sampled_from([None, 2]), st.data())
def test_dp_on_columns_equals_dp_on_lists(g, prefetch, thinned, data):
    """Every prefix's frontier, plain and prefetching, reads as the same _Points (memory,
    cycles, back pointers, spec, bit: so the same tie-breaks) whether the DP runs on int64
    columns, on lists, or switches from the one to the other part way."""
    import dataclasses
    device = prefetch_device() if prefetch else simple_device()
    options = dataclasses.replace(SMALL, thin_frontier=thinned)
    columns = ProposalSearch(g, device, options)
    cycles = sorted({p.cycles for front in columns.fronts for p in front} | {1})
    lists = _search_on_lists_from(data.draw(st.sampled_from([0] + cycles), label="limit"),
                                  g, device, options)
    assert [list(f) for f in lists.fronts] == [list(f) for f in columns.fronts]
    assert [list(f) for f in lists.prefetch_fronts] == \
        [list(f) for f in columns.prefetch_fronts]
    assert lists.plan_candidates == columns.plan_candidates


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=6))
def test_every_proposal_covers_each_part_once_and_fits(g):
    device = simple_device()
    search = ProposalSearch(g, device, SMALL)
    names = sorted(p.name for p in g.parts)
    for k, (mem, cyc) in enumerate(search.frontier):
        prop = search.proposal(k)
        assert sorted(n for pl in prop.plans for n in pl.parts) == names
        assert (prop.memory_bytes, prop.cycles) == (mem, cyc)
        assert sum(pl.cycles for pl in prop.plans) == cyc
    # budget selection: fastest that fits, for budgets at and between frontier points
    front = search.frontier
    for m, c in front:
        for budget in (m, m + 1):
            chosen = search.select(budget)
            assert chosen.memory_bytes <= budget
            assert chosen.cycles == min(cc for mm, cc in front if mm <= budget)
    with pytest.raises(PlannerError) as err:
        search.select(front[0][0] - 1)
    assert str(front[0][0]) in str(err.value) and str(front[0][0] - 1) in str(err.value)
    # a search builds each Plan once and shares it between Proposals: rebuilt in the other
    # order by a fresh search, every Proposal is the same
    fresh = ProposalSearch(g, device, SMALL)
    for k in reversed(range(len(front))):
        assert fresh.proposal(k) == search.proposal(k)


def test_frontier_is_monotone_and_fastest_is_default():
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 2)
    s = ProposalSearch(g, simple_device())
    f = s.frontier
    assert all(a[0] < b[0] and a[1] > b[1] for a, b in zip(f, f[1:]))
    assert (s.select(None).memory_bytes, s.select(None).cycles) == f[-1]


def test_cascading_beats_layer_by_layer():
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 2)
    naive = ProposalSearch(g, simple_device(), PlannerOptions(max_plan_size=1))
    full = ProposalSearch(g, simple_device())
    assert full.frontier[0][0] < naive.frontier[0][0] * 0.75


def test_residual_block_cascades_through_a_branch():
    from planner import parts
    from planner.graph import GraphBuilder
    b = GraphBuilder("res")
    x = b.add(parts.conv2d("stem", b.input("in", (1, 32, 32, 8)), 16, 3, padding=1))
    y = b.add(parts.conv2d("c1", x, 16, 3, padding=1))
    y = b.add(parts.conv2d("c2", y, 16, 3, padding=1))
    out = b.add(parts.elementwise("add", y, x))
    g = b.build([out])
    s = ProposalSearch(g, simple_device())
    smallest = s.proposal(0)
    spans = [pl.parts for pl in smallest.plans]
    assert any({"stem", "c1", "c2", "add"} <= set(p) for p in spans), spans


def test_infeasible_budget_names_budget_and_minimum():
    from tests.helpers.mobilenet import mobilenet_v1
    s = ProposalSearch(mobilenet_v1(96, 0.25, 2), simple_device())
    with pytest.raises(PlannerError, match=r"budget of 100 bytes.*smallest any Proposal needs is "
                       rf"{s.frontier[0][0]} bytes"):
        s.select(100)


@pytest.mark.parametrize("opt", [dict(max_plan_size=0), dict(stripe_factors=0),
                                 dict(rolling_granules=(-1,)), dict(weight_placements=("rom",)),
                                 dict(thin_frontier=1)])
def test_bad_options_are_named(opt):
    key = next(iter(opt))
    with pytest.raises(PlannerError, match=key):
        PlannerOptions(**opt)


def test_thinning_is_off_by_default_and_bounded_when_on():
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 2)
    exact = ProposalSearch(g, simple_device())
    thin = ProposalSearch(g, simple_device(), PlannerOptions(thin_frontier=4))
    assert len(thin.frontier) <= 4 < len(exact.frontier)


def test_json_identical_across_hash_seeds(tmp_path):
    from planner.io import save_graph
    from tests.helpers.mobilenet import mobilenet_v1
    path = tmp_path / "g.json"
    save_graph(mobilenet_v1(64, 0.25, 4), str(path))
    outs = []
    for seed in ("0", "1", "12345"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        r = subprocess.run([sys.executable, "-m", "planner", "plan", str(path), "--device",
                            "ethos-u55-128", "--json"], capture_output=True, text=True,
                           env=env, cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                               os.path.abspath(__file__)))))
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2]
    data = json.loads(outs[0])
    for key in ("peak_memory_bytes", "cycles", "plans", "frontier"):
        assert key in data


# ----- weights prefetched across Plans --------------------------------------------------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=6), st.sampled_from(["sram", "dram"]))
def test_prefetch_plans_rebuild_and_simulate_as_planned(g, io_region):
    """Every frontier Proposal rebuilds with the memory and cycles the DP had; its prefetch
    flags chain; the simulator measures the same buffers, prefetched weights included."""
    from planner.simulate import simulate
    device = prefetch_device(io_region)
    search = ProposalSearch(g, device, SMALL)
    for k, (mem, cyc) in enumerate(search.frontier):
        prop = search.proposal(k)
        assert sum(p.cycles for p in prop.plans) == cyc == prop.cycles
        flags = [p.spec.prefetched for p in prop.plans] + [False]
        assert [p.spec.prefetch_next for p in prop.plans] == flags[1:]
        sim = simulate(g, device, prop)
        assert list(sim.plan_bytes) == [p.memory_bytes for p in prop.plans]
        assert sim.peak_bytes == prop.memory_bytes == mem


def _ds_cnn_block():
    """ds_cnn_kws's first three layers: a 10x4 stride-2 convolution of the 49x10 input to
    25x5x64, a 3x3 depthwise and a 1x1 pointwise convolution, all with ReLU."""
    from planner import parts
    from planner.graph import GraphBuilder
    b = GraphBuilder("ds_cnn_block")
    t = b.input("in", (1, 49, 10, 1))
    t = b.add(parts.conv2d("conv", t, 64, (10, 4), (2, 2), padding=(4, 1, 5, 1),
                           activation="relu"))
    t = b.add(parts.depthwise_conv2d("dw", t, 3, 1, padding=(1, 1, 1, 1), activation="relu"))
    t = b.add(parts.conv2d("pw", t, 64, 1, 1, 1, activation="relu"))
    return b.build([t])


def test_prefetch_credit_by_hand():
    """The credit on ethos-u55-256 (flash: 1 byte/cycle, 64 cycles latency, 128-byte bursts),
    worked out by hand.

    Copies: dw's 576 weight bytes are 5 bursts (640) + 64 latency = 704, its 256 bias bytes
    320: 1,024 cycles; pw's 4,096 + 64 and 256 + 64: 4,480.
    dw streaming its weights costs 5,032 (4,968 NPU + 16 overhead for each of the 4 operations
    its 64 channels run as, one per staged 16-channel weight slice) with the flash busy for
    1,024 of them: idle 4,008, so prefetching pw hides 4,008 of its 4,480. dw with its own
    weights prefetched runs as one operation, 4,984 cycles, and leaves the flash idle all of
    them: all 4,480 are hidden.
    pw with its weights in SRAM costs 3,976 (compute-bound) + its copy 4,480 = 8,456, streamed
    4,496 (the flash read of 4,480 + 16 binds)."""
    from planner.devices import get_device
    g = _ds_cnn_block()
    device = get_device("ethos-u55-256")
    gen = PlanGenerator(g, device, PREFETCH)
    conv, dw, pw = gen.topo
    assert [gen.weight_copy_cycles(p) for p in (dw, pw)] == [1024, 4480]
    # (memory, cycles, credit); memory: the weights held (832 B for dw, 4,352 B for pw) and
    # dw's staging double buffer of 16-channel slices (2 x 832 / 4 = 416 B) when it streams
    assert gen.prefetch_cost(1, False, False) == (416, 5032, 0)
    assert gen.prefetch_cost(1, False, True) == (416 + 4352, 5032 - 4008, 4008)
    assert gen.prefetch_cost(1, True, True) == (832 + 4352, 4984 + 1024 - 4480, 4480)
    assert gen.prefetch_cost(2, True, False) == (4352, 3976 + 4480, 0)
    # layer by layer, fastest: conv prefetches dw's weights (its flash idles for most of its
    # run), dw runs from SRAM and prefetches pw's, pw runs from SRAM with its copy all hidden
    search = ProposalSearch(g, device, PlannerOptions(max_plan_size=1, weight_prefetch=True))
    best = search.select(None)
    assert [(p.spec.prefetched, p.spec.prefetch_next) for p in best.plans] == \
        [(False, True), (True, True), (True, False)]
    conv_cost = gen.part_cost(conv, StripeConfig.whole(conv.output.shape), "flash")
    assert [p.prefetch_credit for p in best.plans] == [1024, 4480, 0]
    assert best.cycles == conv_cost + 4984 + 3976
    plain = conv_cost + 5032 + 4496
    assert plain - best.cycles == 568
    # without the prefetch the fastest layer-by-layer schedule is slower (conv and dw in
    # stripes, every weight streamed: 23,032 cycles), and holds no weights ahead
    import dataclasses
    off = dataclasses.replace(device, weight_prefetch=False)
    alone = ProposalSearch(g, off, PlannerOptions(max_plan_size=1, weight_prefetch=True)
                           ).select(None)
    assert best.cycles == 22929 < alone.cycles == 23032
    assert not any(p.prefetch_credit for p in alone.plans)
    # the same without the option, on the device that can: the planner's default
    default = ProposalSearch(g, device, PlannerOptions(max_plan_size=1)).select(None)
    assert (default.cycles, default.memory_bytes) == (alone.cycles, alone.memory_bytes)


def test_prefetch_is_off_where_the_device_or_options_say_so():
    """No variant without the device's prefetch or the option, nor when weights may not go to
    SRAM."""
    from planner.devices import get_device
    g = _ds_cnn_block()
    device = get_device("ethos-u55-256")
    import dataclasses
    off = dataclasses.replace(device, weight_prefetch=False)
    assert all(not PlanGenerator(g, off, PREFETCH).prefetch_variants(j) for j in range(3))
    assert all(not PlanGenerator(g, device, PlannerOptions()).prefetch_variants(j)
               for j in range(3))                          # off by default
    flash_only = PlannerOptions(weight_placements=("flash",), weight_prefetch=True)
    assert all(not PlanGenerator(g, device, flash_only).prefetch_variants(j) for j in range(3))
    assert PlanGenerator(g, device, PREFETCH).prefetch_variants(1)


def test_the_collector_is_paused_during_a_search_only(monkeypatch):
    import gc

    from planner import proposals
    seen = []
    real = proposals.interval_frontiers

    def watched(gen, workers, bound_of=None):
        seen.append(gc.isenabled())
        if len(seen) == 3:
            raise PlannerError("a search that fails")
        yield from real(gen, workers, bound_of)

    monkeypatch.setattr(proposals, "interval_frontiers", watched)
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 2)
    was = gc.isenabled()
    try:
        gc.enable()
        ProposalSearch(g, simple_device(), SMALL, workers=1)
        assert gc.isenabled()
        gc.disable()                  # a caller's own pause is kept
        ProposalSearch(g, simple_device(), SMALL, workers=1)
        assert not gc.isenabled()
        gc.enable()
        with pytest.raises(PlannerError, match="a search that fails"):
            ProposalSearch(g, simple_device(), SMALL, workers=1)
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()
    assert seen == [False, False, False]


def test_the_search_leaves_its_objects_to_the_oldest_generation():
    """What the search made while the collector was paused is promoted to the oldest
    generation when it resumes, so the next young collection does not rescan it all, unless
    the caller has frozen objects of its own, which stay frozen."""
    import gc

    from tests.helpers.mobilenet import mobilenet_v1
    was = gc.isenabled()
    try:
        gc.enable()
        search = ProposalSearch(mobilenet_v1(96, 0.25, 2), simple_device(), SMALL, workers=1)
        assert any(o is search.fronts for o in gc.get_objects(generation=2))
        assert not any(o is search.fronts for o in gc.get_objects(generation=0))
        # a caller's frozen objects stay frozen: a sentinel frozen before the search is in
        # no collected generation after it (gc.unfreeze would move it to the oldest). Not the
        # freeze count: a frozen object whose last reference goes (an earlier test's memo
        # entry evicted) leaves it, and which are there depends on what ran before
        sentinel = [object()]
        gc.freeze()
        assert not any(o is sentinel for o in gc.get_objects())
        ProposalSearch(mobilenet_v1(96, 0.25, 2), simple_device(), SMALL, workers=1)
        assert gc.get_freeze_count() > 0
        assert not any(o is sentinel for o in gc.get_objects())
    finally:
        gc.unfreeze()
        (gc.enable if was else gc.disable)()
