"""TFLite's 16x8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED (int16 activations with zero
point 0, int8 weights, an int64 or int32 bias): the front door lets them through, the importer
carries the bias into the QDQ form, the hosts and the Ethos-U (one operation: with an int64
bias the reduced multiplier and NATURAL rounding, as Vela programs it; with an int32 one the
int8 scaling) compute TFLite Micro's arithmetic; every output equal to TFLite Micro's. Vela's
own stream for the same model, run on the functional model, gives TFLite Micro's outputs too
(the model's int16 path is the NPU's as Vela uses it)."""
from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from int16x8_models import KINDS, chain_16x8, f32, model_16x8

import tvm_ethos
from tests.helpers.tflite_oracle import tflm_oracle
from tvm_ethos.compute import int16x8
from tvm_ethos.frontend import operator_support

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

def _inputs(model_shape, rs, n=2) -> list[np.ndarray]:
    return [rs.randint(-32768, 32768, size=model_shape).astype(np.int16) for _ in range(n)]


def _assert_equal_to_tflm(cm, model: bytes, in_shape, seed=0) -> None:
    for x in _inputs(in_shape, np.random.RandomState(seed)):
        want = tflm_oracle(model, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


@st.composite
def cases(draw):
    """(kind, builder arguments, input shape): shapes, strides, padding, the fused
    activation, the bias type (int64: the int64 accumulator; int32: TFLite's int32 one) and
    every scale drawn (the output scale from far below the input's to its neighbourhood)."""
    kind = draw(st.sampled_from(KINDS))
    in_scale = draw(st.floats(1e-5, 1e-2).map(f32))
    # the largest input scale x weight scale / output scale (weight scales are below 0.02),
    # from 2**-20 to 2**-3: every sum scales into int32, TFLite's contract for its kernels
    gain = 2.0 ** -draw(st.floats(3, 20))
    args = dict(in_scale=in_scale, out_scale=f32(in_scale * 0.02 / gain),
                act=draw(st.sampled_from([None, "relu", "relu6", "relu_n1_to_1"])),
                cout=draw(st.integers(1, 20)),
                # TFLite Micro's int16 depthwise reads any bias as int64: int64 only there
                bias_dtype=draw(st.sampled_from(["int64"] if kind == "depthwise"
                                                else ["int64", "int32"])))
    # an int64 bias up to 2**38 (the NPU's is 40 bits) where it scales into int32, an int32
    # one well inside 32 bits
    wide = min(1 << 38, int(2 ** 30 / gain))
    args["bias_range"] = draw(st.sampled_from([200000, wide] if args["bias_dtype"] == "int64"
                                              else [200000]))
    if kind == "fc":
        shape = (draw(st.integers(1, 3)), draw(st.integers(1, 70)))
        args["fc_per_channel"] = draw(st.booleans())
    else:
        shape = (1, draw(st.integers(3, 9)), draw(st.integers(3, 9)), draw(st.integers(1, 12)))
        k = draw(st.integers(1, 3))
        s = draw(st.integers(1, 2))
        args.update(kernel=(k, k), stride=(s, s), padding=draw(st.sampled_from(["SAME",
                                                                                "VALID"])))
    args["in_shape"] = shape
    return kind, args, shape, draw(st.integers(0, 2 ** 16))


@settings(max_examples=8, deadline=None)
@given(case=cases(), accelerator=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_a_16x8_operator_is_one_npu_operation_equal_to_tflite_micro(case, accelerator):
    kind, args, shape, seed = case
    model = model_16x8(kind, np.random.RandomState(seed), **args)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _assert_equal_to_tflm(cm, model, shape, seed)


@settings(max_examples=6, deadline=None)
@given(case=cases())
def test_the_llvm_host_computes_tflite_micros_16x8_arithmetic(case):
    kind, args, shape, seed = case
    model = model_16x8(kind, np.random.RandomState(seed), **args)
    cm = tvm_ethos.compile(model, "llvm", cache_dir=False)
    _assert_equal_to_tflm(cm, model, shape, seed)


#: weight scales whose Q31 multiplier is 0x7FFF0000 and above: TFLite saturates the reduced
#: multiplier at 0x7FFF there (where rounding would give 0x8000)
_SATURATING = dict(in_scale=2.0 ** -10, out_scale=2.0 ** -12,
                   w_scales=[f32((1 - 2.0 ** -20) / 4), f32((1 - 2.0 ** -17) / 4)], cout=2)


@pytest.mark.parametrize("target", ["ethos-u", "llvm"])
def test_the_reduced_multiplier_saturates_as_tflites(target):
    """Multipliers just below one reduce to 0x7FFF, not to the rounded 0x8000: an output
    off by the multiplier's last bit is caught on large sums."""
    mult = (np.float64(np.float32(2.0 ** -10)) * np.float64(np.float32(_SATURATING["w_scales"]))
            / 2.0 ** -12)
    assert (np.frexp(mult)[0] * 2 ** 31 >= 0x7FFF0000).all()
    model = model_16x8("conv", np.random.RandomState(3), kernel=(3, 3), **_SATURATING)
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    _assert_equal_to_tflm(cm, model, (1, 6, 6, 4), seed=4)


def test_requantize_is_tflites_int64_multiply_by_quantized_multiplier():
    """The numpy reference against TFLite's formula written out on Python integers (the
    multiplier's 15-bit reduction with its saturation, one rounding shift, the int32
    truncation)."""
    rs = np.random.RandomState(0)
    mult = np.concatenate([rs.randint(1 << 30, 1 << 31, 200), [0x7FFF0000, 0x7FFFFFFF]])
    shift = rs.randint(-20, 3, mult.size)
    acc = rs.randint(-(1 << 40), 1 << 40, mult.size)
    got = int16x8.requantize(acc, mult, shift)
    for a, m, s, g in zip(acc.tolist(), mult.tolist(), shift.tolist(), got.tolist()):
        reduced = (m + (1 << 15)) >> 16 if m < 0x7FFF0000 else 0x7FFF
        r = 15 - s
        want = (a * reduced + (1 << (r - 1))) >> r
        want = (want + (1 << 31)) % (1 << 32) - (1 << 31)
        assert g == want, (a, m, s)


def _vela_stream(model: bytes, tmp_path) -> bytes:
    from planner.vela_run import run_vela

    path = os.path.join(tmp_path, "m.tflite")
    with open(path, "wb") as f:
        f.write(model)
    return run_vela(path, "ethos-u55-128").tflite


@pytest.mark.parametrize("kind", KINDS)
def test_velas_16x8_stream_on_the_functional_model_is_tflite_micros(kind, tmp_path):
    """Vela 5.2's stream for the same model (its reduced scales, NATURAL rounding, 40-bit
    bias) run on ``ethosu_stream`` equals TFLite Micro: the functional model's int16 path is
    the NPU's as Vela programs it."""
    from tvm_ethos import tflite_run

    shape = (2, 33) if kind == "fc" else (1, 7, 5, 6)
    model = model_16x8(kind, np.random.RandomState(6), in_shape=shape, stride=(2, 2),
                       act="relu", out_scale=3e-4)
    data = _vela_stream(model, str(tmp_path))
    assert tflite_run.has_ethos_u(data)
    prepared = tflite_run.prepare(data, "vela.tflite", None)
    for x in _inputs(shape, np.random.RandomState(7)):
        want = tflm_oracle(model, [x])[0]
        got = np.asarray(tflite_run.run(prepared, [x]).outputs[0]).reshape(want.shape)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind, kwargs", [("conv", dict(zero_point=5)),
                                          ("depthwise", dict(bias_dtype="int32"))])
def test_16x8_forms_tflite_micro_reads_otherwise_stay_refused_in_one_line(kind, kwargs):
    """TFLite Micro's int16 convolution ignores the zero points its FULLY_CONNECTED applies
    (TFLite's converter writes 0), and its int16 depthwise reads an INT32 bias as INT64: the
    front door keeps refusing such an operator in one line, and TFLite Micro runs it for the
    tflite-micro host."""
    model = model_16x8(kind, np.random.RandomState(8), **kwargs)
    (verdict,) = operator_support(model)
    assert not verdict.importable and "INT16" in verdict.reason and "\n" not in verdict.reason
    with pytest.raises(tvm_ethos.errors.UnsupportedModelError, match="INT16"):
        tvm_ethos.compile(model, "llvm", cache_dir=False)
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert cm.placement[0].placed_on == "tflite-micro"
    if kind == "conv":   # the depthwise one reads past its bias: no output to compare
        _assert_equal_to_tflm(cm, model, (1, 6, 6, 4))


@pytest.mark.parametrize("kwargs, says", [
    (dict(bias_range=1 << 41), "40 bits"),
    (dict(bias_dtype="int32", bias_range=2000, in_shape=(1, 5, 5, 128)), "int32 accumulator"),
    (dict(bias_range=1 << 38, in_scale=2 ** -7, out_scale=2 ** -7, w_scales=[0.25] * 5),
     "scaled sums"),
])
def test_what_the_npu_cannot_compute_as_tflite_runs_on_the_host(kwargs, says):
    """A bias beyond the NPU's 40 bits, an int32 bias whose sums TFLite's int32 accumulator
    could wrap, and sums that scale beyond the int32 TFLite's requantization returns (TFLite
    wraps, the NPU would not): the Ethos-U refuses the operator, saying why; the tflite-micro
    host keeps it a TFLite operator and the llvm host computes an int64 bias's operator as
    TFLite does, wrapping included."""
    model = model_16x8("conv", np.random.RandomState(8), **kwargs)
    shape = kwargs.get("in_shape", (1, 6, 6, 4))
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(model), "ethos-u,llvm"))
    assert "rejected by ethos-u: " in report and says in report, report
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert cm.placement[0].placed_on == "tflite-micro", cm.placement
    _assert_equal_to_tflm(cm, model, shape)
    if kwargs.get("bias_dtype", "int64") == "int64":
        _assert_equal_to_tflm(tvm_ethos.compile(model, "llvm", cache_dir=False), model, shape)


@pytest.mark.parametrize("accelerator", [
    "ethos-u55-128", pytest.param("ethos-u65-256", marks=pytest.mark.slow)])
def test_a_16x8_network_is_planned_and_streamed_equal_to_tflite_micro(accelerator):
    """A chain of 16x8 convolutions and a fully connected layer, every feature map int16:
    wholly on the NPU (one ``ethos-u`` operator) whatever the plan's stripes and cascades,
    every output TFLite Micro's; with an SRAM budget below the whole maps the planner must
    stripe them. The TIR emulator (``ethos-u,llvm``) of the least-memory plan too."""
    model = chain_16x8(np.random.RandomState(9))
    for budget in ("smallest", None):
        cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}",
                               cache_dir=False, **({"budget": budget} if budget else {}))
        assert {p.placed_on for p in cm.placement} == {"ethos-u"}, cm.placement
        _assert_equal_to_tflm(cm, model, (1, 16, 16, 8), seed=10)
    # the TIR emulator of the same plan (the package's NPU runtime)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator},llvm",
                           cache_dir=False, budget="smallest")
    assert cm.partition_summary == {"ethos-u": 5}, cm.partition_summary
    _assert_equal_to_tflm(cm, model, (1, 16, 16, 8), seed=10)


@pytest.mark.parametrize("target", ["llvm", "opencl"])
def test_the_hosts_compute_a_16x8_network_as_tflite_micro(target):
    """The host kernels (CPU and GPU) of the same network: int64 accumulators and the reduced
    multiplier in both code generators."""
    if target == "opencl":
        pytest.importorskip("pyopencl")
    model = chain_16x8(np.random.RandomState(12))
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    assert cm.partition_summary == {target: 5}, cm.partition_summary
    _assert_equal_to_tflm(cm, model, (1, 16, 16, 8), seed=13)
