"""TFLite's MIRROR_PAD through the importer: ``nn.pad`` on the codes in reflect mode
(REFLECT) or symmetric mode (SYMMETRIC, the edge repeated), on the Ethos-U as copies of input
rows and columns, the compiled file's outputs equal to TFLite Micro's on the source; depth
padding stays a TFLite operator."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import _opts

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def mirror_pad_model(shape, pads, mode=tflite.MirrorPadMode.REFLECT, q=(0.05, 3)) -> bytes:
    """One int8 MIRROR_PAD of ``shape`` by the constant ``pads`` ((before, after) per axis)."""
    out = [d + a + b for d, (a, b) in zip(shape, pads)]
    x = tb.T(list(shape), "int8", scale=q[0], zp=q[1])
    p = tb.T([len(shape), 2], "int32", data=np.asarray(pads, np.int32))
    y = tb.T(out, "int8", scale=q[0], zp=q[1])
    otype, ofn = _opts("MirrorPadOptions", Mode=mode)
    return tb.serialize([x, y, p], [(tb.BO.MIRROR_PAD, otype, ofn, [0, 2], [1])], [0], [1])


def _check(data: bytes, target: str = "ethos-u", seed: int = 0):
    """The compiled model's outputs on two random inputs, equal to TFLite Micro's."""
    return compiled_matches(data, target, seed)


@st.composite
def _padded(draw, edge: int = 1):
    """A shape and paddings of its height and width, each at most the dimension less
    ``edge`` (REFLECT: 1, SYMMETRIC: 0)."""
    h, w, c = draw(st.integers(1, 7)), draw(st.integers(1, 7)), draw(st.integers(1, 6))
    pad = lambda n: (draw(st.integers(0, n - edge)), draw(st.integers(0, n - edge)))  # noqa: E731
    return (1, h, w, c), [(0, 0), pad(h), pad(w), (0, 0)]


@settings(max_examples=8, deadline=None)
@given(case=_padded(), q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_reflect_padding_of_height_and_width_is_on_the_npu_exactly(case, q):
    shape, pads = case
    cm = _check(mirror_pad_model(shape, pads, q=q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@settings(max_examples=8, deadline=None)
@given(case=_padded(edge=0), q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_symmetric_padding_of_height_and_width_is_on_the_npu_exactly(case, q):
    """SYMMETRIC repeats the edge, so it pads up to the whole dimension (REFLECT one less)."""
    shape, pads = case
    cm = _check(mirror_pad_model(shape, pads, mode=tflite.MirrorPadMode.SYMMETRIC, q=q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_symmetric_depth_padding_stays_a_tflite_operator_naming_the_rule():
    """Relax has no symmetric padding TVM lowers, so only the height and width of NHWC are
    taken (the integer kernels'); the tflite-micro host keeps the rest, a host target cannot
    run it."""
    data = mirror_pad_model((1, 3, 4, 2), [(0, 0), (1, 2), (2, 1), (1, 0)],
                            mode=tflite.MirrorPadMode.SYMMETRIC)
    cm = _check(data)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "SYMMETRIC mode of more than the height and width" in placed.why, placed.why
    with pytest.raises(tvm_ethos.errors.TvmEthosError, match="operator 0 .MIRROR_PAD. cannot"):
        tvm_ethos.load_model(data)


def test_depth_padding_stays_a_tflite_operator_exactly():
    cm = _check(mirror_pad_model((1, 3, 4, 5), [(0, 0), (1, 1), (0, 0), (2, 1)]))
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"


@pytest.mark.parametrize("mode, pads", [
    (tflite.MirrorPadMode.REFLECT, [(0, 0), (3, 1), (2, 4), (0, 0)]),
    (tflite.MirrorPadMode.SYMMETRIC, [(0, 0), (4, 1), (2, 5), (0, 0)]),
], ids=["reflect", "symmetric"])
def test_the_llvm_host_runs_it_exactly(mode, pads):
    cm = _check(mirror_pad_model((1, 4, 5, 3), pads, mode=mode), "llvm", seed=1)
    assert cm.partition_summary == {"llvm": 1}
