"""Operand layouts of the x86 dot-product kernels: weights packed into the vectors a
dot-product instruction takes, and a conv's input padded or laid out window row by window row
so that the kernel reads it with no bounds check. Shared by the AVX-512 VNNI forms
(``compute.te_ops``) and the AVX2 ones (``x86_avx2``), so that neither needs the other."""
from __future__ import annotations

import numpy as np
from tvm import te, tirx

_INT32 = np.iinfo(np.int32)


def dot_weights(wk: np.ndarray, bias: np.ndarray, offset: int, lanes: int, depth: int,
                dtype) -> tuple[np.ndarray, np.ndarray] | None:
    """``wk`` (reduction x outputs) laid out for a dot-product instruction as ``(OC/lanes,
    K/depth, lanes * depth)`` of ``dtype``, one vector = ``depth`` consecutive reduction
    elements of ``lanes`` outputs, the outputs padded with zero weights to whole vectors; and
    the bias less ``offset * sum(w)``, the constant the instruction's operand coding adds to
    every product. None when that bias leaves int32."""
    k, co = wk.shape
    co_p = -(-co // lanes) * lanes
    padded = np.zeros((k, co_p), dtype)
    padded[:, :co] = wk
    packed = padded.reshape(k // depth, depth, co_p // lanes, lanes)
    packed = np.ascontiguousarray(packed.transpose(2, 0, 3, 1)).reshape(
        co_p // lanes, k // depth, lanes * depth)
    corrected = bias.astype(np.int64) - offset * wk.astype(np.int64).sum(axis=0)
    if corrected.min() < _INT32.min or corrected.max() > _INT32.max:
        return None
    return packed, corrected.astype(np.int32)


def conv_window(op):
    """``(n, h, w, oh, ow, sh, sw, dh, dw, pt, pl, rows, cols)``: the geometry of a conv, with
    ``rows`` x ``cols`` the input rows and columns its windows span from ``(-pt, -pl)``."""
    kh, kw, _cpg, _co = op.weights.shape
    n_, h_, w_, _ = op.in_shapes[0]
    _, oh_, ow_, _ = op.out_shape
    sh, sw = op.attrs["strides"]
    dh, dw = op.attrs["dilation"]
    pt, pl = op.attrs["padding"][0], op.attrs["padding"][1]
    rows = (oh_ - 1) * sh + (kh - 1) * dh + 1
    cols = (ow_ - 1) * sw + (kw - 1) * dw + 1
    return n_, h_, w_, oh_, ow_, sh, sw, dh, dw, pt, pl, rows, cols


def clamped(v, size: int):
    """``v`` clamped into ``[0, size)``: a padded read's index stays inside the input even
    where the vectorizer evaluates both sides of its ``if_then_else``."""
    return tirx.max(tirx.min(v, tirx.const(int(size) - 1, "int32")), tirx.const(0, "int32"))


def window_pad_stage(op, x, code, fill, name: str):
    """The input of a conv padded to the rows and columns its windows span, as the kernel's
    operand type: ``code(x)`` inside, ``fill`` (the zero point's code) outside. A dot-product
    form reads it with no bounds check."""
    n_, h_, w_, _oh, _ow, _sh, _sw, _dh, _dw, pt, pl, rows, cols = conv_window(op)

    def pad_fn(n, i, j, c):
        ih, iw = i - pt, j - pl
        inside = tirx.all(ih >= 0, ih < h_, iw >= 0, iw < w_)
        return tirx.if_then_else(inside, code(x[n, clamped(ih, h_), clamped(iw, w_), c]),
                                 fill)

    return te.compute((n_, rows, cols, int(x.shape[3])), pad_fn, name=name)


def window_im2col_stage(op, x, cs: int, code, fill, name: str):
    """Each window row of a conv laid out along one axis, ``(kw, cin)`` padded to ``cs`` (an
    im2col along the width only), as the kernel's operand type (see window_pad_stage); the
    weights of the padded positions are zero (:func:`window_row_weights`)."""
    _kh, kw, cin, _co = op.weights.shape
    n_, h_, w_, _oh, ow_, _sh, sw, _dh, dw, pt, pl, rows, _cols = conv_window(op)

    def col_fn(n, i, j, k):
        ih, iw = i - pt, j * sw + (k // cin) * dw - pl
        inside = tirx.all(k < kw * cin, ih >= 0, ih < h_, iw >= 0, iw < w_)
        return tirx.if_then_else(
            inside, code(x[n, clamped(ih, h_), clamped(iw, w_), k % cin]), fill)

    return te.compute((n_, rows, ow_, cs), col_fn, name=name)


def window_row_weights(op, cs: int) -> np.ndarray:
    """``(kh * cs, co)`` weights of a conv whose window rows are read as ``cs`` elements:
    ``kw * cin`` real ones, then zeros."""
    kh, kw, cin, co = op.weights.shape
    wk = np.zeros((kh, cs, co), np.int8)
    wk[:, : kw * cin] = op.weights.reshape(kh, kw * cin, co)
    return wk.reshape(kh * cs, co)
