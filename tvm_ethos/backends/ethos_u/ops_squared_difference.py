"""SQUARED_DIFFERENCE (int8 or int16) as seven NPU operations, each step of TFLite Micro's
kernel rounded as the kernel rounds it (``compute.squared_difference``):

1. ``wa = (a - zp_a) * 2**7`` (int16: ``a * 2**0``, its zero point 0): a 1x1 average pool
   into int32 (exact);
2. ``wa = wa * M_a``: an int32 MUL by the constant multiplier, its shift ``31 - shift_a`` (the
   TFL rounding is TFLite's doubling high multiply, then its rounding right shift);
3. and 4. the same for ``b`` into ``wb``;
5. ``wa = wa - wb``: an int32 SUB at unit scale, ``wb`` broadcast;
6. ``wa = wa * wa``: an int32 MUL at unit scale (at most ``(2**6 * 510)**2``, int16
   ``(2**15)**2``: no overflow);
7. the output: an int32 MUL by the output multiplier into the output, its zero point
   added and the fused activation's clamp.

Where neither operand has the output's shape (both broadcast), the NPU's elementwise
operations broadcast only their second operand: the first, widened and scaled, is expanded to
the output's shape by an int32 ADD to a zero constant of that shape (its first operand, in
flash), as Vela 5.2 does, before the SUB. Where an operand broadcasts, the map of the
output's shape is the working memory's second block (its last bytes), the broadcast ones
widened in the first.

The NPU's products are 64-bit, so step 7 saturates where TFLite Micro's left shift wraps: the
Ethos-U's checks refuse those quantizations (``compute.squared_difference.npu_refusal``).
Every operation reads and writes only its own element, so a planner's stripe is the same
seven operations over the stripe's boxes, wherever the plan holds them (rings too), with
working memory of one box; an operand held whole, broadcast along one axis, is read over the
stripe's rows or columns along the other. Vela 5.2 runs SQUARED_DIFFERENCE as the same
steps.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from planner.work_memory import WorkMemory
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, feature_map, real_bound
from tvm_ethos.backends.ethos_u.stream_base import ALIGN, SCRATCH_REGION, vela_api
from tvm_ethos.compute import squared_difference


def _int32_bytes(n: int) -> int:
    return -(-n * 4 // ALIGN) * ALIGN


def squared_difference_work(q) -> WorkMemory:
    """Two int32 maps of the output's size, or of a stripe's where it runs over stripes (the
    planner's form): the widened operands, the second no larger than the first, each block
    starting on an ``ALIGN`` boundary (two blocks of ``4 n`` bytes rounded up to ``ALIGN``
    are ``8 n`` rounded up to ``2 ALIGN``)."""
    return WorkMemory(per_element=8, align=2 * ALIGN)


def squared_difference_work_bytes(q, box: tuple | None = None) -> int:
    """:func:`squared_difference_work` over the whole output, or over one ``box`` of it."""
    return squared_difference_work(q).for_stripe(q.out_shape if box is None else box)


def _stripe_of(x: FmSlot, q, box) -> FmSlot:
    """``x`` as a stripe ``box`` of the output reads it: an operand held whole whose rows (or
    columns) are the output's, broadcast along the other axis, cut to the stripe's rows (or
    columns), which are contiguous in it; an operand already cut to the box (its extent the
    box's), or broadcast along the axes the stripe cuts, as it is."""
    if box is None:
        return x
    (_, rows, cols, _) = box
    _, height, width, _ = (1,) * (4 - len(q.out_shape)) + tuple(int(d) for d in q.out_shape)
    h, w, c = x.shape
    e = np.dtype(x.dtype).itemsize
    if h == height != rows[1] - rows[0]:    # (rows, 1, depth)
        x = dataclasses.replace(x, offset=x.offset + rows[0] * w * c * e,
                                shape=(rows[1] - rows[0], w, c))
    if w == width != cols[1] - cols[0]:     # (1, columns, depth)
        x = dataclasses.replace(x, offset=x.offset + cols[0] * c * e,
                                shape=(x.shape[0], cols[1] - cols[0], c))
    return x


def squared_difference_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The seven operations (eight where both broadcast) of one SQUARED_DIFFERENCE of
    ``operands`` into ``ofm`` (whole tensors or one stripe's boxes; a broadcast operand held
    whole), its intermediates at
    ``em.work`` (``squared_difference_work_bytes``). The operand of the output's shape is the
    SUB's first (the square makes the order irrelevant). ``em.place(fm, slot)`` puts a
    stripe's boxes where their buffers hold them."""
    api = vela_api()
    from ethosu.vela.operation import ExplicitScaling  # Vela is the optional 'vela' extra

    dtype = q.in_dtypes[0]
    sc = squared_difference.scales(q.in_q[0], q.in_q[1], q.out_q, dtype)
    widen = 1 << squared_difference.left_shift(dtype)
    lowest, highest = int(np.iinfo(q.out_dtype).min), int(np.iinfo(q.out_dtype).max)
    multipliers = [sc.input1, sc.input2]
    located = em.place or (lambda fm, slot: None)
    operands = [_stripe_of(x, q, box) for x in operands]
    order = [1, 0] if tuple(operands[1].shape) == tuple(ofm.shape) != tuple(
        operands[0].shape) else [0, 1]
    n_out = int(np.prod(ofm.shape))

    def block(k: int, shape) -> FmSlot:
        return FmSlot(SCRATCH_REGION, em.work + k * _int32_bytes(n_out), tuple(shape), "int32",
                      1.0, 0)

    # a broadcast operand: the output's shape in the second block, ending where the planned
    # working memory ends, the broadcast operands widened in the first; both broadcast: the
    # first expanded into the second block
    expand = tuple(operands[order[0]].shape) != tuple(ofm.shape)
    broadcast = tuple(operands[order[1]].shape) != tuple(ofm.shape)
    acc = block(1 if broadcast else 0, ofm.shape)
    ops = []

    def add(npu, name: str):
        npu.rounding_mode = api.NpuRoundingMode.TFL
        npu.block_config = em.block(npu)
        npu.name = f"{q.kind.value}_{name}"
        ops.append(npu)

    def constant(value: int):
        src = em.flash.add(np.asarray([value], np.int32).tobytes())
        return feature_map(FmSlot(src.region, src.address, (1, 1, 1), "int32", 1.0, 0))

    def mul(ifm, ifm2, ofm_fm, rescale, name: str, activation=None):
        npu = api.NpuElementWiseOperation(api.NpuElementWiseOp.MUL)
        npu.ifm, npu.ifm2, npu.ofm = ifm, ifm2, ofm_fm
        npu.rescale = rescale
        npu.activation = activation or api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        add(npu, name)

    def elementwise(op, ifm, ifm2, ofm_fm, name: str):
        npu = api.NpuElementWiseOperation(op)
        npu.ifm, npu.ifm2, npu.ofm = ifm, ifm2, ofm_fm
        npu.rescale = (1, 0)
        npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        add(npu, name)

    for j, k in enumerate(order):
        dst = acc if j == 0 and not expand else block(0 if broadcast else 1,
                                                       operands[k].shape)
        cast = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
        cast.ifm, cast.ofm = feature_map(operands[k]), feature_map(dst)
        located(cast.ifm, operands[k])
        cast.kernel, cast.padding = api.NpuKernel(1, 1), api.NpuPadding(0, 0, 0, 0)
        cast.rescale = ExplicitScaling(False, [0], [widen])
        cast.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        add(cast, f"widen{k}")
        m = multipliers[k]
        mul(feature_map(dst), constant(m.multiplier), feature_map(dst),
            (m.multiplier, 31 - m.shift), f"scale{k}")
        if expand and j == 0:   # zeros of the output's shape, the widened operand broadcast
            src = em.flash.add(bytes(4 * n_out))
            zeros = FmSlot(src.region, src.address, tuple(ofm.shape), "int32", 1.0, 0)
            elementwise(api.NpuElementWiseOp.ADD, feature_map(zeros), feature_map(dst),
                        feature_map(acc), f"expand{k}")
    other = dst

    elementwise(api.NpuElementWiseOp.SUB, feature_map(acc), feature_map(other),
                feature_map(acc), "sub")
    mul(feature_map(acc), feature_map(acc), feature_map(acc), (1, 0), "square")

    (s_out, zp_out), m = q.out_q, sc.output
    out_fm = feature_map(dataclasses.replace(ofm, scale=s_out, zero_point=zp_out))
    located(out_fm, ofm)
    act = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    if q.act_min > lowest:
        act.min = real_bound(q.act_min, s_out, zp_out)
    if q.act_max < highest:
        act.max = real_bound(q.act_max, s_out, zp_out)
    mul(feature_map(acc), constant(m.multiplier), out_fm, (m.multiplier, 31 - m.shift),
        "output", act)
    return ops
