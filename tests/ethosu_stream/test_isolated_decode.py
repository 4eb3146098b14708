"""Weight streams are decoded by children of a helper process, never of the caller: a child
forked from a process where TVM's runtime ran can hang in the codec's C ``exit``."""
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ethosu_stream import isolated_decode
from ethosu_stream.vela_defs import mlw_codec
from ethosu_stream.weights import _decode_isolated


def _no_fork():
    raise AssertionError("the caller forked to decode a weight stream")


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(-255, 255), min_size=1, max_size=600), st.floats(0.0, 0.9))
def test_streams_decode_in_the_helper_as_the_codec_decodes_them(values, cut):
    """A stream cut short is refused (None: the codec ended the helper's child, where it would
    have ended this process) or decoded, and the next whole stream still gives the codec's
    values. The caller itself never forks."""
    stream = bytes(mlw_codec().encode(values))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(os, "fork", _no_fork)
        cut_short = isolated_decode.decode(stream[:int(len(stream) * cut)])
        whole = isolated_decode.decode(stream)
    assert cut_short is None or len(cut_short) % 2 == 0
    assert np.array_equal(np.frombuffer(whole, np.int16), values)


def test_a_stream_that_does_not_decode_is_one_value_error():
    stream = bytes(mlw_codec().encode(list(range(-100, 100)) * 5))
    with pytest.raises(ValueError, match="weight stream does not decode"):
        _decode_isolated(stream[: len(stream) // 3])
