"""PlanGenerator's memos shared between positions: what they answer at a position is what
the plain computation gives there."""
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import parts
from planner.graph import GraphBuilder, PlannerGraph
from planner.options import PlannerOptions
from planner.plans import PlanGenerator
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs

MODES = [PlannerOptions(stripe_factors=3, max_width_tiles=2, rolling_granules=(1, 0)),
         PlannerOptions(stripe_factors=3, max_width_tiles=2, lockstep_rolling=True),
         PlannerOptions(stripe_factors=3, max_width_tiles=2, lockstep_rolling=False,
                        rolling_granules=(1,), rolling_mixed=True)]


@st.composite
def repeated_blocks(draw) -> PlannerGraph:
    """A stem, then one block of one to three layers repeated two to four times: the
    positions of a repeat are alike but for their names (as MobileNet's 512-channel
    blocks), some joining the block's input to its output (an add, or a concatenation in
    alternate orders, over the height or the depth, narrowed back by a 1x1 convolution: the same
    layers reading a tensor through different inputs)."""
    h = draw(st.integers(4, 16))
    w = draw(st.integers(4, 16))
    c = draw(st.integers(1, 6))
    b = GraphBuilder("blocks")
    t = b.input("in", (1, h, w, c))
    t = b.add(parts.conv2d("stem", t, c, draw(st.sampled_from([1, 3])), 1, padding=1))
    block = draw(st.lists(st.sampled_from(["conv1", "conv3", "dw", "pool_same"]),
                          min_size=1, max_size=3))
    join = draw(st.sampled_from([None, "add", "concat", "concat"]))
    axis = draw(st.sampled_from([1, 3]))      # a concatenation's: height or depth
    for r in range(draw(st.integers(2, 4))):
        skip = t
        for k, kind in enumerate(block):
            name = f"b{r}_{k}"
            if kind == "conv1":
                t = b.add(parts.conv2d(name, t, c, 1, 1))
            elif kind == "conv3":
                t = b.add(parts.conv2d(name, t, c, 3, 1, padding=1))
            elif kind == "dw":
                t = b.add(parts.depthwise_conv2d(name, t, 3, 1, padding=(1, 1, 1, 1)))
            else:
                t = b.add(parts.pool2d(name, t, "max", 3, 1, padding=(1, 1, 1, 1)))
        if join == "add":
            t = b.add(parts.elementwise(f"b{r}_add", t, skip, "add"))
        elif join == "concat":
            pair = [t, skip] if r % 2 else [skip, t]     # the orders alternate
            t = b.add(parts.concatenate(f"b{r}_cat", pair, axis))
            t = b.add(parts.conv2d(f"b{r}_narrow", t, c, 1, (2, 1) if axis == 1 else 1))
    return b.build([t])


def _plain_interior(gen: PlanGenerator, i: int, mode, granule, cons, compute):
    """``_interior_config``'s answer computed afresh at position ``i``."""
    p = gen.topo[i]
    res = gen._interior(p.output, cons, compute, mode.value == "rolling", granule,
                        lockstep=mode.value == "lockstep")
    return None if res is None or not gen.device.computes(p, res[0]) else (res[0], res[2])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(repeated_blocks(), graphs(max_parts=8, min_parts=3)),
       st.sampled_from(MODES), st.sampled_from(["sram", "dram"]))
def test_interior_configs_shared_between_positions_are_the_plain_ones(g, options, io_region):
    """Every interior config the walks ask for, answered from a memo that positions with the
    same ``_junction`` share, equals ``_interior`` computed at the position asked about."""
    gen = PlanGenerator(g, simple_device(io_region), options)
    asked = []
    memoised = gen._interior_config

    def recording(i, mode, granule, reads, cons, compute):
        got = memoised(i, mode, granule, reads, cons, compute)
        asked.append((got, i, mode, granule, cons, dict(compute)))
        return got

    gen._interior_config = recording
    for j in range(len(gen.topo)):
        gen.cost_requests(j)
        gen.interval_frontiers(j)
    assert asked
    fresh = PlanGenerator(g, simple_device(io_region), options)
    for got, i, mode, granule, cons, compute in asked:
        assert got == _plain_interior(fresh, i, mode, granule, cons, compute)


def test_repeated_layers_share_one_junction():
    """MobileNet-like repeats (the same depthwise and pointwise layers one after another)
    name one junction per repeated position, and the first and last layers their own."""
    b = GraphBuilder("repeats")
    t = b.input("in", (1, 8, 8, 4))
    for r in range(3):
        t = b.add(parts.depthwise_conv2d(f"dw{r}", t, 3, 1, padding=(1, 1, 1, 1)))
        t = b.add(parts.conv2d(f"pw{r}", t, 4, 1, 1))
    gen = PlanGenerator(b.build([t]), simple_device(), PlannerOptions())
    ids = [gen._junction(i) for i in range(len(gen.topo))]
    assert ids[0] == ids[2] == ids[4]          # each depthwise, read by a pointwise
    assert ids[1] == ids[3] != ids[5]          # the last pointwise has no reader
    assert ids[0] != ids[1]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=5), st.sampled_from(MODES), st.sampled_from(["sram", "dram"]))
def test_sink_placements_shared_between_modes_are_the_plain_ones(g, options, io_region):
    """The first groups of every walk (its sink alone), whose weight placements the modes
    of one stripe share where the sink stages no input, hold each spec's placements as a
    fresh generator computes them for that spec."""
    from planner.point_sets import culled
    gen = PlanGenerator(g, simple_device(io_region), options)
    fresh = PlanGenerator(g, simple_device(io_region), options)
    for end in range(len(gen.topo)):
        walk = gen._walk(end)
        first = next(walk, None)
        if first is None:
            continue
        start, groups = first
        sink = fresh.topo[end]
        want = []
        for spec in fresh.specs(end):
            pts = [(m, c, spec, copied) for m, c, copied in
                   fresh._placements(sink, spec.stripe, spec, True, 0, 0, ())]
            want.append((fresh.weight_stage_bytes(sink, spec.stripe), culled(pts)))
        assert start == end
        if len(gen.topo) > 1:
            assert groups == want


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(repeated_blocks(), graphs(max_parts=8, min_parts=3)), st.data())
def test_walk_steps_kept_per_sink_are_the_plain_ones(g, data):
    """The steps of a sink's walks, kept as far as a walk went and then found on, are the
    steps found afresh, whichever walk stopped where."""
    gen = PlanGenerator(g, simple_device(), PlannerOptions(max_plan_size=4))
    fresh = PlanGenerator(g, simple_device(), PlannerOptions(max_plan_size=4))
    for end in range(len(gen.topo)):
        plain = list(fresh._walk_steps(end))
        for _ in range(data.draw(st.integers(0, 3))):        # walks that stop early
            stop = data.draw(st.integers(0, len(plain)))
            assert [step for _, step in zip(range(stop), gen._steps(end))] == plain[:stop]
        assert list(gen._steps(end)) == plain


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(repeated_blocks(), graphs(max_parts=8, min_parts=3)),
       st.sampled_from(MODES), st.sampled_from(["sram", "dram"]))
def test_extension_placements_shared_between_positions_are_the_plain_ones(g, options,
                                                                           io_region):
    """Every extension a walk makes holds the weight placements that ``_placements``
    computes afresh for its Part, stripe, spec and buffer bytes, though positions of one
    signature share them (``_interior_placements``)."""
    gen = PlanGenerator(g, simple_device(io_region), options)
    asked = []
    memoised = gen._interior_placements

    def recording(p, stripe, spec, nbytes):
        got = memoised(p, stripe, spec, nbytes)
        asked.append((got, p, stripe, spec, nbytes))
        return got

    gen._interior_placements = recording
    for j in range(len(gen.topo)):
        gen.interval_frontiers(j)
    fresh = PlanGenerator(g, simple_device(io_region), options)
    for got, p, stripe, spec, nbytes in asked:
        assert got == fresh._placements(p, stripe, spec, False, nbytes, 0, ())
