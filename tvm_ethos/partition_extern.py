"""The importer's int8 LSTM (a call of the packed function ``compute.lstm.PACKED_NAME``)
through the partition.

``FuseOpsByPattern`` lifts every leaf of a matched region that is no constant into a
parameter of the composite, an ``ExternFunc`` too: the composite would take a callable
argument, which neither the partition report's naming (``partition_op_ids``) nor an NPU
subgraph's lowering (one TE placeholder per tensor parameter) reads. Binding it back makes
the composite a function of its tensors only, as every other one is. TVM's
``MergeCompositeFunctions`` cannot pass over an unfused call of an ``ExternFunc``: the pass
of an NPU that does not take the LSTM sees it hidden in a function of its own; where no
target takes it, it is refused in one line."""
from __future__ import annotations

from typing import NamedTuple

import tvm
from tvm import relax

from tvm_ethos.compute.lstm import PACKED_NAME as LSTM_PACKED_NAME
from tvm_ethos.errors import UnsupportedModelError


def extern_funcs_inlined(mod: tvm.IRModule) -> tvm.IRModule:
    """``mod`` with every composite parameter that ``main`` passes an ``ExternFunc`` bound to
    it (the parameter and the argument dropped); ``mod`` itself where there is none."""
    externs: dict = {}   # composite GlobalVar -> {parameter index: ExternFunc}
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if not (isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar)):
                continue
            func = mod[v.op]
            if not (isinstance(func, relax.Function) and func.attrs is not None
                    and "Composite" in func.attrs):
                continue
            found = {k: a for k, a in enumerate(v.args) if isinstance(a, relax.ExternFunc)}
            if found:
                externs[v.op] = found
    if not externs:
        return mod
    # new GlobalVars (a GlobalVar carries its function's signature), made by a BlockBuilder
    bb = relax.BlockBuilder(tvm.IRModule(
        {gv: f for gv, f in mod.functions.items() if gv not in externs}, attrs=mod.attrs))
    renamed = {}
    for gv, found in externs.items():
        func = mod[gv]
        renamed[gv] = bb.add_func(func.bind_params({func.params[k]: e
                                                     for k, e in found.items()}), gv.name_hint)
    out = bb.get()

    @relax.expr_functor.mutator
    class _DropExternArgs(relax.PyExprMutator):
        def visit_call_(self, call):
            new = super().visit_call_(call)
            found = externs.get(call.op) if isinstance(call.op, tvm.ir.GlobalVar) else None
            if not found:
                return new
            args = [a for k, a in enumerate(new.args) if k not in found]
            return relax.Call(renamed[call.op], args, new.attrs)

    out["main"] = _DropExternArgs(out).visit_expr(mod["main"])
    return out


class HiddenLstm(NamedTuple):
    """An LSTM call hidden from an NPU's pass: its packed function and constant operands
    (the sequence is the hiding call's one argument) and its output type."""

    extern: relax.ExternFunc
    constants: tuple
    out_type: object


def _is_lstm_call(v) -> bool:
    return (isinstance(v, relax.Call) and len(v.args) == 2
            and isinstance(v.args[0], relax.ExternFunc)
            and str(v.args[0].global_symbol) == LSTM_PACKED_NAME)


def lstm_calls_hidden(mod: tvm.IRModule) -> tuple[tvm.IRModule, dict]:
    """``mod`` with every LSTM call of ``main`` a call of a function of its own (the call
    inside), for the pass of an NPU that does not take it: TVM's
    ``MergeCompositeFunctions`` cannot pass over an ``ExternFunc``, a later NPU of the
    target list may take it (:func:`lstm_calls_revealed` puts it back); the hiding
    functions by GlobalVar."""
    calls = [b for block in mod["main"].body.blocks for b in block.bindings
             if _is_lstm_call(b.value)]
    if not calls:
        return mod, {}
    bb = relax.BlockBuilder(mod)
    hidden: dict = {}
    replace: dict = {}
    for k, b in enumerate(calls):
        fields = list(b.value.args[1].fields)
        x = relax.Var("sequence", fields[0].ty)
        inner = relax.call_dps_packed(b.value.args[0], [x] + fields[1:], b.value.ty)
        gv = bb.add_func(relax.Function([x], inner, b.value.ty, is_pure=True),
                         f"tvm_ethos_hidden_lstm{k}")
        hidden[gv] = HiddenLstm(b.value.args[0], tuple(fields[1:]), b.value.ty)
        replace[b.var] = relax.Call(gv, [fields[0]])
    out = bb.get()
    out["main"] = _with_values(out, mod["main"], replace)
    return out, hidden


def lstm_calls_revealed(mod: tvm.IRModule, hidden: dict) -> tvm.IRModule:
    """``mod`` with the calls :func:`lstm_calls_hidden` made the LSTM calls again (on the
    sequence each now reads) and the hiding functions gone."""
    if not hidden:
        return mod
    replace: dict = {}
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.op in hidden:
                h = hidden[v.op]
                replace[b.var] = relax.call_dps_packed(h.extern, [v.args[0], *h.constants],
                                                       h.out_type)
    out = tvm.IRModule({gv: f for gv, f in mod.functions.items()
                        if gv not in hidden and gv.name_hint != "main"}, attrs=mod.attrs)
    out["main"] = _with_values(out, mod["main"], replace)
    return out


def _with_values(mod: tvm.IRModule, main: relax.Function, replace: dict) -> relax.Function:
    """``main`` with the bindings of the variables in ``replace`` given those values."""
    @relax.expr_functor.mutator
    class _Rebind(relax.PyExprMutator):
        def visit_var_binding_(self, binding):
            if binding.var in replace:
                value = self.builder_.normalize(self.visit_expr(replace[binding.var]))
                self.builder_.emit_normalized(relax.VarBinding(binding.var, value))
                return
            super().visit_var_binding_(binding)

    return _Rebind(mod).visit_expr(main)


def unclaimed_lstm_refusal(mod: tvm.IRModule, targets: str, npu: str | None = None) -> None:
    """UnsupportedModelError naming the first int8 LSTM call ``main`` still holds after the
    partition for ``targets`` (``npu``: after the pass of that NPU, which takes LSTMs, as
    TVM's ``MergeCompositeFunctions`` cannot pass over the call): only the Ethos-U runs
    one, no host has its kernel."""
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.args and isinstance(v.args[0], relax.ExternFunc) \
                    and str(v.args[0].global_symbol) == LSTM_PACKED_NAME:
                where = (f"{npu} of '{targets}' left it out of its subgraphs"
                         if npu else f"no target of '{targets}' takes it")
                raise UnsupportedModelError(
                    f"operator {b.var.name} (UNIDIRECTIONAL_SEQUENCE_LSTM): {where}: no host "
                    "target (llvm, opencl) has a quantized LSTM kernel; compile for "
                    "ethos-u,llvm (its NPU runs the int8 LSTM) or for ethos-u "
                    "(= ethos-u,tflite-micro)")
