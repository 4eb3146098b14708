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

    def __str__(self) -> str:
        return (f"{self.shape} seed {self.seed}: "
                + " -> ".join(f"{s.kind.value}{s.args}" + (f"[{s.other}]" if s.kind in _PAIRS
                                                           else "") for s in self.steps))


_PAIRS = (Kind.ADD, Kind.SUB, Kind.MUL, Kind.CONCAT)
_LUTS = (Kind.LOGISTIC, Kind.TANH, Kind.HARD_SWISH, Kind.LEAKY_RELU)
#: LOGISTIC's and TANH's output quantization as TFLite's converter writes it
_FIXED_OUT_Q = {Kind.LOGISTIC: (1 / 256, -128), Kind.TANH: (1 / 128, 0),
                Kind.SOFTMAX: (1 / 256, -128)}


# ------------------------------------------------------------------------------ drawing
def _spatial(shape) -> bool:
    return shape[1] > 1 or shape[2] > 1


@st.composite
def _step(draw, shape, history):
    """A step that fits ``shape`` (and the shape after it); ``history`` the shapes so far."""
    n, h, w, c = shape
    kinds = [Kind.CONV, Kind.DEPTHWISE, Kind.ADD, Kind.SUB, Kind.MUL, Kind.CONCAT, Kind.PAD,
             Kind.RESHAPE, Kind.TRANSPOSE, Kind.SLICE, Kind.STRIDED_SLICE, Kind.MEAN, *_LUTS]
    if h >= 2 and w >= 2:
        kinds += [Kind.AVG_POOL, Kind.MAX_POOL]
    if h * w <= 36:
        kinds += [Kind.RESIZE_BILINEAR, Kind.RESIZE_NEAREST]
    if c > 32:
        kinds.remove(Kind.CONCAT)
    if h * w == 1:
        kinds = [k for k in kinds if k not in (Kind.MEAN, Kind.SLICE, Kind.STRIDED_SLICE,
                                               Kind.TRANSPOSE, Kind.RESHAPE)]
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
        same = [i for i, s in enumerate(history) if s == shape]
        other = draw(st.sampled_from([-1, *same]))
        act = None if kind is Kind.CONCAT else draw(st.sampled_from([None, "relu"]))
        return Step(kind, (act,), other)
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
    return shape


def _out_hw(h, w, k, s, padding):
    if padding == "SAME" or h < k or w < k:
        return -(-h // s), -(-w // s)
    return (h - k) // s + 1, (w - k) // s + 1


@st.composite
def recipes(draw, min_ops: int = 2, max_ops: int = 6) -> Recipe:
    """A ``Recipe`` of ``min_ops`` to ``max_ops`` operators; a SOFTMAX ends some."""
    shape = (1, draw(st.integers(2, 10)), draw(st.integers(2, 10)), draw(st.integers(1, 8)))
    count = draw(st.integers(min_ops, max_ops))
    softmax = draw(st.booleans())
    history, steps, cur = [shape], [], shape
    for i in range(count - int(softmax)):
        step = draw(_step(cur, history))
        nxt = after(cur, step)
        if np.prod(nxt) > 4096:     # keep models small: a step that grows past that is
            continue                # left out
        steps.append(step)
        history.append(nxt)
        cur = nxt
    if softmax:
        steps.append(Step(Kind.SOFTMAX))
    if len(steps) < min_ops:
        steps += [Step(Kind.HARD_SWISH)] * (min_ops - len(steps))
    return Recipe(shape, draw(st.integers(0, 2**16)), tuple(steps))


# ------------------------------------------------------------------------------ building
def build(recipe: Recipe) -> bytes:
    """The recipe's model (its flatbuffer)."""
    g = Graph(np.random.RandomState(recipe.seed))
    x = g.input(recipe.shape)
    made = [x]
    for step in recipe.steps:
        made.append(_apply(g, step, made))
    return g.build([made[-1]])


def _apply(g: Graph, step: Step, made: list[int]) -> int:
    x, k = made[-1], step.kind
    if k in (Kind.CONV, Kind.DEPTHWISE):
        cout, kern, stride, padding, act = step.args
        n, h, w, _ = g.shape(x)
        if h < kern or w < kern:
            padding = "SAME"
        return g.conv2d(x, cout, kernel=(kern, kern), stride=(stride, stride), padding=padding,
                        act=act, depthwise=k is Kind.DEPTHWISE)
    if k in (Kind.AVG_POOL, Kind.MAX_POOL):
        size, stride, padding = step.args
        n, h, w, _ = g.shape(x)
        if h < size or w < size:
            padding = "SAME"
        return g.pool("avg" if k is Kind.AVG_POOL else "max", x, size=(size, size),
                      stride=(stride, stride), padding=padding)
    if k in _PAIRS:
        other = made[step.other] if step.other >= 0 else None
        if k is Kind.CONCAT:
            # TFLite Micro's int8 concatenation takes inputs quantized as its output only: an
            # earlier tensor quantized otherwise is replaced by the branch
            if other is None or not _same_quantization(g, other, x):
                other = g.conv2d(x, g.shape(x)[3], kernel=(1, 1))
                _requantize_as(g, other, x)
            return _concat(g, x, other)
        if other is None:
            other = g.conv2d(x, g.shape(x)[3], kernel=(1, 1))
        if k is Kind.ADD:
            return g.add(x, other, act=step.args[0])
        if k is Kind.MUL:
            return g.binary("mul", x, other, act=step.args[0])
        return _sub(g, x, other, step.args[0])
    if k is Kind.PAD:
        t, b, lft, r = step.args
        pads = np.array([[0, 0], [t, b], [lft, r], [0, 0]], np.int32)
        return _simple(g, BO.PAD, x, after(g.shape(x), step), [_const_i32(g, pads)])
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
    if k is Kind.LEAKY_RELU:
        return _unary(g, BO.LEAKY_RELU, x, _opts("LeakyReluOptions", Alpha=step.args[0]))
    if k is Kind.SOFTMAX:
        return _unary(g, BO.SOFTMAX, x, _opts("SoftmaxOptions", Beta=1.0), _FIXED_OUT_Q[k])
    code = {Kind.LOGISTIC: BO.LOGISTIC, Kind.TANH: BO.TANH, Kind.HARD_SWISH: BO.HARD_SWISH}[k]
    return _unary(g, code, x, None, _FIXED_OUT_Q.get(k))


def _const_i32(g: Graph, values: np.ndarray) -> int:
    return g._add(T(list(values.shape), "int32", data=values))


def _requantize_as(g: Graph, t: int, like: int) -> None:
    """Give the (not yet read) tensor ``t`` the quantization of ``like``."""
    g.tensors[t].scale, g.tensors[t].zp = g.tensors[like].scale, g.tensors[like].zp


def _same_quantization(g: Graph, a: int, b: int) -> bool:
    ta, tb_ = g.tensors[a], g.tensors[b]
    return np.array_equal(ta.scale, tb_.scale) and np.array_equal(ta.zp, tb_.zp)


def _same_q(g: Graph, shape, x: int) -> int:
    src = g.tensors[x]
    return g._add(T(list(shape), "int8", scale=src.scale, zp=src.zp))


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

