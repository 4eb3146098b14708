"""An INT16 ABS, EXP or LOG whose input or output has a zero point other than 0 (issue 28):
TFLite's int16 kernels (TFLite Micro's and LiteRT's) fail to prepare on it, so no runtime
defines its result and the front door refuses it in one line naming the tensor, its zero
point, the kernels' requirement and the fix (``tflite_support.int16_zero_point_refusal``),
not the importer's float32 arithmetic, and with no other target to try."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_accepts
from tvm_ethos.errors import UnsupportedModelError
from tvm_ethos.frontend.tflite_support import operator_support

pytest.importorskip("tflite_micro")

SHAPE = [1, 4, 4, 8]
OPERATORS = {"ABS": tb.BO.ABS, "EXP": tb.BO.EXP, "LOG": tb.BO.LOG}


def unary16(code, in_zp: int, out_zp: int) -> bytes:
    """One int16 operator, input ``t0`` (scale 0.001) and output ``t1`` (0.002)."""
    x = tb.T(SHAPE, "int16", scale=0.001, zp=in_zp)
    y = tb.T(SHAPE, "int16", scale=0.002, zp=out_zp)
    return tb.serialize([x, y], [(code, 0, None, [0], [1])], [0], [1])


@pytest.mark.parametrize("in_zp,out_zp,named", [
    (5, 0, "input 't0' has zero point 5"),
    (0, -3, "output 't1' has zero point -3"),
    (7, 9, "input 't0' has zero point 7 and whose output 't1' has zero point 9"),
], ids=["input", "output", "both"])
@pytest.mark.parametrize("name", list(OPERATORS))
def test_a_zero_point_is_refused_naming_the_tensor_and_the_fix(name, in_zp, out_zp, named):
    model = unary16(OPERATORS[name], in_zp, out_zp)
    # the premise: TFLite's own int16 kernels refuse the model
    with pytest.raises(RuntimeError):
        oracle(model, [np.zeros(SHAPE, np.int16)])
    assert tflm_accepts(model) != "ok"
    fix = "quantize them symmetrically" if in_zp and out_zp else "quantize it symmetrically"
    want = (f"an int16 {name} whose {named}: TFLite's int16 {name} kernels require zero point "
            f"0 on the input and the output; {fix} (zero point 0")
    (verdict,) = operator_support(model)
    assert not verdict.importable and verdict.reason.startswith(want), verdict.reason
    assert "float32" not in verdict.reason
    with pytest.raises(UnsupportedModelError) as err:
        tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    message = str(err.value)
    assert want in message and "\n" not in message, message
    assert "TFLite Micro runs" not in message   # TFLite Micro refuses it too
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro" and want in str(placed.why), placed


@pytest.mark.parametrize("name", list(OPERATORS))
def test_zero_points_0_are_not_refused(name):
    (verdict,) = operator_support(unary16(OPERATORS[name], 0, 0))
    assert verdict.importable, verdict.reason
