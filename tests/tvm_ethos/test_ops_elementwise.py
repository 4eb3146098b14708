"""SUB, MINIMUM and MAXIMUM on the Ethos-U (ops_elementwise.py): one NPU elementwise operation
each, in the stream and in the TIR emulator, bit for bit TFLite Micro's, over shapes (with a
broadcast operand on either side), quantization and fused activations. MINIMUM / MAXIMUM whose
inputs are not quantized as the output stay TFLite operators (Vela's constraint), still
TFLite Micro's results. RELU, RELU6 and RELU_N1_TO_1 standalone: a 1x1 depthwise convolution
each, against TFLite Micro (RELU_N1_TO_1, which TFLite Micro has no kernel for: LiteRT's
reference kernels); RELU6 quantized unlike its input clamps the codes as TFLite Micro does
(every int8 code). ABS: one NPU elementwise operation."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from tflite_builder import BO, BOPT, T

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.compute.quant import quantize_multiplier
from tvm_ethos.compute.relu_requant import relu_multiplier

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

CODES = {"sub": BO.SUB, "minimum": BO.MINIMUM, "maximum": BO.MAXIMUM}


def binary_model(kind, a_shape, b_shape, a_q, b_q, out_q, act=None) -> bytes:
    """One SUB / MINIMUM / MAXIMUM of two int8 inputs (``act`` fused into SUB)."""
    out_shape = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    tensors = [T(list(a_shape), "int8", scale=a_q[0], zp=a_q[1]),
               T(list(b_shape), "int8", scale=b_q[0], zp=b_q[1]),
               T(out_shape, "int8", scale=out_q[0], zp=out_q[1])]
    options = None
    if kind == "sub":
        def options(b):
            tflite.SubOptionsStart(b)
            tflite.SubOptionsAddFusedActivationFunction(b, tb.ACT[act])
            return tflite.SubOptionsEnd(b)
    op = (CODES[kind], BOPT.SubOptions if options else 0, options, [0, 1], [2])
    return tb.serialize(tensors, [op], [0, 1], [2])


def _check(data: bytes, target: str, seed: int, runs: int = 2) -> list[str]:
    """Compile ``data`` for ``target``, compare ``runs`` random inputs with TFLite Micro;
    returns where each operator was placed (``ethos-u`` targets)."""
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    rs = np.random.RandomState(seed)
    for _ in range(runs):
        xs = [rs.randint(-128, 128, size=s.shape).astype(np.int8) for s in cm.inputs]
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    return [p.placed_on for p in getattr(cm, "placement", ())]


scales = st.floats(0.005, 0.5).map(lambda v: float(np.float32(v)))
zero_points = st.integers(-100, 100)
quant = st.tuples(scales, zero_points)


@st.composite
def shapes(draw):
    """An NHWC shape and a second operand's: equal, or broadcast along some size-1 axes on
    one side (the NPU broadcasts one operand)."""
    full = tuple(draw(st.lists(st.integers(1, 7), min_size=3, max_size=3)))
    full = (1,) + full
    mask = draw(st.lists(st.booleans(), min_size=3, max_size=3))
    small = (1,) + tuple(1 if m else d for m, d in zip(mask, full[1:]))
    return (small, full) if draw(st.booleans()) else (full, small)


@settings(max_examples=8, deadline=None)
@given(shp=shapes(), a_q=quant, b_q=quant, out_q=quant,
       act=st.sampled_from([None, "relu", "relu6", "relu_n1_to_1"]), seed=st.integers(0, 999))
def test_sub_in_the_stream_equals_tflite_micro(shp, a_q, b_q, out_q, act, seed):
    data = binary_model("sub", *shp, a_q, b_q, out_q, act)
    assert _check(data, "ethos-u", seed) == ["ethos-u"]


@settings(max_examples=8, deadline=None)
@given(kind=st.sampled_from(["minimum", "maximum"]), shp=shapes(), q=quant,
       seed=st.integers(0, 999))
def test_minimum_maximum_in_the_stream_equal_tflite_micro(kind, shp, q, seed):
    data = binary_model(kind, *shp, q, q, q)
    assert _check(data, "ethos-u", seed) == ["ethos-u"]


@settings(max_examples=4, deadline=None)
@given(kind=st.sampled_from(["sub", "minimum", "maximum"]), shp=shapes(), q=quant,
       out_q=quant, seed=st.integers(0, 999))
def test_the_tir_emulator_and_the_host_kernel_equal_tflite_micro(kind, shp, q, out_q, seed):
    """The same operators on ``ethos-u,llvm`` (the TIR emulator's kernel, ``te_ops``) and on
    ``llvm`` alone (the exact host kernel); MINIMUM / MAXIMUM with another output quantization
    stay on the host, whose kernel compares codes as TFLite does."""
    same = kind != "sub" and seed % 2 == 0
    data = binary_model(kind, *shp, q, q if same else (q[0] * 1.5, q[1] - 7),
                        q if same else out_q)
    for target in ("ethos-u,llvm", "llvm"):
        _check(data, target, seed, runs=1)


@pytest.mark.parametrize("kind", ["minimum", "maximum"])
def test_minimum_maximum_quantized_unlike_the_output_stay_tflite_operators(kind):
    data = binary_model(kind, (1, 3, 4, 5), (1, 3, 4, 5), (0.05, 3), (0.03, -4), (0.05, 3))
    assert _check(data, "ethos-u", 0) == ["tflite-micro"]


def _conv_sub_max_conv(rs):
    """CONV_2D, SUB of its input, MAXIMUM with the SUB's own output broadcast from one row,
    CONV_2D: the elementwise operators between convolutions, where the planner can stripe
    them."""
    x = tb._qact(rs, [1, 8, 6, 8])
    w, bias, a = tb._conv_tensors(rs, x, 8)
    s = T([1, 8, 6, 8], "int8", scale=rs.uniform(0.05, 0.2), zp=int(rs.randint(-20, 20)))
    m = T([1, 8, 6, 8], "int8", scale=float(s.scale[0]), zp=int(s.zp[0]))
    w2, bias2, y = tb._conv_tensors(rs, m, 4)
    sub = (BO.SUB, 0, None, [3, 0], [4])
    mx = (BO.MAXIMUM, 0, None, [4, 4], [5])
    return tb.serialize([x, w, bias, a, s, m, w2, bias2, y],
                        [tb._conv_op([0, 1, 2], [3]), sub, mx, tb._conv_op([5, 6, 7], [8])],
                        [0], [8])


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_sub_and_maximum_between_convolutions_equal_tflite_micro(accelerator):
    data = _conv_sub_max_conv(np.random.RandomState(3))
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={accelerator}",
                           cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"] * 4
    rs = np.random.RandomState(1)
    for _ in range(3):
        xs = [rs.randint(-128, 128, size=s.shape).astype(np.int8) for s in cm.inputs]
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        np.testing.assert_array_equal(got.reshape(want.shape), want)


RELUS = {"relu": BO.RELU, "relu6": BO.RELU6, "relu_n1_to_1": BO.RELU_N1_TO_1}


def relu_model(kind, shape, in_q, out_q) -> bytes:
    tensors = [T(list(shape), "int8", scale=in_q[0], zp=in_q[1]),
               T(list(shape), "int8", scale=out_q[0], zp=out_q[1])]
    return tb.serialize(tensors, [(RELUS[kind], 0, None, [0], [1])], [0], [1])


def _check_relu(data: bytes, kind: str, target: str, seed: int) -> list[str]:
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = [rs.randint(-128, 128, size=s.shape).astype(np.int8) for s in cm.inputs]
        (want,) = oracle(data, xs) if kind == "relu_n1_to_1" else tflm_oracle(data, xs)
        (got,) = cm.run(*xs)
        np.testing.assert_array_equal(got.reshape(want.shape), want)
    return [p.placed_on for p in getattr(cm, "placement", ())]


nhwc = st.tuples(st.just(1), st.integers(1, 9), st.integers(1, 9), st.integers(1, 20))


@settings(max_examples=10, deadline=None)
@given(kind=st.sampled_from(sorted(RELUS)), shape=nhwc, in_q=quant, out_q=quant,
       seed=st.integers(0, 999))
def test_relus_in_the_stream_equal_tflite(kind, shape, in_q, out_q, seed):
    """RELU requantizes to any output quantization; RELU6 and RELU_N1_TO_1 as converters write
    them, the output quantized as the input."""
    data = relu_model(kind, shape, in_q, out_q if kind == "relu" else in_q)
    assert _check_relu(data, kind, "ethos-u", seed) == ["ethos-u"]


@settings(max_examples=4, deadline=None)
@given(kind=st.sampled_from(["relu", "relu6"]), shape=nhwc, in_q=quant, out_q=quant,
       seed=st.integers(0, 999))
def test_relus_on_the_tir_emulator_and_the_host_equal_tflite_micro(kind, shape, in_q, out_q,
                                                                   seed):
    data = relu_model(kind, shape, in_q, out_q if kind == "relu" else in_q)
    for target in ("ethos-u,llvm", "llvm"):
        _check_relu(data, kind, target, seed)


EVERY_INT8 = np.arange(-128, 128).astype(np.int8).reshape(1, 4, 8, 8)
#: scales from those where 6 / scale is a rounding tie (12, 4) to small ones, and above 12,
#: where the clamp is one code (as at a zero point of 127: test_collapsed_clamp.py)
wide_scales = st.one_of(st.sampled_from([12.0, 4.0, 0.8, 2.4, 13.0]), scales,
                        st.floats(1e-3, 50).map(lambda v: float(np.float32(v))))


def _relu6_requantizing(in_q, out_q, target):
    """RELU6 with the output quantized unlike the input, on every int8 code: TFLite Micro
    clamps the codes to those of 0 and 6 in the input's quantization and never reads the
    output's, so the NPU's 1x1 depthwise form clamps without rescaling."""
    data = relu_model("relu6", EVERY_INT8.shape, in_q, out_q)
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    (want,) = tflm_oracle(data, [EVERY_INT8])
    (got,) = cm.run(EVERY_INT8)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.partition_summary


@pytest.mark.parametrize("target", ["ethos-u", "ethos-u,llvm"])
def test_relu6_quantized_unlike_its_input_clamps_the_codes_on_the_npu(target):
    _relu6_requantizing((12.0, -3), (0.04, -2), target)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(in_q=st.tuples(wide_scales, st.integers(-128, 127)), out_q=quant,
       target=st.sampled_from(["ethos-u", "ethos-u,llvm"]))
def test_relu6_quantized_unlike_its_input_equals_tflite_micro_on_every_code(in_q, out_q,
                                                                           target):
    _relu6_requantizing(in_q, out_q, target)


def _litert_relu(kind, in_q, out_q, target):
    """RELU_N1_TO_1 / RELU_0_TO_1 quantized unlike the input, on every int8 code, against
    LiteRT's kernel (TFLite Micro has none): a requantization by the float32 quotient of the
    scales (``compute.relu_requant``), clamped."""
    code = {"relu_n1_to_1": BO.RELU_N1_TO_1, "relu_0_to_1": BO.RELU_0_TO_1}[kind]
    tensors = [T(list(EVERY_INT8.shape), "int8", scale=in_q[0], zp=in_q[1]),
               T(list(EVERY_INT8.shape), "int8", scale=out_q[0], zp=out_q[1])]
    data = tb.serialize(tensors, [(code, 0, None, [0], [1])], [0], [1])
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    (want,) = oracle(data, [EVERY_INT8])
    (got,) = cm.run(EVERY_INT8)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.partition_summary


@pytest.mark.parametrize("target", ["ethos-u", "ethos-u,llvm"])
def test_relu_n1_to_1_quantized_unlike_its_input_requantizes_on_the_npu(target):
    """0.05 -> 0.04: 0.05f / 0.04f is 1.25 exactly in float32 (LiteRT's multiplier), not in
    double (TFLite Micro's RELU's): codes -15, -11, -7, -3 and 1 are ties in one only."""
    _litert_relu("relu_n1_to_1", (0.05, 3), (0.04, -2), target)


def test_litert_relus_take_the_float32_quotient_and_tflite_micros_relu_the_double_one():
    assert relu_multiplier(0.05, 0.04, "clip(-1,1)") == quantize_multiplier(1.25)
    assert relu_multiplier(0.05, 0.04, "clip(0,1)") == quantize_multiplier(1.25)
    assert relu_multiplier(0.05, 0.04, "relu") != quantize_multiplier(1.25)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(["relu_n1_to_1", "relu_0_to_1"]),
       in_q=st.tuples(scales, st.integers(-128, 127)), out_q=st.tuples(scales, zero_points),
       target=st.sampled_from(["ethos-u", "ethos-u,llvm"]))
def test_litert_relus_quantized_unlike_the_input_equal_litert_on_every_code(kind, in_q, out_q,
                                                                            target):
    _litert_relu(kind, in_q, out_q, target)


def abs_model(shape, in_q, out_q) -> bytes:
    tensors = [T(list(shape), "int8", scale=in_q[0], zp=in_q[1]),
               T(list(shape), "int8", scale=out_q[0], zp=out_q[1])]
    return tb.serialize(tensors, [(BO.ABS, 0, None, [0], [1])], [0], [1])


@settings(max_examples=8, deadline=None)
@given(shape=nhwc, in_q=quant, out_q=quant, same=st.booleans(), seed=st.integers(0, 999))
def test_abs_in_the_stream_and_the_emulator_equals_tflite_micro(shape, in_q, out_q, same, seed):
    """ABS: one NPU elementwise operation; TFLite Micro rescales only when the scales differ,
    so both cases are drawn. Every int8 code is among the inputs."""
    data = abs_model(shape, in_q, in_q if same else out_q)
    rs = np.random.RandomState(seed)
    codes = np.arange(-128, 128).astype(np.int8)
    for target in ("ethos-u", "ethos-u,llvm"):
        cm = tvm_ethos.compile(data, target, cache_dir=False)
        if target == "ethos-u":
            assert [p.placed_on for p in cm.placement] == ["ethos-u"]
        n = int(np.prod(shape))
        x = np.concatenate([codes, rs.randint(-128, 128, max(0, n - 256)).astype(np.int8)])
        for k in range(0, 256, n) if n < 256 else (0,):
            xs = [np.resize(np.roll(x, -k), shape).astype(np.int8)]
            (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
            np.testing.assert_array_equal(got.reshape(want.shape), want)
