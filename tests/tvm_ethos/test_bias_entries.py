"""npu_ops.bias_entries (the bias/scale stream packed on arrays) against Vela's own packer,
``npu_encode_bias``, entry by entry: the oracle the stream generator used before."""
import numpy as np
import pytest
from ethosu.vela import api
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ethosu_stream.bias import decode_bias_stream
from tvm_ethos.backends.ethos_u.npu_ops import bias_entries
from tvm_ethos.errors import CompileError

BIAS = st.integers(-(1 << 39), (1 << 39) - 1)
SCALE = st.tuples(st.integers(0, (1 << 32) - 1), st.integers(0, 63))


def vela_entries(bias, scales) -> bytes:
    return b"".join(bytes(api.npu_encode_bias(np.int64(b), m, s))
                    for b, (m, s) in zip(bias, scales))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(BIAS, SCALE), max_size=40))
@example([(-(1 << 39), (0, 0)), ((1 << 39) - 1, ((1 << 32) - 1, 63)), (-1, (1, 1))])
def test_entries_equal_vela_entry_by_entry(channels):
    bias = np.array([b for b, _ in channels], np.int64)
    scales = [s for _, s in channels]
    got = bias_entries(bias, scales)
    assert got == vela_entries(bias.tolist(), scales)
    back = decode_bias_stream(np.frombuffer(got, np.uint8), len(channels))
    assert back.bias.tolist() == bias.tolist()
    assert back.scale.tolist() == [m for m, _ in scales]
    assert back.shift.tolist() == [s for _, s in scales]


@settings(max_examples=40, deadline=None)
@given(st.lists(BIAS, max_size=8), st.lists(SCALE, max_size=8))
def test_entries_pair_as_many_channels_as_the_shorter_side(bias, scales):
    """As ``zip`` paired them: a slice's bias and scales may differ in length."""
    assert bias_entries(np.array(bias, np.int64), scales) == vela_entries(bias, scales)


@pytest.mark.parametrize("bias, scale, field", [
    (1 << 39, (1, 0), "bias 549755813888"),
    (-(1 << 39) - 1, (1, 0), "bias -549755813889"),
    (0, (1 << 32, 0), "multiplier 4294967296"),
    (0, (-1, 0), "multiplier -1"),
    (0, (1, 64), "shift 64"),
    (0, (1, -1), "shift -1"),
])
def test_a_value_out_of_its_field_is_one_error_naming_the_channel(bias, scale, field):
    with pytest.raises(CompileError, match=f"output channel 1: {field} does not fit"):
        bias_entries(np.array([0, bias], np.int64), [(1, 0), scale])
