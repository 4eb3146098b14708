"""TFLite's int8/int16 ADD and SUB against the Ethos-U55/U65's form of them
(``compute.add_sub``): the numpy kernel against TFLite Micro on every pair of int8 codes, the
NPU form against Vela 5.2's own stream run on our functional model, and the quantizations
where the NPU's single rounding of the rescaled input is not TFLite Micro's double one, which
stay TFLite operators with the reason."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.tflite_oracle import tflm_oracle
from tests.helpers.vela_cli import VELA, vela_compile
from tvm_ethos.compute import add_sub

pytest.importorskip("tflite_micro")

needs_vela = pytest.mark.skipif(not VELA.exists(),
                                reason="Vela 5.2 (the 'vela' extra) is not installed")

#: every pair of int8 codes: ``A[0, i, j, 0] = i - 128``, ``B[0, i, j, 0] = j - 128``
A = np.repeat(np.arange(-128, 128), 256).reshape(1, 256, 256, 1).astype(np.int8)
B = np.tile(np.arange(-128, 128), 256).reshape(1, 256, 256, 1).astype(np.int8)

#: the quantization found off by one on main: 281 of the 65,536 pairs, e.g. (-63, 127)
OFF_BY_ONE = ((0.05, 3), (0.03, -4), (0.06, -10))


def add_sub_model(in1_q, in2_q, out_q, subtract=False, dtype="int8",
                  a_shape=(1, 256, 256, 1), b_shape=(1, 256, 256, 1)) -> bytes:
    """One ADD (SUB) of inputs shaped ``a_shape`` and ``b_shape`` (broadcast)."""
    out_shape = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    tensors = [tb.T(list(a_shape), dtype, scale=in1_q[0], zp=in1_q[1]),
               tb.T(list(b_shape), dtype, scale=in2_q[0], zp=in2_q[1]),
               tb.T(out_shape, dtype, scale=out_q[0], zp=out_q[1])]
    code = tb.BO.SUB if subtract else tb.BO.ADD
    return tb.serialize(tensors, [(code, 0, None, [0, 1], [2])], [0, 1], [2])


def _scale(lo, hi):
    return st.floats(lo, hi).map(lambda e: float(np.float32(2.0 ** e)))


_zp8 = st.integers(-128, 127)
_in_q = st.tuples(_scale(-9, 1), _zp8)
_out_q = st.tuples(_scale(-8, 2), _zp8)


# ------------------------------------------------------------------ the numpy forms
@settings(max_examples=10, deadline=None)
@given(in1_q=_in_q, in2_q=_in_q, out_q=_out_q, subtract=st.booleans(), same=st.booleans())
@example(in1_q=OFF_BY_ONE[0], in2_q=OFF_BY_ONE[1], out_q=OFF_BY_ONE[2], subtract=False,
         same=False)
@example(in1_q=OFF_BY_ONE[0], in2_q=OFF_BY_ONE[1], out_q=OFF_BY_ONE[2], subtract=True,
         same=False)
def test_the_numpy_kernel_is_tflite_micro_on_every_pair(in1_q, in2_q, out_q, subtract, same):
    if same:
        in2_q = (in1_q[0], in2_q[1])
    want = tflm_oracle(add_sub_model(in1_q, in2_q, out_q, subtract), [A, B])[0]
    assert np.array_equal(add_sub.tflite_micro(A, B, in1_q, in2_q, out_q, subtract=subtract),
                          want)


@settings(max_examples=6, deadline=None)
@given(in1_q=st.tuples(_scale(-14, -6), st.just(0)), in2_q=st.tuples(_scale(-14, -6), st.just(0)),
       out_q=st.tuples(_scale(-14, -5), st.just(0)), subtract=st.booleans(),
       seed=st.integers(0, 2**16))
def test_the_int16_kernel_is_tflite_micro(in1_q, in2_q, out_q, subtract, seed):
    rs = np.random.RandomState(seed)
    shape = (1, 64, 64, 4)
    a, b = (rs.randint(-32768, 32768, shape).astype(np.int16) for _ in range(2))
    want = tflm_oracle(add_sub_model(in1_q, in2_q, out_q, subtract, "int16", shape, shape),
                       [a, b])[0]
    got = add_sub.tflite_micro(a, b, in1_q, in2_q, out_q, subtract=subtract, bits=16)
    assert np.array_equal(got, want)


@settings(max_examples=40, deadline=None)
@given(s=_scale(-12, 2), z1=_zp8, z2=_zp8, out_q=_out_q, subtract=st.booleans(),
       bits=st.sampled_from([8, 16]))
def test_equal_input_scales_are_never_refused(s, z1, z2, out_q, subtract, bits):
    """Equal scales rescale each input by a power of two, exactly, on both sides."""
    if bits == 16:
        z1 = z2 = 0
    assert add_sub.npu_refusal((s, z1), (s, z2), out_q, subtract=subtract, bits=bits) == ""


def test_the_off_by_one_quantization_is_named():
    """One rounding of ``x * M / 2**12`` on the NPU against TFLite Micro's rounding of
    ``x * 2**20 * M / 2**31`` and then by 2: the second input's code -125 (offset -121) is
    rescaled to -38063307 on the NPU and -38063308 in TFLite Micro, and codes (-63, 127) add
    to 0 on the NPU and 1 in TFLite Micro."""
    regs = add_sub.vela_registers(*OFF_BY_ONE)
    assert (regs.scaled, regs.opa_shift) == (add_sub.Scaled.SECOND, 12)
    assert add_sub.npu_rescaled(np.array([-121]), regs)[0] == -38063307
    assert add_sub.tflite_rescaled(np.array([-121]), 0.03, 0.05)[0] == -38063308
    assert add_sub.tflite_micro(-63, 127, *OFF_BY_ONE) == 1
    assert add_sub.npu(-63, 127, *OFF_BY_ONE) == 0
    why = add_sub.npu_refusal(*OFF_BY_ONE)
    assert "(281 of 65536 pairs differ)" in why, why
    assert "one rounding on the Ethos-U55/U65 and two in TFLite Micro" in why, why
    assert "equal input scales" in why, why


def test_int16_refusal_names_the_rescaled_code():
    q = ((3.0e-5, 0), (1.1e-4, 0), (2.0e-4, 0))
    why = add_sub.npu_refusal(*q, bits=16)
    assert why.startswith("int16 ADD: the first input (scale 3e-05) is rescaled"), why
    regs = add_sub.vela_registers(*q, bits=16)
    x = np.arange(-32768, 32768)
    assert not np.array_equal(add_sub.npu_rescaled(x, regs, 16),
                              add_sub.tflite_rescaled(x, q[0][0], q[1][0], 16))


# ------------------------------------------------------------------ Vela's stream
def _check_vela_stream(in1_q, in2_q, out_q, subtract):
    model = add_sub_model(in1_q, in2_q, out_q, subtract)
    got = run_vela_model(vela_compile(model), [A, B], "ethos-u55-128")[0][0]
    assert np.array_equal(got, add_sub.npu(A, B, in1_q, in2_q, out_q, subtract=subtract))
    want = tflm_oracle(model, [A, B])[0]
    differ = int(np.count_nonzero(got != want))
    assert (differ == 0) == (add_sub.npu_refusal(in1_q, in2_q, out_q, subtract=subtract) == "")
    return differ


@needs_vela
@pytest.mark.parametrize("subtract", [False, True])
def test_velas_stream_is_the_npu_form_off_by_one(subtract):
    """Vela's own stream for the quantization found on main, on our functional model: the
    NPU form on every pair, 281 pairs off TFLite Micro, as ``npu_refusal`` says."""
    assert _check_vela_stream(*OFF_BY_ONE, subtract) == 281


@pytest.mark.slow
@needs_vela
@settings(max_examples=8, deadline=None)
@given(in1_q=_in_q, in2_q=_in_q, out_q=_out_q, subtract=st.booleans(), same=st.booleans())
def test_velas_stream_is_the_npu_form_on_every_pair(in1_q, in2_q, out_q, subtract, same):
    if same:
        in2_q = (in1_q[0], in2_q[1])
    _check_vela_stream(in1_q, in2_q, out_q, subtract)


@needs_vela
def test_velas_int16_stream_is_the_npu_form():
    q = ((3.0e-5, 0), (1.1e-4, 0), (2.0e-4, 0))
    shape = (1, 64, 64, 4)
    rs = np.random.RandomState(0)
    a, b = (rs.randint(-32768, 32768, shape).astype(np.int16) for _ in range(2))
    model = add_sub_model(*q, False, "int16", shape, shape)
    got = run_vela_model(vela_compile(model), [a, b], "ethos-u55-128")[0][0]
    assert np.array_equal(got, add_sub.npu(a, b, *q, bits=16))
    # the refusal is no formality: 6 of these 16,384 outputs are off TFLite Micro's
    assert np.count_nonzero(got != tflm_oracle(model, [a, b])[0]) == 6


# ------------------------------------------------------------------ ours
@pytest.mark.parametrize("subtract", [False, True])
def test_the_off_by_one_quantization_stays_a_tflite_operator(subtract):
    data = add_sub_model(*OFF_BY_ONE, subtract)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "one rounding on the Ethos-U55/U65 and two in TFLite Micro" in report, report
    assert np.array_equal(cm.run(A, B)[0].reshape(A.shape), tflm_oracle(data, [A, B])[0])


@pytest.mark.parametrize("q,b_shape", [
    (((0.05, 3), (0.05, -4), (0.06, -10)), (1, 256, 256, 1)),   # equal scales
    (((0.0371, -17), (0.0093, 44), (0.3, 5)), (1, 256, 256, 1)),
    (((0.0371, -17), (0.0093, 44), (0.3, 5)), (1, 1, 256, 1)),   # broadcast
])
def test_an_exact_quantization_is_on_the_npu_on_every_pair(q, b_shape):
    assert add_sub.npu_refusal(*q) == ""
    data = add_sub_model(*q, b_shape=b_shape)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    b = B[:, :1] if b_shape[1] == 1 else B
    assert np.array_equal(cm.run(A, b)[0].reshape(A.shape), tflm_oracle(data, [A, b])[0])
