"""TRANSPOSE_CONV on the NPU as Vela lowers it: a stride-1 convolution with the weights
rotated by 180 degrees over the IFM, upscaled for a stride of 2 by the NPU's zero-inserting
resampling (each element followed by a zero row and column), and padded so that every
output reads the taps TFLite's kernel scatters to it.

With TFLite's (top, left, bottom, right) output cropping ``p`` and kernel ``k``, the
convolution pads ``k - 1 - p`` before and after; the upscaled IFM's trailing zero row and
column already stand for one row and column of the padding after."""
from __future__ import annotations

import dataclasses

import numpy as np

from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, conv_op, conv_scales, weights_ohwi
from tvm_ethos.backends.ethos_u.stream_base import vela_api

#: the strides the NPU runs: 1 (no resampling) and 2 (its 2x zero-inserting upscale)
STRIDES = ((1, 1), (2, 2))


def upscaled(q) -> bool:
    """Whether the convolution reads the IFM through the 2x zero-inserting upscale."""
    return tuple(q.attrs["strides"]) == (2, 2)


def conv_padding(q) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) padding of the stride-1 convolution (negative where the
    kernel is shorter than TFLite's cropping allows: the check refuses it)."""
    kh, kw = (int(v) for v in q.weights.shape[:2])
    pt, pl, pb, pr = (int(v) for v in q.attrs["padding"])
    extra = 1 if upscaled(q) else 0
    return kh - 1 - pt, kw - 1 - pl, kh - 1 - pb - extra, kw - 1 - pr - extra


def as_conv(q):
    """The CONV_2D the NPU runs: rotated weights, stride 1, :func:`conv_padding`."""
    return dataclasses.replace(
        q, kind=Op.CONV2D, weights=np.ascontiguousarray(q.weights[::-1, ::-1]),
        attrs=dict(q.attrs, strides=(1, 1), dilation=(1, 1), groups=1,
                   padding=conv_padding(q)))


def transpose_conv_op(q, ifm: FmSlot, ofm: FmSlot):
    """The block operation of a TRANSPOSE_CONV: whole, or a stripe's (``ifm`` the input rows
    and columns :func:`transpose_conv_window` gives, its padding in
    ``q.attrs["stripe_padding"]``)."""
    api = vela_api()
    npu = conv_op(as_conv(q), ifm, ofm)
    npu.padding = api.NpuPadding(*q.attrs.get("stripe_padding", conv_padding(q)))
    if upscaled(q):
        npu.ifm_upscale = api.NpuResamplingMode.TRANSPOSE
    return npu


def transpose_conv_constants(q, channels: int) -> tuple[np.ndarray, list]:
    """The rotated OHWI weights and the per-channel scales (those of the transpose conv)."""
    return weights_ohwi(as_conv(q)), conv_scales(q, channels)


def _axis_window(o0: int, o1: int, kernel: int, before: int, step: int,
                 extent: int) -> tuple[int, int, int, int]:
    """Along one axis: the input range [lo, hi) output [o0, o1) reads and the padding before
    and after it. The convolution reads rows ``o - before .. o - before + kernel - 1`` of the
    input upscaled by ``step`` (``extent`` input rows); a range starting on an inserted zero
    starts one later, that zero read as padding (both are the zero point), so that every
    range starts on an input row."""
    lo = o0 - before
    hi = o1 - 1 - before + kernel
    first = max(lo, 0)
    first += first % step
    last = min(hi, extent * step)
    if last <= first:
        raise ValueError(f"output [{o0}, {o1}) reads no input row")
    return first // step, -(-last // step), first - lo, hi - last


def transpose_conv_window(q, rows, cols, input_hw) -> tuple:
    """(input rows, input cols, (top, left, bottom, right)) of a stripe of output ``rows`` x
    ``cols``: what the NPU's convolution over the upscaled input reads of the input, and its
    padding. The upscaled extent between the pads may end on an input row (its trailing zero
    then falls in the bottom or right padding)."""
    kh, kw = (int(v) for v in q.weights.shape[:2])
    top, left, _, _ = conv_padding(q)
    step = 2 if upscaled(q) else 1
    ry0, ry1, pt, pb = _axis_window(*rows, kh, top, step, input_hw[0])
    rx0, rx1, pl, pr = _axis_window(*cols, kw, left, step, input_hw[1])
    return (ry0, ry1), (rx0, rx1), (pt, pl, pb, pr)
