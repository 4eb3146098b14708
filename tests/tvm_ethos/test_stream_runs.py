"""Runs of stripes (``stream_plan.plan_steps(..., run)``): a Plan's step loop taken in blocks,
each Part running its steps of a block in a row, so that consecutive operations are one
layer's and write only the addresses that change. The rings grow for the block
(``run_buffer_shapes``), and ``longest_runs`` takes a run only where the grown rings still fit
the plan's peak: the same SRAM, a shorter stream, the same outputs."""

from collections import Counter

import numpy as np
import pytest
from graph_builder import Graph
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from ethosu_stream.run import KERNEL_OPERATIONS
from tests.helpers.models import model_path
from tests.helpers.tflite_oracle import oracle, random_inputs
from tests.tvm_ethos.test_stream_cascade import LAYERS, _chain, compile_on_frontier
from tvm_ethos.backends.ethos_u import stream_cascade, stream_plan
from tvm_ethos.backends.ethos_u.stream_plan import (
    plan_steps,
    plan_tiles,
    run_buffer_shapes,
    step_loop_length,
)
from tvm_ethos.pipeline import subgraph_stream

pytest.importorskip("ethosu.vela")

TARGET = "ethos-u -accelerator_config=ethos-u55-128,llvm"


def _planned(model, budget=None):
    """(graph, proposal) of every planned stream of ``model`` at ``budget``, as the
    generator receives them."""
    seen = []
    real = stream_cascade.longest_runs

    def spy(graph, proposal, *args, **kwargs):
        seen.append((graph, proposal))
        return real(graph, proposal, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stream_cascade, "longest_runs", spy)
        tvm_ethos.compile(model, TARGET, npu_runtime="stream", cache_dir=False, budget=budget)
    return seen


def _stream(cm):
    (entry,) = cm.plan_report["streams"].values()
    return entry


def _operations(entry) -> Counter:
    """The stream's kernel operations by kind (its ``commands`` count)."""
    return Counter({k: n for k, n in entry["commands"].items() if k in KERNEL_OPERATIONS})


def _tall_chain():
    """Three 3x3 convolutions down 24 rows: at its fastest plan the cascade's rings leave
    room under the peak (the network's input and output are the peak's)."""
    g = Graph(np.random.RandomState(5))
    x = g.input((1, 24, 6, 4))
    for c in (8, 8, 4):
        x = g.conv2d(x, c, act="relu")
    return g.build([x])


@given(seed=st.integers(0, 2**16), h=st.integers(8, 24), w=st.integers(3, 12),
       c=st.integers(1, 8), layers=st.lists(LAYERS, min_size=2, max_size=4),
       where=st.floats(0, 1), run=st.integers(1, 6))
@settings(max_examples=3, deadline=None)
def test_a_run_reorders_the_steps_and_keeps_each_parts_order(seed, h, w, c, layers, where,
                                                            run):
    """Any run lists the same steps as the planned order, each Part's in the same order,
    and a Part's step comes after every step of the Parts before it in the same block."""
    model = _chain(seed, h, w, c, layers)
    _, budget, _ = compile_on_frontier(model, TARGET, where)
    for graph, proposal in _planned(model, budget):
        for k, plan in enumerate(proposal.plans):
            planned, ran = plan_steps(graph, plan, k), plan_steps(graph, plan, k, run)
            assert Counter(planned) == Counter(ran)
            for part in plan.parts:
                assert [s for s in planned if s.part == part] == \
                    [s for s in ran if s.part == part]
            assert len(plan_tiles(graph, plan, k, run)) == len(plan_tiles(graph, plan, k))
            if run >= step_loop_length(graph, plan):   # one block: Part after Part
                for tile in plan_tiles(graph, plan, k, run):
                    order = [plan.parts.index(s.part) for s in tile]
                    assert order == sorted(order)


def test_a_run_of_zero_steps_is_refused():
    model = _tall_chain()
    graph, proposal = _planned(model)[0]
    with pytest.raises(ValueError, match="at least one step"):
        plan_steps(graph, proposal.plans[0], 0, 0)


def test_rings_grow_for_a_run_and_not_for_the_planned_order():
    """The planned order needs the planned buffers; a longer run needs longer rings along
    the rolling axis only, never longer than the tensor."""
    graph, proposal = _planned(_tall_chain(), budget="smallest")[0]
    grew = False
    for plan in proposal.plans:
        configs = {tc.tensor: tc for tc in plan.tensor_configs}
        planned = run_buffer_shapes(graph, plan, 1)
        assert planned is not None
        assert planned == {t: tuple(configs[t].buffer_shape) for t in planned}
        for run in range(2, step_loop_length(graph, plan) + 1):
            grown = run_buffer_shapes(graph, plan, run)
            for t, shape in grown.items():
                tensor = graph.tensor(t)
                assert all(p <= g <= n for p, g, n in
                           zip(planned[t], shape, tensor.shape))
                grew |= shape != planned[t]
    assert grew


@pytest.mark.parametrize("run", [2, 50])
def test_forced_runs_in_a_larger_arena_are_bit_exact(run, monkeypatch):
    """Every Plan of a smallest-memory cascade forced to a run (its rings grown for it, the
    arena as large as they need): the stream still equals LiteRT, where the planned rings
    would not hold the rows a block runs ahead."""
    model = _tall_chain()
    monkeypatch.setattr(stream_plan, "_run_lengths", lambda loop: [min(run, loop)])
    real = stream_cascade.longest_runs

    def unbounded(graph, proposal, buffers, shapes, peak, fixed=frozenset(), layout=None):
        return real(graph, proposal, buffers, shapes, None, fixed)   # its own layout

    monkeypatch.setattr(stream_cascade, "longest_runs", unbounded)
    # the arena is past the plan's peak here, which the compile otherwise refuses
    monkeypatch.setattr(subgraph_stream, "check_stream_memory", lambda sym, entry: None)
    cm = tvm_ethos.compile(model, TARGET, npu_runtime="stream", cache_dir=False,
                           budget="smallest")
    assert _stream(cm)["generated"]
    rs = np.random.RandomState(run)
    for _ in range(2):
        xs = random_inputs(model, rs)
        ref = oracle(model, xs)[0]
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)


@pytest.mark.slow
def test_runs_shorten_the_stream_in_the_same_arena(monkeypatch):
    """MobileNetV1-0.25-96 at its fastest plan on ethos-u55-128 cascades a depthwise and a
    pointwise convolution along the width under its peak: run in blocks, the same operations
    in the same arena (its top may now be reserved weights the stream does not touch) and a
    shorter stream than the planned order, with the same outputs
    (``test_stream_models`` checks the stream's intermediate tensors against LiteRT)."""
    path = str(model_path("mobilenet_v1_0.25_96"))
    cm = tvm_ethos.compile(path, TARGET, npu_runtime="stream", cache_dir=False)
    monkeypatch.setattr(stream_plan, "_run_lengths", lambda loop: [])
    lockstep = tvm_ethos.compile(path, TARGET, npu_runtime="stream", cache_dir=False)
    ran, planned = _stream(cm), _stream(lockstep)
    assert ran["planned_peak_bytes"] == planned["planned_peak_bytes"]
    assert ran["scratch_high_water_bytes"] <= planned["scratch_high_water_bytes"]
    assert ran["weight_dma_bytes"] == planned["weight_dma_bytes"]
    assert _operations(ran) == _operations(planned)
    assert ran["command_stream_bytes"] < planned["command_stream_bytes"]
    xs = random_inputs(path, np.random.RandomState(0))
    ref = oracle(path, xs)[0]
    for m in (cm, lockstep):
        np.testing.assert_array_equal(m.run(*xs)[0].reshape(ref.shape), ref)


@pytest.mark.parametrize("budget", [None, "smallest"])
def test_the_runs_taken_fit_the_peak_and_a_longer_one_would_not(budget):
    """``longest_runs`` returns, per Plan, a run whose grown rings are the buffers it lays out
    within the peak; replaying its choice Plan by Plan, every longer run would not fit."""
    seen = []
    real = stream_cascade.longest_runs

    def spy(graph, proposal, buffers, shapes, peak, fixed=frozenset(), layout=None):
        out = real(graph, proposal, buffers, shapes, peak, fixed, layout)
        seen.append((graph, proposal, buffers, shapes, peak, out))
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stream_cascade, "longest_runs", spy)
        tvm_ethos.compile(_tall_chain(), TARGET, npu_runtime="stream", cache_dir=False,
                          budget=budget)
    (graph, proposal, buffers, shapes, peak, (runs, grown, grown_shapes, layout)), = seen
    assert layout.size <= peak
    refused = 0
    state, state_shapes = buffers, dict(shapes)
    for k, plan in enumerate(proposal.plans):
        need = run_buffer_shapes(graph, plan, runs[k])
        assert all(grown_shapes[t] == s for t, s in need.items())
        for r in stream_plan._run_lengths(step_loop_length(graph, plan)):
            if r > runs[k] and len(plan.parts) > 1:
                trial = stream_plan._grown(state, state_shapes, k,
                                           run_buffer_shapes(graph, plan, r))
                with pytest.raises(stream_plan.LayoutError):
                    stream_plan.arena_layout(trial, peak)
                refused += 1
        state = stream_plan._grown(state, state_shapes, k, need)
        state_shapes.update(need)
    assert state == grown
    assert refused or budget is None
