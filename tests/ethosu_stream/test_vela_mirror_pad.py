"""Vela 5.2's own MIRROR_PAD streams on the functional model.

Vela lowers MIRROR_PAD of height and width to average-pool copies: the input into the
middle of the output, then each padded band read from the input (or from the copy, for the
columns) and written backwards through a negative OFM row or column stride (the register's
40-bit two's complement). Those streams equal TFLite Micro's outputs.

Vela 5.2's C++ core also takes padding of the depth and of the batch (and so of 2-D, 3-D
and 5-D tensors, whose last axis is the depth), but its lowering handles only height and
width: the input lands at depth and batch offset 0 and no operation writes the padded
channels or batches. The functional model runs such a stream as written, so it differs from
TFLite Micro: a fault in Vela's stream, not in the model. Vela 5.2's legacy Python core (and
Vela 3.11 and 4.5) keeps these forms on the CPU ("The pad tensor can only pad width and
height")."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import mirror_pad_of as _model

from ethosu_stream.tflite_graph import TfliteGraph
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tests.helpers.vela_cli import vela_compile

REFLECT, SYMMETRIC = tflite.MirrorPadMode.REFLECT, tflite.MirrorPadMode.SYMMETRIC
SCRATCH = 1  # the region of Vela's scratch arena, where the input and output sit


def _run(model: bytes, x: np.ndarray, config: str = "ethos-u55-128", options=()):
    """The graph Vela compiled and its output (shaped as the oracle's) and statistics."""
    graph = TfliteGraph(vela_compile(model, config, options=options), config)
    (got,), stats = graph.run([x])
    return graph, got, stats


@st.composite
def _height_and_width(draw):
    """A mode, a shape (batches too) and paddings of its height and width: each at most
    the dimension less one (REFLECT) or the whole dimension (SYMMETRIC)."""
    mode = draw(st.sampled_from([REFLECT, SYMMETRIC]))
    edge = 1 if mode == REFLECT else 0
    n, h, w, c = (draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9)),
                  draw(st.integers(1, 40)))
    pad = lambda d: (draw(st.integers(0, d - edge)), draw(st.integers(0, d - edge)))  # noqa: E731
    return mode, (n, h, w, c), [(0, 0), pad(h), pad(w), (0, 0)]


@settings(max_examples=6, deadline=None)
@given(case=_height_and_width(), seed=st.integers(0, 2**31 - 1))
def test_velas_stream_of_height_and_width_padding_equals_tflite_micro(case, seed):
    """The mirrored bands are written through negative OFM strides: the functional model
    reads them as the signed values they are."""
    mode, shape, pads = case
    model = _model(shape, pads, mode)
    x = np.random.RandomState(seed).randint(-128, 128, shape).astype(np.int8)
    (want,) = tflm_oracle(model, [x])
    graph, got, _ = _run(model, x)
    assert graph.cpu_operators == []
    assert np.array_equal(got.reshape(want.shape), want)


@pytest.mark.parametrize("dtype,zp,config", [("int16", 0, "ethos-u65-256"),
                                             ("uint8", 128, "ethos-u55-32")])
def test_velas_int16_and_uint8_streams_equal_litert(dtype, zp, config):
    """TFLite Micro's kernel takes int8 only: these are compared with LiteRT's reference."""
    shape, pads = (2, 5, 6, 19), [(0, 0), (3, 4), (5, 2), (0, 0)]
    model = _model(shape, pads, REFLECT, dtype, zp)
    info = np.iinfo(dtype)
    x = np.random.RandomState(1).randint(info.min, info.max + 1, shape).astype(dtype)
    (want,) = oracle(model, [x])
    _, got, _ = _run(model, x, config)
    assert np.array_equal(got.reshape(want.shape), want)


# (shape, pads, the axis whose padding Vela 5.2's stream leaves out)
DROPPED = {
    "depth": ((1, 3, 4, 5), [(0, 0), (0, 0), (0, 0), (2, 1)], 3),
    "batch": ((3, 2, 2, 2), [(1, 1), (0, 0), (0, 0), (0, 0)], 0),
}


@pytest.mark.parametrize("mode", [REFLECT, SYMMETRIC], ids=["reflect", "symmetric"])
@pytest.mark.parametrize("form", sorted(DROPPED))
def test_velas_stream_of_depth_or_batch_padding_copies_the_input_to_offset_0_only(form, mode):
    """Why our compiler leaves these forms to TFLite Micro though Vela 5.2 takes them: the
    stream Vela 5.2 writes copies the input to depth (or batch) offset 0 of the output
    (OFM_BASE0 not moved past the padding before it) and writes nothing else (the stream
    writes exactly the input's bytes), so the padded channels or batches keep whatever the
    arena held. The legacy core of the same Vela keeps the operator on the CPU."""
    shape, pads, axis = DROPPED[form]
    model = _model(shape, pads, mode)
    x = np.random.RandomState(2).randint(-128, 128, shape).astype(np.int8)
    (want,) = tflm_oracle(model, [x])
    graph, got, stats = _run(model, x)
    assert graph.cpu_operators == []
    got = got.reshape(want.shape)
    assert np.array_equal(np.take(got, range(shape[axis]), axis=axis), x)
    assert stats.bytes_written[SCRATCH] == x.nbytes
    assert not np.array_equal(got, want)
    legacy, got, _ = _run(model, x, options=["--debug-force-legacy-core"])
    assert legacy.cpu_operators == ["MIRROR_PAD (operator 0)"]
    assert np.array_equal(got.reshape(want.shape), want)
