"""REDUCE_MAX and SUM over height and width, each one NPU operation over the whole input.

REDUCE_MAX is a max pool whose single window is the input's height and width (Vela's form of
a global max). TFLite's int8 REDUCE_MAX picks a code and requires the output quantized as the
input (``patterns._read_reduce`` refuses any other), so the pool's comparison of codes is
TFLite's.

SUM is MEAN's depthwise convolution with all-one weights over the whole input
(``npu_ops.mean_op``, the IFM zero point subtracted by the NPU, as TFLite sums ``x - zp``):
TFLite's int8 SUM rescales that sum by the ``s_in / s_out`` multiplier alone, so the
per-channel scale is MEAN's with an element count of one and the only rounding is TFLite's
``MultiplyByQuantizedMultiplier``.
"""
from __future__ import annotations

import dataclasses

from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, mean_weights, pool_op
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError
from tvm_ethos.compute.quant import f32, quantize_multiplier


def _hw(op) -> tuple[int, int, int]:
    """(height, width, depth) of a reduction over height and width of an NHWC input."""
    if tuple(op.attrs.get("axis") or ()) != (1, 2) or len(op.in_shapes[0]) != 4:
        raise UnsupportedOperatorError(op.tflite_name,
                                       f"a reduction over axes {op.attrs.get('axis')}")
    _, h, w, c = (int(s) for s in op.in_shapes[0])
    return h, w, c


def reduce_max_op(op, ifm: FmSlot, ofm: FmSlot):
    """The max pool of REDUCE_MAX: one window of the whole input, a 1x1 output."""
    h, w, c = _hw(op)
    pool = dataclasses.replace(op, kind=Op.MAX_POOL2D,
                               attrs={"pool_size": (h, w), "strides": (1, 1),
                                      "padding": (0, 0, 0, 0)})
    return pool_op(pool, dataclasses.replace(ifm, shape=(h, w, c)),
                   dataclasses.replace(ofm, shape=(1, 1, c)))


def reduce_sum_constants(op, channels: int) -> tuple:
    """(all-one weights, per-channel (multiplier, NPU shift)) of SUM's depthwise
    convolution: TFLite's ``s_in / s_out`` multiplier."""
    _hw(op)
    m, s = quantize_multiplier(f32(op.in_q[0][0]) / f32(op.out_q[0]))
    if not 0 <= 31 - s <= 63:
        raise UnsupportedOperatorError(op.tflite_name, f"a scale shift of {s}")
    return mean_weights(op), [(int(m), 31 - int(s))] * channels
