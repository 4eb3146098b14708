"""INT16 ADD, SUB, MUL, MINIMUM, MAXIMUM and RELU (every tensor INT16) from a .tflite: the
importer lets them through, the Ethos-U runs each as one operation (Vela's generator scales
16-bit operands with TFLite's int16 shift; ADD/SUB with unequal input scales stay TFLite
operators, ``compute.add_sub``; RELU is the 1x1 depthwise requantization), the llvm
host computes TFLite's int16 arithmetic (ADD/SUB's left shift 15); every output equal to
TFLite Micro's (INT16 LOGISTIC and TANH: test_int16_activation.py; RELU6 and LEAKY_RELU:
test_int16_leaky_relu_relu6.py)."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import tflm_oracle
from tvm_ethos.compute import add_sub
from tvm_ethos.frontend import operator_support

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

CODES = {"ADD": tb.BO.ADD, "SUB": tb.BO.SUB, "MUL": tb.BO.MUL, "MINIMUM": tb.BO.MINIMUM,
         "MAXIMUM": tb.BO.MAXIMUM}
SHAPE = (1, 4, 5, 8)


def int16_binary(kind: str, qa, qb, qo, b_shape=SHAPE, a_dtype="int16") -> bytes:
    """One ``kind`` of two int16 inputs (the second broadcast from ``b_shape``)."""
    a = tb.T(list(SHAPE), a_dtype, scale=qa[0], zp=qa[1])
    b = tb.T(list(b_shape), "int16", scale=qb[0], zp=qb[1])
    o = tb.T(list(SHAPE), "int16", scale=qo[0], zp=qo[1])
    return tb.serialize([a, b, o], [(CODES[kind], 0, None, [0, 1], [2])], [0, 1], [2])


def _inputs(b_shape, rs) -> list[np.ndarray]:
    return [rs.randint(-32768, 32768, size=s).astype(np.int16) for s in (SHAPE, b_shape)]


@st.composite
def cases(draw):
    """(kind, input quantizations, output quantization, second input's shape): MINIMUM and
    MAXIMUM with every tensor quantized alike (Vela's constraint), MUL with zero points 0
    (TFLite Micro's int16 MUL requires them)."""
    kind = draw(st.sampled_from(sorted(CODES)))
    scale = st.floats(1e-4, 1e-2).map(lambda v: float(np.float32(v)))
    zp = st.just(0) if kind == "MUL" else st.integers(-1000, 1000)
    qa, qb, qo = [(draw(scale), draw(zp)) for _ in range(3)]
    if kind in ("MINIMUM", "MAXIMUM"):
        qb = qo = qa
    elif kind in ("ADD", "SUB") and draw(st.booleans()):
        qb = (qa[0], qb[1])  # equal input scales: exact on the NPU (compute.add_sub)
    b_shape = draw(st.sampled_from([SHAPE, (1, 1, 1, 8), (1, 4, 5, 1)]))
    return kind, qa, qb, qo, b_shape


@settings(max_examples=5, deadline=None)
@given(case=cases(), accelerator=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_an_int16_elementwise_operator_is_one_npu_operation_equal_to_tflite_micro(case,
                                                                                   accelerator):
    kind, qa, qb, qo, b_shape = case
    model = int16_binary(kind, qa, qb, qo, b_shape)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    refused = kind in ("ADD", "SUB") and add_sub.npu_refusal(qa, qb, qo, subtract=kind == "SUB",
                                                             bits=16)
    assert placed.placed_on == ("tflite-micro" if refused else "ethos-u"), placed.why
    rs = np.random.RandomState(0)
    for _ in range(2):
        xs = _inputs(b_shape, rs)
        want = tflm_oracle(model, xs)[0]
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)


@pytest.mark.parametrize("kind", sorted(CODES))
def test_the_llvm_host_computes_tflite_micros_int16_arithmetic(kind):
    zp = 0 if kind == "MUL" else 5
    qa = (0.001, zp)
    qb, qo = ((0.0007, -zp), (0.0015, 2 * zp)) if kind not in ("MINIMUM", "MAXIMUM") else (qa, qa)
    model = int16_binary(kind, qa, qb, qo)
    cm = tvm_ethos.compile(model, "llvm", cache_dir=False)
    xs = _inputs(SHAPE, np.random.RandomState(1))
    want = tflm_oracle(model, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)


def test_mixed_int8_and_int16_inputs_are_still_refused():
    """Only all-INT16 elementwise operators are read as integer ones: TFLite's kernels take one
    type, so a mix is refused by the front door (in one line)."""
    model = int16_binary("ADD", (0.05, 0), (0.001, 0), (0.001, 0), a_dtype="int8")
    (verdict,) = operator_support(model)
    assert not verdict.importable and "\n" not in verdict.reason, verdict


@pytest.mark.parametrize("target", ["ethos-u", "llvm"])
@pytest.mark.parametrize("in_q, out_q", [((0.001, 0), (0.0007, 0)),
                                         ((1 / 4096, 0), (1 / 32768, 0))])
def test_an_int16_relu_is_tflite_micros_requantization(target, in_q, out_q):
    x = tb.T(list(SHAPE), "int16", scale=in_q[0], zp=in_q[1])
    y = tb.T(list(SHAPE), "int16", scale=out_q[0], zp=out_q[1])
    model = tb.serialize([x, y], [(tb.BO.RELU, 0, None, [0], [1])], [0], [1])
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    if target == "ethos-u":
        assert cm.placement[0].placed_on == "ethos-u", cm.placement[0].why
    xs = _inputs(SHAPE, np.random.RandomState(2))[:1]
    want = tflm_oracle(model, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)
