"""SOFTMAX of int16 codes to int16 ones on the Ethos-U (issue 28): TFLite Micro's int16 kernel
(its two interpolated tables) as the numpy statement, and the graph-level NPU operator
(``ops_softmax16``, Vela's form with the 16-bit LUTs) equal to TFLite Micro on the
functional model, also where Vela 5.2's own stream is one code off (its reciprocal table);
the forms TFLite Micro's kernel does not take stay TFLite operators, saying why."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.tflite_oracle import tflm_oracle
from tvm_ethos.compute import softmax16

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

Q15 = (1 / 32768, 0)


def softmax16_model(shape, scale, beta=1.0, in_zp=0, out_q=Q15) -> bytes:
    return tb.softmax(None, shape=shape, in_q=(scale, in_zp), dtype="int16", out_q=out_q,
                      beta=beta)


def _inputs(shape, seed) -> list[np.ndarray]:
    """Codes over the whole range, the same narrowed (differences the table resolves), and
    one row all equal."""
    rs = np.random.RandomState(seed)
    wide = rs.randint(-32768, 32768, shape)
    return [wide.astype(np.int16), (wide // rs.randint(2, 3000)).astype(np.int16),
            np.full(shape, -7, np.int16)]


_shapes = st.tuples(st.just(1), st.integers(1, 4), st.integers(1, 70))
_scales = st.floats(1e-5, 0.05)
_betas = st.sampled_from([1.0, 0.5, 2.0, 0.1])


@settings(max_examples=40, deadline=None)
@given(shape=_shapes, scale=_scales, beta=_betas, seed=st.integers(0, 99))
def test_the_numpy_statement_is_tflite_micros_kernel(shape, scale, beta, seed):
    data = softmax16_model(shape, scale, beta)
    for x in _inputs(shape, seed):
        want = tflm_oracle(data, [x])[0].reshape(shape)
        np.testing.assert_array_equal(softmax16.softmax_int16(x, scale, beta), want)


def _compiled(data: bytes, accelerator: str):
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    assert [p.placed_on for p in cm.placement if p.kind == "SOFTMAX"] == ["ethos-u"], \
        [p.why for p in cm.placement]
    return cm


@settings(max_examples=5, deadline=None)
@given(shape=_shapes, scale=_scales, beta=_betas,
       accelerator=st.sampled_from(["ethos-u55-64", "ethos-u55-128", "ethos-u65-256"]))
def test_the_npu_stream_is_tflite_micros_kernel(shape, scale, beta, accelerator):
    data = softmax16_model(shape, scale, beta)
    cm = _compiled(data, accelerator)
    for x in _inputs(shape, 1):
        want = tflm_oracle(data, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


def test_where_velas_reciprocal_table_is_off_the_stream_here_is_exact():
    """The row of tests/ethosu_stream/test_lut16.py on which Vela 5.2's stream is one code
    off TFLite Micro: this stream carries TFLite Micro's tables."""
    shape, scale, beta = (1, 1, 57), 2.5117e-4, 0.5
    exp, reciprocal = softmax16.tables()
    vela_reciprocal = reciprocal.copy()
    vela_reciprocal[[160, 294]] += [1, -1]
    rs = np.random.RandomState(0)
    for _ in range(2000):
        x = rs.randint(-32768, 32768, shape).astype(np.int16)
        if (softmax16.softmax_int16(x, scale, beta, exp, vela_reciprocal)
                != softmax16.softmax_int16(x, scale, beta)).any():
            break
    else:
        pytest.fail("no row reads the entries where the tables differ")
    data = softmax16_model(shape, scale, beta)
    want = tflm_oracle(data, [x])[0]
    np.testing.assert_array_equal(_compiled(data, "ethos-u55-128").run(x)[0].reshape(want.shape),
                                  want)


def _add_then_softmax(shape, scale) -> bytes:
    """An int16 ADD (Relax, an NPU group) feeding the int16 SOFTMAX (graph-level)."""
    a = tb.T(list(shape), "int16", scale=scale, zp=0)
    b = tb.T(list(shape), "int16", scale=scale, zp=0)
    s = tb.T(list(shape), "int16", scale=2 * scale, zp=0)
    y = tb.T(list(shape), "int16", scale=Q15[0], zp=0)

    def add_opts(bld):
        tflite.AddOptionsStart(bld)
        return tflite.AddOptionsEnd(bld)

    def softmax_opts(bld):
        tflite.SoftmaxOptionsStart(bld)
        tflite.SoftmaxOptionsAddBeta(bld, 1.0)
        return tflite.SoftmaxOptionsEnd(bld)

    return tb.serialize([a, b, s, y], [(tb.BO.ADD, tb.BOPT.AddOptions, add_opts, [0, 1], [2]),
                                       (tb.BO.SOFTMAX, tb.BOPT.SoftmaxOptions, softmax_opts,
                                        [2], [3])], [0, 1], [3])


def test_after_an_npu_add_both_run_on_the_npu_and_the_file_is_deterministic():
    shape = (1, 2, 3, 17)
    data = _add_then_softmax(shape, 1e-3)
    cm = tvm_ethos.compile(data, "ethos-u -accelerator_config=ethos-u55-128", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u", "ethos-u"]
    exported = cm.tflite
    again = tvm_ethos.compile(data, "ethos-u -accelerator_config=ethos-u55-128",
                              cache_dir=False)
    assert again.tflite == exported
    rs = np.random.RandomState(5)
    for _ in range(3):
        xs = [rs.randint(-32768, 32768, shape).astype(np.int16) for _ in range(2)]
        want = tflm_oracle(data, xs)[0]
        (got,), _ = run_vela_model(exported, xs, "ethos-u55-128")
        np.testing.assert_array_equal(got.reshape(want.shape), want)
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)


@pytest.mark.parametrize("model,words", [
    (softmax16_model((1, 4096), 1e-3), "a depth of 4096"),
    (softmax16_model((1, 65536, 1), 1e-3), "65536 rows"),
    (softmax16_model((1, 8), 1e-3, in_zp=3), "input zero point 3"),
    (softmax16_model((1, 8), 8.0, beta=1.0), "which overflows past 15"),
    (softmax16_model((1, 0), 1e-3), "every extent positive"),
    (softmax16_model((1, 8), 1e-3, out_q=(1 / 65536, 0)), "requires (1/32768, 0)"),
], ids=["depth", "rows", "input-zero-point", "overflow", "empty", "output-scale"])
def test_forms_the_stream_does_not_take_stay_tflite_operators_saying_why(model, words):
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "the Ethos-U does not take it from the graph" in placed.why and words in placed.why, \
        placed.why
    assert "\n" not in placed.why
