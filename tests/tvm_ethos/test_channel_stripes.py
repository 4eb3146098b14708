"""Cascaded stripes over a range of output channels (issue 28, ``stream_channels``): a Part
whose next reads only some channels (a channel SLICE) computes only those, into a buffer of
fewer channels than its tensor (a ring over channels); a CONCATENATION stripe that reads none
of an input's channels asks that input for an empty range. The stream used to refuse both
("the plan computes channels [a, b) of a stripe") and the operators fell back to TFLite
Micro. Each model here runs wholly on the Ethos-U, output bytes equal to TFLite Micro's
(``mixed_run.check``: the default budget, the least memory, and ``ethos-u,llvm``), its
stream touching exactly the planned peak."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mixed_models import Kind, Recipe, Step, build
from mixed_run import check
from test_solitary_movement import compiled_on_the_npu

from tvm_ethos.backends.ethos_u.ops_movement import Copy, View
from tvm_ethos.backends.ethos_u.stream_channels import channel_pieces, clip_channels

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

_SHAPE = (1, 8, 8, 8)


def _behind_slice(steps: tuple[Step, ...], channels: tuple[int, int] = (2, 5),
                  seed: int = 1) -> bytes:
    """``steps`` (each keeping an 8x8 map) then a SLICE of ``channels`` and a TANH."""
    c0, c1 = channels
    return build(Recipe(_SHAPE, seed, steps + (
        Step(Kind.SLICE, ((0, 0, 0, c0), (1, 8, 8, c1 - c0))), Step(Kind.TANH))))


def _on_the_npu(model: bytes, llvm: bool) -> None:
    out = check(model, llvm=llvm)
    assert out.placed == {"ethos-u": sum(out.placed.values())} and not out.host_reasons, \
        out.host_reasons
    compiled_on_the_npu(model)


_CONV = Step(Kind.CONV, (8, 3, 1, "SAME", None))
_DEPTHWISE = Step(Kind.DEPTHWISE, (8, 3, 1, "SAME", None))


def test_convolution_behind_a_channel_slice_computes_only_its_channels():
    """The convolution computes channels [2, 5) into a 3-channel ring: two operations (the
    ring wraps after channel 2), the weights of those output channels."""
    _on_the_npu(_behind_slice((_CONV,)), llvm=False)


@pytest.mark.slow
def test_depthwise_chain_reads_its_channels_from_a_channel_ring():
    """Both depthwise convolutions compute channels [2, 5); the second reads them from the
    first's 3-channel ring (each operation's IFM and OFM cut where either wraps)."""
    _on_the_npu(_behind_slice((_DEPTHWISE, Step(Kind.DEPTHWISE, (8, 3, 1, "SAME", "relu")))),
                llvm=False)


@pytest.mark.slow
@pytest.mark.parametrize("steps", [
    (_CONV,),
    (_DEPTHWISE,),
    (Step(Kind.LOGISTIC),),
    (Step(Kind.MUL, (None,), 0), Step(Kind.LOGISTIC)),
    (Step(Kind.AVG_POOL, (3, 1, "SAME")), Step(Kind.LOGISTIC)),
    (Step(Kind.MAX_POOL, (3, 1, "SAME")), _DEPTHWISE),
    (_CONV, Step(Kind.LEAKY_RELU, (0.2,))),
], ids=["conv", "depthwise", "logistic", "mul-logistic", "avgpool-logistic", "maxpool-depthwise",
        "conv-leaky-relu"])
def test_operators_behind_a_channel_slice(steps):
    _on_the_npu(_behind_slice(steps, (1, 7)), llvm=True)


def test_concatenation_stripe_reading_none_of_an_input():
    """The sweep's model (campaign 3): the SLICE reads channels [0, 3) of a CONCATENATION
    of a MUL and a 1x1 convolution, so the plan asks the convolution for channels [0, 0)
    (no work) and the CONCATENATION, in a ring, for a box of channels."""
    model = build(Recipe((1, 7, 6, 3), 1548, (
        Step(Kind.LEAKY_RELU, (0.2,)), Step(Kind.MUL, (None,), 0),
        Step(Kind.CONCAT, (None,), 0), Step(Kind.SLICE, ((0, 6, 2, 0), (1, 1, 1, 3))),
        Step(Kind.MUL, (None,), 4))))
    _on_the_npu(model, llvm=False)


@pytest.mark.slow
@pytest.mark.parametrize("first, box", [
    (Step(Kind.LOGISTIC), ((0, 4, 1, 2), (1, 1, 1, 2))),
    (Step(Kind.CONV, (3, 1, 1, "SAME", None)), ((0, 2, 1, 1), (1, 3, 4, 3))),
], ids=["second-input", "across-inputs"])
def test_concatenation_stripe_of_some_channels(first, box):
    """A SLICE of a CONCATENATION's rows, columns and channels: the CONCATENATION (its
    buffers whole) copies only the box's channels of each input it reaches, and the
    convolution computes only the channels of it the box reads."""
    model = build(Recipe((1, 6, 6, 2), 7, (first, Step(Kind.CONCAT, (None,), 0),
                                           Step(Kind.SLICE, box), Step(Kind.TANH))))
    _on_the_npu(model, llvm=True)


@st.composite
def _slices(draw):
    first = draw(st.sampled_from([_CONV, _DEPTHWISE, Step(Kind.LOGISTIC),
                                  Step(Kind.MUL, (None,), 0),
                                  Step(Kind.AVG_POOL, (3, 1, "SAME"))]))
    second = draw(st.sampled_from([(), (_DEPTHWISE,), (Step(Kind.TANH),)]))
    c0 = draw(st.integers(0, 7))
    return (first,) + second, (c0, draw(st.integers(c0 + 1, 8))), draw(st.integers(0, 999))


@pytest.mark.slow
@given(_slices())
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
def test_channel_slices_equal_tflite_micro(case):
    steps, channels, seed = case
    out = check(_behind_slice(steps, channels, seed), llvm=seed % 3 == 0)
    assert not out.host_reasons, out.host_reasons


@given(st.integers(0, 40), st.integers(0, 40),
       st.lists(st.integers(1, 12), min_size=1, max_size=3))
@settings(max_examples=50)
def test_channel_pieces_cover_the_range_without_wrapping_a_buffer(c0, n, depths):
    pieces = channel_pieces(c0, c0 + n, depths)
    assert [c for p in pieces for c in range(p.first, p.first + p.count)] == \
        list(range(c0, c0 + n))
    for p in pieces:
        assert p.count > 0
        assert all(p.first % d + p.count <= d for d in depths), (p, depths)
    # as few as the wraps allow: every cut is where some buffer wraps
    assert all(any(p.first % d == 0 for d in depths) for p in pieces[1:])


@given(st.integers(0, 12), st.integers(1, 8), st.integers(0, 20), st.integers(0, 20))
@settings(max_examples=50)
def test_clip_channels_writes_exactly_the_range(at, n, lo, size):
    src = View(1, 1000, (2, 3, n), 3 * 64, 64, "int8")
    cp = Copy(src, (1, 2, at))
    got = clip_channels(cp, (lo, lo + size))
    want = set(range(at, at + n)) & set(range(lo, lo + size))
    if not want:
        assert got is None
        return
    c = got.at[2]
    assert set(range(c, c + got.src.shape[2])) == want
    assert got.at[:2] == (1, 2) and got.src.shape[:2] == (2, 3)
    assert got.src.offset == 1000 + (c - at)   # the same source elements


@pytest.mark.slow
@pytest.mark.parametrize("shape, first, reshape, box", [
    ((1, 8, 8, 8), Step(Kind.LOGISTIC), (1, 64, 1, 8), ((0, 34, 0, 0), (1, 19, 1, 8))),
    ((1, 8, 8, 8), Step(Kind.CONV, (8, 1, 1, "SAME", None)), (1, 1, 64, 8),
     ((0, 0, 5, 0), (1, 1, 19, 8))),
    ((1, 6, 4, 8), Step(Kind.LOGISTIC), (1, 4, 6, 8), ((0, 1, 0, 0), (1, 2, 6, 8))),
], ids=["rows-ring-out", "columns-ring-out", "rows-ring-in"])
def test_reshape_striped_into_a_box(shape, first, reshape, box):
    """A RESHAPE to another shape whose next reads a box of it (a SLICE of its rows): the
    box is one run of pixels, copied from the same pixels of its input, each buffer a
    ring of rows (or, one row tall, of columns) cut where it wraps."""
    model = build(Recipe(shape, 3, (first, Step(Kind.RESHAPE, (reshape,)), Step(Kind.SLICE, box),
                                    Step(Kind.TANH))))
    _on_the_npu(model, llvm=True)
