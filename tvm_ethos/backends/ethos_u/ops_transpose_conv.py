"""TRANSPOSE_CONV on the NPU as Vela lowers it: a stride-1 convolution with the weights
rotated by 180 degrees over the IFM, upscaled for a stride of 2 by the NPU's zero-inserting
resampling (each element followed by a zero row and column), and padded so that every
output reads the taps TFLite's kernel scatters to it.

With TFLite's (top, left, bottom, right) output cropping ``p`` and kernel ``k``, the
convolution pads ``k - 1 - p`` before; after, whatever the last output reads past the
upscaled IFM (its trailing zero row and column included), which is more than ``k - 1 - p``
where TFLite's output is longer than the taps reach (SAME with a kernel below the stride:
those rows are the bias alone). A kernel below the stride runs padded with zero taps up to
the stride, so that every output row and column reads an input row or column: a planner
stripe of the inserted zeros alone would read no input, which the NPU cannot (its IFM
extent is the window span less the padding). The upscale doubles both axes: Vela also takes
a width stride of 2 over a single row with a kernel of one row (its "2x1"), whose one output
row reads the first upscaled row only, and a height stride of 2 over a single column alike
(its "1x2")."""
from __future__ import annotations

import dataclasses

import numpy as np

from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, conv_op, conv_scales, weights_ohwi
from tvm_ethos.backends.ethos_u.stream_base import vela_api

#: the (height, width) strides the NPU runs on any input: 1 (no resampling) and 2 (its 2x
#: zero-inserting upscale)
STRIDES = ((1, 1), (2, 2))
#: Vela's "2x1" and "1x2" (width x height): a stride of 2 along one axis where the input and
#: the kernel are 1 long along the other (axis 0: height, 1: width)
ONE_LONG_STRIDES = {(1, 2): 0, (2, 1): 1}


def stride_refusal(q) -> str:
    """Why Vela's strides rule refuses ``q``, or ``""``."""
    strides = tuple(q.attrs["strides"])
    if strides in STRIDES:
        return ""
    _, ih, iw, _ = (int(v) for v in q.in_shapes[0])
    kh, kw = (int(v) for v in q.weights.shape[:2])
    axis = ONE_LONG_STRIDES.get(strides)
    if axis is not None and (ih, iw)[axis] == 1 and (kh, kw)[axis] == 1:
        return ""
    return (f"transpose conv strides {strides} (height, width) over a {ih}x{iw} input by a "
            f"{kh}x{kw} kernel; the NPU takes 1x1 and 2x2, (1, 2) over one row by a one-row "
            "kernel and (2, 1) over one column by a one-column kernel")


def shape_refusal(q) -> str:
    """Why Vela's output shape rule refuses ``q`` (SAME: input times stride; VALID: plus
    the kernel less the stride where the kernel is longer), or ``""``: the NPU's upscale
    gives that many rows and columns."""
    kh, kw = (int(v) for v in q.weights.shape[:2])
    sh, sw = (int(v) for v in q.attrs["strides"])
    _, ih, iw, _ = (int(v) for v in q.in_shapes[0])
    _, oh, ow, _ = (int(v) for v in q.out_shape)
    same = (ih * sh, iw * sw)
    valid = (ih * sh + max(kh - sh, 0), iw * sw + max(kw - sw, 0))
    if (oh, ow) in (same, valid):
        return ""
    return (f"transpose conv of {ih}x{iw} to {oh}x{ow} by strides {(sh, sw)}; the NPU's "
            f"upscale gives {same[0]}x{same[1]} (SAME) or {valid[0]}x{valid[1]} (VALID)")


def upscaled(q) -> bool:
    """Whether the convolution reads the IFM through the 2x zero-inserting upscale."""
    return 2 in tuple(q.attrs["strides"])


def npu_kernel(q) -> tuple[int, int]:
    """(height, width) of the kernel the NPU runs: TFLite's, at least the stride."""
    return tuple(max(int(k), int(s)) for k, s in zip(q.weights.shape[:2], q.attrs["strides"]))


def npu_weights(q) -> np.ndarray:
    """TFLite's HWIO weights with zero taps after them up to :func:`npu_kernel` (a zero tap
    adds nothing to the output rows it reaches): codes of the weights' zero point, which the
    stream subtracts (a uint8 kernel's is not 0)."""
    (kh, kw), w = npu_kernel(q), np.asarray(q.weights)
    zp = np.asarray(q.w_zp if q.w_zp is not None else 0).ravel()
    out = np.empty((kh, kw, *w.shape[2:]), w.dtype)
    out[...] = np.broadcast_to(zp, (w.shape[3],)).astype(w.dtype)
    out[:w.shape[0], :w.shape[1]] = w
    return out


def conv_padding(q) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) padding of the stride-1 convolution: before, negative
    where the kernel is shorter than TFLite's cropping (the check refuses it); after, what
    the last output row or column reads past the upscaled input (0 when it reads less)."""
    kh, kw = npu_kernel(q)
    pt, pl = (int(v) for v in q.attrs["padding"][:2])
    step = 2 if upscaled(q) else 1
    _, ih, iw, _ = (int(v) for v in q.in_shapes[0])
    _, oh, ow, _ = (int(v) for v in q.out_shape)
    # the last output reads upscaled rows up to oh - 1 - top + kh - 1, of ih * step
    return kh - 1 - pt, kw - 1 - pl, max(oh + pt - ih * step, 0), max(ow + pl - iw * step, 0)


def as_conv(q):
    """The CONV_2D the NPU runs: :func:`npu_weights` rotated, stride 1,
    :func:`conv_padding`."""
    return dataclasses.replace(
        q, kind=Op.CONV2D, weights=np.ascontiguousarray(npu_weights(q)[::-1, ::-1]),
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
    kh, kw = npu_kernel(q)
    top, left = kh - 1 - int(q.attrs["padding"][0]), kw - 1 - int(q.attrs["padding"][1])
    step = 2 if upscaled(q) else 1
    ry0, ry1, pt, pb = _axis_window(*rows, kh, top, step, input_hw[0])
    rx0, rx1, pl, pr = _axis_window(*cols, kw, left, step, input_hw[1])
    return (ry0, ry1), (rx0, rx1), (pt, pl, pb, pr)
