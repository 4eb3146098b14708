"""TFLite's int8 EXP, GELU, LOG and NEG on the Ethos-U (NEG, below: the codes negated).
TFLite's own float32 tables
(``compute.quant.exp_lut``: ``expf`` of each dequantized code; ``compute.quant.gelu_lut``: its
erf form in double or its tanh form in float32; ``compute.quant.log_lut``: ``logf``, the lowest
code where there is no logarithm), rounded half away from zero, that the llvm host and the TIR
emulator gather from and the NPU looks up in one LUT pool, as Vela 5.2 does. TFLite Micro's EXP
and LOG are float only and it has no GELU, so LiteRT's reference kernel (BUILTIN_REF) is the
oracle: each table must equal it on every int8 code, for any scales and zero points.
TVM's converter refuses a quantized GELU; ours writes TVM's float GELU between a dequantize and
a quantize, which the patterns read back as the table."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st
from operator_models import _opts

import tvm_ethos
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite
from tests.helpers.tflite_oracle import oracle
from tvm_ethos.compute.quant import exp_lut, gelu_lut, log_lut, neg_lut

pytest.importorskip("ethosu.vela")

ACCELERATORS = ["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]
scales = st.floats(1e-3, 1.0).map(lambda v: float(np.float32(v)))
zero_points = st.integers(-128, 127)
EVERY_CODE = np.arange(-128, 128, dtype=np.int8)


def exp_model(in_q, out_q, shape=(1, 256), dtype="int8") -> bytes:
    x = tb.T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), dtype, scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(tb.BO.EXP, 0, None, [0], [1])], [0], [1])


def log_model(in_q, out_q, shape=(1, 256)) -> bytes:
    x = tb.T(list(shape), "int8", scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), "int8", scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(tb.BO.LOG, 0, None, [0], [1])], [0], [1])


def neg_model(in_q, out_q, shape=(1, 256)) -> bytes:
    x = tb.T(list(shape), "int8", scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), "int8", scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(tb.BO.NEG, 0, None, [0], [1])], [0], [1])


def gelu_model(in_q, out_q, approximate: bool, shape=(1, 256), dtype="int8") -> bytes:
    x = tb.T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), dtype, scale=out_q[0], zp=out_q[1])
    otype, ofn = _opts("GeluOptions", Approximate=approximate)
    return tb.serialize([x, y], [(tb.BO.GELU, otype, ofn, [0], [1])], [0], [1])



def _runs_every_code(cm, model) -> None:
    """The compiled model's output on every int8 code (a 1x4x8x8 input) is LiteRT's reference
    on the source model."""
    x = EVERY_CODE.reshape(1, 4, 8, 8)
    want = oracle(model, [x])[0]
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)

@settings(max_examples=60, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points))
@example(in_q=(0.05, 3), out_q=(0.05, -128))     # the operator table's model
@example(in_q=(1.0, -128), out_q=(0.001, 127))   # nearly every code saturates
@example(in_q=(0.001, 0), out_q=(0.001, -128))   # exp close to 1 everywhere
def test_the_table_is_litert_reference_kernel_on_every_code(in_q, out_q):
    want = oracle(exp_model(in_q, out_q), [EVERY_CODE.reshape(1, 256)])[0].ravel()
    np.testing.assert_array_equal(exp_lut("int8", in_q, out_q), want)


@settings(max_examples=4, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points),
       accelerator=st.sampled_from(ACCELERATORS))
@example(in_q=(0.05, 3), out_q=(0.05, -128), accelerator="ethos-u55-128")
def test_the_npu_runs_exp_as_one_lut_equal_to_litert(in_q, out_q, accelerator):
    model = exp_model(in_q, out_q, shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _runs_every_code(cm, model)


def test_the_llvm_host_gathers_from_the_same_table():
    model = exp_model((0.02, -20), (0.03, 5), shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(model, "llvm", cache_dir=False)
    assert set(cm.partition_summary) == {"llvm"}, cm.partition_summary
    _runs_every_code(cm, model)


def test_an_int16_exp_litert_refuses_stays_off_the_npu():
    """LiteRT's int16 EXP takes zero points 0 only (the int16 form on the NPU:
    test_tflite_exp_log16.py); one with another is not given to the NPU."""
    cm = tvm_ethos.compile(exp_model((0.001, 4), (0.002, 0), shape=(1, 4, 8, 8),
                                     dtype="int16"), "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on != "ethos-u"


def test_the_planner_reads_exp_as_a_lut_part():
    graph = load_tflite(exp_model((0.05, 3), (0.05, -128), shape=(1, 4, 8, 8)))
    (part,) = graph.parts
    assert (part.kind, part.attr("op")) == ("unary", "exp")
    (npu,) = lower_part(part, part.output.shape)
    assert npu.lut_bytes == 256, npu


# --------------------------------------------------------------------------- GELU
@settings(max_examples=60, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points),
       approximate=st.booleans())
@example(in_q=(0.05, 3), out_q=(0.04, -2), approximate=False)   # the operator table's model
@example(in_q=(1.0, 0), out_q=(0.001, 0), approximate=True)     # both ends saturate
def test_the_gelu_table_is_litert_reference_kernel_on_every_code(in_q, out_q, approximate):
    want = oracle(gelu_model(in_q, out_q, approximate), [EVERY_CODE.reshape(1, 256)])[0]
    np.testing.assert_array_equal(gelu_lut("int8", in_q, out_q, approximate), want.ravel())


@settings(max_examples=4, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points),
       approximate=st.booleans(), accelerator=st.sampled_from(ACCELERATORS))
@example(in_q=(0.05, 3), out_q=(0.04, -2), approximate=True, accelerator="ethos-u65-256")
def test_the_npu_runs_gelu_as_one_lut_equal_to_litert(in_q, out_q, approximate, accelerator):
    model = gelu_model(in_q, out_q, approximate, shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _runs_every_code(cm, model)


@pytest.mark.parametrize("approximate", [False, True])
def test_the_llvm_host_gathers_from_the_gelu_table(approximate):
    model = gelu_model((0.03, -10), (0.02, -60), approximate, shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(model, "llvm", cache_dir=False)
    assert set(cm.partition_summary) == {"llvm"}, cm.partition_summary
    _runs_every_code(cm, model)


def test_a_gelu_carrying_another_operators_options_is_the_exact_form_as_litert():
    """LiteRT reads a GELU's options only when they are GeluOptions; a GELU carrying a
    SOFTMAX's (a beta whose first byte is not 0, where GeluOptions keeps its flag) is the
    exact form, not the tanh one those bytes would say."""
    beta = float(np.frombuffer(np.array([1, 0, 128, 63], np.uint8).tobytes(), np.float32)[0])
    x = tb.T([1, 4, 8, 8], "int8", scale=0.03, zp=-10)
    y = tb.T([1, 4, 8, 8], "int8", scale=0.02, zp=-60)
    otype, ofn = _opts("SoftmaxOptions", Beta=beta)
    model = tb.serialize([x, y], [(tb.BO.GELU, otype, ofn, [0], [1])], [0], [1])
    exact = gelu_lut("int8", (0.03, -10), (0.02, -60), False)
    assert not np.array_equal(exact, gelu_lut("int8", (0.03, -10), (0.02, -60), True))
    cm = tvm_ethos.compile(model, "llvm", cache_dir=False)
    _runs_every_code(cm, model)


def test_the_planner_reads_gelu_as_a_lut_part():
    graph = load_tflite(gelu_model((0.05, 3), (0.04, -2), False, shape=(1, 4, 8, 8)))
    (part,) = graph.parts
    assert (part.kind, part.attr("op")) == ("unary", "gelu")
    (npu,) = lower_part(part, part.output.shape)
    assert npu.lut_bytes == 256, npu


# --------------------------------------------------------------------------- LOG
@settings(max_examples=60, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points))
@example(in_q=(0.05, -128), out_q=(0.04, 0))     # the operator table's model
@example(in_q=(0.05, 127), out_q=(0.04, 0))      # no code above the zero point
@example(in_q=(1.0, -128), out_q=(0.001, -128))  # large logarithms saturate
def test_the_log_table_is_litert_reference_kernel_on_every_code(in_q, out_q):
    """Every code, those at or below the input zero point (log of zero or less) too."""
    want = oracle(log_model(in_q, out_q), [EVERY_CODE.reshape(1, 256)])[0].ravel()
    np.testing.assert_array_equal(log_lut("int8", in_q, out_q), want)


@settings(max_examples=4, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points),
       accelerator=st.sampled_from(ACCELERATORS))
@example(in_q=(0.05, -128), out_q=(0.04, 0), accelerator="ethos-u55-256")
def test_the_npu_runs_log_as_one_lut_equal_to_litert(in_q, out_q, accelerator):
    model = log_model(in_q, out_q, shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _runs_every_code(cm, model)


def test_the_llvm_host_gathers_from_the_log_table():
    model = log_model((0.02, -20), (0.03, 5), shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(model, "llvm", cache_dir=False)
    assert set(cm.partition_summary) == {"llvm"}, cm.partition_summary
    _runs_every_code(cm, model)


def test_the_planner_reads_log_as_a_lut_part():
    graph = load_tflite(log_model((0.05, -128), (0.04, 0), shape=(1, 4, 8, 8)))
    (part,) = graph.parts
    assert (part.kind, part.attr("op")) == ("unary", "log")
    (npu,) = lower_part(part, part.output.shape)
    assert npu.lut_bytes == 256, npu


# --------------------------------------------------------------------------- NEG
def test_the_neg_table_negates_codes_the_lowest_wrapping_to_itself():
    """Independent of the oracle: TFLite's quantized NEG is two's complement negation."""
    t = neg_lut("int8")
    assert t[0] == -128 and t[128] == 0 and t[255] == -127 and t[1] == 127
    np.testing.assert_array_equal(t[1:].astype(int), -EVERY_CODE[1:].astype(int))


@settings(max_examples=6, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points),
       accelerator=st.sampled_from(ACCELERATORS))
@example(in_q=(0.05, 3), out_q=(0.05, 3), accelerator="ethos-u55-128")   # the table's model
@example(in_q=(0.05, 3), out_q=(0.04, -2), accelerator="ethos-u65-256")  # quantization unread
def test_the_npu_and_the_host_negate_codes_as_litert(in_q, out_q, accelerator):
    """LiteRT's int8 NEG negates the codes whatever the quantization (TVM's converter negated
    the dequantized input: another result); TFLite Micro has no int8 NEG."""
    model = neg_model(in_q, out_q, shape=(1, 4, 8, 8))
    x = EVERY_CODE.reshape(1, 4, 8, 8)
    want = oracle(model, [x])[0]
    np.testing.assert_array_equal(want.ravel(), neg_lut("int8"))
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)
    host = tvm_ethos.compile(model, "llvm", cache_dir=False)
    np.testing.assert_array_equal(host.run(x)[0].reshape(want.shape), want)


def test_the_planner_reads_neg_as_one_npu_operation():
    """The planner costs NEG as Vela 5.2 lowers it (one elementwise SUB from zero); the stream
    looks it up in a table instead, one pool of the same shape."""
    graph = load_tflite(neg_model((0.05, 3), (0.05, 3), shape=(1, 4, 8, 8)))
    (part,) = graph.parts
    assert (part.kind, part.attr("op")) == ("unary", "neg")
    (npu,) = lower_part(part, part.output.shape)
    assert (npu.op, npu.ofm) == ("Sub", (1, 4, 8, 8)), npu
