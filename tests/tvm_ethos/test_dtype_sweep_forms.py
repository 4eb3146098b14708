"""Issue 28's dtype sweep (benchmarks/dtype_sweep.py): the uint8 / int16 forms of Vela 5.2's
operators the audit's probes left out (``vela_superset_probes._dtypes``) that ours takes run
on the NPU, on ``ethos-u`` and ``ethos-u,llvm``, equal to their oracle on inputs that hold
each type's extremes: TFLite Micro, or LiteRT's reference kernels where TFLite Micro has no
kernel of the type (most uint8 movement, int16 MIRROR_PAD, EXP, uint8 ARG_MAX and QUANTIZE,
uint8 PADV2). The forms no kernel defines (a uint8 EXP, an int16 to uint8 QUANTIZE, an
int16 depthwise convolution with an int32 bias) are refused."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from benchmarks.vela_superset_probes import (
    BO,
    PROBE_GAPS,
    Q_OUT,
    SHAPE,
    T,
    _dtypes,
    _one,
    _t,
    conv,
    padv2,
    quantize,
    unary,
)
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.frontend.tflite_support import operator_support

pytest.importorskip("tflite_micro")

NPU = "ethos-u -accelerator_config=ethos-u55-128"
TAKEN = [p for p in _dtypes() if (p.operator, p.name) not in PROBE_GAPS]
#: the taken forms TFLite Micro has a kernel of; LiteRT's reference kernels define the rest
_TFLM = {("RESHAPE", "uint8"), ("SQUEEZE", "uint8"), ("REVERSE_V2", "uint8"),
         ("REVERSE_V2", "int16"),
         ("QUANTIZE", "int8 to int8"), ("FULLY_CONNECTED", "int16 batch 2"),
         ("FULLY_CONNECTED", "int16 int32 bias"), ("CONV_2D", "int16 int32 bias"),
         ("PADV2", "int8 constant apart from the zero point"),
         ("PADV2", "int16 constant apart from the zero point")}


def _extremes(specs, seed: int) -> list[np.ndarray]:
    """Random codes of each input's type with its smallest and largest code (and 0) in the
    first positions."""
    rs = np.random.RandomState(seed)
    out = []
    for s in specs:
        info = np.iinfo(s.dtype)
        x = rs.randint(info.min, info.max + 1, size=s.shape).astype(s.dtype).ravel()
        x[:3] = (info.min, info.max, 0)
        out.append(x.reshape(s.shape))
    return out


def _matches(data: bytes, reference, target: str = NPU, seeds=(0, 1)):
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    for seed in seeds:
        xs = _extremes(cm.inputs, seed)
        got, want = cm.run(*xs), reference(data, xs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.array_equal(g.reshape(w.shape), w), (g.ravel()[:8], w.ravel()[:8])
    return cm


def _on_the_npu_both_targets(data: bytes, reference) -> None:
    cm = _matches(data, reference)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, cm.placement
    assert set(_matches(data, reference, "ethos-u,llvm").partition_summary) == {"ethos-u"}


def reference(key: tuple[str, str]):
    """The oracle of the taken form ``(operator, name)``."""
    return tflm_oracle if key in _TFLM else oracle


@pytest.mark.slow
@pytest.mark.parametrize("probe", TAKEN, ids=[f"{p.operator}-{p.name}" for p in TAKEN])
def test_every_taken_dtype_form_runs_on_the_npu_as_its_oracle(probe):
    _on_the_npu_both_targets(probe.build(), reference((probe.operator, probe.name)))


def test_a_padv2_of_a_constant_apart_from_the_zero_point_runs_on_the_npu():
    # uint8: LiteRT's kernel (TFLite Micro has no uint8 PAD); int16: TFLite Micro's
    _on_the_npu_both_targets(padv2("uint8", 255), oracle)
    _on_the_npu_both_targets(padv2("int16", -32768), tflm_oracle)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(st.sampled_from(["int8", "uint8", "int16"]), st.integers(0, 2**16 - 1))
def test_padv2_fills_with_its_constant_code_on_every_host(dtype, raw):
    info = np.iinfo(dtype)
    fill = info.min + raw % (int(info.max) - int(info.min) + 1)
    data = padv2(dtype, fill)
    reference = oracle if dtype == "uint8" else tflm_oracle
    _on_the_npu_both_targets(data, reference)
    _matches(data, reference, "llvm", seeds=(0,))


def test_an_int16_padv2_whose_constant_is_quantized_apart_stays_refused():
    # TFLite's kernel fills with the constant's code; the importer's fill is its value
    pads = T([4, 2], "int32", data=np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32))
    value = _t((), "int16", (2.0**-10, 0), np.array(5, np.int16))
    data = _one([_t(SHAPE, "int16"), _t((1, 6, 6, 8), "int16"), pads, value], BO.PADV2, [0],
                [1], op_inputs=[0, 2, 3])
    (verdict,) = operator_support(data)
    assert not verdict.importable and "INT16" in verdict.reason, verdict


def _uint8_to_int16(in_q, out_scale) -> bytes:
    return _one([_t(SHAPE, "uint8", in_q), _t(SHAPE, "int16", (out_scale, 0))], BO.QUANTIZE,
                [0], [1])


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(st.floats(0.001, 1.0), st.integers(0, 255), st.floats(2.0**-15, 2.0**-6))
def test_uint8_to_int16_quantize_equals_litert_on_every_code(in_scale, zp, out_scale):
    data = _uint8_to_int16((in_scale, zp), out_scale)
    codes = np.arange(256, dtype=np.uint8)
    for target in (NPU, "ethos-u,llvm", "llvm"):
        cm = tvm_ethos.compile(data, target, cache_dir=False)
        for half in (codes[:128], codes[128:]):
            x = half.reshape(SHAPE)
            got, want = cm.run(x)[0], oracle(data, [x])[0]
            assert np.array_equal(got.reshape(want.shape), want), (in_scale, zp, out_scale)


def test_uint8_to_int16_quantize_runs_on_the_npu_as_litert():
    _on_the_npu_both_targets(quantize("uint8", "int16"), oracle)


@pytest.mark.parametrize("data, names", [
    pytest.param(lambda: unary(BO.EXP, dtype="uint8", q_out=Q_OUT["uint8"]), "uint8 EXP",
                 id="exp-uint8"),
    pytest.param(lambda: quantize("int16", "uint8"),
                 "a QUANTIZE with input type INT16 and output type UINT8 is defined by no kernel",
                 id="quantize-int16-uint8"),
    pytest.param(lambda: conv(dtype="int16", depthwise=True, bias_dtype="int32"),
                 "a DEPTHWISE_CONV_2D with input type INT16 and bias type INT32 is defined by "
                 "no kernel: LiteRT's int16 kernel refuses an INT32 bias",
                 id="depthwise-int16-int32-bias"),
])
def test_a_form_no_kernel_defines_is_refused_naming_it(data, names):
    (verdict,) = operator_support(data())
    assert not verdict.importable and names in verdict.reason, verdict
