"""SUM, REDUCE_MAX and REDUCE_MIN over the depth on the NPU, height, width or both reduced
with it or kept (``patterns.REDUCE_AXES``), in Vela 5.2's forms.

SUM is one convolution with all-one weights whose kernel spans the reduced height and width
(1x1 over the depth alone) into one output channel: the NPU subtracts the IFM zero point and
sums ``x - zp`` over the kernel and every input channel, then rescales by TFLite's
``s_in / s_out`` multiplier, TFLite's only rounding (``te_ops.lower_reduce_over_depth``).
It reads only the windows of its output, so it stripes as any convolution.

REDUCE_MAX is a max pool over each pixel's channels: the dense NHWC input read as one row of
``C`` codes per pixel (IFM ``pixels x C x 1``, kernel ``1 x C``), as Vela's ReduceMax, in
pieces of at most 65536 pixels (the IFM height register). Reducing height or width too, a
second max pool whose single window spans them runs over the per-pixel maxima, kept in
working memory. TFLite's int8 REDUCE_MAX picks a code and requires the output quantized as
the input, so comparing codes is its kernel.

REDUCE_MIN is ``min(x) = ~max(~x)`` (bitwise NOT reverses the order of the int8 codes), as
``ops_reduce`` does over height and width: a 1x1 pool looks every code up in the NOT table
into working memory, then the max pools above run over it, the last one looking its result
up in the same table (clamped to a fused activation's codes). Vela subtracts from -1 instead;
either NOT is exact. int16 codes (no table of 65536 entries) are NOT-ed by that SUB
(``ops_reduce.not16_op``): into working memory before the pools, and from the last pool's
result, held in working memory, into the output with the fused clamp.

The max pools read whole tensors, so these two are emitted over whole tensors only
(``stream_ops``: the planner computes their output in one stripe).
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ethos_arch.ops import Op
from ethos_arch.pool_bands import MAX_POOL_AREA, MAX_POOL_ROWS, one_pool, pool_bands
from planner.parts import DEPTH_REDUCTIONS, reduce_over_depth_work_bytes
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, activation, feature_map, pool_op
from tvm_ethos.backends.ethos_u.ops_reduce import looked_up, negated, not16_op, not_table
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    SCRATCH_REGION,
    UnsupportedOperatorError,
    vela_api,
)
from tvm_ethos.compute.quant import f32, quantize_multiplier

#: the most pixels one max pool over the channels reads: one IFM row per pixel
MAX_PIXELS = 65536
#: one convolution's kernel: at most 64 rows and 4096 taps (Vela's dilated kernel limits)
MAX_CONV_ROWS, MAX_CONV_TAPS = 64, 4096
#: the sum of a convolution's absolute weights Vela allows (its weight encoder's limit)
MAX_WEIGHT_SUM = 127 * 65536
#: the most int16 codes one SUM adds: every sum of ``x - zp`` within TFLite Micro's int32
MAX_INT16_SUM = (2**31 - 1) // 65535


class DepthReduction(NamedTuple):
    """One reduction over the depth of an ``h x w x c`` input: its reduced spatial extents
    (``kh``, ``kw``: the whole height or width where reduced, else 1)."""

    h: int
    w: int
    c: int
    kh: int
    kw: int

    @property
    def out_hw(self) -> tuple[int, int]:
        """The output's (height, width): 1 along a reduced axis."""
        return self.h - self.kh + 1, self.w - self.kw + 1

    @property
    def spatial(self) -> bool:
        """Whether height or width is reduced with the depth (a second pool for MAX/MIN)."""
        return self.kh * self.kw > 1


def over_depth(q) -> bool:
    """Whether ``q`` is a SUM, REDUCE_MAX or REDUCE_MIN over the depth of a 4-D tensor."""
    return q.kind in DEPTH_REDUCTIONS and 3 in tuple(q.attrs.get("axis") or ()) and \
        len(q.in_shapes[0]) == 4


def reduction(q) -> DepthReduction:
    """The :class:`DepthReduction` of ``q`` (:func:`over_depth`)."""
    axes = tuple(q.attrs.get("axis") or ())
    _, h, w, c = (int(s) for s in q.in_shapes[0])
    return DepthReduction(h, w, c, h if 1 in axes else 1, w if 2 in axes else 1)


def _sum_scale(q) -> tuple[int, int]:
    """(multiplier, NPU shift) of TFLite's int8 SUM: ``s_in / s_out`` alone."""
    m, s = quantize_multiplier(f32(q.in_q[0][0]) / f32(q.out_q[0]))
    return int(m), 31 - int(s)


def refusals(q) -> list[str]:
    """What the NPU's forms do not take of ``q`` (a :func:`over_depth` reduction, of batch 1
    and every axis within 65535, as the Ethos-U's checks require of every operator: a max
    pool's kernel then spans any depth), each naming the limit: SUM within one convolution's
    kernel and weights; REDUCE_MAX / REDUCE_MIN within one max pool's window over the reduced
    height and width."""
    r = reduction(q)
    if q.kind == Op.REDUCE_SUM:
        out = []
        if r.kh > MAX_CONV_ROWS or r.kh * r.kw > MAX_CONV_TAPS:
            out.append(f"SUM over {r.kh}x{r.kw}x{r.c}; one convolution's kernel takes at most "
                       f"{MAX_CONV_ROWS} rows and {MAX_CONV_TAPS} taps")
        if r.kh * r.kw * r.c > MAX_WEIGHT_SUM:
            out.append(f"SUM over {r.kh * r.kw * r.c} elements; one convolution sums at most "
                       f"{MAX_WEIGHT_SUM}")
        if q.in_dtypes[0] == "int16" and r.kh * r.kw * r.c > MAX_INT16_SUM:
            out.append(f"an int16 SUM over {r.kh * r.kw * r.c} elements, whose sum may leave "
                       f"32 bits (TFLite Micro's int32 sum); the NPU adds at most "
                       f"{MAX_INT16_SUM} int16 codes")
        return out
    if not one_pool(r.kh, r.kw) and pool_bands(r.kh, r.kw).count > MAX_POOL_ROWS:
        return [f"{q.tflite_name} over {r.kh}x{r.kw} pixels; one max pool takes at most "
                f"{MAX_POOL_ROWS} rows and {MAX_POOL_AREA} elements, and the "
                f"{pool_bands(r.kh, r.kw).count} bands of rows it is cut into more than "
                f"{MAX_POOL_ROWS}"]
    return []


# --- SUM: one convolution
def sum_op(q, operands: list[FmSlot], ofm: FmSlot):
    """SUM's convolution from ``operands[0]`` (the input, or a stripe's window of it) into
    its output's box: all-one weights over the reduced height and width and every channel."""
    api = vela_api()
    ifm = operands[0]
    r = reduction(q)
    h, w, _ = ifm.shape
    out = dataclasses.replace(ofm, shape=(h - r.kh + 1, w - r.kw + 1, 1))
    npu = api.NpuConv2DOperation()
    npu.block_traversal = api.NpuBlockTraversal.DEPTH_FIRST
    npu.ifm, npu.ofm = feature_map(ifm), feature_map(out)
    npu.activation = activation(q, out)
    npu.rounding_mode = api.NpuRoundingMode.TFL
    npu.kernel = api.NpuKernel(r.kw, r.kh)
    npu.padding = api.NpuPadding(0, 0, 0, 0)
    return npu


def sum_constants(q, channels: int) -> tuple:
    """(all-one OHWI weights, the one output channel's (multiplier, NPU shift)) of SUM's
    convolution."""
    r = reduction(q)
    m, s = _sum_scale(q)
    if not 0 <= s <= 63:
        raise UnsupportedOperatorError(q.tflite_name, f"a scale shift of {s}")
    return np.ones((1, r.kh, r.kw, r.c), np.int16), [(m, s)]


def sum_window(q) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int],
                           tuple[int, int, int, int]]:
    """SUM's window: (kernel, strides, dilation, padding), the kernel the reduced height and
    width (``stream_ops.Geometry``)."""
    r = reduction(q)
    return (r.kh, r.kw), (1, 1), (1, 1), (0, 0, 0, 0)


# --- REDUCE_MAX / REDUCE_MIN: max pools over whole tensors
def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def work_bytes(q) -> int:
    """The working memory of a REDUCE_MAX / REDUCE_MIN over the depth: REDUCE_MIN's NOT of
    its input, then, where height or width is reduced too, the per-pixel maxima (codes of
    the input's type), as the planner holds it (``planner.parts.
    reduce_over_depth_work_bytes``)."""
    return reduce_over_depth_work_bytes(q.kind, q.in_shapes[0], tuple(q.attrs["axis"]),
                                        q.in_dtypes[0])


def _max_pool(q, ifm: FmSlot, ofm: FmSlot, kernel: tuple[int, int]):
    """A max pool of ``q``'s codes from ``ifm`` into ``ofm``: one window of ``kernel``
    (height, width) per output element, no padding; its clamp is ``q``'s."""
    pool = dataclasses.replace(q, kind=Op.MAX_POOL2D, attrs={
        "pool_size": kernel, "strides": (1, 1), "padding": (0, 0, 0, 0)})
    return pool_op(pool, ifm, ofm)


def min_max_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The operations of one REDUCE_MAX / REDUCE_MIN over the depth, whole tensors (dense)
    from ``operands[0]`` into ``ofm``, its working memory at ``em.work``
    (:func:`work_bytes`)."""
    api = vela_api()
    if q.in_q[0] != q.out_q:
        raise UnsupportedOperatorError(q.tflite_name, "an output quantized unlike its input")
    r = reduction(q)
    oh, ow = r.out_hw
    # codes are what is compared: unit quantization, so no rescale and no zero point moves
    unit = {"scale": 1.0, "zero_point": 0}
    x = dataclasses.replace(operands[0], shape=(r.h, r.w, r.c), **unit)
    y = dataclasses.replace(ofm, shape=(oh, ow, 1), **unit)
    is_min = q.kind == Op.REDUCE_MIN
    size = np.dtype(x.dtype).itemsize
    # int16 has no NOT table (65536 codes): SUBs from -1 around the pools, the last pool's
    # result at the end of working memory
    wide = is_min and x.dtype == "int16"
    result = FmSlot(SCRATCH_REGION, em.work + work_bytes(q) - oh * ow * size, (oh, ow, 1),
                    x.dtype, 1.0, 0) if wide else y
    ops: list = []
    work = em.work
    if is_min:
        flipped = FmSlot(SCRATCH_REGION, work, (r.h, r.w, r.c), x.dtype, 1.0, 0)
        ops += negated(x, flipped, em)
        x, work = flipped, work + _aligned(r.h * r.w * r.c * size)
    # the per-pixel maxima: into the result, or into working memory for the second pool
    maxima = FmSlot(SCRATCH_REGION, work, (r.h, r.w, 1), x.dtype, 1.0, 0) if r.spatial \
        else result
    # the NOT and a fused clamp, as codes
    last = np.clip(not_table(x.dtype), q.act_min, q.act_max) if is_min and not wide else None
    pixels = r.h * r.w
    for start in range(0, pixels, MAX_PIXELS):
        n = min(MAX_PIXELS, pixels - start)
        src = dataclasses.replace(x, offset=x.offset + start * r.c * size, shape=(n, r.c, 1))
        dst = dataclasses.replace(maxima, offset=maxima.offset + start * size,
                                  shape=(n, 1, 1))
        pool = _max_pool(q, src, dst, (1, r.c))
        pool.name = q.kind.value
        if last is not None and not r.spatial:
            ops += looked_up(pool, last, em)
        else:
            if is_min:   # NOT-ed codes: no clamp before the last NOT
                pool.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
            ops.append(pool)
        pool.block_config = em.block(pool)
    if r.spatial and not one_pool(r.kh, r.kw):
        # per band of rows a max pool into working memory after the maxima, then one over
        # the bands' (planner.parts.reduce_over_depth_work_bytes)
        maxima, ops_bands = _banded(q, r, maxima, work + _aligned(r.h * r.w * size), em)
        ops += ops_bands
        r = r._replace(h=maxima.shape[0], kh=maxima.shape[0], kw=1, w=maxima.shape[1])
    if r.spatial:
        pool = _max_pool(q, maxima, result, (r.kh, r.kw))
        pool.name = q.kind.value
        if last is not None:
            ops += looked_up(pool, last, em)
        else:
            if wide:
                pool.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
            ops.append(pool)
        pool.block_config = em.block(pool)
    if wide:
        negate = not16_op(result, y, em)
        negate.activation = activation(q, y)   # a fused clamp, in codes
        ops.append(negate)
    return ops


def _banded(q, r: DepthReduction, maxima: FmSlot, at: int, em) -> tuple[FmSlot, list]:
    """The max pools of the bands of rows of the per-pixel ``maxima`` (``ethos_arch.
    pool_bands``), each into its row of the bands' maxima at ``at``: (those, the pools)."""
    api = vela_api()
    bands = pool_bands(r.kh, r.kw)
    _, ow = r.out_hw
    size = np.dtype(maxima.dtype).itemsize
    out = FmSlot(SCRATCH_REGION, at, (bands.count, ow, 1), maxima.dtype, 1.0, 0)
    ops = []
    for i in range(bands.count):
        first = i * bands.rows
        rows = min(bands.rows, r.kh - first)
        src = dataclasses.replace(maxima, offset=maxima.offset + first * r.w * size,
                                  shape=(rows, r.w, 1))
        dst = dataclasses.replace(out, offset=at + i * ow * size, shape=(1, ow, 1))
        pool = _max_pool(q, src, dst, (rows, r.kw))
        pool.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        pool.name = f"{q.kind.value}_band"
        pool.block_config = em.block(pool)
        ops.append(pool)
    return out, ops
