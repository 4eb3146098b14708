"""Streams that execute the planner's schedule (``stream_cascade``, ``stream_plan``): ring
addressing with tile boxes, per-stripe operations, the arena layout at the plan's peak."""

import numpy as np
import pytest
from graph_builder import Graph
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from ethosu_stream.feature_map import from_registers
from ethosu_stream.ops_common import ifm_hw, kernel, ofm_shape
from tests.helpers.tflite_oracle import oracle, random_inputs
from tvm_ethos.backends.ethos_u.stream_plan import Buffer, LayoutError, arena_layout
from tvm_ethos.backends.ethos_u.stream_run import run_payload

pytest.importorskip("ethosu.vela")


@given(bh=st.integers(1, 6), bw=st.integers(1, 6), c=st.integers(1, 5),
       y0=st.integers(0, 40), x0=st.integers(0, 40), data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_box_of_a_ring_is_addressed_row_mod_rows(bh, bw, c, y0, x0, data):
    """Whatever box of a ring, wrapping or not, its tiles address element (y, x, ch) at the
    ring's slot ((y0 + y) % rows, (x0 + x) % cols): the fold the TensorIR schedule uses."""
    from ethosu_stream.feature_map import FeatureMap
    from tvm_ethos.backends.ethos_u.stream_base import vela_api
    from tvm_ethos.backends.ethos_u.stream_cascade import _Storage, feature_map

    h, w = data.draw(st.integers(1, bh)), data.draw(st.integers(1, bw))
    base = 1000
    st_ = _Storage(base, (bh, bw, c), (64, 64, c), "int8")
    fm = feature_map(vela_api(), st_, (y0, y0 + h), (x0, x0 + w), 1, None, 0)
    t = fm.tiles
    model = FeatureMap(1, tuple(t.addresses), t.height_0, t.height_1, t.width_0,
                       fm.strides.width, fm.strides.height, fm.strides.depth, False,
                       np.dtype(np.int8), 0)
    got = model.grid(h, w, c)
    ys, xs, cs = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    want = base + (((y0 + ys) % bh) * bw + (x0 + xs) % bw) * c + cs
    np.testing.assert_array_equal(got, want)


def test_the_layout_fits_the_peak_or_says_why():
    bufs = [Buffer("a", 10, 1, 0, 1), Buffer("b", 6, 1, 1, 2), Buffer("w", 4, 1, 1, 1, "weights"),
            Buffer("c", 8, 1, 2, 2)]
    layout = arena_layout(bufs, 20)
    assert layout.size == 20 and layout.top() == 20   # the touched bytes end at the peak
    live = {k: [b for b in bufs if b.first <= k <= b.last] for k in range(3)}
    for group in live.values():
        spans = sorted((layout.offsets[b.name], layout.offsets[b.name] + b.nbytes)
                       for b in group)
        assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
    with pytest.raises(LayoutError, match="needs 20 B.*peak is 19 B"):
        arena_layout(bufs, 19)


_KINDS = ("tensor", "input", "work", "weights")


@st.composite
def _arena_blocks(draw):
    """A few arena blocks over a few Plans: any kind, byte or 16-byte aligned, equal sizes
    and lifetimes likely (the keys of ``arena_layout``'s orders then tie)."""
    n = draw(st.integers(1, 9))
    blocks = []
    for i in range(n):
        first = draw(st.integers(0, 3))
        blocks.append(Buffer(f"b{i}", draw(st.sampled_from((0, 4, 8, 16, 24, 40))),
                             draw(st.sampled_from((1, 16))), first,
                             first + draw(st.integers(0, 2)), draw(st.sampled_from(_KINDS))))
    return blocks


def _layout_or_error(blocks, peak):
    try:
        layout = arena_layout(blocks, peak, search=False)
    except LayoutError as err:
        return str(err)
    return layout.offsets, layout.size


@given(blocks=_arena_blocks(), slack=st.integers(-8, 64))
@example(blocks=[Buffer("b0", 0, 1, 0, 0), Buffer("b1", 4, 16, 0, 1, "weights"),
                 Buffer("b2", 8, 1, 0, 0, "weights"), Buffer("b3", 4, 1, 0, 0)], slack=0)
@settings(max_examples=150, deadline=None)
def test_an_order_tried_again_is_not_fitted_again(blocks, slack):
    """Several of the layout's orders often sort the blocks alike; a first fit in an order
    already tried is skipped, which must change nothing: the layout (or the refusal) is the
    one every order fitted gives. (The example: two orders that place the touched blocks
    alike but the weights differently, so only the pair of orders may be skipped.)"""
    from tvm_ethos.backends.ethos_u import stream_plan

    peak = max(sum(b.nbytes for b in blocks if b.first <= k <= b.last) for k in range(6))
    peak += slack
    skipping = _layout_or_error(blocks, peak)
    with pytest.MonkeyPatch.context() as m:   # every order a new one: each attempt fitted
        m.setattr(stream_plan, "_names", lambda ordered: object())
        every = _layout_or_error(blocks, peak)
    assert skipping == every


def _two_convs():
    g = Graph(np.random.RandomState(11))
    x = g.input((1, 20, 9, 8))
    a = g.conv2d(x, 16, act="relu")
    return g.build([g.conv2d(a, 8, kernel=(3, 3), act="relu")])


def _tiles_used(payload, x):
    """How many operations read or write a feature map split into several tiles."""
    split = []

    def keep(cmd, state, mem):
        if not cmd.name.startswith("NPU_OP_") or cmd.name in ("NPU_OP_STOP", "NPU_OP_DMA_START"):
            return
        h, w, _ = ofm_shape(state)
        ih, iw = ifm_hw(state, kernel(state), (h, w))
        ifm, ofm = from_registers(state, "IFM"), from_registers(state, "OFM")
        split.append(ifm.height0 < ih or ifm.width0 < iw or ofm.height0 < h or ofm.width0 < w)

    outs, _ = run_payload(payload, [x], keep)
    return outs, sum(split)


@pytest.mark.parametrize("budget", ["smallest", "3KiB"])
def test_a_cascade_whose_ring_wraps_is_bit_exact(budget):
    """Two convolutions cascaded through a ring narrower than the 20 rows it carries: some
    operations read or write a box that wraps the ring (tile boxes), and the outputs equal
    the layer-by-layer stream's (unplanned) and LiteRT's."""
    model = _two_convs()
    target = "ethos-u -accelerator_config=ethos-u55-128,llvm"
    if budget == "smallest":
        fast = tvm_ethos.compile(model, target, npu_runtime="stream", cache_dir=False,
                                 budget=None)
        (sub,) = fast.plan_report["subgraphs"].values()
        budget = sub["frontier"][0]["memory_bytes"]
    cm = tvm_ethos.compile(model, target, npu_runtime="stream", cache_dir=False, budget=budget)
    plain = tvm_ethos.compile(model, target, npu_runtime="stream", cache_dir=False, plan=False)
    (sym, entry), = cm.plan_report["streams"].items()
    (_, plain_entry), = plain.plan_report["streams"].items()
    assert entry["schedule"] == "plan" and plain_entry["schedule"] == "layer by layer"
    assert entry["scratch_high_water_bytes"] == entry["planned_peak_bytes"]
    assert entry["scratch_high_water_bytes"] < plain_entry["scratch_high_water_bytes"]
    assert any(len(p["parts"]) == 2 and p["stripes"] > 1
               for p in cm.plan_report["subgraphs"][sym]["plans"])
    rs = np.random.RandomState(4)
    for _ in range(2):
        (x,) = random_inputs(model, rs)
        outs, wrapped = _tiles_used(cm.program.payloads[sym], x)
        assert wrapped > 0
        ref = oracle(model, [x])[0]
        np.testing.assert_array_equal(outs[0].reshape(ref.shape), ref)
        np.testing.assert_array_equal(plain.run(x)[0], cm.run(x)[0])


LAYERS = st.sampled_from(["conv3", "conv3s2", "dw3", "conv1", "avg3", "max2"])


def _chain(seed, h, w, c, layers):
    g = Graph(np.random.RandomState(seed))
    x = g.input((1, h, w, c))
    for kind in layers:
        _, hh, ww, _ = g.shape(x)
        if kind == "conv3":
            x = g.conv2d(x, 8, act="relu")
        elif kind == "conv3s2" and min(hh, ww) >= 4:
            x = g.conv2d(x, 8, stride=(2, 2))
        elif kind == "dw3":
            x = g.conv2d(x, 0, depthwise=True, act="relu")
        elif kind == "conv1":
            x = g.conv2d(x, 6, kernel=(1, 1))
        elif kind == "avg3":
            x = g.pool("avg", x, size=(3, 3), stride=(1, 1), padding="SAME")
        elif kind == "max2" and min(hh, ww) >= 4:
            x = g.pool("max", x)
    return g.build([x])


def compile_on_frontier(model, target: str, where: float):
    """``model`` compiled at the point ``where`` (0: fastest .. 1: smallest) of its
    memory/cycles frontier: (compiled model, budget, its stream entry), the stream checked to
    execute its plan. A model with no NPU subgraph is rejected (``assume``): a lone pool on a
    tiny input stays on the host."""
    fast = tvm_ethos.compile(model, target, npu_runtime="stream", cache_dir=False, budget=None)
    assume(fast.plan_report["subgraphs"])
    (sub,) = fast.plan_report["subgraphs"].values()
    front = sub["frontier"]
    budget = front[min(int(where * len(front)), len(front) - 1)]["memory_bytes"]
    cm = tvm_ethos.compile(model, target, npu_runtime="stream", cache_dir=False, budget=budget)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["schedule"] == "plan" and entry["realizes_plan"], entry
    return cm, budget, entry


@given(seed=st.integers(0, 2**16), h=st.integers(8, 24), w=st.integers(3, 12),
       c=st.integers(1, 8), layers=st.lists(LAYERS, min_size=2, max_size=4),
       where=st.floats(0, 1))
@settings(max_examples=4, deadline=None)
def test_any_chain_at_any_budget_streams_its_plan(seed, h, w, c, layers, where):
    """Any small chain of convolutions and pools, planned at any point of its memory/cycles
    frontier: the stream is bit-exact with LiteRT and touches exactly the plan's peak."""
    model = _chain(seed, h, w, c, layers)
    target = "ethos-u -accelerator_config=ethos-u55-128,llvm"
    cm, budget, entry = compile_on_frontier(model, target, where)
    assert entry["scratch_high_water_bytes"] == entry["planned_peak_bytes"] <= budget
    xs = random_inputs(model, np.random.RandomState(seed))
    ref = oracle(model, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)


def test_a_plan_form_without_a_stream_keeps_the_emulator_and_says_why(monkeypatch):
    """A step the generator has no per-stripe form for (as FULLY_CONNECTED, MEAN, SOFTMAX
    and RESHAPE have none; here a convolution made one of them and given half its rows) is
    refused by name, never run half-right: the subgraph keeps the emulator."""
    import dataclasses

    from ethos_arch.ops import Op
    from tvm_ethos.backends.ethos_u import stream_cascade
    from tvm_ethos.backends.ethos_u.stream_ops import STREAM_OPS, Extent

    g = Graph(np.random.RandomState(2))
    x = g.input((1, 6, 6, 4))
    model = g.build([g.conv2d(x, 8, act="relu")])
    real = stream_cascade.plan_steps

    def halved(graph, plan, index=0, run=1):
        steps = real(graph, plan, index, run)
        (lo, hi) = steps[-1].box[1]
        box = (steps[-1].box[0], (lo, lo + (hi - lo) // 2)) + steps[-1].box[2:]
        return steps[:-1] + [dataclasses.replace(steps[-1], box=box)]

    monkeypatch.setattr(stream_cascade, "plan_steps", halved)
    # a convolution emitted only over whole tensors, as FULLY_CONNECTED is
    monkeypatch.setitem(STREAM_OPS, Op.CONV2D,
                        dataclasses.replace(STREAM_OPS[Op.CONV2D], extent=Extent.WHOLE))
    cm = tvm_ethos.compile(model, "ethos-u,llvm", npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert not entry["generated"] and "CONV_2D" in entry["reason"]
    assert "stripes it" in entry["reason"]
    xs = random_inputs(model, np.random.RandomState(0))
    ref = oracle(model, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)
    assert not any(t.startswith("stream ") for t in cm.last_run_stats.trace)


def test_the_layout_keeps_alignments():
    """A working block needs 16-byte alignment (Vela's address checks): no layout tried, the
    upside-down ones included, may move it off."""
    bufs = [Buffer("x", 7, 1, 0, 0), Buffer("y", 5, 1, 0, 1), Buffer("wk", 16, 16, 1, 1, "work"),
            Buffer("z", 3, 1, 1, 1)]
    layout = arena_layout(bufs, 40)
    assert layout.offsets["wk"] % 16 == 0 and layout.aligned()
