"""Vela 5.2's own int16 MAX_POOL_2D, AVERAGE_POOL_2D, MEAN and REDUCE_MAX (over height and
width) streams on the functional model, equal to TFLite Micro's int16 kernels (LiteRT's
reference kernel for REDUCE_MAX, which TFLite Micro has no int16 kernel of): the forms
issue 28's audit found Vela puts on the NPU (benchmarks/vela_superset_audit.py), read
by the same functional model that runs tvm-ethos's streams of them."""
import numpy as np
import pytest
from hypothesis import given, settings
from int16_pooling_models import FORMS, LITERT_ONLY, pools, reductions

from ethosu_stream.tflite_graph import TfliteGraph, run_vela_model
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tests.helpers.vela_cli import vela_compile

CONFIG = "ethos-u55-128"


def _vela_equals(model: bytes, reference, seed: int = 0) -> None:
    """Vela's stream of ``model`` on two random int16 inputs over the whole range equals
    ``reference``'s outputs, every operator on the NPU."""
    vela = vela_compile(model, CONFIG)
    assert TfliteGraph(vela, CONFIG).cpu_operators == []
    rs = np.random.RandomState(seed)
    for _ in range(2):
        x = _input(model, rs)
        (want,) = reference(model, [x])
        (got,), _ = run_vela_model(vela, [x], CONFIG)
        assert np.array_equal(got.reshape(want.shape), want), (got.ravel()[:8], want.ravel()[:8])


def _input(model: bytes, rs) -> np.ndarray:
    from ai_edge_litert.interpreter import Interpreter

    (d,) = Interpreter(model_content=bytes(model)).get_input_details()
    return rs.randint(-32768, 32768, d["shape"]).astype(np.int16)


@pytest.mark.parametrize("form", ["avg_pool_valid", "mean_requantizing"])
def test_velas_int16_stream_equals_tflite(form):
    """The two forms that compute (the others, which pick codes, in the sweeps below)."""
    _vela_equals(FORMS[form], oracle if form in LITERT_ONLY else tflm_oracle)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(case=pools())
def test_velas_int16_pool_streams_equal_tflite_micro(case):
    _vela_equals(case[0], tflm_oracle)


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(case=reductions("MEAN"))
def test_velas_int16_mean_streams_equal_tflite_micro(case):
    _vela_equals(case[0], tflm_oracle)


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(case=reductions("REDUCE_MAX"))
def test_velas_int16_reduce_max_streams_equal_litert(case):
    _vela_equals(case[0], oracle)
