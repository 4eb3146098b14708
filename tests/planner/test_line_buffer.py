"""Line-buffer timing (planner.line_buffer): the demand-driven rolling Plans the compile path
realizes as one finer step loop. Every rolling Plan the planner offers with
``rolling_mixed=False`` has a timing whose rings hold every row until it is read; one row
less and the replay catches it; ``rolling_mixed=False`` leaves no RECOMPUTE tensor inside a
rolling Plan."""
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings

from planner import parts as P
from planner.graph import GraphBuilder
from planner.line_buffer import LineBufferError, line_timing
from planner.memory import BufferMode
from planner.options import PlannerOptionError, PlannerOptions
from planner.plans import PlanGenerator
from planner.proposals import ProposalSearch
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs

LINE = PlannerOptions(rolling_granules=(1,), rolling_mixed=False, stripe_factors=4)


def rolling_plans(search):
    for k in range(len(search.frontier)):
        for plan in search.proposal(k).plans:
            if plan.spec.mode == "rolling" and len(plan.parts) > 1:
                yield plan


def shortened(plan, tensor, axis=1):
    """``plan`` with the ring of ``tensor`` one row shorter along ``axis``."""
    configs = []
    for tc in plan.tensor_configs:
        if tc.tensor == tensor:
            shape = list(tc.buffer_shape)
            shape[axis] -= 1
            tc = dataclasses.replace(tc, buffer_shape=tuple(shape))
        configs.append(tc)
    return dataclasses.replace(plan, tensor_configs=tuple(configs))


def chain(strides=(1, 2, 1, 2, 1), h=32):
    """3x3 convolutions (SAME) at the given strides, each followed by a 1x1 one."""
    g = GraphBuilder("chain")
    t = g.input("x", (1, h, 8, 4))
    for i, s in enumerate(strides):
        t = g.add(P.conv2d(f"c{i}", t, out_channels=4, kernel=(3, 3), strides=(s, s),
                           padding=(1, 1, 1, 1)))
        t = g.add(P.conv2d(f"p{i}", t, out_channels=4, kernel=(1, 1)))
    return g.build()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=7))
def test_every_offered_rolling_plan_has_a_line_timing(g):
    """Whatever the graph, the rings the planner sizes for granule 1 are enough for the
    line-buffer order (``line_timing`` replays every step and raises otherwise), and no
    rolling Plan keeps a tensor that does not roll."""
    search = ProposalSearch(g, simple_device(), LINE)
    for plan in rolling_plans(search):
        timing = line_timing(g, plan)
        members = {p.name: p for p in g.parts if p.name in plan.parts}
        for tc in plan.tensor_configs:
            if tc.tensor in {members[n].output.name for n in plan.parts[:-1]}:
                assert tc.buffer_mode == BufferMode.ROLLING
        assert [pt.part for pt in timing.parts] == list(plan.parts)
        for pt in timing.parts:
            assert pt.period >= 1
            assert timing.first_step <= pt.offset
            assert pt.step_of(len(pt.chunks) - 1) < timing.first_step + timing.steps


def test_periods_follow_the_strides_and_rings_are_a_kernel_high():
    """Above each stride-2 layer a level runs twice as often; every 3x3 consumer's ring holds
    3 rows, every 1x1 consumer's one (what a line buffer needs, against lockstep's rows per
    step plus the halo)."""
    g = chain()
    search = ProposalSearch(g, simple_device(), LINE)
    plan = max(rolling_plans(search), key=lambda p: len(p.parts))
    timing = line_timing(g, plan)
    period = {pt.part: pt.period for pt in timing.parts}
    names = list(plan.parts)
    for a, b in zip(names, names[1:]):
        stride = 2 if b in ("c1", "c3") else 1
        assert period[b] == stride * period[a], (a, b, period)
    rows = {tc.tensor: tc.buffer_shape[1] for tc in plan.tensor_configs
            if tc.buffer_mode == BufferMode.ROLLING}
    outputs = {p.name: p.output.name for p in g.parts}
    for name in names[:-1]:
        consumer = names[names.index(name) + 1]
        assert rows[outputs[name]] == (3 if consumer.startswith("c") else 1), (name, rows)


def test_a_ring_one_row_short_is_caught():
    """The replay is a real check: take a row off any ring that holds more than one row
    and the timing is refused, naming the tensor."""
    g = chain()
    search = ProposalSearch(g, simple_device(), LINE)
    plan = max(rolling_plans(search), key=lambda p: len(p.parts))
    rings = [tc for tc in plan.tensor_configs
             if tc.buffer_mode == BufferMode.ROLLING and tc.buffer_shape[1] > 1]
    assert rings
    for tc in rings:
        with pytest.raises(LineBufferError, match=tc.tensor):
            line_timing(g, shortened(plan, tc.tensor))


def test_rolling_mixed_false_drops_plans_with_windows_that_cannot_roll():
    """A fork inside a rolling Plan (``a``, read by ``b`` and the ADD) is held as a RECOMPUTE
    window by default; with rolling_mixed=False no rolling Plan covers it."""
    g = GraphBuilder("fork")
    x = g.input("x", (1, 16, 8, 4))
    a = g.add(P.conv2d("a", x, out_channels=4, kernel=(3, 3), padding=(1, 1, 1, 1)))
    b = g.add(P.conv2d("b", a, out_channels=4, kernel=(3, 3), padding=(1, 1, 1, 1)))
    g.add(P.elementwise("add", a, b))
    graph = g.build()

    def rolling_over_the_fork(options):
        gen = PlanGenerator(graph, simple_device(), options)
        return sum(1 for start, _, _, spec in gen.generate(2)
                   if start == 0 and spec.mode == "rolling")

    assert rolling_over_the_fork(dataclasses.replace(LINE, rolling_mixed=True)) > 0
    assert rolling_over_the_fork(LINE) == 0


def test_rolling_mixed_must_be_a_bool():
    with pytest.raises(PlannerOptionError, match="rolling_mixed"):
        PlannerOptions(rolling_mixed="no")
