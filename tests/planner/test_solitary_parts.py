"""Parts a device runs only in a Plan of their own (``Device.solitary``, ``Device.cascadable``):
the plan search never cascades them, may still stripe them alone, and its Proposals stay
exact against the stripe-by-stripe simulator; Parts it computes only whole
(``Device.whole_output``, ``Device.computes``) are never striped."""
import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ethos_arch.ops import Op
from planner import parts
from planner.graph import GraphBuilder, Part, part_operator
from planner.options import PlannerOptions
from planner.plans import PlanGenerator
from planner.propagator import Propagator
from planner.proposals import ProposalSearch
from planner.simulate import simulate
from planner.stripes import StripeConfig
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs

_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _kinds(g) -> list:
    return sorted({part_operator(p) for p in g.parts}, key=str)


def _by_name(g) -> dict[str, Part]:
    return {p.name: p for p in g.parts}


@_SETTINGS
@given(st.data())
def test_no_plan_cascades_a_solitary_part_and_the_simulator_agrees(data):
    g = data.draw(graphs(max_parts=7, min_parts=2))
    lonely = data.draw(st.sets(st.sampled_from(_kinds(g)), min_size=1))
    device = dataclasses.replace(simple_device(), solitary=frozenset(lonely))
    search = ProposalSearch(g, device, PlannerOptions(stripe_factors=4))
    by_name = _by_name(g)
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        for plan in prop.plans:
            if len(plan.parts) > 1:
                assert not any(part_operator(by_name[n]) in lonely for n in plan.parts), plan
        sim = simulate(g, device, prop)
        assert list(sim.plan_bytes) == [p.memory_bytes for p in prop.plans]
        assert sim.peak_bytes == prop.memory_bytes
        assert prop.cycles == sum(p.cycles for p in prop.plans)


@_SETTINGS
@given(graphs(max_parts=6))
def test_every_part_solitary_is_the_search_of_one_part_plans(g):
    """The oracle: with every operator solitary the search is the one that caps a Plan at
    one Part (``max_plan_size=1``), point for point."""
    options = PlannerOptions(stripe_factors=3)
    device = dataclasses.replace(simple_device(), solitary=frozenset(_kinds(g)))
    alone = ProposalSearch(g, device, options)
    capped = ProposalSearch(g, simple_device(), dataclasses.replace(options, max_plan_size=1))
    assert alone.frontier == capped.frontier
    for k in range(len(alone.frontier)):
        assert alone.proposal(k) == capped.proposal(k)


@_SETTINGS
@given(graphs(max_parts=6))
def test_an_operator_the_graph_lacks_changes_nothing(g):
    """The default (every Part cascadable) and a set naming none of the graph's operators
    give the same search."""
    absent = frozenset(set(Op) - set(_kinds(g))) | {"nms"}
    options = PlannerOptions(stripe_factors=3)
    plain = ProposalSearch(g, simple_device(), options)
    other = ProposalSearch(g, dataclasses.replace(simple_device(), solitary=absent), options)
    assert plain.frontier == other.frontier
    assert plain.proposal(0) == other.proposal(0)


def _chain():
    """conv -> a copy the device runs alone (a RESHAPE naming its operator) -> conv."""
    b = GraphBuilder("chain")
    x = b.input("in", (1, 24, 20, 8))
    y = b.add(parts.conv2d("c1", x, 16, 3, padding=1))
    flip = Part("flip", Op.RESHAPE, (y,), dataclasses.replace(y, name="flip:0"),
                (Propagator.identity(4),), (("op", "reverse"),))
    z = b.add(flip)
    return b.build([b.add(parts.conv2d("c2", z, 8, 3, padding=1))])


def test_a_solitary_part_is_still_striped_alone():
    g = _chain()
    device = dataclasses.replace(simple_device(), solitary=frozenset({Op.REVERSE}))
    gen = PlanGenerator(g, device, PlannerOptions())
    j = next(i for i, p in enumerate(gen.topo) if p.name == "flip")
    cands = list(gen.generate(j))
    assert {start for start, *_ in cands} == {j}
    assert any(spec.stripe.total_stripes > 1 for *_, spec in cands)
    # no interval after it reaches back over it
    for end in range(j + 1, len(gen.topo)):
        assert min(start for start, *_ in gen.generate(end)) > j
    smallest = ProposalSearch(g, device).proposal(0)
    assert [p.parts for p in smallest.plans if "flip" in p.parts] == [("flip",)]
    # without the rule the least-memory Proposal cascades it (what the rule is for)
    plain = ProposalSearch(g, simple_device()).proposal(0)
    assert any(len(p.parts) > 1 and "flip" in p.parts for p in plain.plans)


def test_part_operator_reads_a_coarse_kind_through_its_op_attribute():
    y = parts.conv2d("c", GraphBuilder("g").input("in", (1, 4, 4, 2)), 2).output
    ident = (Propagator.identity(4),)
    out = dataclasses.replace(y, name="o")
    assert part_operator(Part("r", Op.RESHAPE, (y,), out, ident, (("op", "reverse"),))) \
        is Op.REVERSE
    assert part_operator(Part("p", Op.PAD, (y,), out, ident, (("pads", ()),))) is Op.PAD
    # an ``op`` outside the vocabulary (a UNARY's "copy") leaves the kind
    assert part_operator(Part("u", Op.UNARY, (y,), out, ident, (("op", "copy"),))) is Op.UNARY
    assert simple_device().cascadable(Part("r", Op.RESHAPE, (y,), out, ident,
                                           (("op", "reverse"),)))


@_SETTINGS
@given(st.data())
def test_no_plan_stripes_a_part_computed_only_whole_and_the_simulator_agrees(data):
    """``Device.whole_output``: every Plan of every Proposal computes such a Part over its
    whole output in one stripe, whether alone or cascaded, and the Proposals stay exact."""
    g = data.draw(graphs(max_parts=7, min_parts=2))
    whole = data.draw(st.sets(st.sampled_from(_kinds(g)), min_size=1))
    device = dataclasses.replace(simple_device(), whole_output=frozenset(whole))
    search = ProposalSearch(g, device, PlannerOptions(stripe_factors=4))
    by_name = _by_name(g)
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        for plan in prop.plans:
            for ps in plan.part_schedules:
                p = by_name[ps.part]
                if part_operator(p) in whole:
                    assert ps.stripe.covers(p.output.shape), (ps, plan.parts)
        sim = simulate(g, device, prop)
        assert list(sim.plan_bytes) == [p.memory_bytes for p in prop.plans]
        assert sim.peak_bytes == prop.memory_bytes


def _softmax_chain():
    """conv -> a 4-D SOFTMAX (each output row reads its input row) -> conv."""
    b = GraphBuilder("softmax chain")
    x = b.input("in", (1, 24, 20, 8))
    y = b.add(parts.conv2d("c1", x, 16, 3, padding=1))
    z = b.add(Part("sm", Op.SOFTMAX, (y,), dataclasses.replace(y, name="sm:0"),
                   (Propagator.identity(4),)))
    return b.build([b.add(parts.conv2d("c2", z, 8, 3, padding=1))])


def test_a_part_computed_only_whole_stays_in_a_cascade_that_holds_it_whole():
    """The SOFTMAX is never striped but, unlike a solitary Part, still shares Plans (whole
    ones) with its neighbours; without the rule the least-memory Proposal stripes it."""
    g = _softmax_chain()
    device = dataclasses.replace(simple_device(), whole_output=frozenset({Op.SOFTMAX}))
    gen = PlanGenerator(g, device, PlannerOptions())
    j = next(i for i, p in enumerate(gen.topo) if p.name == "sm")
    cands = list(gen.generate(j))
    assert {spec.stripe.total_stripes for *_, spec in cands} == {1}
    assert min(start for start, *_ in cands) < j       # cascaded with c1, held whole
    for end in range(j, len(gen.topo)):
        for start, _, _, spec in gen.generate(end):
            if start <= j:
                plan = gen.build(start, end, spec)
                (ps,) = [ps for ps in plan.part_schedules if ps.part == "sm"]
                assert ps.stripe.covers((1, 24, 20, 16)), (start, end, spec)
    smallest = ProposalSearch(g, device).proposal(0)
    (ps,) = [ps for p in smallest.plans for ps in p.part_schedules if ps.part == "sm"]
    assert ps.stripe.total_stripes == 1
    plain = ProposalSearch(g, simple_device()).proposal(0)
    (ps,) = [ps for p in plain.plans for ps in p.part_schedules if ps.part == "sm"]
    assert ps.stripe.total_stripes > 1


def test_covers_is_one_stripe_over_the_whole_tensor():
    assert StripeConfig.whole((1, 4, 4, 2)).covers((1, 4, 4, 2))
    assert not StripeConfig.whole((1, 4, 4, 2)).covers((1, 5, 4, 2))
    assert not StripeConfig.tiled((1, 4, 4, 2), (1, 2, 4, 2), (0, 1, 0, 0)).covers((1, 4, 4, 2))
