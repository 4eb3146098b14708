"""Lockstep rolling buffers (planner.lockstep): rings a single stripe loop realizes, costed
exactly. The simulator (an independent replay) measures the planned memory, every row is
computed once, and lockstep never needs more memory than recompute. With a prologue (the stripe loop
starting before the sink's first stripe) every ring is the steady one."""
import pytest
from hypothesis import HealthCheck, given, settings

from planner import parts as P
from planner.graph import GraphBuilder
from planner.lockstep import LockstepStripes
from planner.options import PlannerOptions
from planner.plan import PlanSpec
from planner.plans import PlanGenerator
from planner.proposals import ProposalSearch
from planner.simulate import SimulationError, _step_windows, lockstep_walk, simulate
from planner.stripes import StripeConfig
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs

LOCKSTEP = PlannerOptions(rolling_granules=(), lockstep_rolling=True, stripe_factors=4)
PROLOGUE = PlannerOptions(rolling_granules=(), lockstep_rolling="prologue",
                          stripe_factors=4)
RECOMPUTE = PlannerOptions(rolling_granules=(), lockstep_rolling=False, stripe_factors=4)


def lockstep_parts(proposal):
    return [ps.stripe for plan in proposal.plans for ps in plan.part_schedules
            if isinstance(ps.stripe, LockstepStripes) and ps.stripe.rolling_axis >= 0]


def assert_rows_computed_once(cfg: LockstepStripes):
    """Along the rolling axis each step computes the rows of its window past the previous
    window's end: together they cover every window, each row once."""
    a = cfg.rolling_axis
    windows, work = cfg.axis_ranges(a), cfg.work_ranges(a)
    assert work[0] == windows[0]
    for (lo, hi), (wlo, whi), (_, prev_hi) in zip(work[1:], windows[1:], windows):
        assert (lo, hi) == (max(wlo, prev_hi), max(max(wlo, prev_hi), whi))
    covered = sum(hi - lo for lo, hi in work)
    assert covered == windows[-1][1] - windows[0][0]


@pytest.mark.parametrize("options", [LOCKSTEP, PROLOGUE], ids=["lockstep", "prologue"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=7))
def test_simulated_memory_equals_planned_lockstep_memory(options, g):
    device = simple_device()
    search = ProposalSearch(g, device, options)
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        sim = simulate(g, device, prop)
        assert list(sim.plan_bytes) == [p.memory_bytes for p in prop.plans]
        assert sim.peak_bytes == prop.memory_bytes
        for cfg in lockstep_parts(prop):
            assert_rows_computed_once(cfg)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=6))
def test_lockstep_never_needs_more_memory_than_recompute(g):
    """Lockstep holds at most the recompute windows, so its smallest Proposal is no larger.

    Its cycles are not always lower, although it computes a subset of the rows: a stripe's
    transfers are counted in bursts and latencies, so a narrower stripe can cost more than a
    wider one (a nearest resize of 1x4x6 in 4- then 2-column lockstep steps costs 236 cycles
    on the test device against 232 for two 4-column recompute stripes), rfcs/0005 §4.1."""
    device = simple_device()
    lock = ProposalSearch(g, device, LOCKSTEP)
    rec = ProposalSearch(g, device, RECOMPUTE)
    assert lock.frontier[0][0] <= rec.frontier[0][0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=7))
def test_prologue_rings_are_exact_in_a_modular_replay(g):
    """Every planned prologue ring, replayed with rows stored at ``row % rows``: the consumer
    reads the right rows, and a ring one row short loses one."""
    device = simple_device()
    search = ProposalSearch(g, device, PROLOGUE)
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        for plan in prop.plans:
            stripes = {ps.part: ps.stripe for ps in plan.part_schedules}
            for tc in plan.tensor_configs:
                cfg = stripes.get(next((p.name for p in g.parts if p.output.name == tc.tensor),
                                       None))
                if not isinstance(cfg, LockstepStripes) or cfg.rolling_axis < 0:
                    continue
                a = cfg.rolling_axis
                reads = _step_windows(g, plan, tc.tensor, a, stripes)
                steps = list(cfg.work_ranges(a))
                rows = tc.buffer_shape[a]
                assert lockstep_walk(reads, steps, ring=rows) == rows
                if rows > 1:
                    with pytest.raises(SimulationError, match="overwritten"):
                        lockstep_walk(reads, steps, ring=rows - 1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=6))
def test_a_prologue_never_needs_more_memory(g):
    """The prologue splits the first windows into steps: every Plan it builds holds at most
    what the same Plan holds without it, so its smallest Proposal is no larger."""
    device = simple_device()
    lock = ProposalSearch(g, device, LOCKSTEP)
    pro = ProposalSearch(g, device, PROLOGUE)
    assert pro.frontier[0][0] <= lock.frontier[0][0]
    gen_l = PlanGenerator(g, device, LOCKSTEP)
    gen_p = PlanGenerator(g, device, PROLOGUE)
    for plan in lock.proposal(0).plans:
        if plan.spec.mode == "lockstep":
            assert gen_p.build(plan.start, plan.end, plan.spec).memory_bytes <= \
                gen_l.build(plan.start, plan.end, plan.spec).memory_bytes


def test_a_ring_one_row_short_loses_a_row():
    """The walk itself: a 3-row window moving 1 row a step needs 3 rows."""
    steps = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    reads = [(0, 2), (0, 3), (1, 4), (2, 5)]      # one step fewer: the producer leads by one
    assert lockstep_walk(reads, steps, ring=3) == 3
    with pytest.raises(SimulationError, match="overwritten"):
        lockstep_walk(reads, steps, ring=2)
    with pytest.raises(SimulationError, match="before the lockstep producer"):
        lockstep_walk([(0, 2), (0, 3), (1, 5), (2, 5)], steps)


def chain(padding: int, h_in: int = 24, names=("b", "c", "d")):
    g = GraphBuilder("chain")
    t = g.input("a", (1, h_in, 16, 32))
    for name in names:
        t = g.add(P.conv2d(name, t, out_channels=32, kernel=(3, 1), bias=False,
                           padding=(padding, 0, padding, 0), output_name=name))
    return g.build()


@pytest.mark.parametrize("padding,rings,windows", [
    # SAME: the first step's windows are clipped at the top, so every ring is the kernel's
    # window of h rows (h + 2), where recompute windows grow with depth (h + 2, h + 4)
    (1, {"c": 6, "b": 6}, {"c": 6, "b": 8}),
    # VALID: the first step computes whole windows, so the rings are the windows - what
    # TVM's rolling_buffer allocates (tests/tvm_ethos/test_schedule.py)
    (0, {"c": 6, "b": 8}, {"c": 6, "b": 8}),
])
def test_rings_of_a_three_convolution_chain(padding, rings, windows):
    h = 4
    g = chain(padding)
    gen = PlanGenerator(g, simple_device(), LOCKSTEP)
    out = g.tensor("d").shape
    sink = StripeConfig.tiled(out, (1, h, 16, 32), (0, 1, 0, 0))

    def build(mode):
        plan = gen.build(0, 2, PlanSpec(sink, mode, 0, ()))
        return plan, {tc.tensor: tc.buffer_shape[1] for tc in plan.tensor_configs
                      if tc.tensor in ("b", "c")}

    lock, lock_rows = build("lockstep")
    rec, rec_rows = build("recompute")
    assert lock_rows == rings and rec_rows == windows
    assert lock.cycles < rec.cycles
    assert {tc.buffer_mode.value for tc in lock.tensor_configs if tc.tensor in ("b", "c")} == \
        {"rolling"}
    schedules = {ps.part: ps.stripe for ps in lock.part_schedules}
    # each Part computes each of its output rows exactly once
    for name in ("b", "c"):
        cfg = schedules[name]
        assert isinstance(cfg, LockstepStripes)
        assert_rows_computed_once(cfg)
        assert sum(n * s[1] for s, n in cfg.count_stripes().items()) == g.tensor(name).shape[1]


@pytest.mark.parametrize("padding,plain,prologue", [
    # SAME: without a prologue the first step holds the top-clipped windows, h + d rows at
    # depth d; with one, every ring is the steady h + 2
    (1, {"d": 6, "c": 6, "b": 7}, {"d": 6, "c": 6, "b": 6}),
    # VALID: without a prologue the rings are the whole windows (h + 2d); with one, h + 2
    (0, {"d": 6, "c": 8, "b": 10}, {"d": 6, "c": 6, "b": 6}),
])
def test_a_prologue_makes_every_ring_steady(padding, plain, prologue):
    h = 4
    g = chain(padding, names=("b", "c", "d", "e"))
    sink = StripeConfig.tiled(g.tensor("e").shape, (1, h, 16, 32), (0, 1, 0, 0))

    def rings(options):
        plan = PlanGenerator(g, simple_device(), options).build(0, 3, PlanSpec(
            sink, "lockstep", 0, ()))
        return plan, {tc.tensor: tc.buffer_shape[1] for tc in plan.tensor_configs
                      if tc.tensor in ("b", "c", "d")}

    (_, r_plain), (p_pro, r_pro) = rings(LOCKSTEP), rings(PROLOGUE)
    assert (r_plain, r_pro) == (plain, prologue)
    schedules = {ps.part: ps.stripe for ps in p_pro.part_schedules}
    for name in ("b", "c", "d"):
        cfg = schedules[name]
        assert_rows_computed_once(cfg)
        # no step computes more than the window advances (h rows): the first window is
        # computed over the prologue's steps
        assert max(hi - lo for lo, hi in cfg.work_ranges(1)) <= h
        assert cfg.prologue >= 1
    device = simple_device()
    prop = ProposalSearch(g, device, PROLOGUE).proposal(0)
    assert simulate(g, device, prop).peak_bytes == prop.memory_bytes


def test_a_prologue_aligns_the_readers_of_a_fork():
    """A tensor read by a rolling Part with a prologue and by the sink (a residual ADD) is
    held as RECOMPUTE windows over the aligned steps: the sink's windows are continued
    backwards by the prologue, and the simulator agrees with every Proposal."""
    g = GraphBuilder("fork")
    t = g.input("a", (1, 24, 16, 8))
    x = g.add(P.conv2d("x", t, 8, (3, 1), padding=(1, 0, 1, 0), bias=False, output_name="x"))
    y = g.add(P.conv2d("y", x, 8, (3, 1), padding=(1, 0, 1, 0), bias=False, output_name="y"))
    z = g.add(P.conv2d("z", y, 8, (3, 1), padding=(1, 0, 1, 0), bias=False, output_name="z"))
    g.add(P.elementwise("s", z, x, "add", output_name="s"))
    g = g.build()
    device = simple_device()
    sink = StripeConfig.tiled(g.tensor("s").shape, (1, 4, 16, 8), (0, 1, 0, 0))
    plan = PlanGenerator(g, device, PROLOGUE).build(0, 3, PlanSpec(sink, "lockstep", 0, ()))
    stripes = {ps.part: ps.stripe for ps in plan.part_schedules}
    assert (stripes["y"].rolling_axis, stripes["y"].prologue) == (1, 1)
    assert (stripes["x"].rolling_axis, stripes["x"].prologue) == (-1, 1)   # RECOMPUTE, aligned
    assert stripes["x"].stripes[1] == stripes["y"].stripes[1] == sink.stripes[1] + 1
    search = ProposalSearch(g, device, PROLOGUE)
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        assert simulate(g, device, prop).peak_bytes == prop.memory_bytes


def test_mobilenet_plans_roll_and_simulate_exactly():
    from tests.helpers.mobilenet import mobilenet_v1
    g = mobilenet_v1(96, 0.25, 4)
    device = simple_device()
    search = ProposalSearch(g, device, LOCKSTEP)
    rolled = 0
    for k in (0, len(search.frontier) // 2, len(search.frontier) - 1):
        prop = search.proposal(k)
        assert simulate(g, device, prop).peak_bytes == prop.memory_bytes
        rolled += len(lockstep_parts(prop))
        assert all(p.spec.mode in ("lockstep", "recompute") for p in prop.plans)
    assert rolled, "the frontier should use lockstep rings"


def test_option_is_validated():
    from planner.options import PlannerOptionError
    with pytest.raises(PlannerOptionError, match="lockstep_rolling.*'prologue'"):
        PlannerOptions(lockstep_rolling="yes")
    assert PlannerOptions(lockstep_rolling="prologue").lockstep_rolling == "prologue"
