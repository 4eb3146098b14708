"""LOGISTIC, TANH, LEAKY_RELU (int8 LUTs) and QUANTIZE (requantization) as NPU operations
(backends/ethos_u/ops_lut.py): the tables against TFLite Micro's int8 kernels over every input
code, then models through ``npu_runtime="stream"`` on the functional model, bit-exact with
TFLite Micro, layer by layer and inside a planned cascade, and what is refused by name."""

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.backends.ethos_u import ops_lut
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError
from tvm_ethos.patterns import QOp

pytest.importorskip("ethosu.vela")

ALL_CODES = np.arange(-128, 128, dtype=np.int8)
KINDS = ("sigmoid", "tanh", "leaky_relu")
ACCELERATORS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
scales = st.floats(1e-3, 0.5).map(lambda v: float(np.float32(v)))
zero_points = st.integers(-128, 127)


def _qop(kind, in_q, out_q, alpha=0.2, dtypes=("int8", "int8"), act=(-128, 127)):
    return QOp(kind=kind, inputs=[], in_shapes=[(1, 256)], in_dtypes=[dtypes[0]],
               out_shape=(1, 256), out_dtype=dtypes[1], in_q=[in_q], out_q=out_q,
               attrs={"alpha": alpha}, act_min=act[0], act_max=act[1])


def _out_q(kind, draw_q):
    """The output quantization TFLite's converter gives LOGISTIC / TANH (TFLite Micro's int8
    kernels require it); LEAKY_RELU takes any."""
    return tb.ACTIVATION_OUT_Q[kind] if kind in tb.ACTIVATION_OUT_Q else draw_q


@settings(max_examples=60, deadline=None)
@given(kind=st.sampled_from(KINDS), s_in=scales, z_in=zero_points, s_out=scales,
       z_out=zero_points, alpha=st.sampled_from([0.2, 0.01, 0.5, 0.9, 1.5, -0.3]))
@example(kind="leaky_relu", s_in=0.5, z_in=0, s_out=float(np.float32(1 / 3)), z_out=0,
         alpha=0.2)  # identity ratio 1.5 in float32, just below it in double
@example(kind="leaky_relu", s_in=0.3125, z_in=0, s_out=0.375, z_out=0,
         alpha=0.5)  # alpha ratio 5/12: float32 rounds it down, double up (v=-123: -52)
@example(kind="leaky_relu", s_in=0.3125, z_in=5, s_out=0.6000000238418579, z_out=-4,
         alpha=-0.3)  # negative alpha: the magnitude is applied, then negated (v=-124: 15)
def test_table_is_tflite_micros_kernel_on_every_code(kind, s_in, z_in, s_out, z_out, alpha):
    out_q = _out_q(kind, (s_out, z_out))
    model = tb.activation(kind, shape=(1, 256), in_q=(s_in, z_in), out_q=out_q, alpha=alpha)
    want = tflm_oracle(model, [ALL_CODES.reshape(1, 256)])[0].ravel()
    got = ops_lut.table(_qop(kind, (s_in, z_in), out_q, alpha))
    np.testing.assert_array_equal(got, want)


def _hard_swish(in_q, out_q):
    x = tb.T([1, 256], "int8", scale=in_q[0], zp=in_q[1])
    y = tb.T([1, 256], "int8", scale=out_q[0], zp=out_q[1])
    return tb.build([x, y], [0], [1], tb.BO.HARD_SWISH)


@settings(max_examples=60, deadline=None)
@given(s_in=scales, z_in=zero_points, s_out=scales, z_out=zero_points)
@example(s_in=0.25, z_in=-41, s_out=0.001, z_out=-56)  # refused by both
@example(s_in=0.125, z_in=0, s_out=0.125, z_out=0)
def test_hard_swish_table_is_tflite_micros_kernel_on_every_code(s_in, z_in, s_out, z_out):
    """TFLite's int16 fixed point, which TFLite Micro refuses (and so do we) where the input
    scale is over 128 times the output's."""
    model = _hard_swish((s_in, z_in), (s_out, z_out))
    try:
        want = tflm_oracle(model, [ALL_CODES.reshape(1, 256)])[0].ravel()
    except RuntimeError:
        with pytest.raises(UnsupportedOperatorError, match="HARD_SWISH.*128 times"):
            ops_lut.hard_swish_table((s_in, z_in), (s_out, z_out))
        return
    q = _qop("hard_swish", (s_in, z_in), (s_out, z_out))
    np.testing.assert_array_equal(ops_lut.table(q), want)


def test_leaky_relu_stream_follows_tflite_micro_where_litert_rounds_otherwise():
    """Input scale 0.5, output scale 1/3: the identity ratio is 1.5 in float32 (LiteRT's, and
    the emulator's) and just below it in double (TFLite Micro's), so odd codes, on a tie,
    round differently; the stream is TFLite Micro's."""
    from tvm_ethos.compute.quant import leaky_relu_lut

    in_q, out_q = (0.5, 0), (float(np.float32(1 / 3)), 0)
    model = tb.activation("leaky_relu", shape=(1, 4, 8, 8), in_q=in_q, out_q=out_q, alpha=0.2)
    codes = ALL_CODES.reshape(1, 4, 8, 8)
    assert not np.array_equal(oracle(model, [codes])[0], tflm_oracle(model, [codes])[0])
    assert not np.array_equal(ops_lut.leaky_relu_table(in_q, out_q, 0.2),
                              leaky_relu_lut("int8", in_q, out_q, 0.2))
    cm = _compile(model, "ethos-u55-128")
    _streamed(cm)
    _assert_tflm(model, cm, [codes])


def test_a_fused_clamp_is_part_of_the_table():
    q = _qop("leaky_relu", (0.05, 3), (0.04, -2), act=(-10, 40))
    full = ops_lut.table(_qop("leaky_relu", (0.05, 3), (0.04, -2)))
    assert full.min() < -10 and full.max() > 40  # the clamp changes this table
    np.testing.assert_array_equal(ops_lut.table(q), np.clip(full, -10, 40))


def _compile(model, config):
    return tvm_ethos.compile(model, f"ethos-u -accelerator_config={config},llvm",
                             npu_runtime="stream", cache_dir=False)


def _streamed(cm) -> dict:
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    return entry


def _assert_tflm(model, cm, xs):
    ref = tflm_oracle(model, xs)[0]
    got = cm.run(*xs)[0].reshape(ref.shape)
    np.testing.assert_array_equal(got, ref)
    assert any(t.startswith("stream ") for t in cm.last_run_stats.trace)
    return ref


@pytest.mark.parametrize("config", ACCELERATORS)
@pytest.mark.parametrize("kind", KINDS)
def test_lut_stream_bit_exact_with_tflite_micro_on_every_code(kind, config):
    """Every int8 code, once per element of a 4 x 8 x 8 map, through the stream."""
    model = tb.activation(kind, shape=(1, 4, 8, 8), in_q=(0.07, -5), out_q=None, alpha=0.3)
    cm = _compile(model, config)
    entry = _streamed(cm)
    # the table (256 int8 entries) goes to SHRAM (base pointer 0x103 = 259) by a DMA
    assert entry["dma_bytes"].get("0->259", 0) >= 256 and entry["dma_bytes"]["0->259"] % 256 == 0
    assert entry["commands"]["NPU_OP_POOL"] >= 1
    ref = _assert_tflm(model, cm, [ALL_CODES.reshape(1, 4, 8, 8)])
    assert len(np.unique(ref)) > 20  # the table is not constant over the codes


@settings(max_examples=6, deadline=None)
@given(kind=st.sampled_from(KINDS), s_in=scales, z_in=zero_points, s_out=scales,
       z_out=zero_points, h=st.integers(1, 6), w=st.integers(1, 6), c=st.integers(1, 20),
       seed=st.integers(0, 2**16))
def test_lut_stream_bit_exact_for_any_shape_and_quantization(kind, s_in, z_in, s_out, z_out,
                                                              h, w, c, seed):
    model = tb.activation(kind, shape=(1, h, w, c), in_q=(s_in, z_in),
                          out_q=_out_q(kind, (s_out, z_out)))
    cm = _compile(model, "ethos-u55-128")
    _streamed(cm)
    x = np.random.RandomState(seed).randint(-128, 128, size=(1, h, w, c)).astype(np.int8)
    _assert_tflm(model, cm, [x])


def _conv_then(kind, rs, shape=(1, 12, 12, 8)):
    """CONV_2D (SAME, 3x3) then a LUT activation: a cascade the planner can stripe."""
    x = tb._qact(rs, list(shape))
    w, bias, y = tb._conv_tensors(rs, x, 8)
    out_q = tb.ACTIVATION_OUT_Q.get(kind, (0.04, -2))
    z = tb.T(list(y.shape), "int8", scale=out_q[0], zp=out_q[1])
    code = {"sigmoid": tb.BO.LOGISTIC, "tanh": tb.BO.TANH}[kind]
    return tb.serialize([x, w, bias, y, z], [tb._conv_op([0, 1, 2], [3]), (code, 0, None,
                                                                           [3], [4])], [0], [4])


@pytest.mark.parametrize("kind", ("sigmoid", "tanh"))
def test_lut_after_a_convolution_in_one_stream(kind):
    model = _conv_then(kind, np.random.RandomState(7))
    cm = _compile(model, "ethos-u55-128")
    entry = _streamed(cm)
    assert entry["commands"]["NPU_OP_CONV"] >= 1 and entry["commands"]["NPU_OP_POOL"] >= 1
    rs = np.random.RandomState(2)
    outs = [_assert_tflm(model, cm, [rs.randint(-128, 128, (1, 12, 12, 8)).astype(np.int8)])
            for _ in range(2)]
    assert not np.array_equal(*outs)


def _quantize(shape, src, dst):
    """One QUANTIZE from ``src`` to ``dst``, each (dtype, scale, zero point)."""
    x = tb.T(list(shape), src[0], scale=src[1], zp=src[2])
    y = tb.T(list(shape), dst[0], scale=dst[1], zp=dst[2])
    return tb.build([x, y], [0], [1], tb.BO.QUANTIZE)


@settings(max_examples=8, deadline=None)
@given(s_in=scales, z_in=zero_points, ratio=st.floats(1 / 300, 300), z_out=zero_points,
       config=st.sampled_from(ACCELERATORS))
def test_requantize_stream_bit_exact_with_tflite_micro(s_in, z_in, ratio, z_out, config):
    s_out = float(np.float32(s_in * ratio))
    model = _quantize((1, 4, 8, 8), ("int8", s_in, z_in), ("int8", s_out, z_out))
    cm = _compile(model, config)
    entry = _streamed(cm)
    assert entry["commands"]["NPU_OP_POOL"] >= 1
    _assert_tflm(model, cm, [ALL_CODES.reshape(1, 4, 8, 8)])


#: every int16 code in steps of 16 (and both ends), as a 1 x 64 x 64 map
INT16_CODES = np.concatenate([np.arange(-32768, 32768, 16)[:-1], [32767]]).astype(np.int16)


def _codes(dtype, shape):
    if dtype == "int16":
        return INT16_CODES.reshape(shape)
    lo = int(np.iinfo(dtype).min)  # every 8-bit code, repeated
    return np.resize(np.arange(lo, lo + 256), shape).astype(dtype)


@settings(max_examples=8, deadline=None)
@given(pair=st.sampled_from([("int16", "int8"), ("int8", "int16"), ("int16", "int16")]),
       s_in=st.floats(1e-5, 0.1).map(lambda v: float(np.float32(v))),
       ratio=st.floats(1 / 300, 300), z8=zero_points, z16=st.integers(-300, 300),
       config=st.sampled_from(ACCELERATORS))
def test_int16_requantize_stream_bit_exact_with_tflite_micro(pair, s_in, ratio, z8, z16,
                                                             config):
    """QUANTIZE with INT16 tensors on the NPU, over the int16 range."""
    zps = {"int16": z16, "int8": z8}
    src = (pair[0], s_in, zps[pair[0]])
    dst = (pair[1], float(np.float32(s_in * ratio)), zps[pair[1]])
    model = _quantize((1, 64, 64), src, dst)
    cm = _compile(model, config)
    entry = _streamed(cm)
    assert entry["commands"]["NPU_OP_POOL"] >= 1
    _assert_tflm(model, cm, [_codes(pair[0], (1, 64, 64))])


@pytest.mark.parametrize("src, dst", [(("uint8", 0.05, 130), ("int8", 0.03, -4)),
                                      (("int8", 0.05, 3), ("uint8", 0.07, 128))])
def test_uint8_int8_requantize_stream_bit_exact_with_tflite_micro(src, dst):
    model = _quantize((1, 16, 16), src, dst)
    cm = _compile(model, "ethos-u55-128")
    _streamed(cm)
    _assert_tflm(model, cm, [_codes(src[0], (1, 16, 16))])


def test_an_int16_to_uint8_quantize_is_refused_as_tflite_micro_and_litert_refuse_it():
    # uint8 -> int16 is LiteRT's Requantize, on the NPU (tests/tvm_ethos/test_dtype_sweep_forms)
    from tvm_ethos.errors import UnsupportedModelError

    model = _quantize((1, 4, 8), ("int16", 0.05, 0), ("uint8", 0.001, 0))
    with pytest.raises(UnsupportedModelError, match="QUANTIZE.*INT16"):
        tvm_ethos.load_model(model)


def test_int16_quantize_of_a_trained_model_runs_on_the_npu():
    """keyword_scrambled_8bit's first operator, QUANTIZE int16 -> int8, leaves TFLite Micro,
    and so does its last, int16 -> int32, which Vela keeps (an int32 OFM:
    test_quantize32.py)."""
    from tests.helpers.models import model_path

    source = model_path("tflite-micro/keyword_scrambled_8bit").read_bytes()
    cm = tvm_ethos.compile(source, "ethos-u -accelerator_config=ethos-u55-128", cache_dir=False)
    quantize = [p.placed_on for p in cm.placement if p.kind == "QUANTIZE"]
    assert quantize == ["ethos-u", "ethos-u"], cm.placement
    assert cm.placement[0].kind == "QUANTIZE" and cm.placement[0].placed_on == "ethos-u"
    rs = np.random.RandomState(5)
    for _ in range(2):
        x = rs.randint(-32768, 32768, size=(1, 96)).astype(np.int16)
        np.testing.assert_array_equal(cm.run(x)[0], tflm_oracle(source, [x])[0])


def test_requantize_scale_is_tflites_multiplier():
    q = _qop("requantize", (0.625, 3), (0.25, -7))
    # 0.625 / 0.25 = 2.5 = 0.625 * 2**2 (exact in float32): TFLite's (M, shift 2) is the
    # NPU's (M, 31 - 2)
    assert ops_lut.requantize_scale(q) == (round(0.625 * 2**31), 29)
    # 0.25 / 0.625 = 0.4 = 0.8 * 2**-1: a right shift of 32
    assert ops_lut.requantize_scale(_qop("requantize", (0.25, 0), (0.625, 0)))[1] == 32


@pytest.mark.parametrize("ratio", [2.0**-28, 2.0**40])
def test_extreme_scale_ratios_follow_tflites_multiplier(ratio):
    """A ratio of 2**-28 is the NPU's right shift 58 (of its six bits); one beyond 2**31
    saturates TFLite's multiplier (INT32_MAX, shift 30: the NPU's right shift 1)."""
    model = _quantize((1, 2, 2, 16), ("int8", 2.0**-20, 0), ("int8", 2.0**-20 / ratio, 1))
    cm = _compile(model, "ethos-u55-128")
    _streamed(cm)
    _assert_tflm(model, cm, [ALL_CODES[64:128].reshape(1, 2, 2, 16)])


def test_what_the_npu_cannot_express_is_refused_by_name():
    with pytest.raises(UnsupportedOperatorError, match="LOGISTIC.*int8 -> uint8.*int8"):
        ops_lut.table(_qop("sigmoid", (0.05, 3), (1 / 256, 0), dtypes=("int8", "uint8")))
    with pytest.raises(UnsupportedOperatorError, match="ELU.*uint8 -> uint8.*LOGISTIC"):
        ops_lut.table(_qop("elu", (0.05, 3), (0.05, 3), dtypes=("uint8", "uint8")))
    with pytest.raises(UnsupportedOperatorError, match="QUANTIZE.*int8 -> int32"):
        ops_lut.requantize_scale(_qop("requantize", (0.05, 0), (0.05, 0),
                                      dtypes=("int8", "int32")))


def test_same_model_same_stream_bytes():
    model = tb.activation("tanh", shape=(1, 3, 5, 8), in_q=(0.03, 1))
    a, b = (_compile(model, "ethos-u55-128") for _ in range(2))
    pa, pb = (next(iter(c.program.payloads.values())) for c in (a, b))
    assert pa.driver_payload == pb.driver_payload and pa.flash == pb.flash

