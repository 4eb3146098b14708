"""Clamps that take one value whatever their input: RELU6 at an input scale above 12 (6 / scale
rounds to 0) or a zero point of 127, RELU from a zero point of 127 (every code at or below the
zero point), RELU_N1_TO_1 / RELU_0_TO_1 at large scales, and the same clamps fused into a
CONV_2D or an ADD. TFLite Micro (LiteRT's reference kernels where TFLite Micro has none) maps
every code to the one code; the NPU's stream, the emulator's TIR and the llvm host must too,
and the emulator's TIR must keep reading its input as the NPU does
(``te_ops.clamp_cast``). An empty clamp needs a zero point outside the type's codes, which the
front door refuses."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
import tvm
from hypothesis import example, given, settings
from hypothesis import strategies as st
from tflite_builder import ACT, BO, BOPT, T
from tvm import te

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.compute.te_ops import clamp_cast
from tvm_ethos.errors import UnsupportedModelError

pytest.importorskip("ethosu.vela")

TARGETS = ["ethos-u", "ethos-u,llvm", "llvm"]
#: the TFLite Micro kernels; RELU_N1_TO_1 and RELU_0_TO_1 quantized unlike their input, and
#: RELU_0_TO_1 at all, have LiteRT's only
TFLM_KINDS = {BO.RELU, BO.RELU6}
EVERY_INT8 = np.arange(-128, 128, dtype=np.int8).reshape(1, 4, 8, 8)
EVERY_INT16 = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 32, 32, 64)


def unary_model(kind: int, in_q, out_q, dtype: str = "int8", shape=(1, 4, 8, 8)) -> bytes:
    x = T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    y = T(list(shape), dtype, scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(kind, 0, None, [0], [1])], [0], [1])


def conv_model(act: str, out_q, dtype: str = "int8", x_q=(0.05, 0), seed: int = 0) -> bytes:
    """A 1x1 CONV_2D (4x4x8 -> 8 channels) with ``act`` fused, its output quantized ``out_q``."""
    rs = np.random.RandomState(seed)
    x = T([1, 4, 4, 8], dtype, scale=x_q[0], zp=x_q[1])
    w = T([8, 1, 1, 8], "int8", scale=np.full(8, 0.01, np.float32), zp=np.zeros(8, np.int64),
          data=rs.randint(-127, 128, size=(8, 1, 1, 8)), axis=0)
    bias = T([8], "int32" if dtype == "int8" else "int64",
             scale=np.full(8, x_q[0] * 0.01, np.float32), zp=np.zeros(8, np.int64),
             data=rs.randint(-2000, 2000, size=8))
    y = T([1, 4, 4, 8], dtype, scale=out_q[0], zp=out_q[1])

    def opts(b):
        tflite.Conv2DOptionsStart(b)
        tflite.Conv2DOptionsAddPadding(b, tflite.Padding.SAME)
        tflite.Conv2DOptionsAddStrideW(b, 1)
        tflite.Conv2DOptionsAddStrideH(b, 1)
        tflite.Conv2DOptionsAddFusedActivationFunction(b, ACT[act])
        tflite.Conv2DOptionsAddDilationWFactor(b, 1)
        tflite.Conv2DOptionsAddDilationHFactor(b, 1)
        return tflite.Conv2DOptionsEnd(b)

    return tb.serialize([x, w, bias, y], [(BO.CONV_2D, BOPT.Conv2DOptions, opts, [0, 1, 2], [3])],
                        [0], [3])


def add_model(act: str, out_q, dtype: str = "int8") -> bytes:
    """ADD with ``act`` fused; int16 inputs quantized alike (the Ethos-U takes no other
    int16 ADD exactly)."""
    int8 = dtype == "int8"
    a = T([1, 4, 4, 8], dtype, scale=0.05, zp=0)
    b = T([1, 4, 4, 8], dtype, scale=0.04 if int8 else 0.05, zp=1 if int8 else 0)
    y = T([1, 4, 4, 8], dtype, scale=out_q[0], zp=out_q[1])

    def opts(bb):
        tflite.AddOptionsStart(bb)
        tflite.AddOptionsAddFusedActivationFunction(bb, ACT[act])
        return tflite.AddOptionsEnd(bb)

    return tb.serialize([a, b, y], [(BO.ADD, BOPT.AddOptions, opts, [0, 1], [2])], [0, 1], [2])


def _inputs(cm, seed: int) -> list:
    rs = np.random.RandomState(seed)
    out = []
    for spec in cm.inputs:
        info = np.iinfo(spec.dtype)
        out.append(rs.randint(info.min, info.max + 1, size=spec.shape).astype(spec.dtype))
    return out


def _runs_exactly(model: bytes, target: str, xs=None, litert: bool = False,
                  whole: bool = True) -> np.ndarray:
    """``model`` compiled for ``target`` against TFLite Micro (``litert``: LiteRT's reference
    kernels); ``whole``: wholly on the target's first device. Returns the oracle's output."""
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    if whole:
        assert set(cm.partition_summary) == {target.split(",")[0]}, cm.partition_summary
    xs = _inputs(cm, 0) if xs is None else xs
    (want,) = (oracle if litert else tflm_oracle)(model, xs)
    (got,) = cm.run(*xs)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    return want


# ------------------------------------------------------------------ the lowering itself
def _clamp_kernel(zp: int, lo: int, hi: int):
    x = te.placeholder((256,), "int8", name="x")
    y = te.compute((256,), lambda i: clamp_cast(x[i].astype("int32") - zp, lo, hi, "int8"),
                   name="y")
    return te.create_prim_func([x, y])


@settings(max_examples=3, deadline=None)
@example(zp=0, lo=0, hi=0)        # RELU6 above scale 12
@example(zp=127, lo=0, hi=127)    # every code at or below the zero point: one value, 0
@example(zp=0, lo=5, hi=-3)       # an empty range: the upper bound, as TFLite clamps
@given(zp=st.integers(-128, 127), lo=st.integers(-128, 127), hi=st.integers(-128, 127))
def test_clamp_cast_reads_its_input_and_clamps_as_tflite(zp, lo, hi):
    """Whatever the bounds, the PrimFunc reads ``x`` (a clamp folded to a constant would not,
    and the emulator's schedule then misses the input the planner holds) and computes
    ``min(max(x - zp, lo), hi)`` on every int8 code."""
    func = _clamp_kernel(zp, lo, hi)
    assert "x[" in func.script().split("T.reads(", 1)[1].split(")", 1)[0], func.script()
    f = tvm.tirx.build(func, target="llvm")
    codes = np.arange(-128, 128, dtype=np.int8)
    out = tvm.runtime.tensor(np.zeros(256, np.int8))
    f(tvm.runtime.tensor(codes), out)
    want = np.minimum(np.maximum(codes.astype(np.int32) - zp, lo), hi)
    np.testing.assert_array_equal(out.numpy(), want.astype(np.int8))


# ------------------------------------------------------------------ models, every target
def test_relu6_of_one_code_runs_on_the_emulator_exactly():
    """RELU6 at input scale 13: the clamp is [zp, zp]; ethos-u,llvm failed MemoryMismatchError
    (the scheduled TIR never read the input the planner holds in place of the output)."""
    want = _runs_exactly(unary_model(BO.RELU6, (13.0, 0), (13.0, 0)), "ethos-u,llvm",
                         [EVERY_INT8])
    assert np.unique(want).tolist() == [0]


def test_relu_from_zero_point_127_runs_on_the_emulator_exactly():
    """RELU requantizing from zero point 127: every code is at or below 0, so the result is
    the output's zero point; the clamp's range is wide, its input's codes are not."""
    want = _runs_exactly(unary_model(BO.RELU, (0.05, 127), (0.03, 120)), "ethos-u,llvm",
                         [EVERY_INT8])
    assert np.unique(want).tolist() == [120]


@pytest.mark.parametrize("model", [
    conv_model("relu6", (13.0, 0)),
    add_model("relu", (0.05, 127)),
], ids=["conv2d-relu6-scale13", "add-relu-zp127"])
def test_a_fused_activation_of_one_code_runs_on_the_emulator_exactly(model):
    _runs_exactly(model, "ethos-u,llvm")


def test_an_empty_clamp_needs_a_zero_point_the_front_door_refuses():
    with pytest.raises(UnsupportedModelError) as err:
        tvm_ethos.compile(conv_model("relu6", (0.05, 200)), "ethos-u,llvm", cache_dir=False)
    assert "zero point" in str(err.value) and "200" in str(err.value)
    assert "\n" not in str(err.value)


ONE_CODE_RELUS = [
    (BO.RELU6, (13.0, 0), (13.0, 0), "int8"),
    (BO.RELU6, (0.05, 127), (0.05, 127), "int8"),
    (BO.RELU6, (13.0, -7), (0.05, 3), "int8"),        # TFLite Micro clamps the input's codes
    (BO.RELU, (0.05, 127), (0.05, 127), "int8"),
    (BO.RELU, (0.05, 127), (0.03, 120), "int8"),
    (BO.RELU_N1_TO_1, (3.0, 0), (3.0, 0), "int8"),
    (BO.RELU_N1_TO_1, (3.0, 127), (3.0, 127), "int8"),
    (BO.RELU_0_TO_1, (3.0, 0), (3.0, 0), "int8"),
    (BO.RELU_0_TO_1, (0.05, 127), (0.05, 127), "int8"),
    (BO.RELU6, (13.0, 0), (13.0, 0), "int16"),
    (BO.RELU, (0.05, 0), (1e4, 0), "int16"),         # 32767 * 0.05 / 1e4 rounds to 0
]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", ONE_CODE_RELUS, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{c[3]}")
def test_relus_of_one_code_equal_the_reference_on_every_code(case, target):
    kind, in_q, out_q, dtype = case
    codes = EVERY_INT8 if dtype == "int8" else EVERY_INT16
    model = unary_model(kind, in_q, out_q, dtype, codes.shape)
    want = _runs_exactly(model, target, [codes], litert=kind not in TFLM_KINDS)
    assert np.unique(want).size == 1, np.unique(want)


FUSED = [
    ("conv", "relu6", (13.0, 0), "int8"),
    ("conv", "relu6", (0.05, 127), "int8"),
    ("conv", "relu", (0.05, 127), "int8"),
    ("conv", "relu_n1_to_1", (3.0, 0), "int8"),
    ("conv", "relu6", (13.0, 0), "int16"),
    ("add", "relu6", (13.0, 0), "int8"),
    ("add", "relu", (0.05, 127), "int8"),
    ("add", "relu_n1_to_1", (3.0, 0), "int8"),
    ("add", "relu6", (13.0, 0), "int16"),
]


@pytest.mark.slow
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("case", FUSED, ids=lambda c: "-".join(map(str, c)))
def test_fused_activations_of_one_code_equal_tflite_micro(case, target):
    op, act, out_q, dtype = case
    model = conv_model(act, out_q, dtype) if op == "conv" else add_model(act, out_q, dtype)
    want = _runs_exactly(model, target)
    assert np.unique(want).size == 1, np.unique(want)


# ------------------------------------------------------------------ scales and zero points
#: scales around and above RELU6's collapse at 12 (6 / 12 is a rounding tie), small ones
relu_scales = st.one_of(st.sampled_from([12.0, 13.0, 100.0, 3.0]),
                        st.floats(1e-3, 50.0).map(lambda v: float(np.float32(v))))
zero_points = st.one_of(st.sampled_from([127, -128]), st.integers(-128, 127))
KINDS = [BO.RELU, BO.RELU6, BO.RELU_N1_TO_1, BO.RELU_0_TO_1]


def _relu_equals_the_reference(kind, in_q, out_q, target):
    """Any quantization, on every code; a RELU_N1_TO_1 the NPU refuses (a requantization it
    cannot round as LiteRT does) may run on the host."""
    _runs_exactly(unary_model(kind, in_q, out_q), target, [EVERY_INT8],
                  litert=kind not in TFLM_KINDS, whole=False)


@settings(max_examples=2, deadline=None)
@example(kind=BO.RELU_0_TO_1, in_q=(0.02, 127), out_q=(0.01, -3), target="ethos-u,llvm")
@given(kind=st.sampled_from(KINDS), in_q=st.tuples(relu_scales, zero_points),
       out_q=st.tuples(relu_scales, zero_points), target=st.sampled_from(TARGETS))
def test_relus_equal_the_reference_on_every_code(kind, in_q, out_q, target):
    _relu_equals_the_reference(kind, in_q, out_q, target)


@pytest.mark.slow
@settings(max_examples=80, deadline=None)
@given(kind=st.sampled_from(KINDS), in_q=st.tuples(relu_scales, zero_points),
       out_q=st.tuples(relu_scales, zero_points), target=st.sampled_from(TARGETS))
def test_relus_equal_the_reference_on_every_code_sweep(kind, in_q, out_q, target):
    _relu_equals_the_reference(kind, in_q, out_q, target)
