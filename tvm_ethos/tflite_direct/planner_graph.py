"""A lowered group (``lowering``) as the planner's ``PlannerGraph``, without TVM: the Parts
``emulator.part_matchers`` derives from the TE graph of the same layers (names, kinds,
attributes, propagators, constant layouts and order), for the kinds ``operators`` reads.

A layer whose reads are those of ``planner.tflite``'s Part is that Part, built by the same
``planner.parts`` constructor over the lowering's tensors (convolutions, pools, MEAN,
SOFTMAX of one row); the others take their propagators from the same rules
(``planner.layer_propagators``) where they share them. Where the lowering reads an axis of
extent one at a fixed index (an ADD's batch, the axes a RESHAPE adds or drops, a FULLY
CONNECTED's leading axes), its propagator has the constant row of extent one that the TE
graph gives, which ``planner.tflite``'s Parts (whose rows follow the output axis there) do
not share."""
from __future__ import annotations

from typing import Callable, NamedTuple

from ethos_arch.mean_window import mean_kernel
from ethos_arch.ops import Op
from planner import layer_propagators, parts
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


def _of(part: Part) -> tuple:
    """What a layer's Part carries besides its tensors, from the Part ``planner.parts`` builds
    of it: kind, attrs, propagators and the shapes of its constants (their planner layout)."""
    return (part.kind, dict(part.attrs), list(part.propagators),
            [t.shape for t in part.inputs if t.is_constant])


def _units_fixed(x_shape, out_shape) -> Propagator:
    """Each axis of extent one read at index 0, the others one to one with the output's
    axes of more than one element, in order: an ADD of two maps of one shape, a RESHAPE that
    adds or drops axes of one."""
    kept = iter(d for d, e in enumerate(out_shape) if e != 1)
    follows = [None if e == 1 else next(kept) for e in x_shape]
    lin = [[int(j == d) for j in range(len(out_shape))] for d in follows]
    return Propagator.build(lin, [int(d is None) for d in follows], [0] * len(x_shape))


def _conv(name: str, q: QOp, x: Tensor, out_shape):
    kh, kw, _, co = q.weights.shape
    return _of(parts.conv2d(name, x, co, (kh, kw), q.attrs["strides"], q.attrs["dilation"],
                            q.attrs["padding"], activation=activation_name(q)))


def _depthwise(name: str, q: QOp, x: Tensor, out_shape):
    kh, kw = q.weights.shape[:2]
    return _of(parts.depthwise_conv2d(name, x, (kh, kw), q.attrs["strides"],
                                      q.attrs["dilation"], q.attrs["padding"],
                                      activation=activation_name(q)))


def _fully_connected(name: str, q: QOp, x: Tensor, out_shape):
    # one row: 2-D, or 1x1x1 on NHWC tensors, a 1x1 convolution (as Vela runs it); the
    # lowering reads the row at index 0 of its leading axes, so the whole input
    units, depth = q.weights.shape
    n = len(out_shape)
    props = [layer_propagators.whole(x.shape, n),
             layer_propagators.along_channels((units, depth), 0, n),
             layer_propagators.along_channels((units,), 0, n)]
    shapes = [(units, depth), (units,)]
    if n == 2:
        return Op.FULLY_CONNECTED, {"activation": activation_name(q)}, props, shapes
    window = {"kernel": (1, 1), "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0)}
    return Op.CONV2D, dict(window, groups=1, activation=activation_name(q)), props, shapes


def _pool(name: str, q: QOp, x: Tensor, out_shape):
    return _of(parts.pool2d(name, x, "max" if q.kind == Op.MAX_POOL2D else "avg",
                            q.attrs["pool_size"], q.attrs["strides"], q.attrs["padding"],
                            activation_name(q)))


def _mean(name: str, q: QOp, x: Tensor, out_shape):
    kind, attrs, props, shapes = _of(parts.mean(name, x, keepdims=True,
                                                axes=tuple(q.attrs["axis"])))
    # the kernel as the stream reads it: none of a batch above one (the Ethos-U's checks
    # refuse that MEAN before its group is planned)
    return kind, dict(attrs, kernel=mean_kernel(x.shape, q.attrs["axis"])), props, shapes


def _elementwise(name: str, q: QOp, x: Tensor, out_shape):
    prop = _units_fixed(x.shape, out_shape)
    return Op.ELEMENTWISE, {"op": q.kind.value, "activation": activation_name(q)}, \
        [prop, prop], []


def _softmax(name: str, q: QOp, x: Tensor, out_shape):
    # one row (operators reads no other): its whole input, as the lowering reads it
    return _of(parts.softmax(name, x, q.attrs.get("beta", 1.0)))


def _reshape(name: str, q: QOp, x: Tensor, out_shape):
    return Op.RESHAPE, {}, [_units_fixed(x.shape, out_shape)], []


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
    made = []
    for (name, out), q, ins in zip(lw.tensors.items(), lw.layers, lw.layer_inputs):
        acts = list(reversed(ins)) if q.kind == Op.ADD else list(ins)   # as TE reads them
        inputs = [ptensor(t) for t in acts]
        output = ptensor(out)
        kind, attrs, props, shapes = _PARTS[q.kind](name, q, inputs[0], tuple(q.out_shape))
        needs = work(q) if work is not None and WORK_ATTR not in attrs else None
        if needs is not None:
            attrs = dict(attrs, **{WORK_ATTR: needs})
        inputs += [ptensor(c, shape, constant=True)
                   for c, shape in zip(consts_of.get(name, []), shapes)]
        stages = tuple(GraphTensor(f"{name}_{s}", tuple(q.out_shape), "int32")
                       for s in INTERNAL_STAGES[q.kind])
        part = Part(name, kind, tuple(inputs), output, tuple(props), attrs)
        made.append(DirectPart(part, out, stages))
    made = _post_order(made, lw)
    ins_t = tuple(ptensor(t) for t in lw.input_tensors)
    outs_t = tuple(ptensor(t) for t in lw.outputs)
    laid = vela_layouts([dp.part for dp in made], ins_t, outs_t)
    made = [dp._replace(part=p) for dp, p in zip(made, laid)]
    graph = PlannerGraph(tuple(dp.part for dp in made), ins_t, outs_t, lw.symbol)
    return DirectMatch(graph, tuple(made))


def _post_order(made: list[DirectPart], lw: LoweredSubgraph) -> list[DirectPart]:
    """The Parts in the order the emulator's TIR runs them (``match_subgraph``): the TE
    graph's post-order from the outputs, each layer's operands in the order it reads them."""
    by_output = {dp.root.name: (dp, ins) for dp, ins in zip(made, lw.layer_inputs)}
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
