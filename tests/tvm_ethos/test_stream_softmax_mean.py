"""SOFTMAX and MEAN as generated NPU operations (backends/ethos_u/npu_softmax.py, npu_ops.mean_op):
the fixed-point statement of TFLite's reference SOFTMAX against LiteRT, then single-operator
models through ``npu_runtime="stream"`` on the functional model, bit-exact with LiteRT
BUILTIN_REF, and what is refused by name."""

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, random_inputs
from tvm_ethos.compute.fixed_point import exp_table, softmax_8bit

pytest.importorskip("ethosu.vela")

scales = st.floats(1e-4, 2.0).map(lambda v: float(np.float32(v)))
betas = st.sampled_from([1.0, 0.5, 2.0, 0.1, 1.7])


@settings(max_examples=40, deadline=None)
@given(s_in=scales, z_in=st.integers(-128, 127), beta=betas,
       shape=st.sampled_from([(1, 10), (3, 7), (2, 1), (1, 2, 3, 17), (1, 300), (2, 1001)]),
       seed=st.integers(0, 2**16))
def test_fixed_point_softmax_is_tflites_reference_kernel(s_in, z_in, beta, shape, seed):
    """``fixed_point.softmax_8bit``, the arithmetic each NPU step reproduces, against
    BUILTIN_REF (which runs the fixed-point kernel for int8; the optimized kernel's float
    table differs from it on rare ties)."""
    model = tb.softmax(None, shape=shape, beta=beta, in_q=(s_in, z_in))
    x = np.random.RandomState(seed).randint(-128, 128, size=shape).astype(np.int8)
    np.testing.assert_array_equal(softmax_8bit(x, s_in, beta), oracle(model, [x])[0])


def test_exp_table_is_exp_of_the_scaled_distance():
    table = exp_table(0.1, 1.0)
    assert table[255] == 2**31 - 1  # exp(0)
    d = np.arange(-255, 1)
    want = np.exp(0.1 * d) * 2.0**31
    # Q0.31 to within gemmlowp's polynomial error, and zero where the input radius ends
    assert np.all(np.abs(table - want) <= np.maximum(want * 1e-6, 2))
    assert np.all(np.diff(table.astype(np.int64)) >= 0)


def _compile(model, config):
    return tvm_ethos.compile(model, f"ethos-u -accelerator_config={config},llvm",
                             npu_runtime="stream", cache_dir=False)


def _check(model, cm, runs=2, seed=1, vary=True, streamed=True):
    rs = np.random.RandomState(seed)
    outs = []
    for _ in range(runs):
        xs = random_inputs(model, rs)
        ref = oracle(model, xs)[0]
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)
        outs.append(ref)
    if vary:
        assert not np.array_equal(outs[0], outs[1])  # the output follows the input
    assert any(t.startswith("stream ") for t in cm.last_run_stats.trace) == streamed


SOFTMAX_CASES = {
    "row-u55-128": ((1, 10), 1.0, (0.1, 3), "ethos-u55-128"),
    "4d-beta-u65-256": ((1, 3, 4, 10), 0.7, (0.05, -3), "ethos-u65-256"),
    "1001-wide-u55-256": ((2, 1001), 1.0, (0.2, 0), "ethos-u55-256"),
    "narrow-scale": ((2, 16), 2.5, (0.004, -128), "ethos-u55-128"),
    "wide-scale": ((1, 2, 5, 33), 0.5, (0.3, 100), "ethos-u65-256"),
}


@pytest.mark.parametrize("case", sorted(SOFTMAX_CASES))
def test_softmax_stream_bit_exact_with_tflite(case):
    shape, beta, in_q, config = SOFTMAX_CASES[case]
    model = tb.softmax(None, shape=shape, beta=beta, in_q=in_q)
    cm = _compile(model, config)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    # one LUT copied to SHRAM, the row maximum and the sum as pools, the rest elementwise
    assert entry["commands"]["NPU_OP_DMA_START"] == 1
    # (an Ethos-U65 reads its input and writes its output in place in the arena: no copies)
    assert entry["commands"]["NPU_OP_POOL"] == 2
    assert entry["dma_bytes"] == {"0->259": 1024}
    # its int32 intermediates are working memory its Plan holds (planner.work_memory): the
    # stream touches the planned peak
    assert entry["work_bytes"] > 0 and entry["realizes_plan"]
    assert entry["schedule"] == "plan"
    assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
        == entry["planned_peak_bytes"]
    _check(model, cm)


def test_one_hot_and_single_value_rows():
    """Rows of one value (every output 127: probability 1) and rows with one code far above
    the rest (the others below the input radius: exp 0, output -128)."""
    model = tb.softmax(None, shape=(4, 1), in_q=(0.1, 0))
    cm = _compile(model, "ethos-u55-128")
    x = np.array([[-128], [0], [5], [127]], np.int8)
    np.testing.assert_array_equal(cm.run(x)[0].reshape(4, 1), oracle(model, [x])[0])
    model = tb.softmax(None, shape=(3, 8), in_q=(1.0, 0))
    cm = _compile(model, "ethos-u55-128")
    x = np.full((3, 8), -128, np.int8)
    x[:, 2] = 127
    x[1] = 7  # all equal
    ref = oracle(model, [x])[0]
    assert ref[0, 2] == 127 and ref[0, 0] == -128
    np.testing.assert_array_equal(cm.run(x)[0].reshape(3, 8), ref)


@settings(max_examples=8, deadline=None)
@given(s_in=scales, z_in=st.integers(-128, 127), beta=betas,
       rows=st.integers(1, 6), depth=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_softmax_stream_bit_exact_for_any_shape_and_quantization(s_in, z_in, beta, rows, depth,
                                                                  seed):
    model = tb.softmax(None, shape=(1, rows, depth), beta=beta, in_q=(s_in, z_in))
    cm = _compile(model, "ethos-u55-128")
    assert cm.plan_report["streams"][next(iter(cm.plan_report["streams"]))]["generated"]
    _check(model, cm, runs=1, seed=seed, vary=False)


def test_a_softmax_the_lowering_cannot_take_keeps_the_emulator():
    model = tb.softmax(None, shape=(1, 4096), in_q=(0.1, 0))
    cm = _compile(model, "ethos-u55-128")
    (entry,) = cm.plan_report["streams"].values()
    assert not entry["generated"] and "SOFTMAX" in entry["reason"] and "4096" in entry["reason"]


MEAN_CASES = {
    "6x6x8-u55-128": ((1, 6, 6, 8), "ethos-u55-128"),
    "3x3x256-u65-256": ((1, 3, 3, 256), "ethos-u65-256"),
    "7x7x40-u55-256": ((1, 7, 7, 40), "ethos-u55-256"),
    "1x5x3-u55-128": ((1, 1, 5, 3), "ethos-u55-128"),
}


@pytest.mark.parametrize("case", sorted(MEAN_CASES))
def test_mean_stream_bit_exact_with_tflite(case):
    shape, config = MEAN_CASES[case]
    model = tb.mean(np.random.RandomState(3), in_shape=shape)
    cm = _compile(model, config)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    assert entry["commands"]["NPU_OP_DEPTHWISE"] == 1
    # one operation over whole tensors: the stream touches exactly the planned peak (of the
    # SRAM: the arena on an Ethos-U55, the fast scratch on an Ethos-U65)
    assert entry["realizes_plan"]
    assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"]
    _check(model, cm)


@settings(max_examples=8, deadline=None)
@given(h=st.integers(1, 9), w=st.integers(1, 9), c=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_mean_stream_bit_exact_for_any_geometry(h, w, c, seed):
    model = tb.mean(np.random.RandomState(seed), in_shape=(1, h, w, c))
    cm = _compile(model, "ethos-u55-128")
    assert cm.plan_report["streams"][next(iter(cm.plan_report["streams"]))]["generated"]
    _check(model, cm, runs=1, seed=seed, vary=False)


def test_a_mean_over_more_than_64_rows_is_one_row_of_its_elements():
    """65x2 (130 elements): one kernel takes at most 64 rows, so the stream reads the bytes
    as one row of 130, as Vela 5.2 does (``ethos_arch.mean_window``)."""
    model = tb.mean(np.random.RandomState(0), in_shape=(1, 65, 2, 4))
    cm = _compile(model, "ethos-u65-256")
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"] and entry["commands"]["NPU_OP_DEPTHWISE"] == 1, entry
    _check(model, cm, vary=False)


def test_softmax_stream_is_exact_where_the_float_kernel_is_not():
    """A row where TFLite's optimized kernel (a float table of ``expf``, which the BUILTIN
    resolver runs) rounds one output 1 LSB below the reference fixed-point kernel that
    BUILTIN_REF runs: the stream follows the reference (as the host kernel does,
    test_softmax_reference.py)."""
    model = tb.softmax(None, shape=(1, 12), in_q=(0.05, 3))
    x = np.array([[96, 95, 82, 125, 28, -39, 36, -22, 17, -33, 21, -118]], np.int8)
    ref = oracle(model, [x])[0]
    assert ref[0, 3] == 32 and oracle(model, [x], reference=False)[0][0, 3] == 31
    np.testing.assert_array_equal(softmax_8bit(x, 0.05, 1.0), ref)
    cm = _compile(model, "ethos-u55-128")
    np.testing.assert_array_equal(cm.run(x)[0].reshape(ref.shape), ref)
