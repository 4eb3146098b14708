"""The TFLite operators of one NPU group read as the QOps the TVM path's importer and
``patterns`` make of them, without TVM: the int8 forms of CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED, ADD, AVERAGE_POOL_2D, MAX_POOL_2D, MEAN, RESHAPE and SOFTMAX that
convolutional classifiers are made of.

A form this reader does not know exactly as the TVM path reads it (another type, a fused
activation or a shape it has not been checked on) is a :class:`Declined` naming it: the
group then goes through TVM, which decides. The reader never refuses an operator itself, so
every refusal stays the TVM path's.

Shapes follow TVM's importer: its FULLY_CONNECTED keeps its input's leading dimensions (a
1x1x1x64 input gives 1x1x1x10 where TFLite declares 1x10), and the operators after it inherit
them.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tflite

from ethos_arch.ops import Op
from planner.parts import same_padding
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph
from tvm_ethos.compute.quant import dtype_range, fused_activation_codes, quantize_value
from tvm_ethos.qop import QOp

#: TensorType of int8, int32
_INT8, _INT32 = 9, 2
#: ActivationFunctionType: NONE, RELU, RELU_N1_TO_1, RELU6
_NONE, _RELU, _RELU_N1_TO_1, _RELU6 = 0, 1, 2, 3
#: the fused activations read as the TVM path reads them: a weighted operator clips its
#: codes (``fused_activation_codes``), an ADD its real result before the quantize
_WEIGHTED_ACTS = (_NONE, _RELU, _RELU_N1_TO_1, _RELU6)
_ADD_ACTS = {_NONE: None, _RELU: (0.0, None), _RELU_N1_TO_1: (-1.0, 1.0), _RELU6: (0.0, 6.0)}


class Declined(NamedTuple):
    """Why the TVM-free path leaves a group to TVM: a form it does not read."""

    why: str


class DirectLayer(NamedTuple):
    """One operator of the group: its QOp, the source tensors of its activation inputs (in
    the QOp's input order) and of its output."""

    qop: QOp
    inputs: tuple[int, ...]
    output: int


class _Reader:
    """Reads the operators of one source graph, tracking the shape TVM's importer gives each
    tensor it produced."""

    def __init__(self, graph: SourceGraph):
        self.graph = graph
        self.model = graph.model
        self.g = graph.g
        self.shapes: dict[int, tuple[int, ...]] = {}

    # ------------------------------------------------------------------ tensors
    def tensor(self, t: int):
        return self.g.Tensors(t)

    def declared(self, t: int) -> tuple[int, ...]:
        tensor = self.tensor(t)
        return tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()

    def shape(self, t: int) -> tuple[int, ...]:
        return self.shapes.get(t, self.declared(t))

    def qparams(self, t: int) -> tuple[np.ndarray, np.ndarray] | None:
        q = self.tensor(t).Quantization()
        if q is None or q.ScaleLength() == 0:
            return None
        zps = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(1, np.int64)
        return (np.asarray(q.ScaleAsNumpy(), np.float32).ravel(),
                np.asarray(zps).astype(np.int64).ravel())

    def activation_q(self, t: int) -> tuple[float, int] | None:
        """(scale, zero point) of an int8 activation tensor quantized per tensor."""
        if self.tensor(t).Type() != _INT8:
            return None
        q = self.qparams(t)
        if q is None or q[0].size != 1 or q[1].size != 1:
            return None
        return float(q[0][0]), int(q[1][0])

    def data(self, t: int, dtype) -> np.ndarray:
        buf = self.model.Buffers(self.tensor(t).Buffer())
        return np.frombuffer(buf.DataAsNumpy().tobytes(), dtype=dtype).reshape(self.declared(t))

    def options(self, op, cls):
        table = op.BuiltinOptions()
        if table is None:
            return None
        opts = cls()
        opts.Init(table.Bytes, table.Pos)
        return opts


def read_layers(graph: SourceGraph, ops) -> list[DirectLayer] | Declined:
    """The QOps of source operators ``ops`` (in source order), or why the TVM-free path
    declines the group."""
    reader = _Reader(graph)
    layers = []
    for i in sorted(ops):
        kind = graph.kinds[i]
        entry = _READERS.get(kind)
        if entry is None:
            return Declined(f"{kind} is not read without TVM")
        n_in, options, read = entry
        op = graph.g.Operators(i)
        got = _operands(reader, op, n_in, options) if n_in else None
        made = got if isinstance(got, Declined) else read(reader, op, got)
        if isinstance(made, Declined):
            return Declined(f"{kind} (operator {i}): {made.why}")
        layers.append(made)
    return layers


# ---------------------------------------------------------------------- one operator each
class _Operands(NamedTuple):
    """An operator's activation inputs and output (source tensors), their quantization and
    its options table."""

    ins: list[int]
    out: int
    in_q: list[tuple[float, int]]
    out_q: tuple[float, int]
    opts: object


def _operands(reader: _Reader, op, n_in: int, options) -> _Operands | Declined:
    """The first ``n_in`` operands (activations) and the output, unless one is not an int8
    tensor quantized per tensor; ``options``: the options table's class."""
    ins = [int(t) for t in op.InputsAsNumpy()[:n_in]]
    out = int(op.OutputsAsNumpy()[0])
    qs = [reader.activation_q(t) for t in ins + [out]]
    if any(q is None for q in qs) or any(graph_constant(reader, t) for t in ins):
        return Declined("not int8 per tensor")
    return _Operands(ins, out, qs[:-1], qs[-1], reader.options(op, options))


def graph_constant(reader: _Reader, t: int) -> bool:
    return reader.graph.constant(t)


def _qop(kind: Op, reader: _Reader, ins, out_shape, in_q, out_q) -> QOp:
    return QOp(kind=kind, inputs=[], in_shapes=[reader.shape(t) for t in ins],
               in_dtypes=["int8"] * len(ins), out_shape=tuple(out_shape), out_dtype="int8",
               in_q=list(in_q), out_q=out_q)


def _clamp(q: QOp, fused: int) -> None:
    """A weighted operator's fused activation: the clip of the codes the importer adds."""
    codes = fused_activation_codes(fused, q.out_q[0], q.out_q[1], q.out_dtype)
    if codes is not None:
        q.act_min, q.act_max = max(q.act_min, codes[0]), min(q.act_max, codes[1])


def _window(reader: _Reader, x: int, opts, kernel: tuple[int, int], dilation=(1, 1)):
    """(strides, (top, left, bottom, right) padding, output H and W) of a windowed
    operator, SAME or VALID."""
    _, h, w, _ = reader.shape(x)
    strides = (int(opts.StrideH()), int(opts.StrideW()))
    if opts.Padding() == 0:   # SAME
        (pt, pb), (pl, pr) = (same_padding(h, kernel[0], strides[0], dilation[0]),
                              same_padding(w, kernel[1], strides[1], dilation[1]))
    else:
        pt = pb = pl = pr = 0
    oh = (h + pt + pb - (dilation[0] * (kernel[0] - 1) + 1)) // strides[0] + 1
    ow = (w + pl + pr - (dilation[1] * (kernel[1] - 1) + 1)) // strides[1] + 1
    return strides, (pt, pl, pb, pr), (oh, ow)


def _weights(reader: _Reader, q: QOp, w: int, b: int | None, channels: int) -> Declined | None:
    """The int8 weights' scales and (zero) zero points, and the int32 bias with its scale."""
    wq = reader.qparams(w)
    if reader.tensor(w).Type() != _INT8 or wq is None or np.any(wq[1] != 0) \
            or wq[0].size not in (1, channels):
        return Declined("weights that are not symmetric int8")
    q.w_scale, q.w_zp, q.w_dtype = wq[0], np.zeros(1, np.int64), "int8"
    if b is not None:
        bq = reader.qparams(b)
        if reader.tensor(b).Type() != _INT32 or bq is None or np.any(bq[1] != 0):
            return Declined("a bias that is not int32 with zero points 0")
        q.bias, q.bias_scale = reader.data(b, np.int32).copy(), bq[0]
    return None


def _bias_operand(op) -> int | None:
    ts = op.InputsAsNumpy()
    return int(ts[2]) if len(ts) > 2 and ts[2] >= 0 else None


def _convolution(depthwise: bool):
    """CONV_2D (OHWI weights) or DEPTHWISE_CONV_2D ((1, KH, KW, C) weights: multiplier 1, or
    one input channel, which the importer makes a plain convolution)."""

    def read(reader: _Reader, op, got: _Operands) -> DirectLayer | Declined:
        (x,), out, in_q, out_q, opts = got
        if opts is None:
            return Declined("no options table")
        w = int(op.InputsAsNumpy()[1])
        lead, kh, kw, last = reader.declared(w)
        channels = reader.shape(x)[3] if len(reader.shape(x)) == 4 else None
        if depthwise:   # TFLite's (1, KH, KW, C) as HWOI (KH, KW, 1, C), or HWIO of one input
            co, kind = last, Op.CONV2D if channels == 1 else Op.DEPTHWISE_CONV2D
            weights_at = (1, 2, 0, 3)
            if lead != 1 or channels not in (1, co):
                return Declined("a depth multiplier other than 1 of more than one channel")
        else:           # OHWI as HWIO
            co, kind, weights_at = lead, Op.CONV2D, (1, 2, 3, 0)
            if channels != last:
                return Declined("a grouped or non-NHWC convolution")
        fused = opts.FusedActivationFunction()
        if fused not in _WEIGHTED_ACTS:
            return Declined("its fused activation")
        dilation = (int(opts.DilationHFactor()), int(opts.DilationWFactor()))
        strides, padding, (oh, ow) = _window(reader, x, opts, (kh, kw), dilation)
        q = _qop(kind, reader, [x], (1, oh, ow, co), in_q, out_q)
        why = _weights(reader, q, w, _bias_operand(op), co)
        if why:
            return why
        q.weights = np.ascontiguousarray(reader.data(w, np.int8).transpose(*weights_at))
        q.attrs.update(strides=strides, padding=padding, dilation=dilation,
                       groups=co if kind == Op.DEPTHWISE_CONV2D else 1, data_layout="NHWC",
                       kernel_layout="HWOI" if kind == Op.DEPTHWISE_CONV2D else "HWIO",
                       out_layout="NHWC")
        if kind == Op.DEPTHWISE_CONV2D:
            q.attrs["depth_multiplier"] = 1
        _clamp(q, fused)
        return _checked(reader, q, [x], out)

    return read


def _fully_connected(reader: _Reader, op, got: _Operands) -> DirectLayer | Declined:
    (x,), out, in_q, out_q, opts = got
    w = int(op.InputsAsNumpy()[1])
    units, depth = reader.declared(w)
    x_shape = reader.shape(x)
    if opts is not None and (opts.WeightsFormat() != 0 or opts.KeepNumDims()):
        return Declined("its weights format or kept dimensions")
    if len(x_shape) not in (2, 4) or any(d != 1 for d in x_shape[:-1]) or x_shape[-1] != depth:
        return Declined(f"an input of shape {x_shape}, not one row of the depth")
    fused = opts.FusedActivationFunction() if opts is not None else _NONE
    if fused not in _WEIGHTED_ACTS:
        return Declined("its fused activation")
    q = _qop(Op.FULLY_CONNECTED, reader, [x], x_shape[:-1] + (units,), in_q, out_q)
    why = _weights(reader, q, w, _bias_operand(op), units)
    if why:
        return why
    q.weights = np.ascontiguousarray(reader.data(w, np.int8))
    _clamp(q, fused)
    # TVM's FULLY_CONNECTED keeps the input's leading dimensions; the declared output has
    # the same rows
    if int(np.prod(reader.declared(out))) != units:
        return Declined("an output that is not one row of the units")
    reader.shapes[out] = q.out_shape
    return DirectLayer(q, (x,), out)


def _add(reader: _Reader, op, got: _Operands) -> DirectLayer | Declined:
    (a, b), out, in_q, out_q, opts = got
    fused = opts.FusedActivationFunction() if opts is not None else _NONE
    if reader.shape(a) != reader.shape(b) or len(reader.shape(a)) != 4 or a == b:
        return Declined("operands of other shapes (a broadcast) or one operand twice")
    if fused not in _ADD_ACTS:
        return Declined("its fused activation")
    q = _qop(Op.ADD, reader, [a, b], reader.shape(a), in_q, out_q)
    bounds = _ADD_ACTS[fused]
    if bounds is not None:   # the importer's float RELU or clip before the quantize
        lo, hi = bounds
        q.float_activation = "relu" if hi is None else f"clip({lo:g},{hi:g})"
        q.act_min = max(q.act_min, quantize_value(lo, *out_q))
        if hi is not None:
            q.act_max = min(q.act_max, quantize_value(hi, *out_q))
    return _checked(reader, q, [a, b], out)


def _pool(kind: Op):
    def read(reader: _Reader, op, got: _Operands) -> DirectLayer | Declined:
        (x,), out, in_q, out_q, opts = got
        if opts is None or in_q[0] != out_q:
            return Declined("no options table, or an output quantized unlike its input")
        if opts.FusedActivationFunction() != _NONE:
            return Declined("its fused activation")
        kernel = (int(opts.FilterHeight()), int(opts.FilterWidth()))
        if len(reader.shape(x)) != 4:
            return Declined("a non-NHWC input")
        strides, padding, (oh, ow) = _window(reader, x, opts, kernel)
        n, _, _, c = reader.shape(x)
        # pooling keeps the codes' quantization: no dequantize around it
        q = QOp(kind=kind, inputs=[], in_shapes=[reader.shape(x)], in_dtypes=["int8"],
                out_shape=(n, oh, ow, c), out_dtype="int8")
        q.attrs.update(pool_size=kernel, strides=strides, padding=padding, dilation=(1, 1),
                       layout="NHWC", ceil_mode=False)
        if kind == Op.AVG_POOL2D:
            q.attrs["count_include_pad"] = False
        return _checked(reader, q, [x], out)

    return read


def _mean(reader: _Reader, op, got: _Operands) -> DirectLayer | Declined:
    (x,), out, in_q, out_q, opts = got
    axes_t = int(op.InputsAsNumpy()[1])
    x_shape = reader.shape(x)
    if not graph_constant(reader, axes_t) or len(x_shape) != 4:
        return Declined("axes that are not a constant of a 4-D input")
    axes = tuple(sorted(int(a) % 4 for a in reader.data(axes_t, np.int32).ravel()))
    if axes != (1, 2) or opts is None or not opts.KeepDims():
        return Declined("a mean other than over H and W with the dimensions kept")
    q = _qop(Op.MEAN, reader, [x], (x_shape[0], 1, 1, x_shape[3]), in_q, out_q)
    q.attrs.update(axis=axes, keepdims=True)
    return _checked(reader, q, [x], out)


def _reshape(reader: _Reader, op, got: None) -> DirectLayer | Declined:
    x, out = int(op.InputsAsNumpy()[0]), int(op.OutputsAsNumpy()[0])
    if reader.tensor(x).Type() != _INT8 or graph_constant(reader, x):
        return Declined("not an int8 activation")
    x_shape, new = reader.shape(x), reader.declared(out)
    if int(np.prod(x_shape)) != int(np.prod(new)) or \
            tuple(d for d in x_shape if d != 1) != tuple(d for d in new if d != 1):
        return Declined("a reshape that does more than add or drop dimensions of one")
    q = QOp(kind=Op.RESHAPE, inputs=[], in_shapes=[x_shape], in_dtypes=["int8"],
            out_shape=new, out_dtype="int8")
    return DirectLayer(q, (x,), out)


def _softmax(reader: _Reader, op, got: _Operands) -> DirectLayer | Declined:
    (x,), out, in_q, out_q, opts = got
    x_shape = reader.shape(x)
    if any(d != 1 for d in x_shape[:-1]):
        return Declined("more than one row")
    if out_q != (1 / 256, -128):
        return Declined("an output quantized other than TFLite's 1/256, -128")
    q = _qop(Op.SOFTMAX, reader, [x], x_shape, in_q, out_q)
    q.attrs.update(axis=-1, beta=float(np.float32(opts.Beta())) if opts is not None else 1.0)
    reader.shapes[out] = x_shape
    return DirectLayer(q, (x,), out)


def _checked(reader: _Reader, q: QOp, ins, out: int) -> DirectLayer | Declined:
    """The layer, unless the shape it computes is not the one the model declares."""
    if tuple(q.out_shape) != reader.declared(out):
        return Declined(f"an output shape {q.out_shape} the model declares as "
                        f"{reader.declared(out)}")
    lo, hi = dtype_range(q.out_dtype)
    if not lo <= q.act_min <= q.act_max <= hi:
        return Declined("an empty activation range")
    return DirectLayer(q, tuple(ins), out)


#: per builtin: how many activation operands (None: read by the reader itself), its options
#: table, its reader
_READERS = {
    "CONV_2D": (1, tflite.Conv2DOptions, _convolution(depthwise=False)),
    "DEPTHWISE_CONV_2D": (1, tflite.DepthwiseConv2DOptions, _convolution(depthwise=True)),
    "FULLY_CONNECTED": (1, tflite.FullyConnectedOptions, _fully_connected),
    "ADD": (2, tflite.AddOptions, _add),
    "AVERAGE_POOL_2D": (1, tflite.Pool2DOptions, _pool(Op.AVG_POOL2D)),
    "MAX_POOL_2D": (1, tflite.Pool2DOptions, _pool(Op.MAX_POOL2D)),
    "MEAN": (1, tflite.ReducerOptions, _mean),
    "RESHAPE": (None, None, _reshape),
    "SOFTMAX": (1, tflite.SoftmaxOptions, _softmax),
}
