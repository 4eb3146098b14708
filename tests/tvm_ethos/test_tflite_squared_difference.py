"""TFLite's int8 SQUARED_DIFFERENCE: ``compute.squared_difference`` against TFLite Micro on every
pair of codes (65,536 per quantization), and Vela 5.2's NPU form of it (several elementwise
operations with explicit rescales) run on our functional model of the Ethos-U against TFLite
Micro: exact wherever the kernel's int32 left shift does not wrap."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.helpers.tflite_oracle import tflm_oracle
from tvm_ethos.compute import squared_difference as sqd

pytest.importorskip("tflite_micro")

VELA = Path(sys.executable).parent / "vela"

#: every pair of int8 codes: ``A[0, i, j, 0] = i - 128``, ``B[0, i, j, 0] = j - 128``
A = np.repeat(np.arange(-128, 128), 256).reshape(1, 256, 256, 1).astype(np.int8)
B = np.tile(np.arange(-128, 128), 256).reshape(1, 256, 256, 1).astype(np.int8)


def squared_difference_model(in1_q, in2_q, out_q, a_shape=(1, 256, 256, 1),
                             b_shape=(1, 256, 256, 1)) -> bytes:
    """One int8 SQUARED_DIFFERENCE of inputs shaped ``a_shape`` and ``b_shape`` (broadcast)."""
    out_shape = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    tensors = [tb.T(list(a_shape), "int8", scale=in1_q[0], zp=in1_q[1]),
               tb.T(list(b_shape), "int8", scale=in2_q[0], zp=in2_q[1]),
               tb.T(out_shape, "int8", scale=out_q[0], zp=out_q[1])]
    return tb.serialize(tensors, [(tb.BO.SQUARED_DIFFERENCE, 0, None, [0, 1], [2])], [0, 1], [2])


def _scale(draw_exp):
    return st.floats(draw_exp[0], draw_exp[1]).map(lambda e: float(np.float32(2.0 ** e)))


_zp = st.integers(-128, 127)
_in_q = st.tuples(_scale((-9, 1)), _zp)
_out_q = st.tuples(_scale((-14, 4)), _zp)


@settings(max_examples=12, deadline=None)
@given(in1_q=_in_q, in2_q=_in_q, out_q=_out_q, same_scale=st.booleans())
@example(in1_q=(1.0, 0), in2_q=(0.5, 3), out_q=(2.0**-16, 0), same_scale=False)  # wraps
def test_the_numpy_kernel_is_tflite_micro_on_every_pair(in1_q, in2_q, out_q, same_scale):
    if same_scale:
        in2_q = (in1_q[0], in2_q[1])
    want = tflm_oracle(squared_difference_model(in1_q, in2_q, out_q), [A, B])[0]
    assert np.array_equal(sqd.tflite_micro(A, B, in1_q, in2_q, out_q), want)


def _vela(tmp_path: Path, model: bytes) -> bytes:
    src = tmp_path / "m.tflite"
    src.write_bytes(model)
    subprocess.run([str(VELA), str(src), "--accelerator-config", "ethos-u55-128",
                    "--output-dir", str(tmp_path)], check=True, capture_output=True)
    return (tmp_path / "m_vela.tflite").read_bytes()


@pytest.mark.skipif(not VELA.exists(), reason="Vela 5.2 (the 'vela' extra) is not installed")
@settings(max_examples=6, deadline=None)
@given(in1_q=_in_q, in2_q=_in_q, out_q=_out_q, same_scale=st.booleans())
@example(in1_q=(1.0, 0), in2_q=(0.5, 3), out_q=(2.0**-16, 0), same_scale=False)  # wraps
def test_velas_stream_on_the_functional_model_is_tflite_micro_where_no_shift_wraps(
        tmp_path_factory, in1_q, in2_q, out_q, same_scale):
    """Vela's form on every pair of codes: equal to TFLite Micro where ``npu_refusal`` finds
    nothing, equal to ``compute.squared_difference.npu`` everywhere."""
    from ethosu_stream.tflite_graph import run_vela_model

    if same_scale:
        in2_q = (in1_q[0], in2_q[1])
    model = squared_difference_model(in1_q, in2_q, out_q)
    got = run_vela_model(_vela(tmp_path_factory.mktemp("vela"), model), [A, B],
                         "ethos-u55-128")[0][0]
    assert np.array_equal(got, sqd.npu(A, B, in1_q, in2_q, out_q))
    if not sqd.npu_refusal(in1_q, in2_q, out_q):
        assert np.array_equal(got, tflm_oracle(model, [A, B])[0])


@pytest.mark.skipif(not VELA.exists(), reason="Vela 5.2 (the 'vela' extra) is not installed")
def test_velas_broadcast_stream_is_tflite_micro(tmp_path):
    rs = np.random.RandomState(0)
    model = squared_difference_model((0.07, -3), (0.3, 11), (0.9, -120), (1, 6, 5, 16),
                                     (1, 1, 1, 16))
    xs = [rs.randint(-128, 128, (1, 6, 5, 16)).astype(np.int8),
          rs.randint(-128, 128, (1, 1, 1, 16)).astype(np.int8)]
    from ethosu_stream.tflite_graph import run_vela_model

    got = run_vela_model(_vela(tmp_path, model), xs, "ethos-u55-128")[0][0]
    assert np.array_equal(got, tflm_oracle(model, xs)[0])


def test_a_wrapping_left_shift_is_the_one_difference_and_is_named():
    """An output multiplier above one: TFLite Micro's ``x * (1 << left_shift)`` wraps in 32
    bits, so codes (-128, 0) at unit input scales give -128 there and 127 on the NPU."""
    q1, q2, qo = (1.0, 0), (1.0, 0), (1e-5, 0)
    want = tflm_oracle(squared_difference_model(q1, q2, qo), [A, B])[0]
    assert want[0, 0, 128, 0] == -128
    assert sqd.npu(A, B, q1, q2, qo)[0, 0, 128, 0] == 127
    why = sqd.npu_refusal(q1, q2, qo)
    assert "wraps" in why and "(-128, 0) give -128 there and 127 on the NPU" in why, why
    assert sqd.npu_refusal((1.0, 0), (1.0, 0), (4.0 / 2**14, 0)) == ""
