"""INT16 ABS from a .tflite on the Ethos-U and the llvm host, equal to TFLite Micro's int16
kernel on every input code.

TFLite Micro's int16 ABS (elementwise.cc) takes zero points 0 only and requantizes ``|x|``
by ``s_in / s_out`` (not at all when the scales match): the int8 form's arithmetic at 16
bits, which the NPU's ABS elementwise operation (its OFM scale that ratio,
``ops_elementwise.abs_op``) and the host's ``te_ops.lower_abs`` compute. Another zero point
is refused by the front door, as TFLite's kernels refuse it.
"""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import tflm_oracle
from tvm_ethos.errors import UnsupportedModelError

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

SHAPE = [1, 64, 64, 16]
EVERY_CODE = np.arange(-32768, 32768).astype(np.int16).reshape(SHAPE)
TARGETS = ["ethos-u", "ethos-u,llvm"]

scales = st.floats(1e-5, 1e-1).map(lambda v: float(np.float32(v)))


def abs16(in_scale: float, out_scale: float, in_zp: int = 0, out_zp: int = 0) -> bytes:
    x = tb.T(SHAPE, "int16", scale=in_scale, zp=in_zp)
    y = tb.T(SHAPE, "int16", scale=out_scale, zp=out_zp)
    return tb.serialize([x, y], [(tb.BO.ABS, 0, None, [0], [1])], [0], [1])


def _assert_on_the_npu_every_code(model: bytes, target: str) -> None:
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.partition_summary
    want = tflm_oracle(model, [EVERY_CODE])[0]
    np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].reshape(want.shape), want)


@pytest.mark.parametrize("in_scale,out_scale,target", [
    (0.001, 0.0007, "ethos-u"),          # rescaled: -32768 -> past the highest code
    (0.0003, 0.0003, "ethos-u,llvm"),    # scales alike: TFLite Micro does not rescale
])
def test_an_int16_abs_runs_on_the_npu_as_tflite_micro(in_scale, out_scale, target):
    _assert_on_the_npu_every_code(abs16(in_scale, out_scale), target)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(in_scale=scales, out_scale=scales, target=st.sampled_from(TARGETS))
@example(in_scale=0.001, out_scale=0.002, target="ethos-u,llvm")    # ties at odd codes
@example(in_scale=0.002, out_scale=0.001, target="ethos-u")         # saturates above 16383
def test_int16_abs_equals_tflite_micro_on_every_code(in_scale, out_scale, target):
    _assert_on_the_npu_every_code(abs16(in_scale, out_scale), target)


def test_the_llvm_host_is_tflite_micros_int16_abs():
    model = abs16(0.001, 0.0015)
    cm = tvm_ethos.compile(model, "llvm", cache_dir=False)
    assert set(cm.partition_summary) == {"llvm"}, cm.partition_summary
    want = tflm_oracle(model, [EVERY_CODE])[0]
    np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].reshape(want.shape), want)


@pytest.mark.parametrize("in_zp,out_zp", [(5, 0), (0, -3)])
def test_an_int16_abs_with_a_zero_point_is_refused(in_zp, out_zp):
    """TFLite's int16 kernels fail to prepare with a zero point other than 0, so the front
    door refuses the model rather than give it a meaning."""
    with pytest.raises(UnsupportedModelError, match="ABS"):
        tvm_ethos.compile(abs16(0.001, 0.002, in_zp, out_zp), "llvm", cache_dir=False)
