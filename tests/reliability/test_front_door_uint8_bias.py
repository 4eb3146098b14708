"""The front door on uint8 CONV_2D and DEPTHWISE_CONV_2D whose bias scale is not input scale
x weight scale: LiteRT's kernels (the reference for uint8, which TFLite Micro's convolutions do
not take) refuse to prepare one further than 0.02 x the output scale from that product, and
run any nearer one; ``load_model`` must say the same, in one line naming the operator."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from tflite_builder import BO, BOPT, T

from tests.helpers.tflite_oracle import litert_accepts
from tests.reliability.front_door_cases import disagreement, front_door

pytest.importorskip("ai_edge_litert")

X_SCALE, W_SCALE, Y_SCALE = 0.05, 0.01, 0.01


def uint8_conv(depthwise: bool, bias_scale: float) -> bytes:
    """A 3x3 uint8 convolution (4x4x4 -> 4 channels) with one weight scale and the given bias
    scale."""
    rs = np.random.RandomState(0)
    wshape = [1, 3, 3, 4] if depthwise else [4, 3, 3, 4]
    x = T([1, 4, 4, 4], "uint8", scale=X_SCALE, zp=128)
    w = T(wshape, "uint8", scale=W_SCALE, zp=128,
          data=rs.randint(0, 256, size=wshape).astype(np.uint8))
    bias = T([4], "int32", scale=bias_scale, zp=0,
             data=rs.randint(-2000, 2000, size=4).astype(np.int32))
    y = T([1, 4, 4, 4], "uint8", scale=Y_SCALE, zp=128)

    def opts(b):
        if depthwise:
            tflite.DepthwiseConv2DOptionsStart(b)
            tflite.DepthwiseConv2DOptionsAddPadding(b, tflite.Padding.SAME)
            tflite.DepthwiseConv2DOptionsAddStrideW(b, 1)
            tflite.DepthwiseConv2DOptionsAddStrideH(b, 1)
            tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, 1)
            return tflite.DepthwiseConv2DOptionsEnd(b)
        tflite.Conv2DOptionsStart(b)
        tflite.Conv2DOptionsAddPadding(b, tflite.Padding.SAME)
        tflite.Conv2DOptionsAddStrideW(b, 1)
        tflite.Conv2DOptionsAddStrideH(b, 1)
        return tflite.Conv2DOptionsEnd(b)

    return tb.build([x, w, bias, y], [0], [3],
                    BO.DEPTHWISE_CONV_2D if depthwise else BO.CONV_2D,
                    BOPT.DepthwiseConv2DOptions if depthwise else BOPT.Conv2DOptions, opts,
                    op_inputs=[0, 1, 2])


@settings(max_examples=18, deadline=None)
@given(depthwise=st.booleans(),
       off=st.sampled_from([0.0, 0.01, 0.019, -0.019, 0.021, 0.05, 1.0, -0.021, -0.04]))
def test_a_uint8_convolutions_bias_scale_is_judged_as_litert_judges_it(depthwise, off):
    """``off`` x the output scale between the bias scale and the product: LiteRT runs the model
    within 0.02 of it and refuses it beyond; ``load_model`` validates and refuses the same."""
    product = X_SCALE * W_SCALE
    data = uint8_conv(depthwise, product + off * Y_SCALE)
    litert, ours = litert_accepts(data), front_door(data, full=False)
    assert disagreement(litert, ours) is None, (litert, ours)
    if abs(off) <= 0.019:
        assert litert == "ok" and ours.outcome == "validated", (litert, ours)
    else:
        kind = "DEPTHWISE_CONV_2D" if depthwise else "CONV_2D"
        assert litert != "ok" and ours.outcome == "UnsupportedModelError", (litert, ours)
        assert f"operator 0 ({kind}): bias scale" in ours.message, ours
        assert f"TFLite's uint8 {kind} needs them equal to within 0.02" in ours.message, ours
