"""int16 and uint8 RESIZE_BILINEAR (issue 28): TFLite Micro has neither kernel, so LiteRT's
reference resolver is the oracle: int16 is its fixed-point kernel (the int8 one on wider
codes), uint8 its float32 kernel (``compute.resize_bilinear``). Ours puts both on the Ethos-U
where Vela 5.2 does (2x, 4x or 8x; half-pixel centres at 2x: ``ops_resize``'s box averages)
and runs the rest on the llvm host with each kernel's own arithmetic, exact on the extremes
and random codes on ``ethos-u`` and ``ethos-u,llvm``. RESIZE_NEAREST_NEIGHBOR of either type
moves the codes (``tflite_check._int16_copies``; uint8 as int8)."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tflite_builder as tb
import tvm
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from operator_models import _one, _opts
from tvm import te

import tvm_ethos
from benchmarks.vela_superset_probes import PROBE_GAPS, PROBES
from tests.helpers.tflite_oracle import oracle
from tvm_ethos.compute import resize_bilinear
from tvm_ethos.compute.te_ops import _f32_add, _f32_mul
from tvm_ethos.host.cpu.host_cpu import current_target

NPU_TARGETS = ("ethos-u -accelerator_config=ethos-u55-128", "ethos-u,llvm")


def resize_model(dtype: str, in_shape, size, q, align_corners=False, half_pixel=False,
                 out_q=None, nearest=False) -> bytes:
    """One RESIZE_BILINEAR (or RESIZE_NEAREST_NEIGHBOR) of ``dtype`` codes to ``size``."""
    code, name = ((tb.BO.RESIZE_NEAREST_NEIGHBOR, "ResizeNearestNeighbor") if nearest
                  else (tb.BO.RESIZE_BILINEAR, "ResizeBilinear"))
    out_q = out_q or q
    x = tb.T(list(in_shape), dtype, scale=q[0], zp=q[1])
    y = tb.T([in_shape[0], size[0], size[1], in_shape[3]], dtype, scale=out_q[0], zp=out_q[1])
    sz = tb.T([2], "int32", data=np.array(size, np.int32))
    return _one([x, y, sz], code, [0], [1],
                _opts(f"{name}Options", AlignCorners=align_corners, HalfPixelCenters=half_pixel),
                op_inputs=[0, 2])


def _inputs(shape, dtype: str, seed: int) -> list[np.ndarray]:
    """The type's extremes (all lowest, all highest, alternating) and random codes."""
    info = np.iinfo(dtype)
    lo, hi = np.full(shape, info.min, dtype), np.full(shape, info.max, dtype)
    mixed = np.where(np.indices(shape).sum(axis=0) % 2 == 0, lo, hi).astype(dtype)
    rand = np.random.RandomState(seed).randint(info.min, info.max + 1, shape).astype(dtype)
    return [lo, hi, mixed, rand]


def _matches(data: bytes, target: str, shape, dtype: str, seed: int):
    """Compiled for ``target``, its output equal to LiteRT's reference kernels on every input
    of :func:`_inputs`; the compiled model for the placement checks."""
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    for x in _inputs(shape, dtype, seed):
        (want,) = oracle(data, [x])
        (got,) = cm.run(x)
        assert np.array_equal(np.asarray(got).reshape(want.shape), want), (
            np.argwhere(np.asarray(got).reshape(want.shape) != want)[:4].tolist())
    return cm


def _q(dtype: str):
    # LiteRT's kernels never read the zero point: TFLite's converter writes int16 ones of 0
    zp = (st.one_of(st.just(0), st.integers(-32768, 32767)) if dtype == "int16"
          else st.integers(0, 255))
    return st.tuples(st.floats(1e-5, 1.0), zp)


_DTYPE_Q = st.sampled_from(["int16", "uint8"]).flatmap(
    lambda d: st.tuples(st.just(d), _q(d)))


def _sizes(dims, factor, align_corners, keep):
    size = [(n - 1) * factor + 1 if align_corners else n * factor for n in dims]
    if keep is not None:
        dims[keep] = size[keep] = 1
    return dims, size


# ------------------------------------------------------------------ the kernels
@settings(max_examples=40, deadline=None)
@given(ih=st.integers(1, 6), iw=st.integers(1, 6), oh=st.integers(1, 24),
       ow=st.integers(1, 24), mode=st.sampled_from(["asymmetric", "align_corners", "half_pixel"]),
       seed=st.integers(0, 2**16))
def test_the_numpy_float_kernel_is_litert_uint8(ih, iw, oh, ow, mode, seed):
    """``compute.resize_bilinear.litert_float`` (the taps the llvm host's lowering reads) is
    LiteRT's uint8 kernel to the bit, for any sizes and mode."""
    ac, hp = mode == "align_corners", mode == "half_pixel"
    shape = (1, ih, iw, 2)
    data = resize_model("uint8", shape, (oh, ow), (0.05, 128), ac, hp)
    for x in _inputs(shape, "uint8", seed):
        (want,) = oracle(data, [x])
        assert np.array_equal(resize_bilinear.litert_float(x, (oh, ow), ac, hp), want)


@settings(max_examples=25, deadline=None)
@given(h=st.integers(1, 5), w=st.integers(1, 5), factor=st.sampled_from([2, 4, 8]),
       mode=st.sampled_from(["asymmetric", "align_corners", "half_pixel"]),
       seed=st.integers(0, 2**16))
def test_at_the_npus_factors_the_uint8_float_kernel_is_the_integer_one(h, w, factor, mode,
                                                                     seed):
    """Why the Ethos-U's box averages are LiteRT's uint8 kernel too: at 2x, 4x and 8x (and
    half-pixel 2x) its float32 interpolation of codes 0..255 is exact, and equals the
    fixed-point kernel's (LiteRT's int16 one run on the same codes)."""
    ac, hp = mode == "align_corners", mode == "half_pixel"
    if hp:
        factor = 2
    (dims, size) = _sizes([h, w], factor, ac, None)
    shape = (1, *dims, 3)
    fixed = resize_model("int16", shape, size, (1.0, 0), ac, hp)
    for x in _inputs(shape, "uint8", seed):
        (want,) = oracle(fixed, [x.astype(np.int16)])
        assert np.array_equal(resize_bilinear.litert_float(x, tuple(size), ac, hp), want)


def test_off_the_npus_factors_the_two_kernels_differ():
    """Elsewhere the two kernels differ: from 2 rows to 5 the float32 kernel puts row 2 at
    0.8 of the way from 0 to 128 (102.4, to 102), the fixed-point one at 820/1024, its
    scale 410/1024 rounded from 0.4 (102.5, rounded up to 103). Hence the llvm host's own
    float lowering for uint8 (LiteRT's uint8 kernel is the float one:
    :func:`test_the_numpy_float_kernel_is_litert_uint8`)."""
    shape, size = (1, 2, 1, 1), (5, 1)
    x = np.array([0, 128], np.uint8).reshape(shape)
    (fixed,) = oracle(resize_model("int16", shape, size, (1.0, 0)), [x.astype(np.int16)])
    (floating,) = oracle(resize_model("uint8", shape, size, (1.0, 0)), [x])
    assert np.array_equal(resize_bilinear.litert_float(x, size, False, False), floating)
    assert int(floating.ravel()[2]) + 1 == int(fixed.ravel()[2])


def test_a_type_neither_kernel_takes_is_named():
    with pytest.raises(ValueError, match="RESIZE_BILINEAR of int32 codes; TFLite's integer"):
        resize_bilinear.float_kernel("int32")


_AS_F32 = {}


def _as_f32_kernel():
    """``te_ops._f32_mul`` and ``te_ops._f32_add`` elementwise over 256 pairs, built for this
    machine's CPU as the llvm host builds its kernels (fast-math flags, fused multiply-adds)."""
    if not _AS_F32:
        a = te.placeholder((256,), "float64", name="a")
        b = te.placeholder((256,), "float64", name="b")
        mul = te.compute((256,), lambda i: _f32_mul(a[i], b[i]), name="mul")
        add = te.compute((256,), lambda i: _f32_add(a[i], b[i]), name="add")
        f = te.create_prim_func([a, b, mul, add])
        _AS_F32["f"] = tvm.tirx.build(f, target=tvm.target.Target(current_target()))
    return _AS_F32["f"]


_F32 = st.floats(-1e6, 1e6, width=32).filter(lambda v: v == 0 or abs(v) > 1e-12)


@settings(max_examples=8, deadline=None)
@given(pairs=st.lists(st.tuples(_F32, _F32), min_size=1, max_size=256))
def test_the_hosts_float32_steps_round_as_float32(pairs):
    """Each float32 step of the uint8 lowering, taken in float64 and rounded in integer
    operations, is numpy's float32 product and sum (ties to even included), whatever the
    host's code generator fuses or reassociates."""
    a = np.zeros(256, np.float32)
    b = np.zeros(256, np.float32)
    a[: len(pairs)] = [p[0] for p in pairs]
    b[: len(pairs)] = [p[1] for p in pairs]
    out = [tvm.runtime.tensor(np.zeros(256, np.float64)) for _ in range(2)]
    _as_f32_kernel()(tvm.runtime.tensor(a.astype(np.float64)),
                     tvm.runtime.tensor(b.astype(np.float64)), *out)
    assert np.array_equal(out[0].numpy(), (a * b).astype(np.float64))
    assert np.array_equal(out[1].numpy(), (a + b).astype(np.float64))


# ------------------------------------------------------------------ the Ethos-U
def test_an_int16_2x_upscale_is_on_the_npu_of_a_package_exactly():
    """``ethos-u,llvm`` (the tflite-micro host: the audit's probes below; uint8 and the other
    forms: the slow sample next)."""
    shape = (1, 3, 4, 5)
    data = resize_model("int16", shape, (6, 8), (2.0 ** -12, 0))
    cm = _matches(data, "ethos-u,llvm", shape, "int16", 0)
    assert cm.partition_summary == {"ethos-u": 1}


@pytest.mark.slow
@settings(max_examples=14, deadline=None)
@given(hwc=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 6)),
       factor=st.sampled_from([2, 4, 8]),
       mode=st.sampled_from(["asymmetric", "align_corners", "half_pixel"]),
       keep=st.sampled_from([None, 0, 1]), dq=_DTYPE_Q, target=st.sampled_from(NPU_TARGETS),
       seed=st.integers(0, 2**16))
@example(hwc=(4, 4, 3), factor=2, mode="asymmetric", keep=None, dq=("int16", (2.0**-12, 0)),
         target=NPU_TARGETS[0], seed=0)
@example(hwc=(3, 5, 2), factor=2, mode="half_pixel", keep=None, dq=("uint8", (0.05, 255)),
         target=NPU_TARGETS[1], seed=1)
@example(hwc=(1, 1, 3), factor=8, mode="asymmetric", keep=None, dq=("uint8", (0.5, 0)),
         target=NPU_TARGETS[0], seed=2)
def test_every_form_vela_takes_is_on_the_npu_exactly(hwc, factor, mode, keep, dq, target,
                                                     seed):
    """2x, 4x and 8x (of n - 1 with align_corners), half-pixel centres at 2x, an axis of one
    element kept or a 1x1 input (a copy), for a sample of quantizations, on both hosts."""
    dtype, q = dq
    ac, hp = mode == "align_corners", mode == "half_pixel"
    assume(not hp or (factor == 2 and keep is None))   # Vela's half-pixel rule
    h, w, c = hwc
    dims, size = _sizes([h, w], factor, ac, keep)
    shape = (1, *dims, c)
    cm = _matches(resize_model(dtype, shape, size, q, ac, hp), target, shape, dtype, seed)
    assert cm.partition_summary == {"ethos-u": 1}


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["int16", "uint8"])
@pytest.mark.parametrize("plan", [True, False])
def test_planned_or_layer_by_layer_it_streams_exactly(dtype, plan):
    """A 4x resize: log2(4) 2x copies into working memory sized for the type's codes, then
    the average pool; planned or not, equal to the reference on the functional model."""
    shape, size = (1, 6, 4, 8), (24, 16)
    q = (2.0 ** -12, 0) if dtype == "int16" else (0.05, 100)
    data = resize_model(dtype, shape, size, q)
    cm = tvm_ethos.compile(data, NPU_TARGETS[0], cache_dir=False, plan=plan)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement
    if not plan:
        (entry,) = cm.plan_report["streams"].values()
        assert entry["commands"]["NPU_OP_POOL"] == 3, entry["commands"]
        itemsize = np.dtype(dtype).itemsize
        assert entry["work_bytes"] == (12 * 8 + 24 * 16) * 8 * itemsize
    for x in _inputs(shape, dtype, 3):
        (want,) = oracle(data, [x])
        (got,) = cm.run(x)
        assert np.array_equal(np.asarray(got).reshape(want.shape), want)


@pytest.mark.slow
@pytest.mark.parametrize("dtype,half_pixel", [("int16", False), ("uint8", True),
                                              ("uint8", False)])
def test_the_tir_emulator_runs_it_exactly(dtype, half_pixel):
    """``npu_runtime="tir"``: the Ethos-U subgraph run as the emulator's schedule of the
    TE lowering (uint8: the float32 taps), planned, equal to the reference."""
    shape, size = (1, 3, 4, 5), (6, 8)
    q = (2.0 ** -12, 0) if dtype == "int16" else (0.05, 128)
    data = resize_model(dtype, shape, size, q, half_pixel=half_pixel)
    cm = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False, npu_runtime="tir")
    assert cm.partition_summary == {"ethos-u": 1}
    for x in _inputs(shape, dtype, 4):
        (want,) = oracle(data, [x])
        (got,) = cm.run(x)
        assert np.array_equal(np.asarray(got).reshape(want.shape), want)


# ------------------------------------------------------------------ the llvm host
@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(hw=st.tuples(st.integers(1, 6), st.integers(1, 6)),
       out=st.tuples(st.integers(1, 20), st.integers(1, 20)),
       mode=st.sampled_from(["asymmetric", "align_corners", "half_pixel"]), dq=_DTYPE_Q,
       seed=st.integers(0, 2**16))
@example(hw=(3, 5), out=(7, 9), mode="asymmetric", dq=("uint8", (0.05, 128)), seed=0)
@example(hw=(4, 3), out=(11, 5), mode="half_pixel", dq=("int16", (2.0**-10, 0)), seed=1)
def test_the_llvm_host_runs_every_other_size_exactly(hw, out, mode, dq, seed):
    """Sizes the Ethos-U does not take run on the llvm host: int16 in the fixed-point
    lowering, uint8 in LiteRT's float32 arithmetic (``te_ops._lower_resize_bilinear_float``)."""
    dtype, q = dq
    ac, hp = mode == "align_corners", mode == "half_pixel"
    shape = (1, *hw, 3)
    cm = _matches(resize_model(dtype, shape, out, q, ac, hp), "ethos-u,llvm", shape, dtype, seed)
    assert sum(cm.partition_summary.values()) == 1


@pytest.mark.parametrize("dtype,q", [("int16", (2.0 ** -12, 0)), ("uint8", (0.05, 128))])
def test_a_3x_upscale_runs_on_the_llvm_host_exactly(dtype, q):
    """3x is no box average the Ethos-U takes (Vela keeps it on the CPU too)."""
    shape = (1, 3, 5, 2)
    cm = _matches(resize_model(dtype, shape, (9, 15), q), "ethos-u,llvm", shape, dtype, 1)
    assert cm.partition_summary == {"llvm": 1}


def test_int16_quantized_apart_is_refused_naming_both():
    """LiteRT's kernel interpolates codes: an output quantized apart from its input has no
    exact form; the importer names both (the tflite-micro host keeps the operator)."""
    data = resize_model("int16", (1, 4, 4, 3), (8, 8), (2.0 ** -12, 0), out_q=(2.0 ** -11, 0))
    why = ("an int16 RESIZE_BILINEAR from 't0' quantized (0.000244140625, 0) to 't1' quantized "
           "(0.00048828125, 0)")
    with pytest.raises(tvm_ethos.UnsupportedModelError, match=re.escape(why)):
        tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    (placed,) = tvm_ethos.compile(data, "ethos-u", cache_dir=False).placement
    assert placed.placed_on == "tflite-micro" and why in placed.why, placed.why


# ------------------------------------------------------------------ the audit's probes
@pytest.mark.parametrize("operator", ["RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR"])
@pytest.mark.parametrize("dtype", ["int16", "uint8"])
def test_the_audits_probes_are_on_the_npu_as_litert(operator, dtype):
    """The forms ``benchmarks/vela_superset_audit.py`` compiles: on the NPU as Vela 5.2
    puts them, equal to LiteRT's reference kernels, and no longer among the gaps."""
    assert (operator, dtype) not in PROBE_GAPS
    (probe,) = [p for p in PROBES if (p.operator, p.name) == (operator, dtype)]
    cm = _matches(probe.build(), NPU_TARGETS[0], (1, 4, 4, 3), dtype, 0)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement


@pytest.mark.slow
@settings(max_examples=8, deadline=None)
@given(hwc=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 6)),
       factor=st.sampled_from([2, 4]), half_pixel=st.booleans(), dq=_DTYPE_Q,
       target=st.sampled_from(NPU_TARGETS), seed=st.integers(0, 2**16))
def test_a_nearest_upscale_of_either_type_is_on_the_npu_exactly(hwc, factor, half_pixel, dq,
                                                                target, seed):
    """RESIZE_NEAREST_NEIGHBOR of int16 or uint8 codes by an integer factor: copies of the
    codes on the Ethos-U, equal to LiteRT's kernel on both hosts."""
    dtype, q = dq
    h, w, c = hwc
    shape, size = (1, h, w, c), (h * factor, w * factor)
    data = resize_model(dtype, shape, size, q, half_pixel=half_pixel, nearest=True)
    cm = _matches(data, target, shape, dtype, seed)
    assert cm.partition_summary == {"ethos-u": 1}


@pytest.mark.slow
@pytest.mark.parametrize("size,align_corners", [((8, 8), False), ((7, 7), True),
                                                ((7, 7), False)])
def test_uint8_on_the_ethos_n_is_litert(size, align_corners):
    """The Ethos-N takes the uint8 kernel the importer now reads (to 2n or 2n - 1): its
    emulator runs the host's float32 lowering, equal to LiteRT's kernel."""
    shape = (1, 4, 4, 8)
    data = resize_model("uint8", shape, size, (0.05, 128), align_corners)
    cm = _matches(data, "ethos-n,llvm", shape, "uint8", 0)
    assert cm.partition_summary == {"ethos-n": 1}


@pytest.mark.slow
@pytest.mark.parametrize("dtype,q", [("int16", (2.0 ** -12, 0)), ("uint8", (0.05, 128))])
@pytest.mark.parametrize("mode", ["asymmetric", "align_corners", "half_pixel"])
def test_a_nearest_resize_off_the_npus_factors_runs_on_the_llvm_host_exactly(dtype, q, mode):
    """3x3 -> 7x5 is no factor: the llvm host's gather of codes, equal to LiteRT's kernel."""
    shape = (1, 3, 3, 4)
    data = resize_model(dtype, shape, (7, 5), q, mode == "align_corners", mode == "half_pixel",
                        nearest=True)
    cm = _matches(data, "ethos-u,llvm", shape, dtype, 0)
    assert cm.partition_summary == {"llvm": 1}
