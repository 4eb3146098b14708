"""Brute force of the region of an input an output box reads, for propagator tests.

Every element of the input is tagged with its flat index (every other input with -1), the
reference operator (numpy) runs on the tags, and the tags the output box holds are the input
elements it reads: their bounding box per axis is the region a propagator must give.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

Box = tuple[tuple[int, int], ...]   # per axis [lo, hi)


def read_region(reference: Callable[..., np.ndarray], in_shapes: Sequence[tuple[int, ...]],
                k: int, out_box: Box) -> Box | None:
    """The bounding box of the elements of input ``k`` that ``out_box`` of
    ``reference(*inputs)`` holds; None when it holds none."""
    xs = [np.full(s, -1, np.int64) for s in in_shapes]
    xs[k] = np.arange(math.prod(in_shapes[k]), dtype=np.int64).reshape(in_shapes[k])
    y = np.asarray(reference(*xs))
    held = y[tuple(slice(lo, hi) for lo, hi in out_box)]
    tags = held[held >= 0]
    if tags.size == 0:
        return None
    coords = np.unravel_index(tags, in_shapes[k])
    return tuple((int(c.min()), int(c.max()) + 1) for c in coords)


def propagated_region(prop, out_box: Box, in_shape: tuple[int, ...]) -> Box | None:
    """The region a propagator maps ``out_box`` to, clipped to the input (None if empty):
    what the Part's stripe reads of the tensor, reads past its edges (padding) aside."""
    offset = prop.apply_offset(tuple(lo for lo, _ in out_box))
    shape = prop.apply_shape(tuple(hi - lo for lo, hi in out_box))
    out = []
    for o, s, n in zip(offset, shape, in_shape):
        lo, hi = max(math.floor(o), 0), min(math.ceil(o + s), n)
        if hi <= lo:
            return None
        out.append((lo, hi))
    return tuple(out)


def boxes(shape: tuple[int, ...], rs: np.random.RandomState, n: int) -> list[Box]:
    """``n`` random boxes of a tensor of ``shape``, the whole tensor first."""
    out = [tuple((0, s) for s in shape)]
    for _ in range(n - 1):
        box = []
        for s in shape:
            lo = int(rs.randint(0, s))
            box.append((lo, int(rs.randint(lo + 1, s + 1))))
        out.append(tuple(box))
    return out
