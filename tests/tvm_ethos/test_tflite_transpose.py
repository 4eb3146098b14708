"""A TFLite TRANSPOSE through the importer: every constant permutation of an int8 or int16
tensor of up to six axes becomes an ``ethos-u`` operator, a sequence of strided copies
(``ops_movement.transpose_steps``), and the compiled file's outputs equal TFLite Micro's on
the source (LiteRT's reference kernels for six axes, which TFLite Micro's kernel does not
take)."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import inputs_for, oracle, tflm_oracle
from tvm_ethos.backends.ethos_u.ops_movement import transpose_steps

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def transpose_model(shape, perm, q=(0.05, 3), dtype="int8") -> bytes:
    """One TRANSPOSE of ``shape`` by the constant ``perm``."""
    out_shape = [shape[a] for a in perm]
    x = tb.T(list(shape), dtype, scale=q[0], zp=q[1])
    p = tb.T([len(perm)], "int32", data=np.asarray(perm, np.int32))
    y = tb.T(out_shape, dtype, scale=q[0], zp=q[1])
    return tb.serialize([x, p, y], [(tb.BO.TRANSPOSE, 0, None, [0, 1], [2])], [0], [2])


def _compile_and_check(data: bytes, rank: int, seed: int = 0):
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,) = cm.run(*xs)
        # TFLite Micro's TRANSPOSE takes at most five axes; LiteRT's reference kernel six
        (want,) = tflm_oracle(data, xs) if rank <= 5 else oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want), (got.ravel()[:8], want.ravel()[:8])
    return cm


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
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", (shape, perm, placed.why)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    # one strided copy per rotation (a permutation moving no data: one copy); more than one
    # rotation alternates through working memory of the tensor's size
    steps = transpose_steps(shape, perm)
    assert entry["commands"]["NPU_OP_POOL"] == max(1, len(steps)), (steps, entry["commands"])


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


@pytest.mark.parametrize("shape, perm", [
    ((1, 4, 6, 5), (0, 2, 1, 3)),   # H and W swapped: Vela's forms are one rotation
    ((1, 1, 6, 5), (0, 1, 3, 2)),
    ((4, 1, 5), (2, 1, 0)),
    ((7, 9), (1, 0)),
])
def test_velas_single_swaps_are_one_copy(shape, perm):
    assert len(transpose_steps(shape, perm)) == 1


def test_a_permutation_of_more_than_six_axes_is_refused_with_its_reason():
    from ethos_arch.ops import Op
    from tvm_ethos.backends.ethos_u import CHECKS

    class Q:  # the two fields the check reads
        in_shapes = [(2,) * 7]
        attrs = {"perm": tuple(reversed(range(7)))}

    assert CHECKS[Op.TRANSPOSE](Q, {}) == ["a 7-D permutation; the NPU's transpose takes at "
                                           "most 6-D"]
    Q.in_shapes = [(2,) * 6]
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
