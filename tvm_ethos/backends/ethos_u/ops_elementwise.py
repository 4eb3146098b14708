"""SUB, MINIMUM and MAXIMUM as one NPU elementwise operation each; RELU, RELU6 and
RELU_N1_TO_1 as one 1x1 depthwise convolution.

SUB is ADD's arithmetic with the second operand subtracted: Vela's generator derives the
same operand and output scales from the feature maps' quantization (its advanced scaling, as
TFLite's 8-bit kernel rescales both inputs to twice the larger scale), so the stream rounds
as TFLite Micro's SUB does wherever the backend's check takes it (``compute.add_sub``: the
U55/U65 round the rescaled input once where TFLite Micro rounds it twice). MINIMUM and
MAXIMUM compare the codes: the backend's check takes them only with both inputs quantized
as the output (Vela's constraint), where comparing
``code - zero point`` and adding the zero point back is TFLite's comparison of the codes.
The NPU broadcasts only its second operand; a broadcast first operand swaps the two and sets
``reversed_operands``, which keeps SUB's order.

A standalone RELU is TFLite's requantization ``zp_out + MultiplyByQuantizedMultiplier(x -
zp_in, s_in / s_out)`` clamped to the activation's codes: a depthwise convolution with unit
weights, no bias and that multiplier per channel rounds exactly so (the convolutions' own
requantization), the clamp is the operation's activation.
"""
from __future__ import annotations

import numpy as np

from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, _common
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError, vela_api
from tvm_ethos.compute.quant import f32
from tvm_ethos.compute.relu_requant import relu_multiplier


def relu_op(op, ifm: FmSlot, ofm: FmSlot):
    """The 1x1 ``NpuConvDepthWiseOperation`` of the RELU-family ``op`` (its constants:
    :func:`relu_constants`)."""
    api = vela_api()
    npu = api.NpuConvDepthWiseOperation()
    _common(npu, op, ifm, ofm)
    npu.kernel = api.NpuKernel(1, 1)
    npu.padding = api.NpuPadding(0, 0, 0, 0)
    return npu


def relu_constants(op, channels: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
    """(OHWI unit weights, per-channel (multiplier, NPU shift)) of :func:`relu_op`: the
    kernel's ``s_in / s_out`` multiplier (``compute.relu_requant``), as
    ``te_ops.lower_requantize`` takes it."""
    m, s = relu_multiplier(op.in_q[0][0], op.out_q[0], op.float_activation)
    if not 0 <= 31 - s <= 63:
        raise UnsupportedOperatorError(op.tflite_name, f"a scale shift of {s}")
    return np.ones((channels, 1, 1, 1), np.int16), [(int(m), 31 - int(s))] * channels


def abs_op(op, ifm: FmSlot, ofm: FmSlot):
    """ABS: the NPU's ``|ifm - zp_in|`` scaled by the OFM's scale register, which Vela's
    generator takes from the OFM quantization's scale: given ``s_in / s_out`` (1 when the
    scales match, as TFLite Micro skips the rescale) it is TFLite's multiplier."""
    api = vela_api()
    npu = api.NpuElementWiseOperation(api.NpuElementWiseOp.ABS)
    s_in, s_out = f32(op.in_q[0][0]), f32(op.out_q[0])
    ratio = 1.0 if s_in == s_out else s_in / s_out
    _common(npu, op, ifm, ofm)
    npu.ofm.quantization = api.NpuQuantization(ratio, ofm.zero_point)
    return npu
