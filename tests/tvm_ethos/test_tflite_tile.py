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


@settings(max_examples=8, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=4, max_size=4),
       reps=st.lists(st.integers(1, 3), min_size=4, max_size=4),
       q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_tiling_the_batch_is_on_the_npu_exactly(shape, reps, q):
    """As Vela 5.2 (CPU operators = 0, benchmarks/vela_superset_audit.py): the batches fold
    into the rows, so a repeated batch is more copies; input batches above 1 with a repeated
    height are copied one by one."""
    cm = _check(tile_model(shape, reps, q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_tiling_batches_and_rows_of_a_batched_input_is_exact():
    """The per-batch copies: two input batches, each repeated in height and the whole in the
    batch (a copy of the whole folded input would put batch 1 where batch 0's second row
    block belongs)."""
    cm = _check(tile_model((2, 3, 2, 4), (2, 2, 1, 1)), seed=1)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_more_copies_than_the_limit_stay_a_tflite_operator_naming_it():
    """Four input batches, each repeated 300 times in height, are 1,200 copies (above 1,024);
    one input batch repeated 3 times in the batch and 300 in height is 900 and goes to the NPU."""
    cm = tvm_ethos.compile(tile_model((4, 1, 1, 8), (1, 300, 1, 1)), "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "1200 copies, at most 1024" in placed.why, placed.why
    cm = tvm_ethos.compile(tile_model((1, 1, 1, 8), (3, 300, 1, 1)), "ethos-u", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"]


def test_the_llvm_host_runs_it_exactly():
    _check(tile_model((1, 3, 2, 5), (1, 2, 3, 2)), "llvm", seed=4)
