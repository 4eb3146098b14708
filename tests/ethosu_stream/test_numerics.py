"""Rounding, the bias stream and the weight decode, each against an independent statement of
the rule (Python integers, Vela's own encoders)."""
import numpy as np
from ethosu.mlw_codec import reorder_encode
from ethosu.vela.weight_compressor import encode_bias
from hypothesis import given, settings
from hypothesis import strategies as st

from ethosu_stream import rounding
from ethosu_stream.bias import decode_bias_stream
from ethosu_stream.weights import decode_weights

from .reference import tflite_multiply


@settings(max_examples=300, deadline=None)
@given(st.integers(-(1 << 24), 1 << 24), st.integers(1 << 30, (1 << 31) - 1), st.integers(20, 50))
def test_tfl_rounding_is_tflites_double_rounding(acc, multiplier, shift):
    got = int(rounding.scale(np.array([acc]), multiplier, shift, rounding.TFL)[0])
    assert got == tflite_multiply(acc, multiplier, shift)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(1 << 30), 1 << 30), st.integers(0, (1 << 31) - 1), st.integers(1, 40))
def test_natural_rounds_half_up(acc, multiplier, shift):
    got = int(rounding.scale(np.array([acc]), multiplier, shift, rounding.NATURAL)[0])
    exact = acc * multiplier
    assert got == (2 * exact + (1 << shift)) // (2 << shift)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(-(1 << 39), (1 << 39) - 1), st.integers(0, 2**32 - 1),
                          st.integers(0, 63)), min_size=1, max_size=20))
def test_bias_stream_round_trips_vela_encoding(entries):
    raw = b"".join(bytes(encode_bias(np.int64(b), s, sh)) for b, s, sh in entries)
    dec = decode_bias_stream(np.frombuffer(raw, np.uint8), len(entries))
    assert [
        (int(b), int(s), int(sh)) for b, s, sh in zip(dec.bias, dec.scale, dec.shift)
    ] == entries


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.sampled_from([1, 3]), st.sampled_from([1, 3]), st.integers(1, 40),
       st.sampled_from([8, 16, 32]), st.booleans(), st.sampled_from([(8, 8), (4, 8)]),
       st.integers(0, 2**32 - 1))
def test_weights_decode_to_what_vela_encoded(
    ofm, kh, kw, ifm, block_depth, part_kernel, ublocks, seed
):
    w = np.random.RandomState(seed % 2**31).randint(-255, 256, (ofm, kh, kw, ifm)).astype(np.int16)
    encoded, _ = reorder_encode(ublocks[0], ublocks[1], w, block_depth, False, part_kernel, 8, 8, 8)
    got = decode_weights(bytes(encoded), w.shape, ifm_ublock=ublocks[0], ofm_ublock=ublocks[1],
                         block_depth=block_depth, depthwise=False, part_kernel=part_kernel,
                         ifm_bits=8, dilation=(1, 1))
    assert np.array_equal(got, w)


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 40), st.sampled_from([1, 3, 5]), st.sampled_from([8, 16]),
       st.integers(0, 2**32 - 1))
def test_depthwise_weights_decode_to_what_vela_encoded(ch, k, block_depth, seed):
    w = np.random.RandomState(seed % 2**31).randint(-255, 256, (ch, k, k, 1)).astype(np.int16)
    encoded, _ = reorder_encode(8, 8, w, block_depth, True, False, 8, 8, 8)
    got = decode_weights(bytes(encoded), w.shape, ifm_ublock=8, ofm_ublock=8,
                         block_depth=block_depth, depthwise=True, part_kernel=False,
                         ifm_bits=8, dilation=(1, 1))
    assert np.array_equal(got, w)
