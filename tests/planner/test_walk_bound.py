"""Bounded walks (planner.walk_bound): the same frontiers, Proposals and choices as the
unbounded walks, with fewer points walked."""
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import plans, walk_bound
from planner.errors import PlannerError
from planner.options import PlannerOptions
from planner.pareto import INT64_SAFE
from planner.point_sets import PointSet
from planner.proposals import ProposalSearch
from planner.walk_bound import SinkBound
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs

SMALL = PlannerOptions(stripe_factors=3, max_width_tiles=2, rolling_granules=(1, 0),
                       weight_placements=("flash", "sram"))


def _everything(search: ProposalSearch) -> tuple:
    """Every prefix's frontier (its _Points: memory, cycles, back pointers, spec, bit), the
    count, every frontier Proposal in full, and the choice at each frontier memory."""
    budgets = [None] + [m for m, _ in search.frontier] + [search.frontier[0][0] - 1]
    choices = []
    for budget in budgets:
        try:
            choices.append(search.select(budget).to_json())
        except Exception as err:        # the same error for a budget nothing fits
            choices.append(str(err))
    return ([list(f) for f in search.fronts], [list(f) for f in search.prefetch_fronts],
            search.plan_candidates,
            [search.proposal(k).to_json() for k in range(len(search.frontier))], choices)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=10, min_parts=5), st.sampled_from(["sram", "dram"]), st.integers(2, 16),
       st.booleans(), st.sampled_from([None, 2]), st.sampled_from([("flash", "sram"),
                                                                   ("flash",)]),
       st.sampled_from([1, walk_bound.TRIM_MIN]))
def test_bounded_walks_give_the_unbounded_results(g, io_region, max_plan_size, prefetch,
                                                  thinned, placements, trim_min):
    """Over random graphs, devices and options: every prefix's frontier, plain and
    prefetching, with its tie-breaks, every frontier Proposal and every budget's choice are
    the same whether the walks are bounded or not, groups trimmed point by point or not.
    (Graphs of 5 Parts or more: on most of them the bound stops some walk.)"""
    device = simple_device(io_region)
    if prefetch:
        device = dataclasses.replace(device, weight_prefetch=True)
    options = dataclasses.replace(SMALL, max_plan_size=max_plan_size, thin_frontier=thinned,
                                  weight_prefetch=prefetch, weight_placements=placements)
    shipped = walk_bound.TRIM_MIN
    walk_bound.TRIM_MIN = trim_min          # 1: every group trimmed point by point
    try:
        bounded = ProposalSearch(g, device, options, workers=1)
    finally:
        walk_bound.TRIM_MIN = shipped
    unbounded = ProposalSearch(g, device, options, workers=1, prune=False)
    assert _everything(bounded) == _everything(unbounded)


def _walked(monkeypatch, g, prune: bool) -> int:
    """Points the walks of a one-process search made (their interval frontiers' count)."""
    made = []
    real = plans.PlanGenerator.interval_frontiers

    def counted(self, end, bound=None):
        count, by_start = real(self, end, bound)
        made.append(count)
        return count, by_start

    monkeypatch.setattr(plans.PlanGenerator, "interval_frontiers", counted)
    ProposalSearch(g, simple_device("dram"), SMALL, workers=1, prune=prune)
    return sum(made)


def test_the_bound_stops_walks_on_a_network(monkeypatch):
    """On a MobileNetV1 the bounded walks make under half the points (the same results:
    the test above)."""
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 4)
    bounded, unbounded = _walked(monkeypatch, g, True), _walked(monkeypatch, g, False)
    assert bounded < unbounded / 2


def _bound(live=(0, 0, 0), prefix=((0,), (0,)), floors=(0, 0, 0)) -> SinkBound:
    """A sink at 2 whose walks may reach start 0, every prefix front ``prefix``."""
    memory, cycles = (np.array(x, np.int64) for x in prefix)
    return SinkBound(0, 2, [memory] * 3, [cycles] * 3, list(live), list(floors))


def test_a_group_ends_only_when_a_found_candidate_is_strictly_better():
    bound = _bound(live=(5, 7, 9), prefix=((0, 50), (100, 10)))
    # found at start 2: 20 + 9 live bytes, paired with the fastest prefix that fits (0
    # bytes, 100 cycles): the candidate (29, 130)
    bound.found(2, [20], [30])
    # a group at start 2 extends to starts 0 and 1: at least 5 live bytes there, and a
    # prefix of at least 10 cycles, so its descendants need at least (m + 5, c + 10)
    assert bound.ends(2, 40, 200)          # (45, 210): beaten by (29, 130)
    assert bound.ends(2, 24, 121)          # (29, 131): beaten by one cycle
    assert not bound.ends(2, 24, 120)      # (29, 130): a tie is kept
    assert not bound.ends(2, 23, 1000)     # (28, 1010): nothing found that small
    assert not bound.ends(0, 1000, 1000)   # start 0: no descendants to bound


def test_the_parts_still_to_extend_over_add_their_floors():
    bound = _bound(prefix=((0,), (100,)), floors=(7, 30, 0))
    bound.found(2, [10], [50])             # the candidate (10, 150)
    # from start 2 a descendant starts at 1 (the Part at 1: 30 cycles or more) or at 0
    # (both Parts: 37 or more), after a prefix of 100 cycles: at least c + 130
    assert bound.ends(2, 10, 21)           # 151 > 150
    assert not bound.ends(2, 10, 20)       # 150: a tie
    # from start 1 a descendant starts at 0 only: at least c + 107
    assert bound.ends(1, 10, 44) and not bound.ends(1, 10, 43)
    with pytest.raises(PlannerError, match="below what the bounded walk assumes"):
        bound.check(1, [(0, 30, ()), (5, 29, ("p1",))])
    with pytest.raises(PlannerError, match="-1 bytes"):
        bound.check(0, [(-1, 7, ())])
    bound.check(1, [(0, 30, ())])


def test_a_group_is_trimmed_of_the_points_whose_futures_are_beaten(monkeypatch):
    monkeypatch.setattr(walk_bound, "TRIM_MIN", 1)
    bound = _bound(live=(3, 3, 0), prefix=((0,), (100,)))
    bound.found(2, [10], [50])             # the candidate (10, 150)
    # a group at start 2 with 2 staging bytes: its descendants need (m + 5, c + 100)
    small = PointSet([1, 3, 4, 9], [60, 55, 49, 30], ["a", "b", "c", "d"])
    # (6, 160), (8, 155), (9, 149): nothing found that small; (14, 130): faster than found
    assert bound.trimmed(2, 2, small) == small
    points = PointSet([5, 6, 9], [55, 51, 50], ["b", "c", "d"])
    # (10, 155) and (11, 151) are beaten by (10, 150); (14, 150) is a tie, kept
    assert bound.trimmed(2, 2, points) == PointSet([9], [50], ["d"])
    assert bound.trimmed(0, 2, points) == points       # start 0: nothing to bound
    assert bound.trimmed(2, 2, PointSet([5], [51], ["e"])) == PointSet([], [], [])


def test_values_past_the_safe_range_switch_the_bound_off():
    bound = _bound()
    bound.found(2, [INT64_SAFE], [1])
    bound.found(2, [1], [1])
    assert not bound.ends(2, 10 ** 6, 10 ** 6)
