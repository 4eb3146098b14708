"""MIRROR_PAD as mirrored bands: each padded band of an axis one copy written backwards
through a negative stride, as Vela 5.2 writes the bands of height and width.

The input is copied into the middle of the output; then, one padded axis at a time, each of
its two bands (before and after) is a copy of the output's neighbouring indices of that axis
(of the input, for the first axis) written with the axis's stride negated, so the indices
land mirrored. A band spans, on every axis already mirrored, the whole output, and on every
other axis the middle, so the corners of several padded axes come with the later axes'
bands. Each copy is a box of up to three dimensions (rows, columns and a dense depth); axes
that are contiguous in both the source and the destination are merged into one, and where
more than three remain the copy is repeated over the outer ones. The order of the axes is
the one of fewest copies.

Boxes are in bytes from the start of their tensor, so the module needs neither TVM nor Vela:
``ops_movement`` turns each into an NPU copy.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import NamedTuple

#: the largest dimension of a feature map the NPU's registers hold
MAX_DIM = 65536


class Box(NamedTuple):
    """A (rows, columns, depth) box of elements ``offset`` bytes into its tensor, rows and
    columns ``strides`` bytes apart (either may be negative: the box runs backwards), the
    depth dense."""

    offset: int
    shape: tuple[int, int, int]
    strides: tuple[int, int]


class BandCopy(NamedTuple):
    """One copy of a MIRROR_PAD: ``src`` of the input (``from_input``) or of the output,
    written to ``dst`` of the output."""

    from_input: bool
    src: Box
    dst: Box


class _Axis(NamedTuple):
    length: int
    dst: int  # stride in the destination, bytes
    src: int  # stride in the source, bytes


def _strides(dims: Sequence[int], esize: int) -> list[int]:
    out = [esize] * len(dims)
    for j in range(len(dims) - 2, -1, -1):
        out[j] = out[j + 1] * dims[j + 1]
    return out


def _merged(axes: list[_Axis]) -> list[_Axis]:
    """``axes`` (outermost first) without those of one index, each run of axes contiguous in
    both tensors merged into one (no longer than :data:`MAX_DIM`)."""
    out: list[_Axis] = []
    for a in axes:
        if a.length == 1:
            continue
        if out:
            p = out[-1]
            n = p.length * a.length
            if p.dst == a.length * a.dst and p.src == a.length * a.src and n <= MAX_DIM:
                out[-1] = _Axis(n, a.dst, a.src)
                continue
        out.append(a)
    return out


def _box_copies(axes: list[_Axis], dst0: int, src0: int, esize: int
               ) -> list[tuple[Box, Box]]:
    """(source, destination) boxes that copy the strided block ``axes`` from byte ``src0`` to
    byte ``dst0``: the last merged axis is the depth where it is dense in both, the two
    longest others the rows and columns, and one copy per index of the rest."""
    merged = _merged(axes)
    if merged and merged[-1].dst == esize and merged[-1].src == esize:
        depth = merged.pop()
    else:
        depth = _Axis(1, esize, esize)
    keep = sorted(sorted(range(len(merged)), key=lambda k: -merged[k].length)[:2])
    rows, cols = ([_Axis(1, 0, 0)] * 2 + [merged[k] for k in keep])[-2:]
    looped = [merged[k] for k in range(len(merged)) if k not in keep]
    out = []
    for index in itertools.product(*(range(a.length) for a in looped)):
        d = dst0 + sum(i * a.dst for i, a in zip(index, looped))
        s = src0 + sum(i * a.src for i, a in zip(index, looped))
        shape = (rows.length, cols.length, depth.length)
        out.append((Box(s, shape, (rows.src, cols.src)), Box(d, shape, (rows.dst, cols.dst))))
    return out


def _in_order(order: Sequence[int], dims: Sequence[int], pads: Sequence[tuple[int, int]],
              edge: int, esize: int) -> list[BandCopy]:
    """The copies that mirror the axes in ``order``."""
    outs = [n + b + a for n, (b, a) in zip(dims, pads)]
    so, si = _strides(outs, esize), _strides(dims, esize)
    ranges = [(b, n) for n, (b, _) in zip(dims, pads)]  # (first, count) written per axis
    middle = [_Axis(n, so[j], si[j]) for j, n in enumerate(dims)]
    at = sum(b * so[j] for j, (b, _) in enumerate(pads))
    copies = [BandCopy(True, s, d) for s, d in _box_copies(middle, at, 0, esize)]
    for k, a in enumerate(order):
        (before, after), n = pads[a], dims[a]
        # (band, last destination index, first source index in the output) of each side
        sides = [(before, before - 1, before + edge), (after, before + n + after - 1,
                                                        before + n - after - edge)]
        for p, last, first in sides:
            if not p:
                continue
            axes, dst0, src0 = [], 0, 0
            for j, (start, count) in enumerate(ranges):
                if k == 0:  # every other axis is still the middle: read from the input
                    src_stride, src_start = si[j], (first - before if j == a else 0)
                else:
                    src_stride, src_start = so[j], (first if j == a else start)
                if j == a:
                    axes.append(_Axis(p, -so[j], src_stride))
                    dst0 += last * so[j]
                else:
                    axes.append(_Axis(count, so[j], src_stride))
                    dst0 += start * so[j]
                src0 += src_start * src_stride
            copies += [BandCopy(k == 0, s, d) for s, d in _box_copies(axes, dst0, src0, esize)]
        ranges[a] = (0, outs[a])
    return copies


def mirror_pad_copies(dims: Sequence[int], pads: Sequence[tuple[int, int]], symmetric: bool,
                      esize: int) -> list[BandCopy]:
    """The copies of a MIRROR_PAD of a dense tensor of ``dims`` by ``pads`` ((before, after)
    per axis; REFLECT: each at most the dimension less one, SYMMETRIC: at most the
    dimension) with elements of ``esize`` bytes: the middle, then the bands of each padded
    axis, in the order of axes that takes the fewest copies (the first such order)."""
    dims, pads = [int(d) for d in dims], [(int(b), int(a)) for b, a in pads]
    edge = 0 if symmetric else 1
    padded = [j for j, (b, a) in enumerate(pads) if b or a]
    best: list[BandCopy] | None = None
    for order in itertools.permutations(padded):
        copies = _in_order(order, dims, pads, edge, esize)
        if best is None or len(copies) < len(best):
            best = copies
    return best if best is not None else []
