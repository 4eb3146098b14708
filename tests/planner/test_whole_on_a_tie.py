"""A Plan of one weightless Part runs it whole where its stripes would save no memory
(``planner.whole_on_a_tie``): a lone activation or copy is one NPU operation, as Vela runs
it, under every budget, while a stripe that saves memory, and any Part with weights, keeps
its candidates."""
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import parts
from planner.api import plan
from planner.devices import get_device
from planner.graph import GraphBuilder
from planner.options import PlannerOptions
from planner.point_sets import PointSet
from planner.proposals import ProposalSearch
from planner.stripes import StripeConfig
from planner.whole_on_a_tie import whole_on_a_tie
from planner.work_memory import WORK_ATTR, WorkMemory

_SHAPE = (1, 8, 8, 8)
_STRIPES = [StripeConfig.whole(_SHAPE),
            StripeConfig.tiled(_SHAPE, (1, 4, 8, 8), (0, 1, 0, 0)),
            StripeConfig.tiled(_SHAPE, (1, 8, 2, 8), (0, 0, 1, 0)),
            StripeConfig.tiled(_SHAPE, (1, 2, 4, 8), (0, 1, 2, 0))]


@st.composite
def _pareto_set(draw) -> PointSet:
    """Memory strictly ascending, cycles strictly descending, as a walk's sets are."""
    n = draw(st.integers(1, 5))
    memory = sorted(draw(st.sets(st.integers(0, 60), min_size=n, max_size=n)))
    cycles = sorted(draw(st.sets(st.integers(0, 60), min_size=n, max_size=n)), reverse=True)
    return PointSet(memory, cycles, [(f"spec{k}", ()) for k in range(n)])


_groups = st.lists(st.tuples(st.sampled_from(_STRIPES), st.integers(0, 8), _pareto_set()),
                   min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(groups=_groups)
def test_a_weightless_sink_drops_exactly_the_stripes_that_save_no_memory(groups):
    """Against the rule stated point by point: every whole-output point kept; a striped
    point kept exactly when its memory (staging included) is below the least whole one's;
    each set's survivors in their order; no whole candidate: every point kept."""
    x = GraphBuilder("g").input("in", _SHAPE)
    got = whole_on_a_tie(parts.unary("act", x, "sigmoid"), groups)
    whole = [stage + m for s, stage, ps in groups if s.total_stripes == 1 for m in ps.memory]
    want = []
    for stripe, stage, ps in groups:
        keep = [k for k, m in enumerate(ps.memory)
                if stripe.total_stripes == 1 or not whole or stage + m < min(whole)]
        if keep:
            want.append((stage, [(ps.memory[k], ps.cycles[k], ps.payloads[k]) for k in keep]))
    assert [(stage, list(zip(*ps))) for stage, ps in got] == want
    if whole:   # the least memory of the interval is what it was
        assert min(stage + m for stage, ps in got for m in ps.memory) == \
            min(stage + m for _, stage, ps in groups for m in ps.memory)


@settings(max_examples=50, deadline=None)
@given(groups=_groups)
def test_a_sink_with_weights_keeps_every_candidate(groups):
    """Its stripes may move other weight bytes by DMA (staged per stripe): nothing dropped."""
    x = GraphBuilder("g").input("in", _SHAPE)
    got = whole_on_a_tie(parts.conv2d("conv", x, 8, 1), groups)
    assert got == [(stage, ps) for _, stage, ps in groups]


def _lone(shape, op: str, dtype: str, **attrs):
    b = GraphBuilder("lone")
    x = b.input("in", shape, dtype)
    part = parts.unary("act", x, op, **attrs)
    return b.build(outputs=[b.add(dataclasses.replace(
        part, output=dataclasses.replace(part.output, dtype=dtype)))])


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(h=st.integers(1, 40), w=st.integers(1, 40), c=st.integers(1, 64),
       op=st.sampled_from(["sigmoid", "tanh", "relu6", "requantize"]),
       dtype=st.sampled_from(["int8", "int16"]),
       device=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_a_lone_activation_is_one_stripe_on_every_budget(h, w, c, op, dtype, device):
    """Its input and output are held whole however it is striped: every Proposal of the
    frontier, so every budget's choice, runs it as one operation."""
    g = _lone((1, h, w, c), op, dtype)
    search = ProposalSearch(g, get_device(device), PlannerOptions())
    for k in range(len(search.frontier)):
        (only,) = search.proposal(k).plans
        assert only.part_schedules[0].stripe.total_stripes == 1


@pytest.mark.parametrize("budget", ["system", "smallest", "size", None])
def test_the_budgets_choose_the_whole_activation_at_the_striped_plans_memory(budget):
    """1x8x8x8 int16 LOGISTIC, which the cost model estimates faster in four stripes (the
    whole operation's larger blocks fill and drain once): one stripe, at the memory the
    striped plan took (the tensor once: written over its input)."""
    result = plan(_lone(_SHAPE, "sigmoid", "int16"), "ethos-u55-128", budget=budget)
    (only,) = result.chosen.plans
    assert only.part_schedules[0].stripe.total_stripes == 1
    assert result.chosen.memory_bytes == 2 * 8 * 8 * 8


def test_a_stripe_that_saves_working_memory_stays():
    """A weightless Part whose working memory follows its stripe: its least memory is a
    striped Plan, which the rule leaves on the frontier."""
    g = _lone((1, 32, 32, 16), "sigmoid", "int8", **{WORK_ATTR: WorkMemory(per_element=3)})
    search = ProposalSearch(g, get_device("ethos-u55-128"), PlannerOptions())
    (least,) = search.proposal(0).plans
    assert least.part_schedules[0].stripe.total_stripes > 1
    assert search.proposal(0).memory_bytes < 32 * 32 * 16 + 3 * 32 * 32 * 16   # the whole
