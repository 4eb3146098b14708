"""CONCATENATION with a fused activation (RELU, RELU6, RELU_N1_TO_1; issue 28) on the
Ethos-U as one operator, as Vela 5.2 takes it: each of its copies (a requantizing one too)
clamps the codes it writes to the activation's bounds in the output's quantization.

TFLite Micro and LiteRT both refuse the model itself, so the oracle is the activation
operator run on the concatenation's codes (``concat_activation_models``; the codes:
``test_requantizing_concat.reference``, LiteRT's scaling where an input is quantized unlike
the output)."""
from __future__ import annotations

import numpy as np
import pytest
from concat_activation_models import (
    ACT_OPS,
    ACTIVATIONS,
    activation_oracle,
    concat_op,
    fused_concat,
)
from graph_builder import Graph
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_requantizing_concat import INT8_CASE, RANGES, quantizations, reference
from tflite_builder import T

import tvm_ethos
from benchmarks.vela_superset_probes import Q_IN, concatenation
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.compute import concat_requant

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def _check(model: bytes, xs, want: np.ndarray, target: str, runtime: str = "stream",
           on: str = "ethos-u"):
    """``model`` compiled for ``target``: one operator, placed ``on``, outputs ``want``."""
    kw = {} if target == "ethos-u" else {"npu_runtime": runtime}
    cm = tvm_ethos.compile(model, target, cache_dir=False, **kw)
    assert cm.partition_summary == {on: 1}, cm.partition_summary
    (got,) = cm.run(*xs)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    return cm


def _run(shapes, axis, qs, out_q, act, dtype, target, seed, runtime="stream") -> None:
    lo, hi = RANGES[dtype]
    rs = np.random.RandomState(seed)
    xs = [rs.randint(lo, hi + 1, size=s).astype(dtype) for s in shapes]
    want = activation_oracle(reference(xs, axis, qs, out_q, dtype), out_q, act)
    npu = concat_requant.refusal(dtype, qs, out_q) == ""
    if target == "ethos-u" and not npu:
        return          # TFLite Micro, the host, refuses the model itself
    host = "tflite-micro" if target == "ethos-u" else target.split(",")[-1]
    _check(fused_concat(shapes, axis, qs, out_q, act, dtype), xs, want, target, runtime,
           "ethos-u" if npu else host)


SHAPES = [(1, 3, 4, 5), (1, 3, 4, 3)]
Q = (0.05, 3)


@pytest.mark.parametrize("target", ["ethos-u", "ethos-u,llvm"])
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_a_fused_activation_runs_on_the_npu_as_one_operator(act, target):
    _run(SHAPES, 3, [Q, Q], Q, act, "int8", target, 0)


@pytest.mark.parametrize("act,q,target", [
    ("relu", (0.05, -128), "ethos-u"), ("relu6", (0.01, -128), "ethos-u,llvm"),
    ("relu_n1_to_1", (1 / 128, 0), "ethos-u")],
    ids=["relu-zp-lowest", "relu6-past-the-top", "relu-n1-to-1-past-the-ends"])
def test_a_clamp_that_clamps_nothing_reachable_is_exact_on_the_npu(act, q, target):
    """Inputs quantized as the output and bounds at or past the type's ends: the clamp is
    the whole range of the type (the copies clamp nothing)."""
    _run(SHAPES, 3, [q, q], q, act, "int8", target, 1)


@pytest.mark.parametrize("act,target", [("relu", "ethos-u"), ("relu6", "ethos-u,llvm")])
def test_an_int16_concatenation_clamps_as_tflite_micro(act, target):
    """int16 (every tensor quantized alike, zero point 0): the 16-bit copies clamp too. No
    runtime has an int16 RELU_N1_TO_1 to be its oracle."""
    q = (2.0**-12, 0)
    rs = np.random.RandomState(11)
    xs = [rs.randint(-32768, 32768, size=s).astype(np.int16) for s in SHAPES]
    want = activation_oracle(np.concatenate(xs, 3), q, act)
    _check(fused_concat(SHAPES, 3, [q, q], q, act, "int16"), xs, want, target)


@pytest.mark.parametrize("target", ["ethos-u", "ethos-u,llvm"])
def test_a_requantizing_copy_clamps_in_the_outputs_quantization(target):
    dtype, axis, shapes, qs, out_q = INT8_CASE
    _run(shapes, axis, qs, out_q, "relu6", dtype, target, 3)


def test_the_tir_emulator_and_the_llvm_host_clamp_as_tflite():
    dtype, axis, shapes, qs, out_q = INT8_CASE
    _run(shapes, axis, qs, out_q, "relu", dtype, "ethos-u,llvm", 4, runtime="tir")
    lo, hi = RANGES[dtype]
    xs = [np.random.RandomState(5).randint(lo, hi + 1, size=s).astype(dtype) for s in shapes]
    want = activation_oracle(reference(xs, axis, qs, out_q, dtype), out_q, "relu_n1_to_1")
    _check(fused_concat(shapes, axis, qs, out_q, "relu_n1_to_1", dtype), xs, want, "llvm",
           on="llvm")


#: scales where a bound falls on a tie: -1 / 2 and 6 / 12 are -0.5 and 0.5, which TFLite
#: rounds away from zero
TIES = [("relu_n1_to_1", 2.0), ("relu6", 12.0)]


@pytest.mark.parametrize("act,scale", TIES, ids=[a for a, _ in TIES])
def test_a_bound_on_a_tie_rounds_as_tflite(act, scale):
    """The converter quantizes a fused activation's bounds as TFLite's kernels do (float32,
    half away from zero): the concatenation's, and a convolution's (every operator's)."""
    q = (scale, 0)
    _run(SHAPES, 3, [q, q], q, act, "int8", "ethos-u,llvm", 8)
    g = Graph(np.random.RandomState(1))
    x = g.input((1, 6, 6, 4))
    y = g.conv2d(x, 8, act=act)
    g.tensors[y].scale, g.tensors[y].zp = np.float32([scale]), np.int64([0])
    conv = g.build([y])
    xs = [np.random.RandomState(9).randint(-128, 128, size=(1, 6, 6, 4)).astype(np.int8)]
    want = (oracle if act == "relu_n1_to_1" else tflm_oracle)(conv, xs)[0]
    assert np.unique(want).size > 1          # the clamp leaves more than one code
    cm = tvm_ethos.compile(conv, "ethos-u", cache_dir=False)
    assert cm.partition_summary == {"ethos-u": 1}, cm.partition_summary
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)


@st.composite
def fused_cases(draw):
    """Any concatenation the Ethos-U takes (int8 or uint8, 2 to 4 inputs along height, width
    or depth, each quantized as the output or not) with any of the three activations."""
    dtype = draw(st.sampled_from(["int8", "uint8"]))
    axis = draw(st.integers(1, 3))
    base = [1] + [draw(st.integers(1, 5)) for _ in range(3)]
    shapes = []
    for _ in range(draw(st.integers(2, 4))):
        s = list(base)
        s[axis] = draw(st.integers(1, 5))
        shapes.append(tuple(s))
    out_q = draw(quantizations(dtype))
    qs = [out_q if draw(st.booleans()) else draw(quantizations(dtype)) for _ in shapes]
    return shapes, axis, qs, out_q, draw(st.sampled_from(ACTIVATIONS)), dtype


@settings(max_examples=2, deadline=None)
@given(case=fused_cases(), target=st.sampled_from(["ethos-u", "ethos-u,llvm"]))
@example(case=([(1, 2, 2, 3), (1, 2, 2, 2)], 3, [(0.05, -128)] * 2, (0.05, -128), "relu",
               "int8"), target="ethos-u")
def test_a_sample_of_fused_concatenations_equals_tflite(case, target):
    _run(*case, target, 0)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(case=fused_cases(), target=st.sampled_from(["ethos-u", "ethos-u,llvm"]),
       runtime=st.sampled_from(["stream", "tir"]), seed=st.integers(0, 999))
def test_any_fused_concatenation_equals_tflite(case, target, runtime, seed):
    _run(*case, target, seed, runtime)


@pytest.mark.slow
@pytest.mark.parametrize("act", ACTIVATIONS)
def test_the_audits_probes_run_on_the_npu_as_tflite(act):
    """benchmarks/vela_superset_probes.py's fused CONCATENATION probes (out of PROBE_GAPS)."""
    model = concatenation(act=act)
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert cm.partition_summary == {"ethos-u": 1}, cm.partition_summary
    rs = np.random.RandomState(10)
    xs = [rs.randint(-128, 128, size=(1, 4, 4, 8)).astype(np.int8) for _ in range(2)]
    q = Q_IN["int8"]
    want = activation_oracle(reference(xs, 3, [q, q], q, "int8"), q, act)
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)


# ---------------------------------------------------------------- in a cascade
def convs_concat_conv(act: str | None, fused: bool) -> bytes:
    """Two convolutions concatenated along the channels with the activation ``act`` (fused,
    or the activation operator after the concatenation), then a convolution."""
    g = Graph(np.random.RandomState(7))
    x = g.input((1, 8, 4, 2))
    xs = [g.conv2d(x, n) for n in (4, 2)]
    first, second = g.tensors[xs[0]], g.tensors[xs[1]]
    second.scale, second.zp = first.scale, first.zp     # copies, no requantization
    q = (float(first.scale[0]), int(first.zp[0]))
    shape = list(g.shape(xs[0]))
    shape[3] = sum(g.shape(t)[3] for t in xs)
    y = g._add(T(shape, "int8", scale=q[0], zp=q[1]))
    g.ops.append(concat_op(3, act if fused else None, xs, y))
    if not fused:
        z = g._add(T(shape, "int8", scale=q[0], zp=q[1]))
        g.ops.append((ACT_OPS[act], 0, None, [y], [z]))
        y = z
    return g.build([g.conv2d(y, 8)])


@pytest.mark.parametrize("act", ["relu6"])
def test_a_cascade_clamps_the_ring_copies_stripe_by_stripe(act):
    """At the smallest budget the plan cascades the CONCATENATION with the convolution after
    it, its operands in rings (``stream_cascade``'s ring copies, each clamping): equal to
    TFLite Micro running the activation as its own operator."""
    model, twin = convs_concat_conv(act, True), convs_concat_conv(act, False)
    target = "ethos-u -accelerator_config=ethos-u65-256,llvm"
    cm = tvm_ethos.compile(model, target, npu_runtime="stream", cache_dir=False,
                           budget="smallest")
    assert set(cm.partition_summary) == {"ethos-u"}, cm.partition_summary
    (sub,) = cm.plan_report["subgraphs"].values()
    assert any(len(p["parts"]) > 1 and p["stripes"] > 1 and
               any("concatenate" in name for name in p["parts"]) for p in sub["plans"])
    rs = np.random.RandomState(0)
    for _ in range(2):
        x = rs.randint(-128, 128, size=cm.inputs[0].shape).astype(np.int8)
        np.testing.assert_array_equal(cm.run(x)[0], tflm_oracle(twin, [x])[0])


def test_ethos_n_keeps_its_concatenation_and_leaves_the_clamp_on_the_host():
    """Ethos-N's concatenation copies codes: the clamp stays a CLIP on the host, as before,
    and the whole is exact."""
    model = fused_concat(SHAPES, 3, [Q, Q], Q, "relu6")
    report = tvm_ethos.partition_report(tvm_ethos.load_model(model), "ethos-n,llvm")
    assert [(op.tflite_name, op.placed_on) for op in report.operators] == [
        ("CONCATENATION", "ethos-n"), ("CLIP", "llvm")], str(report)
    rs = np.random.RandomState(6)
    xs = [rs.randint(-128, 128, size=s).astype(np.int8) for s in SHAPES]
    want = activation_oracle(reference(xs, 3, [Q, Q], Q, "int8"), Q, "relu6")
    cm = tvm_ethos.compile(model, "ethos-n,llvm", cache_dir=False)
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)
