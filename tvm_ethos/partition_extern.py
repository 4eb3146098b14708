"""Composite functions that call a packed function (the importer's int8 LSTM,
``compute.lstm.PACKED_NAME``) keep that function inside them.

``FuseOpsByPattern`` lifts every leaf of a matched region that is no constant into a
parameter of the composite, an ``ExternFunc`` too: the composite would take a callable
argument, which neither the partition report's naming (``partition_op_ids``) nor an NPU
subgraph's lowering (one TE placeholder per tensor parameter) reads. Binding it back makes
the composite a function of its tensors only, as every other one is."""
from __future__ import annotations

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


def unclaimed_lstm_refusal(mod: tvm.IRModule, targets: str, npu: str | None = None) -> None:
    """UnsupportedModelError naming the first int8 LSTM call ``main`` still holds after the
    partition for ``targets`` (``npu``: after that NPU's pass, which must take it, as TVM's
    ``MergeCompositeFunctions`` cannot pass over the call): only the Ethos-U runs one, no
    host has its kernel."""
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and v.args and isinstance(v.args[0], relax.ExternFunc) \
                    and str(v.args[0].global_symbol) == LSTM_PACKED_NAME:
                where = (f"{npu}, the first NPU of '{targets}', does not take it"
                         if npu else f"no target of '{targets}' takes it")
                raise UnsupportedModelError(
                    f"operator {b.var.name} (UNIDIRECTIONAL_SEQUENCE_LSTM): {where}: no host "
                    "target (llvm, opencl) has a quantized LSTM kernel; compile for "
                    "ethos-u,llvm (its NPU runs the int8 LSTM) or for ethos-u "
                    "(= ethos-u,tflite-micro)")
