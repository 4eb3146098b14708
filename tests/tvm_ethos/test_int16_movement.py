"""int16 TILE, PAD and CONCATENATION on the Ethos-U, as Vela 5.2 takes them
(benchmarks/vela_superset_audit.py): the importer moves the int16 codes themselves
(``tflite_check._int16_movement``) and the stream copies them, equal to TFLite Micro (LiteRT's
reference kernel for TILE, which TFLite Micro lacks); the forms whose codes TFLite Micro
computes otherwise (a PAD of a non-zero int16 zero point, which it fills with 0; a
requantizing CONCATENATION) stay TFLite operators."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import _i32, _one, _opts
from tflite_builder import BO, T

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches, oracle, tflm_oracle

pytest.importorskip("tflite_micro")


def _t(shape, q=(2.0**-12, 0)) -> T:
    return T(list(shape), "int16", scale=q[0], zp=q[1])


def tile(shape, reps) -> bytes:
    out = [d * r for d, r in zip(shape, reps)]
    return _one([_t(shape), _t(out), _i32(reps)], BO.TILE, [0], [1], op_inputs=[0, 2])


def pad(shape, pads, q=(2.0**-12, 0)) -> bytes:
    out = [d + a + b for d, (a, b) in zip(shape, pads)]
    return _one([_t(shape, q), _t(out, q), _i32(pads)], BO.PAD, [0], [1], op_inputs=[0, 2])


def concat(shape, depths, qs) -> bytes:
    ins = [_t((*shape, d), q) for d, q in zip(depths, qs)]
    out = _t((*shape, sum(depths)), qs[0])
    return _one([*ins, out], BO.CONCATENATION, list(range(len(ins))), [len(ins)],
                _opts("ConcatenationOptions", Axis=3, FusedActivationFunction=0))


def _on_npu(data: bytes, reference) -> None:
    cm = compiled_matches(data, "ethos-u", reference=reference)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement


dims = st.integers(1, 4)


@settings(max_examples=6, deadline=None)
@given(shape=st.tuples(st.just(1), dims, dims, dims),
       reps=st.tuples(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.integers(1, 2)))
def test_int16_tile_is_on_the_npu_equal_to_litert(shape, reps):
    _on_npu(tile(shape, reps), oracle)


@settings(max_examples=6, deadline=None)
@given(shape=st.tuples(st.just(1), dims, dims, dims),
       pads=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=3, max_size=3))
def test_int16_pad_is_on_the_npu_equal_to_tflite_micro(shape, pads):
    _on_npu(pad(shape, [(0, 0), *pads]), tflm_oracle)


def test_int16_concatenation_is_on_the_npu_equal_to_tflite_micro():
    q = (2.0**-10, 0)
    _on_npu(concat((1, 3, 4), (2, 5, 3), (q, q, q)), tflm_oracle)


@pytest.mark.parametrize("data, why", [
    (pad((1, 4, 4, 8), [(0, 0), (1, 1), (0, 0), (0, 0)], (0.01, 5)), "INT16"),
    (concat((1, 3, 4), (2, 2), ((2.0**-10, 0), (2.0**-12, 0))), "INT16"),
], ids=["pad-zero-point-5", "concatenation-requantizing"])
def test_other_int16_forms_stay_tflite_operators_naming_int16(data, why):
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert why in placed.why, placed.why
    # and TFLite Micro still runs the kept operator as the source
    xs = [np.zeros(i.shape, i.dtype) for i in cm.inputs]
    assert all(np.array_equal(g.reshape(w.shape), w)
               for g, w in zip(cm.run(*xs), tflm_oracle(data, xs)))
