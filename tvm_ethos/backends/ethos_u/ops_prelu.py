"""PRELU (int8 or int16 with int8 alpha codes, uint8 with uint8 ones; alpha one code per
channel or a map over the height, width and depth) as four NPU operations over the whole
tensor.

TFLite's kernel takes ``v = x - zp_in`` to ``zp_out + MultiplyByQuantizedMultiplier(v, s_in /
s_out)`` where ``v >= 0`` and to ``zp_out + MultiplyByQuantizedMultiplier(v * (alpha -
zp_alpha), s_in * s_alpha / s_out)`` below. Each branch is an operation the NPU rounds exactly
so, and each is ``zp_out`` on the other branch's codes, so their sum less ``zp_out`` is the
kernel:

1. ``t = min(x, zp_in)``: a 1x1 MAX pool (a copy) clamped at the code ``zp_in``;
2. ``neg = t * alpha``: an elementwise MUL by the alpha codes in flash, of shape ``(H|1, W|1,
   C|1)`` (``compute.quant.prelu_alpha``: the NPU broadcasts its second operand along an axis
   of 1, as TFLite broadcasts alpha), its explicit scale TFLite's second multiplier (``v = 0``
   where ``x >= zp_in``); alpha is held in the input's type (an int16 PRELU's int8 codes
   widened, the same ``alpha - zp_alpha``), so both operands of the MUL are of one type;
3. ``pos``: a 1x1 average pool of ``x`` with TFLite's first multiplier (QUANTIZE's
   requantization, ``ops_lut``), clamped below at ``zp_out`` (``zp_out`` where ``x < zp_in``);
4. ``pos + neg - zp_out``: an elementwise ADD of the two at unit scale (every rescale a power
   of two: exact), clamped to the fused activation.

Every operation reads and writes only its own element, so a planner's stripe (``box``: output
rows and columns, the tensors held whole) is the same four operations over that box, the
three intermediates (of the output's type) of the box's size one after another in the
working memory, which the planner holds for the stripe (:func:`prelu_work`). Vela also runs
PRELU as a short sequence of elementwise operations.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from planner.work_memory import WorkMemory
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, feature_map, real_bound
from tvm_ethos.backends.ethos_u.ops_movement import dense, feature_map_of
from tvm_ethos.backends.ethos_u.stream_base import SCRATCH_REGION, vela_api
from tvm_ethos.compute.quant import dtype_range, prelu_alpha, prelu_multipliers

#: the maps of one PRELU's intermediates (``t``, ``neg``, ``pos``), of the output's type
_MAPS = 3


def prelu_work(q) -> WorkMemory:
    """The working memory of PRELU: its three maps of the output's size and type, or of a
    stripe's where it runs over stripes (the planner's form), packed one after another so
    that the last byte is one the stream writes (an NHWC feature map needs no alignment
    beyond its element's; the arena layout aligns the block's start)."""
    return WorkMemory(per_element=_MAPS * np.dtype(q.out_dtype).itemsize)


def prelu_work_bytes(q, box: tuple | None = None) -> int:
    """:func:`prelu_work` over the whole output, or over one stripe of shape ``box``."""
    return prelu_work(q).for_stripe(q.out_shape if box is None else box)


def _clamp(api, lo: int | None, hi: int | None, scale: float, zero_point: int):
    """An activation clamping output codes to [lo, hi] (None: the type's own bound)."""
    act = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    if lo is not None:
        act.min = real_bound(lo, scale, zero_point)
    if hi is not None:
        act.max = real_bound(hi, scale, zero_point)
    return act


def _box_fm(api, slot: FmSlot, box, scale: float, zero_point: int):
    """The feature map of output rows and columns ``box`` of a whole tensor ``slot`` (all of
    it for None), read through its strides, quantized ``(scale, zero_point)``."""
    if box is None:
        return feature_map(dataclasses.replace(slot, scale=scale, zero_point=zero_point))
    (y0, y1), (x0, x1) = box
    fm = feature_map_of(dense(slot).at(y0, x0, 0, (y1 - y0, x1 - x0, slot.shape[2])))
    fm.quantization = api.NpuQuantization(scale, zero_point)
    return fm


def _alpha_fm(api, q, flash, box):
    """The feature map of alpha's codes in flash (``compute.quant.prelu_alpha``: an axis of 1
    the NPU broadcasts), over output rows and columns ``box`` where alpha varies along
    them."""
    codes = prelu_alpha(q.attrs)
    a_scale, a_zp = q.attrs["alpha_q"]
    src = flash.add(np.asarray(codes, q.out_dtype).tobytes())
    alpha = FmSlot(src.region, src.address, codes.shape, q.out_dtype, a_scale, a_zp)
    ha, wa, ca = codes.shape
    if box is None or (ha == 1 and wa == 1):
        return feature_map(alpha)
    (y0, y1), (x0, x1) = box
    view = dense(alpha).at(y0 if ha > 1 else 0, x0 if wa > 1 else 0, 0,
                           (y1 - y0 if ha > 1 else 1, x1 - x0 if wa > 1 else 1, ca))
    fm = feature_map_of(view)
    fm.quantization = api.NpuQuantization(a_scale, a_zp)
    return fm


def prelu_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The four operations of one PRELU from ``operands[0]`` into ``ofm`` (whole tensors),
    over output rows and columns ``box`` (None: all), its intermediates at ``em.work``
    (:func:`prelu_work_bytes` of the box)."""
    api = vela_api()
    from ethosu.vela.operation import ExplicitScaling  # Vela is the optional 'vela' extra

    x = operands[0]
    h, w, c = ofm.shape
    if box is not None:
        (y0, y1), (x0, x1) = box
        h, w = y1 - y0, x1 - x0
    shape = (h, w, c)
    (s_in, zp_in), (s_out, zp_out) = q.in_q[0], q.out_q
    a_scale, a_zp = q.attrs["alpha_q"]
    (m1, sh1), (m2, sh2) = prelu_multipliers(s_in, a_scale, s_out)
    dtype = q.out_dtype
    step = int(np.prod(shape)) * np.dtype(dtype).itemsize
    t, neg, pos = (FmSlot(SCRATCH_REGION, em.work + k * step, shape, dtype, None, 0)
                   for k in range(_MAPS))
    lo, hi = dtype_range(dtype)
    ops = []

    def add(npu, name: str):
        npu.rounding_mode = api.NpuRoundingMode.TFL
        npu.block_config = em.block(npu)
        npu.name = f"prelu_{name}"
        ops.append(npu)

    # 1. t = min(x, zp_in), codes copied at unit quantization
    copy = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    copy.ifm = _box_fm(api, x, box, 1.0, 0)
    copy.ofm = feature_map(dataclasses.replace(t, scale=1.0, zero_point=0))
    copy.kernel, copy.padding = api.NpuKernel(1, 1), api.NpuPadding(0, 0, 0, 0)
    copy.activation = _clamp(api, None, zp_in, 1.0, 0)
    add(copy, "min")

    # 2. neg = (t - zp_in) * (alpha - zp_alpha), TFLite's second multiplier
    mul = api.NpuElementWiseOperation(api.NpuElementWiseOp.MUL)
    mul.ifm = feature_map(dataclasses.replace(t, scale=s_in, zero_point=zp_in))
    mul.ifm2 = _alpha_fm(api, q, em.flash, box)
    mul.ofm = feature_map(dataclasses.replace(neg, scale=s_out, zero_point=zp_out))
    mul.rescale = (m2, 31 - sh2)
    mul.activation = _clamp(api, None, None, s_out, zp_out)
    add(mul, "mul")

    # 3. pos = requantized x, clamped below at zp_out
    pool = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
    pool.ifm = _box_fm(api, x, box, s_in, zp_in)
    pool.ofm = feature_map(dataclasses.replace(pos, scale=s_out, zero_point=zp_out))
    pool.kernel, pool.padding = api.NpuKernel(1, 1), api.NpuPadding(0, 0, 0, 0)
    pool.rescale = ExplicitScaling(False, [31 - sh1], [m1])
    pool.activation = _clamp(api, zp_out, None, s_out, zp_out)
    add(pool, "pos")

    # 4. pos + neg - zp_out at unit scale, the fused clamp
    total = api.NpuElementWiseOperation(api.NpuElementWiseOp.ADD)
    total.ifm = feature_map(dataclasses.replace(pos, scale=1.0, zero_point=zp_out))
    total.ifm2 = feature_map(dataclasses.replace(neg, scale=1.0, zero_point=zp_out))
    total.ofm = _box_fm(api, ofm, box, 1.0, zp_out)
    total.activation = _clamp(api, q.act_min if q.act_min > lo else None,
                              q.act_max if q.act_max < hi else None, 1.0, zp_out)
    add(total, "add")
    return ops
