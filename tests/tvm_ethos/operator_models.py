"""One-operator int8 TFLite models, one per row of rfcs/0010's operator table, by builder name.

Each builder returns the flatbuffer of one operator with small shapes and a fixed seed, the
operator's parameters as a converter writes them (constant parameter tensors, options where
TFLite Micro's kernel reads them). The table's "Model" cell names the builder; a helper that
puts an operator on the NPU flips the row's "Ours" cell, and the test compiles the same model.
"""
from __future__ import annotations

import numpy as np
import tflite
import tflite_builder as tb
from tflite_builder import BO, BOPT, T

Q = (0.05, 3)
SHAPE = (1, 4, 4, 8)


def _x(shape=SHAPE, q=Q) -> T:
    return T(list(shape), "int8", scale=q[0], zp=q[1])


def _one(tensors, code, ins, outs, options=None, op_inputs=None) -> bytes:
    otype, ofn = options if options else (0, None)
    op = (code, otype, ofn, op_inputs if op_inputs is not None else ins, outs)
    return tb.serialize(tensors, [op], ins, outs)


def _i32(values) -> T:
    arr = np.asarray(values, np.int32)
    return T(list(arr.shape), "int32", data=arr)


def unary(code, out_q=(0.04, -2), options=None, shape=SHAPE) -> bytes:
    """One operator of one int8 input and one int8 output of the same shape."""
    return _one([_x(shape), _x(shape, out_q)], code, [0], [1], options)


def binary(code, out_q=(0.08, -5), options=None, b_shape=SHAPE, b_q=(0.03, -4)) -> bytes:
    """One operator of two int8 inputs (the second broadcast from ``b_shape``)."""
    out_shape = list(np.broadcast_shapes(SHAPE, tuple(b_shape)))
    return _one([_x(), _x(b_shape, b_q), T(out_shape, "int8", scale=out_q[0], zp=out_q[1])],
                code, [0, 1], [2], options)


def _opts(name: str, **fields):
    """(options type, builder) of the TFLite options table ``name`` with ``fields`` set."""
    def fn(b):
        vectors = {k: tb._vec_i32(b, v, getattr(tflite, f"{name}Start{k}Vector"))
                   for k, v in fields.items() if isinstance(v, (list, tuple))}
        getattr(tflite, f"{name}Start")(b)
        for k, v in fields.items():
            getattr(tflite, f"{name}Add{k}")(b, vectors.get(k, v))
        return getattr(tflite, f"{name}End")(b)

    return getattr(BOPT, name), fn


def _with_params(code, params: list[T], out_shape, options=None, out_q=Q) -> bytes:
    """One operator reading the input and constant ``params`` (tensors 2..)."""
    tensors = [_x(), T(list(out_shape), "int8", scale=out_q[0], zp=out_q[1])] + params
    ins = [0] + list(range(2, 2 + len(params)))
    return _one(tensors, code, [0], [1], options, op_inputs=ins)


def conv2d() -> bytes:
    return tb.conv2d(np.random.RandomState(0))


def depthwise() -> bytes:
    return tb.conv2d(np.random.RandomState(1), depthwise=True, cout=4)


def fully_connected() -> bytes:
    return tb.fully_connected(np.random.RandomState(2))


def avg_pool() -> bytes:
    return tb.pool(np.random.RandomState(3), "avg")


def max_pool() -> bytes:
    return tb.pool(np.random.RandomState(4), "max")


def mean() -> bytes:
    return tb.mean(np.random.RandomState(5))


def softmax() -> bytes:
    return tb.softmax(np.random.RandomState(6))


def add() -> bytes:
    return tb.binary(np.random.RandomState(7), "add")


def mul() -> bytes:
    return tb.binary(np.random.RandomState(8), "mul")


def sub() -> bytes:
    # an output scale where the NPU's single rounding of the rescaled input is TFLite
    # Micro's (compute.add_sub; the default 0.08 is refused: 155 of 65,536 pairs differ)
    return binary(BO.SUB, out_q=(0.09, -5),
                  options=_opts("SubOptions", FusedActivationFunction=0))


def minimum() -> bytes:
    """MINIMUM with the inputs' quantization equal to the output's (Vela's constraint)."""
    return binary(BO.MINIMUM, out_q=Q, b_q=Q)


def maximum() -> bytes:
    return binary(BO.MAXIMUM, out_q=Q, b_q=Q)


def squared_difference() -> bytes:
    return binary(BO.SQUARED_DIFFERENCE, out_q=(0.2, -100))


def prelu() -> bytes:
    alpha = T([1, 1, 8], "int8", scale=0.01, zp=0,
              data=np.random.RandomState(9).randint(-50, 50, (1, 1, 8)).astype(np.int8))
    return _with_params(BO.PRELU, [alpha], SHAPE, out_q=(0.04, -2))


def logistic() -> bytes:
    return tb.activation("sigmoid")


def tanh() -> bytes:
    return tb.activation("tanh")


def leaky_relu() -> bytes:
    return tb.activation("leaky_relu")


def relu() -> bytes:
    return unary(BO.RELU)


def relu6() -> bytes:
    """RELU6 with the output quantized as the input (as converters write it)."""
    return unary(BO.RELU6, out_q=Q)


def relu_n1_to_1() -> bytes:
    return unary(BO.RELU_N1_TO_1, out_q=Q)


def relu_0_to_1() -> bytes:
    return unary(BO.RELU_0_TO_1, out_q=(1 / 256, -128))


def hard_swish() -> bytes:
    return unary(BO.HARD_SWISH)


def abs_() -> bytes:
    return unary(BO.ABS, out_q=Q)


def neg() -> bytes:
    return unary(BO.NEG, out_q=Q)


def exp() -> bytes:
    return unary(BO.EXP, out_q=(0.05, -128))


def log() -> bytes:
    """LOG of positive inputs only (the input's zero point is its lowest code)."""
    return _one([_x(q=(0.05, -128)), _x(q=(0.04, 0))], BO.LOG, [0], [1])


def rsqrt() -> bytes:
    return _one([_x(q=(0.05, -128)), _x(q=(0.04, -128))], BO.RSQRT, [0], [1])


def elu() -> bytes:
    return unary(BO.ELU)


def gelu() -> bytes:
    return unary(BO.GELU, options=_opts("GeluOptions", Approximate=False))


def quantize() -> bytes:
    """An int8 to int8 requantization."""
    return unary(BO.QUANTIZE)


def reshape() -> bytes:
    return _with_params(BO.RESHAPE, [_i32([1, 16, 8])], (1, 16, 8))


def squeeze() -> bytes:
    return _one([_x((1, 1, 4, 8)), _x((1, 4, 8))], BO.SQUEEZE, [0], [1],
                _opts("SqueezeOptions", SqueezeDims=[1]))


def expand_dims() -> bytes:
    return _with_params(BO.EXPAND_DIMS, [_i32([0])], (1, 1, 4, 4, 8))


def transpose() -> bytes:
    return _with_params(BO.TRANSPOSE, [_i32([0, 2, 1, 3])], SHAPE)


def concatenation() -> bytes:
    x, y = _x(), _x()
    out = T([1, 4, 4, 16], "int8", scale=Q[0], zp=Q[1])
    return _one([x, y, out], BO.CONCATENATION, [0, 1], [2],
                _opts("ConcatenationOptions", Axis=3, FusedActivationFunction=0))


def pack() -> bytes:
    """Two 1x4x8 inputs stacked into one 1x2x4x8 feature map (a 5-D output, which a 4-D
    input would give, is beyond Vela's and the NPU's four dimensions)."""
    out = T([1, 2, 4, 8], "int8", scale=Q[0], zp=Q[1])
    return _one([_x((1, 4, 8)), _x((1, 4, 8)), out], BO.PACK, [0, 1], [2],
                _opts("PackOptions", ValuesCount=2, Axis=1))


def unpack() -> bytes:
    outs = [_x((1, 4, 8)) for _ in range(4)]
    return _one([_x()] + outs, BO.UNPACK, [0], [1, 2, 3, 4],
                _opts("UnpackOptions", Num=4, Axis=1))


def split() -> bytes:
    return tb.split()


def split_v() -> bytes:
    return tb.split_v()


def slice_() -> bytes:
    return _with_params(BO.SLICE, [_i32([0, 1, 0, 2]), _i32([1, 2, 4, 5])], (1, 2, 4, 5))


def strided_slice() -> bytes:
    return _with_params(BO.STRIDED_SLICE,
                        [_i32([0, 0, 1, 0]), _i32([1, 4, 4, 8]), _i32([1, 2, 1, 1])],
                        (1, 2, 3, 8), _opts("StridedSliceOptions", BeginMask=0, EndMask=0))


def tile() -> bytes:
    return _with_params(BO.TILE, [_i32([1, 2, 1, 1])], (1, 8, 4, 8))


def reverse_v2() -> bytes:
    return _with_params(BO.REVERSE_V2, [_i32([2])], SHAPE)


def pad() -> bytes:
    return tb.pad()


def padv2() -> bytes:
    """PADV2 whose constant is the zero point (a PAD by another name)."""
    return tb.pad(constant=Q[1])


def mirror_pad() -> bytes:
    pads = _i32([[0, 0], [1, 1], [1, 1], [0, 0]])
    return _with_params(BO.MIRROR_PAD, [pads], (1, 6, 6, 8),
                        _opts("MirrorPadOptions", Mode=tflite.MirrorPadMode.REFLECT))


def mirror_pad_of(shape, pads, mode, dtype: str = "int8", zp: int = 3) -> bytes:
    """One MIRROR_PAD of ``shape`` by the constant ``pads`` ((before, after) per axis)."""
    out = [d + a + b for d, (a, b) in zip(shape, pads)]
    x = T(list(shape), dtype, scale=0.05, zp=zp)
    p = T([len(shape), 2], "int32", data=np.asarray(pads, np.int32))
    y = T(out, dtype, scale=0.05, zp=zp)
    otype, ofn = _opts("MirrorPadOptions", Mode=mode)
    return tb.serialize([x, y, p], [(BO.MIRROR_PAD, otype, ofn, [0, 2], [1])], [0], [1])


def _reduce(code, out_q=Q) -> bytes:
    return _with_params(code, [_i32([1, 2])], (1, 1, 1, 8),
                        _opts("ReducerOptions", KeepDims=True), out_q=out_q)


def reduce_sum() -> bytes:
    return _reduce(BO.SUM, out_q=(0.5, 0))


def reduce_max() -> bytes:
    return _reduce(BO.REDUCE_MAX)


def reduce_min() -> bytes:
    return _reduce(BO.REDUCE_MIN)


def arg_max() -> bytes:
    out = T([1, 4, 4], "int32")
    return _one([_x(), out, _i32([3])], BO.ARG_MAX, [0], [1],
                _opts("ArgMaxOptions", OutputType=tflite.TensorType.INT32), op_inputs=[0, 2])


def resize_bilinear() -> bytes:
    return tb.resize_bilinear()


def resize_nearest() -> bytes:
    return tb.resize_nearest()


def transpose_conv() -> bytes:
    rs = np.random.RandomState(10)
    x = _x((1, 4, 4, 4))
    w = T([6, 3, 3, 4], "int8", scale=0.01, zp=0,
          data=rs.randint(-127, 128, (6, 3, 3, 4)).astype(np.int8))
    out = T([1, 8, 8, 6], "int8", scale=0.1, zp=-3)
    shape = _i32([1, 8, 8, 6])
    opts = _opts("TransposeConvOptions", Padding=tflite.Padding.SAME, StrideW=2, StrideH=2)
    return _one([shape, w, x, out], BO.TRANSPOSE_CONV, [2], [3], opts, op_inputs=[0, 1, 2])


def batch_matmul() -> bytes:
    out = T([1, 4, 4, 4], "int8", scale=0.2, zp=1)
    return _one([_x(), _x((1, 4, 8, 4), (0.03, -4)), out], BO.BATCH_MATMUL, [0, 1], [2],
                _opts("BatchMatMulOptions", AdjX=False, AdjY=False))


#: builder name (the table's "Model" cell) -> the builder
MODELS = {f.__name__.rstrip("_"): f for f in (
    conv2d, depthwise, fully_connected, avg_pool, max_pool, mean, softmax, add, mul, sub,
    minimum, maximum, squared_difference, prelu, logistic, tanh, leaky_relu, relu, relu6,
    relu_n1_to_1, relu_0_to_1, hard_swish, abs_, neg, exp, log, rsqrt, elu, gelu, quantize,
    reshape, squeeze, expand_dims, transpose, concatenation, pack, unpack, split, split_v,
    slice_, strided_slice, tile, reverse_v2, pad, padv2, mirror_pad, reduce_sum, reduce_max,
    reduce_min, arg_max, resize_bilinear, resize_nearest, transpose_conv, batch_matmul,
)}


def lstm() -> bytes:
    """An int8 UNIDIRECTIONAL_SEQUENCE_LSTM (int16 cell state, states as variable tensors,
    a cell clip): ``lstm_models``."""
    from lstm_models import LstmCase, lstm_model

    return lstm_model(LstmCase(batches=2, steps=3, features=6, cells=5, cell_clip=2.0))


MODELS["lstm"] = lstm
