"""Issue 28's probes: operator forms read off Vela 5.2's own constraints
(``ethosu.vela.tflite_supported_operators`` and ``tflite_model_semantic``), for the audit in
``vela_superset_audit.py`` to compile with Vela and with ours.

Vela takes tensors of rank 1 to 4 (never 5 or more), batch 1 except for FULLY_CONNECTED,
SOFTMAX, RESHAPE, SQUEEZE, SPLIT, SPLIT_V, SLICE, STRIDED_SLICE and UNPACK (a rank-3 tensor's
first axis is not its batch), broadcasting of either input of ADD, SUB, MUL, MAXIMUM, MINIMUM and
SQUARED_DIFFERENCE (one input's shape must be the output's; a scalar operand is allowed),
int16 and uint8 on most operators, RELU / RELU6 / RELU_N1_TO_1 fused onto any operator that
has the option, strides up to 3 (wider on a convolution's or average pool's width where the
input's width divides), dilated kernels up to 64 high and pooling kernels up to 256 high.
Each probe is one such form, built small with fixed data, so each compiles in a second or two.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, NamedTuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

import numpy as np  # noqa: E402
import tflite  # noqa: E402
import tflite_builder as tb  # noqa: E402
from operator_models import _i32, _one, _opts  # noqa: E402
from tflite_builder import ACT, BO, T  # noqa: E402


class Probe(NamedTuple):
    """One form: the rfcs/0010 row it belongs to, a short name and its model's builder."""
    operator: str
    name: str
    build: Callable[[], bytes]


#: default (scale, zero point) of an activation by type, and of a second input / an output
Q_IN = {"int8": (0.05, 3), "uint8": (0.05, 128), "int16": (2.0**-12, 0)}
Q_B = {"int8": (0.03, -4), "uint8": (0.03, 120), "int16": (2.0**-11, 0)}
Q_OUT = {"int8": (0.09, -5), "uint8": (0.09, 125), "int16": (2.0**-10, 0)}
SHAPE = (1, 4, 4, 8)


def _t(shape, dtype="int8", q=None, data=None) -> T:
    q = q or Q_IN[dtype]
    return T(list(shape), dtype, scale=q[0], zp=q[1], data=data)


def _codes(shape, dtype, seed) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.random.RandomState(seed).randint(info.min, info.max + 1, shape).astype(dtype)


# ------------------------------------------------------------------------ elementwise
_BINARY_OPTIONS = {BO.ADD: "AddOptions", BO.SUB: "SubOptions", BO.MUL: "MulOptions"}
_SAME_Q = (BO.MAXIMUM, BO.MINIMUM)   # Vela requires the inputs quantized as the output


def binary(code, a_shape=SHAPE, b_shape=SHAPE, dtype="int8", act=None, const_b=False,
           const_a=False) -> bytes:
    """One binary elementwise operator; ``const_a`` / ``const_b`` make that input constant
    (``a_shape`` / ``b_shape`` of ``()`` a scalar)."""
    out_shape = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    same = code in _SAME_Q
    qa = Q_IN[dtype]
    qb = qa if same else Q_B[dtype]
    qo = qa if same else ((0.2, -100) if code == BO.SQUARED_DIFFERENCE and dtype == "int8"
                          else Q_OUT[dtype])
    a = _t(a_shape, dtype, qa, _codes(a_shape, dtype, 1) if const_a else None)
    b = _t(b_shape, dtype, qb, _codes(b_shape, dtype, 2) if const_b else None)
    y = _t(out_shape, dtype, qo)
    options = (_opts(_BINARY_OPTIONS[code], FusedActivationFunction=ACT[act])
               if code in _BINARY_OPTIONS else None)
    ins = [i for i, c in ((0, const_a), (1, const_b)) if not c]
    return _one([a, b, y], code, ins, [2], options, op_inputs=[0, 1])


def unary(code, shape=SHAPE, dtype="int8", q_out=None, options=None) -> bytes:
    """One operator of one input and one output of ``shape``."""
    return _one([_t(shape, dtype), _t(shape, dtype, q_out or Q_IN[dtype])], code, [0], [1],
                options)


def prelu(shape=SHAPE, alpha_shape=None, dtype="int8") -> bytes:
    """PRELU; alpha one value per channel unless ``alpha_shape`` says otherwise."""
    alpha_shape = alpha_shape or (1, 1, shape[-1])
    alpha = _t(alpha_shape, dtype, (0.01, 0) if dtype != "uint8" else (0.01, 128),
               _codes(alpha_shape, dtype, 9) // (3 if dtype == "int8" else 1))
    out_q = {"int8": (0.04, -2), "uint8": (0.04, 120), "int16": (2.0**-11, 0)}[dtype]
    return _one([_t(shape, dtype), _t(shape, dtype, out_q), alpha], BO.PRELU, [0], [1],
                op_inputs=[0, 2])


def activation(kind, shape=SHAPE, dtype="int8") -> bytes:
    """LOGISTIC / TANH with the output quantization the converter gives each type."""
    out_q = {("sigmoid", "int8"): (1 / 256, -128), ("tanh", "int8"): (1 / 128, 0),
             ("sigmoid", "int16"): (2.0**-15, 0), ("tanh", "int16"): (2.0**-15, 0)}
    in_q = (2.0**-12, 0) if dtype == "int16" else (0.05, 3)
    return tb.activation(kind, shape, in_q, out_q[kind, dtype], dtype=dtype)


def softmax(shape=(1, 10), dtype="int8") -> bytes:
    out_q = {"int8": (1 / 256, -128), "uint8": (1 / 256, 0), "int16": (2.0**-15, 0)}[dtype]
    x, y = _t(shape, dtype), _t(shape, dtype, out_q)
    return _one([x, y], BO.SOFTMAX, [0], [1], _opts("SoftmaxOptions", Beta=1.0))


def quantize(src="int8", dst="int16") -> bytes:
    return _one([_t(SHAPE, src), _t(SHAPE, dst, Q_OUT[dst])], BO.QUANTIZE, [0], [1])


# ------------------------------------------------------------------------ MAC operators
def conv(shape=(1, 8, 8, 4), cout=6, kernel=(3, 3), stride=(1, 1), dilation=(1, 1),
         padding="SAME", dtype="int8", act=None, depthwise=False, multiplier=1,
         bias_dtype=None) -> bytes:
    """CONV_2D / DEPTHWISE_CONV_2D of ``dtype`` activations (int16: int8 weights and an int64
    bias unless ``bias_dtype`` says otherwise; uint8: uint8 weights of one scale) with the
    output size TFLite computes."""
    rs = np.random.RandomState(11)
    n, h, w, cin = shape
    cout = cin * multiplier if depthwise else cout
    wshape = [1, *kernel, cout] if depthwise else [cout, *kernel, cin]
    wtype = "uint8" if dtype == "uint8" else "int8"
    wscale = rs.uniform(0.002, 0.02, 1 if dtype == "uint8" else cout).astype(np.float32)
    wzp = np.full(wscale.size, 120 if dtype == "uint8" else 0, np.int64)
    wt = T(wshape, wtype, scale=wscale, zp=wzp, data=_codes(wshape, wtype, 12),
           axis=3 if depthwise else 0)
    btype = bias_dtype or ("int64" if dtype == "int16" else "int32")
    bscale = np.broadcast_to(np.float32(Q_IN[dtype][0]) * wscale, (cout,)).astype(np.float32)
    bias = T([cout], btype, scale=bscale, zp=np.zeros(cout, np.int64),
             data=rs.randint(-2000, 2000, cout).astype(btype))
    eh, ew = (kernel[0] - 1) * dilation[0] + 1, (kernel[1] - 1) * dilation[1] + 1
    if padding == "SAME":
        oh, ow = -(-h // stride[0]), -(-w // stride[1])
    else:
        oh, ow = (h - eh) // stride[0] + 1, (w - ew) // stride[1] + 1
    y = _t([n, oh, ow, cout], dtype, Q_OUT[dtype])
    pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID
    fields = dict(Padding=pad, StrideW=stride[1], StrideH=stride[0],
                  FusedActivationFunction=ACT[act], DilationWFactor=dilation[1],
                  DilationHFactor=dilation[0])
    if depthwise:
        options = _opts("DepthwiseConv2DOptions", DepthMultiplier=multiplier, **fields)
    else:
        options = _opts("Conv2DOptions", **fields)
    code = BO.DEPTHWISE_CONV_2D if depthwise else BO.CONV_2D
    return _one([_t(shape, dtype), wt, bias, y], code, [0], [3], options, op_inputs=[0, 1, 2])


def fully_connected(shape=(1, 32), n=10, dtype="int8", act=None, bias_dtype=None) -> bytes:
    """FULLY_CONNECTED (int16: int8 weights and an int64 bias unless ``bias_dtype`` says
    otherwise)."""
    rs = np.random.RandomState(13)
    wtype = "uint8" if dtype == "uint8" else "int8"
    wt = T([n, shape[-1]], wtype, scale=0.01, zp=120 if dtype == "uint8" else 0,
           data=_codes((n, shape[-1]), wtype, 14))
    btype = bias_dtype or ("int64" if dtype == "int16" else "int32")
    bias = T([n], btype, scale=Q_IN[dtype][0] * 0.01, zp=0,
             data=rs.randint(-2000, 2000, n).astype(btype))
    y = _t([*shape[:-1], n], dtype, Q_OUT[dtype])
    return _one([_t(shape, dtype), wt, bias, y], BO.FULLY_CONNECTED, [0], [3],
                _opts("FullyConnectedOptions", FusedActivationFunction=ACT[act]),
                op_inputs=[0, 1, 2])


def pool(code, shape=(1, 9, 9, 8), size=(3, 3), stride=(2, 2), padding="VALID",
         dtype="int8", act=None) -> bytes:
    n, h, w, c = shape
    if padding == "SAME":
        oh, ow = -(-h // stride[0]), -(-w // stride[1])
    else:
        oh, ow = (h - size[0]) // stride[0] + 1, (w - size[1]) // stride[1] + 1
    pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID
    return _one([_t(shape, dtype), _t([n, oh, ow, c], dtype)], code, [0], [1],
                _opts("Pool2DOptions", Padding=pad, StrideW=stride[1], StrideH=stride[0],
                      FilterWidth=size[1], FilterHeight=size[0],
                      FusedActivationFunction=ACT[act]))


def transpose_conv(padding="SAME", stride=(2, 2), kernel=(3, 3), act=None,
                   dtype="int8") -> bytes:
    if dtype == "int8":
        return tb.transpose_conv((1, 4, 4, 4), 6, kernel, stride, padding, seed=10, act=act)
    rs = np.random.RandomState(10)
    (kh, kw), (sh, sw) = kernel, stride
    oh, ow = (4 * sh, 4 * sw) if padding == "SAME" else (4 * sh + max(kh - sh, 0),
                                                         4 * sw + max(kw - sw, 0))
    wtype = "uint8" if dtype == "uint8" else "int8"
    wt = T([6, kh, kw, 4], wtype, scale=0.01, zp=120 if dtype == "uint8" else 0,
           data=_codes((6, kh, kw, 4), wtype, 15))
    btype = "int64" if dtype == "int16" else "int32"
    bias = T([6], btype, scale=Q_IN[dtype][0] * 0.01, zp=0,
             data=rs.randint(-2000, 2000, 6).astype(btype))
    pad = tflite.Padding.SAME if padding == "SAME" else tflite.Padding.VALID
    tensors = [_i32([1, oh, ow, 6]), wt, _t((1, 4, 4, 4), dtype),
               _t((1, oh, ow, 6), dtype, Q_OUT[dtype]), bias]
    return _one(tensors, BO.TRANSPOSE_CONV, [2], [3],
                _opts("TransposeConvOptions", Padding=pad, StrideW=sw, StrideH=sh,
                      FusedActivationFunction=ACT[act]), op_inputs=[0, 1, 2, 4])


# ------------------------------------------------------------------------ data movement
def concatenation(shape=SHAPE, axis=3, dtype="int8", act=None) -> bytes:
    out = list(shape)
    out[axis] *= 2
    return _one([_t(shape, dtype), _t(shape, dtype), _t(out, dtype)], BO.CONCATENATION,
                [0, 1], [2], _opts("ConcatenationOptions", Axis=axis,
                                   FusedActivationFunction=ACT[act]))


def with_params(code, shape, params, out_shape, dtype="int8", options=None) -> bytes:
    """One operator reading the input and constant int32 ``params``."""
    tensors = [_t(shape, dtype), _t(out_shape, dtype)] + [_i32(p) for p in params]
    return _one(tensors, code, [0], [1], options,
                op_inputs=[0] + list(range(2, 2 + len(params))))


def split(shape, axis, dtype="int8", sizes=None) -> bytes:
    """SPLIT in two equal parts, or SPLIT_V in ``sizes``, along ``axis``."""
    parts = sizes or [shape[axis] // 2] * 2
    outs = []
    for s in parts:
        o = list(shape)
        o[axis] = s
        outs.append(_t(o, dtype))
    out_idx = list(range(2, 2 + len(parts)))
    if sizes is None:
        ax = T([], "int32", data=np.array(axis, np.int32))
        return _one([_t(shape, dtype), ax] + outs, BO.SPLIT, [0], out_idx,
                    _opts("SplitOptions", NumSplits=2), op_inputs=[1, 0])
    tensors = [_t(shape, dtype), _i32([axis])] + outs + [_i32(sizes)]
    return _one(tensors, BO.SPLIT_V, [0], out_idx, _opts("SplitVOptions", NumSplits=len(sizes)),
                op_inputs=[0, len(tensors) - 1, 1])


def unpack(shape, axis, dtype="int8") -> bytes:
    outs = [_t([d for i, d in enumerate(shape) if i != axis], dtype)
            for _ in range(shape[axis])]
    return _one([_t(shape, dtype)] + outs, BO.UNPACK, [0], list(range(1, 1 + len(outs))),
                _opts("UnpackOptions", Num=len(outs), Axis=axis))


def pack(shape, axis, dtype="int8") -> bytes:
    out = list(shape)
    out.insert(axis, 2)
    return _one([_t(shape, dtype), _t(shape, dtype), _t(out, dtype)], BO.PACK, [0, 1], [2],
                _opts("PackOptions", ValuesCount=2, Axis=axis))


def pad(shape, pads, dtype="int8") -> bytes:
    out = [d + sum(p) for d, p in zip(shape, pads)]
    return with_params(BO.PAD, shape, [pads], out, dtype)


def resize(code, shape=(1, 4, 4, 3), size=(8, 8), dtype="int8", align_corners=False,
           half_pixel=False) -> bytes:
    name = "ResizeBilinear" if code == BO.RESIZE_BILINEAR else "ResizeNearestNeighbor"
    return with_params(code, shape, [list(size)], [shape[0], *size, shape[3]], dtype,
                       _opts(f"{name}Options", AlignCorners=align_corners,
                             HalfPixelCenters=half_pixel))


def mean(shape=(1, 4, 4, 8), axes=(1, 2), dtype="int8", keep=True) -> bytes:
    out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else [
        d for i, d in enumerate(shape) if i not in axes]
    tensors = [_t(shape, dtype), _t(out, dtype, Q_OUT[dtype]), _i32(list(axes))]
    return _one(tensors, BO.MEAN, [0], [1], _opts("ReducerOptions", KeepDims=keep),
                op_inputs=[0, 2])


#: a SUM's output (scale, zero point) by type: wider than the input's
_SUM_Q = {"int8": (2.0, -2), "uint8": (2.0, 120), "int16": (2.0**-6, 0)}


def reduce(code, shape, axes, dtype="int8", keep=True) -> bytes:
    """SUM / REDUCE_MAX / REDUCE_MIN over ``axes`` (REDUCE_MAX / REDUCE_MIN quantized as their
    input, as TFLite requires; SUM into a wider scale)."""
    out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else [
        d for i, d in enumerate(shape) if i not in axes]
    q_out = _SUM_Q[dtype] if code == BO.SUM else Q_IN[dtype]
    tensors = [_t(shape, dtype), _t(out, dtype, q_out), _i32(list(axes))]
    return _one(tensors, code, [0], [1], _opts("ReducerOptions", KeepDims=keep),
                op_inputs=[0, 2])


def squeeze(dtype="int8") -> bytes:
    return _one([_t((1, 1, 4, 8), dtype), _t((1, 4, 8), dtype)], BO.SQUEEZE, [0], [1],
                _opts("SqueezeOptions", SqueezeDims=[1]))


def reverse(dtype="int8") -> bytes:
    """REVERSE_V2 along the width."""
    return _one([_t(SHAPE, dtype), _t(SHAPE, dtype), _i32([2])], BO.REVERSE_V2, [0], [1],
                op_inputs=[0, 2])


def mirror_pad(dtype="int8") -> bytes:
    return with_params(BO.MIRROR_PAD, SHAPE, [[[0, 0], [1, 1], [1, 1], [0, 0]]],
                       (1, 6, 6, 8), dtype, _opts("MirrorPadOptions", Mode=0))


def padv2(dtype="int8", fill=5) -> bytes:
    """PADV2 of height and width with the constant code ``fill``."""
    pads = _i32([[0, 0], [1, 1], [1, 1], [0, 0]])
    value = _t((), dtype, data=np.array(fill, dtype))
    return _one([_t(SHAPE, dtype), _t((1, 6, 6, 8), dtype), pads, value], BO.PADV2, [0], [1],
                op_inputs=[0, 2, 3])


def arg_max(dtype="int8") -> bytes:
    """ARG_MAX over the depth into int32."""
    return _one([_t(SHAPE, dtype), T([1, 4, 4], "int32"), _i32([3])], BO.ARG_MAX, [0], [1],
                _opts("ArgMaxOptions", OutputType=tflite.TensorType.INT32), op_inputs=[0, 2])


#: operators that move codes, each built of a given type (every tensor quantized alike)
COPIES: dict[str, Callable[[str], bytes]] = {
    "RESHAPE": lambda d: with_params(BO.RESHAPE, SHAPE, [[1, 16, 8]], (1, 16, 8), d),
    "SQUEEZE": squeeze,
    "EXPAND_DIMS": lambda d: with_params(BO.EXPAND_DIMS, (4, 4, 8), [[0]], SHAPE, d),
    "SPLIT": lambda d: split(SHAPE, 3, d),
    "SPLIT_V": lambda d: split(SHAPE, 3, d, sizes=[3, 5]),
    "SLICE": lambda d: with_params(BO.SLICE, SHAPE, [[0, 1, 0, 2], [1, 2, 4, 5]],
                                   (1, 2, 4, 5), d),
    "STRIDED_SLICE": lambda d: with_params(
        BO.STRIDED_SLICE, SHAPE, [[0, 0, 1, 0], [1, 4, 4, 8], [1, 2, 1, 1]], (1, 2, 3, 8), d,
        _opts("StridedSliceOptions")),
    "PACK": lambda d: pack((1, 4, 8), 1, d),
    "UNPACK": lambda d: unpack(SHAPE, 1, d),
    "TRANSPOSE": lambda d: with_params(BO.TRANSPOSE, SHAPE, [[0, 2, 1, 3]], SHAPE, d),
    "TILE": lambda d: with_params(BO.TILE, SHAPE, [[1, 2, 1, 1]], (1, 8, 4, 8), d),
    "REVERSE_V2": reverse,
    "MIRROR_PAD": mirror_pad,
    "PAD": lambda d: pad(SHAPE, [[0, 0], [1, 1], [1, 1], [0, 0]], d),
    "CONCATENATION": lambda d: concatenation(dtype=d),
}


# ------------------------------------------------------------------------ the probes
_ELEMENTWISE = (("ADD", BO.ADD), ("SUB", BO.SUB), ("MUL", BO.MUL), ("MAXIMUM", BO.MAXIMUM),
                ("MINIMUM", BO.MINIMUM), ("SQUARED_DIFFERENCE", BO.SQUARED_DIFFERENCE))
_ACTS = ("relu", "relu6", "relu_n1_to_1")
_MAX, _AVG = BO.MAX_POOL_2D, BO.AVERAGE_POOL_2D


def _elementwise() -> list[Probe]:
    forms = []
    for row, code in _ELEMENTWISE:
        for b_shape in ((1, 1, 1, 8), (1, 4, 4, 1), (1, 1, 4, 8), (1, 4, 1, 1), (8,)):
            shape = "x".join(map(str, b_shape))
            forms.append(Probe(row, f"broadcast {shape}",
                               lambda c=code, s=b_shape: binary(c, b_shape=s)))
        forms += [
            Probe(row, "first input broadcast 1x1x1x8",
                  lambda c=code: binary(c, a_shape=(1, 1, 1, 8))),
            Probe(row, "scalar operand", lambda c=code: binary(c, b_shape=())),
            Probe(row, "constant scalar", lambda c=code: binary(c, b_shape=(), const_b=True)),
            Probe(row, "constant operand", lambda c=code: binary(c, const_b=True)),
            Probe(row, "constant operand first",
                  lambda c=code: binary(c, a_shape=(1, 1, 1, 8), const_a=True)),
            Probe(row, "rank 1", lambda c=code: binary(c, (8,), (8,))),
            Probe(row, "rank 2", lambda c=code: binary(c, (4, 8), (4, 8))),
            Probe(row, "rank 3", lambda c=code: binary(c, (4, 4, 8), (4, 4, 8))),
            Probe(row, "rank 3 first axis 2", lambda c=code: binary(c, (2, 4, 8), (2, 4, 8))),
            Probe(row, "int16", lambda c=code: binary(c, dtype="int16")),
            Probe(row, "int16 broadcast 1x1x1x8",
                  lambda c=code: binary(c, b_shape=(1, 1, 1, 8), dtype="int16")),
            Probe(row, "uint8", lambda c=code: binary(c, dtype="uint8")),
        ]
    for row, code in _ELEMENTWISE[:3]:
        forms += [Probe(row, f"fused {act}", lambda c=code, a=act: binary(c, act=a))
                  for act in _ACTS]
    return forms


def _activations() -> list[Probe]:
    forms = []
    for row, code, q_out in (("RELU", BO.RELU, (0.04, -2)), ("RELU6", BO.RELU6, None),
                             ("RELU_N1_TO_1", BO.RELU_N1_TO_1, None),
                             ("ABS", BO.ABS, None)):
        forms += [Probe(row, f"rank {len(s)}", lambda c=code, s=s, q=q_out: unary(c, s, q_out=q))
                  for s in ((8,), (4, 8), (4, 4, 8))]
        forms += [Probe(row, "int16", lambda c=code, q=q_out: unary(
            c, dtype="int16", q_out=q and (2.0**-11, 0))),
                  Probe(row, "uint8", lambda c=code, q=q_out: unary(
                      c, dtype="uint8", q_out=q and (0.04, 120)))]
    for kind, row in (("sigmoid", "LOGISTIC"), ("tanh", "TANH")):
        forms += [Probe(row, f"rank {len(s)}", lambda k=kind, s=s: activation(k, s))
                  for s in ((8,), (4, 8), (4, 4, 8))]
        forms.append(Probe(row, "int16", lambda k=kind: activation(k, dtype="int16")))
    forms += [
        Probe("LEAKY_RELU", "rank 2", lambda: tb.activation("leaky_relu", (4, 8))),
        Probe("LEAKY_RELU", "int16", lambda: tb.activation(
            "leaky_relu", in_q=(2.0**-12, 0), out_q=(2.0**-11, 0), dtype="int16")),
        Probe("HARD_SWISH", "rank 2", lambda: unary(BO.HARD_SWISH, (4, 8), q_out=(0.04, -2))),
        Probe("PRELU", "batch 2", lambda: prelu((2, 4, 4, 8))),
        Probe("PRELU", "rank 3 first axis 2", lambda: prelu((2, 4, 8), (1, 8))),
        Probe("PRELU", "rank 2", lambda: prelu((4, 8), (8,))),
        Probe("PRELU", "alpha of one value", lambda: prelu(alpha_shape=(1,))),
        Probe("PRELU", "alpha over H, W and C", lambda: prelu(alpha_shape=(4, 4, 8))),
        Probe("PRELU", "int16", lambda: prelu(dtype="int16")),
        Probe("PRELU", "uint8", lambda: prelu(dtype="uint8")),
        Probe("SOFTMAX", "batch 2", lambda: softmax((2, 10))),
        Probe("SOFTMAX", "rank 4 batch 2", lambda: softmax((2, 4, 4, 8))),
        Probe("SOFTMAX", "rank 3", lambda: softmax((4, 4, 8))),
        Probe("SOFTMAX", "int16", lambda: softmax(dtype="int16")),
        Probe("SOFTMAX", "uint8", lambda: softmax(dtype="uint8")),
        Probe("QUANTIZE", "int8 to int16", lambda: quantize("int8", "int16")),
        Probe("QUANTIZE", "int16 to int8", lambda: quantize("int16", "int8")),
        Probe("QUANTIZE", "int16 to int16", lambda: quantize("int16", "int16")),
        Probe("QUANTIZE", "uint8 to int8", lambda: quantize("uint8", "int8")),
        Probe("QUANTIZE", "int8 to uint8", lambda: quantize("int8", "uint8")),
        Probe("EXP", "int16", lambda: unary(BO.EXP, dtype="int16", q_out=(2.0**-10, 0))),
    ]
    return forms


def _mac() -> list[Probe]:
    forms = []
    for act in _ACTS:
        forms += [
            Probe("CONV_2D", f"fused {act}", lambda a=act: conv(act=a)),
            Probe("DEPTHWISE_CONV_2D", f"fused {act}", lambda a=act: conv(act=a, depthwise=True)),
            Probe("FULLY_CONNECTED", f"fused {act}", lambda a=act: fully_connected(act=a)),
            Probe("AVERAGE_POOL_2D", f"fused {act}", lambda a=act: pool(_AVG, act=a)),
            Probe("MAX_POOL_2D", f"fused {act}", lambda a=act: pool(_MAX, act=a)),
            Probe("TRANSPOSE_CONV", f"fused {act}", lambda a=act: transpose_conv(act=a)),
            Probe("CONCATENATION", f"fused {act}", lambda a=act: concatenation(act=a)),
        ]
    for dtype in ("int16", "uint8"):
        forms += [
            Probe("CONV_2D", dtype, lambda d=dtype: conv(dtype=d)),
            Probe("DEPTHWISE_CONV_2D", dtype, lambda d=dtype: conv(dtype=d, depthwise=True)),
            Probe("FULLY_CONNECTED", dtype, lambda d=dtype: fully_connected(dtype=d)),
            Probe("TRANSPOSE_CONV", dtype, lambda d=dtype: transpose_conv(dtype=d)),
        ]
    forms += [
        Probe("AVERAGE_POOL_2D", "uint8", lambda: pool(_AVG, dtype="uint8")),
        Probe("MAX_POOL_2D", "uint8", lambda: pool(_MAX, dtype="uint8")),
        Probe("CONV_2D", "stride 3", lambda: conv((1, 9, 9, 4), stride=(3, 3))),
        Probe("CONV_2D", "stride 3 VALID", lambda: conv((1, 10, 10, 4), stride=(3, 3),
                                                        padding="VALID")),
        Probe("CONV_2D", "stride 2x1", lambda: conv(stride=(2, 1))),
        Probe("CONV_2D", "stride width 4", lambda: conv((1, 8, 16, 4), stride=(1, 4))),
        Probe("CONV_2D", "dilation 2", lambda: conv((1, 10, 10, 4), dilation=(2, 2))),
        Probe("CONV_2D", "dilation 3x2 VALID", lambda: conv((1, 12, 12, 4), dilation=(3, 2),
                                                            padding="VALID")),
        Probe("CONV_2D", "kernel 8x8", lambda: conv((1, 10, 10, 4), kernel=(8, 8))),
        Probe("CONV_2D", "kernel 9x9 VALID", lambda: conv((1, 12, 12, 2), kernel=(9, 9),
                                                          padding="VALID")),
        Probe("CONV_2D", "kernel 1x1 stride 2", lambda: conv(kernel=(1, 1), stride=(2, 2))),
        Probe("CONV_2D", "kernel 1x7", lambda: conv(kernel=(1, 7))),
        Probe("DEPTHWISE_CONV_2D", "stride 3", lambda: conv((1, 9, 9, 4), stride=(3, 3),
                                                            depthwise=True)),
        Probe("DEPTHWISE_CONV_2D", "dilation 2", lambda: conv((1, 10, 10, 4), dilation=(2, 2),
                                                              depthwise=True)),
        Probe("DEPTHWISE_CONV_2D", "kernel 8x8", lambda: conv((1, 10, 10, 4), kernel=(8, 8),
                                                              depthwise=True)),
        Probe("DEPTHWISE_CONV_2D", "multiplier 4 of one channel",
              lambda: conv((1, 8, 8, 1), depthwise=True, multiplier=4)),
        Probe("FULLY_CONNECTED", "batch 2", lambda: fully_connected((2, 32))),
        Probe("FULLY_CONNECTED", "rank 4 input", lambda: fully_connected((1, 1, 1, 32))),
        Probe("AVERAGE_POOL_2D", "kernel 8x8 SAME", lambda: pool(_AVG, (1, 8, 8, 8), (8, 8),
                                                                 (1, 1), "SAME")),
        Probe("AVERAGE_POOL_2D", "stride 3", lambda: pool(_AVG, (1, 9, 9, 8), (3, 3), (3, 3))),
        Probe("AVERAGE_POOL_2D", "kernel 12x12 VALID",
              lambda: pool(_AVG, (1, 12, 12, 8), (12, 12), (1, 1))),
        Probe("AVERAGE_POOL_2D", "stride width 4 VALID",
              lambda: pool(_AVG, (1, 4, 16, 8), (1, 4), (1, 4))),
        Probe("MAX_POOL_2D", "stride 3", lambda: pool(_MAX, (1, 9, 9, 8), (3, 3), (3, 3))),
        Probe("MAX_POOL_2D", "kernel 8x8 SAME", lambda: pool(_MAX, (1, 8, 8, 8), (8, 8),
                                                             (1, 1), "SAME")),
        Probe("MAX_POOL_2D", "kernel 16x16 VALID",
              lambda: pool(_MAX, (1, 16, 16, 4), (16, 16), (1, 1))),
        Probe("TRANSPOSE_CONV", "VALID", lambda: transpose_conv("VALID")),
        Probe("TRANSPOSE_CONV", "stride 1", lambda: transpose_conv(stride=(1, 1))),
        Probe("MEAN", "rank 3", lambda: mean((4, 4, 8), (0, 1))),
        Probe("MEAN", "no keep_dims", lambda: mean(keep=False)),
        Probe("MEAN", "over width", lambda: mean(axes=(2,))),
        Probe("MEAN", "uint8", lambda: mean(dtype="uint8")),
    ]
    # past one NPU operation (Vela splits them): more rows or elements than one kernel
    forms += [
        Probe("SUM", "over 100x8", lambda: reduce(BO.SUM, (1, 100, 8, 8), (1, 2))),
        Probe("SUM", "over 600x4", lambda: reduce(BO.SUM, (1, 600, 4, 8), (1, 2))),
        Probe("SUM", "over H, W and C, 100 rows",
              lambda: reduce(BO.SUM, (1, 100, 4, 4), (1, 2, 3))),
        Probe("REDUCE_MAX", "over 300x4", lambda: reduce(BO.REDUCE_MAX, (1, 300, 4, 8), (1, 2))),
        Probe("REDUCE_MAX", "over 300 rows and the depth",
              lambda: reduce(BO.REDUCE_MAX, (1, 300, 4, 8), (1, 3))),
        Probe("REDUCE_MIN", "over 300x4", lambda: reduce(BO.REDUCE_MIN, (1, 300, 4, 8), (1, 2))),
        Probe("MEAN", "over 100 rows of the height", lambda: mean((1, 100, 4, 8), (1,))),
        Probe("MEAN", "over 70x70", lambda: mean((1, 70, 70, 4), (1, 2))),
        Probe("AVERAGE_POOL_2D", "one output row, stride 5x1",
              lambda: pool(_AVG, (1, 6, 8, 8), (4, 2), (5, 1))),
        Probe("MAX_POOL_2D", "one output row, stride 5x2",
              lambda: pool(_MAX, (1, 6, 8, 8), (4, 2), (5, 2))),
    ]
    # the height or the width alone, uint8 and int16 (benchmarks/reduce_sweep.py's gaps)
    forms += [
        Probe("SUM", "over the height alone", lambda: reduce(BO.SUM, (1, 8, 8, 4), (1,))),
        Probe("SUM", "over the width alone",
              lambda: reduce(BO.SUM, (1, 8, 8, 4), (2,), keep=False)),
        Probe("SUM", "over 100 rows of the height alone",
              lambda: reduce(BO.SUM, (1, 100, 8, 4), (1,))),
        Probe("REDUCE_MIN", "over the width alone",
              lambda: reduce(BO.REDUCE_MIN, (1, 8, 8, 4), (2,))),
        Probe("SUM", "uint8", lambda: reduce(BO.SUM, (1, 8, 8, 4), (1, 2), "uint8")),
        Probe("REDUCE_MAX", "uint8", lambda: reduce(BO.REDUCE_MAX, (1, 8, 8, 4), (1, 2),
                                                     "uint8")),
        Probe("REDUCE_MIN", "uint8 over 300x4",
              lambda: reduce(BO.REDUCE_MIN, (1, 300, 4, 4), (1, 2), "uint8")),
        Probe("SUM", "int16", lambda: reduce(BO.SUM, (1, 8, 8, 4), (1, 2), "int16")),
        Probe("REDUCE_MIN", "int16", lambda: reduce(BO.REDUCE_MIN, (1, 8, 8, 4), (1, 2),
                                                     "int16")),
    ]
    return forms


def _movement() -> list[Probe]:
    b2 = (2, 4, 4, 8)
    forms = [
        Probe("CONCATENATION", "rank 2", lambda: concatenation((4, 8), 1)),
        Probe("CONCATENATION", "rank 3 axis 0", lambda: concatenation((4, 4, 8), 0)),
        Probe("CONCATENATION", "axis 1", lambda: concatenation(axis=1)),
        Probe("CONCATENATION", "uint8", lambda: concatenation(dtype="uint8")),
        Probe("RESHAPE", "batch 2", lambda: with_params(BO.RESHAPE, b2, [[2, 16, 8]],
                                                        (2, 16, 8))),
        Probe("RESHAPE", "int16", lambda: with_params(BO.RESHAPE, SHAPE, [[1, 16, 8]],
                                                      (1, 16, 8), "int16")),
        Probe("SQUEEZE", "int16", lambda: _one(
            [_t((1, 1, 4, 8), "int16"), _t((1, 4, 8), "int16")], BO.SQUEEZE, [0], [1],
            _opts("SqueezeOptions", SqueezeDims=[1]))),
        Probe("EXPAND_DIMS", "int16", lambda: with_params(BO.EXPAND_DIMS, (4, 4, 8), [[0]],
                                                          SHAPE, "int16")),
        Probe("SPLIT_V", "int16", lambda: split(SHAPE, 3, "int16", sizes=[3, 5])),
        Probe("SQUEEZE", "batch 2", lambda: _one(
            [_t((2, 1, 4, 8)), _t((2, 4, 8))], BO.SQUEEZE, [0], [1],
            _opts("SqueezeOptions", SqueezeDims=[1]))),
        Probe("SPLIT", "batch 2", lambda: split(b2, 3)),
        Probe("SPLIT", "int16", lambda: split(SHAPE, 3, "int16")),
        Probe("SPLIT", "rank 2", lambda: split((4, 8), 1)),
        Probe("SPLIT_V", "batch 2", lambda: split(b2, 3, sizes=[3, 5])),
        Probe("SPLIT_V", "over height", lambda: split(SHAPE, 1, sizes=[1, 3])),
        Probe("SLICE", "batch 2", lambda: with_params(BO.SLICE, b2, [[0, 1, 0, 2], [2, 2, 4, 5]],
                                                      (2, 2, 4, 5))),
        Probe("SLICE", "int16", lambda: with_params(BO.SLICE, SHAPE, [[0, 1, 0, 2],
                                                                      [1, 2, 4, 5]],
                                                    (1, 2, 4, 5), "int16")),
        Probe("SLICE", "rank 2", lambda: with_params(BO.SLICE, (4, 8), [[1, 2], [2, 5]],
                                                     (2, 5))),
        Probe("STRIDED_SLICE", "batch 2", lambda: with_params(
            BO.STRIDED_SLICE, b2, [[0, 0, 1, 0], [2, 4, 4, 8], [1, 2, 1, 1]], (2, 2, 3, 8),
            options=_opts("StridedSliceOptions"))),
        Probe("STRIDED_SLICE", "stride 3 over width", lambda: with_params(
            BO.STRIDED_SLICE, (1, 4, 9, 8), [[0, 0, 0, 0], [1, 4, 9, 8], [1, 1, 3, 1]],
            (1, 4, 3, 8), options=_opts("StridedSliceOptions"))),
        Probe("STRIDED_SLICE", "shrink axis", lambda: with_params(
            BO.STRIDED_SLICE, SHAPE, [[0, 1, 0, 0], [1, 2, 4, 8], [1, 1, 1, 1]], (1, 4, 8),
            options=_opts("StridedSliceOptions", ShrinkAxisMask=2))),
        Probe("STRIDED_SLICE", "int16", lambda: with_params(
            BO.STRIDED_SLICE, SHAPE, [[0, 0, 1, 0], [1, 4, 4, 8], [1, 2, 1, 1]], (1, 2, 3, 8),
            "int16", _opts("StridedSliceOptions"))),
        Probe("UNPACK", "batch 2", lambda: unpack(b2, 1)),
        Probe("UNPACK", "int16", lambda: unpack(SHAPE, 1, "int16")),
        Probe("PACK", "int16", lambda: pack((1, 4, 8), 1, "int16")),
        Probe("PACK", "axis 0 of rank 2", lambda: pack((4, 8), 0)),
        Probe("PAD", "rank 3", lambda: pad((4, 4, 8), [[1, 1], [0, 2], [0, 0]])),
        Probe("PAD", "depth", lambda: pad(SHAPE, [[0, 0], [0, 0], [0, 0], [2, 1]])),
        Probe("PAD", "uint8", lambda: pad(SHAPE, [[0, 0], [1, 1], [1, 1], [0, 0]], "uint8")),
        Probe("RESIZE_BILINEAR", "int16", lambda: resize(BO.RESIZE_BILINEAR, dtype="int16")),
        Probe("RESIZE_BILINEAR", "uint8", lambda: resize(BO.RESIZE_BILINEAR, dtype="uint8")),
        Probe("RESIZE_BILINEAR", "4x", lambda: resize(BO.RESIZE_BILINEAR, size=(16, 16))),
        Probe("RESIZE_BILINEAR", "half pixel 2x",
              lambda: resize(BO.RESIZE_BILINEAR, half_pixel=True)),
        Probe("RESIZE_BILINEAR", "from 1x1", lambda: resize(BO.RESIZE_BILINEAR, (1, 1, 1, 3),
                                                            (5, 7))),
        Probe("RESIZE_NEAREST_NEIGHBOR", "int16",
              lambda: resize(BO.RESIZE_NEAREST_NEIGHBOR, dtype="int16")),
        Probe("RESIZE_NEAREST_NEIGHBOR", "uint8",
              lambda: resize(BO.RESIZE_NEAREST_NEIGHBOR, dtype="uint8")),
        Probe("RESIZE_NEAREST_NEIGHBOR", "8x",
              lambda: resize(BO.RESIZE_NEAREST_NEIGHBOR, (1, 2, 2, 3), (16, 16))),
        Probe("RESIZE_NEAREST_NEIGHBOR", "half pixel 2x",
              lambda: resize(BO.RESIZE_NEAREST_NEIGHBOR, half_pixel=True)),
        Probe("TRANSPOSE", "rank 3 HWC to WHC", lambda: with_params(
            BO.TRANSPOSE, (4, 6, 8), [[1, 0, 2]], (6, 4, 8))),
        Probe("TRANSPOSE", "rank 2", lambda: with_params(BO.TRANSPOSE, (4, 8), [[1, 0]],
                                                         (8, 4))),
        Probe("TRANSPOSE", "int16", lambda: with_params(BO.TRANSPOSE, SHAPE, [[0, 2, 1, 3]],
                                                        SHAPE, "int16")),
    ]
    return forms


def _dtypes() -> list[Probe]:
    """The uint8 / int16 forms of Vela 5.2's operators the other probes leave out
    (benchmarks/dtype_sweep.py lists every form it swept, these among them)."""
    forms = [Probe(op, "uint8", lambda b=COPIES[op]: b("uint8"))
             for op in ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "SPLIT", "SPLIT_V", "SLICE",
                        "STRIDED_SLICE", "PACK", "UNPACK", "TRANSPOSE", "TILE", "REVERSE_V2",
                        "MIRROR_PAD")]
    forms += [Probe(op, "int16", lambda b=COPIES[op]: b("int16"))
              for op in ("REVERSE_V2", "MIRROR_PAD")]
    forms += [
        Probe("EXP", "int8", lambda: unary(BO.EXP, q_out=Q_OUT["int8"])),
        Probe("EXP", "uint8", lambda: unary(BO.EXP, dtype="uint8", q_out=Q_OUT["uint8"])),
        Probe("ARG_MAX", "uint8", lambda: arg_max("uint8")),
        Probe("QUANTIZE", "uint8 to uint8", lambda: quantize("uint8", "uint8")),
        Probe("QUANTIZE", "int8 to int8", lambda: quantize("int8", "int8")),
        Probe("QUANTIZE", "uint8 to int16", lambda: quantize("uint8", "int16")),
        Probe("QUANTIZE", "int16 to uint8", lambda: quantize("int16", "uint8")),
        Probe("FULLY_CONNECTED", "int16 batch 2", lambda: fully_connected((2, 32), dtype="int16")),
        Probe("FULLY_CONNECTED", "int16 int32 bias",
              lambda: fully_connected(dtype="int16", bias_dtype="int32")),
        Probe("CONV_2D", "int16 int32 bias", lambda: conv(dtype="int16", bias_dtype="int32")),
        Probe("DEPTHWISE_CONV_2D", "int16 int32 bias",
              lambda: conv(dtype="int16", depthwise=True, bias_dtype="int32")),
        Probe("PADV2", "int8 constant apart from the zero point", lambda: padv2("int8")),
        Probe("PADV2", "uint8 constant apart from the zero point", lambda: padv2("uint8")),
        Probe("PADV2", "int16 constant apart from the zero point", lambda: padv2("int16")),
    ]
    return forms


#: every probe, by row
PROBES: tuple[Probe, ...] = tuple(_elementwise() + _activations() + _mac() + _movement()
                                   + _dtypes())

#: probes where ours leaves more on the CPU than Vela 5.2, and why
PROBE_GAPS: dict[tuple[str, str], str] = {
    ("PRELU", "int16"):
        "an int16 PRELU with an int16 alpha (the probe's): TFLite Micro's int16 kernel takes "
        "an int8 alpha only (its prepare refuses this model) and LiteRT's reads the alpha's "
        "bytes as int8 codes, so no kernel defines its result; the importer refuses it "
        "(`tflite_support.prelu_type_refusal`). TFLite Micro's form, int8 alpha codes, is on "
        "the NPU (Vela 5.2 fails on that one: \"Non-passthrough operation (Mul) could not "
        "run on NPU\")",
    ("RELU_N1_TO_1", "int16"):
        "neither TFLite Micro nor LiteRT has an int16 RELU_N1_TO_1 kernel (LiteRT's: float32, "
        "uint8 and int8), so nothing defines its result; the importer refuses it",
    ("SQUARED_DIFFERENCE", "uint8"):
        "neither TFLite Micro nor LiteRT has a uint8 SQUARED_DIFFERENCE kernel (TFLite Micro's: "
        "float32, int32, int8 and int16; LiteRT's: float32, int32 and int8), so nothing "
        "defines its result; the importer refuses it",
    ("EXP", "uint8"):
        "neither TFLite Micro nor LiteRT has a uint8 EXP kernel (TFLite Micro's: float32; "
        "LiteRT's: float32, int8 and int16), so nothing defines its result; the importer "
        "refuses it (`tflite_support.UNDEFINED_FORMS`)",
    ("DEPTHWISE_CONV_2D", "int16 int32 bias"):
        "an int16 DEPTHWISE_CONV_2D with an int32 bias: LiteRT's kernel refuses it (its int16 "
        "kernel takes an int64 bias) and TFLite Micro's reads the int32 bias's bytes as int64 "
        "values (past the end of the buffer), so no kernel defines the model's result; the "
        "importer refuses it (CONV_2D and FULLY_CONNECTED, whose int16 kernels take an int32 "
        "bias, are on the NPU)",
    ("QUANTIZE", "int16 to uint8"):
        "neither TFLite Micro nor LiteRT quantizes int16 into uint8 (TFLite Micro's kernel "
        "refuses it at invoke, LiteRT's at prepare: its int16 input goes to int8, int16 or "
        "int32), so nothing defines its result; the importer refuses it",
}
