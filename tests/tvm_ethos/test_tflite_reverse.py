"""TFLite's REVERSE_V2 through the importer: ``flip`` of the codes, on the Ethos-U as one copy
per index of the reversed axis (height, width or depth), the compiled file's outputs equal to
TFLite Micro's on the source."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.tflite_oracle import compiled_matches

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def reverse_model(shape, axis: int, q=(0.05, 3)) -> bytes:
    """One int8 REVERSE_V2 of ``shape`` along the constant ``axis``."""
    x = tb.T(list(shape), "int8", scale=q[0], zp=q[1])
    a = tb.T([1], "int32", data=np.asarray([axis], np.int32))
    y = tb.T(list(shape), "int8", scale=q[0], zp=q[1])
    return tb.serialize([x, y, a], [(tb.BO.REVERSE_V2, 0, None, [0, 2], [1])], [0], [1])


def _check(data: bytes, target: str = "ethos-u", seed: int = 0):
    """The compiled model's outputs on two random inputs, equal to TFLite Micro's."""
    return compiled_matches(data, target, seed)


@settings(max_examples=8, deadline=None)
@given(dims=st.lists(st.integers(1, 7), min_size=1, max_size=3), data=st.data(),
       q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_reverse_along_height_width_or_depth_is_on_the_npu_exactly(dims, data, q):
    shape = [1, *dims] if len(dims) == 3 else dims
    axis = data.draw(st.integers(1 if len(shape) == 4 else 0, len(shape) - 1))
    cm = _check(reverse_model(shape, axis, q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_reversing_the_batch_stays_a_tflite_operator_exactly():
    cm = _check(reverse_model((3, 2, 2, 4), 0))
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"


def test_a_negative_axis_counts_from_the_last():
    cm = _check(reverse_model((1, 3, 5, 4), -2))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_the_llvm_host_runs_it_exactly():
    _check(reverse_model((1, 4, 6, 5), 2), "llvm", seed=2)
