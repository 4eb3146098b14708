"""RESHAPE Parts that alias their input: the same bytes under another shape, no operation.

Feature maps between Plans are held whole in NHWC, so a RESHAPE (or SQUEEZE / EXPAND_DIMS,
or a FULLY_CONNECTED's flatten) planned as a Plan of its own moves no data: its output is its
input's bytes at the same address, as Vela aliases them. The planner counts such an output
once (its root's bytes live until the alias's last reader) and the Ethos-U stream emits no
operation for it. A RESHAPE inside a longer Plan keeps its own buffer (the Plan may hold its
input in a ring), and so does one that writes a network output (its bytes go where the
caller reads them).

An elementwise activation that reads each element once, before writing it, at the same place
(``in_place``: LOGISTIC, TANH, RELU6, EXP, ...: one NPU operation over equal NHWC shapes of
one 8-bit type, or of int16 for the operators whose int16 form is still one operation) may
write its output over its input when nothing reads the input after it, as Vela's live ranges
let an elementwise operation's OFM take its IFM's range: the planner counts it the same way
(its output is its root's bytes), and the stream runs the operation with both at one
address. The input and output are both the network's or both neither, so they live in one
memory.
"""
from __future__ import annotations

from collections.abc import Sequence

from ethos_arch.ops import Op
from planner.graph import Part, PlannerGraph

#: the activations one NPU operation computes element by element on 8-bit maps (a table
#: or a clamp)
IN_PLACE_OPS = frozenset({"sigmoid", "tanh", "relu", "relu6", "relu_n1_to_1", "hard_swish",
                          "exp", "log", "gelu", "rsqrt", "leaky_relu"})
#: the 8-bit types they are one operation in
IN_PLACE_TYPES = frozenset({"int8", "uint8"})
#: those whose int16 form is one operation too (a 16-bit table pool, or a pool carrying the
#: output unit's own int16 sigmoid / tanh); other int16 forms take several operations or
#: working memory (LEAKY_RELU's two branches, SOFTMAX's sequence)
IN_PLACE_INT16_OPS = frozenset({"exp", "log", "sigmoid", "tanh"})


def in_place_types(op: str | None) -> frozenset[str]:
    """The element types in which ``op`` (a UNARY Part's ``op``) is one operation that reads
    each element before writing it at the same place (none: it is not)."""
    if op not in IN_PLACE_OPS:
        return frozenset()
    return (IN_PLACE_TYPES | {"int16"}) if op in IN_PLACE_INT16_OPS else IN_PLACE_TYPES


def may_alias(part: Part, graph: PlannerGraph) -> bool:
    """Whether ``part``'s output may share its input's bytes: a RESHAPE that only moves data
    (a Part shaped like a RESHAPE that computes names its operator in ``op``), or an
    activation computed ``in_place``."""
    if in_place(part, graph):
        return True
    if part.kind != Op.RESHAPE or part.attr("op") is not None \
            or len(part.activation_inputs) != 1:
        return False
    (_, src), = part.activation_inputs
    outputs = {t.name for t in graph.outputs}
    return (part.output.name not in outputs and src.dtype == part.output.dtype
            and src.bytes == part.output.bytes)


def in_place(part: Part, graph: PlannerGraph) -> bool:
    """Whether ``part`` may write its output over its input: an ``IN_PLACE_OPS`` activation
    of a type it is one operation in (``in_place_types``) over equal NHWC shapes (each
    element read before it is written, at the same address), its input read by nothing else
    and no RESHAPE's output (whose root others may read), and its input a network input
    exactly when its output is a network output."""
    if part.kind != Op.UNARY or not in_place_types(part.attr("op")) \
            or len(part.activation_inputs) != 1:
        return False
    (_, src), = part.activation_inputs
    out = part.output
    producer = graph.producer(src.name)
    return (src.dtype == out.dtype and src.dtype in in_place_types(part.attr("op"))
            and tuple(src.shape) == tuple(out.shape)
            and part.attr("ifm_format", "NHWC") == part.attr("ofm_format", "NHWC") == "NHWC"
            and len(graph.consumers(src.name)) == 1
            and src.name not in {t.name for t in graph.outputs}
            and (producer is None or producer.kind != Op.RESHAPE)
            and (src.name in {t.name for t in graph.inputs})
            == (out.name in {t.name for t in graph.outputs}))


def alias_roots(graph: PlannerGraph) -> dict[str, str]:
    """{output of every Part that ``may_alias``: the tensor whose bytes it shares}, through
    chains of reshapes down to the first tensor that is not such an output."""
    direct = {p.output.name: p.activation_inputs[0][1].name
              for p in graph.parts if may_alias(p, graph)}
    return _roots(direct)


def aliased_outputs(graph: PlannerGraph, plan_parts: Sequence[Sequence[str]]) -> dict[str, str]:
    """{output of every Plan (given by its Part names, in order) that is one Part that
    ``may_alias``: the tensor whose bytes it shares}, through chains of such Plans."""
    by_name = {p.name: p for p in graph.parts}
    direct = {}
    for names in plan_parts:
        if len(names) == 1 and may_alias(by_name[names[0]], graph):
            part = by_name[names[0]]
            direct[part.output.name] = part.activation_inputs[0][1].name
    return _roots(direct)


def _roots(direct: dict[str, str]) -> dict[str, str]:
    """{alias: the first tensor down its chain of direct aliases that is no alias itself}."""
    roots = {}
    for name in direct:
        root = direct[name]
        while root in direct:
            root = direct[root]
        roots[name] = root
    return roots
