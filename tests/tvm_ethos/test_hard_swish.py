"""HARD_SWISH from a .tflite: the importer's ``x * clip(x + 3, 0, 6) / 6`` read back as one
quantized operator (``patterns``), a table of TFLite's int16 fixed point per input code
(``compute.hard_swish``) that the Ethos-U applies as its LUT and the llvm host gathers from; on
every input code and any quantization TFLite Micro takes, equal to TFLite Micro's kernel (uint8,
which TFLite Micro does not run: LiteRT's reference kernel, the same arithmetic)."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.compute.hard_swish import hard_swish_lut, refusal

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

scales = st.floats(1e-3, 0.5).map(lambda v: float(np.float32(v)))


def hard_swish_model(dtype: str, in_q, out_q, shape=(1, 16, 16)) -> bytes:
    x = tb.T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), dtype, scale=out_q[0], zp=out_q[1])
    return tb.build([x, y], [0], [1], tb.BO.HARD_SWISH)


def every_code(dtype: str, shape=(1, 16, 16)) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.arange(info.min, info.max + 1).astype(dtype).reshape(shape)


def _reference(model: bytes, x: np.ndarray) -> np.ndarray | None:
    """TFLite Micro's output (LiteRT's reference kernel's for uint8), None where the kernel's
    prepare refuses the scales."""
    run = tflm_oracle if x.dtype == np.int8 else oracle
    try:
        return run(model, [x])[0]
    except (RuntimeError, ValueError):
        return None


@settings(max_examples=60, deadline=None)
@given(dtype=st.sampled_from(["int8", "uint8"]), s_in=scales, s_out=scales,
       z_in=st.integers(0, 255), z_out=st.integers(0, 255))
@example(dtype="uint8", s_in=0.25, s_out=0.001, z_in=10, z_out=3)  # refused by both
def test_the_table_is_tflite_micros_kernel_on_every_code(dtype, s_in, s_out, z_in, z_out):
    shift = 128 if dtype == "int8" else 0
    in_q, out_q = (s_in, z_in - shift), (s_out, z_out - shift)
    want = _reference(hard_swish_model(dtype, in_q, out_q), every_code(dtype))
    if want is None:
        assert "128 times the output scale" in refusal(dtype, in_q, out_q)
        with pytest.raises(ValueError, match="128 times"):
            hard_swish_lut(dtype, in_q, out_q)
        return
    assert refusal(dtype, in_q, out_q) == ""
    np.testing.assert_array_equal(hard_swish_lut(dtype, in_q, out_q), want.ravel())


@settings(max_examples=3, deadline=None)
@given(s_in=scales, s_out=scales, z_in=st.integers(-128, 127), z_out=st.integers(-128, 127),
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]))
@example(s_in=0.05, s_out=0.04, z_in=3, z_out=-2, accelerator="ethos-u55-128")
def test_an_int8_hard_swish_is_an_npu_lut_equal_to_tflite_micro(s_in, s_out, z_in, z_out,
                                                                 accelerator):
    model = hard_swish_model("int8", (s_in, z_in), (s_out, z_out))
    x = every_code("int8")
    want = _reference(model, x)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    if want is None:   # TFLite Micro refuses the scales: so does the NPU's table
        assert placed.placed_on == "tflite-micro" and "128 times" in placed.why, placed.why
        return
    assert placed.placed_on == "ethos-u", placed.why
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


@pytest.mark.parametrize("dtype, target", [("int8", "llvm"), ("uint8", "llvm"),
                                           ("int8", "ethos-u,llvm"), ("uint8", "ethos-u,llvm")])
def test_the_llvm_host_and_the_emulator_gather_tflite_micros_codes(dtype, target):
    lo = -128 if dtype == "int8" else 0
    model = hard_swish_model(dtype, (0.06, 7 + lo), (0.03, 100 + lo))
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    assert set(cm.partition_summary) == {target.split(",")[0]}, cm.partition_summary
    x = every_code(dtype)
    want = _reference(model, x)
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


def test_a_hard_swish_between_convolutions_is_planned_in_one_ethos_u_operator_and_exact():
    """CONV_2D -> HARD_SWISH -> CONV_2D in one ethos-u operator planned within the smallest
    budget (the planner's unary Part), equal to TFLite Micro."""
    rs = np.random.RandomState(7)
    x = tb._qact(rs, [1, 16, 16, 8])
    w, bias, a = tb._conv_tensors(rs, x, 8)
    h = tb.T([1, 16, 16, 8], "int8", scale=0.03, zp=-60)
    w2, bias2, y = tb._conv_tensors(rs, h, 8)
    model = tb.serialize([x, w, bias, a, h, w2, bias2, y],
                         [tb._conv_op([0, 1, 2], [3]), (tb.BO.HARD_SWISH, 0, None, [3], [4]),
                          tb._conv_op([4, 5, 6], [7])], [0], [7])
    cm = tvm_ethos.compile(model, "ethos-u", budget="smallest", cache_dir=False)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}
    assert len({p.operator for p in cm.placement}) == 1
    for seed in range(2):
        xs = [np.random.RandomState(seed).randint(-128, 128, (1, 16, 16, 8)).astype(np.int8)]
        want = tflm_oracle(model, xs)[0]
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)
