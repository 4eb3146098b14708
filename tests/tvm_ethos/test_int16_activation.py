"""INT16 LOGISTIC and TANH from a .tflite: TFLite's int16 kernels (input rescaled to units of
1/(3 * 4096), the sigmoid table interpolated) as a 65536-entry table (``lower.
int16_activation``) that the llvm host and the TIR emulator gather from, and on the Ethos-U as
one pooling operation carrying the output unit's int16 sigmoid / tanh; on every input code,
equal to TFLite Micro's."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import tflm_oracle
from tvm_ethos.compute.int16_activation import int16_lut, refusal
from tvm_ethos.frontend import operator_support

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

CODES = {"sigmoid": tb.BO.LOGISTIC, "tanh": tb.BO.TANH}
EVERY_CODE = np.arange(-32768, 32768).astype(np.int16).reshape(1, 256, 256)
OUT_Q = (1 / 32768, 0)

#: input scales: the powers of two the kernels special-case (2**-12; 2**-11 for TANH), other
#: powers of two and any float32 scale
in_scales = st.one_of(st.sampled_from([2.0**-12, 2.0**-11, 2.0**-10, 2.0**-14]),
                      st.floats(1e-5, 2e-2).map(lambda v: float(np.float32(v))))


def activation16_model(kind: str, in_q, out_q=OUT_Q) -> bytes:
    x = tb.T([1, 256, 256], "int16", scale=in_q[0], zp=in_q[1])
    y = tb.T([1, 256, 256], "int16", scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(CODES[kind], 0, None, [0], [1])], [0], [1])


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(sorted(CODES)), in_scale=in_scales)
@example(kind="tanh", in_scale=2.0**-11)
@example(kind="sigmoid", in_scale=2.0**-11)
def test_the_table_is_tflite_micros_kernel_on_every_code(kind, in_scale):
    want = tflm_oracle(activation16_model(kind, (in_scale, 0)), [EVERY_CODE])[0]
    np.testing.assert_array_equal(int16_lut(kind, (in_scale, 0), OUT_Q), want.ravel())


@settings(max_examples=4, deadline=None)
@given(kind=st.sampled_from(sorted(CODES)), in_scale=in_scales,
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]))
@example(kind="tanh", in_scale=2.0**-12, accelerator="ethos-u55-128")
def test_the_npu_runs_it_as_one_operation_equal_to_tflite_micro(kind, in_scale, accelerator):
    model = activation16_model(kind, (in_scale, 0))
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    want = tflm_oracle(model, [EVERY_CODE])[0]
    np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].reshape(want.shape), want)


@pytest.mark.parametrize("target", ["llvm", "ethos-u,llvm"])
@pytest.mark.parametrize("kind", sorted(CODES))
def test_the_llvm_host_and_the_emulator_are_tflite_micros_kernel(kind, target):
    model = activation16_model(kind, (0.0003, 0))
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    assert set(cm.partition_summary) == {target.split(",")[0]}, cm.partition_summary
    want = tflm_oracle(model, [EVERY_CODE])[0]
    np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].reshape(want.shape), want)


def test_what_tflites_int16_kernel_refuses_is_named():
    assert "zero points 3 -> 0" in refusal("tanh", (0.001, 3), OUT_Q)
    assert "output scale" in refusal("sigmoid", (0.001, 0), (1 / 16384, 0))
    with pytest.raises(ValueError, match="2\\*\\*-15"):
        int16_lut("sigmoid", (0.001, 0), (0.001, 0))
    # another output scale is no TFLite model: the front door keeps refusing the INT16 tensors
    (verdict,) = operator_support(activation16_model("tanh", (0.001, 0), (0.001, 0)))
    assert not verdict.importable and "INT16" in verdict.reason, verdict
