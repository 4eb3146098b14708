"""TFLite's REDUCE_MAX, REDUCE_MIN and SUM over height and width through the importer: on the
Ethos-U as one NPU operation (REDUCE_MAX a single-window max pool, SUM MEAN's depthwise
convolution with TFLite's SUM scale), and the compiled file's outputs equal to TFLite
Micro's on the source; reductions the integer kernels do not take stay TFLite operators."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import _opts

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

CODES = {"REDUCE_MAX": tb.BO.REDUCE_MAX, "REDUCE_MIN": tb.BO.REDUCE_MIN, "SUM": tb.BO.SUM}


def reduce_model(name: str, shape, axes=(1, 2), keepdims=True, in_q=(0.05, 3),
                 out_q=None) -> bytes:
    """One int8 ``name`` of ``shape`` over the constant ``axes`` (``out_q`` None: the input's
    quantization, as REDUCE_MAX and REDUCE_MIN require)."""
    out_q = in_q if out_q is None else out_q
    out_shape = [1 if a in axes else d for a, d in enumerate(shape)] if keepdims else \
        [d for a, d in enumerate(shape) if a not in axes]
    x = tb.T(list(shape), "int8", scale=in_q[0], zp=in_q[1])
    y = tb.T(out_shape, "int8", scale=out_q[0], zp=out_q[1])
    ax = tb.T([len(axes)], "int32", data=np.asarray(axes, np.int32))
    otype, ofn = _opts("ReducerOptions", KeepDims=keepdims)
    return tb.serialize([x, y, ax], [(CODES[name], otype, ofn, [0, 2], [1])], [0], [1])


def _check(data: bytes, target: str = "ethos-u", seed: int = 0):
    """The compiled model's outputs on two random inputs, equal to TFLite Micro's."""
    return compiled_matches(data, target, seed)


_shapes = st.tuples(st.just(1), st.integers(1, 9), st.integers(1, 9), st.integers(1, 20))
_q = st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127))


@settings(max_examples=6, deadline=None)
@given(shape=_shapes, keepdims=st.booleans(), in_q=_q)
def test_reduce_max_is_one_npu_max_pool_exact_with_tflite_micro(shape, keepdims, in_q):
    cm = _check(reduce_model("REDUCE_MAX", shape, keepdims=keepdims, in_q=in_q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@settings(max_examples=6, deadline=None)
@given(shape=_shapes, keepdims=st.booleans(), in_q=_q)
def test_reduce_min_is_a_not_table_and_a_max_pool_exact_with_tflite_micro(shape, keepdims, in_q):
    cm = _check(reduce_model("REDUCE_MIN", shape, keepdims=keepdims, in_q=in_q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@settings(max_examples=6, deadline=None)
@given(shape=_shapes, keepdims=st.booleans(), in_q=_q,
       out_q=st.tuples(st.floats(0.01, 8.0), st.integers(-128, 127)))
def test_sum_is_one_npu_convolution_exact_with_tflite_micro(shape, keepdims, in_q, out_q):
    cm = _check(reduce_model("SUM", shape, keepdims=keepdims, in_q=in_q, out_q=out_q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@pytest.mark.parametrize("name", ["REDUCE_MAX", "REDUCE_MIN", "SUM"])
def test_a_reduction_after_an_add_is_in_the_same_ethos_u_operator(name):
    """The reduction inside a planned subgraph: its input is another NPU operation's
    output in the arena (REDUCE_MIN's working memory beside it)."""
    q = (0.05, 3)
    x, z, t = (tb.T([1, 6, 5, 9], "int8", scale=q[0], zp=q[1]) for _ in range(3))
    y = tb.T([1, 1, 1, 9], "int8", scale=0.7 if name == "SUM" else q[0], zp=q[1])
    ax = tb.T([2], "int32", data=np.asarray([1, 2], np.int32))
    otype, ofn = _opts("ReducerOptions", KeepDims=True)
    data = tb.serialize([x, z, t, y, ax], [(tb.BO.ADD, 0, None, [0, 1], [2]),
                                           (CODES[name], otype, ofn, [2, 4], [3])], [0, 1], [3])
    cm = _check(data, seed=2)
    assert [p.placed_on for p in cm.placement] == ["ethos-u", "ethos-u"]
    assert len({p.operator for p in cm.placement}) == 1


@pytest.mark.parametrize("name", ["REDUCE_MAX", "REDUCE_MIN", "SUM"])
def test_the_llvm_hosts_integer_kernel_is_tflite_micros(name):
    """``llvm`` runs the same TE kernels the emulator runs (``compute.te_ops``)."""
    data = reduce_model(name, (1, 5, 3, 7), keepdims=False, in_q=(0.03, -7),
                        out_q=(0.4, 11) if name == "SUM" else None)
    cm = _check(data, "llvm", seed=1)
    assert set(cm.partition_summary) == {"llvm"}


@pytest.mark.parametrize("axes", [(0,), (0, 3)])
def test_a_reduction_over_other_axes_stays_a_tflite_operator(axes):
    """The batch (the depth: test_tflite_reduce_depth.py; the height or the width alone:
    test_reduce_forms.py)."""
    cm = _check(reduce_model("REDUCE_MAX", (1, 3, 4, 5), axes=axes))
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"


def test_a_reduce_max_quantized_unlike_its_input_stays_a_tflite_operator():
    """TFLite Micro's kernel refuses it at run time, so the NPU takes it no more than Vela
    would have it differ from TFLite."""
    data = reduce_model("REDUCE_MAX", (1, 3, 4, 5), in_q=(0.05, 3), out_q=(0.1, 3))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"


def test_a_reduce_max_too_tall_for_one_pool_runs_on_the_npu_in_bands():
    # past 256 rows: a max pool per band of rows, then one over their maxima
    # (ops_reduce_split, tests/tvm_ethos/test_reduce_split.py)
    cm = _check(reduce_model("REDUCE_MAX", (1, 257, 1, 2)))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why

