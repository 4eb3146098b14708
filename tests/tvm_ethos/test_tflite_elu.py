"""TFLite's int8 ELU through the importer: the NPU looks every code up in TFLite's own float32
table (``compute.quant.elu_lut``, one LUT pool), and the compiled file's outputs equal TFLite
Micro's on the source; the llvm host gathers from the same table."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def elu_model(shape, in_q=(0.05, 3), out_q=(0.04, -2)) -> bytes:
    x = tb.T(list(shape), "int8", scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), "int8", scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(tb.BO.ELU, 0, None, [0], [1])], [0], [1])


def _check(data: bytes, target: str = "ethos-u"):
    """The compiled model's output on every int8 code, equal to TFLite Micro's."""
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    x = np.arange(-128, 128, dtype=np.int8).reshape(cm.inputs[0].shape)
    (got,), (want,) = cm.run(x), tflm_oracle(data, [x])
    assert np.array_equal(got.reshape(want.shape), want), (got.ravel()[:8], want.ravel()[:8])
    rs = np.random.RandomState(0)
    xs = inputs_for(cm.inputs, rs)
    (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)
    return cm


_q = st.tuples(st.floats(0.001, 1.0), st.integers(-128, 127))


@settings(max_examples=10, deadline=None)
@given(in_q=_q, out_q=_q)
def test_elu_is_one_npu_table_lookup_exact_on_every_code(in_q, out_q):
    cm = _check(elu_model((1, 4, 8, 8), in_q, out_q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_the_llvm_host_runs_it_exactly():
    _check(elu_model((1, 2, 16, 8), (0.07, 20), (0.03, 90)), "llvm")
