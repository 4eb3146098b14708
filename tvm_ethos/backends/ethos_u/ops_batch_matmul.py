"""int8 BATCH_MATMUL as NPU operations over whole tensors, in Vela 5.2's form for the
Ethos-U55/U65 (its MatMul, as its register command streams show it).

The NPU has no matrix product of two feature maps, so each output column is computed apart:

1. an operand whose matrix is not laid out with the reduced axis innermost is transposed into
   working memory by strided copies (``b`` as ``b^T``: rows of ``K`` per output column; ``a``
   when its adj flag is set);
2. per output column ``j``: an elementwise MUL of ``a``'s rows (batches as the height, rows as
   the width, ``K`` as the depth) by ``b^T``'s row ``j`` (broadcast along the width), into an
   int32 map of the products ``(a - zp_a) * (b - zp_b)`` (the NPU subtracts both zero points;
   unit scale: exact);
3. a REDUCE_SUM of those products along the depth into column ``j`` of the output, its OFM
   scale TFLite's ``s_a * s_b / s_out`` multiplier (``quant.batch_matmul_multiplier``), rounded
   as TFLite Micro rounds, plus ``zp_out``, clamped.

Batches fold into the height: an operand broadcast along its batches (but ``b`` of a single
batch, which the MUL broadcasts) is first copied to every output batch it serves, transposed
on the way where it is transposed anyway, as Vela does, so one MUL and one REDUCE_SUM per
column cover all batches.

A constant operand (either) is a feature map in flash, read in place by the copies and the
MULs as any other operand: the NPU reads any region, so it needs no copy into SRAM (Vela's
MatMul makes one).
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from planner.work_memory import WorkMemory
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, activation, feature_map
from tvm_ethos.backends.ethos_u.ops_movement import Rotation, rotation_ops
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    SCRATCH_REGION,
    UnsupportedOperatorError,
    vela_api,
)
from tvm_ethos.compute.quant import batch_matmul_multiplier, f32


@dataclasses.dataclass(frozen=True)
class Dims:
    """A BATCH_MATMUL's sizes: batch shapes of ``a``, ``b`` and the output (aligned right,
    padded with ones to the output's), and the ``m x k`` by ``k x n`` product."""

    a_batch: tuple[int, ...]
    b_batch: tuple[int, ...]
    out_batch: tuple[int, ...]
    m: int
    k: int
    n: int


def dims(q) -> Dims:
    """The sizes of BATCH_MATMUL ``q``, its adj flags read."""
    sa, sb = (tuple(int(d) for d in s) for s in q.in_shapes)
    out = tuple(int(d) for d in q.out_shape)
    nb = len(out) - 2

    def batch(s):
        return (1,) * (nb - (len(s) - 2)) + s[:-2]

    k = sa[-2] if q.attrs.get("adj_x") else sa[-1]
    return Dims(batch(sa), batch(sb), out[:-2], out[-2], k, out[-1])


def reduced_depth(q) -> int:
    """The length of the axis BATCH_MATMUL ``q`` reduces."""
    return dims(q).k


def _count(batch) -> int:
    return int(np.prod(batch, dtype=np.int64))


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _spread(d: Dims) -> tuple[bool, bool]:
    """Whether ``a`` and ``b`` are copied to every output batch first: ``a`` wherever its
    batches are not the output's, ``b`` too unless it has a single batch."""
    return (d.a_batch != d.out_batch,
            d.b_batch != d.out_batch and _count(d.b_batch) > 1)


def _layout(q) -> tuple[int, int]:
    """(bytes of ``a`` laid out anew (transposed or spread) or 0, bytes of ``b^T`` or of
    ``b`` spread or 0): the working memory before the products, in that order."""
    d = dims(q)
    spread_a, spread_b = _spread(d)
    a_n = _count(d.out_batch) if spread_a else _count(d.a_batch)
    b_n = _count(d.out_batch) if spread_b else _count(d.b_batch)
    a_t = _aligned(a_n * d.m * d.k) if spread_a or q.attrs.get("adj_x") else 0
    b_t = _aligned(b_n * d.n * d.k) if spread_b or not q.attrs.get("adj_y") else 0
    return a_t, b_t


#: bytes of one int32 product
_PRODUCT = 4


def work(q) -> WorkMemory:
    """The working memory of BATCH_MATMUL ``q`` as the planner holds it: the operands laid
    out anew (whole, whatever the stripe: every stripe copies them), then the int32
    products of one output column for each position of the output or of a stripe of it
    (its batches and matrix rows: ``K`` products each), which end on a byte the stream
    writes."""
    return WorkMemory(fixed=sum(_layout(q)), per_position=_PRODUCT * dims(q).k)


def work_bytes(q, box: tuple | None = None) -> int:
    """:func:`work` over the whole output, or over one stripe of shape ``box``."""
    return work(q).for_stripe(q.out_shape if box is None else box)


class Run(NamedTuple):
    """Output batches one MUL and one REDUCE_SUM per column compute: ``count`` of them from
    ``out``, reading ``a`` (laid out at the output's batches) from the same batch on and
    ``b`` at its batch ``b`` (from it on where ``b`` is at the output's batches)."""

    b: int
    out: int
    count: int


def _index(batch: tuple[int, ...], at: tuple[int, ...]) -> int:
    """The flat batch of an operand of batch shape ``batch`` that output batch ``at`` reads
    (a dimension of 1 broadcast)."""
    if not batch:
        return 0
    return int(np.ravel_multi_index([0 if s == 1 else i for s, i in zip(batch, at)], batch))


def _groups(d: Dims, rows: tuple[int, int] | None) -> list[Run]:
    """The runs of output batches computed together, for a stripe of the output's
    second-to-last batch dimension ``rows`` (its height; None: all): all of them, or the
    stripe's rows of each outer batch (the operands laid out at the output's batches, but a
    ``b`` of one batch)."""
    total = _count(d.out_batch)
    inner = d.out_batch[-1] if d.out_batch else 1
    y0, y1 = rows if rows is not None else (0, inner)
    if (y0, y1) == (0, inner):
        spans = [(0, total)]
    else:
        spans = [(t + y0, y1 - y0) for t in range(0, total, inner)]
    single_b = _count(d.b_batch) == 1
    return [Run(0 if single_b else t, t, n) for t, n in spans]


def _fm(slot_region: int, offset: int, shape: tuple[int, int, int], strides, dtype: str,
        scale: float | None, zero_point: int):
    """The feature map of ``shape`` at ``offset`` read through byte ``strides`` (row,
    column; the depth dense)."""
    api = vela_api()
    fm = feature_map(FmSlot(slot_region, offset, shape, dtype, scale, zero_point))
    esize = np.dtype(dtype).itemsize
    fm.strides = api.NpuShape3D(int(strides[0]), int(strides[1]), esize)
    return fm


def _laid_out(src: FmSlot, batch: tuple[int, ...], out_batch: tuple[int, ...], spread: bool,
              transpose: bool, rows: int, cols: int, at: int, what: str,
              block) -> tuple[FmSlot, list]:
    """The matrices of ``rows x cols`` int8 codes of batch shape ``batch`` at ``src``,
    copied to the working memory at ``at`` transposed (``transpose``) and at every output
    batch (``spread``: matrix ``t`` is the one output batch ``t`` reads): (where they are
    now, the copies); ``src`` itself when neither."""
    if not (spread or transpose):
        return src, []
    count = _count(out_batch) if spread else _count(batch)
    dst = FmSlot(SCRATCH_REGION, at, (count, cols, rows) if transpose else (count, rows, cols),
                 "int8", None, 0)
    step = Rotation(rows, cols, 1) if transpose else Rotation(1, 1, rows * cols)
    size = rows * cols
    ops = []
    for t in range(count):
        i = t
        if spread:
            i = _index(batch, tuple(int(v) for v in np.unravel_index(t, out_batch)))
        ops += rotation_ops(step, dataclasses.replace(src, offset=src.offset + i * size),
                            dataclasses.replace(dst, offset=dst.offset + t * size), what, block)
    return dst, ops


def batch_matmul_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The operations of one BATCH_MATMUL from ``operands`` (a, b) into ``ofm``, whole
    tensors, over the output ``box`` (rows: its second-to-last batch dimension, columns: its
    matrix rows; None: all), its intermediates at ``em.work`` (:func:`work_bytes`)."""
    from ethosu.vela.operation import ExplicitScaling  # Vela is the optional 'vela' extra

    api = vela_api()
    d = dims(q)
    rows, (x0, x1) = (None, (0, d.m)) if box is None else box
    w = x1 - x0
    a, b = operands
    (sa, zpa), (sb, zpb) = q.in_q
    so, zpo = q.out_q
    mult, shift = batch_matmul_multiplier(q)
    if not 0 <= 31 - shift <= 63:
        raise UnsupportedOperatorError(q.tflite_name, f"an output scale shift of {shift}")
    a_bytes, b_bytes = _layout(q)
    spread_a, spread_b = _spread(d)
    adj_x, adj_y = bool(q.attrs.get("adj_x")), bool(q.attrs.get("adj_y"))
    a, ops = _laid_out(a, d.a_batch, d.out_batch, spread_a, adj_x,
                       *((d.k, d.m) if adj_x else (d.m, d.k)), em.work, q.tflite_name, em.block)
    b, moved = _laid_out(b, d.b_batch, d.out_batch, spread_b, not adj_y,
                         *((d.n, d.k) if adj_y else (d.k, d.n)), em.work + a_bytes,
                         q.tflite_name, em.block)
    ops += moved
    products = em.work + a_bytes + b_bytes
    mk, nk, mn = d.m * d.k, d.n * d.k, d.m * d.n
    out_slot = dataclasses.replace(ofm, scale=float(f32(so)), zero_point=int(zpo))

    def named(npu, name: str):
        npu.rounding_mode = api.NpuRoundingMode.TFL
        npu.block_config = em.block(npu)
        npu.name = f"batch_matmul_{name}"
        ops.append(npu)

    for r, run in enumerate(_groups(d, rows)):
        h = run.count
        hb = h if _count(d.b_batch) > 1 else 1
        # each run's products apart (runs of a stripe are of one size): a stripe's products
        # are then one per position of it, the working memory the plan holds for it
        at = products + r * h * w * d.k * _PRODUCT
        for j in range(d.n):
            mul = api.NpuElementWiseOperation(api.NpuElementWiseOp.MUL)
            mul.ifm = _fm(a.region, a.offset + run.out * mk + x0 * d.k, (h, w, d.k), (mk, d.k),
                          "int8", float(f32(sa)), int(zpa))
            mul.ifm2 = _fm(b.region, b.offset + run.b * nk + j * d.k, (hb, 1, d.k), (nk, d.k),
                           "int8", float(f32(sb)), int(zpb))
            mul.ofm = _fm(SCRATCH_REGION, at, (h, w, d.k), (w * d.k * 4, d.k * 4),
                          "int32", 1.0, 0)
            mul.rescale = (1, 0)
            mul.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
            named(mul, "mul")

            total = api.NpuPoolingOperation(api.NpuPoolingOp.REDUCE_SUM)
            total.ifm = _fm(SCRATCH_REGION, at, (h, w, d.k), (w * d.k * 4, d.k * 4),
                            "int32", 1.0, 0)
            total.ofm = _fm(ofm.region, ofm.offset + run.out * mn + x0 * d.n + j, (h, w, 1),
                            (mn, d.n), "int8", float(f32(so)), int(zpo))
            total.kernel = api.NpuKernel(1, 1)
            total.padding = api.NpuPadding(0, 0, 0, 0)
            total.rescale = ExplicitScaling(False, [31 - shift], [mult])
            total.activation = activation(q, out_slot)
            named(total, "sum")
    return ops
