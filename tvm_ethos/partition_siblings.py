"""One NPU subgraph for every part of a SPLIT: sibling subgraphs that slice the same tensors
merged into one function with several outputs.

``MergeCompositeFunctions`` joins a composite to its producer; the parts of a SPLIT (one
``strided_slice`` each) whose input comes from outside the accelerator's region have no
producer there, so each becomes a subgraph of its own that holds the whole input. One source
operator then lies in several NPU subgraphs and a TFLite Micro file, which writes one
``ethos-u`` operator per subgraph, cannot be written; Vela writes such a group as one
``ethos-u`` operator with several outputs. Merging the siblings gives the same: one
subgraph whose outputs are the parts (and whatever each part feeds), its input held once.
"""
from __future__ import annotations

import tvm
from tvm import relax
from tvm.relax.expr import _update_type

from ethos_arch.ops import Op

#: the composites that start a sibling worth merging (one part of a SPLIT each)
_PART_KINDS = (Op.SPLIT.value,)


def merge_split_siblings(mod, backend_id: str):
    """``mod`` with the ``backend_id`` subgraphs that ``main`` calls with the same arguments,
    each slicing one of them directly, merged into one subgraph per argument list (in the
    first one's place; its outputs each sibling's, in ``main``'s order). Nothing else
    changes."""
    main = mod["main"]
    calls: dict[tuple, list] = {}   # (block, arguments) -> the sibling calls' bindings
    for k, block in enumerate(main.body.blocks):
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar) and \
                    _slices_a_param(mod[v.op], backend_id):
                calls.setdefault((k, *v.args), []).append(b)
    merges = [bs for bs in calls.values() if len(bs) > 1 and _args_are_vars(bs[0])]
    if not merges:
        return mod
    replace: dict = {}
    for bs in merges:
        gvs = [b.value.op for b in bs]
        merged = _merged_function([mod[gv] for gv in gvs])
        name = gvs[0].name_hint + "_merged"
        new_gv = tvm.ir.GlobalVar(name)
        _update_type(new_gv, merged.ty)
        mod[new_gv] = merged
        for gv in gvs:
            del mod[gv]
        replace[bs[0].var] = (new_gv, bs)
    mod["main"] = _rewrite_main(main, replace)
    return mod


def _args_are_vars(binding) -> bool:
    return all(isinstance(a, relax.Var) for a in binding.value.args)


def _slices_a_param(func, backend_id: str) -> bool:
    """Whether ``func`` is a ``backend_id`` subgraph with a SPLIT part reading a parameter."""
    attrs = func.attrs
    if not isinstance(func, relax.Function) or attrs is None or "Codegen" not in attrs or \
            str(attrs["Codegen"]) != backend_id:
        return False
    params = set(func.params)
    local = {}
    for block in func.body.blocks:
        for b in block.bindings:
            if isinstance(b.value, relax.Function):
                local[b.var] = b.value
                continue
            v = b.value
            if not (isinstance(v, relax.Call) and v.op in local):
                continue
            comp = local[v.op].attrs
            kind = str(comp["Composite"]).split(".", 1)[1] if comp is not None and \
                "Composite" in comp else ""
            if kind in _PART_KINDS and any(a in params for a in v.args):
                return True
    return False


def _merged_function(funcs: list) -> relax.Function:
    """One function of the first's parameters (the siblings take the same arguments) whose
    bindings are each sibling's in turn and whose result is their results, flattened."""
    params = list(funcs[0].params)
    bindings, results, types = [], [], []
    for func in funcs:
        body = func.body
        if func is not funcs[0]:
            body = _renamed(body, dict(zip(func.params, params)))
        for block in body.blocks:
            bindings.extend(block.bindings)
        out = body.body
        ty = func.ret_ty
        if isinstance(ty, relax.TupleType):
            results += [relax.TupleGetItem(out, i) for i in range(len(ty.fields))]
            types += list(ty.fields)
        else:
            results.append(out)
            types.append(ty)
    attrs = {k: funcs[0].attrs[k] for k in funcs[0].attrs.keys()}
    seq = relax.SeqExpr([relax.BindingBlock(bindings)], relax.Tuple(results))
    merged = relax.Function(params, seq, relax.TupleType(types))
    for k, v in attrs.items():
        merged = merged.with_attr(k, v)
    return merged


@relax.expr_functor.mutator
class _Mutator(relax.PyExprMutator):
    """Relax's own mutator: it rebuilds an expression with the variables it is told to
    remap replaced."""


def _renamed(expr, mapping: dict):
    """``expr`` (a sibling's body) with each variable of ``mapping`` (its parameters)
    replaced by its value (the merged function's)."""
    mutator = _Mutator()
    for old, new in mapping.items():
        mutator.set_var_remap(old, new)
    return mutator.visit_expr(expr)


def _rewrite_main(main, replace: dict):
    """``main`` with each merged group's first call replaced by a call of the merged subgraph
    and every sibling's variable bound to its part of the result."""
    dropped = {b.var for _, bs in replace.values() for b in bs}
    blocks = []
    for block in main.body.blocks:
        out = []
        for b in block.bindings:
            if b.var in replace:
                new_gv, bs = replace[b.var]
                call = relax.Call(new_gv, list(b.value.args))
                tup = relax.DataflowVar("merged_" + b.var.name, _types(bs)) \
                    if isinstance(b.var, relax.DataflowVar) else \
                    relax.Var("merged_" + b.var.name, _types(bs))
                out.append(relax.VarBinding(tup, call))
                k = 0
                for s in bs:
                    n = _n_results(s.var.ty)
                    if n is None:
                        out.append(relax.VarBinding(s.var, relax.TupleGetItem(tup, k)))
                        k += 1
                    else:
                        out.append(relax.VarBinding(s.var, relax.Tuple(
                            [relax.TupleGetItem(tup, k + i) for i in range(n)])))
                        k += n
            elif b.var not in dropped:
                out.append(b)
        cls = relax.DataflowBlock if isinstance(block, relax.DataflowBlock) else \
            relax.BindingBlock
        blocks.append(cls(out))
    body = relax.SeqExpr(blocks, main.body.body)
    return relax.Function(main.params, body, main.ret_ty, main.is_pure, main.attrs)


def _n_results(ty) -> int | None:
    return len(ty.fields) if isinstance(ty, relax.TupleType) else None


def _types(bindings) -> relax.TupleType:
    fields = []
    for b in bindings:
        s = b.var.ty
        fields += list(s.fields) if isinstance(s, relax.TupleType) else [s]
    return relax.TupleType(fields)
