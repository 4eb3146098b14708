"""Hypothesis strategies for planner fuzzing: random DAGs, devices, options and budgets.

Wider than ``tests/helpers/strategies.py`` (which the planner's own tests use): every Part
constructor the TFLite reader uses, random kernels / strides / dilations / paddings including
ones that do not fit (the constructor's PlannerError is part of the contract, the draw is then
skipped), branches that read any earlier tensor (so tensors have several consumers and graphs
several outputs), joins (add, concatenate) of branches of equal shape, opaque tails
(mean, reshape, fully connected, transpose), and the real device models next to the simple
test device.
"""
from __future__ import annotations

from hypothesis import strategies as st

from planner import parts
from planner.errors import PlannerError
from planner.graph import GraphBuilder, PlannerGraph, Tensor
from planner.options import PlannerOptions

DEVICES = ("simple", "ethos-u55-128", "ethos-u55-32", "ethos-u65-256", "ethos-n78-1tops")
KINDS = ("conv", "conv", "dw", "pool", "add", "concat", "resize", "pad", "slice", "unary",
         "grouped", "mean", "fc", "transpose")


def _nhwc(ts):
    return [t for t in ts if len(t.shape) == 4]


@st.composite
def planner_graphs(draw, max_parts: int = 9, max_hw: int = 32, max_c: int = 16) -> PlannerGraph:
    n_inputs = draw(st.sampled_from((1, 1, 1, 2)))
    b = GraphBuilder(draw(st.sampled_from(("fuzz", "g"))))
    avail: list[Tensor] = []
    for k in range(n_inputs):
        side = st.one_of(st.integers(1, 3), st.integers(4, max_hw), st.integers(4, max_hw))
        shape = (1, draw(side), draw(side), draw(st.integers(1, max_c)))
        avail.append(b.input(f"in{k}", shape, draw(st.sampled_from(("int8", "int8", "int16")))))
    target = draw(st.integers(1, max_parts))
    made = attempts = 0
    while made < target and attempts < 3 * max_parts:
        attempts += 1
        name = f"p{made}"
        spatial = _nhwc(avail)
        # mostly extend the newest tensor (chains), sometimes branch off an older one
        x = avail[-1] if draw(st.integers(0, 3)) else draw(st.sampled_from(avail))
        kind = draw(st.sampled_from(KINDS))
        try:
            if kind in ("conv", "grouped", "dw", "pool", "resize", "pad", "mean") and \
                    len(x.shape) != 4:
                if not spatial:
                    continue
                x = draw(st.sampled_from(spatial))
            if kind in ("conv", "grouped"):
                k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
                s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
                d = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
                pad = tuple(draw(st.integers(0, 3)) for _ in range(4))
                c = x.shape[3]
                groups = 1
                if kind == "grouped":
                    divisors = [g for g in range(2, c + 1) if c % g == 0]
                    if not divisors:
                        continue
                    groups = draw(st.sampled_from(divisors))
                oc = groups * draw(st.integers(1, max(1, max_c // groups)))
                part = parts.conv2d(name, x, oc, k, s, d, pad, groups=groups,
                                    activation=draw(st.sampled_from(parts.ACTIVATIONS)),
                                    weight_compression=draw(st.sampled_from((1.0, 0.5, 0.37))),
                                    bias=draw(st.booleans()))
            elif kind == "dw":
                k = draw(st.integers(1, 5))
                part = parts.depthwise_conv2d(
                    name, x, (k, draw(st.integers(1, 5))),
                    (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
                    (draw(st.integers(1, 2)), draw(st.integers(1, 2))),
                    tuple(draw(st.integers(0, 2)) for _ in range(4)),
                    depth_multiplier=draw(st.sampled_from((1, 1, 2))))
            elif kind == "pool":
                part = parts.pool2d(name, x, draw(st.sampled_from(("max", "avg"))),
                                    (draw(st.integers(1, 4)), draw(st.integers(1, 4))),
                                    (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
                                    tuple(draw(st.integers(0, 1)) for _ in range(4)))
            elif kind == "add":
                same = [t for t in avail if t.shape == x.shape and t is not x]
                if same:
                    other = draw(st.sampled_from(same))
                elif len(x.shape) == 4 and draw(st.booleans()):
                    other = Tensor(f"{name}:const", (1, 1, 1, x.shape[3]), "int8", True)
                else:
                    continue
                part = parts.elementwise(name, x, other,
                                         draw(st.sampled_from(("add", "sub", "mul", "maximum"))))
            elif kind == "concat":
                axis = draw(st.integers(0, len(x.shape) - 1))
                peers = [t for t in avail if len(t.shape) == len(x.shape) and all(
                    t.shape[i] == x.shape[i] for i in range(len(x.shape)) if i != axis)]
                if len({t.name for t in peers}) < 2:
                    continue
                ins = draw(st.lists(st.sampled_from(peers), min_size=2, max_size=3,
                                    unique_by=lambda t: t.name))
                part = parts.concatenate(name, ins, axis)
            elif kind == "resize":
                if x.shape[1] * 3 > 2 * max_hw:
                    continue
                part = parts.resize(name, x, (draw(st.integers(1, 3)), draw(st.integers(1, 3))),
                                    draw(st.sampled_from(("nearest", "bilinear"))))
            elif kind == "pad":
                part = parts.pad(name, x, [(0, 0)] + [(draw(st.integers(0, 2)),
                                                       draw(st.integers(0, 2)))
                                                      for _ in range(2)] + [(0, 0)])
            elif kind == "slice":
                begin = [draw(st.integers(0, n - 1)) for n in x.shape]
                size = [draw(st.integers(1, n - b0)) for n, b0 in zip(x.shape, begin)]
                part = parts.strided_slice(name, x, begin, size)
            elif kind == "unary":
                part = parts.unary(name, x, draw(st.sampled_from(
                    ("relu", "sigmoid", "tanh", "hard_swish", "quantize"))))
            elif kind == "mean":
                part = parts.mean(name, x, keepdims=draw(st.booleans()))
            elif kind == "fc":
                rows = x.shape[0]
                flat = x.elements // rows
                if flat > 4096:
                    continue
                if x.shape != (rows, flat):
                    x = b.add(parts.reshape(f"{name}/reshape", x, (rows, flat)))
                    avail.append(x)
                part = parts.fully_connected(name, x, draw(st.integers(1, 16)))
            else:  # transpose
                perm = draw(st.permutations(range(len(x.shape))))
                part = parts.transpose(name, x, perm)
        except PlannerError:
            continue
        avail.append(b.add(part))
        made += 1
    if not made:
        avail.append(b.add(parts.unary("p0", avail[0], "relu")))
    # outputs: the newest tensor plus, sometimes, an intermediate (a second network output)
    g = b.build()
    outs = list(g.outputs)
    produced = [p.output for p in g.parts]
    if draw(st.booleans()) and len(produced) > 1:
        extra = draw(st.sampled_from(produced[:-1]))
        if extra not in outs:
            outs.append(extra)
    return PlannerGraph(g.parts, g.inputs, tuple(outs), g.name)


@st.composite
def planner_options(draw) -> PlannerOptions:
    return PlannerOptions(
        max_plan_size=draw(st.sampled_from((1, 2, 3, 5, 8, 8))),
        stripe_factors=draw(st.sampled_from((1, 2, 3, 4, 5, 6))),
        max_width_tiles=draw(st.integers(1, 3)),
        multi_dimensional=draw(st.booleans()),
        rolling_granules=tuple(draw(st.lists(st.sampled_from((0, 1, 2, 4)), min_size=1,
                                             max_size=2, unique=True))),
        weight_placements=tuple(draw(st.lists(st.sampled_from(("flash", "sram")), min_size=1,
                                              max_size=2, unique=True))),
        allow_recompute=draw(st.booleans()),
        thin_frontier=draw(st.sampled_from((None, None, 2, 3, 8))),
    )


def device(name: str, io_region: str):
    if name == "simple":
        from tests.helpers.simple_device import simple_device
        return simple_device(io_region=io_region)
    from planner.devices import get_device
    return get_device(name, io_region=io_region)


#: Where in (or around) the frontier a budget falls; resolved once the frontier is known.
BUDGETS = st.one_of(
    st.just(None),                                            # the fastest Proposal
    st.tuples(st.just("point"), st.floats(0, 1)),             # exactly a frontier point
    st.tuples(st.just("between"), st.floats(0, 1)),           # between two points
    st.just(("below", 0)),                                    # infeasible: one byte short
    st.just(("zero", 0)),
    st.just(("huge", 0)),
)
