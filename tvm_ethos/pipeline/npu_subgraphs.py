"""The NPU subgraphs of a partitioned module: found by their ``Codegen`` attribute, lowered to
their unscheduled TE / PrimFunc (the planner and the stream generators read these), and given
their lowered constants as parameters (``attach_npu_constants``: int8 weights, int32 bias,
per-channel multipliers and shifts, passed as ``R.const`` at the call site, so that after
``RunCodegen`` the VM hands them to the emulator kernel)."""
from __future__ import annotations

import tvm
from tvm import relax

from tvm_ethos.backends.base import NpuBackend
from tvm_ethos.backends.registry import get_backend
from tvm_ethos.compute.subgraph import LoweredSubgraph, lower_function

NUM_INPUTS_ATTR = "tvm_ethos.num_inputs"


def tensor_ty(shape, dtype):
    return relax.TensorType([int(s) for s in shape], str(dtype))


def rebuild_main(mod, fn_rewrite):
    """Rebuild main's bindings, letting ``fn_rewrite(binding) -> new value | None`` replace
    values."""
    main = mod["main"]
    blocks = []
    for block in main.body.blocks:
        new_bindings = []
        for b in block.bindings:
            nv = fn_rewrite(b) if isinstance(b, relax.VarBinding) else None
            new_bindings.append(relax.VarBinding(b.var, nv) if nv is not None else b)
        if isinstance(block, relax.DataflowBlock):
            blocks.append(relax.DataflowBlock(new_bindings))
        else:
            blocks.append(relax.BindingBlock(new_bindings))
    body = relax.SeqExpr(blocks, main.body.body)
    new_main = relax.Function(main.params, body, main.ret_ty, main.is_pure, main.attrs)
    mod = mod.copy() if hasattr(mod, "copy") else mod
    mod["main"] = new_main
    return relax.transform.Normalize()(mod)


def npu_functions(mod, backend_ids=None):
    out = []
    for gv, f in mod.functions.items():
        if isinstance(f, relax.Function) and f.attrs is not None and "Codegen" in f.attrs:
            if backend_ids is None or str(f.attrs["Codegen"]) in backend_ids:
                out.append((gv, f))
    return out


def tflite_fc_rounding(f) -> bool:
    """Whether the emulator rounds an NPU subgraph's FULLY_CONNECTED as TFLite Micro does: its
    backend's ``NpuBackend.emulator_lowering``."""
    backend = get_backend(str(f.attrs["Codegen"]))
    return isinstance(backend, NpuBackend) and backend.emulator_lowering().tflite_fc_rounding


def fold_pads(f) -> bool:
    """Whether a PAD before a convolution is lowered as its padding in an NPU subgraph: its
    backend's ``NpuBackend.emulator_lowering``."""
    backend = get_backend(str(f.attrs["Codegen"]))
    return isinstance(backend, NpuBackend) and backend.emulator_lowering().fold_pads


def lower_npu_subgraphs(mod, backend_ids=None) -> dict[str, LoweredSubgraph]:
    """The unscheduled TE/PrimFunc of every NPU subgraph of a partitioned module, by symbol.

    This is the seam for a cascading scheduler: it can schedule these PrimFuncs (s_tir) before
    they are built.
    """
    out = {}
    for gv, f in npu_functions(mod, backend_ids):
        sym = str(f.attrs["global_symbol"])
        out[sym] = lower_function(f, sym, tflite_fc_rounding=tflite_fc_rounding(f),
                                  fold_pads=fold_pads(f))
    return out


def attach_npu_constants(mod, backend_ids=None, lowered_out: dict | None = None,
                         with_primfunc: bool = True):
    """Give every NPU subgraph its lowered constants as parameters and call-site arguments.

    ``lowered_out`` (optional) receives each subgraph's LoweredSubgraph by symbol: the same one
    ``lower_npu_subgraphs`` gives for the new function (its body is unchanged); without
    ``with_primfunc`` those carry no PrimFunc (``lower_function``)."""
    consts_by_gv = {}
    for gv, f in npu_functions(mod, backend_ids):
        if f.attrs is not None and NUM_INPUTS_ATTR in f.attrs:
            continue
        sym = str(f.attrs["global_symbol"])
        lw = lower_function(f, sym, num_inputs=len(f.params),
                            tflite_fc_rounding=tflite_fc_rounding(f),
                            with_primfunc=with_primfunc, fold_pads=fold_pads(f))
        if lowered_out is not None:
            lowered_out[sym] = lw
        extra = [
            relax.Var(f"npu_const{i}", tensor_ty(a.shape, a.dtype))
            for i, a in enumerate(lw.consts)
        ]
        nf = relax.Function(list(f.params) + extra, f.body, f.ret_ty, f.is_pure, f.attrs)
        nf = nf.with_attr(NUM_INPUTS_ATTR, len(f.params))
        # a new GlobalVar (typed by the BlockBuilder): the old one carries the old signature
        bb = relax.BlockBuilder(mod)
        ngv = bb.add_func(nf, sym)
        mod = bb.get()
        del mod[gv]
        consts_by_gv[gv] = (ngv, lw.consts)

    def rewrite(b):
        v = b.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar):
            for gv, (ngv, consts) in consts_by_gv.items():
                if gv.same_as(v.op):
                    return relax.Call(
                        ngv, list(v.args) + [relax.const(c) for c in consts], v.attrs, v.ty_args
                    )
        return None

    return rebuild_main(mod, rewrite)
