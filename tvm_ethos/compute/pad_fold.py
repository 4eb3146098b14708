"""A PAD folded into the convolution that reads it, as Vela's ``replace_pad_by_hw_pad`` does.

A PAD that fills with its zero point and pads only height and width, read by nothing but a
CONV_2D or DEPTHWISE_CONV_2D, is the same as that convolution reading the PAD's input with
the padding added to its own: a padded element is the zero point, which contributes nothing to
the sum (TFLite's kernels subtract the input offset; the NPU pads with the zero point). So the
convolution is lowered with the larger padding and the PAD moves no data (no copy, no padded
tensor). The NPU takes it within Vela's limits: each side at most half the dilated kernel (a
larger pad would give an output whose window is all padding), and a leading pad that keeps
the window on the rows and columns the stride walks. Trailing padding no window reaches stays
in the convolution's padding: the stream generators give the NPU only the padding its windows
read (``npu_ops.read_padding``, and the planned stream per stripe).
"""
from __future__ import annotations

import dataclasses

from ethos_arch.ops import Op
from tvm_ethos.patterns import QOp

#: the operators whose padding a PAD folds into
FOLD_INTO = (Op.CONV2D, Op.DEPTHWISE_CONV2D)
#: the largest padding of one side the NPU's padding registers hold
MAX_PAD = 127


def _leading_ok(pad: int, stride: int, kernel: int) -> bool:
    """Vela's rule for the top and left pads: where half the kernel exceeds the stride, a
    leading pad other than half the kernel must be a multiple of the stride."""
    half = kernel // 2
    return pad == half or half <= stride or pad % stride == 0


def spatial_pads(pad: QOp) -> tuple[int, int, int, int] | None:
    """(top, left, bottom, right) of a PAD of an NHWC tensor that fills with its zero point
    and pads no batch or depth; None for any other PAD."""
    widths = tuple(tuple(int(v) for v in w) for w in pad.attrs.get("pad_width", ()))
    if pad.kind != Op.PAD or len(widths) != 4 or widths[0] != (0, 0) or widths[3] != (0, 0):
        return None
    if pad.out_q is None or not pad.in_q or pad.in_q[0] != pad.out_q:
        return None
    if pad.attrs.get("fill") != pad.out_q[1] or pad.in_dtypes[0] != pad.out_dtype:
        return None
    (top, bottom), (left, right) = widths[1], widths[2]
    return top, left, bottom, right


def fold_pad(pad: QOp, conv: QOp) -> QOp | None:
    """``conv`` reading ``pad``'s input with the PAD in its padding, or None where the NPU
    could not pad that much (see the module docstring)."""
    pads = spatial_pads(pad)
    if pads is None or conv.kind not in FOLD_INTO or conv.in_q[:1] != [pad.out_q]:
        return None
    kh, kw = (int(v) for v in conv.weights.shape[:2])
    dh, dw = conv.attrs["dilation"]
    sh, sw = conv.attrs["strides"]
    dkh, dkw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    padding = tuple(int(a) + b for a, b in zip(conv.attrs["padding"], pads))
    top, left, bottom, right = padding
    if max(top, bottom) > dkh // 2 or max(left, right) > dkw // 2 or max(padding) > MAX_PAD:
        return None
    if not (_leading_ok(top, sh, dkh) and _leading_ok(left, sw, dkw)):
        return None
    return dataclasses.replace(
        conv, in_shapes=[tuple(pad.in_shapes[0])] + list(conv.in_shapes[1:]),
        attrs=dict(conv.attrs, padding=(top, left, bottom, right)))
