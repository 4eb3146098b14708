"""uint8 LOGISTIC, TANH, LEAKY_RELU, HARD_SWISH and GELU on the Ethos-U (issue 28): a uint8
table of 256 entries in code order (``ops_lut.uint8_table``) looked up by the same identity
pool as the int8 ones, as Vela 5.2 puts them on the NPU. TFLite Micro has no uint8 kernel for
them (it refuses these models at invoke, and has no GELU), so LiteRT's reference kernel
(BUILTIN_REF) is the oracle: the tables on every code for any quantization, then the models on
every code through ``ethos-u`` (the tflite-micro host, the NPU's stream on the functional
model) and ``ethos-u,llvm`` (the stream, and the TIR emulator)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import oracle
from tests.tvm_ethos.test_tflite_exp_gelu_log import gelu_model
from tvm_ethos.backends.ethos_u import ops_lut
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError
from tvm_ethos.patterns import QOp

pytest.importorskip("ethosu.vela")

KINDS = ("sigmoid", "tanh", "leaky_relu", "hard_swish", "gelu", "gelu_tanh")
ACCELERATORS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
#: the output quantization TFLite's uint8 LOGISTIC / TANH kernels require
FIXED_OUT_Q = {"sigmoid": (1 / 256, 0), "tanh": (1 / 128, 128)}
scales = st.floats(1e-3, 0.5).map(lambda v: float(np.float32(v)))
codes8 = st.integers(0, 255)


def every_code(shape=(1, 256)) -> np.ndarray:
    return np.arange(256, dtype=np.uint8).reshape(shape)


def model(kind: str, in_q: tuple, out_q: tuple, shape=(1, 256), alpha: float = 0.2) -> bytes:
    """One uint8 ``kind`` operator over ``shape``."""
    out_q = FIXED_OUT_Q.get(kind, out_q)
    if kind in ("gelu", "gelu_tanh"):
        return gelu_model(in_q, out_q, kind == "gelu_tanh", shape=shape, dtype="uint8")
    if kind == "hard_swish":
        x = tb.T(list(shape), "uint8", scale=in_q[0], zp=in_q[1])
        y = tb.T(list(shape), "uint8", scale=out_q[0], zp=out_q[1])
        return tb.build([x, y], [0], [1], tb.BO.HARD_SWISH)
    return tb.activation(kind, shape, in_q, out_q, alpha=alpha, dtype="uint8")


def _qop(kind: str, in_q: tuple, out_q: tuple, alpha: float) -> QOp:
    op_kind = "gelu" if kind == "gelu_tanh" else kind
    return QOp(kind=op_kind, inputs=[], in_shapes=[(1, 256)], in_dtypes=["uint8"],
               out_shape=(1, 256), out_dtype="uint8", in_q=[in_q],
               out_q=FIXED_OUT_Q.get(kind, out_q),
               attrs={"alpha": alpha, "approximate": kind == "gelu_tanh"},
               act_min=0, act_max=255)


def _litert(data: bytes, x: np.ndarray) -> np.ndarray | None:
    """LiteRT's reference kernel's output, None where its prepare refuses the scales."""
    try:
        return oracle(data, [x])[0]
    except (RuntimeError, ValueError):
        return None


def _check_table(kind, s_in, z_in, s_out, z_out, alpha):
    in_q, out_q = (s_in, z_in), (s_out, z_out)
    want = _litert(model(kind, in_q, out_q, alpha=alpha), every_code())
    q = _qop(kind, in_q, out_q, alpha)
    if want is None:   # HARD_SWISH past 128 times the output scale: refused by both
        assert kind == "hard_swish"
        with pytest.raises(UnsupportedOperatorError, match="HARD_SWISH.*128 times"):
            ops_lut.table(q)
        return
    got = ops_lut.table(q)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, want.ravel())


TABLE_CASE = dict(kind=st.sampled_from(KINDS), s_in=scales, z_in=codes8, s_out=scales,
                  z_out=codes8, alpha=st.sampled_from([0.2, 0.01, 0.5, 1.5, -0.3]))


@settings(max_examples=20, deadline=None)
@given(**TABLE_CASE)
def test_the_uint8_table_is_litert_reference_kernel_on_every_code(kind, s_in, z_in, s_out,
                                                                  z_out, alpha):
    _check_table(kind, s_in, z_in, s_out, z_out, alpha)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(**TABLE_CASE)
def test_the_uint8_table_is_litert_reference_kernel_for_many_quantizations(kind, s_in, z_in,
                                                                           s_out, z_out, alpha):
    _check_table(kind, s_in, z_in, s_out, z_out, alpha)


def _streamed(cm) -> dict:
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    return entry


@pytest.mark.parametrize("kind", KINDS)
def test_a_uint8_table_operator_runs_on_the_npu_of_the_tflite_micro_host(kind):
    """``--target ethos-u``: the operator becomes the ``ethos-u`` operator (TFLite Micro would
    refuse the source model's operator), its stream on every code equal to LiteRT."""
    data = model(kind, (0.05, 128), (0.04, 120), shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(data, "ethos-u -accelerator_config=ethos-u55-128", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement
    x = every_code((1, 4, 8, 8))
    want = oracle(data, [x])[0]
    assert len(np.unique(want)) > 20  # the table is not constant over the codes
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


@pytest.mark.parametrize("runtime", ["stream", "tir"])
def test_ethos_u_llvm_runs_a_uint8_table_on_the_npu(runtime):
    """``ethos-u,llvm``: on the NPU, its table DMA'd to SHRAM (base pointer 0x103 = 259) for
    the stream, equal to LiteRT on every code whether the stream or the emulator runs it."""
    data = model("sigmoid", (0.06, 100), None, shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(data, "ethos-u -accelerator_config=ethos-u55-128,llvm",
                           npu_runtime=runtime, cache_dir=False)
    assert cm.partition_summary == {"ethos-u": 1}
    if runtime == "stream":
        entry = _streamed(cm)
        assert entry["dma_bytes"].get("0->259", 0) >= 256
    x = every_code((1, 4, 8, 8))
    want = oracle(data, [x])[0]
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)



def _uint8_conv_then_logistic(rs) -> bytes:
    """A uint8 CONV_2D (SAME 3x3, uint8 weights) then a uint8 LOGISTIC over 12 x 12 x 8."""
    shape = [1, 12, 12, 8]
    x = tb.T(shape, "uint8", scale=0.05, zp=120)
    w = tb.T([8, 3, 3, 8], "uint8", scale=0.01, zp=128,
             data=rs.randint(0, 256, (8, 3, 3, 8)).astype(np.uint8))
    bias = tb.T([8], "int32", scale=np.float32(0.05 * 0.01), zp=0,
                data=rs.randint(-2000, 2000, 8).astype(np.int32))
    y = tb.T(shape, "uint8", scale=0.1, zp=128)
    z = tb.T(shape, "uint8", scale=1 / 256, zp=0)
    return tb.serialize([x, w, bias, y, z], [tb._conv_op([0, 1, 2], [3]),
                                             (tb.BO.LOGISTIC, 0, None, [3], [4])], [0], [4])


def test_a_uint8_table_after_a_convolution_in_one_striped_stream():
    """The planner stripes the LOGISTIC after the convolution: one ``ethos-u`` operator whose
    stream loads the uint8 table before each stripe's pool, equal to LiteRT."""
    data = _uint8_conv_then_logistic(np.random.RandomState(7))
    cm = tvm_ethos.compile(data, "ethos-u -accelerator_config=ethos-u55-128", cache_dir=False)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}
    assert len({p.operator for p in cm.placement}) == 1
    stripes = re.search(r"\(conv 1, pool (\d+)\)", cm.plan_table)
    assert stripes and int(stripes[1]) > 1, cm.plan_table
    outs = []
    for seed in range(2):
        x = np.random.RandomState(seed).randint(0, 256, (1, 12, 12, 8)).astype(np.uint8)
        want = oracle(data, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)
        outs.append(want)
    assert not np.array_equal(*outs)

@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(KINDS), s_in=scales, z_in=codes8, s_out=scales, z_out=codes8,
       h=st.integers(1, 6), w=st.integers(1, 6), c=st.integers(1, 20),
       config=st.sampled_from(ACCELERATORS), seed=st.integers(0, 2**16))
def test_a_uint8_table_stream_for_any_shape_and_quantization(kind, s_in, z_in, s_out, z_out,
                                                             h, w, c, config, seed):
    data = model(kind, (s_in, z_in), (s_out, z_out), shape=(1, h, w, c))
    x = np.random.RandomState(seed).randint(0, 256, size=(1, h, w, c)).astype(np.uint8)
    want = _litert(data, x)
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={config},llvm",
                           npu_runtime="stream", cache_dir=False)
    if want is None:  # HARD_SWISH's refused scales: not an NPU operator either
        assert cm.partition_summary.get("ethos-u", 0) == 0, cm.partition_summary
        return
    _streamed(cm)
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


def test_same_uint8_model_same_stream_bytes():
    data = model("leaky_relu", (0.03, 7), (0.02, 200), shape=(1, 3, 5, 8))
    a, b = (tvm_ethos.compile(data, "ethos-u,llvm", npu_runtime="stream", cache_dir=False)
            for _ in range(2))
    pa, pb = (next(iter(c.program.payloads.values())) for c in (a, b))
    assert pa.driver_payload == pb.driver_payload and pa.flash == pb.flash
    table = ops_lut.table(_qop("leaky_relu", (0.03, 7), (0.02, 200), 0.2)).tobytes()
    assert table in pa.flash   # the uint8 table, in code order, is what the DMA copies
