"""A lowered group (``lowering``) as the planner's ``PlannerGraph``, without TVM: the Parts
``emulator.part_matchers`` derives from the TE graph of the same layers (names, kinds,
attributes, propagators, constant layouts and order), written down per layer kind from the
access each ``te_ops`` lowering makes, for the kinds ``operators`` reads.

Per output axis ``o`` of a window of kernel ``k``, stride ``s``, dilation ``d`` and leading
padding ``p``, an input axis reads ``[s o - p, s o - p + d (k - 1) + 1)``: the propagator
row ``(s at o, d (k - 1) + 1 - s)``, offset ``-p``. An axis of extent one that the lowering
reads at a fixed index (an ADD's broadcast batch, a row of SOFTMAX, an axis a RESHAPE drops)
is the constant row of extent one."""
from __future__ import annotations

from typing import Callable, NamedTuple

from ethos_arch.mean_window import mean_kernel
from ethos_arch.ops import Op
from planner.graph import Part, PlannerGraph, Tensor
from planner.propagator import Propagator
from planner.vela_layouts import vela_layouts
from planner.work_memory import WORK_ATTR, WorkMemory
from tvm_ethos.compute.lowered import LoweredSubgraph
from tvm_ethos.qop import QOp, activation_name
from tvm_ethos.tflite_direct.lowering import INTERNAL_STAGES, GraphTensor


class DirectPart(NamedTuple):
    """One Part and what the stream generator and the planned allocation read of the layer
    it covers: its output tensor (``root``) and its internal int32 stages."""

    part: Part
    root: GraphTensor
    stages: tuple[GraphTensor, ...]


class DirectMatch(NamedTuple):
    """The planner graph of a lowered group and its Parts (``part_matchers.MatchResult``'s
    ``graph`` and ``parts``)."""

    graph: PlannerGraph
    parts: tuple[DirectPart, ...]


def _row(n: int, at: int | None, coeff: int, const: int) -> tuple[int, ...]:
    """A propagator row over ``n`` output axes: ``coeff`` at axis ``at`` (None: none)."""
    return tuple(coeff if j == at else 0 for j in range(n)) + (const,)


def _prop(rows, offset) -> Propagator:
    n = len(rows[0]) - 1
    return Propagator(tuple(rows) + (_row(n, None, 0, 1),), tuple(offset))


def _window(q: QOp, kernel, strides, dilation, channel_row) -> Propagator:
    pt, pl = q.attrs["padding"][0], q.attrs["padding"][1]
    rows = [_row(4, 0, 1, 0)]
    for axis, (k, s, d) in enumerate(zip(kernel, strides, dilation), start=1):
        rows.append(_row(4, axis, s, d * (k - 1) + 1 - s))
    rows.append(channel_row)
    return _prop(rows, (0, -pt, -pl, 0))


def _bias() -> Propagator:
    return _prop([_row(4, 3, 1, 0)], (0,))


def _conv(q: QOp, x_shape, out_shape):
    kh, kw, cpg, co = q.weights.shape
    window = {"kernel": (kh, kw), "strides": q.attrs["strides"],
              "dilation": q.attrs["dilation"], "padding": q.attrs["padding"]}
    props = [_window(q, (kh, kw), q.attrs["strides"], q.attrs["dilation"],
                     _row(4, None, 0, cpg)),
             _prop([_row(4, 3, 1, 0), _row(4, None, 0, kh), _row(4, None, 0, kw),
                    _row(4, None, 0, cpg)], (0, 0, 0, 0)),
             _bias()]
    shapes = [(co, kh, kw, cpg), (co,)]
    return Op.CONV2D, dict(window, groups=1, activation=activation_name(q)), props, shapes


def _depthwise(q: QOp, x_shape, out_shape):
    kh, kw, _, c = q.weights.shape
    window = {"kernel": (kh, kw), "strides": q.attrs["strides"],
              "dilation": q.attrs["dilation"], "padding": q.attrs["padding"]}
    props = [_window(q, (kh, kw), q.attrs["strides"], q.attrs["dilation"], _row(4, 3, 1, 0)),
             _prop([_row(4, None, 0, 1), _row(4, None, 0, kh), _row(4, None, 0, kw),
                    _row(4, 3, 1, 0)], (0, 0, 0, 0)),
             _bias()]
    shapes = [(1, kh, kw, c), (c,)]
    attrs = dict(window, depth_multiplier=1, activation=activation_name(q))
    return Op.DEPTHWISE_CONV2D, attrs, props, shapes


def _fully_connected(q: QOp, x_shape, out_shape):
    # one row: 2-D, or 1x1x1 on NHWC tensors, a 1x1 convolution (as Vela runs it)
    units, depth = q.weights.shape
    n = len(out_shape)
    props = [_prop([_row(n, None, 0, e) for e in x_shape], (0,) * n),
             _prop([_row(n, n - 1, 1, 0), _row(n, None, 0, depth)], (0, 0)),
             _prop([_row(n, n - 1, 1, 0)], (0,))]
    shapes = [(units, depth), (units,)]
    if n == 2:
        return Op.FULLY_CONNECTED, {"activation": activation_name(q)}, props, shapes
    window = {"kernel": (1, 1), "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0)}
    return Op.CONV2D, dict(window, groups=1, activation=activation_name(q)), props, shapes


def _pool(q: QOp, x_shape, out_shape):
    kernel, strides = q.attrs["pool_size"], q.attrs["strides"]
    props = [_window(q, kernel, strides, (1, 1), _row(4, 3, 1, 0))]
    attrs = {"pool_type": "max" if q.kind == Op.MAX_POOL2D else "avg", "kernel": kernel,
             "strides": strides, "padding": q.attrs["padding"], "activation": activation_name(q)}
    return Op.POOL, attrs, props, []


def _mean(q: QOp, x_shape, out_shape):
    props = [_prop([_row(4, 0, 1, 0), _row(4, None, 0, x_shape[1]),
                    _row(4, None, 0, x_shape[2]), _row(4, 3, 1, 0)], (0, 0, 0, 0))]
    attrs = {"kernel": mean_kernel(x_shape, q.attrs["axis"]), "keepdims": True}
    return Op.MEAN, attrs, props, []


def _elementwise(q: QOp, x_shape, out_shape):
    n = len(out_shape)
    prop = _prop([_row(n, None, 0, 1) if e == 1 else _row(n, d, 1, 0)
                  for d, e in enumerate(x_shape)], (0,) * n)
    return Op.ELEMENTWISE, {"op": q.kind.value, "activation": activation_name(q)}, \
        [prop, prop], []


def _softmax(q: QOp, x_shape, out_shape):
    n = len(out_shape)
    rows = [_row(n, None, 0, 1) for _ in x_shape[:-1]] + [_row(n, None, 0, x_shape[-1])]
    return Op.SOFTMAX, {"beta": q.attrs.get("beta", 1.0)}, [_prop(rows, (0,) * n)], []


def _reshape(q: QOp, x_shape, out_shape):
    n = len(out_shape)
    kept = iter(d for d, e in enumerate(out_shape) if e != 1)
    rows = [_row(n, None, 0, 1) if e == 1 else _row(n, next(kept), 1, 0) for e in x_shape]
    return Op.RESHAPE, {}, [_prop(rows, (0,) * len(x_shape))], []


_PARTS: dict[Op, Callable] = {
    Op.CONV2D: _conv, Op.DEPTHWISE_CONV2D: _depthwise, Op.FULLY_CONNECTED: _fully_connected,
    Op.AVG_POOL2D: _pool, Op.MAX_POOL2D: _pool, Op.MEAN: _mean, Op.ADD: _elementwise,
    Op.SOFTMAX: _softmax, Op.RESHAPE: _reshape,
}


def planner_graph(lw: LoweredSubgraph,
                  work: Callable[[QOp], WorkMemory | None] | None = None) -> DirectMatch:
    """The PlannerGraph of the lowered group ``lw``; ``work(layer)``: the working memory the
    NPU's code needs for a layer (``NpuBackend.planner_work``), as ``match_subgraph``."""
    tensors: dict[str, Tensor] = {}

    def ptensor(t: GraphTensor, shape=None, constant: bool = False) -> Tensor:
        if t.name not in tensors:
            tensors[t.name] = Tensor(t.name, shape or t.shape, t.dtype, is_constant=constant)
        return tensors[t.name]

    for t in lw.input_tensors:
        ptensor(t)
    consts_of: dict[str, list[GraphTensor]] = {}
    for c in lw.const_tensors:
        layer = c.name.split("_", 1)[1].rsplit("_", 1)[0]
        if c.name.endswith(("_w", "_bias")):
            consts_of.setdefault(layer, []).append(c)
    parts = []
    for (name, out), q, ins in zip(lw.tensors.items(), lw.layers, lw.layer_inputs):
        kind, attrs, props, shapes = _PARTS[q.kind](q, tuple(q.in_shapes[0]),
                                                    tuple(q.out_shape))
        needs = work(q) if work is not None and WORK_ATTR not in attrs else None
        if needs is not None:
            attrs = dict(attrs, **{WORK_ATTR: needs})
        acts = list(reversed(ins)) if q.kind == Op.ADD else list(ins)   # as TE reads them
        inputs = [ptensor(t) for t in acts] + [
            ptensor(c, shape, constant=True)
            for c, shape in zip(consts_of.get(name, []), shapes)]
        stages = tuple(GraphTensor(f"{name}_{s}", tuple(q.out_shape), "int32")
                       for s in INTERNAL_STAGES[q.kind])
        part = Part(name, kind, tuple(inputs), ptensor(out), tuple(props), attrs)
        parts.append(DirectPart(part, out, stages))
    parts = _post_order(parts, lw)
    ins_t = tuple(ptensor(t) for t in lw.input_tensors)
    outs_t = tuple(ptensor(t) for t in lw.outputs)
    laid = vela_layouts([dp.part for dp in parts], ins_t, outs_t)
    parts = [dp._replace(part=p) for dp, p in zip(parts, laid)]
    graph = PlannerGraph(tuple(dp.part for dp in parts), ins_t, outs_t, lw.symbol)
    return DirectMatch(graph, tuple(parts))


def _post_order(parts: list[DirectPart], lw: LoweredSubgraph) -> list[DirectPart]:
    """The Parts in the order the emulator's TIR runs them (``match_subgraph``): the TE
    graph's post-order from the outputs, each layer's operands in the order it reads them."""
    by_output = {dp.root.name: (dp, ins) for dp, ins in zip(parts, lw.layer_inputs)}
    order, seen = [], set()

    def visit(name: str) -> None:
        if name in seen or name not in by_output:
            return
        seen.add(name)
        dp, ins = by_output[name]
        for t in ins:
            visit(t.name)
        order.append(dp)

    for t in lw.outputs:
        visit(t.name)
    return order
