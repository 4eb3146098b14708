"""A producer in a cascade computes exactly the rows its consumers read (issue 28).

The brute force: every output row of every consumer stripe, through the propagator one row at
a time (``planner.windows.window`` of a single row), clipped to the tensor. Along an axis the
producer computes in one stripe, its range must be the union of those rows: not fewer (the
consumer would read rows never computed, ``planner.simulate`` checks that too), and not more
(the schedule computes the rows read, and allocates less than the planner planned).
"""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import parts
from planner.errors import PlannerError
from planner.graph import GraphBuilder, PlannerGraph
from planner.options import PlannerOptions
from planner.plan import Buffering, Plan, PlanSpec
from planner.plans import PlanGenerator
from planner.proposals import ProposalSearch
from planner.simulate import simulate, simulate_plan
from planner.stripes import StripeConfig
from planner.windows import window
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs


def _rows_read(graph: PlannerGraph, plan: Plan, tensor: str, axis: int) -> tuple[int, int] | None:
    """The [lo, hi) of ``tensor`` along ``axis`` that the Plan's consumers read, row by row;
    None where they read none of it."""
    stripes = {ps.part: ps.stripe for ps in plan.part_schedules}
    lo, hi = None, None
    for q in graph.parts:
        if q.name not in stripes:
            continue
        for t, prop in zip(q.inputs, q.propagators):
            if t.name != tensor:
                continue
            b = prop.driving_axis(axis)
            args = (prop.const(axis), prop.offset[axis], t.shape[axis])
            if b is None:
                reads = [window(0, 1, 0, *args)]
            else:
                lin = prop.linear(axis, b)
                reads = [window(r, r + 1, lin, *args)
                         for c0, c1 in stripes[q.name].work_ranges(b) for r in range(c0, c1)]
            for a, z in reads:
                if z > a:
                    lo = a if lo is None else min(lo, a)
                    hi = z if hi is None else max(hi, z)
    return None if lo is None else (lo, hi)


def _check_one_stripe_axes_exact(graph: PlannerGraph, plan: Plan) -> int:
    """Assert the rule above for every intermediate tensor of ``plan``; how many axes it
    checked."""
    checked = 0
    for ps in plan.part_schedules:
        if ps.part == plan.parts[-1]:
            continue
        part = next(p for p in graph.parts if p.name == ps.part)
        for a, n in enumerate(ps.stripe.stripes):
            read = _rows_read(graph, plan, part.output.name, a)
            if n != 1 or read is None:
                continue
            (computed,) = ps.stripe.axis_ranges(a)
            assert computed == read, (ps.part, a, ps.stripe, read)
            checked += 1
    return checked


@st.composite
def _cascades(draw):
    """The random graphs, and chains ending in a padded pool or an upscale read in part."""
    if draw(st.booleans()):
        return draw(graphs(max_parts=5))
    b = GraphBuilder("tail")
    t = b.input("in", (1, draw(st.integers(3, 9)), draw(st.integers(3, 9)), 2))
    t = b.add(parts.depthwise_conv2d("dw", t, 1, 1))
    s, k = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    t = b.add(parts.conv2d("conv", t, 3, k, s))
    if draw(st.booleans()):
        # the bottom and right padding at least 1: a 2x2 window fits a 1-row tensor
        pads = (draw(st.integers(0, 1)), draw(st.integers(0, 1)), 1, 1)
        t = b.add(parts.pool2d("pool", t, "avg", 2, 1, padding=pads))
    else:
        t = b.add(parts.resize("up", t, draw(st.integers(2, 3))))
        t = b.add(parts.pool2d("pool", t, "max", 2, 2))
    return b.build([t])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cascades())
def test_a_one_stripe_producer_computes_exactly_what_is_read(g):
    device = simple_device()
    search = ProposalSearch(g, device, PlannerOptions(stripe_factors=4))
    for k in range(len(search.frontier)):
        proposal = search.proposal(k)
        for plan in proposal.plans:
            _check_one_stripe_axes_exact(g, plan)
        assert simulate(g, device, proposal).peak_bytes == proposal.memory_bytes
    try:    # the whole graph as one cascade, which the frontier may leave out
        plan = _whole_plan(g)
    except PlannerError:
        return  # its consumers step through a tensor differently: no such Plan
    _check_one_stripe_axes_exact(g, plan)
    assert simulate_plan(g, device, plan) == plan.memory_bytes


def _whole_plan(g: PlannerGraph, options: PlannerOptions = PlannerOptions()) -> Plan:
    """The one-Plan cascade of ``g`` computing its output in one stripe (RECOMPUTE)."""
    out = g.outputs[0]
    return PlanGenerator(g, simple_device(), options).build(
        0, len(g.parts) - 1, PlanSpec(StripeConfig.whole(out.shape), Buffering.RECOMPUTE, 0))


def test_a_pool_padding_past_a_strided_convolution_is_not_propagated():
    """A SAME 2x2 pool reads its input's padding row and column: the stride-2 1x1 CONV
    before it computes its 2x2 output, which reads 3x3 of the 4x3 before it, not 4x3."""
    b = GraphBuilder("pool_padding")
    t = b.input("in", (1, 4, 3, 5))
    t = b.add(parts.depthwise_conv2d("dw", t, 1, 1))
    t = b.add(parts.conv2d("conv", t, 12, 1, 2))
    t = b.add(parts.pool2d("pool", t, "avg", 2, 1, padding=(0, 0, 1, 1)))
    g = b.build([t])
    plan = _whole_plan(g)
    dw = next(tc for tc in plan.tensor_configs if tc.tensor == "dw:0")
    assert dw.buffer_shape == (1, 3, 3, 5)
    assert _check_one_stripe_axes_exact(g, plan) == 8
    assert simulate_plan(g, simple_device(), plan) == plan.memory_bytes


def test_an_upscale_read_in_part_computes_the_rows_read():
    """Two rows of a nearest 2x upscale read one row of its input (a ``floordiv``): its
    producer computes that row, where the window rounded up (2 rows times 1/2, plus 1/2)
    held 2."""
    b = GraphBuilder("upscale")
    t = b.input("in", (1, 4, 4, 2))
    t = b.add(parts.conv2d("conv", t, 2))
    t = b.add(parts.resize("up", t, 2))
    t = b.add(parts.strided_slice("rows", t, (0, 2, 0, 0), (1, 2, 8, 2)))
    g = b.build([t])
    plan = _whole_plan(g)
    conv = next(ps.stripe for ps in plan.part_schedules if ps.part == "conv")
    assert conv.axis_ranges(1) == ((1, 2),)
    assert _check_one_stripe_axes_exact(g, plan) == 8
    assert simulate_plan(g, simple_device(), plan) == plan.memory_bytes
