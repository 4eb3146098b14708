"""AVERAGE_POOL_2D with a width stride past 3 and CONV_2D / DEPTHWISE_CONV_2D with a
dilation past 2 on the Ethos-U (issue 28), equal to TFLite Micro.

The NPU's strides are 1 to 3 and its dilations 1 or 2. The pool runs as one pool per output
column (``ops_wide_stride``), the convolution as Vela's kernel spread with zero taps, the NPU
dilating an even factor by 2 (``planner.npu_dilation``). Each test reads the stream the
compiled file carries on the functional model: the operations it runs are those forms, and
a plan's stream touches the plan's peak."""
from __future__ import annotations

import numpy as np
import pytest
from graph_builder import Graph
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from benchmarks.vela_superset_probes import BO, PROBES, conv, pool
from ethosu_stream.ops_common import kernel
from ethosu_stream.tflite_graph import TfliteGraph
from planner.npu_dilation import npu_kernel
from tests.helpers.tflite_oracle import compiled_matches, inputs_for, tflm_oracle

pytest.importorskip("tflite_micro")

U55 = "ethos-u55-128"
TARGET = f"ethos-u -accelerator_config={U55}"
PROBED = {(p.operator, p.name): p for p in PROBES}


def _operations(cm) -> list[tuple[str, object]]:
    """(command, kernel) of every block operation the compiled file's stream runs."""
    graph = TfliteGraph(cm.tflite, U55)
    ran = []

    def trace(cmd, state, memory):
        if cmd.name in ("NPU_OP_POOL", "NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            ran.append((cmd.name, kernel(state)))

    graph.run(inputs_for(cm.inputs, np.random.RandomState(0)), trace)
    return ran


def _on_the_npu(data: bytes, target: str = TARGET):
    cm = compiled_matches(data, target)
    if target.endswith("llvm"):   # a package: its one operator in the NPU's subgraph
        assert cm.partition_summary == {"ethos-u": 1}, cm.partition_summary
    else:
        assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement
    return cm


def _pool_columns(cm, ow: int) -> None:
    """The stream runs one pool per output column, each one column wide (one column has
    no stride to speak of: a single window, global pooling, keeps its own)."""
    ops = _operations(cm)
    assert [name for name, _ in ops] == ["NPU_OP_POOL"] * ow, ops
    assert ow == 1 or all(k.stride_x == 1 for _, k in ops), ops


def _spread_kernel(cm, kernel_hw, dilation) -> None:
    """The stream's convolutions (one per stripe of the plan) run the spread kernel with
    the NPU's dilation."""
    run = npu_kernel(kernel_hw, dilation)
    ops = _operations(cm)
    assert ops and all(((k.height, k.width), (k.dilation_y, k.dilation_x)) ==
                       (run.kernel, run.dilation) for _, k in ops), ops


@pytest.mark.parametrize("target", [TARGET, "ethos-u,llvm"])
def test_the_audit_s_probes_run_on_the_npu_as_tflite_micro(target):
    _on_the_npu(PROBED[("AVERAGE_POOL_2D", "stride width 4 VALID")].build(), target)
    _on_the_npu(PROBED[("CONV_2D", "dilation 3x2 VALID")].build(), target)


def test_the_probes_streams_are_the_forms():
    data = PROBED[("AVERAGE_POOL_2D", "stride width 4 VALID")].build()
    _pool_columns(_on_the_npu(data), 4)
    data = PROBED[("CONV_2D", "dilation 3x2 VALID")].build()
    _spread_kernel(_on_the_npu(data), (3, 3), (3, 2))


def _pool_case(h, w, kh, kw, sh, sw, same):
    padding = "SAME" if same else "VALID"
    kh, kw = min(kh, h), min(kw, w)
    ow = -(-w // sw) if same else (w - kw) // sw + 1
    return pool(BO.AVERAGE_POOL_2D, (1, h, w, 8), (kh, kw), (sh, sw), padding), ow


_POOLS = dict(h=st.integers(1, 8), w=st.integers(4, 30), kh=st.integers(1, 3),
              kw=st.integers(1, 8), sh=st.integers(1, 3), sw=st.integers(4, 9),
              same=st.booleans())


@settings(max_examples=3, deadline=None)
@given(**_POOLS)
def test_wide_stride_average_pools_equal_tflite_micro(h, w, kh, kw, sh, sw, same):
    data, ow = _pool_case(h, w, kh, kw, sh, sw, same)
    _pool_columns(_on_the_npu(data), ow)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(**_POOLS)
def test_wide_stride_average_pools_across_shapes_and_padding(h, w, kh, kw, sh, sw, same):
    data, ow = _pool_case(h, w, kh, kw, sh, sw, same)
    _pool_columns(_on_the_npu(data), ow)


_DILATED = dict(h=st.integers(6, 14), w=st.integers(6, 14), k=st.integers(1, 3),
                dh=st.integers(1, 5), dw=st.integers(1, 5), stride=st.integers(1, 2),
                same=st.booleans(), depthwise=st.booleans())


def _dilated_case(h, w, k, dh, dw, stride, same, depthwise):
    k = min(k, 1 + (h - 1) // dh, 1 + (w - 1) // dw)   # a VALID window fits the input
    return conv((1, h, w, 4), kernel=(k, k), stride=(stride, stride), dilation=(dh, dw),
                padding="SAME" if same else "VALID", depthwise=depthwise), (k, k)


@settings(max_examples=3, deadline=None)
@given(**_DILATED)
def test_convolutions_dilated_past_2_equal_tflite_micro(h, w, k, dh, dw, stride, same,
                                                        depthwise):
    data, kernel_hw = _dilated_case(h, w, k, max(dh, 3), dw, stride, same, depthwise)
    _spread_kernel(_on_the_npu(data), kernel_hw, (max(dh, 3), dw))


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(**_DILATED)
def test_dilated_convolutions_across_shapes_and_padding(h, w, k, dh, dw, stride, same,
                                                        depthwise):
    data, kernel_hw = _dilated_case(h, w, k, dh, dw, stride, same, depthwise)
    _spread_kernel(_on_the_npu(data), kernel_hw, (dh, dw))


def _chain(size, stride, padding, shape=(1, 16, 37, 8)) -> bytes:
    """A convolution, the wide-stride average pool, a convolution."""
    g = Graph(np.random.RandomState(0))
    x = g.conv2d(g.input(shape), 16)
    return g.build([g.conv2d(g.pool("avg", x, size, stride, padding), 8)])


def _planned(data: bytes, target: str = "ethos-u"):
    """``data`` at the least memory: wholly on the NPU, its stream realizing the plan and
    touching the planned peak, equal to TFLite Micro; the plan's row of the pool."""
    cm = tvm_ethos.compile(data, target, cache_dir=False, budget="smallest")
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, cm.placement
    (entry,) = cm.plan_report["streams"].values()
    assert entry["schedule"] == "plan" and entry["realizes_plan"], entry
    assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
        == entry["planned_peak_bytes"], entry
    xs = inputs_for(cm.inputs, np.random.RandomState(1))
    (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)
    (row,) = [r for r in cm.plan_report["layers"] if "avg_pool" in r["part"]]
    return row


@pytest.mark.parametrize("size, stride, padding, out_hw", [((2, 6), (1, 5), "SAME", (24, 8)),
                                                           ((3, 4), (2, 4), "VALID", (11, 10))])
def test_a_striped_cascade_through_the_pool_touches_the_planned_peak(size, stride, padding,
                                                                     out_hw):
    """Stripes of the pool's output, smaller than it, read from the convolution's buffer
    through its tiles, column by column."""
    row = _planned(_chain(size, stride, padding, (1, 24, 40, 8)))
    assert row["stripe"][1] * row["stripe"][2] < out_hw[0] * out_hw[1], row


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(h=st.integers(6, 24), w=st.integers(8, 48), kw=st.integers(1, 6),
       sw=st.integers(4, 6), same=st.booleans())
def test_planned_cascades_through_wide_stride_pools(h, w, kw, sw, same):
    _planned(_chain((2, min(kw, w)), (1, sw), "SAME" if same else "VALID", (1, h, w, 8)))


def test_an_average_pool_of_height_stride_4_says_so():
    data = pool(BO.AVERAGE_POOL_2D, (1, 9, 9, 8), (1, 1), (4, 4))
    cm = tvm_ethos.compile(data, TARGET, cache_dir=False)
    (p,) = cm.placement
    assert p.placed_on != "ethos-u" and "height stride must be in the range [1, 3]" in p.why, p
