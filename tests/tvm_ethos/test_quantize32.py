"""QUANTIZE of int16 into int32 (what keyword_scrambled_8bit ends with): one 1x1 average pool
with an int32 OFM on the Ethos-U, equal to TFLite Micro's kernel on all 65,536 codes wherever
``compute.requantize32`` lets the NPU take it, and a TFLite operator, named why, where the
kernel's int32 arithmetic wraps or the output's zero point is not 0; the hosts' integer
kernel equal to it too."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.compute import requantize32
from tvm_ethos.compute.quant import mbqm_np

pytest.importorskip("tflite_micro")

NPU = "ethos-u -accelerator_config=ethos-u55-128"
#: every int16 code once
CODES = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 256, 256)
#: keyword_scrambled_8bit's last QUANTIZE: its int16 SOFTMAX output into int32
KWS = ((1.5259021893143654e-05, -32768), (3.0518509447574615e-05, 0))


def quantize32(in_q, out_q, shape=(1, 256, 256)) -> bytes:
    """One QUANTIZE of int16 codes quantized ``in_q`` into int32 ones quantized ``out_q``."""
    x = tb.T(list(shape), "int16", scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), "int32", scale=out_q[0], zp=out_q[1])
    return tb.build([x, y], [0], [1], tb.BO.QUANTIZE)


def kernel_wraps(in_q, out_q) -> bool:
    """Whether TFLite Micro's int32 ``(x - zp) << left_shift`` leaves int32 for some code."""
    _, shift = requantize32.multiplier(in_q, out_q)
    offsets = CODES.astype(np.int64).ravel()[[0, -1]] - in_q[1]
    shifted = offsets << max(shift, 0)
    return bool(shifted.min() < -(1 << 31) or shifted.max() >= (1 << 31))


def _equal_on_every_code(data: bytes, target: str, want: np.ndarray):
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    got = cm.run(CODES)[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    return cm


def test_keyword_scrambleds_quantize_runs_on_the_npu_as_tflite_micro_on_every_code():
    data = quantize32(*KWS)
    want = tflm_oracle(data, [CODES])[0]
    np.testing.assert_array_equal(oracle(data, [CODES])[0], want)   # LiteRT's kernel agrees
    cm = _equal_on_every_code(data, NPU, want)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement
    assert cm.partition_summary == {"ethos-u": 1}
    host = _equal_on_every_code(data, "llvm", want)
    assert host.partition_summary == {"llvm": 1}


def test_an_int32_output_zero_point_stays_a_tflite_operator_naming_it():
    data = quantize32(KWS[0], (KWS[1][0], 5))
    want = tflm_oracle(data, [CODES])[0]
    cm = _equal_on_every_code(data, NPU, want)
    (p,) = cm.placement
    assert p.placed_on == "tflite-micro" and "output zero point 5" in p.why, p
    assert "zero point 0" in p.why, p
    _equal_on_every_code(data, "llvm", want)    # the host's kernel adds it


def test_a_left_shift_tflite_micro_wraps_stays_a_tflite_operator_naming_the_scale():
    in_q, out_q = (1.0, 0), (2.0**-16, 0)          # TFLite's shift 17: x << 17 leaves int32
    assert kernel_wraps(in_q, out_q)
    data = quantize32(in_q, out_q)
    want = tflm_oracle(data, [CODES])[0]
    cm = _equal_on_every_code(data, NPU, want)
    (p,) = cm.placement
    assert p.placed_on == "tflite-micro" and "left by 17 bits" in p.why, p
    assert "2**15" in p.why, p


@settings(max_examples=25)
@given(st.sampled_from(["int8", "int16"]), st.integers(-32768, 32767))
def test_the_widest_left_shift_is_the_last_that_keeps_every_code_within_int32(dtype, zp):
    info = np.iinfo(dtype)
    zp = int(np.clip(zp, info.min, info.max))
    shift = requantize32.widest_left_shift(dtype, zp)

    def fits(s):
        return -(2**31) <= (int(info.min) - zp) << s and (int(info.max) - zp) << s < 2**31

    assert fits(shift) and not fits(shift + 1)


@given(st.floats(2.0**-24, 2.0**8), st.integers(-32768, 32767), st.floats(-24.0, 24.0))
def test_the_npu_refuses_exactly_where_the_kernel_wraps(in_scale, zp, log2_ratio):
    in_q = (float(np.float32(in_scale)), zp)
    out_q = (float(np.float32(in_scale / 2.0**log2_ratio)), 0)
    why = requantize32.npu_refusal("int16", in_q, out_q)
    assert bool(why) == kernel_wraps(in_q, out_q), (in_q, out_q, why)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(st.floats(2.0**-20, 2.0**4), st.integers(-32768, 32767), st.floats(-20.0, 16.0))
def test_int16_to_int32_quantize_is_tflite_micro_on_every_code(in_scale, zp, log2_ratio):
    """Over the quantizations TFLite takes: the NPU's pool where it takes the operator, the
    TFLite operator where it does not; the host's integer kernel everywhere the kernel does
    not wrap (LiteRT's kernel agreeing)."""
    in_q = (float(np.float32(in_scale)), zp)
    out_q = (float(np.float32(in_scale / 2.0**log2_ratio)), 0)
    data = quantize32(in_q, out_q)
    want = tflm_oracle(data, [CODES])[0]
    cm = _equal_on_every_code(data, NPU, want)
    (p,) = cm.placement
    assert (p.placed_on == "ethos-u") == (not kernel_wraps(in_q, out_q)), (in_q, out_q, p)
    if p.placed_on == "ethos-u":
        m, shift = requantize32.multiplier(in_q, out_q)
        exact = mbqm_np(CODES.astype(np.int64) - zp, m, shift)
        np.testing.assert_array_equal(want, exact)
        np.testing.assert_array_equal(oracle(data, [CODES])[0], want)
        _equal_on_every_code(data, "ethos-u,llvm", want)
        _equal_on_every_code(data, "llvm", want)
