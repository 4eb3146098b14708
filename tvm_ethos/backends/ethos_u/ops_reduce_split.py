"""SUM, MEAN, REDUCE_MAX and REDUCE_MIN over height and width (SUM: with the depth too) past
one NPU kernel, as chains of pools.

One depthwise convolution sums at most 64 rows and 4096 taps, one max pool takes at most 256
rows and 65536 elements (``ops_reduce``, ``npu_ops.mean_op``). Past those a reduction is cut
into bands of rows, each one pool, and the bands are combined:

* SUM and MEAN (int8, uint8, int16) are average pools whose scale is the reduction's own:
  the NPU sums ``x - zp`` over the window and applies one ``MultiplyByQuantizedMultiplier``
  of TFLite's multiplier (MEAN's with the element count folded in, ``npu_ops.mean_scales``;
  SUM's ``s_in / s_out``), the arithmetic of the one-kernel convolution, so one pool is the
  whole reduction up to 256 rows and 65536 elements. Past that each band's pool writes its
  exact int32 sum (the identity scale) to working memory and int32 ADDs add them, the last
  applying the multiplier into the output: the integer sum is the same whichever way it is
  cut, so the one rounding is TFLite's. (Vela 5.2 sums with depthwise convolutions into
  int32, ADDs and a final 32-bit MUL.) A SUM over the depth too (past one convolution's 64
  rows, 4096 taps or 127 x 65536 summed elements, ``ops_reduce_depth``) keeps each
  channel's int32 sum and ends with one REDUCE_SUM over the depth carrying the multiplier.
* REDUCE_MAX is a max pool per band into working memory, then one max pool over the bands'
  maxima: the maximum of maxima is the maximum. REDUCE_MIN is REDUCE_MAX between two
  lookups of the bitwise-NOT table (``ops_reduce``: ``min(x) = ~max(~x)``; int16 between
  two elementwise SUBs from -1, its last pool's result in working memory).

Every operation reads and writes whole tensors (``stream_ops``: ``Extent.WHOLE``): a plan
that stripes one keeps its subgraph off the stream, as for the one-kernel MEAN.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ethos_arch.mean_window import mean_kernel, mean_window, window_refusal
from ethos_arch.ops import Op
from ethos_arch.pool_bands import MAX_POOL_AREA, MAX_POOL_ROWS, one_pool, pool_bands
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, activation, feature_map, mean_scales
from tvm_ethos.backends.ethos_u.ops_reduce import looked_up, negated, not16_op, not_table
from tvm_ethos.backends.ethos_u.ops_reduce_depth import (
    MAX_CONV_ROWS,
    MAX_CONV_TAPS,
    MAX_WEIGHT_SUM,
    over_depth,
    reduction,
)
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    SCRATCH_REGION,
    UnsupportedOperatorError,
    vela_api,
)
from tvm_ethos.compute.quant import f32, quantize_multiplier

#: the types whose SUM / MEAN the pools compute
SUM_TYPES = ("int8", "uint8", "int16")
#: the most elements an int16 SUM / MEAN adds: every sum of ``x - zp`` within 32 bits (the
#: NPU's int32 partial sums saturate)
MAX_INT16_COUNT = (2**31 - 1) // 65535
#: the most elements an 8-bit SUM over the depth adds into one output, each ``x - zp``
#: within 255
MAX_INT8_COUNT = (2**31 - 1) // 255


class Bands(NamedTuple):
    """A reduction over ``kernel`` (rows, columns) of the NHWC ``view`` (height, width,
    depth) its input is read as, cut into pools of at most ``rows`` rows each."""

    view: tuple[int, int, int]
    kernel: tuple[int, int]
    rows: int

    @property
    def count(self) -> int:
        """How many pools the rows are cut into."""
        return -(-self.kernel[0] // self.rows)

    @property
    def out_view(self) -> tuple[int, int, int]:
        """The output's (height, width, depth): 1 along a reduced axis."""
        (h, w, c), (kh, kw) = self.view, self.kernel
        return h - kh + 1, w - kw + 1, c

    def band(self, i: int) -> tuple[int, int]:
        """(first row, rows) of band ``i``."""
        first = i * self.rows
        return first, min(self.rows, self.kernel[0] - first)


def _axes(q) -> tuple[int, ...]:
    """The reduced axes as written (one axis may be given alone)."""
    axis = q.attrs.get("axis")
    return (int(axis),) if isinstance(axis, (int, np.integer)) else tuple(axis or ())


def _view_and_kernel(q) -> tuple[tuple[int, int, int], tuple[int, int]] | None:
    """The NHWC view and reduced (rows, columns) of a MEAN over height, width or both of its
    view, or of a SUM / REDUCE_MAX / REDUCE_MIN over the height, the width or both of a 4-D
    tensor; None for any other reduction."""
    if q.kind not in (Op.MEAN, Op.REDUCE_SUM, Op.REDUCE_MAX, Op.REDUCE_MIN):
        return None
    shape = tuple(int(s) for s in q.in_shapes[0])
    axes = _axes(q)
    if q.kind == Op.MEAN:
        kernel = mean_kernel((1,) + shape[1:] if len(shape) == 4 else shape, axes)
        if kernel is None:
            return None
        view = ((1,) * (4 - len(shape)) + shape)[1:]
        return (view[0], view[1], view[2]), kernel
    if sum_over_depth(q):
        r = reduction(q)
        return (r.h, r.w, r.c), (r.kh, r.kw)
    kernel = mean_kernel(shape, axes) if len(shape) == 4 else None
    return None if kernel is None else (shape[1:], kernel)


def sum_over_depth(q) -> bool:
    """Whether ``q`` is a SUM over the depth (``ops_reduce_depth.over_depth``): past one
    convolution, the band sums of each channel, then one REDUCE_SUM over the depth."""
    return q.kind == Op.REDUCE_SUM and over_depth(q)


def _one_kernel(q, view, kernel) -> bool:
    """Whether the one-operation forms take the window (``ops_reduce``, ``npu_ops.mean_op``)."""
    kh, kw = kernel
    if q.kind == Op.MEAN:
        shape = tuple(q.in_shapes[0])
        window = mean_window((1,) + shape[1:] if len(shape) == 4 else shape, _axes(q))
        return window is not None and window_refusal(window) is None
    if q.kind == Op.REDUCE_SUM:
        return kh <= MAX_CONV_ROWS and kh * kw <= MAX_CONV_TAPS and \
            (not sum_over_depth(q) or kh * kw * view[2] <= MAX_WEIGHT_SUM)
    return one_pool(kh, kw)


def bands(q) -> Bands | None:
    """The bands of ``q`` where it is a reduction over height and width (MEAN: of its NHWC
    view; SUM: with the depth too) that one NPU kernel cannot take; None where one can, or
    for other reductions."""
    found = _view_and_kernel(q)
    if found is None or _one_kernel(q, *found):
        return None
    view, (kh, kw) = found
    return Bands(view, (kh, kw), pool_bands(kh, kw).rows)


def refusal(q) -> str | None:
    """Why the pools cannot take ``q`` (a reduction :func:`bands` cuts), None where they can."""
    b = bands(q)
    if b is None:
        return None
    kh, kw = b.kernel
    if kw > MAX_POOL_AREA:
        return (f"{q.tflite_name} over {kh}x{kw}; one pool's row takes at most "
                f"{MAX_POOL_AREA} elements")
    if q.kind in (Op.REDUCE_SUM, Op.MEAN) and q.in_dtypes[0] not in SUM_TYPES:
        return (f"a {q.in_dtypes[0]} {q.tflite_name} over {kh}x{kw}; past one kernel of "
                f"64 rows and 4096 elements the pools sum {', '.join(SUM_TYPES)}")
    if sum_over_depth(q) and kh * kw * b.view[2] > MAX_INT8_COUNT:
        return (f"SUM over {kh * kw * b.view[2]} elements, whose sum may leave 32 bits; the "
                f"NPU's int32 partial sums take at most {MAX_INT8_COUNT}")
    count = kh * kw * (b.view[2] if sum_over_depth(q) else 1)
    if q.kind in (Op.REDUCE_SUM, Op.MEAN) and q.in_dtypes[0] == "int16" and \
            count > MAX_INT16_COUNT:
        return (f"an int16 {q.tflite_name} of {count} elements, whose sum may leave 32 "
                f"bits; the NPU's int32 partial sums take at most {MAX_INT16_COUNT}")
    if q.kind == Op.REDUCE_MIN and q.in_dtypes[0] not in ("int8", "uint8", "int16"):
        return (f"a {q.in_dtypes[0]} REDUCE_MIN over {kh}x{kw}; its bitwise NOT is a table of "
                "the 256 codes of int8 or uint8, or an int16 SUB from -1")
    if q.kind in (Op.REDUCE_MAX, Op.REDUCE_MIN) and b.count > MAX_POOL_ROWS:
        return (f"{q.tflite_name} over {kh}x{kw}: {b.count} bands of {b.rows} rows; the max "
                f"pool over their maxima takes at most {MAX_POOL_ROWS}")
    return None


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _partial_bytes(b: Bands) -> int:
    """One band's int32 sums, aligned."""
    return _aligned(int(np.prod(b.out_view)) * 4)


def work_bytes(q) -> int:
    """The working memory of the pools: SUM / MEAN three int32 partial results (a band's and
    two running sums) where there is more than one band, and a SUM over the depth one more,
    the channels' sums its REDUCE_SUM reads (``planner.parts``' working memory of a
    reduction over the depth is this); REDUCE_MAX the bands' maxima; REDUCE_MIN its input's
    NOT before them (int16: and the last pool's result, NOT-ed into the output by a SUB)."""
    b = bands(q)
    if b is None:
        return 0
    if q.kind in (Op.REDUCE_SUM, Op.MEAN):
        return _partial_bytes(b) * ((3 if b.count > 1 else 0) + int(sum_over_depth(q)))
    size = np.dtype(q.in_dtypes[0]).itemsize
    is_min = q.kind == Op.REDUCE_MIN
    flipped = _aligned(int(np.prod(b.view)) * size) if is_min else 0
    _, ow, c = b.out_view
    maxima = b.count * ow * c * size
    if is_min and q.in_dtypes[0] == "int16":   # the last pool's result before its NOT
        return flipped + _aligned(maxima) + int(np.prod(b.out_view)) * size
    return flipped + _aligned(maxima)


def _scale(q, b: Bands) -> tuple[int, int]:
    """(multiplier, NPU shift) of TFLite's MEAN (the element count folded in) or SUM."""
    if q.kind == Op.MEAN:
        return mean_scales(q, count=b.kernel[0] * b.kernel[1])
    m, s = quantize_multiplier(f32(q.in_q[0][0]) / f32(q.out_q[0]))
    if not 0 <= 31 - s <= 63:
        raise UnsupportedOperatorError(q.tflite_name, f"a scale shift of {s}")
    return int(m), 31 - int(s)


def _pool(sub, ifm: FmSlot, ofm: FmSlot, kernel: tuple[int, int], name: str):
    """One unpadded, stride-1 pool of ``kernel`` (rows, columns) from ``ifm`` into ``ofm``,
    TFL rounding, no clamp."""
    api = vela_api()
    npu = api.NpuPoolingOperation(sub)
    npu.ifm, npu.ofm = feature_map(ifm), feature_map(ofm)
    npu.kernel = api.NpuKernel(kernel[1], kernel[0])
    npu.padding = api.NpuPadding(0, 0, 0, 0)
    npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    npu.rounding_mode = api.NpuRoundingMode.TFL
    npu.name = name
    return npu


def _rows(x: FmSlot, first: int, rows: int) -> FmSlot:
    """Rows ``first`` to ``first + rows`` of the NHWC feature map ``x``."""
    h, w, c = x.shape
    step = w * c * np.dtype(x.dtype).itemsize
    return dataclasses.replace(x, offset=x.offset + first * step, shape=(rows, w, c))


def _sum_ops(q, b: Bands, x: FmSlot, out: FmSlot, em) -> list:
    """SUM / MEAN: the banded sums scaled into the output; a SUM over the depth: the
    channels' int32 sums, then their REDUCE_SUM over the depth scales into the output."""
    from ethosu.vela.operation import ExplicitScaling  # Vela is the optional 'vela' extra

    api = vela_api()
    scale = _scale(q, b)
    if not sum_over_depth(q):
        return _banded_sums(q, b, x, out, scale, em)
    # after the three slots of the running sums where there are several bands
    sums = FmSlot(SCRATCH_REGION, em.work + (3 * _partial_bytes(b) if b.count > 1 else 0),
                  b.out_view, "int32", 1.0, 0)
    ops = _banded_sums(q, b, x, sums, (1, 0), em)
    out = dataclasses.replace(out, shape=b.out_view[:2] + (1,))
    total = _pool(api.NpuPoolingOp.REDUCE_SUM, sums, out, (1, 1), q.kind.value)
    total.rescale = ExplicitScaling(False, [scale[1]], [scale[0]])
    total.activation = activation(q, out)
    total.block_config = em.block(total)
    return ops + [total]


def _banded_sums(q, b: Bands, x: FmSlot, into: FmSlot, scale: tuple[int, int], em) -> list:
    """One average pool of the window into ``into`` with ``scale`` (multiplier, shift), or
    per band an average pool of its exact int32 sum (the identity scale) into working memory
    and int32 ADDs, the last into ``into`` with ``scale``. A scale other than (1, 0) is the
    output's: it takes the reduction's clamp."""
    from ethosu.vela.operation import ExplicitScaling  # Vela is the optional 'vela' extra

    api = vela_api()
    kw, oh = b.kernel[1], b.out_view[0]

    def clamp():
        return activation(q, into) if scale != (1, 0) else \
            api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)

    if b.count == 1:
        pool = _pool(api.NpuPoolingOp.AVERAGE, x, into, b.kernel, q.kind.value)
        pool.rescale = ExplicitScaling(False, [scale[1]], [scale[0]])
        pool.activation = clamp()
        pool.block_config = em.block(pool)
        return [pool]
    size = _partial_bytes(b)
    slots = [FmSlot(SCRATCH_REGION, em.work + k * size, b.out_view, "int32", 1.0, 0)
             for k in range(3)]
    ops: list = []
    total = None
    for i in range(b.count):
        first, rows = b.band(i)
        part = slots[0] if total is None else slots[1]
        pool = _pool(api.NpuPoolingOp.AVERAGE, _rows(x, first, rows + oh - 1), part,
                     (rows, kw), f"{q.kind.value}_band")
        pool.rescale = ExplicitScaling(False, [0], [1])   # the exact int32 sum
        pool.block_config = em.block(pool)
        ops.append(pool)
        if total is None:
            total = part
            continue
        last = i == b.count - 1
        dst = into if last else (slots[2] if total is not slots[2] else slots[0])
        add = api.NpuElementWiseOperation(api.NpuElementWiseOp.ADD)
        add.ifm, add.ifm2, add.ofm = feature_map(total), feature_map(part), feature_map(dst)
        add.rescale = scale if last else (1, 0)
        add.activation = clamp() if last else \
            api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        add.rounding_mode = api.NpuRoundingMode.TFL
        add.name = q.kind.value if last else f"{q.kind.value}_add"
        add.block_config = em.block(add)
        ops.append(add)
        total = dst
    return ops


def _max_ops(q, b: Bands, x: FmSlot, out: FmSlot, em) -> list:
    """REDUCE_MAX / REDUCE_MIN: per band a max pool into working memory, then one over the
    bands' maxima; REDUCE_MIN reads its input's NOT and looks its result up in the NOT table
    (clamped to a fused activation's codes)."""
    api = vela_api()
    if q.in_q[0] != q.out_q:
        raise UnsupportedOperatorError(q.tflite_name, "an output quantized unlike its input")
    unit = {"scale": 1.0, "zero_point": 0}
    x = dataclasses.replace(x, **unit)
    out = dataclasses.replace(out, **unit)
    ops: list = []
    work = em.work
    is_min = q.kind == Op.REDUCE_MIN
    wide = x.dtype == "int16"   # no table of its codes: NOT by SUBs from -1 (ops_reduce)
    if is_min:
        flipped = FmSlot(SCRATCH_REGION, work, b.view, x.dtype, 1.0, 0)
        ops += negated(x, flipped, em)
        x, work = flipped, work + _aligned(int(np.prod(b.view)) * np.dtype(x.dtype).itemsize)
    _, ow, c = b.out_view
    maxima = FmSlot(SCRATCH_REGION, work, (b.count, ow, c), x.dtype, 1.0, 0)
    kw = b.kernel[1]
    for i in range(b.count):
        first, rows = b.band(i)
        dst = _rows(maxima, i, 1)
        pool = _pool(api.NpuPoolingOp.MAX, _rows(x, first, rows), dst, (rows, kw),
                     f"{q.kind.value}_band")
        pool.block_config = em.block(pool)
        ops.append(pool)
    if is_min and wide:
        last = FmSlot(SCRATCH_REGION, work + _aligned(b.count * ow * c * 2), b.out_view,
                      x.dtype, 1.0, 0)
        pool = _pool(api.NpuPoolingOp.MAX, maxima, last, (b.count, 1), q.kind.value)
        pool.block_config = em.block(pool)
        negate = not16_op(last, out, em)
        negate.activation = activation(q, out)   # a fused clamp, in codes
        return ops + [pool, negate]
    pool = _pool(api.NpuPoolingOp.MAX, maxima, out, (b.count, 1), q.kind.value)
    if is_min:
        ops += looked_up(pool, np.clip(not_table(x.dtype), q.act_min, q.act_max), em)
    else:
        pool.activation = activation(q, out)
        ops.append(pool)
    pool.block_config = em.block(pool)
    return ops


def split_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The operations of ``q`` (a reduction :func:`bands` cuts) from ``operands[0]`` into
    ``ofm``, whole tensors, its working memory at ``em.work`` (:func:`work_bytes`)."""
    b = bands(q)
    why = refusal(q)
    if b is None or why:
        raise UnsupportedOperatorError(q.tflite_name, why or "one NPU kernel takes it")
    x = dataclasses.replace(operands[0], shape=b.view)
    out = dataclasses.replace(ofm, shape=b.out_view)
    if q.kind in (Op.REDUCE_SUM, Op.MEAN):
        return _sum_ops(q, b, x, out, em)
    return _max_ops(q, b, x, out, em)
