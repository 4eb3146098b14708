"""Part constructors, one per NPU operator kind, with exact NHWC propagators.

Each constructor computes the output shape, creates the constant tensors the operation reads
(weights, bias) and derives the propagator of every input from the operator's arithmetic,
the rules of a window, a constant along the output channels, a reduction and a whole-input
read living in :mod:`planner.layer_propagators`, which the TVM-free compile path shares.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Sequence

from ethos_arch.ops import Op
from ethos_arch.pool_bands import one_pool, pool_bands
from planner import layer_propagators
from planner.errors import PlannerError
from planner.graph import DTYPE_BYTES, Part, Tensor
from planner.propagator import Propagator
from planner.work_memory import WORK_ATTR, WorkMemory

ACTIVATIONS = (None, "relu", "relu6", "relu_n1_to_1", "tanh", "sigmoid", "leaky_relu", "clip")


def _pair(x, name: str) -> tuple[int, int]:
    if isinstance(x, int):
        return (x, x)
    x = tuple(int(v) for v in x)
    if len(x) != 2:
        raise PlannerError(f"{name} must be one int or two, got {x}")
    return x


def _pads(p) -> tuple[int, int, int, int]:
    """(top, left, bottom, right); one int pads all sides; two are (vertical, horizontal)."""
    if isinstance(p, int):
        return (p, p, p, p)
    p = tuple(int(v) for v in p)
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    if len(p) != 4:
        raise PlannerError(f"padding must have 1, 2 or 4 values, got {p}")
    return p


def _check_nhwc(t: Tensor, who: str) -> None:
    if len(t.shape) != 4:
        raise PlannerError(f"{who}: input {t.name!r} must be NHWC (4 dims), has shape {t.shape}")


def window_out(size: int, k: int, s: int, d: int, pad_lo: int, pad_hi: int) -> int:
    """Output length of a sliding window; raises if the window never fits."""
    eff = d * (k - 1) + 1
    n = (size + pad_lo + pad_hi - eff) // s + 1
    if n < 1:
        raise PlannerError(f"window of effective size {eff} does not fit in {size} "
                           f"with padding {pad_lo}+{pad_hi}")
    return n


def same_padding(size: int, k: int, s: int, d: int = 1) -> tuple[int, int]:
    """TFLite SAME padding: output ceil(size/s), extra padding at the end."""
    eff = d * (k - 1) + 1
    out = -(-size // s)
    total = max((out - 1) * s + eff - size, 0)
    return total // 2, total - total // 2


def _attrs(**kw) -> tuple:
    return tuple(sorted(kw.items()))


def conv2d(name: str, ifm: Tensor, out_channels: int, kernel=(1, 1), strides=(1, 1),
           dilation=(1, 1), padding=(0, 0, 0, 0), groups: int = 1, activation: str | None = None,
           weight_compression: float = 1.0, bias: bool = True,
           output_name: str | None = None) -> Part:
    _check_nhwc(ifm, name)
    k, s, d, p = _pair(kernel, "kernel"), _pair(strides, "strides"), _pair(dilation, "dilation"), \
        _pads(padding)
    n, h, w, c = ifm.shape
    if groups < 1 or c % groups or out_channels % groups:
        raise PlannerError(f"{name}: groups={groups} must divide input channels {c} and "
                           f"output channels {out_channels}")
    oh = window_out(h, k[0], s[0], d[0], p[0], p[2])
    ow = window_out(w, k[1], s[1], d[1], p[1], p[3])
    out = Tensor(output_name or f"{name}:0", (n, oh, ow, out_channels))
    icg, ocg = c // groups, out_channels // groups
    # Grouped: output channel stripes aligned to whole groups read exactly their groups'
    # input channels (the planner only stripes channels on group boundaries).
    ch = (0, c) if groups == 1 else (Fraction(icg, ocg), 0)
    weights = Tensor(f"{name}:weights", (out_channels, k[0], k[1], icg), "int8", True,
                     weight_compression)
    inputs, props = [ifm, weights], [layer_propagators.window(k, s, d, p, ch),
                                     layer_propagators.along_channels(weights.shape, 0, 4)]
    if bias:
        inputs.append(Tensor(f"{name}:bias", (out_channels,), "int32", True))
        props.append(layer_propagators.along_channels((out_channels,), 0, 4))
    return Part(name, Op.CONV2D, tuple(inputs), out, tuple(props),
                _attrs(kernel=k, strides=s, dilation=d, padding=p, groups=groups,
                       activation=activation))


def depthwise_conv2d(name: str, ifm: Tensor, kernel=(3, 3), strides=(1, 1), dilation=(1, 1),
                     padding=(0, 0, 0, 0), depth_multiplier: int = 1,
                     activation: str | None = None, weight_compression: float = 1.0,
                     bias: bool = True, output_name: str | None = None) -> Part:
    _check_nhwc(ifm, name)
    k, s, d, p = _pair(kernel, "kernel"), _pair(strides, "strides"), _pair(dilation, "dilation"), \
        _pads(padding)
    n, h, w, c = ifm.shape
    m = int(depth_multiplier)
    oh = window_out(h, k[0], s[0], d[0], p[0], p[2])
    ow = window_out(w, k[1], s[1], d[1], p[1], p[3])
    out = Tensor(output_name or f"{name}:0", (n, oh, ow, c * m))
    ch = (1, 0) if m == 1 else (Fraction(1, m), 1 - Fraction(1, m))
    weights = Tensor(f"{name}:weights", (1, k[0], k[1], c * m), "int8", True, weight_compression)
    inputs, props = [ifm, weights], [layer_propagators.window(k, s, d, p, ch),
                                     layer_propagators.along_channels(weights.shape, 3, 4)]
    if bias:
        inputs.append(Tensor(f"{name}:bias", (c * m,), "int32", True))
        props.append(layer_propagators.along_channels((c * m,), 0, 4))
    return Part(name, Op.DEPTHWISE_CONV2D, tuple(inputs), out, tuple(props),
                _attrs(kernel=k, strides=s, dilation=d, padding=p, depth_multiplier=m,
                       activation=activation))


def pool2d(name: str, ifm: Tensor, pool_type: str = "max", pool_size=(2, 2), strides=(2, 2),
           padding=(0, 0, 0, 0), activation: str | None = None,
           output_name: str | None = None) -> Part:
    if pool_type not in ("max", "avg"):
        raise PlannerError(f"{name}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    _check_nhwc(ifm, name)
    k, s, p = _pair(pool_size, "pool_size"), _pair(strides, "strides"), _pads(padding)
    n, h, w, c = ifm.shape
    oh = window_out(h, k[0], s[0], 1, p[0], p[2])
    ow = window_out(w, k[1], s[1], 1, p[1], p[3])
    out = Tensor(output_name or f"{name}:0", (n, oh, ow, c))
    prop = layer_propagators.window(k, s, (1, 1), p, (1, 0))
    return Part(name, Op.POOL, (ifm,), out, (prop,),
                _attrs(pool_type=pool_type, kernel=k, strides=s, padding=p,
                       activation=activation))


def mean(name: str, ifm: Tensor, keepdims: bool = True, output_name: str | None = None,
         axes: tuple[int, ...] = (1, 2)) -> Part:
    """Average over H, W or both (TFLite MEAN over ``axes``, a non-empty subset of 1 and 2),
    as Vela runs it: one window of the reduced extents, swept over a kept axis."""
    _check_nhwc(ifm, name)
    if not axes or not set(axes) <= {1, 2}:
        raise PlannerError(f"{name}: a mean reduces H, W or both (axes 1, 2), got {axes}")
    n, h, w, c = ifm.shape
    kept = [i for i in range(4) if i not in axes]
    out_shape = tuple(1 if i in axes else d for i, d in enumerate(ifm.shape)) if keepdims \
        else tuple(ifm.shape[i] for i in kept)
    out = Tensor(output_name or f"{name}:0", out_shape)
    prop = layer_propagators.reduction(ifm.shape, axes, keepdims)
    kernel = (h if 1 in axes else 1, w if 2 in axes else 1)
    return Part(name, Op.MEAN, (ifm,), out, (prop,), _attrs(kernel=kernel, keepdims=keepdims))


def _broadcast_propagator(in_shape: Sequence[int], out_shape: Sequence[int]) -> Propagator:
    """Trailing-aligned numpy broadcasting: a size-1 input axis reads element 0 always."""
    r_in, r_out = len(in_shape), len(out_shape)
    if r_in > r_out:
        raise PlannerError(f"cannot broadcast {tuple(in_shape)} to {tuple(out_shape)}")
    lin, const = [], []
    for i, n in enumerate(in_shape):
        j = i + r_out - r_in
        row = [0] * r_out
        if n == out_shape[j]:
            row[j] = 1
            const.append(0)
        elif n == 1:
            const.append(1)
        else:
            raise PlannerError(f"cannot broadcast {tuple(in_shape)} to {tuple(out_shape)}")
        lin.append(row)
    return Propagator.build(lin, const, [0] * r_in)


def broadcast_shape(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...]:
    r = max(len(a), len(b))
    a = (1,) * (r - len(a)) + tuple(a)
    b = (1,) * (r - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            raise PlannerError(f"shapes {a} and {b} do not broadcast")
        out.append(max(x, y))
    return tuple(out)


def elementwise(name: str, a: Tensor, b: Tensor, op: str = "add", activation: str | None = None,
                output_name: str | None = None) -> Part:
    if op not in ("add", "sub", "mul", "maximum", "minimum", "squared_difference"):
        raise PlannerError(f"{name}: unsupported binary op {op!r}")
    shape = broadcast_shape(a.shape, b.shape)
    out = Tensor(output_name or f"{name}:0", shape)
    props = (_broadcast_propagator(a.shape, shape), _broadcast_propagator(b.shape, shape))
    return Part(name, Op.ELEMENTWISE, (a, b), out, props, _attrs(op=op, activation=activation))


def batch_matmul(name: str, a: Tensor, b: Tensor, adj_x: bool = False, adj_y: bool = False,
                 output_name: str | None = None) -> Part:
    """TFLite's BATCH_MATMUL: ``a``'s ``m x k`` matrices by ``b``'s ``k x n`` ones (each
    stored transposed where its adj flag says), batch dimensions broadcast. An output box
    reads its batches and rows of ``a``, its batches and columns of ``b``, and the whole
    reduced axis of both."""
    if len(a.shape) < 2 or len(b.shape) < 2:
        raise PlannerError(f"{name}: BATCH_MATMUL of {a.shape} by {b.shape}; operands are "
                           "at least 2-D")
    m, k = (a.shape[-1], a.shape[-2]) if adj_x else a.shape[-2:]
    kb, n = (b.shape[-1], b.shape[-2]) if adj_y else b.shape[-2:]
    if k != kb:
        raise PlannerError(f"{name}: BATCH_MATMUL reducing {k} elements of {a.shape} against "
                           f"{kb} of {b.shape}")
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    out = Tensor(output_name or f"{name}:0", batch + (m, n))
    rank = len(out.shape)

    def prop(t: Tensor, transposed: bool, out_axis: int, reduced: int) -> Propagator:
        """Batches broadcast, the matrix axis that follows output axis ``out_axis`` read
        along it, the ``reduced`` one whole."""
        base = _broadcast_propagator(t.shape[:-2], batch)
        lin = [list(base.transform[i][:-1]) + [0, 0] for i in range(len(t.shape) - 2)]
        const = [base.transform[i][-1] for i in range(len(t.shape) - 2)]
        follow = [0] * rank
        follow[out_axis] = 1
        rows = [[0] * rank, follow] if transposed else [follow, [0] * rank]
        consts = [reduced, 0] if transposed else [0, reduced]
        if out_axis == rank - 1:   # b: its rows are the reduced axis
            rows, consts = rows[::-1], consts[::-1]
        return Propagator.build(lin + rows, const + consts, [0] * len(t.shape))

    props = (prop(a, adj_x, rank - 2, k), prop(b, adj_y, rank - 1, k))
    return Part(name, Op.BATCH_MATMUL, (a, b), out, props, _attrs(adj_x=adj_x, adj_y=adj_y))


def unary(name: str, x: Tensor, op: str = "relu", output_name: str | None = None,
          **attrs) -> Part:
    """Activations and per-element ops (relu, sigmoid, tanh, requantize, ...); extra
    ``attrs`` carry operator parameters such as leaky relu's alpha."""
    out = Tensor(output_name or f"{name}:0", x.shape)
    return Part(name, Op.UNARY, (x,), out, (Propagator.identity(len(x.shape)),),
                _attrs(op=op, **attrs))


def fully_connected(name: str, ifm: Tensor, units: int, activation: str | None = None,
                    weight_compression: float = 1.0, bias: bool = True,
                    output_name: str | None = None) -> Part:
    if len(ifm.shape) != 2:
        raise PlannerError(f"{name}: fully connected input must be (batch, features), "
                           f"got {ifm.shape}; reshape it first")
    n, k = ifm.shape
    out = Tensor(output_name or f"{name}:0", (n, units))
    weights = Tensor(f"{name}:weights", (units, k), "int8", True, weight_compression)
    inputs = [ifm, weights]
    props = [Propagator.build([[1, 0], [0, 0]], [0, k], [0, 0]),
             layer_propagators.along_channels(weights.shape, 0, 2)]
    if bias:
        inputs.append(Tensor(f"{name}:bias", (units,), "int32", True))
        props.append(layer_propagators.along_channels((units,), 0, 2))
    return Part(name, Op.FULLY_CONNECTED, tuple(inputs), out, tuple(props),
                _attrs(activation=activation))


def concatenate(name: str, inputs: Sequence[Tensor], axis: int = -1,
                activation: str | None = None, output_name: str | None = None) -> Part:
    if not inputs:
        raise PlannerError(f"{name}: concatenate needs at least one input")
    rank = len(inputs[0].shape)
    axis = axis % rank
    for t in inputs:
        if len(t.shape) != rank or any(t.shape[i] != inputs[0].shape[i]
                                       for i in range(rank) if i != axis):
            raise PlannerError(f"{name}: inputs {[t.shape for t in inputs]} differ off axis {axis}")
    shape = list(inputs[0].shape)
    shape[axis] = sum(t.shape[axis] for t in inputs)
    out = Tensor(output_name or f"{name}:0", tuple(shape))
    props, start = [], 0
    ident = [[1 if i == j else 0 for j in range(rank)] for i in range(rank)]
    for t in inputs:
        offset = [0] * rank
        offset[axis] = -start
        props.append(Propagator.build(ident, [0] * rank, offset))
        start += t.shape[axis]
    return Part(name, Op.CONCATENATE, tuple(inputs), out, tuple(props),
                _attrs(axis=axis, activation=activation))


#: the most pixels one Ethos-U ARG_MAX operation takes: its max pool reads one row per pixel
#: (the IFM height register), and a feature map's width register holds no more either
ARG_MAX_PIECE_PIXELS = 65536


def arg_max_rows_cols(shape: Sequence[int]) -> tuple[int, int]:
    """The (rows, columns) of pixels of an ARG_MAX input of ``shape`` (its depth last): every
    axis before the last two folds into the rows."""
    lead = tuple(int(s) for s in shape[:-1])
    return (math.prod(lead[:-1]) if len(lead) > 1 else 1), (lead[-1] if lead else 1)


def arg_max_piece_pixels(rows: int, cols: int) -> int:
    """The pixels of the largest piece an Ethos-U ARG_MAX over ``rows`` x ``cols`` pixels is
    cut into: bands of as many whole rows as :data:`ARG_MAX_PIECE_PIXELS` takes, a wider row
    cut into pieces of that many columns (``tvm_ethos.backends.ethos_u.ops_argmax.pieces``)."""
    if cols >= ARG_MAX_PIECE_PIXELS:
        return ARG_MAX_PIECE_PIXELS
    return min(rows, ARG_MAX_PIECE_PIXELS // cols) * cols


def arg_max_work_bytes(pixels: int, depth: int) -> int:
    """The working memory of an Ethos-U ARG_MAX whose pieces are at most ``pixels`` rows of
    ``depth``: each code and its channel packed into one int16, then, from the next 16-byte
    boundary, one int16 index per pixel (``tvm_ethos.backends.ethos_u.ops_argmax``), reused
    by each piece in turn; its last byte is one the stream writes."""
    return -(-2 * pixels * depth // 16) * 16 + 2 * pixels


#: the reductions an Ethos-U takes over the depth, and the axes of NHWC it reduces with it
DEPTH_REDUCTIONS = frozenset({Op.REDUCE_SUM, Op.REDUCE_MAX, Op.REDUCE_MIN})
DEPTH_REDUCTION_AXES = ((3,), (1, 3), (2, 3), (1, 2, 3))


def reduce_over_depth_work_bytes(kind: Op, shape: Sequence[int], axes: Sequence[int],
                                  dtype: str = "int8") -> int:
    """The working memory of an Ethos-U REDUCE_MAX / REDUCE_MIN over the depth of an NHWC
    ``shape`` of ``dtype`` codes (``axes``; tvm_ethos ``ops_reduce_depth``): REDUCE_MIN's
    bitwise NOT of its input (16-byte aligned), then, where height or width is reduced too,
    the per-pixel maxima (codes of the input's type) the last max pool reads, and where that
    window is past one pool's (``ethos_arch.pool_bands``) the maxima of its bands of rows
    after them (16-byte aligned); an int16 REDUCE_MIN the last pool's result after those
    (16-byte aligned). SUM, one convolution, needs none; past one convolution's kernel it is
    average pools of bands into int32 sums of each channel (tvm_ethos ``ops_reduce_split``): three
    running ones where there is more than one band, and the one its REDUCE_SUM reads."""
    _, h, w, c = (int(s) for s in shape)
    kh, kw = (h if 1 in axes else 1), (w if 2 in axes else 1)
    if kind == Op.REDUCE_SUM:
        if kh <= 64 and kh * kw <= 4096 and kh * kw * c <= 127 * 65536:
            return 0
        partial = -(-4 * (h - kh + 1) * (w - kw + 1) * c // 16) * 16
        return partial * (4 if pool_bands(kh, kw).count > 1 else 1)
    size = DTYPE_BYTES[dtype]
    flipped = -(-h * w * c * size // 16) * 16 if kind == Op.REDUCE_MIN else 0
    if kh * kw == 1:
        work = flipped
    elif one_pool(kh, kw):
        work = flipped + h * w * size
    else:
        bands = pool_bands(kh, kw).count * (h - kh + 1) * (w - kw + 1) * size
        work = flipped + -(-h * w * size // 16) * 16 + bands
    if kind == Op.REDUCE_MIN and size > 1:
        # no NOT table of 16-bit codes: the last pool's result, NOT-ed into the output
        return -(-work // 16) * 16 + (h - kh + 1) * (w - kw + 1) * size
    return work


def reduce_over_depth(name: str, x: Tensor, kind: Op, axes: Sequence[int],
                      keepdims: bool = True, output_name: str | None = None) -> Part:
    """SUM, REDUCE_MAX or REDUCE_MIN over the depth of an NHWC tensor, height, width or both
    reduced with it (``axes``, :data:`DEPTH_REDUCTION_AXES`): each output element reads its
    kept axes' own index and the whole of the reduced ones; a REDUCE_MAX / REDUCE_MIN holds
    its working memory (:func:`reduce_over_depth_work_bytes`) while it runs."""
    _check_nhwc(x, name)
    axes = tuple(sorted(int(a) for a in axes))
    if kind not in DEPTH_REDUCTIONS or axes not in DEPTH_REDUCTION_AXES:
        raise PlannerError(f"{name}: {kind} over axes {axes}; the planner reduces the depth "
                           f"(with any of H and W: {DEPTH_REDUCTION_AXES}) by SUM, REDUCE_MAX "
                           "or REDUCE_MIN")
    kept = [a for a in range(4) if keepdims or a not in axes]
    out = Tensor(output_name or f"{name}:0", tuple(1 if a in axes else x.shape[a] for a in kept),
                 x.dtype)
    prop = layer_propagators.reduction(x.shape, axes, keepdims)
    attrs = {"axis": axes}
    work = reduce_over_depth_work_bytes(kind, x.shape, axes, x.dtype)
    if work:
        attrs[WORK_ATTR] = WorkMemory(work)
    return Part(name, kind, (x,), out, (prop,), _attrs(**attrs))


def arg_max(name: str, x: Tensor, dtype: str = "int32", output_name: str | None = None) -> Part:
    """The index of the largest element along the last axis (TFLite ARG_MAX along the depth):
    each output element reads its whole row of the depth, the other axes one to one; its
    working memory (``work``, fixed: :func:`arg_max_work_bytes` of its largest piece) is held
    while it runs."""
    if len(x.shape) < 2:
        raise PlannerError(f"{name}: ARG_MAX of a {len(x.shape)}-D tensor; the planner takes "
                           "the depth of at least 2-D")
    rank = len(x.shape) - 1
    out = Tensor(output_name or f"{name}:0", x.shape[:-1], dtype)
    lin = [[int(i == j) for j in range(rank)] for i in range(rank)] + [[0] * rank]
    prop = Propagator.build(lin, [0] * rank + [x.shape[-1]], [0] * (rank + 1))
    work = arg_max_work_bytes(arg_max_piece_pixels(*arg_max_rows_cols(x.shape)), x.shape[-1])
    return Part(name, Op.ARG_MAX, (x,), out, (prop,), _attrs(**{WORK_ATTR: WorkMemory(work)}))


#: bytes on whose boundaries the int16 SOFTMAX's stream starts each working map
_SOFTMAX16_ALIGN = 16


def softmax16_work_bytes(rows: int, depth: int) -> int:
    """The working memory of an Ethos-U int16 SOFTMAX over ``rows`` rows of ``depth``, each
    map from a 16-byte boundary, in the order the stream lays them out
    (``tvm_ethos.backends.ethos_u.npu_softmax.softmax16_ops``): the int32 differences,
    the int16 row maxima, three int32 row maps (the sum, its leading zeros, the shift) and
    the int16 reciprocals, whose last byte is one the stream writes."""
    def up(n: int) -> int:
        return -(-n // _SOFTMAX16_ALIGN) * _SOFTMAX16_ALIGN

    return up(4 * rows * depth) + up(2 * rows) + 3 * up(4 * rows) + 2 * rows


def softmax(name: str, x: Tensor, beta: float = 1.0, output_name: str | None = None) -> Part:
    """SOFTMAX over the last axis: each output row reads its whole input row (its maximum
    and sum), so the propagator takes the whole input, the exact if coarse dependence. An
    int16 one holds its working memory while it runs (``work``, :func:`softmax16_work_bytes`);
    an 8-bit one's is the code generator's to give."""
    part = opaque(name, Op.SOFTMAX, x, x.shape, output_name, beta=beta)
    if x.dtype != "int16":
        return part
    work = WorkMemory(softmax16_work_bytes(math.prod(x.shape[:-1]), x.shape[-1]))
    return Part(name, Op.SOFTMAX, (x,), Tensor(part.output.name, x.shape, x.dtype),
                part.propagators, _attrs(beta=beta, **{WORK_ATTR: work}))


def opaque(name: str, kind: Op | str, x: Tensor, out_shape: Sequence[int],
           output_name: str | None = None, **attrs) -> Part:
    """An operator whose output stripes each need the whole input (reshape, transpose...)."""
    out = Tensor(output_name or f"{name}:0", tuple(out_shape))
    prop = layer_propagators.whole(x.shape, len(out_shape))
    return Part(name, kind, (x,), out, (prop,), _attrs(**attrs))


def reshape(name: str, x: Tensor, new_shape: Sequence[int], output_name: str | None = None) -> Part:
    import math
    if math.prod(new_shape) != x.elements:
        raise PlannerError(f"{name}: cannot reshape {x.shape} ({x.elements} elements) to "
                           f"{tuple(new_shape)}")
    return opaque(name, Op.RESHAPE, x, new_shape, output_name)


def transpose(name: str, x: Tensor, perm: Sequence[int], output_name: str | None = None) -> Part:
    if sorted(perm) != list(range(len(x.shape))):
        raise PlannerError(f"{name}: {tuple(perm)} is not a permutation of {len(x.shape)} axes")
    return opaque(name, Op.TRANSPOSE, x, [x.shape[i] for i in perm], output_name,
                  perm=tuple(perm))


def resize(name: str, x: Tensor, scale=(2, 2), method: str = "nearest",
           output_name: str | None = None) -> Part:
    """Integer upscaling (the NPU's resize). Output row r reads input row floor(r / s)
    (nearest) or rows around (r + 1/2) / s - 1/2 (bilinear, half pixel)."""
    _check_nhwc(x, name)
    sh, sw = _pair(scale, "scale")
    if method not in ("nearest", "bilinear"):
        raise PlannerError(f"{name}: resize method must be 'nearest' or 'bilinear'")
    n, h, w, c = x.shape
    out = Tensor(output_name or f"{name}:0", (n, h * sh, w * sw, c))
    fh, fw = Fraction(1, sh), Fraction(1, sw)
    lin = [[1, 0, 0, 0], [0, fh, 0, 0], [0, 0, fw, 0], [0, 0, 0, 1]]
    if method == "nearest":
        const, offset = [0, 1 - fh, 1 - fw, 0], [0, 0, 0, 0]
    else:
        const = [0, 2 - fh, 2 - fw, 0]
        offset = [0, fh / 2 - Fraction(1, 2), fw / 2 - Fraction(1, 2), 0]
    return Part(name, Op.RESIZE, (x,), out, (Propagator.build(lin, const, offset),),
                _attrs(scale=(sh, sw), method=method))


def pad(name: str, x: Tensor, pads: Sequence[tuple[int, int]],
        output_name: str | None = None) -> Part:
    """Explicit padding: ``pads`` is (before, after) per axis."""
    if len(pads) != len(x.shape):
        raise PlannerError(f"{name}: pads need one (before, after) pair per axis of {x.shape}")
    shape = tuple(n + a + b for n, (a, b) in zip(x.shape, pads))
    out = Tensor(output_name or f"{name}:0", shape)
    r = len(shape)
    ident = [[1 if i == j else 0 for j in range(r)] for i in range(r)]
    prop = Propagator.build(ident, [0] * r, [-a for a, _ in pads])
    return Part(name, Op.PAD, (x,), out, (prop,), _attrs(pads=tuple(map(tuple, pads))))


def strided_slice(name: str, x: Tensor, begin: Sequence[int], size: Sequence[int],
                  output_name: str | None = None,
                  strides: Sequence[int] | None = None) -> Part:
    """A slice of ``size`` elements per axis from ``begin``, every ``strides``-th (default
    1: a contiguous box; SPLIT and SLICE lower to these): output element ``o`` of an axis
    reads input ``begin + stride * o``, so an output stripe of ``n`` reads
    ``stride * (n - 1) + 1`` input elements."""
    r = len(x.shape)
    strides = tuple(strides) if strides is not None else (1,) * r
    if len(begin) != r or len(size) != r or len(strides) != r:
        raise PlannerError(f"{name}: begin, size and strides need {r} values")
    for b, s, k, n in zip(begin, size, strides, x.shape):
        if k < 1 or b < 0 or s < 1 or b + k * (s - 1) + 1 > n:
            raise PlannerError(f"{name}: slice begin={tuple(begin)} size={tuple(size)} "
                               f"strides={strides} is outside {x.shape}")
    out = Tensor(output_name or f"{name}:0", tuple(size))
    lin = [[k if i == j else 0 for j in range(r)] for i, k in enumerate(strides)]
    attrs = _attrs(begin=tuple(begin)) if set(strides) == {1} else \
        _attrs(begin=tuple(begin), steps=strides)
    return Part(name, Op.SLICE, (x,), out,
                (Propagator.build(lin, [1 - k for k in strides], list(begin)),), attrs)


#: the Ethos-U stream starts each buffer of an LSTM's working memory on this boundary
LSTM_ALIGN = 16


def _lstm_up(n: int) -> int:
    return -(-n // LSTM_ALIGN) * LSTM_ALIGN


def lstm_state_bytes(batches: int, cells: int) -> int:
    """Bytes of an LSTM's hidden (int8) and cell (int16) states, one row of cells a batch,
    the cell state on an :data:`LSTM_ALIGN` boundary after the hidden state: they are the
    operator's variable tensors, carried from one invocation to the next, so they hold
    their bytes while every Plan runs."""
    return _lstm_up(batches * cells) + 2 * batches * cells


def lstm_work_bytes(cells: int) -> int:
    """Bytes of an LSTM's working memory while it runs, besides its sequences and states:
    four gate buffers and one scratch row (int16, one step of cells each), each on an
    :data:`LSTM_ALIGN` boundary, as the Ethos-U stream lays them out; they end at the
    scratch row's last byte."""
    return 4 * _lstm_up(2 * cells) + 2 * cells


#: bytes of its state an SVDF's Ethos-U stream may shift through one buffer before it shifts
#: fewer rows at a time (where the new column's int16 buffer, which lies over it, is larger,
#: that many)
SVDF_SHIFT_BUFFER_BYTES = 256


def svdf_shift_rows(rows: int, memory: int) -> int:
    """State rows one pair of the stream's shift copies moves (0: a memory of 1, nothing to
    shift): as many as fit :data:`SVDF_SHIFT_BUFFER_BYTES` or the new column's buffer (two
    bytes a row), one at least."""
    if memory == 1:
        return 0
    return max(1, min(rows, max(SVDF_SHIFT_BUFFER_BYTES, 2 * rows) // (memory - 1)))


def svdf_work_bytes(batches: int, filters: int, memory: int) -> int:
    """Bytes of an SVDF's working memory while it runs, besides its input, output and
    state: the new column (int16, a value a filter and batch) written over the shift's
    buffer (``memory - 1`` bytes for each of :func:`svdf_shift_rows` rows), as the Ethos-U
    stream lays them out: the larger of the two."""
    rows = batches * filters
    return max(2 * rows, svdf_shift_rows(rows, memory) * (memory - 1))


def svdf(name: str, x: Tensor, units: int, rank: int, memory: int,
         weight_compression: float = 1.0, output_name: str | None = None) -> Part:
    """An int8 SVDF over ``x`` (batches, input size) into (batches, ``units``): ``units *
    rank`` filters, each remembering ``memory`` steps in the int8 state (the operator's
    variable tensor, so ``state_bytes``, persistent). Every output value reads the whole
    state, which the step shifts as a whole before adding the input's new column, so any
    box of the output needs the whole input. Its constants are what the Ethos-U stream
    reads: ``weights_feature`` (filters, input size) and the time step's weights, the
    ``weights_time`` rows of each unit's filters spread over the whole state (units,
    filters x memory), and the bias. ``work`` is the stream's working memory
    (:func:`svdf_work_bytes`)."""
    if len(x.shape) != 2:
        raise PlannerError(f"{name}: an SVDF reads (batches, input size); {x.name!r} has "
                           f"shape {x.shape}")
    if units < 1 or rank < 1 or memory < 1:
        raise PlannerError(f"{name}: an SVDF needs at least one unit, a rank and a memory of "
                           f"1; got units={units}, rank={rank}, memory={memory}")
    batches, size = x.shape
    filters = units * rank
    out = Tensor(output_name or f"{name}:0", (batches, units), x.dtype)
    feature = Tensor(f"{name}:weights_feature", (filters, size), "int8", True,
                     weight_compression)
    time = Tensor(f"{name}:weights_time", (units, filters * memory), "int8", True,
                  weight_compression)
    bias = Tensor(f"{name}:bias", (units,), "int32", True)
    inputs = (x, feature, time, bias)
    props = tuple(layer_propagators.whole(t.shape, 2) for t in inputs)
    return Part(name, Op.SVDF, inputs, out, props,
                _attrs(units=units, rank=rank, memory=memory,
                       state_bytes=batches * filters * memory,
                       **{WORK_ATTR: WorkMemory(svdf_work_bytes(batches, filters, memory))}))

def lstm(name: str, x: Tensor, cells: int, time_major: bool = False,
         weight_compression: float = 1.0, output_name: str | None = None) -> Part:
    """A UNIDIRECTIONAL_SEQUENCE_LSTM over the int8 sequence ``x``, (batch, time, features)
    or, ``time_major``, (time, batch, features); its output is the hidden state of every
    step, ``cells`` values each, in the same order. Every step reads the state the one before
    wrote, so any box of the output needs the whole sequence: each input's propagator maps
    every output box to the whole input. The weights of the four gates (input and recurrent)
    and their biases are one constant each. ``state_bytes`` (persistent) and ``work`` (fixed,
    while it runs) are the memory the stream touches beyond its two sequences."""
    if len(x.shape) != 3:
        raise PlannerError(f"{name}: an LSTM reads a (batch, time, features) sequence; "
                           f"{x.name!r} has shape {x.shape}")
    if cells < 1:
        raise PlannerError(f"{name}: an LSTM needs at least one cell, got {cells}")
    steps, batches, features = x.shape if time_major else (x.shape[1], x.shape[0], x.shape[2])
    out = Tensor(output_name or f"{name}:0", (x.shape[0], x.shape[1], cells), x.dtype)
    weights = Tensor(f"{name}:weights", (4, cells, features + cells), "int8", True,
                     weight_compression)
    bias = Tensor(f"{name}:bias", (4, cells), "int32", True)
    inputs = (x, weights, bias)
    props = tuple(layer_propagators.whole(t.shape, 3) for t in inputs)
    return Part(name, Op.LSTM, inputs, out, props,
                _attrs(cells=cells, time_major=time_major, batches=batches, steps=steps,
                       state_bytes=lstm_state_bytes(batches, cells),
                       **{WORK_ATTR: WorkMemory(lstm_work_bytes(cells))}))
