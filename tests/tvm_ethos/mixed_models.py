"""Random int8 models of several operators the Ethos-U takes (rfcs/0010), mixed: chains of 2
to 6 operators with a residual branch now and then, for the differential test of the
stream against TFLite Micro (test_mixed_models.py, benchmarks/mixed_models.py).

A model is drawn as a ``Recipe``: an input shape, a seed for weights and quantizations, and
``Step``s, each one operator whose parameters were drawn to fit the shape before it. Shapes
are kept small (at most 4096 elements a tensor) so that a sweep covers many models.
``build`` writes the recipe with ``graph_builder.Graph`` (its convolutions, pools, ADD/MUL and
MEAN) and the same flatbuffer writer for the rest; the quantizations are those TFLite
Micro's kernels accept (an average pool, a concatenation, a pad or a data movement keeps its
input's; LOGISTIC, TANH and SOFTMAX the converter's fixed ones).
"""
from __future__ import annotations

import enum
from typing import NamedTuple

import numpy as np
import tflite
from graph_builder import Graph
from hypothesis import strategies as st
from operator_models import _opts
from tflite_builder import BO, T


class Kind(enum.Enum):
    CONV = "CONV_2D"
    DEPTHWISE = "DEPTHWISE_CONV_2D"
    AVG_POOL = "AVERAGE_POOL_2D"
    MAX_POOL = "MAX_POOL_2D"
    ADD = "ADD"
    SUB = "SUB"
    MUL = "MUL"
    CONCAT = "CONCATENATION"
    PAD = "PAD"
    RESHAPE = "RESHAPE"
    TRANSPOSE = "TRANSPOSE"
    SLICE = "SLICE"
    STRIDED_SLICE = "STRIDED_SLICE"
    RESIZE_BILINEAR = "RESIZE_BILINEAR"
    RESIZE_NEAREST = "RESIZE_NEAREST_NEIGHBOR"
    MEAN = "MEAN"
    LOGISTIC = "LOGISTIC"
    TANH = "TANH"
    HARD_SWISH = "HARD_SWISH"
    LEAKY_RELU = "LEAKY_RELU"
    SOFTMAX = "SOFTMAX"
    PRELU = "PRELU"
    SQUARED_DIFFERENCE = "SQUARED_DIFFERENCE"
    MAXIMUM = "MAXIMUM"
    MINIMUM = "MINIMUM"
    MIRROR_PAD = "MIRROR_PAD"
    PADV2 = "PADV2"
    TRANSPOSE_CONV = "TRANSPOSE_CONV"
    SUM = "SUM"
    REDUCE_MAX = "REDUCE_MAX"
    REDUCE_MIN = "REDUCE_MIN"
    RELU6 = "RELU6"
    QUANTIZE = "QUANTIZE"
    FULLY_CONNECTED = "FULLY_CONNECTED"


class Dtype(enum.Enum):
    """A chain's activation type; a QUANTIZE may switch it mid-chain."""
    INT8 = "int8"
    UINT8 = "uint8"
    INT16 = "int16"


class Step(NamedTuple):
    """One operator and its drawn parameters (``args``, as ``build`` reads them per kind);
    ``other`` is the earlier tensor a binary operator or concatenation reads beside the last
    one: an index into the tensors so far (0 the input), or -1 for a new 1x1 convolution of the
    last tensor (a residual branch)."""
    kind: Kind
    args: tuple = ()
    other: int = -1


class Recipe(NamedTuple):
    shape: tuple[int, int, int, int]
    seed: int
    steps: tuple[Step, ...]
    dtype: Dtype = Dtype.INT8     # the input's type

    def __str__(self) -> str:
        return (f"{self.dtype.value} {self.shape} seed {self.seed}: "
                + " -> ".join(f"{s.kind.value}{s.args}" + (f"[{s.other}]" if s.kind in _PAIRS
                                                           else "") for s in self.steps))


_PAIRS = (Kind.ADD, Kind.SUB, Kind.MUL, Kind.CONCAT, Kind.SQUARED_DIFFERENCE, Kind.MAXIMUM,
          Kind.MINIMUM)
#: the kinds each chain type draws: those a TFLite kernel defines for it (TFLite Micro's for
#: int8 and int16, so that TFLite Micro stays their oracle: no int16 MIRROR_PAD, REDUCE_MAX or
#: REDUCE_MIN, which it has no kernel for; uint8 chains LiteRT's reference kernels, TFLite
#: Micro having few uint8 ones)
_BY_DTYPE = {
    Dtype.INT8: frozenset(Kind) - {Kind.SOFTMAX},
    Dtype.INT16: frozenset({Kind.CONV, Kind.DEPTHWISE, Kind.AVG_POOL, Kind.MAX_POOL, Kind.ADD,
                            Kind.SUB, Kind.MUL, Kind.CONCAT, Kind.PAD, Kind.RESHAPE,
                            Kind.TRANSPOSE, Kind.SLICE, Kind.STRIDED_SLICE, Kind.MEAN,
                            Kind.LOGISTIC, Kind.TANH, Kind.LEAKY_RELU, Kind.MAXIMUM,
                            Kind.MINIMUM, Kind.RELU6, Kind.QUANTIZE, Kind.FULLY_CONNECTED,
                            Kind.PRELU, Kind.SUM}),
    Dtype.UINT8: frozenset({Kind.CONV, Kind.DEPTHWISE, Kind.AVG_POOL, Kind.MAX_POOL, Kind.ADD,
                            Kind.SUB, Kind.MUL, Kind.CONCAT, Kind.PAD, Kind.RESHAPE,
                            Kind.TRANSPOSE, Kind.SLICE, Kind.STRIDED_SLICE, Kind.MEAN,
                            Kind.LOGISTIC, Kind.TANH, Kind.LEAKY_RELU, Kind.MAXIMUM,
                            Kind.MINIMUM, Kind.MIRROR_PAD, Kind.RELU6, Kind.QUANTIZE,
                            Kind.RESIZE_BILINEAR, Kind.RESIZE_NEAREST, Kind.PRELU,
                            Kind.HARD_SWISH, Kind.FULLY_CONNECTED, Kind.SUM, Kind.REDUCE_MAX,
                            Kind.REDUCE_MIN}),
}
_LUTS = (Kind.LOGISTIC, Kind.TANH, Kind.HARD_SWISH, Kind.LEAKY_RELU)
#: LOGISTIC's and TANH's output quantization as TFLite's converter writes it
_FIXED_OUT_Q = {Kind.LOGISTIC: (1 / 256, -128), Kind.TANH: (1 / 128, 0),
                Kind.SOFTMAX: (1 / 256, -128)}
_FIXED_OUT_Q_BY = {
    Dtype.INT8: _FIXED_OUT_Q,
    Dtype.UINT8: {Kind.LOGISTIC: (1 / 256, 0), Kind.TANH: (1 / 128, 128),
                  Kind.SOFTMAX: (1 / 256, 0)},
    Dtype.INT16: {Kind.LOGISTIC: (1 / 32768, 0), Kind.TANH: (1 / 32768, 0),
                  Kind.SOFTMAX: (1 / 32768, 0)},
}


# ------------------------------------------------------------------------------ drawing
def _spatial(shape) -> bool:
    return shape[1] > 1 or shape[2] > 1


@st.composite
def _step(draw, shape, history, dtype: Dtype = Dtype.INT8, wide: bool = False,
          litert: bool = False):
    """A step that fits ``shape`` (and the shape after it) of a ``dtype`` chain; ``history``
    the (shape, dtype) pairs so far; ``wide`` draws the kinds added for issue 28's second
    sweep (PRELU, SQUARED_DIFFERENCE, ..., QUANTIZE) too; ``litert``: the model is LiteRT's
    to judge (a uint8 chain), so none of the int8 / int16 forms whose LiteRT kernel computes
    otherwise than TFLite Micro's (SUM, MEAN, and LOGISTIC / TANH at some scales), which the
    NPU follows."""
    n, h, w, c = shape
    kinds = [Kind.CONV, Kind.DEPTHWISE, Kind.ADD, Kind.SUB, Kind.MUL, Kind.CONCAT, Kind.PAD,
             Kind.RESHAPE, Kind.TRANSPOSE, Kind.SLICE, Kind.STRIDED_SLICE, Kind.MEAN, *_LUTS]
    if wide:
        kinds += [Kind.PRELU, Kind.SQUARED_DIFFERENCE, Kind.MAXIMUM, Kind.MINIMUM,
                  Kind.MIRROR_PAD, Kind.PADV2, Kind.SUM, Kind.REDUCE_MAX, Kind.REDUCE_MIN,
                  Kind.RELU6, Kind.QUANTIZE]
        kinds.append(Kind.FULLY_CONNECTED)
        if h * w <= 36:
            kinds.append(Kind.TRANSPOSE_CONV)
    if h >= 2 and w >= 2:
        kinds += [Kind.AVG_POOL, Kind.MAX_POOL]
    if h * w <= 36:
        kinds += [Kind.RESIZE_BILINEAR, Kind.RESIZE_NEAREST]
    if c > 32:
        kinds.remove(Kind.CONCAT)
    if h * w == 1:
        kinds = [k for k in kinds if k not in (Kind.MEAN, Kind.SLICE, Kind.STRIDED_SLICE,
                                               Kind.TRANSPOSE, Kind.RESHAPE, Kind.SUM,
                                               Kind.REDUCE_MAX, Kind.REDUCE_MIN,
                                               Kind.MIRROR_PAD)]
    kinds = [k for k in kinds if k in _BY_DTYPE[dtype]]
    if litert and dtype is not Dtype.UINT8:
        kinds = [k for k in kinds if k not in (Kind.SUM, Kind.MEAN, Kind.LOGISTIC, Kind.TANH)]
    kind = draw(st.sampled_from(kinds))
    if kind in (Kind.CONV, Kind.DEPTHWISE):
        k = draw(st.sampled_from([1, 3]) if min(h, w) >= 3 else st.just(1))
        stride = draw(st.sampled_from([1, 2]))
        padding = draw(st.sampled_from(["SAME", "VALID"]))
        act = draw(st.sampled_from([None, "relu", "relu6"]))
        cout = c if kind is Kind.DEPTHWISE else draw(st.integers(1, 12))
        return Step(kind, (cout, k, stride, padding, act))
    if kind in (Kind.AVG_POOL, Kind.MAX_POOL):
        size = draw(st.sampled_from([2, 3]) if min(h, w) >= 3 else st.just(2))
        stride = draw(st.sampled_from([1, 2]))
        return Step(kind, (size, stride, draw(st.sampled_from(["SAME", "VALID"]))))
    if kind in _PAIRS:
        same = [i for i, s in enumerate(history) if s == (shape, dtype)]
        other = draw(st.sampled_from([-1, *same]))
        fused = kind in (Kind.ADD, Kind.SUB, Kind.MUL)
        act = draw(st.sampled_from([None, "relu"])) if fused else None
        return Step(kind, (act,), other)
    if kind is Kind.MIRROR_PAD:
        reflect = draw(st.booleans())
        most = (lambda d: d - 1) if reflect else (lambda d: d)
        pads = tuple(draw(st.integers(0, min(2, most(d)))) for d in (h, h, w, w))
        return Step(kind, (*pads, reflect))
    if kind is Kind.PADV2:
        pads = tuple(draw(st.integers(0, 2)) for _ in range(4))
        return Step(kind, (*pads, draw(st.integers(-128, 127))))
    if kind is Kind.TRANSPOSE_CONV:
        stride = draw(st.sampled_from([1, 2]))
        k = draw(st.sampled_from([2, 3]))
        return Step(kind, (draw(st.integers(1, 8)), k, stride))
    if kind in (Kind.SUM, Kind.REDUCE_MAX, Kind.REDUCE_MIN):
        axes = [(1, 2), (1,), (2,), (3,)]
        return Step(kind, (draw(st.sampled_from(axes)),))
    if kind is Kind.PRELU:
        return Step(kind, (draw(st.sampled_from(["channel", "one", "map"])),))
    if kind is Kind.FULLY_CONNECTED:
        return Step(kind, (draw(st.integers(1, 12)), draw(st.sampled_from([None, "relu"]))))
    if kind is Kind.QUANTIZE:
        # no int8 -> uint8: a uint8 tensor makes the model LiteRT's to judge, and the int8
        # steps before it were drawn for TFLite Micro's
        targets = {Dtype.INT8: [Dtype.INT8, Dtype.INT16],
                   Dtype.INT16: [Dtype.INT16, Dtype.INT8],
                   Dtype.UINT8: [Dtype.INT8]}[dtype]
        return Step(kind, (draw(st.sampled_from(targets)),))
    if kind is Kind.PAD:
        return Step(kind, tuple(draw(st.integers(0, 2)) for _ in range(4)))
    if kind is Kind.RESHAPE:
        forms = [(n, w, h, c), (n, h * w, 1, c), (n, 1, h * w, c)]
        return Step(kind, (draw(st.sampled_from(forms)),))
    if kind is Kind.TRANSPOSE:
        return Step(kind, ((0, 2, 1, 3),))
    if kind is Kind.SLICE:
        begin = [0] + [draw(st.integers(0, d - 1)) for d in (h, w, c)]
        size = [1] + [draw(st.integers(1, d - b)) for d, b in zip((h, w, c), begin[1:])]
        return Step(kind, (tuple(begin), tuple(size)))
    if kind is Kind.STRIDED_SLICE:
        begin = [0, draw(st.integers(0, h - 1)), draw(st.integers(0, w - 1)), 0]
        end = [1, draw(st.integers(begin[1] + 1, h)), draw(st.integers(begin[2] + 1, w)), c]
        strides = [1, draw(st.sampled_from([1, 2])), draw(st.sampled_from([1, 2])), 1]
        return Step(kind, (tuple(begin), tuple(end), tuple(strides)))
    if kind is Kind.RESIZE_BILINEAR:
        if h == 1 and w == 1:
            return Step(kind, (2, False, False))
        corners = draw(st.booleans())
        return Step(kind, (2, corners, (not corners) and draw(st.booleans())))
    if kind is Kind.RESIZE_NEAREST:
        return Step(kind, (2, False, False))
    if kind is Kind.LEAKY_RELU:
        return Step(kind, (draw(st.sampled_from([0.1, 0.2, 0.5, 1.5])),))
    return Step(kind)


def after(shape, step: Step) -> tuple[int, int, int, int]:
    """The shape after ``step``."""
    n, h, w, c = shape
    k = step.kind
    if k in (Kind.CONV, Kind.DEPTHWISE):
        cout, kern, stride, padding, _ = step.args
        return (n, *_out_hw(h, w, kern, stride, padding), cout)
    if k in (Kind.AVG_POOL, Kind.MAX_POOL):
        size, stride, padding = step.args
        return (n, *_out_hw(h, w, size, stride, padding), c)
    if k is Kind.CONCAT:
        return (n, h, w, 2 * c)   # the other input is shaped as the last
    if k is Kind.PAD:
        t, b, lft, r = step.args
        return (n, h + t + b, w + lft + r, c)
    if k is Kind.RESHAPE:
        return step.args[0]
    if k is Kind.TRANSPOSE:
        return (n, w, h, c)
    if k is Kind.SLICE:
        return tuple(step.args[1])
    if k is Kind.STRIDED_SLICE:
        b, e, s = step.args
        return (n, -(-(e[1] - b[1]) // s[1]), -(-(e[2] - b[2]) // s[2]), c)
    if k in (Kind.RESIZE_BILINEAR, Kind.RESIZE_NEAREST):
        return (n, 2 * h, 2 * w, c)
    if k is Kind.MEAN:
        return (n, 1, 1, c)
    if k in (Kind.MIRROR_PAD, Kind.PADV2):
        t, b, lft, r = step.args[:4]
        return (n, h + t + b, w + lft + r, c)
    if k is Kind.TRANSPOSE_CONV:
        cout, _, stride = step.args
        return (n, h * stride, w * stride, cout)
    if k is Kind.FULLY_CONNECTED:
        return (n, h, w, step.args[0])
    if k in (Kind.SUM, Kind.REDUCE_MAX, Kind.REDUCE_MIN):
        axes = step.args[0]
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return shape


def dtype_after(dtype: Dtype, step: Step) -> Dtype:
    """The chain's type after ``step`` (a QUANTIZE's target, else unchanged)."""
    return step.args[0] if step.kind is Kind.QUANTIZE else dtype


def _out_hw(h, w, k, s, padding):
    if padding == "SAME" or h < k or w < k:
        return -(-h // s), -(-w // s)
    return (h - k) // s + 1, (w - k) // s + 1


@st.composite
def recipes(draw, min_ops: int = 2, max_ops: int = 6, wide: bool = False) -> Recipe:
    """A ``Recipe`` of ``min_ops`` to ``max_ops`` operators; a SOFTMAX ends some. ``wide``:
    issue 28's second set of kinds too, and an int8, uint8 or int16 chain."""
    shape = (1, draw(st.integers(2, 10)), draw(st.integers(2, 10)), draw(st.integers(1, 8)))
    dtype = draw(st.sampled_from(list(Dtype))) if wide else Dtype.INT8
    count = draw(st.integers(min_ops, max_ops))
    softmax = draw(st.booleans())
    history, steps, cur, cur_dtype = [(shape, dtype)], [], shape, dtype
    for i in range(count - int(softmax)):
        step = draw(_step(cur, history, cur_dtype, wide, dtype is Dtype.UINT8))
        nxt = after(cur, step)
        if np.prod(nxt) > 4096:     # keep models small: a step that grows past that is
            continue                # left out
        steps.append(step)
        cur_dtype = dtype_after(cur_dtype, step)
        history.append((nxt, cur_dtype))
        cur = nxt
    if softmax:
        steps.append(Step(Kind.SOFTMAX))
    if len(steps) < min_ops:
        filler = Kind.HARD_SWISH if cur_dtype is not Dtype.INT16 else Kind.RELU6
        steps += [Step(filler)] * (min_ops - len(steps))
    return Recipe(shape, draw(st.integers(0, 2**16)), tuple(steps), dtype)


# ------------------------------------------------------------------------------ building
class _Graph(Graph):
    """``Graph`` whose new activations take the chain's current type (``dtype``): int8 as
    ``Graph`` draws them, uint8 around a zero point of 128, int16 with zero point 0 (TFLite's
    16-bit kernels require it)."""
    dtype = Dtype.INT8
    litert = False

    def _act(self, shape) -> int:
        if self.dtype is Dtype.INT8:
            return super()._act(shape)
        rs = self.rs
        if self.dtype is Dtype.UINT8:
            return self._add(T(list(shape), "uint8", scale=rs.uniform(0.02, 0.1),
                               zp=int(rs.randint(108, 148))))
        return self._add(T(list(shape), "int16", scale=rs.uniform(0.0005, 0.003), zp=0))


def build(recipe: Recipe) -> bytes:
    """The recipe's model (its flatbuffer)."""
    g = _Graph(np.random.RandomState(recipe.seed))
    g.dtype = recipe.dtype
    # a model with a uint8 tensor has LiteRT's reference kernels as its oracle, whose int8 and
    # int16 RELU6 requantize where TFLite Micro's clamp the codes (the NPU's form): there an
    # int8 / int16 RELU6 keeps its input's quantization, which both read alike
    g.litert = recipe.dtype is Dtype.UINT8 or any(
        s.kind is Kind.QUANTIZE and s.args[0] is Dtype.UINT8 for s in recipe.steps)
    x = g.input(recipe.shape)
    made = [x]
    for step in recipe.steps:
        g.dtype = Dtype(g.tensors[made[-1]].dtype)
        made.append(_apply(g, step, made))
    return g.build([made[-1]])


def _conv2d(g: _Graph, x: int, cout: int, **kw) -> int:
    """``Graph.conv2d`` with the weights and bias TFLite's kernels take for the chain's type:
    int8 per-channel weights and an int64 bias for int16 (16x8), per-tensor uint8 weights
    around 128 for uint8."""
    y = g.conv2d(x, cout, **kw)
    _, _, _, ins, _ = g.ops[-1]
    wt, bias = g.tensors[ins[1]], g.tensors[ins[2]]
    if g.dtype is Dtype.INT16:
        bias.dtype, bias.data = "int64", bias.data.astype(np.int64)
    elif g.dtype is Dtype.UINT8:
        ws = wt.scale[:1]
        wt.data = (wt.data.astype(np.int16) + 128).astype(np.uint8)
        wt.dtype, wt.scale, wt.zp, wt.axis = "uint8", ws, np.array([128]), 0
        bias.scale = (g.tensors[x].scale[:1] * ws).astype(np.float32)
        bias.zp = np.zeros(1, np.int64)
    return y


def _apply(g: _Graph, step: Step, made: list[int]) -> int:
    x, k = made[-1], step.kind
    if k in (Kind.CONV, Kind.DEPTHWISE):
        cout, kern, stride, padding, act = step.args
        n, h, w, _ = g.shape(x)
        if h < kern or w < kern:
            padding = "SAME"
        return _conv2d(g, x, cout, kernel=(kern, kern), stride=(stride, stride),
                       padding=padding, act=act, depthwise=k is Kind.DEPTHWISE)
    if k in (Kind.AVG_POOL, Kind.MAX_POOL):
        size, stride, padding = step.args
        n, h, w, _ = g.shape(x)
        if h < size or w < size:
            padding = "SAME"
        y = g.pool("avg" if k is Kind.AVG_POOL else "max", x, size=(size, size),
                   stride=(stride, stride), padding=padding)
        g.tensors[y].dtype = g.dtype.value
        return y
    if k in _PAIRS:
        other = made[step.other] if step.other >= 0 else None
        if k in (Kind.CONCAT, Kind.MAXIMUM, Kind.MINIMUM):
            # TFLite Micro's concatenation, maximum and minimum take inputs quantized as
            # their output only: an earlier tensor quantized otherwise is replaced by the
            # branch
            if other is None or not _same_quantization(g, other, x):
                other = _conv2d(g, x, g.shape(x)[3], kernel=(1, 1))
                _requantize_as(g, other, x)
            if k is Kind.CONCAT:
                return _concat(g, x, other)
            code = BO.MAXIMUM if k is Kind.MAXIMUM else BO.MINIMUM
            y = _same_q(g, g.shape(x), x)
            g.ops.append((code, 0, None, [x, other], [y]))
            return y
        if other is None:
            other = _conv2d(g, x, g.shape(x)[3], kernel=(1, 1))
        if k is Kind.ADD:
            return g.add(x, other, act=step.args[0])
        if k is Kind.MUL:
            return g.binary("mul", x, other, act=step.args[0])
        if k is Kind.SQUARED_DIFFERENCE:
            y = g._act(g.shape(x))
            g.ops.append((BO.SQUARED_DIFFERENCE, 0, None, [x, other], [y]))
            return y
        return _sub(g, x, other, step.args[0])
    if k is Kind.PAD:
        t, b, lft, r = step.args
        pads = np.array([[0, 0], [t, b], [lft, r], [0, 0]], np.int32)
        return _simple(g, BO.PAD, x, after(g.shape(x), step), [_const_i32(g, pads)])
    if k in (Kind.MIRROR_PAD, Kind.PADV2):
        t, b, lft, r, extra = step.args
        pads = _const_i32(g, np.array([[0, 0], [t, b], [lft, r], [0, 0]], np.int32))
        if k is Kind.MIRROR_PAD:
            mode = tflite.MirrorPadMode.REFLECT if extra else tflite.MirrorPadMode.SYMMETRIC
            return _simple(g, BO.MIRROR_PAD, x, after(g.shape(x), step), [pads],
                           _opts("MirrorPadOptions", Mode=mode))
        src = g.tensors[x]
        value = g._add(T([], src.dtype, scale=src.scale, zp=src.zp,
                         data=np.asarray(extra, src.dtype)))
        return _simple(g, BO.PADV2, x, after(g.shape(x), step), [pads, value])
    if k is Kind.RESHAPE:
        shape = np.asarray(step.args[0], np.int32)
        return _simple(g, BO.RESHAPE, x, step.args[0], [_const_i32(g, shape)],
                       _opts("ReshapeOptions", NewShape=list(step.args[0])))
    if k is Kind.TRANSPOSE:
        perm = np.asarray(step.args[0], np.int32)
        return _simple(g, BO.TRANSPOSE, x, after(g.shape(x), step), [_const_i32(g, perm)])
    if k is Kind.SLICE:
        begin, size = (np.asarray(a, np.int32) for a in step.args)
        return _simple(g, BO.SLICE, x, tuple(size), [_const_i32(g, begin), _const_i32(g, size)])
    if k is Kind.STRIDED_SLICE:
        params = [_const_i32(g, np.asarray(a, np.int32)) for a in step.args]
        return _simple(g, BO.STRIDED_SLICE, x, after(g.shape(x), step), params,
                       _opts("StridedSliceOptions", BeginMask=0, EndMask=0))
    if k in (Kind.RESIZE_BILINEAR, Kind.RESIZE_NEAREST):
        factor, corners, half = step.args
        n, h, w, c = g.shape(x)
        size = _const_i32(g, np.array([factor * h, factor * w], np.int32))
        name = "ResizeBilinear" if k is Kind.RESIZE_BILINEAR else "ResizeNearestNeighbor"
        code = BO.RESIZE_BILINEAR if k is Kind.RESIZE_BILINEAR else BO.RESIZE_NEAREST_NEIGHBOR
        return _simple(g, code, x, after(g.shape(x), step), [size],
                       _opts(f"{name}Options", AlignCorners=corners, HalfPixelCenters=half))
    if k is Kind.MEAN:
        return g.mean(x)
    if k in (Kind.SUM, Kind.REDUCE_MAX, Kind.REDUCE_MIN):
        shape = after(g.shape(x), step)
        y = _same_q(g, shape, x) if k is not Kind.SUM else g._act(shape)
        axes = _const_i32(g, np.asarray(step.args[0], np.int32))
        code = {Kind.SUM: BO.SUM, Kind.REDUCE_MAX: BO.REDUCE_MAX,
                Kind.REDUCE_MIN: BO.REDUCE_MIN}[k]
        otype, ofn = _opts("ReducerOptions", KeepDims=True)
        g.ops.append((code, otype, ofn, [x, axes], [y]))
        return y
    if k is Kind.TRANSPOSE_CONV:
        return _transpose_conv(g, x, step)
    if k is Kind.PRELU:
        return _prelu(g, x, step.args[0])
    if k is Kind.FULLY_CONNECTED:
        return _fully_connected(g, x, *step.args)
    if k is Kind.RELU6:
        if g.litert and g.dtype is not Dtype.UINT8:
            return _unary(g, BO.RELU6, x, None, tuple(_q_of(g, x)))
        return _unary(g, BO.RELU6, x)
    if k is Kind.QUANTIZE:
        g.dtype = step.args[0]
        return _unary(g, BO.QUANTIZE, x)
    out_q = _FIXED_OUT_Q_BY[g.dtype].get(k)
    if k is Kind.LEAKY_RELU:
        return _unary(g, BO.LEAKY_RELU, x, _opts("LeakyReluOptions", Alpha=step.args[0]))
    if k is Kind.SOFTMAX:
        return _unary(g, BO.SOFTMAX, x, _opts("SoftmaxOptions", Beta=1.0), out_q)
    code = {Kind.LOGISTIC: BO.LOGISTIC, Kind.TANH: BO.TANH, Kind.HARD_SWISH: BO.HARD_SWISH}[k]
    return _unary(g, code, x, None, out_q)


def _transpose_conv(g: _Graph, x: int, step: Step) -> int:
    """An int8 TRANSPOSE_CONV (SAME: output = input x stride), per-channel weights, no bias."""
    cout, kern, stride = step.args
    cin = g.shape(x)[3]
    wshape = [cout, kern, kern, cin]
    wt = g._add(T(wshape, "int8", scale=g.rs.uniform(0.002, 0.02, size=cout),
                  zp=np.zeros(cout, np.int64), axis=0,
                  data=g.rs.randint(-127, 128, size=wshape).astype(np.int8)))
    shape = after(g.shape(x), step)
    out_shape = _const_i32(g, np.asarray(shape, np.int32))
    y = g._act(shape)
    otype, ofn = _opts("TransposeConvOptions", Padding=tflite.Padding.SAME, StrideW=stride,
                       StrideH=stride)
    g.ops.append((BO.TRANSPOSE_CONV, otype, ofn, [out_shape, wt, x], [y]))
    return y


def _fully_connected(g: _Graph, x: int, cout: int, act) -> int:
    """FULLY_CONNECTED of every pixel's channels (keep_num_dims), weights as ``_conv2d``'s:
    per-tensor (TFLite's fully connected kernels take no per-channel weights), int8 (uint8
    around 128 in a uint8 chain), an int64 bias in an int16 chain."""
    cin = g.shape(x)[3]
    u8 = g.dtype is Dtype.UINT8
    ws = np.float32(g.rs.uniform(0.002, 0.02))
    data = g.rs.randint(-127, 128, size=(cout, cin))
    wt = g._add(T([cout, cin], "uint8" if u8 else "int8", scale=ws, zp=128 if u8 else 0,
                  data=(data + 128).astype(np.uint8) if u8 else data.astype(np.int8)))
    bdt = "int64" if g.dtype is Dtype.INT16 else "int32"
    bias = g._add(T([cout], bdt, scale=np.float32(g.tensors[x].scale[0] * ws), zp=0,
                    data=g.rs.randint(-2000, 2000, size=cout).astype(bdt)))
    y = g._act(after(g.shape(x), Step(Kind.FULLY_CONNECTED, (cout, act))))
    otype, ofn = _opts("FullyConnectedOptions", FusedActivationFunction={None: 0, "relu": 1}[act],
                       KeepNumDims=True)
    g.ops.append((BO.FULLY_CONNECTED, otype, ofn, [x, wt, bias], [y]))
    return y


def _prelu(g: _Graph, x: int, form: str) -> int:
    """PRELU with a constant alpha: one per channel, one for all, or a map over height, width
    and depth; uint8 in a uint8 chain, else int8 (an int16 chain's alpha too)."""
    n, h, w, c = g.shape(x)
    shape = {"channel": [1, 1, c], "one": [1], "map": [h, w, c]}[form]
    if g.dtype is Dtype.UINT8:
        adt, zp, lo, hi = "uint8", int(g.rs.randint(118, 138)), 0, 256
    else:
        adt, zp, lo, hi = "int8", int(g.rs.randint(-10, 10)), -128, 128
    alpha = g._add(T(shape, adt, scale=g.rs.uniform(0.002, 0.02), zp=zp,
                     data=g.rs.randint(lo, hi, size=shape).astype(adt)))
    y = g._act(g.shape(x))
    g.ops.append((BO.PRELU, 0, None, [x, alpha], [y]))
    return y


def _const_i32(g: Graph, values: np.ndarray) -> int:
    return g._add(T(list(values.shape), "int32", data=values))


def _requantize_as(g: Graph, t: int, like: int) -> None:
    """Give the (not yet read) tensor ``t`` the quantization of ``like``."""
    g.tensors[t].scale, g.tensors[t].zp = g.tensors[like].scale, g.tensors[like].zp


def _q_of(g: Graph, x: int) -> tuple[float, int]:
    t = g.tensors[x]
    return float(t.scale[0]), int(t.zp[0])


def _same_quantization(g: Graph, a: int, b: int) -> bool:
    ta, tb_ = g.tensors[a], g.tensors[b]
    return np.array_equal(ta.scale, tb_.scale) and np.array_equal(ta.zp, tb_.zp)


def _same_q(g: Graph, shape, x: int) -> int:
    src = g.tensors[x]
    return g._add(T(list(shape), src.dtype, scale=src.scale, zp=src.zp))


def _simple(g: Graph, code, x: int, shape, params: list[int], options=None) -> int:
    """A data movement of ``x`` (quantized as its input) reading constant ``params``."""
    y = _same_q(g, shape, x)
    otype, ofn = options if options else (0, None)
    g.ops.append((code, otype, ofn, [x, *params], [y]))
    return y


def _unary(g: Graph, code, x: int, options=None, out_q=None) -> int:
    y = g._act(g.shape(x))
    if out_q is not None:
        g.tensors[y].scale = np.atleast_1d(np.float32(out_q[0]))
        g.tensors[y].zp = np.atleast_1d(np.int64(out_q[1]))
    otype, ofn = options if options else (0, None)
    g.ops.append((code, otype, ofn, [x], [y]))
    return y


def _sub(g: Graph, a: int, b: int, act) -> int:
    y = g._act(g.shape(a))
    otype, ofn = _opts("SubOptions", FusedActivationFunction={None: 0, "relu": 1}[act])
    g.ops.append((BO.SUB, otype, ofn, [a, b], [y]))
    return y


def _concat(g: Graph, a: int, b: int) -> int:
    n, h, w, c = g.shape(a)
    y = _same_q(g, (n, h, w, c + g.shape(b)[3]), a)
    otype, ofn = _opts("ConcatenationOptions", Axis=3, FusedActivationFunction=0)
    g.ops.append((BO.CONCATENATION, otype, ofn, [a, b], [y]))
    return y

