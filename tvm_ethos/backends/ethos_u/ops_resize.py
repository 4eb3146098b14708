"""RESIZE_BILINEAR by a factor of 2, 4 or 8 on the Ethos-U, as Vela lowers it
(``convert_resize_to_upscale_and_average_pool``).

Without align_corners or half-pixel centres, output row ``y = f * i + r`` of TFLite's integer
kernel is ``(f - r) / f`` of input row ``i`` and ``r / f`` of row ``i + 1`` (the last row
repeated past the end), and the same for columns: which is the average of the ``f x f`` box
at (y, x) of the input enlarged ``f`` times by repetition, the box cut at the bottom and right
edges. So the IFM is enlarged by 2x nearest-neighbour copies into working memory until it is
``f`` times larger, and one average pool of ``f x f`` with ``f - 1`` rows and columns of
padding at the bottom and right (where a planner's stripe reaches them) makes the output.
Over padding the NPU divides by the real elements and rounds half away from zero, as TFLite
does, and elsewhere ``npu_ops.avg_pool_scale`` rounds 1 / f**2 the same way; every
operation reads and writes the codes without rescaling, since TFLite interpolates the codes
themselves (a rounding after removing the zero point would differ at ties). Vela lets the
pool do the last 2x enlargement itself (the NPU's IFM upscaling); here the enlargement goes
all the way so that a planner's stripe may start on any row or column.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, avg_pool_scale
from tvm_ethos.backends.ethos_u.ops_movement import copy_op, dense, feature_map_of
from tvm_ethos.backends.ethos_u.stream_base import SCRATCH_REGION, vela_api

#: the upscale factors one average pool of at most 8x8 finishes
FACTORS = (2, 4, 8)


def bilinear_factor(q) -> int | None:
    """The factor of a RESIZE_BILINEAR this module streams (the same for height and width,
    no align_corners, no half-pixel centres, an input larger than 1x1: that one is a copy,
    ``ops_movement``), else None."""
    if q.kind != Op.RESIZE_BILINEAR or q.attrs.get("align_corners", False) \
            or q.attrs.get("half_pixel_centers", False):
        return None
    (_, ih, iw, _), (_, oh, ow, _) = q.in_shapes[0], q.out_shape
    if (ih, iw) == (1, 1):
        return None
    if oh % ih or ow % iw or oh // ih != ow // iw or oh // ih not in FACTORS:
        return None
    return oh // ih


def _enlargements(q) -> list[tuple[int, int, int]]:
    """The (height, width, depth) of each 2x nearest enlargement, the last ``f`` times the
    input."""
    _, ih, iw, c = (int(v) for v in q.in_shapes[0])
    f = bilinear_factor(q)
    return [(ih << k, iw << k, c) for k in range(1, int(np.log2(f)) + 1)]


def work_bytes(q) -> int:
    """Working memory of the enlargements."""
    if bilinear_factor(q) is None:
        return 0
    e = np.dtype(q.out_dtype).itemsize
    return sum(int(np.prod(s)) * e for s in _enlargements(q))


def bilinear_ops(q, src: FmSlot, ofm: FmSlot, work: int | None, block: Callable,
                 box=None) -> list:
    """The output rows and columns ``box`` (a planner's stripe; None: the whole output): the
    input box they read enlarged into the working memory at ``work``, then the average pool
    of that box into ``ofm``."""
    # lazy: Vela's scaling record, as npu_ops.pool_op takes it (the vela extra)
    from ethosu.vela.operation import ExplicitScaling

    f = bilinear_factor(q)
    oh, ow, c = ofm.shape
    (y0, y1), (x0, x1) = box if box is not None else ((0, oh), (0, ow))
    if work is None:  # pragma: no cover - both stream paths give it
        raise AssertionError(f"{q.tflite_name}: no working memory")
    # the enlarged rows and columns the stripe's windows read, and the input ones they repeat
    ey, ex = min(y1 + f - 1, oh), min(x1 + f - 1, ow)
    (a0, a1), (b0, b1) = (y0 // f, -(-ey // f)), (x0 // f, -(-ex // f))
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
    npu.ifm = feature_map_of(at.at(y0, x0, 0, (ey - y0, ex - x0, c)))
    npu.ofm = feature_map_of(dense(ofm).at(y0, x0, 0, (y1 - y0, x1 - x0, c)))
    npu.kernel = api.NpuKernel(f, f)
    bottom, right = y1 + f - 1 - ey, x1 + f - 1 - ex
    npu.padding = api.NpuPadding(0, 0, bottom, right)
    # the identity over padding (the NPU divides by the real elements), else 1 / f**2
    # rounding half away from zero (f**2 is a power of two)
    scale, shift = avg_pool_scale(f * f, padded=bool(bottom or right))
    npu.rescale = ExplicitScaling(False, [shift], [scale])
    npu.activation = None
    npu.rounding_mode = api.NpuRoundingMode.TFL
    npu.block_config = block(npu)
    npu.name = q.tflite_name.lower()
    ops.append(npu)
    return ops
