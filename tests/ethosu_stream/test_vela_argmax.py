"""Vela 5.2's own ARG_MAX streams on the functional model, equal to TFLite's.

Vela lowers ARG_MAX along the depth (at most 127 channels) to a 1x1 depthwise convolution
into int16 (each code times 128 plus the channel's reversed index ``C - 1 - c`` as its bias),
a max pool over each pixel's channels through an interpolated int16 table (base ``C - 1``,
slope -128: the reversed index back to the index, the smallest index winning a tie), and a
depthwise cast to int32 (two, through int16 pairs, for an int64 output). TFLite Micro's
kernel takes int8 input and int32 output only: the uint8 and int64 forms Vela also compiles
are compared with LiteRT's reference kernel."""
import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tests.helpers.vela_cli import vela_compile


def _vela_equals(model: bytes, shape, dtype: str, want_fn, config="ethos-u55-128",
                 seed: int = 0) -> None:
    vela = vela_compile(model, config)
    rs = np.random.RandomState(seed)
    info = np.iinfo(dtype)
    for x in (rs.randint(info.min, info.max + 1, shape).astype(dtype),
              tb.tied_codes(shape, dtype, rs, 2), tb.tied_codes(shape, dtype, rs, 1)):
        (want,) = want_fn(model, [x])
        (got,), _ = run_vela_model(vela, [x], config)
        assert got.dtype == want.dtype
        assert np.array_equal(got.reshape(want.shape), want), (x.ravel()[:8], got.ravel()[:8],
                                                                want.ravel()[:8])


@settings(max_examples=5, deadline=None)
@given(shape=st.tuples(st.just(1), st.integers(1, 6), st.integers(1, 6), st.integers(1, 127)),
       zp=st.integers(-128, 127))
def test_velas_int8_arg_max_stream_equals_tflite_micro(shape, zp):
    model = tb.arg_max(shape, "int8", (0.05, zp))
    _vela_equals(model, shape, "int8", tflm_oracle)


@pytest.mark.parametrize("dtype,zp,out,shape", [
    ("uint8", 128, "int32", (1, 3, 4, 127)),
    ("int8", -128, "int64", (1, 4, 3, 9)),
    ("uint8", 0, "int64", (1, 2, 5, 17)),
])
def test_velas_uint8_and_int64_arg_max_streams_equal_litert(dtype, zp, out, shape):
    """TFLite Micro refuses these at run time (uint8 input, int64 output)."""
    model = tb.arg_max(shape, dtype, (0.05, zp), out)
    _vela_equals(model, shape, dtype, oracle)


def test_velas_arg_max_stream_on_an_ethos_u65():
    shape = (1, 5, 4, 33)
    _vela_equals(tb.arg_max(shape), shape, "int8", tflm_oracle,
                 config="ethos-u65-256", seed=1)


@pytest.mark.slow   # Vela's stream of the wide row is 18,596 operations
@pytest.mark.parametrize("shape", [(1, 1, 70_000, 8),     # a row wider than 65,536
                                   (1, 300, 300, 16)])    # 90,000 pixels
def test_velas_arg_max_over_more_than_65536_pixels_equals_tflite_micro(shape):
    """Vela 5.2 takes an ARG_MAX of any number of pixels to the NPU, cut into pieces one max
    pool takes (at most 65,536 rows); ours does the same (``ops_argmax.pieces``)."""
    _vela_equals(tb.arg_max(shape), shape, "int8", tflm_oracle)
