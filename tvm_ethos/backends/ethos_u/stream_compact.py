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
"""
from __future__ import annotations

import copy
from typing import NamedTuple

#: the feature-map attributes of an NpuOperation, one register set each
ROLES = ("ifm", "ifm2", "ofm")


class Tiles(NamedTuple):
    """The tile registers of one feature map as the stream holds them."""

    height_0: int
    height_1: int
    width_0: int
    addresses: tuple[int, int, int, int]


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
    for op in ops:
        for role in ROLES:
            fm = getattr(op, role, None)
            if fm is None or fm.tiles is None or fm.shape is None:
                continue
            h, w = fm.shape.height, fm.shape.width
            t, s = fm.tiles, get_strides(fm)
            own = Tiles(t.height_0, t.height_1, t.width_0, tuple(t.addresses))
            own_strides = Strides(s.height, s.width, s.depth)
            tiles = tiles_held[role] = unread_from(own, tiles_held.get(role), h, w)
            strides = strides_held[role] = unread_strides(own_strides, strides_held.get(role),
                                                          h, w, _stride_multiple(api, fm))
            if tiles != own or strides != own_strides:
                fm = copy.copy(fm)
                fm.tiles = api.NpuTileBox(tiles.height_0, tiles.height_1, tiles.width_0,
                                          list(tiles.addresses))
                fm.strides = api.NpuShape3D(*strides)
                setattr(op, role, fm)


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


def unread_from(own: Tiles, prev: Tiles | None, h: int, w: int) -> Tiles:
    """``own``'s tile registers for an ``h`` x ``w`` box, those the box does not read taken
    from ``prev`` (the registers' current values; None: nothing written yet)."""
    if prev is None:
        return own
    width_0 = prev.width_0 if own.width_0 >= w and prev.width_0 >= w else own.width_0
    height_0 = prev.height_0 if own.height_0 >= h and prev.height_0 >= h else own.height_0
    right = width_0 < w                       # tile 1 reached
    if not right or (own.height_1 >= h and prev.height_1 >= h):
        height_1 = prev.height_1
    else:
        height_1 = own.height_1
    reached = (True, right, height_0 < h, right and height_1 < h)
    addresses = tuple(a if r else p for a, p, r in zip(own.addresses, prev.addresses, reached))
    return Tiles(height_0, height_1, width_0, addresses)
