"""Which binding of ``main`` before ``FuseOpsByPattern`` each call of ``main`` after it stands
for, by that binding's name (an operator's id in the partition report).

``FuseOpsByPattern`` gives the binding of each call to a new composite a fresh name, drawn from
the same ``lv``/``lv1``/... sequence the importer named the bindings with. The fresh names match
the old ones only while every binding before the call was fused one to one; once an operator
is left unfused (a rejected match) the fresh names shift and name other operators, and a
report read from them places operators where they are not. So the name is found again from
what the call computes: the composite's output call, its arguments read back through the
call's, is the value of exactly one binding of the module before the fusion.

Equal bindings (one tensor reshaped alike twice, or dequantized for each of its readers) are
told apart by identity: a binding the fusion left unfused keeps its variable, and so does a
binding inside a composite other than its output, so neither is read by its structure; only a
composite's output, named afresh, is matched by what it computes, among the equal bindings that
no other call and no unfused binding stands for.
"""
from __future__ import annotations

from typing import NamedTuple

import tvm
import tvm_ffi
from tvm import relax

from tvm_ethos.errors import CompileError


def _name(var) -> str:
    return var.name if hasattr(var, "name") else str(var)


def _call_key(call: relax.Call, name_of) -> tuple | None:
    """A call's operator, arguments (variables by the source binding's name, anything else by
    its structure) and attributes; None where an argument's source is unknown."""
    if not isinstance(call.op, tvm.ir.Op):
        return None
    args = tuple(_arg_key(a, name_of) for a in call.args)
    if None in args:
        return None
    attrs = tvm_ffi.structural_hash(call.attrs) if call.attrs is not None else 0
    return call.op.name, args, attrs


def _arg_key(arg, name_of):
    """An argument by the source binding's name (a variable), field by field (a tuple, as
    concatenation's inputs), else by its structure; None where a source is unknown."""
    if isinstance(arg, relax.Var):
        name = name_of(arg)
        return None if name is None else ("var", name)
    if isinstance(arg, relax.Tuple):
        fields = tuple(_arg_key(f, name_of) for f in arg.fields)
        return None if None in fields else ("tuple", fields)
    return "expr", tvm_ffi.structural_hash(arg, map_free_vars=True)


def _bindings(func: relax.Function) -> list:
    return [b for block in func.body.blocks for b in block.bindings]


def _output_call(func: relax.Function) -> tuple[relax.Call | None, dict]:
    """A composite's output call and its bindings (variable -> value)."""
    values = {b.var: b.value for b in _bindings(func)}
    root = func.body.body
    root = values.get(root, root) if isinstance(root, relax.Var) else root
    return (root if isinstance(root, relax.Call) else None), values


class SourceNames(NamedTuple):
    """What each call of a fused ``main`` stands for in the module it was fused from:
    ``outer`` maps every variable of ``main`` to its source binding's name, ``inner`` each call
    of a new composite to the source binding's name of every binding inside the composite
    (two calls of one function, which the fusion shares between equal composites, stand for
    different operators)."""

    outer: dict
    inner: dict


def _held(fused: tvm.IRModule, source_vars: dict, is_new) -> set[str]:
    """The names of the source bindings whose variable the fusion kept: those left unfused in
    ``main``, and those inside a new composite but its output (which is named afresh). Each
    stands for itself, so no equal binding elsewhere may be named after it."""
    held = {source_vars[b.var] for b in _bindings(fused["main"]) if b.var in source_vars}
    for b in _bindings(fused["main"]):
        v = b.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar):
            func = fused[v.op]
            if isinstance(func, relax.Function) and is_new(func):
                held.update(source_vars[ib.var] for ib in _bindings(func)
                            if ib.var in source_vars)
    return held


def _pick(found: list[str], mine: str | None, own: str, taken: set[str], held: set[str]) -> str:
    """Which of the equal source bindings ``found`` a composite's binding stands for: the one
    whose variable it is (``mine``), where no binding took it yet; else, among those none took
    and whose variable the fusion did not keep elsewhere, the one of its name (``own``), else
    the first. A composite's output is named afresh, and a function shared by equal composites
    carries the first call's variables, so for them only structure tells, and only the
    bindings nothing else stands for are theirs to take. Each source binding is in one
    composite only."""
    if mine in found and mine not in taken:
        return mine
    free = [n for n in found if n not in taken and n not in held]
    if own in free:
        return own
    return (free or [n for n in found if n not in taken] or found)[0]


def source_names(fused: tvm.IRModule, source: tvm.IRModule, is_new) -> SourceNames:
    """The :class:`SourceNames` of ``fused["main"]``, ``source`` after ``FuseOpsByPattern``.
    ``is_new(func)``: whether a called function is a composite the fusion made (its call's
    binding was named afresh); the other bindings kept their variables. A binding of a new
    composite that no binding of the source computes is a :class:`CompileError`: a guess
    could place operators where they are not."""
    candidates: dict[tuple, list[str]] = {}
    for b in _bindings(source["main"]):
        if isinstance(b.value, relax.Call):
            key = _call_key(b.value, _name)
            if key is not None:
                candidates.setdefault(key, []).append(_name(b.var))
    source_vars = {b.var: _name(b.var) for b in _bindings(source["main"])}
    held = _held(fused, source_vars, is_new)
    taken: set[str] = set()
    outer = {p: _name(p) for p in fused["main"].params}
    inner: dict = {}
    for b in _bindings(fused["main"]):
        v = b.value
        func = (fused[v.op] if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar)
                else None)
        if not (isinstance(func, relax.Function) and is_new(func)):
            outer[b.var] = _name(b.var)
            continue
        names = {p: outer.get(a) for p, a in zip(func.params, v.args)
                 if isinstance(a, relax.Var)}
        for ib in _bindings(func):
            if not isinstance(ib.value, relax.Call):
                continue
            key = _call_key(ib.value, names.get)
            found = candidates.get(key, []) if key is not None else []
            if not found:
                raise CompileError(
                    f"the composite {func.attrs['Composite']} called by {_name(b.var)} "
                    f"computes {_name(ib.var)}, which no binding of the module it was fused "
                    "from computes, so its operator cannot be named in the partition report")
            names[ib.var] = _pick(found, source_vars.get(ib.var), _name(ib.var), taken, held)
            # taken at once: a composite reading one tensor twice (MINIMUM(x, x)) holds two
            # equal bindings, each standing for its own source binding
            taken.add(names[ib.var])
        call, _ = _output_call(func)
        root = next((ib.var for ib in _bindings(func) if ib.value.same_as(call)), None)
        if root is None or root not in names:
            raise CompileError(f"the composite {func.attrs['Composite']} called by "
                               f"{_name(b.var)} has no output call to name")
        outer[b.var] = names[root]
        inner[b.var] = names
    return SourceNames(outer, inner)
