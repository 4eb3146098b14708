"""A PAD read by a convolution on the Ethos-U is that convolution's padding (``pad_fold``, as
Vela's ``replace_pad_by_hw_pad``): no copy and no padded tensor in the stream where the NPU can
pad that much, the PAD's copies otherwise, and TFLite Micro's outputs either way."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def _out(n: int, k: int, s: int, d: int, same: bool) -> int:
    return -(-n // s) if same else (n - (k - 1) * d - 1) // s + 1


def pad_conv_model(rs, in_shape, pads, kernel, stride, dilation=(1, 1), same=False,
                   depthwise=False, pad_output=False) -> bytes:
    """PAD by ``pads`` (top, bottom, left, right) with the zero point, then a CONV_2D (or a
    DEPTHWISE_CONV_2D) of ``kernel``; ``pad_output``: the padded tensor is a model output
    too."""
    (t, b, lft, r), (_, h, w, c) = pads, in_shape
    x = tb.T(list(in_shape), "int8", scale=rs.uniform(0.01, 0.1), zp=int(rs.randint(-20, 20)))
    widths = np.array([[0, 0], [t, b], [lft, r], [0, 0]], np.int32)
    p = tb.T([4, 2], "int32", data=widths)
    ph, pw = h + t + b, w + lft + r
    padded = tb.T([1, ph, pw, c], "int8", scale=x.scale[0], zp=x.zp[0])
    cout = c if depthwise else 5
    wshape = [1, *kernel, cout] if depthwise else [cout, *kernel, c]
    wsc = rs.uniform(0.002, 0.02, size=cout).astype(np.float32)
    wt = tb.T(wshape, "int8", scale=wsc, zp=np.zeros(cout, np.int64), axis=3 if depthwise else 0,
              data=rs.randint(-127, 128, size=wshape).astype(np.int8))
    bias = tb.T([cout], "int32", scale=(x.scale[0] * wsc).astype(np.float32),
                zp=np.zeros(cout, np.int64),
                data=rs.randint(-2000, 2000, size=cout).astype(np.int32))
    oh = _out(ph, kernel[0], stride[0], dilation[0], same)
    ow = _out(pw, kernel[1], stride[1], dilation[1], same)
    y = tb.T([1, oh, ow, cout], "int8", scale=rs.uniform(0.05, 0.3), zp=int(rs.randint(-20, 20)))
    padding = tflite.Padding.SAME if same else tflite.Padding.VALID

    def opts(bld):
        if depthwise:
            tflite.DepthwiseConv2DOptionsStart(bld)
            tflite.DepthwiseConv2DOptionsAddPadding(bld, padding)
            tflite.DepthwiseConv2DOptionsAddStrideW(bld, stride[1])
            tflite.DepthwiseConv2DOptionsAddStrideH(bld, stride[0])
            tflite.DepthwiseConv2DOptionsAddDepthMultiplier(bld, 1)
            tflite.DepthwiseConv2DOptionsAddDilationWFactor(bld, dilation[1])
            tflite.DepthwiseConv2DOptionsAddDilationHFactor(bld, dilation[0])
            return tflite.DepthwiseConv2DOptionsEnd(bld)
        tflite.Conv2DOptionsStart(bld)
        tflite.Conv2DOptionsAddPadding(bld, padding)
        tflite.Conv2DOptionsAddStrideW(bld, stride[1])
        tflite.Conv2DOptionsAddStrideH(bld, stride[0])
        tflite.Conv2DOptionsAddDilationWFactor(bld, dilation[1])
        tflite.Conv2DOptionsAddDilationHFactor(bld, dilation[0])
        return tflite.Conv2DOptionsEnd(bld)

    conv = ((tb.BO.DEPTHWISE_CONV_2D, tb.BOPT.DepthwiseConv2DOptions) if depthwise
            else (tb.BO.CONV_2D, tb.BOPT.Conv2DOptions))
    ops = [(tb.BO.PAD, 0, None, [0, 1], [2]), (*conv, opts, [2, 3, 4], [5])]
    return tb.serialize([x, p, padded, wt, bias, y], ops, [0], [2, 5] if pad_output else [5])


def _compile_and_check(data: bytes, plan: bool = False):
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, plan=plan)
    rs = np.random.RandomState(1)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        got, want = cm.run(*xs), tflm_oracle(data, xs)
        for g, w in zip(got, want):
            assert np.array_equal(np.asarray(g).reshape(w.shape), w)
    assert [p.placed_on for p in cm.placement] == ["ethos-u", "ethos-u"], cm.placement
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    return entry["commands"]


def _vela_folds(pads, kernel, stride, dilation) -> bool:
    """Vela's rule for a VALID convolution: each pad at most half the dilated kernel, and a
    leading pad half the kernel, a multiple of the stride, or any where half the kernel is
    within the stride."""
    t, b, lft, r = pads
    dk = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
    lead = all(p == k // 2 or k // 2 <= s or p % s == 0
               for p, k, s in ((t, dk[0], stride[0]), (lft, dk[1], stride[1])))
    return max(t, b) <= dk[0] // 2 and max(lft, r) <= dk[1] // 2 and lead


@settings(max_examples=12, deadline=None)
@given(pads=st.tuples(*[st.integers(0, 3)] * 4), kernel=st.tuples(*[st.integers(1, 5)] * 2),
       stride=st.tuples(*[st.integers(1, 3)] * 2), dilation=st.sampled_from([(1, 1), (2, 1)]),
       depthwise=st.booleans(), plan=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_a_pad_before_a_valid_convolution_folds_as_vela_folds_it(pads, kernel, stride, dilation,
                                                                  depthwise, plan, seed):
    rs = np.random.RandomState(seed)
    data = pad_conv_model(rs, (1, 9, 8, 3), pads, kernel, stride, dilation,
                          depthwise=depthwise)
    commands = _compile_and_check(data, plan)
    copies = commands.get("NPU_OP_POOL", 0)
    folds = _vela_folds(pads, kernel, stride, dilation)
    # folded: the convolution alone; else the PAD's copies (its interior and borders) first
    assert (copies == 0) == (folds or not any(pads)), (pads, commands)


@pytest.mark.parametrize("plan", [False, True])
def test_tfs_export_of_a_strided_same_convolution_is_one_convolution(plan):
    """TF writes a SAME convolution of stride 2 as PAD then VALID: one NPU convolution with
    its padding, planned or not."""
    data = pad_conv_model(np.random.RandomState(3), (1, 8, 8, 4), (0, 1, 0, 1), (3, 3), (2, 2))
    commands = _compile_and_check(data, plan)
    assert commands.get("NPU_OP_POOL", 0) == 0 and commands["NPU_OP_CONV"] == 1, commands


def test_a_pad_folds_only_within_half_the_kernel_with_the_convolutions_own_padding():
    """A SAME 5x5 convolution pads 2 itself: a PAD of 1 more would make 3, beyond half the
    kernel, so it stays its copies; before a VALID 5x5 the same PAD folds."""
    rs = np.random.RandomState(4)
    commands = _compile_and_check(pad_conv_model(rs, (1, 6, 6, 2), (1, 1, 1, 1), (5, 5), (1, 1),
                                                 same=True))
    assert commands.get("NPU_OP_POOL", 0) > 0, commands
    commands = _compile_and_check(pad_conv_model(rs, (1, 6, 6, 2), (1, 0, 1, 0), (5, 5), (1, 1),
                                                 same=False))
    assert commands.get("NPU_OP_POOL", 0) == 0, commands


def test_a_pad_the_model_also_outputs_is_not_folded():
    """The padded tensor is needed itself: the PAD stays its copies."""
    data = pad_conv_model(np.random.RandomState(5), (1, 6, 6, 3), (1, 1, 1, 1), (3, 3), (1, 1),
                          pad_output=True)
    commands = _compile_and_check(data)
    assert commands.get("NPU_OP_POOL", 0) > 0, commands
