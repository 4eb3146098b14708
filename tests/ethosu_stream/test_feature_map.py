"""Feature-map addressing: NHWC and NHCWB16, strides and the four tiles."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ethosu_stream import Memory
from ethosu_stream.feature_map import FeatureMap


def _fm(h, w, c, layout16, tiles=None):
    if layout16:
        sx, sc, sy = 16, 16 * w, w * ((c + 15) // 16) * 16
    else:
        sx, sc, sy = c, 1, w * c
    size = h * sy
    h0, h1, w0, bases = tiles or (h, h, w, (0, 0, 0, 0))
    return FeatureMap(1, bases, h0, h1, w0, sx, sy, sc, layout16, np.dtype(np.int8), 0), size


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 40), st.booleans())
def test_every_element_has_its_own_byte_and_round_trips(h, w, c, layout16):
    fm, size = _fm(h, w, c, layout16)
    addr = fm.grid(h, w, c)
    assert len(np.unique(addr)) == addr.size and addr.min() >= 0 and addr.max() < size
    data = np.random.RandomState(h * 100 + w * 10 + c).randint(-128, 128, (h, w, c)).astype(np.int8)
    mem = Memory({1: size})
    mem.write(1, addr, data)
    assert np.array_equal(mem.read(1, addr, np.int8), data)


def test_nhcwb16_places_channel_bricks_apart():
    fm, _ = _fm(2, 3, 20, True)
    # (y, x, c): x steps 16 bytes, channel 16 starts the second brick (width * 16 bytes on)
    assert fm.addresses(0, 1, 0) == 16
    assert fm.addresses(0, 0, 16) == 3 * 16
    assert fm.addresses(1, 0, 0) == 3 * 32


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(2, 6), st.data())
def test_tiles_split_the_map_by_width0_and_heights(h, w, data):
    w0 = data.draw(st.integers(1, w - 1))
    h0 = data.draw(st.integers(1, h - 1))
    h1 = data.draw(st.integers(1, h - 1))
    bases = (0, 1000, 2000, 3000)
    fm, _ = _fm(h, w, 4, False, (h0, h1, w0, bases))
    for y in range(h):
        for x in range(w):
            right = x >= w0
            lower = y >= (h1 if right else h0)
            t = int(right) + 2 * int(lower)
            yy = y - ((h1 if right else h0) if lower else 0)
            xx = x - (w0 if right else 0)
            assert fm.addresses(y, x, 2) == bases[t] + yy * w * 4 + xx * 4 + 2


@st.composite
def _any_map(draw):
    """Any feature map over a small region: tiles, NHWC or NHCWB16, int8/int16/int32, and
    strides drawn freely, negative ones too (so boxes may run backwards from their bases,
    below the region's start, or overlap themselves or each other's tiles)."""
    h, w, c = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 35))
    dtype = np.dtype(draw(st.sampled_from([np.int8, np.int16, np.int32])))
    layout16 = draw(st.booleans())
    strides = [draw(st.integers(-700, 700)) for _ in range(3)]
    bases = tuple(draw(st.integers(0, 3000)) for _ in range(4))
    h0, h1, w0 = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 6))
    fm = FeatureMap(1, bases, h0, h1, w0, strides[0], strides[1], strides[2], layout16, dtype, 0)
    return fm, (h, w, c)


@settings(max_examples=300, deadline=None)
@given(_any_map(), st.integers(0, 2**31 - 1), st.booleans())
def test_box_access_is_the_element_access(fm_box, seed, dry):
    """The strided-view box reads and writes (what operations use) move the same bytes, and
    count and check the same, as element-wise reads and writes at ``grid`` addresses; a dry
    box access counts and checks the same and moves nothing."""
    from ethosu_stream import StreamError

    fm, (h, w, c) = fm_box
    rs = np.random.RandomState(seed)
    size = 20000
    start = rs.randint(0, 256, size).astype(np.uint8)
    info = np.iinfo(fm.dtype)
    values = rs.randint(info.min, info.max, (h, w, c), dtype=np.int64).astype(fm.dtype)
    by_element, by_box = Memory({1: start}), Memory({1: start})
    by_box.dry = dry

    def attempt(f):
        try:
            return f()
        except StreamError as exc:
            return str(exc)

    got = attempt(lambda: by_box.read_box(fm, h, w, c, "the IFM"))
    want = attempt(lambda: by_element.read(1, fm.grid(h, w, c), fm.dtype, "the IFM"))
    if isinstance(want, str) or dry:
        assert got == want if isinstance(want, str) else got is None
    else:
        assert np.array_equal(got, want) and got.dtype == np.int64
    got = attempt(lambda: by_box.write_box(fm, None if dry else values, (h, w, c), "the OFM"))
    want = attempt(lambda: by_element.write(1, fm.grid(h, w, c), values, "the OFM"))
    assert got == want
    assert by_box.access == by_element.access
    if dry:
        assert np.array_equal(by_box.regions[1], start)
    else:
        assert np.array_equal(by_box.regions[1], by_element.regions[1])


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 20), st.booleans(), st.booleans())
def test_negative_strides_write_the_box_backwards_from_its_base(h, w, c, flip_y, flip_x):
    """A negative row or column stride (Vela's mirrored copies) lays rows or columns out
    backwards from the base: reading and writing the box move the mirror image of a plain
    NHWC box, and touch exactly its bytes (the span reaches below the base)."""
    sy, sx = (-1 if flip_y else 1) * w * c, (-1 if flip_x else 1) * c
    base = (h - 1) * w * c * flip_y + (w - 1) * c * flip_x
    fm = FeatureMap(1, (base, 0, 0, 0), h, h, w, sx, sy, 1, False, np.dtype(np.int8), 0)
    box = np.random.RandomState(h * 100 + w * 10 + c).randint(-128, 128, (h, w, c))
    mirrored = box[::-1 if flip_y else 1, ::-1 if flip_x else 1].astype(np.int8)
    read = Memory({1: mirrored.view(np.uint8).ravel()})
    assert np.array_equal(read.read_box(fm, h, w, c, "the IFM"), box)
    written = Memory({1: h * w * c})
    written.write_box(fm, box.astype(np.int8), (h, w, c), "the OFM")
    assert np.array_equal(written.regions[1].view(np.int8).reshape(h, w, c), mirrored)
    for mem in (read, written):
        assert mem.access[1].high_water == h * w * c
