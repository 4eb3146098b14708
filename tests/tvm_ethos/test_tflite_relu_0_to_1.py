"""TFLite's int8 RELU_0_TO_1 on the Ethos-U. TFLite Micro has no kernel for it; LiteRT's
(``QuantizedReluX(0, 1)``) requantizes the input to the output's quantization and clamps to the
codes of 0 and 1, which is RELU's 1x1 depthwise convolution with that clamp
(``ops_elementwise``). TVM's converter writes ``clip(dequantize(x), 0, 1)`` before a quantize,
read as RELU with that clamp; the oracle is LiteRT's reference kernel (BUILTIN_REF) on every
int8 code, for any scales and zero points. int16 is refused by the front door (LiteRT has no
int16 kernel either)."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.frontend import operator_support

pytest.importorskip("ethosu.vela")

ACCELERATORS = ["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]
scales = st.floats(1e-3, 1.0).map(lambda v: float(np.float32(v)))
zero_points = st.integers(-128, 127)
EVERY_CODE = np.arange(-128, 128, dtype=np.int8).reshape(1, 4, 8, 8)


def relu_0_to_1_model(in_q, out_q, shape=(1, 4, 8, 8), dtype="int8") -> bytes:
    x = tb.T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), dtype, scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(tb.BO.RELU_0_TO_1, 0, None, [0], [1])], [0], [1])


@settings(max_examples=10, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points),
       accelerator=st.sampled_from(ACCELERATORS))
@example(in_q=(0.05, 3), out_q=(1 / 256, -128), accelerator="ethos-u55-128")  # the table's
@example(in_q=(0.01, -20), out_q=(0.01, -20), accelerator="ethos-u65-256")     # no requant
@example(in_q=(0.5, 0), out_q=(0.001, 0), accelerator="ethos-u55-256")         # 1 > max code
def test_the_npu_runs_relu_0_to_1_equal_to_litert_on_every_code(in_q, out_q, accelerator):
    model = relu_0_to_1_model(in_q, out_q)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    want = oracle(model, [EVERY_CODE])[0]
    np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].reshape(want.shape), want)


@pytest.mark.parametrize("target", ["llvm", "ethos-u,llvm"])
def test_the_llvm_host_and_the_emulator_equal_litert(target):
    model = relu_0_to_1_model((0.02, -20), (0.005, 40))
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    assert set(cm.partition_summary) == {target.split(",")[0]}, cm.partition_summary
    want = oracle(model, [EVERY_CODE])[0]
    np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].reshape(want.shape), want)


def test_an_int16_relu_0_to_1_is_refused_by_the_front_door_in_one_line():
    (verdict,) = operator_support(relu_0_to_1_model((0.001, 0), (0.002, 0), dtype="int16"))
    assert not verdict.importable and "INT16" in verdict.reason and "\n" not in verdict.reason


def test_relu6_to_another_quantization_still_clamps_codes():
    """Only RELU_0_TO_1 requantizes: TFLite Micro's RELU6 clamps the input codes whatever the
    output's quantization, so a RELU6 to another quantization runs on the NPU as that clamp
    (TFLite Micro's result on every code), not as a requantization."""
    x = tb.T([1, 4, 8, 8], "int8", scale=0.05, zp=3)
    y = tb.T([1, 4, 8, 8], "int8", scale=0.03, zp=-5)
    model = tb.serialize([x, y], [(tb.BO.RELU6, 0, None, [0], [1])], [0], [1])
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed
    codes = np.arange(-128, 128, dtype=np.int8).reshape(1, 4, 8, 8)
    want = tflm_oracle(model, [codes])[0]
    np.testing.assert_array_equal(cm.run(codes)[0].reshape(want.shape), want)
