"""TFLite's EXPAND_DIMS to 5-D (and any RESHAPE that only adds or drops dimensions of 1): the
same bytes read with another shape, which Vela 5.2 takes at any rank; on the Ethos-U as an
alias, alone or as the output of an ethos-u operator, the compiled file's outputs equal to
TFLite Micro's on the source. A RESHAPE to 5-D that regroups elements stays a TFLite
operator, naming the rank."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches

pytest.importorskip("tflite_micro")


def expand_dims_model(in_shape, axis: int, q=(0.05, 3)) -> bytes:
    """One int8 EXPAND_DIMS of ``in_shape`` at ``axis`` (of the output)."""
    out = list(in_shape[:axis]) + [1] + list(in_shape[axis:])
    x, y = (tb.T(list(s), "int8", scale=q[0], zp=q[1]) for s in (in_shape, out))
    ax = tb.T([1], "int32", data=np.array([axis], np.int32))
    return tb.serialize([x, ax, y], [(tb.BO.EXPAND_DIMS, 0, None, [0, 1], [2])], [0], [2])


def conv_expand_dims_model(rs, in_shape=(1, 5, 4, 3), axis: int = 0) -> bytes:
    """CONV_2D, then EXPAND_DIMS of its 4-D output to 5-D: the model's output."""
    x = tb.T(list(in_shape), "int8", scale=0.05, zp=3)
    w, bias, y = tb._conv_tensors(rs, x, 6)
    out = list(y.shape[:axis]) + [1] + list(y.shape[axis:])
    z = tb.T(out, "int8", scale=y.scale, zp=y.zp)
    ax = tb.T([1], "int32", data=np.array([axis], np.int32))
    return tb.serialize([x, w, bias, y, ax, z],
                        [tb._conv_op([0, 1, 2], [3]),
                         (tb.BO.EXPAND_DIMS, 0, None, [3, 4], [5])], [0], [5])


def reshape_model(in_shape, out_shape, q=(0.05, 3)) -> bytes:
    """One int8 RESHAPE of ``in_shape`` to ``out_shape`` (its new shape a constant)."""
    x, y = (tb.T(list(s), "int8", scale=q[0], zp=q[1]) for s in (in_shape, out_shape))
    shape = tb.T([len(out_shape)], "int32", data=np.asarray(out_shape, np.int32))
    return tb.serialize([x, shape, y], [(tb.BO.RESHAPE, 0, None, [0, 1], [2])], [0], [2])


@settings(max_examples=8, deadline=None)
@given(dims=st.lists(st.integers(1, 6), min_size=3, max_size=3), axis=st.integers(0, 4),
       q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_expand_dims_to_5d_is_on_the_npu_exactly(dims, axis, q):
    cm = compiled_matches(expand_dims_model([1] + dims, axis, q), "ethos-u")
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@pytest.mark.parametrize("axis", [0, 2, 4])
def test_a_convolutions_5d_expanded_output_is_one_ethos_u_operator_exactly(axis):
    data = conv_expand_dims_model(np.random.RandomState(axis), axis=axis)
    cm = compiled_matches(data, "ethos-u", seed=axis)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, \
        [(p.placed_on, p.why) for p in cm.placement]
    want = [1, 5, 4, 6]
    want.insert(axis, 1)
    assert [int(d) for d in cm.outputs[0].shape] == want


def test_the_ethos_u_llvm_target_runs_it_on_the_npu_exactly():
    cm = compiled_matches(expand_dims_model((1, 3, 4, 5), 3), "ethos-u,llvm", seed=1)
    assert cm.partition_summary == {"ethos-u": 1}


def test_a_5d_reshape_that_regroups_elements_stays_a_tflite_operator_naming_the_rank():
    data = reshape_model((1, 4, 4, 8), (1, 2, 2, 4, 8))
    (placed,) = compiled_matches(data, "ethos-u").placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "output is 5-D; at most 4-D" in report, report
