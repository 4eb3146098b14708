"""TRANSPOSE_CONV of int16 activations (TFLite Micro's 16x8 kernel: int8 weights, an int64
bias or none, int64 accumulation, the reduced multiplier) and of uint8 (LiteRT's kernel,
TFLite Micro has none: the weights' zero point, one multiplier, its scale product in float32
without a bias): on the Ethos-U (Vela's form, ``ops_transpose_conv``, with the 16x8 scaling
``npu_ops.is_16x8``), on the Ethos-U of a package and on the llvm host
(``te_ops.lower_transpose_conv2d``), equal to TFLite Micro (int16) and LiteRT's reference
kernels (uint8) on inputs at the type's ends and random ones; the forms no kernel computes
refused in one line naming the tensor."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transpose_conv_models import extreme_inputs, transpose_conv

import tvm_ethos
from benchmarks.vela_superset_probes import PROBE_GAPS
from benchmarks.vela_superset_probes import transpose_conv as probe
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.compute.quant import quantize_multiplier
from tvm_ethos.errors import UnsupportedModelError
from tvm_ethos.frontend.tflite_support import operator_support

pytest.importorskip("tflite_micro")

#: each form's oracle: TFLite Micro's kernel, LiteRT's reference kernel where it has none
ORACLES = {"int16": tflm_oracle, "uint8": oracle}


def f32(v: float) -> float:
    return float(np.float32(v))


def _check(data: bytes, dtype: str, target: str, seed: int = 0):
    """The compiled model's outputs equal the oracle's on inputs at the ends and random."""
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    shape = tuple(cm.inputs[0].shape)
    for x in extreme_inputs(shape, dtype, np.random.RandomState(seed)):
        (got,), (want,) = cm.run(x), ORACLES[dtype](data, [x])
        assert np.array_equal(got.reshape(want.shape), want), (got.ravel()[:8], want.ravel()[:8])
    return cm


def _on_the_npu(cm, target: str) -> None:
    if target == "ethos-u":
        assert [(p.placed_on, p.why) for p in cm.placement] == [("ethos-u", "")]
    else:
        assert cm.partition_summary == {"ethos-u": 1}


@st.composite
def _geometry(draw, npu: bool):
    """Shapes, kernels, strides and padding; with ``npu`` what Vela takes (1x1 and 2x2, a
    width stride of 2 over one row by a one-row kernel, a height stride of 2 over one
    column by a one-column kernel)."""
    h, w, c = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 6))
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    stride = draw(st.sampled_from([(1, 1), (2, 2), (1, 2), (2, 1)]))
    if npu and stride == (1, 2):
        h, kernel = 1, (1, kernel[1])
    elif npu and stride == (2, 1):
        w, kernel = 1, (kernel[0], 1)
    return dict(shape=(1, h, w, c), cout=draw(st.integers(1, 6)), kernel=kernel,
                stride=stride, padding=draw(st.sampled_from(["SAME", "VALID"])),
                act=draw(st.sampled_from([None, "relu", "relu6", "relu_n1_to_1"])))


@st.composite
def _int16_cases(draw, npu: bool = True):
    """A 16x8 TRANSPOSE_CONV: every scale drawn (the output's from far below the input's to
    its neighbourhood: 2**-20 to 2**-3 of the largest input x weight scale), per-channel or
    one weight scale, an int64 bias up to 2**38 where it scales into int32 (the NPU's is 40
    bits) or none."""
    in_scale = draw(st.floats(1e-5, 1e-2).map(f32))
    gain = 2.0 ** -draw(st.floats(3, 20))
    geometry = draw(_geometry(npu))
    bias = draw(st.sampled_from(["int64", None]))
    wide = min(1 << 38, int(2 ** 30 / gain))
    bias_range = draw(st.sampled_from([200000, wide]))
    cout = geometry["cout"]
    w_scales = draw(st.lists(st.floats(0.002, 0.02), min_size=1, max_size=1)
                    | st.lists(st.floats(0.002, 0.02), min_size=cout, max_size=cout))
    return dict(geometry, in_q=(in_scale, 0), out_q=(f32(in_scale * 0.02 / gain), 0),
                w_scales=w_scales, bias=bias, bias_range=bias_range)


@st.composite
def _uint8_cases(draw, npu: bool = True):
    """A uint8 TRANSPOSE_CONV: scales and zero points of the input, output and weights drawn
    over their ranges, an int32 bias or none."""
    return dict(draw(_geometry(npu)),
                in_q=(draw(st.floats(0.005, 0.5)), draw(st.integers(0, 255))),
                out_q=(draw(st.floats(0.01, 1.0)), draw(st.integers(0, 255))),
                w_scales=[draw(st.floats(0.002, 0.02))], w_zp=draw(st.integers(0, 255)),
                bias=draw(st.sampled_from(["int32", None])))


_CASES = {"int16": _int16_cases, "uint8": _uint8_cases}


def test_the_audits_int16_and_uint8_probes_run_on_the_npu_as_their_oracles():
    """Vela 5.2 puts both on the NPU; so does ours, exactly, and the audit lists no gap."""
    for dtype in ("int16", "uint8"):
        cm = _check(probe(dtype=dtype), dtype, "ethos-u")
        _on_the_npu(cm, "ethos-u")
        assert ("TRANSPOSE_CONV", dtype) not in PROBE_GAPS


@pytest.mark.parametrize("dtype", ["int16", "uint8"])
def test_one_form_of_each_runs_exactly_on_the_npu_of_a_package_and_on_the_llvm_host(dtype):
    rs = np.random.RandomState(5)
    kw = (dict(in_q=(2.0 ** -12, 0), out_q=(2.0 ** -9, 0), bias="int64", bias_range=1 << 30,
               kernel=(3, 2))
          if dtype == "int16" else   # a kernel row below the stride: taps of the zero point
          dict(in_q=(0.05, 131), out_q=(0.2, 119), w_zp=77, bias="int32", act="relu",
               kernel=(1, 2)))
    data = transpose_conv(dtype, rs, shape=(1, 3, 4, 5), cout=4, **kw)
    _on_the_npu(_check(data, dtype, "ethos-u,llvm"), "ethos-u,llvm")
    assert _check(data, dtype, "llvm").partition_summary == {"llvm": 1}


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(dtype=st.sampled_from(["int16", "uint8"]), data=st.data(),
       target=st.sampled_from(["ethos-u", "ethos-u,llvm"]), seed=st.integers(0, 2 ** 16))
def test_the_npu_runs_int16_and_uint8_transpose_conv_exactly(dtype, data, target, seed):
    case = data.draw(_CASES[dtype]())
    model = transpose_conv(dtype, np.random.RandomState(seed), **case)
    _on_the_npu(_check(model, dtype, target, seed), target)


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(dtype=st.sampled_from(["int16", "uint8"]), data=st.data(), seed=st.integers(0, 2 ** 16))
def test_the_llvm_host_runs_int16_and_uint8_transpose_conv_exactly(dtype, data, seed):
    """Every stride form, the ones Vela refuses too."""
    case = data.draw(_CASES[dtype](npu=False))
    model = transpose_conv(dtype, np.random.RandomState(seed), **case)
    assert _check(model, dtype, "llvm", seed).partition_summary == {"llvm": 1}


#: a uint8 quantization whose multiplier from the float32 scale product (LiteRT's without a
#: bias) and from the double one differ, and differ in the output of two of the 65,536 pairs
#: of codes of two channels (weights 1 and 177 above their zero point 78)
_F32_PRODUCT = dict(in_q=(0.09583223611116409, 128), out_q=(0.051608044654130936, 128),
                    w_scales=[0.009153385646641254], w_zp=78)


@pytest.mark.parametrize("target", ["ethos-u", "llvm"])
def test_uint8_without_a_bias_scales_by_the_float32_product_as_litert(target):
    """Every pair of codes of a two-channel 1x1 transpose conv: LiteRT's multiplier, taken
    from the float32 product of the scales (a bias would make it the double product), gives
    two outputs the double product's multiplier does not."""
    a, w, o = (f32(v) for v in (_F32_PRODUCT["in_q"][0], _F32_PRODUCT["w_scales"][0],
                               _F32_PRODUCT["out_q"][0]))
    assert quantize_multiplier(a * w / o) != quantize_multiplier(
        float(np.float32(a) * np.float32(w)) / o)
    model = transpose_conv("uint8", np.random.RandomState(0), shape=(1, 256, 256, 2), cout=1,
                           kernel=(1, 1), stride=(1, 1), bias=None,
                           weights=np.array([79, 255]).reshape(1, 1, 1, 2), **_F32_PRODUCT)
    codes = np.arange(256, dtype=np.uint8)
    x = np.stack(np.meshgrid(codes, codes, indexing="ij"), axis=-1)[None]
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    (got,), (want,) = cm.run(x), oracle(model, [x])
    assert np.array_equal(got.reshape(want.shape), want)
    if target == "ethos-u":
        _on_the_npu(cm, target)


@pytest.mark.parametrize("change, reason", [
    (dict(bias="int32"), "an int16 TRANSPOSE_CONV with the bias 't4' (INT32): TFLite Micro's "
                         "16x8 kernel reads its bias as INT64"),
    (dict(bias="int16"), "an int16 TRANSPOSE_CONV with the bias 't4' (INT16): TFLite Micro "
                         "widens it to INT64, but TVM's TFLite importer takes an INT32 or INT64"),
    (dict(in_q=(2.0 ** -12, 3)), "an int16 TRANSPOSE_CONV with zero points other than 0 "
                                 "('t2' 3): TFLite's 16x8 kernels require 0"),
    (dict(out_q=(2.0 ** -10, -1)), "an int16 TRANSPOSE_CONV with zero points other than 0 "
                                   "('t3' -1)"),
    (dict(weights_dtype="int16"), "an int16 TRANSPOSE_CONV with weights 't1' (INT16): TFLite "
                                  "Micro's 16x8 kernel takes INT8 weights"),
    (dict(w_zp=3), "an int16 TRANSPOSE_CONV with zero points other than 0 ('t1' 3)"),
    (dict(in_q=(1.0, 0), out_q=(1e-7, 0), w_scales=[0.01]),
     "an int16 TRANSPOSE_CONV with a 16x8 scale of 2**17 or more: TFLite's int64 "
     "requantization needs a right shift of at least 1"),
    (dict(bias_range=1 << 48), "an int16 TRANSPOSE_CONV with a bias beyond 47 bits ('t4')"),
], ids=["int32-bias", "int16-bias", "input-zero-point", "output-zero-point", "int16-weights",
        "weights-zero-point", "scale", "bias-47-bits"])
def test_an_int16_form_no_kernel_computes_is_refused_naming_the_tensor(change, reason):
    """Refused at the front door in one line, never TVM's unbuilt ``conv2d_transpose``; the
    tflite-micro host keeps it a TFLite operator, saying why."""
    model = transpose_conv("int16", np.random.RandomState(1), **change)
    (verdict,) = operator_support(model)
    assert not verdict.importable and reason in verdict.reason, verdict.reason
    with pytest.raises(UnsupportedModelError, match="TRANSPOSE_CONV"):
        tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    (placed,) = tvm_ethos.compile(model, "ethos-u", cache_dir=False).placement
    assert placed.placed_on == "tflite-micro" and reason in placed.why, placed.why


@pytest.mark.parametrize("change, reason", [
    (dict(w_scales=[0.01, 0.02, 0.01, 0.02, 0.01, 0.02]),
     "a uint8 TRANSPOSE_CONV with weights 't1' quantized per channel: LiteRT's uint8 kernel "
     "reads one weight scale and zero point"),
    (dict(weights_dtype="int8"), "a uint8 TRANSPOSE_CONV with weights 't1' (INT8): LiteRT's "
                                 "uint8 kernel takes UINT8 weights"),
    (dict(bias="int64"), "a uint8 TRANSPOSE_CONV with the bias 't4' (INT64): LiteRT's uint8 "
                         "kernel takes INT32"),
], ids=["per-channel", "int8-weights", "int64-bias"])
def test_a_uint8_form_no_kernel_computes_is_refused_naming_the_tensor(change, reason):
    """Refused at the front door in one line, never TVM's unbuilt ``conv2d_transpose``."""
    model = transpose_conv("uint8", np.random.RandomState(1),
                           **{**dict(in_q=(0.05, 128), out_q=(0.09, 125), w_zp=120,
                                     bias="int32"), **change})
    (verdict,) = operator_support(model)
    assert not verdict.importable and reason in verdict.reason, verdict.reason
    for target in ("llvm", "ethos-u,llvm"):
        with pytest.raises(UnsupportedModelError, match="TRANSPOSE_CONV"):
            tvm_ethos.compile(model, target, cache_dir=False)


def test_int8_weights_of_a_zero_point_are_refused_on_a_host_and_tflite_micro_runs_them():
    """TFLite Micro reads an int8 TRANSPOSE_CONV's weights as if their zero point were 0; the
    llvm host refuses the form in one line (it was TVM's unbuilt ``conv2d_transpose``), and
    on ``ethos-u`` it stays a TFLite operator whose output is TFLite Micro's."""
    rs = np.random.RandomState(0)
    model = transpose_conv("int8", rs, weights_dtype="int8", w_zp=3, bias="int32",
                           in_q=(0.05, 0), out_q=(0.1, 0))
    reason = "an int8 TRANSPOSE_CONV whose weights 't1' have zero point 3"
    (verdict,) = operator_support(model)
    assert not verdict.importable and reason in verdict.reason, verdict.reason
    for target in ("llvm", "ethos-u,llvm"):
        with pytest.raises(UnsupportedModelError, match=reason):
            tvm_ethos.compile(model, target, cache_dir=False)
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro" and reason in placed.why, placed.why
    x = rs.randint(-128, 128, (1, 4, 4, 4)).astype(np.int8)
    np.testing.assert_array_equal(np.asarray(cm.run([x])[0]), tflm_oracle(model, [x])[0])


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int16", "uint8"])
@pytest.mark.parametrize("k", [1, 3])
def test_a_striped_plan_of_either_form_is_exact(dtype, k):
    """The least-memory plan cuts the transpose conv into stripes (each its own window of the
    upscaled input, the zero-point taps of a kernel below the stride included)."""
    kw = (dict(bias="int64", bias_range=1 << 30) if dtype == "int16" else
          dict(in_q=(0.05, 131), out_q=(0.2, 119), w_zp=77, bias="int32"))
    shape = (1, 24, 20, 16)
    data = transpose_conv(dtype, np.random.RandomState(3), shape=shape, cout=16,
                          kernel=(k, k), **kw)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, budget="smallest")
    _on_the_npu(cm, "ethos-u")
    (row,) = [r for r in cm.plan_report["layers"] if "transpose_conv2d" in r["part"]]
    assert row["stripes"] > 1, row
    for x in extreme_inputs(shape, dtype, np.random.RandomState(k)):
        (got,), (want,) = cm.run(x), ORACLES[dtype](data, [x])
        assert np.array_equal(got.reshape(want.shape), want)


@pytest.mark.slow
@pytest.mark.parametrize("dtype, kernel", [("int16", (3, 3)), ("uint8", (1, 2))])
def test_velas_stream_on_the_functional_model_is_the_oracles(dtype, kernel, tmp_path):
    """Vela 5.2's stream for the same model (int16: its reduced scales and NATURAL rounding;
    uint8: its zero-point weights, here with a kernel row below the stride) run on
    ``ethosu_stream`` equals the oracle: the functional model's forms are the NPU's as Vela
    programs them."""
    pytest.importorskip("ethosu.vela")
    from planner.vela_run import run_vela
    from tvm_ethos import tflite_run

    kw = (dict(bias="int64", bias_range=1 << 30) if dtype == "int16" else
          dict(in_q=(0.05, 131), out_q=(0.2, 119), w_zp=77, bias="int32"))
    shape = (1, 5, 6, 7)
    model = transpose_conv(dtype, np.random.RandomState(6), shape=shape, cout=5,
                           kernel=kernel, act="relu", **kw)
    path = tmp_path / "m.tflite"
    path.write_bytes(model)
    data = run_vela(str(path), "ethos-u55-128").tflite
    assert tflite_run.has_ethos_u(data)
    prepared = tflite_run.prepare(data, "vela.tflite", None)
    for x in extreme_inputs(shape, dtype, np.random.RandomState(0)):
        want = ORACLES[dtype](model, [x])[0]
        got = np.asarray(tflite_run.run(prepared, [x]).outputs[0]).reshape(want.shape)
        np.testing.assert_array_equal(got, want)


@pytest.mark.slow
@pytest.mark.parametrize("dtype, bias", [("int16", "int64"), ("int16", None),
                                         ("uint8", "int32"), ("uint8", None)])
def test_the_tir_emulator_runs_either_form_exactly(dtype, bias):
    """``npu_runtime="tir"``: the Ethos-U subgraph run as the emulator's schedule of the TE
    lowering, planned, equal to the oracle."""
    kw = (dict(bias_range=1 << 30) if dtype == "int16" else
          dict(in_q=(0.05, 131), out_q=(0.2, 119), w_zp=77, kernel=(1, 2)))
    shape = (1, 5, 6, 7)
    data = transpose_conv(dtype, np.random.RandomState(6), shape=shape, cout=5, act="relu",
                          bias=bias, **kw)
    cm = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False, npu_runtime="tir")
    assert cm.partition_summary == {"ethos-u": 1}
    for x in extreme_inputs(shape, dtype, np.random.RandomState(2)):
        (got,), (want,) = cm.run(x), ORACLES[dtype](data, [x])
        assert np.array_equal(np.asarray(got).reshape(want.shape), want)
