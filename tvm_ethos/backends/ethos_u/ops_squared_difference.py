"""SQUARED_DIFFERENCE (int8) as seven NPU operations, each step of TFLite Micro's kernel
rounded as the kernel rounds it (``compute.squared_difference``):

1. ``wa = (a - zp_a) * 2**7``: a 1x1 average pool into int32 (exact);
2. ``wa = wa * M_a``: an int32 MUL by the constant multiplier, its shift ``31 - shift_a`` (the
   TFL rounding is TFLite's doubling high multiply, then its rounding right shift);
3. and 4. the same for ``b`` into ``wb``;
5. ``wa = wa - wb``: an int32 SUB at unit scale, ``wb`` broadcast;
6. ``wa = wa * wa``: an int32 MUL at unit scale (at most ``(2**6 * 510)**2``: no overflow);
7. the output: an int32 MUL by the output multiplier into the int8 output, its zero point
   added and the fused activation's clamp.

The NPU's products are 64-bit, so step 7 saturates where TFLite Micro's left shift wraps: the
Ethos-U's checks refuse those quantizations (``compute.squared_difference.npu_refusal``).
Every operation reads and writes only its own element, so a planner's stripe is the same
seven operations over the stripe's boxes, wherever the plan holds them (rings too), with
working memory of one box. Vela 5.2 runs SQUARED_DIFFERENCE as the same steps.
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


def squared_difference_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The seven operations of one SQUARED_DIFFERENCE of ``operands`` into ``ofm`` (whole
    tensors or one stripe's boxes; a broadcast operand held whole), its intermediates at
    ``em.work`` (``squared_difference_work_bytes``). The operand of the output's shape is the
    SUB's first (the square makes the order irrelevant). ``em.place(fm, slot)`` puts a
    stripe's boxes where their buffers hold them."""
    api = vela_api()
    from ethosu.vela.operation import ExplicitScaling  # Vela is the optional 'vela' extra

    sc = squared_difference.scales(q.in_q[0], q.in_q[1], q.out_q)
    multipliers = [sc.input1, sc.input2]
    located = em.place or (lambda fm, slot: None)
    order = [0, 1] if tuple(operands[0].shape) == tuple(ofm.shape) else [1, 0]
    n_out = int(np.prod(ofm.shape))
    wide = [FmSlot(SCRATCH_REGION, em.work + k * _int32_bytes(n_out),
                   tuple(operands[i].shape), "int32", 1.0, 0) for k, i in enumerate(order)]
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

    for k, dst in zip(order, wide):
        cast = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
        cast.ifm, cast.ofm = feature_map(operands[k]), feature_map(dst)
        located(cast.ifm, operands[k])
        cast.kernel, cast.padding = api.NpuKernel(1, 1), api.NpuPadding(0, 0, 0, 0)
        cast.rescale = ExplicitScaling(False, [0], [1 << squared_difference.LEFT_SHIFT])
        cast.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        add(cast, f"widen{k}")
        m = multipliers[k]
        mul(feature_map(dst), constant(m.multiplier), feature_map(dst),
            (m.multiplier, 31 - m.shift), f"scale{k}")

    sub = api.NpuElementWiseOperation(api.NpuElementWiseOp.SUB)
    sub.ifm, sub.ifm2, sub.ofm = feature_map(wide[0]), feature_map(wide[1]), feature_map(wide[0])
    sub.rescale = (1, 0)
    sub.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    add(sub, "sub")
    mul(feature_map(wide[0]), feature_map(wide[0]), feature_map(wide[0]), (1, 0), "square")

    (s_out, zp_out), m = q.out_q, sc.output
    out_fm = feature_map(dataclasses.replace(ofm, scale=s_out, zero_point=zp_out))
    located(out_fm, ofm)
    act = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    if q.act_min > -128:
        act.min = real_bound(q.act_min, s_out, zp_out)
    if q.act_max < 127:
        act.max = real_bound(q.act_max, s_out, zp_out)
    mul(feature_map(wide[0]), constant(m.multiplier), out_fm, (m.multiplier, 31 - m.shift),
        "output", act)
    return ops
