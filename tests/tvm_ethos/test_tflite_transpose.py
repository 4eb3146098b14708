"""A TFLite TRANSPOSE through the importer: the permutations the NPU does in one strided copy
become ``ethos-u`` operators, every other one stays a TFLite operator (TFLite Micro runs it),
and either way the compiled file's outputs equal TFLite Micro's on the source."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle
from tvm_ethos.backends.ethos_u.ops_movement import transpose_swap

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def transpose_model(shape, perm, q=(0.05, 3)) -> bytes:
    """One int8 TRANSPOSE of ``shape`` by the constant ``perm``."""
    out_shape = [shape[a] for a in perm]
    x = tb.T(list(shape), "int8", scale=q[0], zp=q[1])
    p = tb.T([len(perm)], "int32", data=np.asarray(perm, np.int32))
    y = tb.T(out_shape, "int8", scale=q[0], zp=q[1])
    return tb.serialize([x, p, y], [(tb.BO.TRANSPOSE, 0, None, [0, 1], [2])], [0], [2])


def _compile_and_check(data: bytes, seed: int = 0):
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want), (got.ravel()[:8], want.ravel()[:8])
    return cm


_PERMS = [p for n in (2, 3, 4) for p in itertools.permutations(range(n))]


@settings(max_examples=8, deadline=None)
@given(perm=st.sampled_from(_PERMS), dims=st.lists(st.integers(1, 5), min_size=4, max_size=4),
       scale=st.floats(0.001, 1.0), zp=st.integers(-128, 127))
def test_a_transpose_is_on_the_npu_exactly_when_one_copy_does_it(perm, dims, scale, zp):
    shape = tuple(dims[:len(perm)])
    if len(perm) == 4:
        shape = (1,) + shape[1:]  # the NPU's feature maps have batch 1
    cm = _compile_and_check(transpose_model(shape, perm, (scale, zp)))
    (placed,) = cm.placement
    want = "ethos-u" if transpose_swap(shape, perm) is not None else "tflite-micro"
    assert placed.placed_on == want, (shape, perm, placed.why)


def test_a_permutation_that_is_no_single_swap_stays_a_tflite_operator_with_its_reason():
    cm = _compile_and_check(transpose_model((1, 3, 4, 5), (0, 1, 3, 2)))
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "TRANSPOSE run on the host" in placed.why, placed.why


def test_a_transpose_that_requantizes_is_refused_by_the_importer_in_one_line():
    """TFLite's converter gives TRANSPOSE the input's quantization; the operator copies codes,
    so any other output quantization is refused rather than silently reinterpreted."""
    x = tb.T([1, 2, 3, 4], "int8", scale=0.05, zp=3)
    p = tb.T([4], "int32", data=np.asarray([0, 2, 1, 3], np.int32))
    y = tb.T([1, 3, 2, 4], "int8", scale=0.1, zp=3)
    data = tb.serialize([x, p, y], [(tb.BO.TRANSPOSE, 0, None, [0, 1], [2])], [0], [2])
    with pytest.raises(tvm_ethos.errors.TvmEthosError, match="TRANSPOSE with input quantization"):
        tvm_ethos.load_model(data)
