"""TFLite Micro's int8 TANH and LOGISTIC as tables (compute/int8_activation.py): every one of
the 256 codes equal to TFLite Micro's interpreter, for input quantizations drawn over small
scales (where its fixed point and LiteRT's float table round differently), ordinary ones, and
large ones (a radius of 0 sends every code, the zero point too, to -128 or 127)."""
import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ethos_arch.ops import Op
from tvm_ethos.backends.tflite_micro.reference import TflmReference
from tvm_ethos.compute import int8_activation
from tvm_ethos.compute.quant import logistic_lut, tanh_lut

pytest.importorskip("tflite_micro")

CODES = np.arange(-128, 128, dtype=np.int8).reshape(1, 256)
KINDS = {"tanh": Op.TANH, "sigmoid": Op.SIGMOID}

scales = st.one_of(
    st.floats(1e-4, 20.0),
    st.integers(-12, 4).map(lambda k: 2.0 ** k),        # powers of two: exact boundaries
).map(lambda v: float(np.float32(v)))


def _tflite_micro(kind: str, in_q: tuple) -> np.ndarray:
    model = tb.activation(kind, shape=(1, 256), in_q=in_q)
    return TflmReference(model).run([CODES])[0].ravel()


@settings(max_examples=40, deadline=None)
@given(kind=st.sampled_from(sorted(KINDS)), scale=scales, zp=st.integers(-128, 127))
@example(kind="tanh", scale=1 / 256, zp=-128)     # TANH of one step: 0.49999 of an output step
@example(kind="sigmoid", scale=1 / 128, zp=0)
@example(kind="sigmoid", scale=4.0, zp=0)
@example(kind="tanh", scale=8.0, zp=3)            # radius 0: the zero point itself is -128
@example(kind="sigmoid", scale=10.0, zp=127)
def test_table_equals_tflite_micro_on_every_code(kind, scale, zp):
    want = _tflite_micro(kind, (scale, zp))
    got = int8_activation.tflm_lut(KINDS[kind], (scale, zp))
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"codes {(bad - 128).tolist()}: ours {got[bad].tolist()}, "
                           f"TFLite Micro {want[bad].tolist()}")


def test_the_two_runtimes_differ_where_the_npu_follows_tflite_micro():
    """The table is not LiteRT's: at 1/256 TANH rounds one code up that tanhf's table rounds
    down (so the NPU's choice of table is observable)."""
    in_q, out_q = (1 / 256, -128), tb.ACTIVATION_OUT_Q["tanh"]
    ours = int8_activation.tflm_lut(Op.TANH, in_q)
    assert np.flatnonzero(ours != tanh_lut("int8", in_q, out_q)).tolist() == [1]
    assert np.array_equal(ours, _tflite_micro("tanh", in_q))


def test_other_outputs_keep_the_models_quantization():
    """TFLite Micro writes any TANH output as (1/128, 0); for another output quantization the
    NPU's table is LiteRT's, the model's meaning."""
    in_q = (1 / 256, -128)
    assert np.array_equal(int8_activation.npu_lut(Op.TANH, in_q, (0.02, 5)),
                          tanh_lut("int8", in_q, (0.02, 5)))
    assert np.array_equal(int8_activation.npu_lut(Op.SIGMOID, in_q, (1 / 256, -128)),
                          int8_activation.tflm_lut(Op.SIGMOID, in_q))
    assert not np.array_equal(int8_activation.tflm_lut(Op.SIGMOID, in_q),
                              logistic_lut("int8", in_q, (1 / 256, -128)))


def test_a_kind_without_a_fixed_point_kernel_is_one_clear_error():
    with pytest.raises(ValueError, match="TANH"):
        int8_activation.tflm_lut(Op.ELU, (0.1, 0))
