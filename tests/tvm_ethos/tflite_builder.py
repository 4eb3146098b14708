"""Build small int8 TFLite flatbuffers (one operator each) for the operator tests.

Written against the flatbuffer builder functions of the ``tflite`` package. A model is a list of
tensors (name, shape, dtype, quantization, optional constant data) and one operator.
"""
from __future__ import annotations

import flatbuffers
import numpy as np
import tflite

_TYPES = {"float32": tflite.TensorType.FLOAT32, "int8": tflite.TensorType.INT8,
          "int32": tflite.TensorType.INT32, "uint8": tflite.TensorType.UINT8,
          "int16": tflite.TensorType.INT16, "int64": tflite.TensorType.INT64}
_NP = {"float32": np.float32, "int8": np.int8, "int32": np.int32, "uint8": np.uint8,
       "int16": np.int16, "int64": np.int64}
ACT = {None: 0, "relu": 1, "relu_n1_to_1": 2, "relu6": 3}


class T:
    def __init__(self, shape, dtype="int8", scale=None, zp=None, data=None, axis=0,
                 variable=False):
        self.shape, self.dtype, self.data, self.axis = list(shape), dtype, data, axis
        self.variable = variable   # a state tensor (an LSTM's), kept between invocations
        self.scale = None if scale is None else np.atleast_1d(np.asarray(scale, np.float32))
        self.zp = None if zp is None else np.atleast_1d(np.asarray(zp, np.int64))


def _vec_i32(b, vals, start):
    start(b, len(vals))
    for v in reversed(vals):
        b.PrependInt32(int(v))
    return b.EndVector()


def _vec_f32(b, vals):
    b.StartVector(4, len(vals), 4)
    for v in reversed(vals):
        b.PrependFloat32(float(v))
    return b.EndVector()


def _vec_i64(b, vals):
    b.StartVector(8, len(vals), 8)
    for v in reversed(vals):
        b.PrependInt64(int(v))
    return b.EndVector()


def _vec_u8(b, data: bytes):
    b.StartVector(1, len(data), 16)
    b.head = b.head - len(data)
    b.Bytes[b.head:b.head + len(data)] = data
    return b.EndVector()


def serialize(tensors: list[T], ops: list, inputs: list[int], outputs: list[int],
              description: str = "tvm-ethos test") -> bytes:
    """A TFLite flatbuffer of one subgraph: ``ops`` are (builtin code, options type,
    options builder or None, input tensor indices, output tensor indices), in order."""
    b = flatbuffers.Builder(4096)
    bufs = []
    tflite.BufferStart(b)
    bufs.append(tflite.BufferEnd(b))
    tensor_buf = []
    for t in tensors:
        if t.data is not None:
            raw = np.ascontiguousarray(np.asarray(t.data, dtype=_NP[t.dtype])).tobytes()
            dv = _vec_u8(b, raw)
            tflite.BufferStart(b)
            tflite.BufferAddData(b, dv)
        else:
            tflite.BufferStart(b)
        bufs.append(tflite.BufferEnd(b))
        tensor_buf.append(len(bufs) - 1)
    t_offsets = []
    for i, t in enumerate(tensors):
        name = b.CreateString(f"t{i}")
        shape = _vec_i32(b, t.shape, tflite.TensorStartShapeVector)
        q = None
        if t.scale is not None:
            sc = _vec_f32(b, t.scale)
            zp = _vec_i64(b, t.zp)
            tflite.QuantizationParametersStart(b)
            tflite.QuantizationParametersAddScale(b, sc)
            tflite.QuantizationParametersAddZeroPoint(b, zp)
            tflite.QuantizationParametersAddQuantizedDimension(b, t.axis)
            q = tflite.QuantizationParametersEnd(b)
        tflite.TensorStart(b)
        tflite.TensorAddShape(b, shape)
        tflite.TensorAddType(b, _TYPES[t.dtype])
        tflite.TensorAddBuffer(b, tensor_buf[i])
        tflite.TensorAddName(b, name)
        if q is not None:
            tflite.TensorAddQuantization(b, q)
        if t.variable:
            tflite.TensorAddIsVariable(b, True)
        t_offsets.append(tflite.TensorEnd(b))
    codes = []
    for op in ops:
        if op[0] not in codes:
            codes.append(op[0])
    op_offsets = []
    for code, otype, ofn, ins, outs in ops:
        opts = ofn(b) if ofn else None
        oi = _vec_i32(b, ins, tflite.OperatorStartInputsVector)
        oo = _vec_i32(b, outs, tflite.OperatorStartOutputsVector)
        tflite.OperatorStart(b)
        tflite.OperatorAddOpcodeIndex(b, codes.index(code))
        tflite.OperatorAddInputs(b, oi)
        tflite.OperatorAddOutputs(b, oo)
        if opts is not None:
            tflite.OperatorAddBuiltinOptionsType(b, otype)
            tflite.OperatorAddBuiltinOptions(b, opts)
        op_offsets.append(tflite.OperatorEnd(b))
    tflite.SubGraphStartTensorsVector(b, len(t_offsets))
    for o in reversed(t_offsets):
        b.PrependUOffsetTRelative(o)
    tv = b.EndVector()
    gi = _vec_i32(b, inputs, tflite.SubGraphStartInputsVector)
    go = _vec_i32(b, list(outputs), tflite.SubGraphStartOutputsVector)
    tflite.SubGraphStartOperatorsVector(b, len(op_offsets))
    for o in reversed(op_offsets):
        b.PrependUOffsetTRelative(o)
    ov = b.EndVector()
    sname = b.CreateString("main")
    tflite.SubGraphStart(b)
    tflite.SubGraphAddTensors(b, tv)
    tflite.SubGraphAddInputs(b, gi)
    tflite.SubGraphAddOutputs(b, go)
    tflite.SubGraphAddOperators(b, ov)
    tflite.SubGraphAddName(b, sname)
    sg = tflite.SubGraphEnd(b)
    code_offsets = []
    for code in codes:
        tflite.OperatorCodeStart(b)
        tflite.OperatorCodeAddBuiltinCode(b, code)
        tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
        tflite.OperatorCodeAddVersion(b, 1)
        code_offsets.append(tflite.OperatorCodeEnd(b))
    tflite.ModelStartOperatorCodesVector(b, len(code_offsets))
    for o in reversed(code_offsets):
        b.PrependUOffsetTRelative(o)
    ocv = b.EndVector()
    tflite.ModelStartSubgraphsVector(b, 1)
    b.PrependUOffsetTRelative(sg)
    sgv = b.EndVector()
    tflite.ModelStartBuffersVector(b, len(bufs))
    for o in reversed(bufs):
        b.PrependUOffsetTRelative(o)
    bv = b.EndVector()
    desc = b.CreateString(description)
    tflite.ModelStart(b)
    tflite.ModelAddVersion(b, 3)
    tflite.ModelAddOperatorCodes(b, ocv)
    tflite.ModelAddSubgraphs(b, sgv)
    tflite.ModelAddDescription(b, desc)
    tflite.ModelAddBuffers(b, bv)
    m = tflite.ModelEnd(b)
    b.Finish(m, file_identifier=b"TFL3")
    return bytes(b.Output())


def build(
    tensors: list[T],
    inputs: list[int],
    outputs: list[int],
    opcode: int,
    options_type=0,
    options_fn=None,
    op_inputs=None,
    op_outputs=None,
) -> bytes:
    """A one-operator model (see ``serialize``)."""
    op = (opcode, options_type, options_fn,
          op_inputs if op_inputs is not None else inputs,
          op_outputs if op_outputs is not None else outputs)
    return serialize(tensors, [op], inputs, outputs)




# --------------------------------------------------------------------- operator models
BO = tflite.BuiltinOperator
BOPT = tflite.BuiltinOptions


def _qact(rs, shape):
    return T(shape, "int8", scale=rs.uniform(0.01, 0.1), zp=int(rs.randint(-20, 20)))


def conv2d(
    rs,
    in_shape=(1, 8, 8, 4),
    cout=6,
    kernel=(3, 3),
    stride=(1, 1),
    dilation=(1, 1),
    padding="SAME",
    act=None,
    depthwise=False,
    multiplier=1,
    per_channel=True,
):
    cin = in_shape[3]
    x = _qact(rs, in_shape)
    if depthwise:
        cout = cin * multiplier
        wshape = [1, kernel[0], kernel[1], cout]
        qaxis = 3
    else:
        wshape = [cout, kernel[0], kernel[1], cin]
        qaxis = 0
    wdata = rs.randint(-127, 128, size=wshape).astype(np.int8)
    wsc = rs.uniform(0.002, 0.02, size=cout if per_channel else 1).astype(np.float32)
    w = T(wshape, "int8", scale=wsc, zp=np.zeros(wsc.size, np.int64), data=wdata, axis=qaxis)
    bsc = (x.scale[0] * wsc).astype(np.float32)
    bias = T([cout], "int32", scale=np.broadcast_to(bsc, (cout,)), zp=np.zeros(cout, np.int64),
             data=rs.randint(-2000, 2000, size=cout).astype(np.int32))
    pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID
    oh = (
        -(-in_shape[1] // stride[0])
        if padding == "SAME"
        else (in_shape[1] - (kernel[0] - 1) * dilation[0] - 1) // stride[0] + 1
    )
    ow = (
        -(-in_shape[2] // stride[1])
        if padding == "SAME"
        else (in_shape[2] - (kernel[1] - 1) * dilation[1] - 1) // stride[1] + 1
    )
    y = T([1, oh, ow, cout], "int8", scale=rs.uniform(0.05, 0.3), zp=int(rs.randint(-20, 20)))

    def opts(b):
        if depthwise:
            tflite.DepthwiseConv2DOptionsStart(b)
            tflite.DepthwiseConv2DOptionsAddPadding(b, pad)
            tflite.DepthwiseConv2DOptionsAddStrideW(b, stride[1])
            tflite.DepthwiseConv2DOptionsAddStrideH(b, stride[0])
            tflite.DepthwiseConv2DOptionsAddDepthMultiplier(b, multiplier)
            tflite.DepthwiseConv2DOptionsAddFusedActivationFunction(b, ACT[act])
            tflite.DepthwiseConv2DOptionsAddDilationWFactor(b, dilation[1])
            tflite.DepthwiseConv2DOptionsAddDilationHFactor(b, dilation[0])
            return tflite.DepthwiseConv2DOptionsEnd(b)
        tflite.Conv2DOptionsStart(b)
        tflite.Conv2DOptionsAddPadding(b, pad)
        tflite.Conv2DOptionsAddStrideW(b, stride[1])
        tflite.Conv2DOptionsAddStrideH(b, stride[0])
        tflite.Conv2DOptionsAddFusedActivationFunction(b, ACT[act])
        tflite.Conv2DOptionsAddDilationWFactor(b, dilation[1])
        tflite.Conv2DOptionsAddDilationHFactor(b, dilation[0])
        return tflite.Conv2DOptionsEnd(b)

    return build(
        [x, w, bias, y],
        [0],
        [3],
        BO.DEPTHWISE_CONV_2D if depthwise else BO.CONV_2D,
        BOPT.DepthwiseConv2DOptions if depthwise else BOPT.Conv2DOptions,
        opts,
        op_inputs=[0, 1, 2],
    )


def fully_connected(rs, k=32, n=10, act=None):
    x = _qact(rs, (1, k))
    w = T(
        [n, k],
        "int8",
        scale=rs.uniform(0.002, 0.02),
        zp=0,
        data=rs.randint(-127, 128, size=(n, k)).astype(np.int8),
    )
    bias = T(
        [n],
        "int32",
        scale=float(x.scale[0] * w.scale[0]),
        zp=0,
        data=rs.randint(-2000, 2000, size=n).astype(np.int32),
    )
    y = T([1, n], "int8", scale=rs.uniform(0.05, 0.3), zp=int(rs.randint(-20, 20)))

    def opts(b):
        tflite.FullyConnectedOptionsStart(b)
        tflite.FullyConnectedOptionsAddFusedActivationFunction(b, ACT[act])
        return tflite.FullyConnectedOptionsEnd(b)

    return build(
        [x, w, bias, y],
        [0],
        [3],
        BO.FULLY_CONNECTED,
        BOPT.FullyConnectedOptions,
        opts,
        op_inputs=[0, 1, 2],
    )


def pool(
    rs, kind="avg", in_shape=(1, 9, 9, 8), size=(3, 3), stride=(2, 2), padding="VALID", act=None
):
    x = _qact(rs, in_shape)
    pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID
    oh = (
        -(-in_shape[1] // stride[0])
        if padding == "SAME"
        else (in_shape[1] - size[0]) // stride[0] + 1
    )
    ow = (
        -(-in_shape[2] // stride[1])
        if padding == "SAME"
        else (in_shape[2] - size[1]) // stride[1] + 1
    )
    y = T([1, oh, ow, in_shape[3]], "int8", scale=x.scale, zp=x.zp)

    def opts(b):
        tflite.Pool2DOptionsStart(b)
        tflite.Pool2DOptionsAddPadding(b, pad)
        tflite.Pool2DOptionsAddStrideW(b, stride[1])
        tflite.Pool2DOptionsAddStrideH(b, stride[0])
        tflite.Pool2DOptionsAddFilterWidth(b, size[1])
        tflite.Pool2DOptionsAddFilterHeight(b, size[0])
        tflite.Pool2DOptionsAddFusedActivationFunction(b, ACT[act])
        return tflite.Pool2DOptionsEnd(b)

    return build(
        [x, y],
        [0],
        [1],
        BO.AVERAGE_POOL_2D if kind == "avg" else BO.MAX_POOL_2D,
        BOPT.Pool2DOptions,
        opts,
    )


def binary(rs, kind="add", a_shape=(1, 4, 4, 8), b_shape=(1, 4, 4, 8), act=None):
    a, bb = _qact(rs, a_shape), _qact(rs, b_shape)
    out_shape = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    y = T(out_shape, "int8", scale=rs.uniform(0.05, 0.2), zp=int(rs.randint(-20, 20)))

    def opts(b):
        if kind == "add":
            tflite.AddOptionsStart(b)
            tflite.AddOptionsAddFusedActivationFunction(b, ACT[act])
            return tflite.AddOptionsEnd(b)
        tflite.MulOptionsStart(b)
        tflite.MulOptionsAddFusedActivationFunction(b, ACT[act])
        return tflite.MulOptionsEnd(b)

    return build([a, bb, y], [0, 1], [2], BO.ADD if kind == "add" else BO.MUL,
                 BOPT.AddOptions if kind == "add" else BOPT.MulOptions, opts)


def mean(rs, in_shape=(1, 6, 6, 8)):
    x = _qact(rs, in_shape)
    axis = T([2], "int32", data=np.array([1, 2], np.int32))
    y = T([1, 1, 1, in_shape[3]], "int8", scale=rs.uniform(0.01, 0.1), zp=int(rs.randint(-20, 20)))

    def opts(b):
        tflite.ReducerOptionsStart(b)
        tflite.ReducerOptionsAddKeepDims(b, True)
        return tflite.ReducerOptionsEnd(b)

    return build([x, axis, y], [0], [2], BO.MEAN, BOPT.ReducerOptions, opts, op_inputs=[0, 1])


def softmax(rs, n=10, shape=None, beta=1.0, in_q=None, dtype="int8", out_q=None):
    """SOFTMAX over the last axis of ``shape`` (default ``(1, n)``); ``in_q`` (scale, zp);
    ``dtype`` int8 or uint8 (then ``in_q`` is required); ``out_q`` defaults to the one TFLite
    requires, (1/256, lowest code)."""
    shape = tuple(shape or (1, n))
    x = _qact(rs, shape) if in_q is None else T(shape, dtype, scale=in_q[0], zp=in_q[1])
    out_q = out_q or (1 / 256, -128 if dtype == "int8" else 0)
    y = T(list(shape), dtype, scale=out_q[0], zp=out_q[1])

    def opts(b):
        tflite.SoftmaxOptionsStart(b)
        tflite.SoftmaxOptionsAddBeta(b, beta)
        return tflite.SoftmaxOptionsEnd(b)

    return build([x, y], [0], [1], BO.SOFTMAX, BOPT.SoftmaxOptions, opts)


#: output quantization TFLite's converter gives LOGISTIC and TANH (the int8 kernels' tables
#: take any, and the tests use others too)
ACTIVATION_OUT_Q = {"sigmoid": (1 / 256, -128), "tanh": (1 / 128, 0)}


def activation(kind, shape=(1, 4, 4, 8), in_q=(0.05, 3), out_q=None, alpha=0.2, dtype="int8"):
    """One LOGISTIC / TANH / LEAKY_RELU operator; ``in_q`` / ``out_q`` are (scale, zero point)."""
    out_q = out_q or ACTIVATION_OUT_Q.get(kind, (0.04, -2))
    x = T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    y = T(list(shape), dtype, scale=out_q[0], zp=out_q[1])
    if kind == "leaky_relu":
        def opts(b):
            tflite.LeakyReluOptionsStart(b)
            tflite.LeakyReluOptionsAddAlpha(b, alpha)
            return tflite.LeakyReluOptionsEnd(b)

        return build([x, y], [0], [1], BO.LEAKY_RELU, BOPT.LeakyReluOptions, opts)
    return build([x, y], [0], [1], {"sigmoid": BO.LOGISTIC, "tanh": BO.TANH}[kind])


def float_conv(rs):
    x = T([1, 8, 8, 3], "float32")
    w = T([4, 3, 3, 3], "float32", data=rs.randn(4, 3, 3, 3).astype(np.float32))
    bias = T([4], "float32", data=rs.randn(4).astype(np.float32))
    y = T([1, 8, 8, 4], "float32")

    def opts(b):
        tflite.Conv2DOptionsStart(b)
        tflite.Conv2DOptionsAddPadding(b, tflite.Padding.SAME)
        tflite.Conv2DOptionsAddStrideW(b, 1)
        tflite.Conv2DOptionsAddStrideH(b, 1)
        return tflite.Conv2DOptionsEnd(b)

    return build(
        [x, w, bias, y], [0], [3], BO.CONV_2D, BOPT.Conv2DOptions, opts, op_inputs=[0, 1, 2]
    )


def resize_bilinear(
    in_shape=(1, 4, 4, 3),
    size=(8, 8),
    align_corners=False,
    half_pixel=False,
    q=(0.05, 3),
    out_q=None,
):
    """RESIZE_BILINEAR to ``size``; input quantization ``q``, output ``out_q`` (default: ``q``)."""
    return _resize(
        "ResizeBilinear",
        BO.RESIZE_BILINEAR,
        in_shape,
        size,
        align_corners,
        half_pixel,
        q,
        out_q or q,
    )


def _resize(name, code, in_shape, size, align_corners, half_pixel, q, out_q):
    """One RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR (``name`` prefixes its options' builders)."""
    x = T(list(in_shape), "int8", scale=q[0], zp=q[1])
    sz = T([2], "int32", data=np.array(size, np.int32))
    y = T([in_shape[0], size[0], size[1], in_shape[3]], "int8", scale=out_q[0], zp=out_q[1])

    def opts(b):
        getattr(tflite, f"{name}OptionsStart")(b)
        getattr(tflite, f"{name}OptionsAddAlignCorners")(b, align_corners)
        getattr(tflite, f"{name}OptionsAddHalfPixelCenters")(b, half_pixel)
        return getattr(tflite, f"{name}OptionsEnd")(b)

    return build(
        [x, sz, y], [0], [2], code, getattr(BOPT, f"{name}Options"), opts, op_inputs=[0, 1]
    )


# --------------------------------------------------------------------- data movement
def _conv_tensors(rs, x: T, cout: int, kernel=(3, 3)):
    """Weights, bias and output tensors of a SAME, stride-1 CONV_2D reading ``x`` (NHWC)."""
    cin = x.shape[3]
    wsc = rs.uniform(0.002, 0.02, size=cout).astype(np.float32)
    w = T([cout, kernel[0], kernel[1], cin], "int8", scale=wsc, zp=np.zeros(cout, np.int64),
          data=rs.randint(-127, 128, size=(cout, kernel[0], kernel[1], cin)).astype(np.int8))
    bias = T(
        [cout],
        "int32",
        scale=(x.scale[0] * wsc).astype(np.float32),
        zp=np.zeros(cout, np.int64),
        data=rs.randint(-2000, 2000, size=cout).astype(np.int32),
    )
    y = T([x.shape[0], x.shape[1], x.shape[2], cout], "int8", scale=rs.uniform(0.05, 0.3),
          zp=int(rs.randint(-20, 20)))
    return w, bias, y


def _conv_op(ins, outs, padding=tflite.Padding.SAME):
    def opts(b):
        tflite.Conv2DOptionsStart(b)
        tflite.Conv2DOptionsAddPadding(b, padding)
        tflite.Conv2DOptionsAddStrideW(b, 1)
        tflite.Conv2DOptionsAddStrideH(b, 1)
        return tflite.Conv2DOptionsEnd(b)

    return (BO.CONV_2D, BOPT.Conv2DOptions, opts, ins, outs)


def _pad_parts(in_shape, paddings, q, constant):
    """Tensors and operator of PAD (``constant`` None) or PADV2 (``constant``: the int8 code)."""
    paddings = np.asarray(paddings, np.int32).reshape(len(in_shape), 2)
    x = T(list(in_shape), "int8", scale=q[0], zp=q[1])
    pads = T(list(paddings.shape), "int32", data=paddings)
    y = T([d + int(p.sum()) for d, p in zip(in_shape, paddings)], "int8", scale=q[0], zp=q[1])
    tensors = [x, pads, y]
    if constant is None:
        return tensors, (BO.PAD, 0, None, [0, 1], [2])
    tensors.append(T([1], "int8", scale=q[0], zp=q[1], data=np.array([constant], np.int8)))
    return tensors, (BO.PADV2, 0, None, [0, 1, 3], [2])


def pad(
    in_shape=(1, 4, 5, 3), paddings=((0, 0), (1, 2), (2, 1), (0, 0)), q=(0.05, 3), constant=None
):
    """PAD (or PADV2 with the int8 ``constant``) by ``paddings`` (one (before, after) per axis)."""
    tensors, op = _pad_parts(in_shape, paddings, q, constant)
    return serialize(tensors, [op], [0], [2])


def pad_conv(rs, in_shape=(1, 6, 6, 4), cout=8):
    """PAD by 1 on H and W, then a VALID 3x3 CONV_2D: how TF exports a SAME strided conv."""
    x = _qact(rs, in_shape)
    tensors, op = _pad_parts(
        in_shape, ((0, 0), (1, 1), (1, 1), (0, 0)), (float(x.scale[0]), int(x.zp[0])), None
    )
    padded = tensors[2]
    w, bias, y = _conv_tensors(rs, padded, cout)
    y.shape = [1, in_shape[1], in_shape[2], cout]
    return serialize(
        tensors + [w, bias, y], [op, _conv_op([2, 3, 4], [5], tflite.Padding.VALID)], [0], [5]
    )


def _split_parts(in_shape, axis, sizes, q, split_v):
    """Tensors and operator of SPLIT (equal ``sizes``) or SPLIT_V; outputs are tensors 2.."""
    x = T(list(in_shape), "int8", scale=q[0], zp=q[1])
    outs = []
    for s in sizes:
        shape = list(in_shape)
        shape[axis] = s
        outs.append(T(shape, "int8", scale=q[0], zp=q[1]))
    out_idx = list(range(2, 2 + len(sizes)))
    ax = T(
        [] if not split_v else [1],
        "int32",
        data=np.array(axis, np.int32).reshape(() if not split_v else (1,)),
    )
    if not split_v:
        def opts(b):
            tflite.SplitOptionsStart(b)
            tflite.SplitOptionsAddNumSplits(b, len(sizes))
            return tflite.SplitOptionsEnd(b)

        return [x, ax] + outs, (BO.SPLIT, BOPT.SplitOptions, opts, [1, 0], out_idx)
    sz = T([len(sizes)], "int32", data=np.array(sizes, np.int32))

    def opts_v(b):
        tflite.SplitVOptionsStart(b)
        tflite.SplitVOptionsAddNumSplits(b, len(sizes))
        return tflite.SplitVOptionsEnd(b)

    return [x, ax] + outs + [sz], (
        BO.SPLIT_V,
        BOPT.SplitVOptions,
        opts_v,
        [0, 2 + len(sizes), 1],
        out_idx,
    )


def split(in_shape=(1, 4, 4, 8), axis=3, num=2, q=(0.05, 3)):
    """SPLIT of ``in_shape`` into ``num`` equal parts along ``axis``."""
    tensors, op = _split_parts(in_shape, axis, [in_shape[axis] // num] * num, q, False)
    return serialize(tensors, [op], [0], op[4])


def split_v(in_shape=(1, 4, 4, 8), axis=3, sizes=(3, 5), q=(0.05, 3)):
    """SPLIT_V of ``in_shape`` into parts of ``sizes`` along ``axis``."""
    tensors, op = _split_parts(in_shape, axis, list(sizes), q, True)
    return serialize(tensors, [op], [0], op[4])


def split_convs(rs, in_shape=(1, 6, 6, 8), cout=(4, 6)):
    """SPLIT along channels into two halves, each feeding its own 3x3 CONV_2D."""
    x = _qact(rs, in_shape)
    tensors, op = _split_parts(
        in_shape, 3, [in_shape[3] // 2] * 2, (float(x.scale[0]), int(x.zp[0])), False
    )
    ops, outputs = [op], []
    for half, c in zip((2, 3), cout):
        w, bias, y = _conv_tensors(rs, tensors[half], c)
        base = len(tensors)
        tensors += [w, bias, y]
        ops.append(_conv_op([half, base, base + 1], [base + 2]))
        outputs.append(base + 2)
    return serialize(tensors, ops, [0], outputs)


def depth_to_space(in_shape=(1, 3, 4, 8), block=2, q=(0.05, 3), out_q=None):
    """DEPTH_TO_SPACE with ``block`` (DCR order, TFLite's only one); ``out_q`` defaults to ``q``."""
    n, h, w, c = in_shape
    out_q = out_q or q
    x = T(list(in_shape), "int8", scale=q[0], zp=q[1])
    y = T([n, h * block, w * block, c // (block * block)], "int8", scale=out_q[0], zp=out_q[1])

    def opts(b):
        tflite.DepthToSpaceOptionsStart(b)
        tflite.DepthToSpaceOptionsAddBlockSize(b, block)
        return tflite.DepthToSpaceOptionsEnd(b)

    return build([x, y], [0], [1], BO.DEPTH_TO_SPACE, BOPT.DepthToSpaceOptions, opts)


def resize_nearest(
    in_shape=(1, 4, 4, 3), size=(8, 8), align_corners=False, half_pixel=False, q=(0.05, 3)
):
    """RESIZE_NEAREST_NEIGHBOR to ``size`` (input and output quantization ``q``)."""
    return _resize(
        "ResizeNearestNeighbor",
        BO.RESIZE_NEAREST_NEIGHBOR,
        in_shape,
        size,
        align_corners,
        half_pixel,
        q,
        q,
    )


def conv_resize_conv(rs, size=(6, 6)):
    """CONV_2D, RESIZE_BILINEAR 4x4 -> ``size`` (6x6: a scale no NPU takes, so it stays on the
    CPU), CONV_2D: a CPU operator between two NPU ones."""
    x = _qact(rs, [1, 4, 4, 8])
    w, bias, y = _conv_tensors(rs, x, 8)
    sz = T([2], "int32", data=np.array(size, np.int32))
    r = T([1, size[0], size[1], 8], "int8", scale=float(y.scale[0]), zp=int(y.zp[0]))
    w2, bias2, y2 = _conv_tensors(rs, r, 8)

    def opts(b):
        tflite.ResizeBilinearOptionsStart(b)
        tflite.ResizeBilinearOptionsAddAlignCorners(b, False)
        tflite.ResizeBilinearOptionsAddHalfPixelCenters(b, False)
        return tflite.ResizeBilinearOptionsEnd(b)

    resize = (BO.RESIZE_BILINEAR, BOPT.ResizeBilinearOptions, opts, [3, 4], [5])
    return serialize([x, w, bias, y, sz, r, w2, bias2, y2],
                     [_conv_op([0, 1, 2], [3]), resize, _conv_op([5, 6, 7], [8])], [0], [8])


def transpose_conv(shape, cout: int, kernel, stride, padding="SAME", seed: int = 0,
                   per_channel: bool = False, bias: bool = True, bias_q: bool = True,
                   act=None, in_q=(0.05, 3), out_q=(0.1, -3), out_hw=None):
    """TRANSPOSE_CONV of ``shape`` (NHWC) to ``cout`` channels: random OHWI weights (per output
    channel scales when ``per_channel``), an int32 bias (quantized, or without parameters when
    not ``bias_q``: TFLite's kernels never read them) or none, the output size TFLite's
    converter writes (SAME: input * stride; VALID: + kernel - stride where the kernel is
    longer) unless ``out_hw`` declares another height and width."""
    rs = np.random.RandomState(seed)
    n, h, w, c = shape
    (kh, kw), (sh, sw) = kernel, stride
    if padding == "SAME":
        oh, ow = h * sh, w * sw
    else:
        oh, ow = h * sh + max(kh - sh, 0), w * sw + max(kw - sw, 0)
    oh, ow = out_hw or (oh, ow)
    wscale = rs.uniform(0.002, 0.02, cout if per_channel else 1).astype(np.float32)
    wt = T([cout, kh, kw, c], "int8", scale=wscale, zp=np.zeros(wscale.size, np.int64),
           data=rs.randint(-127, 128, (cout, kh, kw, c)).astype(np.int8))
    x = T(list(shape), "int8", scale=in_q[0], zp=in_q[1])
    y = T([n, oh, ow, cout], "int8", scale=out_q[0], zp=out_q[1])
    out_shape = T([4], "int32", data=np.asarray([n, oh, ow, cout], np.int32))
    tensors, op_inputs = [out_shape, wt, x, y], [0, 1, 2]
    if bias:
        bscale = np.float32(in_q[0]) * wscale
        tensors.append(T([cout], "int32", scale=bscale if bias_q else None,
                         zp=np.zeros(bscale.size, np.int64) if bias_q else None,
                         data=rs.randint(-3000, 3000, cout).astype(np.int32)))
        op_inputs.append(4)
    pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID

    def opts(b):
        tflite.TransposeConvOptionsStart(b)
        tflite.TransposeConvOptionsAddPadding(b, pad)
        tflite.TransposeConvOptionsAddStrideH(b, sh)
        tflite.TransposeConvOptionsAddStrideW(b, sw)
        tflite.TransposeConvOptionsAddFusedActivationFunction(b, ACT[act])
        return tflite.TransposeConvOptionsEnd(b)

    return serialize(tensors, [(BO.TRANSPOSE_CONV, BOPT.TransposeConvOptions, opts, op_inputs,
                                [3])], [2], [3])


def conv_transpose_conv(rs, in_shape=(1, 6, 5, 4), kernel=(3, 3), stride=(2, 2)):
    """CONV_2D, TRANSPOSE_CONV (SAME, ``stride``), CONV_2D: an upsampling between two
    convolutions, as a segmentation decoder has it."""
    x = _qact(rs, list(in_shape))
    w, bias, y = _conv_tensors(rs, x, 8)
    n, h, wd, _ = y.shape
    oh, ow = h * stride[0], wd * stride[1]
    tw = T([6, kernel[0], kernel[1], 8], "int8", scale=rs.uniform(0.002, 0.02, 6),
           zp=np.zeros(6, np.int64),
           data=rs.randint(-127, 128, (6, kernel[0], kernel[1], 8)).astype(np.int8))
    tb = T([6], "int32", scale=(y.scale[0] * tw.scale).astype(np.float32),
           zp=np.zeros(6, np.int64), data=rs.randint(-2000, 2000, 6).astype(np.int32))
    ty = T([n, oh, ow, 6], "int8", scale=rs.uniform(0.05, 0.3), zp=int(rs.randint(-20, 20)))
    shape = T([4], "int32", data=np.asarray([n, oh, ow, 6], np.int32))
    w2, bias2, y2 = _conv_tensors(rs, ty, 4)

    def opts(b):
        tflite.TransposeConvOptionsStart(b)
        tflite.TransposeConvOptionsAddPadding(b, tflite.Padding.SAME)
        tflite.TransposeConvOptionsAddStrideH(b, stride[0])
        tflite.TransposeConvOptionsAddStrideW(b, stride[1])
        return tflite.TransposeConvOptionsEnd(b)

    tconv = (BO.TRANSPOSE_CONV, BOPT.TransposeConvOptions, opts, [4, 5, 3, 6], [7])
    return serialize([x, w, bias, y, shape, tw, tb, ty, w2, bias2, y2],
                     [_conv_op([0, 1, 2], [3]), tconv, _conv_op([7, 8, 9], [10])], [0], [10])


def arg_max(shape, dtype: str = "int8", q=(0.05, 3), out: str = "int32") -> bytes:
    """One ARG_MAX along the last axis of ``shape`` into ``out`` (int32 or int64), its axis a
    constant tensor as TFLite's converter writes it."""
    x = T(list(shape), dtype, scale=q[0], zp=q[1])
    y = T(list(shape[:-1]), out)
    axis = T([1], "int32", data=np.asarray([len(shape) - 1], np.int32))
    out_type = {"int32": tflite.TensorType.INT32, "int64": tflite.TensorType.INT64}[out]

    def options(b):
        tflite.ArgMaxOptionsStart(b)
        tflite.ArgMaxOptionsAddOutputType(b, out_type)
        return tflite.ArgMaxOptionsEnd(b)

    return serialize([x, y, axis], [(BO.ARG_MAX, BOPT.ArgMaxOptions, options, [0, 2], [1])],
                     [0], [1])


def conv_arg_max(rs, shape=(1, 24, 20, 8), cout=16) -> bytes:
    """CONV_2D -> CONV_2D -> ARG_MAX over the channels (weights drawn from ``rs``): an
    ARG_MAX that a planner can cascade with the convolutions before it."""
    x = T(list(shape), "int8", scale=0.05, zp=3)
    w, b, y = _conv_tensors(rs, x, cout)
    w2, b2, y2 = _conv_tensors(rs, y, cout)
    out = T(list(shape[:3]), "int32")
    axis = T([1], "int32", data=np.asarray([3], np.int32))

    def options(bb):
        tflite.ArgMaxOptionsStart(bb)
        tflite.ArgMaxOptionsAddOutputType(bb, tflite.TensorType.INT32)
        return tflite.ArgMaxOptionsEnd(bb)

    ops = [_conv_op([0, 1, 2], [3]), _conv_op([3, 4, 5], [6]),
           (BO.ARG_MAX, BOPT.ArgMaxOptions, options, [6, 8], [7])]
    return serialize([x, w, b, y, w2, b2, y2, out, axis], ops, [0], [7])


def tied_codes(shape, dtype: str, rs, levels: int) -> np.ndarray:
    """Inputs of at most ``levels`` distinct codes, the type's lowest first (1: every element
    the same): many ties for an arg-max."""
    info = np.iinfo(dtype)
    codes = np.unique(np.r_[info.min, info.max, rs.randint(info.min, info.max + 1, levels)])
    return rs.choice(codes[:levels], shape).astype(dtype)
