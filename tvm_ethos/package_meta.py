"""``meta.json``, the description of a compiled model in its package, parsed and validated.

Loading reads this before the package's shared library is loaded: the inputs and outputs
(names, shapes, types), the targets, the runtime options saved with the model and its reports.
Every field is checked for type and range here (tvm_ethos/schema.py), so a damaged or hand-edited
``meta.json`` is one error naming the field, and a shape too large to allocate is refused before
anyone allocates it. Fields this version does not know are ignored (a later writer may add
some); the format version says when a package cannot be read at all.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import NamedTuple

from tvm_ethos.errors import OptionError
from tvm_ethos.runtime.options import check_runtime_options
from tvm_ethos.schema import Node, SchemaError, check_tensor_size, parse_json

_DECISION_TEXT = ("op_id", "kind", "tflite_name", "placed_on", "via")
_DECISION_FIELDS = _DECISION_TEXT + ("subgraph", "rejections", "order")


class TensorDesc(NamedTuple):
    """A model input or output as ``meta.json`` lists it."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True)
class PackageMeta:
    """What ``meta.json`` says, every field checked. ``report`` is the partition report's JSON
    text (validated; ``PartitionReport.from_json`` reads it), ``plan_report`` the planner's
    report as saved."""

    format_version: int
    targets: str
    target_ids: tuple[str, ...]
    inputs: tuple[TensorDesc, ...]
    outputs: tuple[TensorDesc, ...]
    runtime_options: Mapping
    report: str | None
    plan_report: Mapping | None
    #: the top-level fields this version does not read, as found
    extra: Mapping


def parse_meta(data: bytes) -> PackageMeta:
    """``meta.json``'s bytes as a :class:`PackageMeta`; SchemaError naming the first bad field."""
    root = Node(parse_json(data, "meta.json"), "meta.json").obj()
    targets = root.get("targets").str(nonempty=True)
    ids_node = root.opt("targets_ids")
    target_ids = (tuple(n.str(nonempty=True) for n in ids_node.items()) if ids_node is not None
                  else tuple(t.split()[0] for t in targets.split(",") if t.split()))
    opts_node = root.opt("runtime_options")
    opts = dict(opts_node.obj().value) if opts_node is not None else {}
    try:
        check_runtime_options(opts)
    except OptionError as err:
        raise SchemaError(f"meta.json.runtime_options: {err}") from None
    report_node = root.opt("report")
    plan_node = root.opt("plan_report")
    plan = plan_node.obj().value if plan_node is not None else None
    if plan is not None and plan.get("cycles") is not None:
        plan_node.get("cycles").int()
    known = ("format_version", "targets", "targets_ids", "inputs", "outputs", "runtime_options",
             "report", "plan_report")
    return PackageMeta(
        format_version=root.get("format_version").int(),
        targets=targets,
        target_ids=target_ids,
        inputs=_tensors(root.get("inputs")),
        outputs=_tensors(root.get("outputs")),
        runtime_options=MappingProxyType(opts),
        report=_report(report_node) if report_node is not None else None,
        plan_report=MappingProxyType(plan) if plan is not None else None,
        extra=MappingProxyType({k: v for k, v in root.value.items() if k not in known}),
    )


def _tensors(node: Node) -> tuple[TensorDesc, ...]:
    out = []
    for t in node.items():
        name_n, shape_n, dtype_n = t.items(length=3)
        shape, dtype = shape_n.shape(), dtype_n.dtype()
        check_tensor_size(shape, dtype, t.where)
        out.append(TensorDesc(name_n.str(), shape, dtype))
    return tuple(out)


def _report(node: Node) -> str:
    """The partition report (a JSON text inside meta.json), checked field by field."""
    text = node.str()
    root = Node(parse_json(text.encode("utf-8", "replace"), f"{node.where} (JSON text)"),
                node.where).obj(("targets", "operators"))
    root.get("targets").str()
    for op in root.get("operators").items():
        op.obj(_DECISION_FIELDS)
        for k in _DECISION_TEXT:
            if op.opt(k) is not None:
                op.get(k).str()
        if op.opt("subgraph") is not None:
            op.get("subgraph").str()
        if op.opt("order") is not None:
            op.get("order").int(-2**31, 2**31)
        for k in ("op_id", "kind", "tflite_name"):
            op.get(k)
        if op.opt("rejections") is not None:
            for _, reasons in op.get("rejections").entries():
                for r in reasons.items():
                    r.str()
    return text
