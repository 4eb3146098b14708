"""MEAN over the height alone, the width alone or both of a rank-2, 3 or 4 tensor on the
Ethos-U (``ethos_arch.mean_window``: the reduced axes become the kernel of one depthwise
convolution over the tensor's NHWC view), as Vela 5.2 takes them: on ``ethos-u`` (the
tflite-micro host) and ``ethos-u,llvm`` (the generated stream on the functional model), equal
to TFLite Micro over shapes, axes, keep_dims, int8 / uint8 / int16 and quantization, the
stream touching exactly the SRAM its plan holds; and the MEAN one kernel cannot take an
average pool (``ops_reduce_split``)."""
import graph_builder as gb
import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import inputs_for, oracle, tflm_oracle
from tests.tvm_ethos.test_reduce_split import reduce_model

pytest.importorskip("ethosu.vela")

U55 = "ethos-u55-128"


def mean_model(shape, axes, keep, dtype="int8", in_q=(0.05, 3), out_q=(0.04, -2)) -> bytes:
    """One MEAN of a ``dtype`` tensor of ``shape`` over ``axes`` (as written, negative ones
    too)."""
    return reduce_model("MEAN", shape, axes, keep, dtype, in_q, out_q)


def _exact(cm, model, seed, runs=2):
    """Equal to TFLite Micro (int8, int16); TFLite Micro has no uint8 MEAN: then to LiteRT's
    reference kernels, whose uint8 MEAN is the same integer arithmetic."""
    rs = np.random.RandomState(seed)
    for _ in range(runs):
        xs = inputs_for(cm.inputs, rs)
        want = (oracle if xs[0].dtype == np.uint8 else tflm_oracle)(model, xs)[0]
        got = cm.run(*xs)[0]
        np.testing.assert_array_equal(got.reshape(want.shape), want)


def check_both_targets(model, seed=0, config=U55):
    """On the tflite-micro host every operator is an ``ethos-u`` one; on ``ethos-u,llvm`` the
    stream is generated, realizes its plan and touches the planned peak; both equal to
    TFLite Micro."""
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={config}", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], \
        [(p.placed_on, p.why) for p in cm.placement]
    _exact(cm, model, seed)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={config},llvm",
                           npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    assert entry["commands"]["NPU_OP_DEPTHWISE"] == 1
    assert entry["realizes_plan"]
    assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"]
    _exact(cm, model, seed)
    assert any(t.startswith("stream ") for t in cm.last_run_stats.trace)


@st.composite
def means(draw, max_dim=9):
    """A MEAN the Ethos-U takes: the height, the width or both of the NHWC view of a rank-2
    to 4 tensor (batch 1), axes written as given or counted from the end, any keep_dims, int8,
    uint8 or int16, input and output quantized apart or alike."""
    rank = draw(st.integers(2, 4))
    shape = [draw(st.integers(1, max_dim)) for _ in range(rank)]
    if rank == 4:
        shape[0] = 1
    hw = [a for a in (rank - 3, rank - 2) if a >= 0]
    axes = draw(st.lists(st.sampled_from(hw), min_size=1, max_size=len(hw), unique=True))
    axes = [a - rank if draw(st.booleans()) else a for a in axes]
    dtype = draw(st.sampled_from(["int8", "uint8", "int16"]))
    info = np.iinfo(dtype)
    scales = st.floats(1e-4, 0.05) if dtype == "int16" else st.floats(0.002, 0.5)
    in_q = (draw(scales), draw(st.integers(int(info.min), int(info.max))))
    out_q = in_q if draw(st.booleans()) else (draw(scales),
                                               draw(st.integers(int(info.min), int(info.max))))
    return tuple(shape), tuple(axes), draw(st.booleans()), dtype, in_q, out_q


@settings(max_examples=3, deadline=None)
@given(case=means(), seed=st.integers(0, 2**16))
def test_mean_over_height_width_or_both_equals_tflite_micro(case, seed):
    shape, axes, keep, dtype, in_q, out_q = case
    check_both_targets(mean_model(shape, axes, keep, dtype, in_q, out_q), seed)


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(case=means(max_dim=20), seed=st.integers(0, 2**16))
def test_mean_axes_sweep_equals_tflite_micro(case, seed):
    shape, axes, keep, dtype, in_q, out_q = case
    model = mean_model(shape, axes, keep, dtype, in_q, out_q)
    check_both_targets(model, seed)
    _on_the_hosts_kernel(model, seed)


#: at one kernel's limits: 64 rows, 4096 taps, a 4096-wide row, a 64-row height alone, more
#: rows over both read as one row, a height alone over a 1-wide width read so too
LIMITS = {
    "64x64": ((1, 64, 64, 1), (1, 2)),
    "width-4096": ((1, 2, 4096, 2), (2,)),
    "rank-2-4096": ((4096, 3), (0,)),
    "height-64": ((1, 64, 5, 2), (1,)),
    "100x40-as-one-row": ((1, 100, 40, 1), (1, 2)),
    "rank-3-height-200-width-1": ((200, 1, 2), (0,)),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(LIMITS))
def test_means_at_the_kernel_limits_equal_tflite_micro(case):
    shape, axes = LIMITS[case]
    check_both_targets(mean_model(shape, axes, True, in_q=(0.1, -7), out_q=(0.07, 5)))


def test_more_than_64_rows_over_both_is_one_row_of_their_elements():
    """65x10 (650 elements): Vela 5.2 reads it as 1x650; so does the stream, in one
    depthwise convolution."""
    check_both_targets(mean_model((1, 65, 10, 3), (1, 2), True, in_q=(0.1, -7)),
                       config="ethos-u65-256")


@pytest.mark.parametrize("shape,axes,config", [
    ((1, 65, 3, 2), (1,), U55),
    ((1, 64, 65, 1), (1, 2), "ethos-u65-256"),
], ids=["height-65-rows", "4160-elements-u65"])
def test_a_mean_one_kernel_cannot_take_is_an_average_pool(shape, axes, config):
    """More than 64 rows of the height alone, or more than 4096 elements (on an Ethos-U65
    too): Vela splits them into several convolutions and ADDs; ours runs one average pool
    carrying MEAN's multiplier (``ops_reduce_split``), equal to TFLite Micro."""
    model = mean_model(shape, axes, True)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={config}", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement
    _exact(cm, model, 0)


def _width_mean(g, x):
    """A MEAN over the width of ``x`` in ``g`` (graph_builder writes MEANs over H and W)."""
    n, h, _, c = g.shape(x)
    axis = g._add(tb.T([1], "int32", data=np.array([2], np.int32)))
    y = g._act((n, h, 1, c))

    def opts(b):
        tb.tflite.ReducerOptionsStart(b)
        tb.tflite.ReducerOptionsAddKeepDims(b, True)
        return tb.tflite.ReducerOptionsEnd(b)

    g.ops.append((tb.BO.MEAN, tb.BOPT.ReducerOptions, opts, [x, axis], [y]))
    return y


def test_a_width_mean_between_convolutions_is_planned_and_exact():
    """In a network the MEAN's Part is planned with its neighbours (over its whole output,
    as the stream runs it) and the stream realizes that plan."""
    g = gb.Graph(np.random.RandomState(7))
    x = g.input((1, 8, 8, 4))
    y = g.conv2d(g.conv2d(_width_mean(g, g.conv2d(x, 6)), 5, kernel=(1, 1)), 3,
                 kernel=(3, 1))
    model = g.build([y])
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={U55}", cache_dir=False)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}
    _exact(cm, model, 0)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={U55},llvm",
                           npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"] and entry["realizes_plan"], entry
    assert entry["commands"]["NPU_OP_DEPTHWISE"] == 1
    _exact(cm, model, 0)


def _on_the_hosts_kernel(model, seed=0):
    """On ``llvm`` alone: the host's integer kernel (``te_ops.lower_mean``), not TVM's
    float32 path, equal to TFLite Micro."""
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(model), "llvm"))
    assert "MEAN                 -> llvm (kernel)" in report, report
    _exact(tvm_ethos.compile(model, "llvm", cache_dir=False), model, seed)


@settings(max_examples=2, deadline=None)
@given(case=means(), seed=st.integers(0, 2**16))
def test_the_llvm_hosts_integer_kernel_takes_them_too(case, seed):
    shape, axes, keep, dtype, in_q, out_q = case
    _on_the_hosts_kernel(mean_model(shape, axes, keep, dtype, in_q, out_q), seed)


@pytest.mark.parametrize("dtype,q,shape,axes", [
    ("int8", (0.05, 3), (2, 65, 3, 2), (1,)),
    ("int16", (0.002, 11), (1, 200, 200, 1), (1, 2)),
])
def test_a_mean_the_npu_refuses_runs_on_the_hosts_integer_kernel(dtype, q, shape, axes):
    """On ``ethos-u,llvm`` the llvm host's integer kernel takes what the NPU refuses: a batch
    of two, an int16 MEAN of more elements than its int32 partial sums take
    (``ops_reduce_split``)."""
    model = mean_model(shape, axes, True, dtype, in_q=q, out_q=(0.003, -5))
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={U55},llvm", cache_dir=False)
    assert cm.partition_summary == {"llvm": 1}, cm.partition_summary
    _exact(cm, model, 0)
    _on_the_hosts_kernel(model)


def test_a_batch_of_two_is_refused_for_its_batch_alone():
    model = mean_model((2, 4, 5, 3), (1, 2), True)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={U55}", cache_dir=False)
    (p,) = cm.placement
    assert p.placed_on != "ethos-u" and "batch size 2" in str(p.why), p.why
    assert "axis" not in str(p.why), p.why
