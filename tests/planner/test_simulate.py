"""The stripe-by-stripe simulator agrees with the planner, and catches broken schedules."""
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings

from planner.options import PlannerOptions
from planner.proposals import Proposal, ProposalSearch
from planner.simulate import SimulationError, simulate
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=7))
def test_simulated_peak_equals_planned_memory(g):
    for io in ("sram", "dram"):
        device = simple_device(io_region=io)
        search = ProposalSearch(g, device, PlannerOptions(stripe_factors=4))
        for k in range(len(search.frontier)):
            prop = search.proposal(k)
            sim = simulate(g, device, prop)
            assert list(sim.plan_bytes) == [p.memory_bytes for p in prop.plans]
            assert sim.peak_bytes == prop.memory_bytes


def test_mobilenet_frontier_simulates_exactly():
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(224)
    device = simple_device()
    search = ProposalSearch(g, device)
    for k in (0, len(search.frontier) // 2, len(search.frontier) - 1):
        prop = search.proposal(k)
        assert simulate(g, device, prop).peak_bytes == prop.memory_bytes


def _search():
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(64, 0.25, 4)
    return g, ProposalSearch(g, simple_device())


def test_missing_part_is_caught():
    g, s = _search()
    prop = s.proposal(0)
    broken = Proposal(prop.plans[1:], prop.memory_bytes, prop.cycles)
    with pytest.raises(SimulationError, match="not covered"):
        simulate(g, simple_device(), broken)


def test_out_of_order_plans_are_caught():
    g, s = _search()
    prop = s.proposal(len(s.frontier) - 1)
    assert len(prop.plans) > 1
    broken = Proposal(tuple(reversed(prop.plans)), prop.memory_bytes, prop.cycles)
    with pytest.raises(SimulationError, match="before it is produced"):
        simulate(g, simple_device(), broken)


def test_a_producer_that_stops_short_is_caught():
    g, s = _search()
    prop = s.proposal(0)
    plan = next(p for p in prop.plans if len(p.parts) > 1 and p.spec.mode == "rolling")
    k = prop.plans.index(plan)
    first = plan.part_schedules[0]
    axis = max(range(len(first.stripe.order)), key=lambda a: first.stripe.order[a])
    stripes = list(first.stripe.stripes)
    stripes[axis] -= 1
    short = dataclasses.replace(first, stripe=dataclasses.replace(first.stripe,
                                                                  stripes=tuple(stripes)))
    bad = dataclasses.replace(plan, part_schedules=(short,) + plan.part_schedules[1:])
    broken = Proposal(prop.plans[:k] + (bad,) + prop.plans[k + 1:], 0, 0)
    with pytest.raises(SimulationError):
        simulate(g, simple_device(), broken)
