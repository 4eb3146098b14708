"""Compact streams: a box's tiles that it does not reach get base 0, so a striped plan's
operations share those registers and the emitter does not write them again; the functional
model computes exactly what it did with every base written."""

import copy
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ethosu_stream.feature_map import FeatureMap
from ethosu_stream.registers import decode_stream
from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from tests.helpers.models import model_path
from tvm_ethos.backends.ethos_u import stream_cascade, stream_payload
from tvm_ethos.backends.ethos_u.stream_base import vela_api
from tvm_ethos.backends.ethos_u.stream_cascade import _Storage, feature_map
from tvm_ethos.backends.ethos_u.stream_compact import (
    ROLES,
    Strides,
    Tiles,
    reuse_unread_registers,
    unread_from,
    unread_strides,
)
from tvm_ethos.demo_person import image_input

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

ACCEL = "ethos-u55-128"


@given(bh=st.integers(1, 7), bw=st.integers(1, 7), c=st.integers(1, 5),
       y0=st.integers(0, 40), x0=st.integers(0, 40), base=st.integers(0, 4096),
       data=st.data())
@settings(max_examples=80, deadline=None)
def test_a_box_sets_only_the_tile_bases_it_reaches(bh, bw, c, y0, x0, base, data):
    """The tiles the functional model reads a box through are addressed at the ring's slots
    (brute force), and every tile it does not read has base 0."""
    h, w = data.draw(st.integers(1, bh)), data.draw(st.integers(1, bw))
    fm = feature_map(vela_api(), _Storage(base, (bh, bw, c), (64, 64, c), "int8"),
                     (y0, y0 + h), (x0, x0 + w), 1, None, 0)
    t = fm.tiles
    model = FeatureMap(1, tuple(t.addresses), t.height_0, t.height_1, t.width_0,
                       fm.strides.width, fm.strides.height, fm.strides.depth, False,
                       np.dtype(np.int8), 0)
    ys, xs, cs = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    want = base + (((y0 + ys) % bh) * bw + (x0 + xs) % bw) * c + cs
    np.testing.assert_array_equal(model.addresses(ys, xs, cs), want)
    reached = {0} | {tile for tile, (ys_, ye, xs_, xe) in enumerate(
        [(0, 1, 0, 1), (0, t.height_1, t.width_0, w), (t.height_0, h, 0, t.width_0),
         (t.height_1, h, t.width_0, w)]) if ye > ys_ and xe > xs_}
    views = {v.lo for v in model.tile_views(h, w, c)}
    assert views == {t.addresses[k] for k in reached}
    assert all(t.addresses[k] == 0 for k in range(4) if k not in reached)


def _fm(t: Tiles, s: Strides = Strides(1000, 4, 1)) -> FeatureMap:
    return FeatureMap(1, t.addresses, t.height_0, t.height_1, t.width_0, s.width, s.height,
                      s.depth, False, np.dtype(np.int8), 0)


_tiles = st.builds(Tiles, st.integers(1, 12), st.integers(0, 12), st.integers(1, 12),
                   st.tuples(*[st.integers(0, 1 << 20)] * 4))


@given(own=_tiles, prev=_tiles, h=st.integers(1, 12), w=st.integers(1, 12))
@settings(max_examples=300, deadline=None)
def test_tile_registers_a_box_does_not_read_keep_their_value(own, prev, h, w):
    """Taking the unread tile registers from the previous operation addresses the box as
    before (brute force over its elements), and a box within tile 0 of both changes only
    the base it reads."""
    got = unread_from(own, prev, h, w)
    ys, xs, cs = np.meshgrid(np.arange(h), np.arange(w), np.arange(4), indexing="ij")
    np.testing.assert_array_equal(_fm(got).addresses(ys, xs, cs),
                                  _fm(own).addresses(ys, xs, cs))
    if min(own.height_0, prev.height_0) >= h and min(own.width_0, prev.width_0) >= w:
        assert got == prev._replace(addresses=(own.addresses[0],) + prev.addresses[1:])
    assert unread_from(own, None, h, w) == own


_strides = st.builds(Strides, st.integers(1, 4096), st.integers(1, 64), st.just(1))


@given(own=_strides, prev=_strides, h=st.integers(1, 3), w=st.integers(1, 3),
       c=st.integers(1, 4))
@settings(max_examples=200, deadline=None)
def test_strides_a_box_does_not_step_keep_their_value(own, prev, h, w, c):
    """A box one row high takes the row stride held, one a column wide the column stride:
    its elements' addresses stay the same (brute force); a taller and wider box keeps its
    own strides."""
    tiles = Tiles(h, 0, w, (4096, 0, 0, 0))
    got = unread_strides(own, prev, h, w)
    ys, xs, cs = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
    np.testing.assert_array_equal(_fm(tiles, got).addresses(ys, xs, cs),
                                  _fm(tiles, own).addresses(ys, xs, cs))
    assert got.height == (prev.height if h == 1 else own.height)
    assert got.width == (prev.width if w == 1 else own.width)
    assert unread_strides(own, None, h, w) == own


def _registers(op) -> list:
    """The tile and stride registers the generator writes for ``op``'s feature maps."""
    from ethosu.vela.register_command_stream_util import get_strides

    out = []
    for role in ROLES:
        fm = getattr(op, role, None)
        if fm is not None:
            t = fm.tiles
            out.append((role, t.height_0, t.height_1, t.width_0, tuple(t.addresses),
                        tuple(get_strides(fm))))
    return out


_box = st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 4),  # buffer h, w, c
                 st.integers(0, 12), st.integers(0, 12), st.integers(0, 1 << 12),  # y0, x0, base
                 st.integers(1, 6), st.integers(1, 6), st.booleans())  # box h, w; strides left


@given(ops=st.lists(st.tuples(_box, _box, st.none() | _box), min_size=1, max_size=5))
@settings(max_examples=150, deadline=None)
def test_strides_left_to_the_generator_are_compacted_as_given_ones(ops):
    """A feature map whose strides Vela's generator fills in (a SOFTMAX's or a pool's) keeps
    the registers its box does not read exactly as the same feature map with those strides
    written out: the operation list leaving them out and the one giving them end with the
    same register values."""
    from ethosu.vela.register_command_stream_util import get_strides

    api = vela_api()
    left, given_ = [], []
    for boxes in ops:
        op_left, op_given = SimpleNamespace(), SimpleNamespace()
        for role, box in zip(ROLES, boxes):
            if box is None:
                continue
            fm = _box_feature_map(api, box)
            written = copy.copy(fm)
            if box[-1]:     # left to the generator
                fm.strides = None
                written.strides = get_strides(fm)
            setattr(op_left, role, fm)
            setattr(op_given, role, written)
        left.append(op_left)
        given_.append(op_given)
    reuse_unread_registers(api, left)
    reuse_unread_registers(api, given_)
    assert [_registers(op) for op in left] == [_registers(op) for op in given_]


def _box_feature_map(api, box):
    """The feature map of a drawn box (``_box``) of a 64x64 tensor in its ring buffer."""
    bh, bw, c, y0, x0, base, h, w, _ = box
    h, w = min(h, bh), min(w, bw)
    return feature_map(api, _Storage(base, (bh, bw, c), (64, 64, c), "int8"),
                       (y0, y0 + h), (x0, x0 + w), 1, None, 0)


def _changes(values: list) -> int:
    return sum(a != b for a, b in zip(values, values[1:])) + bool(values)


@given(ops=st.lists(st.tuples(_box, _box, st.none() | _box), min_size=1, max_size=7))
@settings(max_examples=200, deadline=None)
def test_a_tile_size_written_is_one_the_boxes_after_it_accept(ops):
    """Tile sizes chosen ahead (``stretched``): every box still addresses each of its
    elements where its own registers do (brute force), and no tile-size register changes
    more often than when each write takes the box's own value (the previous rule)."""
    api = vela_api()
    compact, boxes = [], []
    for op_boxes in ops:
        op = SimpleNamespace()
        for role, box in zip(ROLES, op_boxes):
            if box is None:
                continue
            fm = _box_feature_map(api, box)
            setattr(op, role, fm)
            boxes.append((len(compact), role, fm))
        compact.append(op)
    reuse_unread_registers(api, compact)
    before: dict = {}   # the previous rule, per role: the registers held
    sizes = {role: ([], []) for role in ROLES}   # (chosen ahead, previous rule) per role
    for k, role, own_fm in boxes:
        fm = getattr(compact[k], role)
        t, o = fm.tiles, own_fm.tiles
        h, w, c = fm.shape.height, fm.shape.width, fm.shape.depth
        own = Tiles(o.height_0, o.height_1, o.width_0, tuple(o.addresses))
        got = Tiles(t.height_0, t.height_1, t.width_0, tuple(t.addresses))
        s = Strides(fm.strides.height, fm.strides.width, fm.strides.depth)
        ys, xs, cs = np.meshgrid(np.arange(h), np.arange(w), np.arange(c), indexing="ij")
        np.testing.assert_array_equal(_fm(got, s).addresses(ys, xs, cs),
                                      _fm(own, s).addresses(ys, xs, cs))
        before[role] = unread_from(own, before.get(role), h, w)
        sizes[role][0].append(got[:3])
        sizes[role][1].append(before[role][:3])
    for ahead, previous in sizes.values():
        for r in range(3):
            assert _changes([v[r] for v in ahead]) <= _changes([v[r] for v in previous])


def _every_base(a0, a1, a2, a3, wraps_rows, wraps_cols):
    """The bases as they were written before compaction: all four, reached or not."""
    return [a0, a1, a2, a3]


def _words(tflite: bytes) -> int:
    return sum(len(op.words) for op in read_ethos_u_ops(tflite))


@pytest.fixture(scope="module")
def pair():
    """person_detect at its smallest plan (striped, rings), compiled with compact tile
    registers and with every base written and no register taken from the previous
    operation."""
    import tvm_ethos

    data = model_path("tflite-micro/person_detect").read_bytes()
    compact = tvm_ethos.compile_tflite(data, "ethos-u", accelerator_config=ACCEL,
                                       budget="smallest")
    mp = pytest.MonkeyPatch()
    mp.setattr(stream_cascade, "tile_addresses", _every_base)
    mp.setattr(stream_payload, "reuse_unread_registers", lambda api, ops: None)
    try:
        full = tvm_ethos.compile_tflite(data, "ethos-u", accelerator_config=ACCEL,
                                        budget="smallest")
    finally:
        mp.undo()
    return compact, full


def test_compact_streams_compute_what_full_ones_do(pair, models_dir):
    compact, full = pair
    spec = compact.inputs[0]
    rng = np.random.default_rng(7)
    inputs = [image_input(str(models_dir / "tflite-micro" / f), spec.shape)
              for f in ("person.bmp", "no_person.bmp")]
    inputs += [rng.integers(-128, 128, spec.shape).astype(np.int8) for _ in range(2)]
    for x in inputs:
        got, want = compact.run(x), full.run(x)
        np.testing.assert_array_equal(got[0], want[0])
    assert [int(v) for v in compact.run(inputs[0])[0].ravel()] == [-113, 113]  # README


def test_compact_streams_are_smaller_and_write_no_value_twice(pair):
    compact, full = pair
    assert _words(compact.tflite) < _words(full.tflite)
    for op in read_ethos_u_ops(compact.tflite):
        held = {}
        for cmd in decode_stream(op.words):
            if cmd.name.startswith("NPU_SET_"):
                assert held.get(cmd.name) != (cmd.param, cmd.payload), cmd
                held[cmd.name] = (cmd.param, cmd.payload)


def test_the_summary_counts_the_stream_bytes_the_file_holds(pair, models_dir):
    """Vela's summary shows the command streams' bytes beside the flash they are part of:
    the driver payloads of the written file's ethos-u operators."""
    from tvm_ethos.reports.vela_summary import summarize
    from tvm_ethos.vela_options import read_system

    compact, _ = pair
    source = (models_dir / "tflite-micro" / "person_detect.tflite").read_bytes()
    summary, _ = summarize(compact, "person_detect", source, read_system(ACCEL))
    # the stream words, and the driver payload's few header words per operator
    n_ops = len(read_ethos_u_ops(compact.tflite))
    assert 0 <= summary.stream_bytes - 4 * _words(compact.tflite) <= 64 * n_ops
    assert 0 < summary.stream_bytes < summary.flash_used
    assert summary.csv_row()["tvm_ethos_command_stream_bytes"] == summary.stream_bytes
    kib = f"{summary.stream_bytes / 1024:.2f} KiB"
    assert any(line.strip().startswith("of it command streams") and line.endswith(kib)
               for line in summary.text().splitlines())
