"""SUB, MINIMUM and MAXIMUM as one NPU elementwise operation each.

SUB is ADD's arithmetic with the second operand subtracted: Vela's generator derives the
same operand and output scales from the feature maps' quantization (its advanced scaling, as
TFLite's 8-bit kernel rescales both inputs to twice the larger scale), so the stream rounds
as TFLite Micro's SUB does. MINIMUM and MAXIMUM compare the codes: the backend's check takes
them only with both inputs quantized as the output (Vela's constraint), where comparing
``code - zero point`` and adding the zero point back is TFLite's comparison of the codes.
The NPU broadcasts only its second operand; a broadcast first operand swaps the two and sets
``reversed_operands``, which keeps SUB's order.
"""
from __future__ import annotations

from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, _common, feature_map
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError, vela_api

#: the operator kinds this module emits
KINDS = ("sub", "minimum", "maximum")


def binary_op(op, a: FmSlot, b: FmSlot, ofm: FmSlot):
    """The ``NpuElementWiseOperation`` of the SUB / MINIMUM / MAXIMUM ``op`` reading ``a`` and
    ``b`` into ``ofm``."""
    api = vela_api()
    sub_op = {"sub": api.NpuElementWiseOp.SUB, "minimum": api.NpuElementWiseOp.MIN,
              "maximum": api.NpuElementWiseOp.MAX}[op.kind]
    npu = api.NpuElementWiseOperation(sub_op)
    reverse = a.shape != ofm.shape
    if reverse and b.shape != ofm.shape:
        raise UnsupportedOperatorError(op.tflite_name, "both operands broadcast")
    first, second = (b, a) if reverse else (a, b)
    _common(npu, op, first, ofm)
    npu.ifm2 = feature_map(second)
    npu.reversed_operands = reverse
    return npu
