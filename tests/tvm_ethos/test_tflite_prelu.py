"""TFLite's PRELU (int8, alpha one code per channel) through the importer: on the Ethos-U as
four operations (``ops_prelu``: each branch of TFLite's kernel rounded as it rounds, and
their sum), the compiled file's outputs equal to TFLite Micro's on the source; an alpha that
varies along another axis stays a TFLite operator."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.tflite_oracle import compiled_matches

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def prelu_model(shape, alpha: np.ndarray, in_q=(0.05, 3), alpha_q=(0.01, 0),
                out_q=(0.04, -2)) -> bytes:
    """One int8 PRELU of ``shape`` with the constant int8 ``alpha`` codes."""
    x = tb.T(list(shape), "int8", scale=in_q[0], zp=in_q[1])
    a = tb.T(list(alpha.shape), "int8", scale=alpha_q[0], zp=alpha_q[1],
             data=alpha.astype(np.int8))
    y = tb.T(list(shape), "int8", scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, a, y], [(tb.BO.PRELU, 0, None, [0, 1], [2])], [0], [2])


def _check(data: bytes, target: str = "ethos-u", seed: int = 0):
    """The compiled model's outputs on two random inputs, equal to TFLite Micro's."""
    return compiled_matches(data, target, seed)


_q = st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127))


@settings(max_examples=8, deadline=None)
@given(hwc=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 12)),
       seed=st.integers(0, 2**16), in_q=_q, out_q=_q,
       alpha_q=st.tuples(st.floats(0.001, 0.1), st.integers(-128, 127)),
       per_channel=st.booleans())
def test_prelu_is_on_the_npu_exactly(hwc, seed, in_q, out_q, alpha_q, per_channel):
    alpha = np.random.RandomState(seed).randint(-128, 128, (1, 1, hwc[2] if per_channel else 1))
    cm = _check(prelu_model((1, *hwc), alpha, in_q, alpha_q, out_q), seed=seed % 7)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_a_prelu_the_plan_stripes_is_each_stripes_four_operations_exactly():
    """A map larger than one stripe: every stripe's operations read and write its box of the
    whole tensors (``ops_prelu``), so the stream has several of each."""
    alpha = np.random.RandomState(5).randint(-128, 128, (16,))
    cm = _check(prelu_model((1, 24, 20, 16), alpha, (0.04, -20), (0.02, 9), (0.03, 15)))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_an_alpha_varying_over_height_stays_a_tflite_operator_naming_the_rule():
    alpha = np.arange(-6, 6).reshape(1, 3, 4)[:, :, :1].repeat(2, axis=2)
    data = prelu_model((1, 3, 4, 2), alpha.reshape(3, 1, 2) * 0 + np.arange(3)[:, None, None])
    cm = _check(data)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "one value per channel" in placed.why, placed.why


def test_the_llvm_host_runs_it_exactly():
    alpha = np.array([[[-100, -3, 0, 7, 60, 127]]])
    _check(prelu_model((1, 5, 3, 6), alpha, (0.03, -9), (0.02, 4), (0.05, 12)), "llvm", seed=3)
