"""TFLite's TILE through the importer: ``tile`` of the codes, on the Ethos-U as one copy of the
input per repetition. TFLite Micro has no TILE kernel, so the compiled file (its TILE an
``ethos-u`` operator) is what a board runs; its outputs equal LiteRT's reference kernels'."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches, oracle

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def tile_model(shape, reps, q=(0.05, 3)) -> bytes:
    """One int8 TILE of ``shape`` by the constant multiples ``reps``."""
    x = tb.T(list(shape), "int8", scale=q[0], zp=q[1])
    m = tb.T([len(reps)], "int32", data=np.asarray(reps, np.int32))
    y = tb.T([d * r for d, r in zip(shape, reps)], "int8", scale=q[0], zp=q[1])
    return tb.serialize([x, y, m], [(tb.BO.TILE, 0, None, [0, 2], [1])], [0], [1])


def _check(data: bytes, target: str = "ethos-u", seed: int = 0):
    """The compiled model's outputs on two random inputs, equal to LiteRT's reference."""
    return compiled_matches(data, target, seed, reference=oracle)


@settings(max_examples=8, deadline=None)
@given(dims=st.lists(st.integers(1, 5), min_size=1, max_size=3),
       reps=st.lists(st.integers(1, 3), min_size=3, max_size=3),
       q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_tile_of_height_width_and_depth_is_on_the_npu_exactly(dims, reps, q):
    shape = [1, *dims] if len(dims) == 3 else dims
    multiples = ([1] + reps)[-len(shape):] if len(shape) == 4 else reps[-len(shape):]
    cm = _check(tile_model(shape, multiples, q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_tiling_the_batch_stays_a_tflite_operator_naming_the_rule():
    """Kept for TFLite Micro, which has no TILE kernel: the placement says why."""
    data = tile_model((1, 2, 3, 4), (2, 1, 1, 1))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "repeats the batch" in report, report


def test_the_llvm_host_runs_it_exactly():
    _check(tile_model((1, 3, 2, 5), (1, 2, 3, 2)), "llvm", seed=4)
