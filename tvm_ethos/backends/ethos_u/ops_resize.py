"""RESIZE_BILINEAR by a factor of 2, 4 or 8 on the Ethos-U, as average pools over the input
enlarged by repetition (Vela's ``convert_resize_to_upscale_and_average_pool``).

TFLite's integer kernel weights two neighbouring input rows (and columns) by fractions that,
for these factors, are multiples of ``1 / f``; each output element is then the average of a
box of the input enlarged ``E`` times by repetition:

* no align_corners, no half-pixel centres: output row ``y = f * i + r`` is ``(f - r) / f`` of
  row ``i`` and ``r / f`` of row ``i + 1`` (the last row repeated past the end): the ``f x f``
  box at (y, x) of the ``f``-times enlargement, cut at the bottom and right edges;
* align_corners (an output of ``(n - 1) * f + 1``): the same box, which never leaves the
  enlargement;
* half-pixel centres (2x only): row ``2 i`` is ``1/4`` of row ``i - 1`` and ``3/4`` of row
  ``i``, row ``2 i + 1`` ``3/4`` of row ``i`` and ``1/4`` of row ``i + 1`` (the edge rows
  repeated): the ``4 x 4`` box at (2 y - 1, 2 x - 1) of the 4-times enlargement, cut at the
  edges, i.e. a pool of stride 2 with one row and column of padding on every side.

So the IFM is enlarged by 2x nearest-neighbour copies into working memory and one average
pool (:class:`Recipe`) makes the output. Over padding the NPU divides by the real elements
and rounds half away from zero, as TFLite does (the cut boxes weigh the same rows as TFLite's
clamped neighbours), and elsewhere ``npu_ops.avg_pool_scale`` rounds 1 / K**2 the same way;
every operation reads and writes the codes without rescaling, since TFLite interpolates the
codes themselves (a rounding after removing the zero point would differ at ties). Vela lets
the pool do the last 2x enlargement itself (the NPU's IFM upscaling) and lowers half-pixel
centres to depthwise convolutions; here the enlargement goes all the way so that a planner's
stripe may start on any row or column.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, avg_pool_scale
from tvm_ethos.backends.ethos_u.ops_movement import copy_op, dense, feature_map_of
from tvm_ethos.backends.ethos_u.stream_base import SCRATCH_REGION, vela_api

#: the upscale factors one average pool of at most 8x8 finishes
FACTORS = (2, 4, 8)


class Recipe(NamedTuple):
    """A bilinear upscale as one average pool: of ``kernel x kernel`` and ``stride`` over the
    input enlarged ``enlarge`` times, its first window ``before`` rows and columns before the
    enlargement's first."""

    enlarge: int
    kernel: int
    stride: int
    before: int


def _factor(n: int, m: int, align_corners: bool) -> int | None:
    """The factor from ``n`` to ``m`` elements of one axis, if it is one of :data:`FACTORS`."""
    if align_corners:
        if n < 2 or (m - 1) % (n - 1):
            return None
        f = (m - 1) // (n - 1)
    else:
        if m % n:
            return None
        f = m // n
    return f if f in FACTORS else None


def recipe(q) -> Recipe | None:
    """How this module streams a RESIZE_BILINEAR (see the module docstring): one factor for
    height and width (or an axis of one element kept), half-pixel centres only for 2x; None for
    any other, and for a 1x1 input, which is a copy (``ops_movement``)."""
    if q.kind != Op.RESIZE_BILINEAR:
        return None
    (_, ih, iw, _), (_, oh, ow, _) = q.in_shapes[0], q.out_shape
    ac, hp = q.attrs.get("align_corners", False), q.attrs.get("half_pixel_centers", False)
    if (ih, iw) == (1, 1) or (ac and hp):
        return None
    fy, fx = _factor(ih, oh, ac), _factor(iw, ow, ac)
    # an axis of one element that stays one (Vela's factor 1) reads its one row (column)
    # through any box: it takes the other axis's factor
    fy, fx = (fx if ih == oh == 1 else fy), (fy if iw == ow == 1 else fx)
    if fy is None or fy != fx:
        return None
    if hp:
        return Recipe(4, 4, 2, 1) if fy == 2 else None
    return Recipe(fy, fy, 1, 0)


def bilinear_factor(q) -> int | None:
    """The enlargement of a RESIZE_BILINEAR this module streams, else None."""
    r = recipe(q)
    return None if r is None else r.enlarge


def _enlargements(q) -> list[tuple[int, int, int]]:
    """The (height, width, depth) of each 2x nearest enlargement, the last the recipe's."""
    _, ih, iw, c = (int(v) for v in q.in_shapes[0])
    e = recipe(q).enlarge
    return [(ih << k, iw << k, c) for k in range(1, int(np.log2(e)) + 1)]


def work_bytes(q) -> int:
    """Working memory of the enlargements."""
    if recipe(q) is None:
        return 0
    e = np.dtype(q.out_dtype).itemsize
    return sum(int(np.prod(s)) * e for s in _enlargements(q))


def _span(r: Recipe, o0: int, o1: int, n: int) -> tuple[int, int, int, int]:
    """(first, end, padding before, padding after) of the enlarged rows (of ``n``) that the
    output rows [o0, o1) read."""
    lo, hi = r.stride * o0 - r.before, r.stride * (o1 - 1) - r.before + r.kernel
    first, end = max(0, lo), min(n, hi)
    return first, end, first - lo, hi - end


def bilinear_ops(q, src: FmSlot, ofm: FmSlot, work: int | None, block: Callable,
                 box=None) -> list:
    """The output rows and columns ``box`` (a planner's stripe; None: the whole output): the
    input box they read enlarged into the working memory at ``work``, then the average pool
    of that box into ``ofm``."""
    # lazy: Vela's scaling record, as npu_ops.pool_op takes it (the vela extra)
    from ethosu.vela.operation import ExplicitScaling

    r = recipe(q)
    oh, ow, c = ofm.shape
    _, ih, iw, _ = (int(v) for v in q.in_shapes[0])
    (y0, y1), (x0, x1) = box if box is not None else ((0, oh), (0, ow))
    if work is None:  # pragma: no cover - both stream paths give it
        raise AssertionError(f"{q.tflite_name}: no working memory")
    # the enlarged rows and columns the stripe's windows read, and the input ones they repeat
    u0, u1, top, bottom = _span(r, y0, y1, ih * r.enlarge)
    v0, v1, left, right = _span(r, x0, x1, iw * r.enlarge)
    (a0, a1), (b0, b1) = (u0 // r.enlarge, -(-u1 // r.enlarge)), (v0 // r.enlarge,
                                                                  -(-v1 // r.enlarge))
    esize = np.dtype(ofm.dtype).itemsize
    ops, at, offset = [], dense(src), work
    for k, shape in enumerate(_enlargements(q)):
        nxt = dense(FmSlot(SCRATCH_REGION, offset, shape, ofm.dtype, None, 0))
        (r0, r1), (c0, c1) = (a0 << k, a1 << k), (b0 << k, b1 << k)
        ops.append(copy_op(at.at(r0, c0, 0, (r1 - r0, c1 - c0, c)),
                           nxt.at(2 * r0, 2 * c0, 0, (2 * (r1 - r0), 2 * (c1 - c0), c)),
                           q.tflite_name, block, upscale=True))
        offset += int(np.prod(shape)) * esize
        at = nxt
    api = vela_api()
    npu = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
    npu.ifm = feature_map_of(at.at(u0, v0, 0, (u1 - u0, v1 - v0, c)))
    npu.ofm = feature_map_of(dense(ofm).at(y0, x0, 0, (y1 - y0, x1 - x0, c)))
    npu.kernel = api.NpuKernel(r.kernel, r.kernel, r.stride, r.stride)
    npu.padding = api.NpuPadding(top, left, bottom, right)
    # the identity over padding (the NPU divides by the real elements), else 1 / K**2
    # rounding half away from zero (K**2 is a power of two)
    scale, shift = avg_pool_scale(r.kernel ** 2, padded=any((top, left, bottom, right)))
    npu.rescale = ExplicitScaling(False, [shift], [scale])
    npu.activation = None
    npu.rounding_mode = api.NpuRoundingMode.TFL
    npu.block_config = block(npu)
    npu.name = q.tflite_name.lower()
    ops.append(npu)
    return ops
