"""CONCATENATION with inputs quantized unlike the output (issue 28) on the Ethos-U: one
requantizing copy per such input (a 1x1 average pool rescaling once, half up), in the stream,
the TIR emulator and the llvm host's kernel, equal to LiteRT's ``ConcatenationWithScaling``.

TFLite Micro refuses such a model, and LiteRT's int8 kernel too, so LiteRT's uint8 kernel
(float32 scaling) is the oracle: ``concat_requant.litert_codes`` is checked against it on every
uint8 code, and read as the definition for int8. Quantizations where the NPU's integer rescale
is not that on every code (exact ties of negative values) stay on the host and say why."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
from graph_builder import Graph
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_stream_movement import concat
from tflite_builder import BO, BOPT, T

import tvm_ethos
from tests.helpers.tflite_oracle import oracle
from tvm_ethos.compute import concat_requant

pytest.importorskip("ethosu.vela")

RANGES = {"int8": (-128, 127), "uint8": (0, 255)}
scales = st.floats(0.002, 1.0).map(lambda v: float(np.float32(v)))


@st.composite
def quantizations(draw, dtype: str):
    lo, hi = RANGES[dtype]
    return draw(scales), draw(st.integers(lo, hi))


def concat_model(shapes, axis: int, qs, out_q, dtype: str) -> bytes:
    """One CONCATENATION of inputs of ``shapes`` quantized ``qs`` into ``out_q``."""
    return concat(shapes, axis, q=out_q, qs=qs, dtype=dtype)


def reference(xs, axis: int, qs, out_q, dtype: str) -> np.ndarray:
    """LiteRT's arithmetic: each input's codes, rescaled where quantized unlike the output."""
    lo = RANGES[dtype][0]
    parts = [x.astype(np.int64) if tuple(q) == tuple(out_q) else
             concat_requant.litert_codes(dtype, q, out_q)[x.astype(np.int64) - lo]
             for x, q in zip(xs, qs)]
    return np.concatenate(parts, axis).astype(dtype)


# ---------------------------------------------------------------- the arithmetic
@settings(max_examples=6, deadline=None)
@given(in_q=quantizations("uint8"), out_q=quantizations("uint8"))
@example(in_q=(0.03, 124), out_q=(0.08, 123))       # 3/8: exact ties
def test_the_float_scaling_is_litert_on_every_uint8_code(in_q, out_q):
    codes = np.arange(256, dtype=np.uint8).reshape(1, 4, 8, 8)
    same = np.zeros((1, 4, 8, 1), np.uint8)
    model = concat_model([(1, 4, 8, 8), (1, 4, 8, 1)], 3, [in_q, out_q], out_q, "uint8")
    (got,) = oracle(model, [codes, same])
    np.testing.assert_array_equal(got[..., :8].ravel(),
                                  concat_requant.litert_codes("uint8", in_q, out_q))


@settings(max_examples=40, deadline=None)
@given(dtype=st.sampled_from(["int8", "uint8"]), data=st.data())
def test_the_refusal_is_the_first_code_where_the_npu_differs(dtype, data):
    in_q, out_q = data.draw(quantizations(dtype)), data.draw(quantizations(dtype))
    why = concat_requant.refusal(dtype, [out_q, in_q], out_q)
    same = np.array_equal(concat_requant.npu_codes(dtype, in_q, out_q),
                          concat_requant.litert_codes(dtype, in_q, out_q))
    assert (why == "") == same, why
    if why:
        assert why.startswith("input 1 requantized from") and "\n" not in why


def test_exact_ties_of_negative_values_and_int16_are_refused_in_one_line():
    why = concat_requant.refusal("int8", [(0.05, 3), (0.03, -4)], (0.08, -5))
    assert "input 1 requantized from (0.03, -4)" in why and "code -128 -52" in why, why
    assert "-51" in why
    why16 = concat_requant.refusal("int16", [(0.001, 0), (0.002, 0)], (0.001, 0))
    assert "int16 kernels copy codes" in why16, why16
    assert concat_requant.refusal("int8", [(0.05, 3)] * 2, (0.05, 3)) == ""


# ---------------------------------------------------------------- compiled
def _check(model: bytes, xs, want, target: str, npu: bool, runtime: str = "stream"):
    cm = tvm_ethos.compile(model, target, cache_dir=False,
                           **({} if target == "ethos-u" else {"npu_runtime": runtime}))
    (got,) = cm.run(*xs)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    host = "tflite-micro" if target == "ethos-u" else target.split(",")[-1]
    want_on = "ethos-u" if npu and target.startswith("ethos-u") else host
    assert set(cm.partition_summary) == {want_on}, cm.partition_summary
    return cm


@st.composite
def concat_cases(draw):
    dtype = draw(st.sampled_from(["int8", "uint8"]))
    axis = draw(st.integers(1, 3))
    base = [1] + [draw(st.integers(1, 6)) for _ in range(3)]
    shapes = []
    for _ in range(draw(st.integers(2, 4))):
        s = list(base)
        s[axis] = draw(st.integers(1, 6))
        shapes.append(tuple(s))
    out_q = draw(quantizations(dtype))
    qs = [out_q if draw(st.booleans()) else draw(quantizations(dtype)) for _ in shapes]
    return dtype, axis, shapes, qs, out_q


def _run_case(case, target: str, seed: int, runtime: str = "stream") -> None:
    dtype, axis, shapes, qs, out_q = case
    lo, hi = RANGES[dtype]
    rs = np.random.RandomState(seed)
    xs = [rs.randint(lo, hi + 1, size=s).astype(dtype) for s in shapes]
    model = concat_model(shapes, axis, qs, out_q, dtype)
    want = reference(xs, axis, qs, out_q, dtype)
    if dtype == "uint8":
        np.testing.assert_array_equal(oracle(model, xs)[0], want)
    npu = concat_requant.refusal(dtype, qs, out_q) == ""
    if target == "ethos-u" and not npu:
        return          # TFLite Micro, the host, refuses the model itself
    _check(model, xs, want, target, npu, runtime)


INT8_CASE = ("int8", 3, [(1, 3, 4, 5), (1, 3, 4, 3)], [(0.05, 3), (0.0731, -9)], (0.0917, -5))
UINT8_CASE = ("uint8", 1, [(1, 2, 3, 4), (1, 3, 3, 4), (1, 1, 3, 4)],
              [(0.05, 130), (0.1131, 128), (0.0417, 3)], (0.0917, 120))


@pytest.mark.parametrize("case,target", [
    (INT8_CASE, "ethos-u"), (UINT8_CASE, "ethos-u"),
    (INT8_CASE, "ethos-u,llvm"), (UINT8_CASE, "ethos-u,llvm"),
], ids=["int8-tflite-micro", "uint8-tflite-micro", "int8-llvm", "uint8-llvm"])
def test_a_requantizing_concatenation_runs_on_the_npu(case, target):
    assert concat_requant.refusal(case[0], case[3], case[4]) == ""
    _run_case(case, target, 0)


def test_the_tir_emulator_and_the_llvm_host_requantize_as_litert():
    _run_case(UINT8_CASE, "ethos-u,llvm", 1, runtime="tir")
    _run_case(INT8_CASE, "llvm", 2)


def test_a_tie_stays_on_the_host_and_says_why():
    """(0.03, -4) -> (0.08, -5) is a ratio of 3/8: LiteRT's arithmetic rounds the ties of
    negative values away from zero, the NPU's rescale up, so the operator stays on the host
    (TVM's float kernel there, as before: no runtime defines an int8 requantizing
    concatenation) and the report says why."""
    model = concat_model([(1, 2, 2, 3), (1, 2, 2, 3)], 3, [(0.05, 3), (0.03, -4)], (0.08, -5),
                         "int8")
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(model), "ethos-u,llvm"))
    assert ("rejected by ethos-u: requantizing concatenation: input 1 requantized from "
            "(0.03, -4) to (0.08, -5): LiteRT's float32 scaling gives code -128 -52, the NPU's "
            "integer rescale -51") in report, report
    assert "-> llvm" in report


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(case=concat_cases(), target=st.sampled_from(["ethos-u", "ethos-u,llvm"]),
       runtime=st.sampled_from(["stream", "tir"]), seed=st.integers(0, 999))
def test_any_requantizing_concatenation_equals_litert(case, target, runtime, seed):
    _run_case(case, target, seed, runtime)


# ---------------------------------------------------------------- in a cascade
def concat_between_convs(seed: int, h: int, w: int, c: int, widths) -> bytes:
    """Convolutions concatenated along the channels (each quantized as drawn, the output
    another way: every input requantized), then a convolution."""
    g = Graph(np.random.RandomState(seed))
    x = g.input((1, h, w, c))
    xs = [g.conv2d(x, n) for n in widths]
    shape = list(g.shape(xs[0]))
    shape[3] = sum(g.shape(t)[3] for t in xs)
    y = g._add(T(shape, "int8", scale=0.0917, zp=-5))

    def opts(b):
        tflite.ConcatenationOptionsStart(b)
        tflite.ConcatenationOptionsAddAxis(b, 3)
        return tflite.ConcatenationOptionsEnd(b)

    g.ops.append((BO.CONCATENATION, BOPT.ConcatenationOptions, opts, xs, [y]))
    return g.build([g.conv2d(y, 8)])


def test_a_cascade_streams_the_requantizing_copies_stripe_by_stripe():
    """At the smallest budget the plan cascades the CONCATENATION with the convolution after
    it, its operands in rings (``stream_cascade``'s ring copies, each requantizing): the
    stream equals the llvm host's kernel (no TFLite runtime takes an int8 requantizing
    concatenation) and touches exactly the plan's peak."""
    model = concat_between_convs(3, 8, 4, 2, (4, 2))
    target = "ethos-u -accelerator_config=ethos-u65-256,llvm"
    cm = tvm_ethos.compile(model, target, npu_runtime="stream", cache_dir=False,
                           budget="smallest")
    (entry,) = cm.plan_report["streams"].values()
    assert entry["schedule"] == "plan" and entry["realizes_plan"], entry
    assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"]
    (sub,) = cm.plan_report["subgraphs"].values()
    assert any(len(p["parts"]) > 1 and p["stripes"] > 1 and
               any("concatenate" in name for name in p["parts"]) for p in sub["plans"])
    host = tvm_ethos.compile(model, "llvm", cache_dir=False)
    rs = np.random.RandomState(0)
    for _ in range(2):
        x = rs.randint(-128, 128, size=cm.inputs[0].shape).astype(np.int8)
        np.testing.assert_array_equal(cm.run(x)[0], host.run(x)[0])
