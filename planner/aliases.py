"""RESHAPE Parts that alias their input: the same bytes under another shape, no operation.

Feature maps between Plans are held whole in NHWC, so a RESHAPE (or SQUEEZE / EXPAND_DIMS,
or a FULLY_CONNECTED's flatten) planned as a Plan of its own moves no data: its output is its
input's bytes at the same address, as Vela aliases them. The planner counts such an output
once (its root's bytes live until the alias's last reader) and the Ethos-U stream emits no
operation for it. A RESHAPE inside a longer Plan keeps its own buffer (the Plan may hold its
input in a ring), and so does one that writes a network output (its bytes go where the
caller reads them).
"""
from __future__ import annotations

from collections.abc import Sequence

from ethos_arch.ops import Op
from planner.graph import Part, PlannerGraph


def may_alias(part: Part, graph: PlannerGraph) -> bool:
    """Whether ``part`` is a RESHAPE whose output may share its input's bytes: one that only
    moves data (a Part shaped like a RESHAPE that computes names its operator in ``op``)."""
    if part.kind != Op.RESHAPE or part.attr("op") is not None \
            or len(part.activation_inputs) != 1:
        return False
    (_, src), = part.activation_inputs
    outputs = {t.name for t in graph.outputs}
    return (part.output.name not in outputs and src.dtype == part.output.dtype
            and src.bytes == part.output.bytes)


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
