"""TRANSPOSE_CONV models of int16 activations (TFLite Micro's 16x8 kernel: int8 weights, an
int64 bias or none, zero points 0) and of uint8 (LiteRT's kernel: uint8 weights of
one scale and zero point, an int32 bias or none), for tests/tvm_ethos/
test_transpose_conv_16x8_uint8.py."""
from __future__ import annotations

import numpy as np
import tflite
import tflite_builder as tb

#: each form's weight type and the bias types its kernel reads
WEIGHTS = {"int16": "int8", "uint8": "uint8"}
BIASES = {"int16": ("int64", None), "uint8": ("int32", None)}


def output_hw(shape, kernel, stride, padding: str) -> tuple[int, int]:
    """TFLite's converter's output height and width: SAME input x stride, VALID plus the
    kernel less the stride where the kernel is longer."""
    (_, h, w, _), (kh, kw), (sh, sw) = shape, kernel, stride
    if padding == "SAME":
        return h * sh, w * sw
    return h * sh + max(kh - sh, 0), w * sw + max(kw - sw, 0)


def transpose_conv(dtype: str, rs, shape=(1, 4, 4, 4), cout=6, kernel=(3, 3), stride=(2, 2),
                   padding="SAME", act=None, in_q=(2.0 ** -12, 0), out_q=(2.0 ** -10, 0),
                   w_scales=None, w_zp=0, bias="int64", bias_range=2000,
                   weights_dtype=None, weights=None) -> bytes:
    """One TRANSPOSE_CONV of a ``dtype`` ("int16" or "uint8") input of ``shape`` to ``cout``
    channels: random OHWI weights of every code (``weights_dtype``, the form's by default;
    ``w_scales`` one per output channel or one for all, random when None: per channel for
    int16, one for uint8), a random ``bias``
    of that type (or none) within ``bias_range`` of 0, the output size TFLite's converter
    writes; ``weights`` the OHWI codes where given."""
    wtype = weights_dtype or WEIGHTS[dtype]
    (kh, kw), (sh, sw) = kernel, stride
    oh, ow = output_hw(shape, kernel, stride, padding)
    per_channel = cout if dtype == "int16" else 1    # LiteRT's uint8 kernel reads one scale
    wsc = np.asarray(w_scales if w_scales is not None else rs.uniform(0.002, 0.02, per_channel),
                     np.float32).ravel()
    info = np.iinfo(wtype)
    wt = tb.T([cout, kh, kw, shape[3]], wtype, scale=wsc,
              zp=np.full(wsc.size, w_zp, np.int64),
              data=(rs.randint(info.min, info.max + 1, (cout, kh, kw, shape[3]))
                    if weights is None else np.asarray(weights)).astype(wtype))
    x = tb.T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    y = tb.T([shape[0], oh, ow, cout], dtype, scale=out_q[0], zp=out_q[1])
    out_shape = tb.T([4], "int32", data=np.asarray([shape[0], oh, ow, cout], np.int32))
    tensors, op_inputs = [out_shape, wt, x, y], [0, 1, 2]
    if bias is not None:
        bsc = (np.float32(in_q[0]) * wsc).astype(np.float32)
        tensors.append(tb.T([cout], bias, scale=bsc, zp=np.zeros(bsc.size, np.int64),
                            data=rs.randint(-bias_range, bias_range + 1, cout).astype(bias)))
        op_inputs.append(4)
    pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID

    def opts(b):
        tflite.TransposeConvOptionsStart(b)
        tflite.TransposeConvOptionsAddPadding(b, pad)
        tflite.TransposeConvOptionsAddStrideH(b, sh)
        tflite.TransposeConvOptionsAddStrideW(b, sw)
        tflite.TransposeConvOptionsAddFusedActivationFunction(b, tb.ACT[act])
        return tflite.TransposeConvOptionsEnd(b)

    return tb.serialize(tensors, [(tb.BO.TRANSPOSE_CONV, tb.BOPT.TransposeConvOptions, opts,
                                   op_inputs, [3])], [2], [3])


def extreme_inputs(shape, dtype: str, rs) -> list[np.ndarray]:
    """Inputs at the type's ends (all lowest, all highest, alternating) and one of random
    codes: the largest sums either way and the ordinary ones."""
    info = np.iinfo(dtype)
    alternating = np.where(np.indices(shape).sum(axis=0) % 2 == 0, info.min, info.max)
    return [np.full(shape, info.min, dtype), np.full(shape, info.max, dtype),
            alternating.astype(dtype),
            rs.randint(info.min, info.max + 1, shape).astype(dtype)]
