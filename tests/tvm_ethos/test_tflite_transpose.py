"""A TFLite TRANSPOSE through the importer: every constant permutation of an int8, int16 or
int32 tensor of up to eight axes becomes an ``ethos-u`` operator, strided copies (one rotation
of ``ops_movement.transpose_steps``, or for several the copies straight into the output of
``ops_movement.transpose_form``, no working memory, up to ``MAX_STRIDED_COPIES``; an int32
tensor's copies move each element's four bytes as int8 codes, ``ops_movement.copy_form``),
and the compiled file's outputs equal TFLite Micro's
on the source (LiteRT's reference kernels for more than five axes or int32, which TFLite
Micro's kernel does not take)."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from test_planned_work_memory import _planner_work, transpose
from test_solitary_movement import chain, compiled_on_the_npu

import tvm_ethos
from planner.vela_run import run_vela
from tests.helpers.tflite_oracle import inputs_for, oracle, tflm_oracle
from tvm_ethos.backends.ethos_u.ops_movement import (
    MAX_STRIDED_COPIES,
    TransposeForm,
    copy_form,
    copy_steps,
    dense_strides,
    strided_copies,
    strided_form,
    transpose_copies,
    transpose_form,
    transpose_steps,
)

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def transpose_model(shape, perm, q=(0.05, 3), dtype="int8") -> bytes:
    """One TRANSPOSE of ``shape`` by the constant ``perm`` (``q`` None: unquantized)."""
    out_shape = [shape[a] for a in perm]
    kw = {} if q is None else {"scale": q[0], "zp": q[1]}
    x = tb.T(list(shape), dtype, **kw)
    p = tb.T([len(perm)], "int32", data=np.asarray(perm, np.int32))
    y = tb.T(out_shape, dtype, **kw)
    return tb.serialize([x, p, y], [(tb.BO.TRANSPOSE, 0, None, [0, 1], [2])], [0], [2])


def _reference(data: bytes, xs, rank: int, dtype: str):
    """TFLite Micro's TRANSPOSE takes at most five axes and no int32; LiteRT's reference
    kernel the rest."""
    return tflm_oracle(data, xs) if rank <= 5 and dtype != "int32" else oracle(data, xs)


def _compile_and_check(data: bytes, rank: int, seed: int = 0, dtype: str = "int8",
                       target: str = "ethos-u"):
    src = data if target == "ethos-u" else tvm_ethos.load_model(data)
    cm = tvm_ethos.compile(src, target, cache_dir=False)
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,) = cm.run(*xs)
        (want,) = _reference(data, xs, rank, dtype)
        assert np.array_equal(got.reshape(want.shape), want), (got.ravel()[:8], want.ravel()[:8])
    return cm


def _one_stream(cm, shape, perm, dtype: str) -> None:
    """``cm`` one ``ethos-u`` operator whose stream is generated: one copy per rotation (a
    permutation moving no data: one copy), or, for several rotations, the strided copies
    straight into the output, with no working memory."""
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    steps = copy_steps(shape, perm, dtype)
    strided = transpose_form(shape, perm, dtype) is TransposeForm.STRIDED
    assert strided == (len(steps) > 1)   # the small tensors drawn stay under the cap
    want = strided_copies(strided_form(*copy_form(shape, perm, dtype)[:2])) if strided \
        else max(1, len(steps))
    assert entry["commands"]["NPU_OP_POOL"] == want, (steps, entry["commands"])
    assert entry.get("work_bytes", 0) == 0, entry


@st.composite
def permutations(draw, ranks=(2, 6)):
    rank = draw(st.integers(*ranks))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    perm = tuple(draw(st.permutations(range(rank))))
    return shape, perm


@settings(max_examples=10, deadline=None)
@given(case=permutations(), dtype=st.sampled_from(["int8", "int16"]),
       scale=st.floats(0.001, 1.0), zp=st.integers(-128, 127))
def test_every_permutation_is_on_the_npu_and_exact(case, dtype, scale, zp):
    shape, perm = case
    q = (scale, 0 if dtype == "int16" else zp)  # TFLite's int16 is symmetric
    cm = _compile_and_check(transpose_model(shape, perm, q, dtype), len(shape))
    _one_stream(cm, shape, perm, dtype)


def _apply(steps, x: np.ndarray) -> np.ndarray:
    """The rotations on a flat array: each reads (a, b, inner) and writes (b, a, inner)."""
    for a, b, inner in steps:
        x = x.reshape(a, b, inner).transpose(1, 0, 2).ravel()
    return x


@settings(max_examples=300, deadline=None)
@given(case=permutations(ranks=(1, 8)))
def test_the_rotations_compose_to_the_permutation(case):
    """The oracle is numpy's transpose: the rotations applied in order give its bytes, in at
    most rank - 1 steps, each of which moves data."""
    shape, perm = case
    x = np.arange(int(np.prod(shape)))
    steps = transpose_steps(shape, perm)
    assert np.array_equal(_apply(steps, x), np.transpose(x.reshape(shape), perm).ravel())
    assert len(steps) <= max(0, len(shape) - 1)
    assert all(a > 1 and b > 1 for a, b, _ in steps), steps


def _apply_strided(form, x: np.ndarray) -> np.ndarray:
    """The strided copies on a flat array, element by element: each copy's rows, columns
    and depth read through the input's strides and written through the output's; every
    output element written once."""
    d = form.dims
    ins, outs = dense_strides(d), [0] * len(d)
    for a, s in zip(form.order, dense_strides(tuple(d[a] for a in form.order))):
        outs[a] = s
    y, written = np.zeros_like(x), np.zeros(x.size, np.int64)
    r, c = form.rows, form.cols
    for index in np.ndindex(*(d[a] for a in form.outer)):
        at_in = sum(i * ins[a] for i, a in zip(index, form.outer))
        at_out = sum(i * outs[a] for i, a in zip(index, form.outer))
        for i, j, k in np.ndindex(d[r], d[c], form.depth):
            o = at_out + i * outs[r] + j * outs[c] + k
            y[o] = x[at_in + i * ins[r] + j * ins[c] + k]
            written[o] += 1
    assert (written == 1).all()
    return y


@settings(max_examples=300, deadline=None)
@given(case=permutations(ranks=(1, 8)))
def test_the_strided_copies_give_the_permutation(case):
    """The oracle is numpy's transpose: the strided form's copies write every output element
    once, with its input element; each copy moves the two largest moving axes, so they
    number at most the elements over the two largest moving axes' product."""
    shape, perm = case
    x = np.arange(int(np.prod(shape)))
    form = strided_form(shape, perm)
    assert np.array_equal(_apply_strided(form, x), np.transpose(x.reshape(shape), perm).ravel())
    d = form.dims
    assert strided_copies(form) * d[form.rows] * d[form.cols] * form.depth == x.size
    assert all(d[a] <= min(d[form.rows], d[form.cols]) for a in form.outer), form


S, R = TransposeForm.STRIDED, TransposeForm.ROTATIONS


@pytest.mark.parametrize("shape, perm, dtype, form, copies", [
    ((2, 8, 16, 8), (0, 1, 3, 2), "int32", S, 8),        # Vela's NHCW: 16 copies
    ((2, 3, 2, 2, 3, 2, 2), (6, 5, 4, 3, 2, 1, 0), "int8", S, 32),
    ((2, 3, 2, 2, 3, 2, 2, 2), (7, 1, 5, 3, 4, 2, 6, 0), "int8", S, 32),
    ((1, 4, 6, 5), (0, 2, 1, 3), "int8", R, 1),          # one rotation: one copy
    ((4,) * 7, (6, 5, 4, 3, 2, 1, 0), "int8", R, 6),     # 1024 strided copies: six rotations
])
def test_several_rotations_are_strided_copies_up_to_the_cap(shape, perm, dtype, form, copies):
    assert transpose_form(shape, perm, dtype) is form
    assert transpose_copies(shape, perm, dtype) == copies
    strided = strided_copies(strided_form(*copy_form(shape, perm, dtype)[:2]))
    several = len(copy_steps(shape, perm, dtype)) > 1
    assert (form is S) == (several and strided <= MAX_STRIDED_COPIES), strided


@pytest.mark.parametrize("shape, perm", [
    ((1, 4, 6, 5), (0, 2, 1, 3)),   # H and W swapped: Vela's forms are one rotation
    ((1, 1, 6, 5), (0, 1, 3, 2)),
    ((4, 1, 5), (2, 1, 0)),
    ((7, 9), (1, 0)),
])
def test_velas_single_swaps_are_one_copy(shape, perm):
    assert len(transpose_steps(shape, perm)) == 1


def test_a_permutation_of_more_than_eight_axes_is_refused_with_its_reason():
    from ethos_arch.ops import Op
    from tvm_ethos.backends.ethos_u import CHECKS

    class Q:  # the two fields the check reads
        in_shapes = [(2,) * 9]
        attrs = {"perm": tuple(reversed(range(9)))}

    assert CHECKS[Op.TRANSPOSE](Q, {}) == ["a 9-D permutation; the NPU's transpose takes at "
                                           "most 8-D"]
    Q.in_shapes = [(2,) * 8]
    assert CHECKS[Op.TRANSPOSE](Q, {}) == []


def test_a_transpose_that_requantizes_is_refused_by_the_importer_in_one_line():
    """TFLite's converter gives TRANSPOSE the input's quantization; the operator copies codes,
    so any other output quantization is refused rather than silently reinterpreted."""
    x = tb.T([1, 2, 3, 4], "int8", scale=0.05, zp=3)
    p = tb.T([4], "int32", data=np.asarray([0, 2, 1, 3], np.int32))
    y = tb.T([1, 3, 2, 4], "int8", scale=0.1, zp=3)
    data = tb.serialize([x, p, y], [(tb.BO.TRANSPOSE, 0, None, [0, 1], [2])], [0], [2])
    with pytest.raises(tvm_ethos.errors.TvmEthosError, match="TRANSPOSE with input quantization"):
        tvm_ethos.load_model(data)


def test_a_dimension_beyond_the_npus_registers_is_cut_into_boxes():
    """70000 columns: more than a feature map's 65536, so the rotation is two copies."""
    cm = _compile_and_check(transpose_model((3, 70000), (1, 0)), 2)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["commands"]["NPU_OP_POOL"] == 2, entry["commands"]


def test_strided_copies_beyond_the_npus_registers_are_cut_into_boxes():
    """Reversed (3, 70000, 2) is strided copies, one per channel, whose 70000 rows pass the
    registers' 65536: each copy is cut into two boxes, all exact."""
    shape, perm = (3, 70000, 2), (2, 1, 0)
    assert transpose_form(shape, perm, "int8") is S
    cm = _compile_and_check(transpose_model(shape, perm), len(shape))
    (entry,) = cm.plan_report["streams"].values()
    assert entry["commands"]["NPU_OP_POOL"] == 4, entry["commands"]


def test_an_int32_block_beyond_the_npus_registers_is_cut_into_boxes():
    """20000 int32 elements kept together are 80000 bytes deep: two copies."""
    cm = _compile_and_check(transpose_model((2, 3, 20000), (1, 0, 2), (0.5, 0), "int32"), 3,
                            dtype="int32")
    (entry,) = cm.plan_report["streams"].values()
    assert entry["commands"]["NPU_OP_POOL"] == 2, entry["commands"]


#: Vela 5.2's int32 TRANSPOSE forms on the Ethos-U55/U65 (its TFLite constraints): a tensor
#: of at most four axes read as NHWC, in the order NHWC (a copy), NWHC or NHCW
VELAS_INT32 = ((0, 1, 2, 3), (0, 2, 1, 3), (0, 1, 3, 2))


@st.composite
def int32_permutations(draw):
    """Vela's int32 forms (the rank-4 order on a tensor of 1 to 4 axes, its missing outer
    axes of size 1 dropped) or any permutation of 1 to 6 axes."""
    if draw(st.booleans()):
        order = draw(st.sampled_from(VELAS_INT32))
        rank = draw(st.integers(1, 4))
        drop = 4 - rank
        if any(a < drop for a in order[drop:]):   # the order moves a dropped axis
            rank, drop = 4, 0
        perm = tuple(a - drop for a in order[drop:])
    else:
        rank = draw(st.integers(1, 6))
        perm = tuple(draw(st.permutations(range(rank))))
    shape = tuple(draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank)))
    return shape, perm


@settings(max_examples=8, deadline=None)
@given(case=int32_permutations(), quantized=st.booleans())
def test_every_int32_permutation_is_on_the_npu_and_exact(case, quantized):
    """Vela 5.2 takes NHWC, NWHC and NHCW; TFLite Micro's kernel takes no int32 TRANSPOSE
    (its host would fail), so ours takes every permutation: the element's four bytes move
    together, as many copies as the int8 permutation of the same shape."""
    shape, perm = case
    data = transpose_model(shape, perm, (0.5, 0) if quantized else None, "int32")
    cm = _compile_and_check(data, len(shape), dtype="int32")
    _one_stream(cm, shape, perm, "int32")


@st.composite
def many_axes(draw):
    rank = draw(st.integers(7, 8))
    shape = tuple(draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank)))
    return shape, tuple(draw(st.permutations(range(rank))))


@settings(max_examples=6, deadline=None)
@given(case=many_axes(), dtype=st.sampled_from(["int8", "int16", "int32"]),
       zp=st.integers(-128, 127))
def test_seven_and_eight_axes_are_on_the_npu_and_exact(case, dtype, zp):
    """Vela 5.2 takes int8/int16 permutations of up to eight axes (int32: at most four);
    TFLite Micro's kernel five axes: against LiteRT's reference kernel."""
    shape, perm = case
    q = (0.05, zp if dtype == "int8" else 0)
    cm = _compile_and_check(transpose_model(shape, perm, q, dtype), len(shape), dtype=dtype)
    _one_stream(cm, shape, perm, dtype)


@pytest.mark.parametrize("shape, perm, dtype", [
    ((2, 3, 4, 5), (0, 1, 3, 2), "int32"),               # Vela's NHCW
    ((3, 1, 4, 2, 5), (4, 2, 0, 3, 1), "int32"),
    ((2, 1, 3, 2, 2, 3, 2, 2), (7, 3, 1, 5, 0, 6, 4, 2), "int8"),
])
def test_the_llvm_host_takes_them_on_the_npu(shape, perm, dtype):
    """``ethos-u,llvm``: TVM's importer takes int32 and eight axes, so the TRANSPOSE is an
    Ethos-U subgraph with a generated stream, run exactly."""
    q = (0.5, 0) if dtype == "int32" else (0.05, 3)
    cm = _compile_and_check(transpose_model(shape, perm, q, dtype), len(shape), dtype=dtype,
                            target="ethos-u,llvm")
    assert cm.partition_summary == {"ethos-u": 1}, cm.partition_summary
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry


@settings(max_examples=300, deadline=None)
@given(case=permutations(ranks=(1, 8)))
def test_an_int32_element_moves_as_its_four_bytes_in_as_many_rotations(case):
    """The oracle is numpy's transpose of the int32 tensor: the rotations of its int8 form
    applied to its bytes give the transposed tensor's bytes, in as many steps as the
    element permutation takes, each inner block four bytes deeper."""
    shape, perm = case
    x = np.arange(int(np.prod(shape)), dtype=np.int32) * 65537 - 3
    form = copy_form(shape, perm, "int32")
    assert form.dtype == "int8"
    steps = transpose_steps(form.shape, form.perm)
    got = _apply(steps, x.view(np.int8))
    assert np.array_equal(got, np.transpose(x.reshape(shape), perm).ravel().view(np.int8))
    plain = transpose_steps(shape, perm)
    assert [(a, b, 4 * inner) for a, b, inner in plain] == list(steps)
    assert copy_form(shape, perm, "int16") == (tuple(shape), tuple(perm), "int16")


@pytest.mark.parametrize("shape, perm, dtype", [
    ((4,) * 7, (6, 5, 4, 3, 2, 1, 0), "int8"),
    ((5,) * 6, (5, 4, 3, 2, 1, 0), "int32"),
])
def test_several_rotations_hold_their_working_memory_in_the_plan(shape, perm, dtype):
    """Past :data:`MAX_STRIDED_COPIES` strided copies the rotations alternate through one
    copy of the tensor (four bytes an int32 element): the working memory the planner holds
    for the TRANSPOSE's Part is what the stream touches, and the stream touches the planned
    peak."""
    data = transpose_model(shape, perm, (0.5, 0), dtype)
    cm, entry = compiled_on_the_npu(data, budget="smallest")
    assert transpose_form(shape, perm, dtype) is TransposeForm.ROTATIONS
    assert len(copy_steps(shape, perm, dtype)) >= 2
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    assert entry["work_bytes"] == _planner_work(data, cm.plan_report["layers"]) == size
    assert entry["commands"]["NPU_OP_POOL"] == transpose_copies(shape, perm, dtype)
    rs = np.random.RandomState(2)
    xs = inputs_for(cm.inputs, rs)
    (got,), (want,) = cm.run(*xs), oracle(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)


def _vela_size_sram(data: bytes) -> int:
    """The SRAM Vela 5.2 ``--optimise Size`` says its file uses (ethos-u55-128)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.tflite"
        path.write_bytes(data)
        return run_vela(str(path), "ethos-u55-128", "--optimise", "Size").sram_bytes


@pytest.mark.parametrize("shape, perm, dtype", [
    ((2, 8, 16, 8), (0, 1, 3, 2), "int32"),                     # Vela's NHCW
    ((2, 3, 2, 2, 3, 2, 2), (6, 5, 4, 3, 2, 1, 0), "int8"),
    ((2, 3, 2, 2, 3, 2, 2, 2), (7, 1, 5, 3, 4, 2, 6, 0), "int16"),
])
def test_strided_copies_take_no_working_memory_and_no_more_sram_than_vela(shape, perm,
                                                                          dtype):
    """A TRANSPOSE of several rotations as strided copies: no working memory planned or
    touched, the stream touching its input and output alone (the planned peak), no more
    SRAM than Vela 5.2's many small copies, and its outputs LiteRT's reference kernel's."""
    data = transpose_model(shape, perm, (0.5, 0), dtype)
    cm, entry = compiled_on_the_npu(data, accelerator_config="ethos-u55-128",
                                    budget="smallest")
    assert transpose_form(shape, perm, dtype) is TransposeForm.STRIDED
    assert entry.get("work_bytes", 0) == 0 == _planner_work(data, cm.plan_report["layers"])
    assert entry["commands"]["NPU_OP_POOL"] == transpose_copies(shape, perm, dtype)
    size = int(np.prod(shape)) * np.dtype(dtype).itemsize
    assert entry["sram_high_water_bytes"] == 2 * size, entry
    assert entry["sram_high_water_bytes"] <= _vela_size_sram(data)
    rs = np.random.RandomState(3)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)


@pytest.mark.parametrize("perm, accelerator, budget", [
    ((0, 3, 2, 1), "ethos-u55-128", "smallest"),
    ((0, 1, 3, 2), "ethos-u65-256", None),
])
def test_strided_copies_between_convolutions_touch_the_planned_peak(perm, accelerator,
                                                                    budget):
    """CONV_2D -> TRANSPOSE of several rotations -> CONV_2D: the planned stream realizes its
    plan and touches the planned peak with no working memory planned or laid out, and the
    outputs are TFLite Micro's."""
    data = chain(transpose(perm), 0, (1, 12, 10, 8))
    cm, entry = compiled_on_the_npu(data, accelerator_config=accelerator, budget=budget)
    assert entry.get("work_bytes", 0) == 0 == _planner_work(data, cm.plan_report["layers"])
    rs = np.random.RandomState(4)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)
