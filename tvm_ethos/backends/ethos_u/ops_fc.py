"""FULLY_CONNECTED as the NPU runs it: a 1x1 convolution over the input read as rows of the
weights' depth, whatever the input's shape. The rows lie in one feature-map row when they fit
the NPU's width (65535); more rows are folded into a height x width plane of the same bytes
(rows = height * width, each at most 65535), so a batch beyond the width limit still takes one
operation, as Vela takes it."""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:   # the backend's checks import this module without the stream generator
    from tvm_ethos.backends.ethos_u.npu_ops import FmSlot

#: the NPU's largest feature-map height or width
MAX_EXTENT = 65535


def row_plane(rows: int) -> tuple[int, int] | None:
    """(height, width) of ``rows`` rows in one feature map: ``(1, rows)`` when they fit one
    row, else the lowest height that divides ``rows`` into rows of at most ``MAX_EXTENT``;
    None when there is none (a prime number of rows above the limit)."""
    if rows <= MAX_EXTENT:
        return 1, rows
    for h in range(-(-rows // MAX_EXTENT), MAX_EXTENT + 1):
        if rows % h == 0:
            return h, rows // h
    return None


def rows_of(q) -> int:
    """How many rows of the weights' depth FULLY_CONNECTED ``q`` reads."""
    return int(np.prod(q.in_shapes[0])) // int(q.weights.shape[1])


def fc_views(q, ifm: FmSlot, ofm: FmSlot) -> tuple[FmSlot, FmSlot]:
    """The IFM and OFM as the NPU's 1x1 convolution reads and writes them (the same bytes)."""
    plane = row_plane(rows_of(q))
    if plane is None:   # the checks (ethos_u CHECKS' row view) refuse it first
        raise ValueError(f"{rows_of(q)} rows fold into no feature map")
    h, w = plane
    return (dataclasses.replace(ifm, shape=(h, w, int(q.weights.shape[1]))),
            dataclasses.replace(ofm, shape=(h, w, int(q.weights.shape[0]))))
