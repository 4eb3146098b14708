"""The source ``.tflite`` partitioned on its own graph: which operators the importer can
turn into Relax (the frontend says), the groups of those the Ethos-U may take, and any set of
operators cut out as a model of its own.

A group must be convex (no path leaves it and comes back), or the ethos-u operator it
becomes would wait for its own result through a TFLite operator; within that rule the groups
are made as large as they can be, so the NPU's operators share as few arena hand-overs as
they can.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph, source_tensor
from tvm_ethos.backends.ethos_u.tflite_writer import Operator, copied_options, write_model
from tvm_ethos.frontend.tflite_support import operator_support


@dataclass(frozen=True)
class Cut:
    """A set of source operators as a model of its own: its bytes, and the source index of
    each of its tensors (its operator ``j`` is source operator ``operators[j]``)."""

    data: bytes
    operators: tuple[int, ...]
    tensors: tuple[int, ...]


def cut_model(data: bytes, graph: SourceGraph, ops) -> Cut:
    """Source operators ``ops`` of the model ``data`` as a model whose inputs are the tensors
    they read and none of them writes, and whose outputs are those they write that the rest
    of the graph (or its outputs) reads; names, quantization and options unchanged."""
    ops = tuple(sorted(ops))
    ins, outs = graph.boundary(set(ops))
    order: list[int] = []
    used = [t for i in ops for t in graph.all_inputs(i) + graph.writes[i] + graph.intermediates(i)]
    for t in ins + used + outs:
        if t >= 0 and t not in order:
            order.append(t)
    index = {t: k for k, t in enumerate(order)}
    operators = []
    for i in ops:
        options, custom = copied_options(data, i)
        operators.append(Operator(graph.codes[i],
                                  tuple(index[t] if t >= 0 else -1 for t in graph.all_inputs(i)),
                                  tuple(index[t] for t in graph.writes[i]), options, custom,
                                  tuple(index[t] for t in graph.intermediates(i))))
    # the importer binds tensors by name: a nameless source tensor gets one in the cut
    tensors = [t_ if t_.name else dataclasses.replace(t_, name=f"tvm_ethos_tensor_{t}")
               for t, t_ in ((t, source_tensor(graph, t)) for t in order)]
    out = write_model(tensors, operators, [index[t] for t in ins], [index[t] for t in outs],
                      "tvm-ethos cut")
    return Cut(out, ops, tuple(order))


def import_refusals(data: bytes, name: str = "<bytes>") -> list[str | None]:
    """Per operator of the model's subgraph, None where the importer converts it, else why
    not (the frontend's own verdict, ``tflite_support.operator_support``); ``name`` (the
    model's path, as ``load_model`` names it) begins the error of a file it refuses."""
    return [None if s.importable else s.reason for s in operator_support(data, name)
            if s.subgraph == 0]


def npu_candidates(graph: SourceGraph, importable: list[bool]) -> list[tuple[int, ...]]:
    """Groups of importable operators joined by tensors, each convex, in source order: every
    operator starts alone and two groups joined by a tensor merge while their union stays
    convex, until no pair can (so no two neighbouring groups could be one)."""
    n = len(graph.kinds)
    writer = {t: i for i in range(n) for t in graph.writes[i]}
    preds = [sorted({writer[t] for t in graph.reads[i] if t in writer}) for i in range(n)]
    succ: list[list[int]] = [[] for _ in range(n)]
    for i in range(n):
        for p in preds[i]:
            succ[p].append(i)
    group = {i: frozenset([i]) for i in range(n) if importable[i]}
    merged = True
    while merged:
        merged = False
        for i in range(n):  # a TFLite operator list is an execution order
            for p in preds[i]:
                if i in group and p in group and group[i] is not group[p]:
                    both = group[i] | group[p]
                    if _convex(both, succ):
                        group.update((k, both) for k in both)
                        merged = True
    return sorted({tuple(sorted(g)) for g in group.values()}, key=min)


def _convex(ops: frozenset, succ: list[list[int]]) -> bool:
    """Whether no path leaves ``ops`` and comes back into it."""
    todo = [k for i in ops for k in succ[i] if k not in ops]
    seen: set[int] = set()
    while todo:
        v = todo.pop()
        if v in ops:
            return False
        if v not in seen:
            seen.add(v)
            todo += succ[v]
    return True
