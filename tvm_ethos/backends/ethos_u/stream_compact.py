"""Feature-map registers an operation does not read keep the value the previous operation
wrote.

Vela's register command stream generator writes a register only when its value changes
within one call. A feature map's tile registers (heights, width, the four bases) describe
up to four tiles, but a box that does not wrap its buffer reads only tile 0: the other
tiles' bases, tile 1's height, and tile 0's height or width beyond the box are never read;
nor is the row stride of a box one row high, or the column stride of one a column wide.
Left at fixed values (0, the box's extent, its buffer's strides) they change at every
stripe of a cascade, whose operations alternate between layers; taken from the previous
operation that wrote the same feature map's registers (IFM, IFM2 or OFM), they are not
written again.

Which tiles a box reaches follows the addressing rule of Vela and of the functional model
(``ethosu_stream.feature_map.FeatureMap.addresses``): columns at or past ``width_0`` are
tile 1 (tile 3 from row ``height_1``), the others below ``height_0`` tile 2.

A tile size that must be written takes a value the operations after it accept too, where
one exists: a box that does not wrap needs only ``height_0`` (``width_0``, tile 1's
``height_1``) at least its own height (width), so the largest such need over the run of
operations up to the next one that needs another exact value is written once for the run
(:func:`stretched`), rather than each box's own height at each operation that needs more
than the one before it.
"""
from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import NamedTuple

#: the feature-map attributes of an NpuOperation, one register set each
ROLES = ("ifm", "ifm2", "ofm")


class Tiles(NamedTuple):
    """The tile registers of one feature map as the stream holds them."""

    height_0: int
    height_1: int
    width_0: int
    addresses: tuple[int, int, int, int]


class Need(NamedTuple):
    """What one operation accepts in a tile-size register: at least ``least``, and exactly
    ``exact`` where that is not None (a register the box does not read: ``least`` 0)."""

    least: int
    exact: int | None = None

    def accepts(self, value: int) -> bool:
        return value >= self.least and (self.exact is None or value == self.exact)


def needs(own: Tiles, h: int, w: int) -> tuple[Need, Need, Need]:
    """What an ``h`` x ``w`` box whose own tile registers are ``own`` accepts in ``height_0``,
    ``height_1`` and ``width_0``: a size the box reaches past is exact, one it stays within
    at least the box's extent, tile 1's height anything where tile 1 is not reached."""
    height_1 = _size_need(own.height_1, h) if own.width_0 < w else _ANY
    return _size_need(own.height_0, h), height_1, _size_need(own.width_0, w)


_ANY = Need(0)


def _size_need(value: int, extent: int) -> Need:
    """A tile size ``value`` for a box of ``extent``: at least the extent where the box
    stays within it, else exactly ``value``."""
    return Need(extent) if value >= extent else Need(value, value)


def stretched(ahead: Iterable[Need]) -> int | None:
    """The value accepted by the longest run of ``ahead`` (the operations from the one that
    must write the register, in stream order), the least such; None where the first
    accepts anything."""
    least, exact = 0, None
    for need in ahead:
        lo = max(least, need.least)
        if need.exact is not None and exact is not None and need.exact != exact:
            break
        ex = exact if need.exact is None else need.exact
        if ex is not None and ex < lo:
            break
        least, exact = lo, ex
    if exact is not None:
        return exact
    return least or None


class Strides(NamedTuple):
    """The row, column and channel strides of one feature map, in bytes."""

    height: int
    width: int
    depth: int


def reuse_unread_registers(api, ops: list) -> None:
    """Give each operation's feature maps, in stream order, the previous values of the tile
    and stride registers their boxes do not read (``ops`` is changed in place; feature maps
    are copied before they are changed, as operations may share them). A feature map that
    leaves its strides to Vela's generator is taken with the strides the generator gives it,
    so operations of every kind (a SOFTMAX's, a pool's) keep the values before too."""
    # lazy: Vela is the 'vela' extra, loaded with the first stream (stream_base.vela_api)
    from ethosu.vela.register_command_stream_util import get_strides

    tiles_held: dict[str, Tiles] = {}
    strides_held: dict[str, Strides] = {}
    # per role, in stream order: the feature maps whose registers are compacted
    boxes: dict[str, list] = {role: [] for role in ROLES}
    for op in ops:
        for role in ROLES:
            fm = getattr(op, role, None)
            if fm is not None and fm.tiles is not None and fm.shape is not None:
                boxes[role].append(fm)
    at = dict.fromkeys(ROLES, 0)     # per role, the next of its boxes
    for op in ops:
        for role in ROLES:
            fm = getattr(op, role, None)
            if fm is None or fm.tiles is None or fm.shape is None:
                continue
            h, w = fm.shape.height, fm.shape.width
            s = get_strides(fm)
            k = at[role]
            at[role] += 1
            own = _own(fm)
            prev = tiles_held.get(role)
            own_strides = Strides(s.height, s.width, s.depth)
            tiles = tiles_held[role] = unread_from(own, prev, h, w,
                                                   _written(own, prev, boxes[role], k))
            strides = strides_held[role] = unread_strides(own_strides, strides_held.get(role),
                                                          h, w, _stride_multiple(api, fm))
            if tiles != own or strides != own_strides:
                fm = copy.copy(fm)
                fm.tiles = api.NpuTileBox(tiles.height_0, tiles.height_1, tiles.width_0,
                                          list(tiles.addresses))
                fm.strides = api.NpuShape3D(*strides)
                setattr(op, role, fm)


def _fits(own: int, held: int, extent: int) -> bool:
    """Whether a tile size ``held`` does for a box of ``extent`` whose own size is ``own``."""
    return held == own or (own >= extent and held >= extent)


def _own(fm) -> Tiles:
    t = fm.tiles
    return Tiles(t.height_0, t.height_1, t.width_0, tuple(t.addresses))


def _needs(fm) -> tuple[Need, Need, Need]:
    return needs(_own(fm), fm.shape.height, fm.shape.width)


def _written(own: Tiles, prev: Tiles | None, boxes: list, k: int) -> Tiles:
    """The tile sizes feature map ``k`` of ``boxes`` (one role's, in stream order), whose
    registers are ``own``, writes where it must write them: each the value the longest run
    of the boxes from it accepts. Only a register the value held (``prev``) does not do for
    is looked ahead for: the run then ends where the next box must write it again, so the
    runs looked over never overlap."""
    fm = boxes[k]
    h, w = fm.shape.height, fm.shape.width
    if prev is not None and _fits(own.height_0, prev.height_0, h) and \
            _fits(own.width_0, prev.width_0, w) and \
            (own.width_0 >= w or _fits(own.height_1, prev.height_1, h)):
        return own     # nothing to write: every size held does (``needs``, unallocated)
    need = needs(own, h, w)
    sizes = []
    for r in range(3):
        if prev is not None and need[r].accepts(prev[r]):
            sizes.append(prev[r])
            continue
        v = stretched(_needs(boxes[i])[r] for i in range(k, len(boxes)))
        sizes.append(own[r] if v is None else v)
    return Tiles(*sizes, own.addresses)


def _stride_multiple(api, fm) -> int:
    """What Vela's generator requires the row stride of ``fm`` to be a multiple of, read or
    not: 16 bytes in NHCWB16, else the element size (an int32 map after an int8 one cannot
    keep the int8 map's odd stride)."""
    if fm.layout == api.NpuLayout.NHCWB16:
        return 16
    return fm.data_type.size_in_bytes()


def unread_strides(own: Strides, prev: Strides | None, h: int, w: int,
                   multiple: int = 1) -> Strides:
    """``own`` strides for an ``h`` x ``w`` box, the row stride of a box one row high and the
    column stride of one a column wide taken from ``prev`` (None: nothing written yet) where
    it is a ``multiple`` of what the generator checks."""
    if prev is None:
        return own
    height = prev.height if h == 1 and prev.height % multiple == 0 else own.height
    width = prev.width if w == 1 and prev.width % multiple == 0 else own.width
    return Strides(height, width, own.depth)


def unread_from(own: Tiles, prev: Tiles | None, h: int, w: int,
                written: Tiles | None = None) -> Tiles:
    """``own``'s tile registers for an ``h`` x ``w`` box, those the box does not read taken
    from ``prev`` (the registers' current values; None: nothing written yet); a size that
    must change takes ``written``'s (default ``own``'s; any size the box accepts as
    ``needs`` says, e.g. :func:`stretched`'s)."""
    if written is None:
        written = own
    if prev is None:
        return written._replace(addresses=own.addresses)
    width_0 = prev.width_0 if own.width_0 >= w and prev.width_0 >= w else written.width_0
    height_0 = prev.height_0 if own.height_0 >= h and prev.height_0 >= h \
        else written.height_0
    right = width_0 < w                       # tile 1 reached
    if not right or (own.height_1 >= h and prev.height_1 >= h):
        height_1 = prev.height_1
    else:
        height_1 = written.height_1
    reached = (True, right, height_0 < h, right and height_1 < h)
    addresses = tuple(a if r else p for a, p, r in zip(own.addresses, prev.addresses, reached))
    return Tiles(height_0, height_1, width_0, addresses)
