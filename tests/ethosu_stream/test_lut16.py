"""The output unit's 16-bit LUT (ethosu_stream.lut16, rfcs/0007 section 7 rule 12) on the
streams Vela writes with one, compiled by Vela's CLI into a temporary folder: an int16 EXP
(one pool through a table Vela computes from the quantization) equal to LiteRT's reference
kernel on every int16 code, an int16 RSQRT on every code it defines, and the int16 SOFTMAX
(two fixed tables) equal to TFLite Micro wherever Vela's tables are TFLite Micro's; where
they are not (two entries of Vela's 1/(1 + x) table), the stream is what Vela's table says
and one code off TFLite Micro, which is Vela's deviation, not the model's."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as B
from ethosu.vela.softmax import SoftMax
from hypothesis import given, settings
from hypothesis import strategies as st

from ethosu_stream import lut16
from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tests.helpers.vela_cli import vela_compile
from tvm_ethos.compute import softmax16

from .test_older_vela import _old_vela

Q15 = (1 / 32768, 0)


def _table(words) -> np.ndarray:
    """Vela's base-and-slope words as TFLite's 513 values."""
    base, slope = lut16.decode(np.array(words, np.uint32).view(np.uint8))
    return np.append(base, base[-1] + slope[-1])


VELA_EXP, VELA_RECIPROCAL = _table(SoftMax.EXP_LUT), _table(SoftMax.ONE_OVER_ONE_PLUS_X_LUT)


def _softmax_model(shape, scale, beta) -> bytes:
    return B.softmax(None, shape=shape, in_q=(scale, 0), dtype="int16", out_q=Q15, beta=beta)


def _exp_model(in_q, out_q) -> bytes:
    x = B.T([1, 65536], "int16", scale=in_q[0], zp=in_q[1])
    y = B.T([1, 65536], "int16", scale=out_q[0], zp=out_q[1])
    return B.serialize([x, y], [(B.BO.EXP, 0, None, [0], [1])], [0], [1])


@pytest.mark.parametrize("in_q,out_q,config", [
    ((2e-4, 0), (3e-3, 0), "ethos-u55-128"),
    ((5e-5, 0), (2e-4, 0), "ethos-u65-256"),
])
def test_velas_int16_exp_is_litert_on_every_code(in_q, out_q, config):
    """Every interval of the table at every one of its 128 fractions."""
    model = _exp_model(in_q, out_q)
    x = np.arange(-32768, 32768, dtype=np.int16).reshape(1, -1)
    (got,), stats = run_vela_model(vela_compile(model, config), [x], config)
    assert stats.dma_bytes.get((0, 0x103)) == lut16.TABLE_BYTES  # the table, to SHRAM
    want = oracle(model, [x])[0]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_velas_int16_rsqrt_is_litert_on_every_defined_code():
    """Vela's 16-bit LUT of TFLite's RSQRT on every non-negative code (LiteRT fails the
    invocation on a negative one; TFLite Micro has no int16 RSQRT)."""
    x = B.T([1, 32768], "int16", scale=1e-3, zp=0)
    y = B.T([1, 32768], "int16", scale=5e-4, zp=0)
    model = B.build([x, y], [0], [1], B.BO.RSQRT)
    codes = np.arange(32768, dtype=np.int16).reshape(1, -1)
    (got,), _ = run_vela_model(vela_compile(model, "ethos-u55-128"), [codes], "ethos-u55-128")
    want = oracle(model, [codes])[0]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def _rows(shape, seed) -> list[np.ndarray]:
    rs = np.random.RandomState(seed)
    wide = rs.randint(-32768, 32768, shape)
    return [wide.astype(np.int16), (wide // rs.randint(2, 3000)).astype(np.int16),
            np.full(shape, 5, np.int16)]


def _check_softmax_stream(data: bytes, model: bytes, shape, scale, beta, config, seed):
    for x in _rows(shape, seed):
        (got,), _ = run_vela_model(data, [x], config)
        got = got.reshape(shape).astype(np.int64)
        want = tflm_oracle(model, [x])[0].reshape(shape)
        ours = softmax16.softmax_int16(x, scale, beta)
        as_vela = softmax16.softmax_int16(x, scale, beta, VELA_EXP, VELA_RECIPROCAL)
        # the statement is TFLite Micro's kernel; the stream is that kernel on Vela's tables
        np.testing.assert_array_equal(ours, want)
        np.testing.assert_array_equal(got, as_vela)
        same = ours == as_vela
        np.testing.assert_array_equal(got[same], want[same])


@settings(max_examples=8, deadline=None)
@given(shape=st.tuples(st.just(1), st.integers(1, 3), st.integers(1, 60)),
       scale=st.floats(1e-5, 0.05), beta=st.sampled_from([1.0, 0.5, 2.0, 0.1]),
       config=st.sampled_from(["ethos-u55-64", "ethos-u55-128", "ethos-u65-256"]),
       seed=st.integers(0, 99))
def test_velas_int16_softmax_runs_as_tflite_micro_on_its_tables(shape, scale, beta, config,
                                                                   seed):
    model = _softmax_model(shape, scale, beta)
    _check_softmax_stream(vela_compile(model, config), model, shape, scale, beta, config, seed)


def test_velas_reciprocal_table_is_tflite_micros_but_for_two_entries():
    exp, reciprocal = softmax16.tables()
    np.testing.assert_array_equal(exp, VELA_EXP)
    assert np.flatnonzero(reciprocal != VELA_RECIPROCAL).tolist() == [160, 294]
    assert (VELA_RECIPROCAL - reciprocal)[[160, 294]].tolist() == [1, -1]


def test_where_velas_table_differs_its_stream_is_one_code_off_tflite_micro():
    """A row whose reciprocal interpolates next to entry 160: Vela's stream gives what its
    table says, TFLite Micro what its own does."""
    shape, scale, beta = (1, 1, 57), 2.5117e-4, 0.5
    rs = np.random.RandomState(0)
    for _ in range(2000):
        x = rs.randint(-32768, 32768, shape).astype(np.int16)
        as_vela = softmax16.softmax_int16(x, scale, beta, VELA_EXP, VELA_RECIPROCAL)
        if (as_vela != softmax16.softmax_int16(x, scale, beta)).any():
            break
    else:
        pytest.fail("no row reads the entries where the tables differ")
    model = _softmax_model(shape, scale, beta)
    (got,), _ = run_vela_model(vela_compile(model, "ethos-u55-128"), [x], "ethos-u55-128")
    want = tflm_oracle(model, [x])[0].reshape(shape).astype(np.int64)
    np.testing.assert_array_equal(got.reshape(shape), as_vela)
    assert 0 < np.abs(got.reshape(shape) - want).max() <= 1


@pytest.mark.parametrize("version", ["3.11.0", "4.5.0"])
def test_an_older_velas_int16_softmax_stream_runs_as_tflite_micro(version):
    vela = _old_vela(version)
    if vela is None:
        pytest.skip(f"no Vela {version} venv (set TVM_ETHOS_VELA_VENVS or run `make corpus`)")
    shape, scale, beta, config = (1, 2, 33), 1.3e-3, 1.0, "ethos-u55-256"
    model = _softmax_model(shape, scale, beta)
    _check_softmax_stream(vela_compile(model, config, vela), model, shape, scale, beta, config, 4)
