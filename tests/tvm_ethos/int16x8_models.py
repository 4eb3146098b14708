"""TFLite 16x8 models (int16 activations with zero point 0, int8 weights, an int64 bias) for
the tests and the benchmark of CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED on int16: one
operator (:func:`model_16x8`) or a chain of convolutions (:func:`chain_16x8`)."""
from __future__ import annotations

import numpy as np
import tflite
import tflite_builder as tb

KINDS = ("conv", "depthwise", "fc")


def f32(v: float) -> float:
    return float(np.float32(v))


def model_16x8(kind: str, rs, in_shape=(1, 6, 6, 4), cout=5, kernel=(3, 3), stride=(1, 1),
               padding="SAME", act=None, in_scale=5e-4, out_scale=2e-3, w_scales=None,
               bias_dtype="int64", bias_range=200000, zero_point=0,
               fc_per_channel=False) -> bytes:
    """One 16x8 ``kind`` ("conv", "depthwise" or "fc": then ``in_shape`` is (rows, depth) and
    ``cout`` the units), random int8 weights and bias, per-channel weight scales ``w_scales``
    (random when None; one scale for FULLY_CONNECTED unless ``fc_per_channel``)."""
    depthwise, fc = kind == "depthwise", kind == "fc"
    x = tb.T(list(in_shape), "int16", scale=f32(in_scale), zp=zero_point)
    if fc:
        cout_ = cout
        wshape, axis = [cout, in_shape[-1]], 0
    else:
        cout_ = in_shape[3] if depthwise else cout
        wshape = [1, *kernel, cout_] if depthwise else [cout_, *kernel, in_shape[3]]
        axis = 3 if depthwise else 0
    n_scales = 1 if fc and not fc_per_channel else cout_
    wsc = np.asarray(w_scales if w_scales is not None else rs.uniform(0.002, 0.02, n_scales),
                     np.float32)
    w = tb.T(wshape, "int8", scale=wsc, zp=np.zeros(wsc.size, np.int64),
             data=rs.randint(-127, 128, size=wshape).astype(np.int8), axis=axis)
    bsc = np.broadcast_to(np.float32(in_scale) * wsc, (cout_,)).astype(np.float32)
    bias = tb.T([cout_], bias_dtype, scale=bsc, zp=np.zeros(cout_, np.int64),
                data=rs.randint(-bias_range, bias_range + 1, size=cout_).astype(bias_dtype))
    if fc:
        out_shape = [in_shape[0], cout_]
    else:
        def extent(n, k, s):
            return -(-n // s) if padding == "SAME" else (n - k) // s + 1
        out_shape = [1, extent(in_shape[1], kernel[0], stride[0]),
                     extent(in_shape[2], kernel[1], stride[1]), cout_]
    y = tb.T(out_shape, "int16", scale=f32(out_scale), zp=zero_point)
    pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID

    def opts(b):
        if fc:
            tflite.FullyConnectedOptionsStart(b)
            tflite.FullyConnectedOptionsAddFusedActivationFunction(b, tb.ACT[act])
            return tflite.FullyConnectedOptionsEnd(b)
        name = "DepthwiseConv2DOptions" if depthwise else "Conv2DOptions"
        getattr(tflite, f"{name}Start")(b)
        getattr(tflite, f"{name}AddPadding")(b, pad)
        getattr(tflite, f"{name}AddStrideW")(b, stride[1])
        getattr(tflite, f"{name}AddStrideH")(b, stride[0])
        getattr(tflite, f"{name}AddFusedActivationFunction")(b, tb.ACT[act])
        getattr(tflite, f"{name}AddDilationWFactor")(b, 1)
        getattr(tflite, f"{name}AddDilationHFactor")(b, 1)
        if depthwise:
            tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, 1)
        return getattr(tflite, f"{name}End")(b)

    code, otype = {"conv": (tb.BO.CONV_2D, tb.BOPT.Conv2DOptions),
                   "depthwise": (tb.BO.DEPTHWISE_CONV_2D, tb.BOPT.DepthwiseConv2DOptions),
                   "fc": (tb.BO.FULLY_CONNECTED, tb.BOPT.FullyConnectedOptions)}[kind]
    return tb.build([x, w, bias, y], [0], [3], code, otype, opts, op_inputs=[0, 1, 2])


def _weighted(rs, kind: str, cin: int, cout: int, k: int, in_scale: float, first: int,
              tensors: list) -> list[int]:
    """Append a ``kind`` ("conv" or "depthwise") operator's weights and int64 bias to
    ``tensors``; their indices."""
    depthwise = kind == "depthwise"
    wshape = [1, k, k, cin] if depthwise else [cout, k, k, cin]
    n = cin if depthwise else cout
    wsc = rs.uniform(0.002, 0.02, n).astype(np.float32)
    tensors.append(tb.T(wshape, "int8", scale=wsc, zp=np.zeros(n, np.int64),
                        data=rs.randint(-127, 128, size=wshape).astype(np.int8),
                        axis=3 if depthwise else 0))
    tensors.append(tb.T([n], "int64", scale=(np.float32(in_scale) * wsc).astype(np.float32),
                        zp=np.zeros(n, np.int64),
                        data=rs.randint(-100000, 100001, size=n).astype(np.int64)))
    return [first, first + 1]


def chain_16x8(rs, shape=(1, 16, 16, 8), width=16) -> bytes:
    """CONV_2D 3x3 -> DEPTHWISE_CONV_2D 3x3 stride 2 -> CONV_2D 1x1 (RELU) -> FULLY_CONNECTED,
    every activation int16: a network the planner can cascade, its feature maps int16."""
    h, w, c = shape[1:]
    scales = [f32(v) for v in rs.uniform(2e-4, 2e-3, 5)]
    maps = [(1, h, w, c), (1, h, w, width), (1, h // 2, w // 2, width),
            (1, h // 2, w // 2, width)]
    tensors = [tb.T(list(s), "int16", scale=scales[i], zp=0) for i, s in enumerate(maps)]
    units = 10
    tensors.append(tb.T([1, units], "int16", scale=scales[4], zp=0))
    ops = []
    spec = [("conv", c, width, 3, 1, None), ("depthwise", width, width, 3, 2, None),
            ("conv", width, width, 1, 1, "relu")]
    for i, (kind, cin, cout, k, s, act) in enumerate(spec):
        params = _weighted(rs, kind, cin, cout, k, scales[i], len(tensors), tensors)
        name = "DepthwiseConv2DOptions" if kind == "depthwise" else "Conv2DOptions"

        def opts(b, name=name, s=s, act=act, kind=kind):
            getattr(tflite, f"{name}Start")(b)
            getattr(tflite, f"{name}AddPadding")(b, tflite.Padding.SAME)
            getattr(tflite, f"{name}AddStrideW")(b, s)
            getattr(tflite, f"{name}AddStrideH")(b, s)
            getattr(tflite, f"{name}AddFusedActivationFunction")(b, tb.ACT[act])
            getattr(tflite, f"{name}AddDilationWFactor")(b, 1)
            getattr(tflite, f"{name}AddDilationHFactor")(b, 1)
            if kind == "depthwise":
                tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, 1)
            return getattr(tflite, f"{name}End")(b)

        code, otype = ((tb.BO.DEPTHWISE_CONV_2D, tb.BOPT.DepthwiseConv2DOptions)
                       if kind == "depthwise" else (tb.BO.CONV_2D, tb.BOPT.Conv2DOptions))
        ops.append((code, otype, opts, [i] + params, [i + 1]))
    depth = maps[3][1] * maps[3][2] * width
    wsc = f32(rs.uniform(0.002, 0.02))
    fc_w = len(tensors)
    tensors.append(tb.T([units, depth], "int8", scale=wsc, zp=0,
                        data=rs.randint(-127, 128, size=(units, depth)).astype(np.int8)))
    tensors.append(tb.T([units], "int64", scale=f32(np.float32(scales[3]) * np.float32(wsc)),
                        zp=0, data=rs.randint(-100000, 100001, size=units).astype(np.int64)))

    def fc_opts(b):
        tflite.FullyConnectedOptionsStart(b)
        return tflite.FullyConnectedOptionsEnd(b)

    ops.append((tb.BO.FULLY_CONNECTED, tb.BOPT.FullyConnectedOptions, fc_opts,
                [3, fc_w, fc_w + 1], [4]))
    return tb.serialize(tensors, ops, [0], [4])
