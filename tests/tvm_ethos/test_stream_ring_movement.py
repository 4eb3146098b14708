"""PAD and CONCATENATION inside a cascade: where the plan holds an operand or the output in a
ring (a stripe of rows at a time), the stream writes each stripe's copies into the rings
(``stream_cascade._Emitter.ring_movement``) instead of refusing the plan and leaving the
subgraph to the emulator; bit-exact with LiteRT, touching exactly the plan's peak."""

import numpy as np
import pytest
import tflite
from graph_builder import Graph
from hypothesis import given, settings
from hypothesis import strategies as st
from test_stream_cascade import compile_on_frontier
from tflite_builder import BO, BOPT, T

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, random_inputs

pytest.importorskip("ethosu.vela")


def _pad(g: Graph, x: int, pads) -> int:
    p = g._add(T([4, 2], "int32", data=np.array(pads, np.int32)))
    t = g.tensors[x]
    y = g._add(T([n + a + b for n, (a, b) in zip(g.shape(x), pads)], "int8",
                 scale=t.scale[0], zp=int(t.zp[0])))
    g.ops.append((BO.PAD, 0, None, [x, p], [y]))
    return y


def _concat(g: Graph, xs: list[int]) -> int:
    """Channel concatenation; the inputs take the first one's quantization (a requantizing
    concatenation stays on the host)."""
    t = g.tensors[xs[0]]
    for x in xs[1:]:
        g.tensors[x].scale, g.tensors[x].zp = t.scale, t.zp
    shape = list(g.shape(xs[0]))
    shape[3] = sum(g.shape(x)[3] for x in xs)
    y = g._add(T(shape, "int8", scale=t.scale[0], zp=int(t.zp[0])))

    def opts(b):
        tflite.ConcatenationOptionsStart(b)
        tflite.ConcatenationOptionsAddAxis(b, 3)
        return tflite.ConcatenationOptionsEnd(b)

    g.ops.append((BO.CONCATENATION, BOPT.ConcatenationOptions, opts, xs, [y]))
    return y


def pad_between_convs(seed: int, h: int, w: int, c: int, pads) -> bytes:
    g = Graph(np.random.RandomState(seed))
    x = g.input((1, h, w, c))
    y = g.conv2d(_pad(g, g.conv2d(x, 8), pads), 8, padding="VALID")
    return g.build([y])


def concat_between_convs(seed: int, h: int, w: int, c: int, widths) -> bytes:
    g = Graph(np.random.RandomState(seed))
    x = g.input((1, h, w, c))
    y = g.conv2d(_concat(g, [g.conv2d(x, n) for n in widths]), 8)
    return g.build([y])


def _check(model: bytes, config: str, where: float | None, seed: int = 0) -> dict:
    """Compiled at point ``where`` of the frontier (None: the smallest plan), the stream
    executes the plan within its peak and is exact; returns the subgraph's plan report."""
    target = f"ethos-u -accelerator_config={config},llvm"
    if where is None:
        cm = tvm_ethos.compile(model, target, npu_runtime="stream", cache_dir=False,
                               budget="smallest")
        (entry,) = cm.plan_report["streams"].values()
        assert entry["schedule"] == "plan" and entry["realizes_plan"], entry
        assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"]
    else:
        cm, budget, entry = compile_on_frontier(model, target, where)
        assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"] <= budget
    xs = random_inputs(model, np.random.RandomState(seed))
    ref = oracle(model, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)
    assert any(t.startswith("stream ") for t in cm.last_run_stats.trace)
    (sub,) = cm.plan_report["subgraphs"].values()
    return sub


@pytest.mark.parametrize("build,config", [
    # (pads of 2 before a 3x3 convolution: more than it pads itself, so the PAD is no fold)
    (lambda: pad_between_convs(2, 12, 8, 4, [[0, 0], [2, 1], [1, 2], [0, 0]]),
     "ethos-u55-128"),
    (lambda: concat_between_convs(3, 12, 8, 4, (8, 4)), "ethos-u65-256"),
])
def test_smallest_plan_cascades_through_the_copy_and_streams_it(build, config):
    """At the smallest budget the plan cascades the PAD / CONCATENATION with the
    convolution after it, its operands in rings: the stream runs that plan."""
    sub = _check(build(), config, None)
    kinds = {"pad", "concatenate"}
    assert any(len(p["parts"]) > 1 and p["stripes"] > 1 and
               any(k in name for k in kinds for name in p["parts"]) for p in sub["plans"])


@given(seed=st.integers(0, 2**16), h=st.integers(6, 20), w=st.integers(3, 10),
       c=st.integers(1, 6), concat=st.booleans(), data=st.data(),
       config=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]), where=st.floats(0, 1))
@settings(max_examples=6, deadline=None)
@pytest.mark.slow
def test_any_pad_or_concatenation_in_a_cascade_streams_exactly(seed, h, w, c, concat, data,
                                                               config, where):
    if concat:
        widths = data.draw(st.lists(st.integers(1, 8), min_size=2, max_size=3))
        model = concat_between_convs(seed, h, w, c, widths)
    else:
        pads = [[0, 0]] + [list(data.draw(st.tuples(st.integers(0, 2), st.integers(0, 2))))
                           for _ in range(2)] + [[0, 0]]
        model = pad_between_convs(seed, h, w, c, pads)
    _check(model, config, where, seed)
