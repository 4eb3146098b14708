"""Ring phases (``ring_phase``): the rotation of a ring that leaves the fewest boxes wrapping
its end, and what a rotated ring addresses."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.backends.ethos_u.ring_phase import best_phase, wraps

pytest.importorskip("ethosu.vela")


def _slots_wrap(extent: int, phase: int, span: tuple[int, int]) -> bool:
    """Oracle: a box wraps where the slots of its consecutive rows do not run in order."""
    slots = [(r + phase) % extent for r in range(*span)]
    return any(b != a + 1 for a, b in zip(slots, slots[1:]))


@st.composite
def _ring_spans(draw):
    extent = draw(st.integers(1, 14))
    spans = []
    for _ in range(draw(st.integers(0, 8))):
        lo = draw(st.integers(0, 60))
        spans.append((lo, lo + draw(st.integers(1, extent))))
    return extent, spans


@given(case=_ring_spans())
@settings(max_examples=300, deadline=None)
def test_the_phase_taken_wraps_the_fewest_boxes(case):
    """Against the slots each row lands in: no phase wraps fewer of the boxes than the one
    taken, and none below it as few (phase 0 where no rotation helps)."""
    extent, spans = case
    count = [sum(_slots_wrap(extent, p, s) for s in spans) for p in range(extent)]
    assert [sum(wraps(extent, p, s) for s in spans) for p in range(extent)] == count
    p = best_phase(extent, spans)
    assert 0 <= p < extent
    assert count[p] == min(count) and count.index(min(count)) == p


@given(bh=st.integers(1, 6), bw=st.integers(1, 6), c=st.integers(1, 5),
       y0=st.integers(0, 40), x0=st.integers(0, 40), data=st.data())
@settings(max_examples=80, deadline=None)
def test_a_rotated_ring_addresses_row_plus_phase_mod_rows(bh, bw, c, y0, x0, data):
    """A box of a ring rotated by (py, px), wrapping or not, addresses element (y, x, ch) at
    slot ((y0 + y + py) % rows, (x0 + x + px) % cols) through its tiles (brute force)."""
    from ethosu_stream.feature_map import FeatureMap
    from tvm_ethos.backends.ethos_u.stream_base import vela_api
    from tvm_ethos.backends.ethos_u.stream_cascade import _Storage, feature_map

    h, w = data.draw(st.integers(1, bh)), data.draw(st.integers(1, bw))
    py, px = data.draw(st.integers(0, bh - 1)), data.draw(st.integers(0, bw - 1))
    base = 1000
    ring = _Storage(base, (bh, bw, c), (64, 64, c), "int8", phase=(py, px))
    fm = feature_map(vela_api(), ring, (y0, y0 + h), (x0, x0 + w), 1, None, 0)
    t = fm.tiles
    model = FeatureMap(1, tuple(t.addresses), t.height_0, t.height_1, t.width_0,
                       fm.strides.width, fm.strides.height, fm.strides.depth, False,
                       np.dtype(np.int8), 0)
    ys, xs, cs = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    want = base + (((y0 + ys + py) % bh) * bw + (x0 + xs + px) % bw) * c + cs
    np.testing.assert_array_equal(model.addresses(ys, xs, cs), want)
