"""Relax BYOC partitioning over a target priority list, and the partition report.

For each accelerator in the target list, in order:

1. ``FuseOpsByPattern`` with the shared QDQ pattern variants (``tvm_ethos.patterns``), named
   ``<backend id>.<kind>``, whose check asks the backend's ``LayerSupport`` which constraints the
   quantized operator violates (recorded for the report; empty = accepted);
2. ``MergeCompositeFunctions``: adjacent accepted operators become one multi-layer subgraph
   function with ``Codegen = <backend id>``;
3. the backend's ``optimize_subgraph`` sees each subgraph: substitutions replace it, failed
   subgraphs are taken back and their operators offered to the next target, untouched stay.

The host target (last) then takes every remaining quantized operator it has an exact integer
kernel for (composites named ``<host id>.<kind>``, not merged); whatever is left (float
operators) is compiled by TVM's own pipeline for the host.

The report lists every operator in program order: where it went and, per target that
refused it, the constraints that failed. It is attached to the module as the attribute
``tvm_ethos.partition_report`` (JSON) and read back by :func:`partition_report`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

import tvm
from tvm import relax
from tvm.relax.expr import _update_type

from ethos_arch.ops import Op, parse_op
from tvm_ethos.backends.base import SubgraphView
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.compute.lowered import subgraph_symbol
from tvm_ethos.errors import UnsupportedModelError
from tvm_ethos.partition_chains import ChainVerdict, chain_verdict
from tvm_ethos.partition_extern import (
    extern_funcs_inlined,
    lstm_calls_hidden,
    lstm_calls_revealed,
    unclaimed_lstm_refusal,
)
from tvm_ethos.partition_op_ids import source_names
from tvm_ethos.partition_siblings import merge_split_siblings
from tvm_ethos.patterns import (
    _VARIANTS_BY_KIND,
    pattern_variants,
    qop_from_composite,
    read_qop,
)
from tvm_ethos.targets import TargetList, parse_targets

REPORT_ATTR = "tvm_ethos.partition_report"
GLUE_OPS = {"relax.dequantize", "relax.quantize"}


@dataclass
class OperatorDecision:
    op_id: str
    kind: str
    tflite_name: str
    placed_on: str = ""
    subgraph: str | None = None
    via: str = ""  # "npu", "kernel" (exact host kernel) or "tvm" (TVM's own lowering)
    rejections: dict = field(default_factory=dict)  # backend id -> [reasons]
    order: int = 0


@dataclass
class PartitionReport:
    targets: str
    operators: list

    def summary(self) -> dict:
        out: dict = {}
        for op in self.operators:
            out[op.placed_on] = out.get(op.placed_on, 0) + 1
        return out

    def on(self, backend_id: str) -> list:
        return [op for op in self.operators if op.placed_on == backend_id]

    def to_json(self) -> str:
        return json.dumps(
            {"targets": self.targets, "operators": [asdict(o) for o in self.operators]}
        )

    @classmethod
    def from_json(cls, text: str) -> "PartitionReport":
        d = json.loads(text)
        return cls(d["targets"], [OperatorDecision(**o) for o in d["operators"]])

    def __str__(self):
        lines = [
            f"partition for {self.targets}: "
            + ", ".join(f"{k}: {v}" for k, v in self.summary().items())
        ]
        for op in self.operators:
            where = (
                op.placed_on
                + (f" [{op.subgraph}]" if op.subgraph else "")
                + (f" ({op.via})" if op.via else "")
            )
            lines.append(f"  {op.op_id:>8} {op.tflite_name:<20} -> {where}")
            for bid, reasons in op.rejections.items():
                if reasons:
                    lines.append(f"           rejected by {bid}: {'; '.join(reasons)}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------- helpers
def _main_bindings(mod):
    f = mod["main"]
    out = []
    for block in f.body.blocks:
        out.extend(block.bindings)
    return out


def _var_name(v) -> str:
    return v.name if hasattr(v, "name") else str(v)


def _op_id_from_ann(ann: dict, value_to_var) -> str:
    expr = ann.get("op", ann["root"])
    var = value_to_var.get(expr) if value_to_var is not None else None
    if var is None and expr is not ann["root"]:
        var = value_to_var.get(ann["root"]) if value_to_var is not None else None
    return _var_name(var) if var is not None else f"expr{hash(expr) & 0xFFFF:x}"


OP_ID_ATTR = "tvm_ethos.op_id"


def _core_binding(cfunc) -> tuple[object, bool]:
    """(the core operator's binding variable inside a composite function, or None, and
    whether that binding is the composite's output)."""
    qop_from_composite(cfunc)  # fills the variant table
    name = str(cfunc.attrs["Composite"])
    kind = parse_op(name.split(".", 1)[1], f"composite {name}")
    var2val, val2var = {}, {}
    for block in cfunc.body.blocks:
        for b in block.bindings:
            var2val[b.var] = b.value
            val2var[b.value] = b.var
    root = cfunc.body.body
    for pat, ann in _VARIANTS_BY_KIND[kind]:
        m = pat.extract_matched_expr(root, var2val)
        if m is None:
            continue
        expr = m[ann["op"]] if ann["op"] in m else m[ann["root"]]
        var = val2var.get(expr)
        return var, var is not None and var.same_as(root)
    return None, False


def _composite_core(cfunc) -> tuple[str, bool]:
    """(name of the core operator's binding inside a composite function, whether that binding
    is the composite's output)."""
    var, is_root = _core_binding(cfunc)
    return (_var_name(var) if var is not None else "?"), is_root


def composite_op_id(cfunc) -> str:
    """The op id (name of the core operator's binding in ``main``) of a composite function:
    the one :func:`_tag_op_ids` recorded, else the core binding's name inside it."""
    if cfunc.attrs is not None and OP_ID_ATTR in cfunc.attrs:
        return str(cfunc.attrs[OP_ID_ATTR])
    return _composite_core(cfunc)[0]


def _is_untagged_composite(func) -> bool:
    attrs = func.attrs
    return attrs is not None and "Composite" in attrs and OP_ID_ATTR not in attrs


def _tag_op_ids(mod, source):
    """Record each new composite's op id while ``main`` (``source``'s, fused) still calls it:
    the name of the binding of ``source`` its core operator is (:func:`source_names`).
    ``FuseOpsByPattern`` names a composite's output binding afresh (``gv``) and its call's
    binding in ``main`` afresh too, from the sequence the source's names come from, so
    neither name can be trusted; and it shares one function between equal composites, so a
    call whose operator is not the one its function is tagged with gets a copy of its own."""
    names = source_names(mod, source, _is_untagged_composite)
    tagged: dict = {}   # function -> the op id it was tagged with here
    retarget: dict = {}  # binding of main -> its composite's own copy
    for b in _main_bindings(mod):
        if b.var not in names.inner:
            continue
        gv = b.value.op
        func = mod[gv] if gv not in tagged else tagged[gv][1]
        core, _ = _core_binding(func)
        op_id = names.inner[b.var].get(core, "?")
        if gv not in tagged:
            tagged[gv] = (op_id, func)
            mod[gv] = func.with_attr(OP_ID_ATTR, op_id)
        elif tagged[gv][0] != op_id:
            copy = func.with_attr(OP_ID_ATTR, op_id)
            own = tvm.ir.GlobalVar(f"{gv.name_hint}_{op_id}")
            _update_type(own, copy.ty)
            mod[own] = copy
            retarget[b.var] = own
    if retarget:
        mod["main"] = _retargeted(mod["main"], retarget)
    return mod


def _retargeted(main, retarget: dict):
    """``main`` with each binding of ``retarget`` calling its own function."""
    blocks = []
    for block in main.body.blocks:
        out = [relax.VarBinding(b.var, relax.Call(retarget[b.var], list(b.value.args)))
               if b.var in retarget else b for b in block.bindings]
        cls = relax.DataflowBlock if isinstance(block, relax.DataflowBlock) else \
            relax.BindingBlock
        blocks.append(cls(out))
    body = relax.SeqExpr(blocks, main.body.body)
    return relax.Function(main.params, body, main.ret_ty, main.is_pure, main.attrs)


def _source_format(mod) -> str | None:
    attrs = mod.attrs
    return (
        str(attrs["tvm_ethos.source_format"])
        if attrs is not None and "tvm_ethos.source_format" in attrs
        else None
    )


def _is_float_model(mod) -> str | None:
    """A description of why the module is a float model, or None if it is quantized."""
    f = mod["main"]
    has_q = False
    for b in _main_bindings(mod):
        v = b.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op) and v.op.name in GLUE_OPS:
            has_q = True
            break
    float_inputs = [
        p for p in f.params if hasattr(p.ty, "dtype") and str(p.ty.dtype).startswith("float")
    ]
    if not has_q and float_inputs:
        x = float_inputs[0]
        return f"input {_var_name(x)!r} is {x.ty.dtype} and the model has no quantized operator"
    return None


#: why an accelerator leaves a reshape of a chain through 6-D (``partition_chains``) alone
CHAIN_RESHAPE = ("a reshape of a reshape -> transpose -> reshape chain through 6-D (TVM's "
                 "DEPTH_TO_SPACE), which goes where the whole chain goes")


def _patterns_for(backend_id: str, layer_support, options, decisions, excluded, order, *,
                  chains: ChainVerdict, host=False):
    """The fusion patterns of one backend; ``chains``: the reshapes it leaves to their chain,
    a RESHAPE alone refused with :data:`CHAIN_RESHAPE`, and the permutations of a reshape it
    declines as no TRANSPOSE of their own, unreported (``partition_chains``)."""
    pats = []
    kinds = set(layer_support.kinds())
    for kind, pat, ann in pattern_variants():
        # a variant of kind "conv2d" also yields depthwise; keep it if either is supported
        # an NPU sees every kind (an unsupported one is rejected with that reason, for the report);
        # a host takes only the kinds it has exact kernels for, the rest goes to TVM's lowering
        if host and kind not in kinds and not (kind == Op.CONV2D and Op.DEPTHWISE_CONV2D in kinds):
            continue

        def check(ctx, kind=kind):
            annd = dict(ctx.annotated_expr.items())
            op_id = _op_id_from_ann(annd, ctx.value_to_bound_var)
            if kind == Op.TRANSPOSE and chains.tied(op_id, annd["x0"]):
                return False
            q = read_qop(kind, annd)
            d = decisions.get(op_id)
            if d is None:
                d = OperatorDecision(op_id, q.kind, q.tflite_name, order=order.get(op_id, 10**6))
                decisions[op_id] = d
            d.kind, d.tflite_name = q.kind, q.tflite_name
            if op_id in excluded:
                reasons = [excluded[op_id]]
            elif kind == Op.RESHAPE and op_id in chains.held:
                reasons = [CHAIN_RESHAPE]
            else:
                reasons = layer_support.why_not(q, options)
            d.rejections[backend_id] = reasons
            return not reasons

        pats.append(relax.transform.FusionPattern(f"{backend_id}.{kind}", pat, ann, check))
    return pats


def _codegen_functions(mod, backend_id):
    return [(gv, f) for gv, f in mod.functions.items()
            if isinstance(f, relax.Function) and f.attrs is not None and "Codegen" in f.attrs
            and str(f.attrs["Codegen"]) == backend_id]


def _subgraph_ops(func):
    ops = []
    for block in func.body.blocks:
        for b in block.bindings:
            if (
                isinstance(b.value, relax.Function)
                and b.value.attrs is not None
                and "Composite" in b.value.attrs
            ):
                ops.append(b.value)
    return ops


def _keep_subgraph_symbols(mod, backend_ids) -> None:
    """Give every named subgraph its symbol back. ``MergeCompositeFunctions`` for a later
    accelerator of the list rebuilds an earlier accelerator's subgraph function and names it
    after its operators (a symbol of a thousand characters that the report does not know)."""
    for bid in backend_ids:
        for gv, func in _codegen_functions(mod, bid):
            attrs = func.attrs
            if "tvm_ethos.subgraph" in attrs and str(attrs["global_symbol"]) != str(
                attrs["tvm_ethos.subgraph"]
            ):
                mod[gv] = func.with_attr("global_symbol", str(attrs["tvm_ethos.subgraph"]))


# ---------------------------------------------------------------------------- partition
def partition(mod, target="ethos-n,llvm", **options):
    """Partition ``mod`` for a target list. Returns ``(partitioned module, PartitionReport)``."""
    tl = target if isinstance(target, TargetList) else parse_targets(target, options)
    reg = get_registry()
    # a float TFLite / ONNX model for an NPU is a mistake worth an error (a quantized one is
    # the norm there); a torch.export program is float by nature (TVM's importer takes no
    # PT2E-quantized graph), so it compiles with every float operator on the host, each
    # reported as "not a quantized operator"
    if tl.accelerators and _source_format(mod) != "torch":
        why = _is_float_model(mod)
        if why:
            npus = ", ".join(t.backend_id for t in tl.accelerators)
            raise UnsupportedModelError(
                f"{npus} needs an int8/uint8 quantized model, but this is a float32 model ({why}); "
                "quantize it (e.g. TFLite full-integer post-training quantization) or compile for "
                f"'{tl.host.backend_id}'"
            )
    mod = relax.transform.ConvertToDataflow()(mod)
    order = {_var_name(b.var): i for i, b in enumerate(_main_bindings(mod))}
    chains = chain_verdict(mod)
    decisions: dict[str, OperatorDecision] = {}
    subgraph_names: dict[str, str] = {}
    counter = 0

    for spec in tl.accelerators:
        backend = reg.get(spec.backend_id)
        ls = backend.layer_support()
        excluded: dict[str, str] = {}
        base = mod
        for _attempt in range(8):
            pats = _patterns_for(spec.backend_id, ls, spec.options, decisions, excluded, order,
                                 chains=chains)
            before = {gv.name_hint for gv, _ in _codegen_functions(base, spec.backend_id)}
            # an NPU without the LSTM passes over it hidden (a later one may take it)
            source, hidden = (base, {}) if Op.LSTM in ls.checks else lstm_calls_hidden(base)
            trial = extern_funcs_inlined(relax.transform.FuseOpsByPattern(
                pats, bind_constants=True, annotate_codegen=False
            )(source))
            unclaimed_lstm_refusal(trial, ",".join(tl.ids), spec.backend_id)
            trial = relax.transform.MergeCompositeFunctions()(_tag_op_ids(trial, source))
            trial = lstm_calls_revealed(merge_split_siblings(trial, spec.backend_id), hidden)
            new_failures = {}
            for gv, func in _codegen_functions(trial, spec.backend_id):
                if gv.name_hint in before:
                    continue
                comps = _subgraph_ops(func)
                view = SubgraphView(gv.name_hint, func, comps)
                views = backend.optimize_subgraph(view, spec.options)
                for v, reason in views.failed:
                    for c in v.operators:
                        new_failures[composite_op_id(c)] = f"optimize_subgraph failed: {reason}"
                for v, replacement in views.substitutions:
                    trial[gv] = replacement
            if not new_failures:
                mod = trial
                break
            excluded.update(new_failures)
        else:  # pragma: no cover
            mod = base
        # short, stable symbols for the subgraphs of this backend
        _keep_subgraph_symbols(mod, tl.ids[:-1])
        for gv, func in _codegen_functions(mod, spec.backend_id):
            if func.attrs is not None and "tvm_ethos.subgraph" in func.attrs:
                continue
            sym = subgraph_symbol(spec.backend_id, counter)
            counter += 1
            func = func.with_attr("global_symbol", sym).with_attr("tvm_ethos.subgraph", sym)
            mod[gv] = func
            for c in _subgraph_ops(func):
                subgraph_names[composite_op_id(c)] = sym

    # host: exact integer kernels for the remaining quantized operators
    host = reg.get(tl.host.backend_id)
    pats = _patterns_for(
        tl.host.backend_id, host.layer_support(), tl.host.options, decisions, {}, order, host=True,
        chains=chains._replace(held=frozenset()),   # a host takes a reshape alone, as before
    )
    mod = _tag_op_ids(
        relax.transform.FuseOpsByPattern(pats, bind_constants=True, annotate_codegen=False)(mod),
        mod,
    )

    unclaimed_lstm_refusal(mod, ",".join(tl.ids))
    report = _build_report(mod, tl, decisions, order, subgraph_names)
    mod = mod.with_attr(REPORT_ATTR, report.to_json())
    mod = mod.with_attr("tvm_ethos.targets", str(tl))
    return mod, report


def _build_report(mod, tl: TargetList, decisions, order, subgraph_names) -> PartitionReport:
    host_id = tl.host.backend_id
    npu_ids = {t.backend_id for t in tl.accelerators}
    placed: list[OperatorDecision] = []
    for b in _main_bindings(mod):
        v = b.value
        if not isinstance(v, relax.Call):
            continue
        if isinstance(v.op, tvm.ir.GlobalVar):
            func = mod[v.op]
            attrs = func.attrs or {}
            if "Codegen" in attrs and str(attrs["Codegen"]) in npu_ids:
                bid = str(attrs["Codegen"])
                for c in _subgraph_ops(func):
                    oid = composite_op_id(c)
                    d = decisions.get(oid) or OperatorDecision(
                        oid, "?", "?", order=order.get(oid, 0)
                    )
                    d.placed_on, d.via, d.subgraph = (
                        bid,
                        "npu",
                        subgraph_names.get(oid, str(attrs.get("global_symbol", ""))),
                    )
                    placed.append(d)
                continue
            if "Composite" in attrs:
                oid = composite_op_id(func)
                d = decisions.get(oid) or OperatorDecision(oid, "?", "?", order=order.get(oid, 0))
                d.placed_on, d.via = host_id, "kernel"
                placed.append(d)
                continue
        if isinstance(v.op, tvm.ir.Op):
            if v.op.name in GLUE_OPS:
                continue
            if all(
                isinstance(a, (tvm.ir.expr.GenericConst, relax.ShapeExpr))
                or not isinstance(a, relax.Expr)
                for a in v.args
            ):
                continue  # constant folding material (weight reshape / transpose)
            oid = _var_name(b.var)
            d = decisions.get(oid) or OperatorDecision(
                oid,
                v.op.name.replace("relax.", ""),
                v.op.name.replace("relax.nn.", "").replace("relax.", "").upper(),
                order=order.get(oid, 0),
            )
            d.placed_on, d.via = host_id, "tvm"
            if not d.rejections:
                d.rejections = {
                    t: ["not a quantized operator (no QDQ pattern matches)"] for t in tl.ids[:-1]
                }
            placed.append(d)
    placed.sort(key=lambda d: d.order)
    for d in placed:
        if d.placed_on in npu_ids:
            d.rejections = {k: v for k, v in d.rejections.items() if v}
        else:
            d.rejections = {k: v for k, v in d.rejections.items() if v or k != d.placed_on}
    return PartitionReport(str(tl), placed)


def partition_report(mod, target=None, **options) -> PartitionReport:
    """The report of a partitioned module (or of partitioning ``mod`` for ``target``)."""
    attrs = mod.attrs
    if target is None and attrs is not None and REPORT_ATTR in attrs:
        return PartitionReport.from_json(str(attrs[REPORT_ATTR]))
    return partition(mod, target or "ethos-n,llvm", **options)[1]
