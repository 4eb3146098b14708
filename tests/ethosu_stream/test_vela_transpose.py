"""Vela 5.2's own TRANSPOSE streams on the functional model, for the forms the ethos-u
backend took later than the int8/int16 ones of up to six axes: int32 and seven or eight axes.

Vela 5.2's C++ core takes an int32 TRANSPOSE of at most four axes read as NHWC in the orders
NHWC, NWHC (a batch of 1) and NHCW, and moves it as int8 codes: each element's four bytes one
deeper block of channels (NWHC: one copy of depth 4C; NHCW: one copy per batch and row). It
takes int8/int16 permutations of up to eight axes. Those streams equal LiteRT's reference
kernel (TFLite Micro's TRANSPOSE takes at most five axes and no int32). Every other int32
permutation stays a TFLite operator there, which TFLite Micro cannot run; ours takes them
(tests/tvm_ethos/test_tflite_transpose.py)."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb

from ethosu_stream.tflite_graph import TfliteGraph
from tests.helpers.tflite_oracle import oracle
from tests.helpers.vela_cli import vela_compile

pytest.importorskip("ethosu.vela")


def _model(shape, perm, dtype: str) -> bytes:
    """One TRANSPOSE of ``shape`` by the constant ``perm`` (int32 quantized with zero point 0,
    as Vela requires)."""
    zp = 0 if dtype in ("int32", "int16") else 3
    x = tb.T(list(shape), dtype, scale=0.5, zp=zp)
    p = tb.T([len(perm)], "int32", data=np.asarray(perm, np.int32))
    y = tb.T([shape[a] for a in perm], dtype, scale=0.5, zp=zp)
    return tb.serialize([x, p, y], [(tb.BO.TRANSPOSE, 0, None, [0, 1], [2])], [0], [2])


def _vela_run(shape, perm, dtype: str, config: str = "ethos-u55-128"):
    """Vela's graph of the model and its output against LiteRT's on a random input."""
    model = _model(shape, perm, dtype)
    graph = TfliteGraph(vela_compile(model, config), config)
    info = np.iinfo(dtype)
    x = np.random.RandomState(0).randint(info.min, info.max + 1, shape, dtype=np.int64)
    x = x.astype(dtype)
    (want,) = oracle(model, [x])
    return graph, x, want


SLOW = pytest.mark.slow


@pytest.mark.parametrize("shape, perm, dtype, config", [
    pytest.param((2, 3, 4, 5), (0, 1, 2, 3), "int32", "ethos-u55-128", marks=SLOW),  # NHWC
    ((1, 3, 4, 5), (0, 2, 1, 3), "int32", "ethos-u55-128"),      # NWHC
    ((2, 3, 4, 5), (0, 1, 3, 2), "int32", "ethos-u65-256"),      # NHCW
    pytest.param((3, 4, 5), (1, 0, 2), "int32", "ethos-u55-128", marks=SLOW),  # NWHC, 3 axes
    pytest.param((4, 5), (1, 0), "int32", "ethos-u55-128", marks=SLOW),        # NHCW, 2 axes
    pytest.param((2, 3, 2, 2, 3, 2, 2), (6, 5, 4, 3, 2, 1, 0), "int8", "ethos-u55-128",
                 marks=SLOW),
    ((2, 3, 2, 2, 3, 2, 2, 2), (7, 1, 5, 3, 4, 2, 6, 0), "int16", "ethos-u65-256"),
])
def test_velas_stream_of_its_int32_and_many_axis_forms_equals_litert(shape, perm, dtype,
                                                                     config):
    graph, x, want = _vela_run(shape, perm, dtype, config)
    assert graph.cpu_operators == []
    (got,), _ = graph.run([x])
    assert np.array_equal(got.reshape(want.shape), want)


@pytest.mark.parametrize("shape, perm", [
    pytest.param((2, 3, 4, 5), (0, 2, 1, 3), marks=SLOW),        # NWHC with a batch of 2
    ((1, 3, 4, 5), (0, 3, 1, 2)),                                # NCHW
    pytest.param((3, 4, 5), (2, 1, 0), marks=SLOW),
    pytest.param((2, 3, 4, 5, 2), (0, 1, 2, 4, 3), marks=SLOW),  # five axes
])
def test_vela_leaves_its_other_int32_permutations_to_tflite(shape, perm):
    graph, _, _ = _vela_run(shape, perm, "int32")
    assert graph.cpu_operators == ["TRANSPOSE (operator 0)"]
