"""From a partitioned module to code: NPU subgraphs via ``relax.ext.<id>``, host kernels via
call_tir.

* ``relax.ext.<id>`` (registered per NPU backend): lowers every subgraph to its TE graph
  (``lower_function``), builds all of them into one llvm module (the NPU emulator), and returns
  it; ``RunCodegen`` turns each call into ``R.call_dps_packed(<symbol>, ...)``.
* ``lower_host_composites``: each host composite becomes ``R.call_tir`` of the same integer
  kernel, compiled by TVM's pipeline with the rest of the host code.
"""
from __future__ import annotations

import contextlib

import tvm
from tvm import relax

from tvm_ethos.backends.registry import get_registry
from tvm_ethos.compute.subgraph import lower_function
from tvm_ethos.emulator import stripe_kernels
from tvm_ethos.errors import CompileError
from tvm_ethos.host.cpu import cpu_schedule, x86_avx2, x86_dot
from tvm_ethos.host.cpu.cpu_tir_pipeline import PIPELINE_NAME
from tvm_ethos.pipeline.npu_subgraphs import (
    NUM_INPUTS_ATTR,
    attach_npu_constants,
    fold_pads,
    rebuild_main,
    tensor_ty,
    tflite_fc_rounding,
)


def host_kernels_vnni(tl) -> bool:
    """Whether the host kernels are built for VNNI: the llvm host target has it and no OpenCL
    device shares the kernels (an OpenCL build takes the same PrimFuncs)."""
    return "opencl" not in tl.ids and x86_dot.has_vnni(cpu_schedule.host_target())


def host_kernels_avx2(tl) -> bool:
    """Whether the host kernels are built for AVX2's multiply-add (``x86_avx2``): the llvm
    host target has AVX2 but no VNNI, and no OpenCL device shares the kernels."""
    host = cpu_schedule.host_target()
    return "opencl" not in tl.ids and x86_avx2.has_avx2(host) and not x86_dot.has_vnni(host)


def lower_host_composites(mod, host_id: str, vnni: bool = False, avx2: bool = False):
    """Replace each host composite call by ``R.call_tir`` of its exact integer kernel
    (``vnni``: the kernels run only on an llvm host with AVX-512 VNNI; ``avx2``: on one with
    AVX2; ``te_ops.lower_qop``)."""
    replace = {}
    prefix = f"{host_id}."
    for gv, f in list(mod.functions.items()):
        if not isinstance(f, relax.Function) or f.attrs is None or "Composite" not in f.attrs:
            continue
        if not str(f.attrs["Composite"]).startswith(prefix):
            continue
        kind = str(f.attrs["Composite"]).split(".", 1)[1]
        name = f"tvm_ethos_{host_id.replace('-', '_')}_k{len(replace)}_{kind}"
        lw = lower_function(f, name, num_inputs=len(f.params), vnni=vnni, avx2=avx2)
        prim = lw.primfunc.with_attr("global_symbol", name)
        pgv = tvm.ir.GlobalVar(name)
        replace[gv] = (pgv, prim, lw)
    if not replace:
        return mod
    bb = relax.BlockBuilder(mod)
    for gv, (pgv, prim, lw) in list(replace.items()):
        replace[gv] = (bb.add_func(prim, pgv.name_hint), prim, lw)
    mod = bb.get()

    def rewrite(b):
        v = b.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.GlobalVar):
            for gv, (pgv, prim, lw) in replace.items():
                if gv.same_as(v.op):
                    outs = [tensor_ty([int(s) for s in o.shape], str(o.dtype)) for o in lw.outputs]
                    args = list(v.args) + [relax.const(c) for c in lw.consts]
                    return relax.call_tir(
                        pgv, relax.Tuple(args), outs[0] if len(outs) == 1 else outs
                    )
        return None

    mod = rebuild_main(mod, rewrite)
    for gv in replace:
        del mod[gv]
    return mod


#: Scheduled PrimFuncs of the NPU subgraphs being compiled, by symbol (the cascading
#: scheduler's output, tvm_ethos/pipeline/plan.py); set around RunCodegen only.
_SCHEDULED: dict = {}


@contextlib.contextmanager
def scheduled_primfuncs(funcs: dict):
    """Let ``relax.ext.<npu>`` build these scheduled PrimFuncs instead of the unscheduled ones."""
    _SCHEDULED.clear()
    _SCHEDULED.update(funcs)
    try:
        yield
    finally:
        _SCHEDULED.clear()


#: whether ``relax.ext.<npu>`` builds the emulator kernels (:func:`without_emulator` clears it)
_BUILD_EMULATOR = [True]


@contextlib.contextmanager
def without_emulator():
    """``RunCodegen`` rewrites the NPU calls but builds no emulator library: for an output
    that holds the command streams only (a ``.tflite``), where the library would be built and
    thrown away."""
    _BUILD_EMULATOR.append(False)
    try:
        yield
    finally:
        _BUILD_EMULATOR.pop()


def _npu_ext(functions, options, constant_names):
    """``relax.ext.<npu>``: build the emulator kernels of the given subgraph functions."""
    if not functions or not _BUILD_EMULATOR[-1]:
        return []
    prims = {}
    for f in functions:
        sym = str(f.attrs["global_symbol"])
        if NUM_INPUTS_ATTR not in f.attrs:
            # its call sites pass no constants: the kernel built from it would read past its
            # arguments
            raise CompileError(
                f"NPU subgraph {sym} has no constants attached, so RunCodegen cannot build it; "
                "use tvm_ethos.partition_for_ethos_u / partition_for_ethos_n / partition_for, "
                "which plan, schedule and build the NPU subgraphs before tvm.compile")
        if sym in _SCHEDULED:  # planned and scheduled from this very function (pipeline.plan)
            prims[sym] = stripe_kernels.schedule_stripes(_SCHEDULED[sym])
        else:
            prims[sym] = lower_function(f, sym, tflite_fc_rounding=tflite_fc_rounding(f),
                                        fold_pads=fold_pads(f)).primfunc
    irmod = tvm.IRModule(prims)
    try:
        lib = tvm.tirx.build(irmod, target=tvm.target.Target(cpu_schedule.host_target()),
                             pipeline=PIPELINE_NAME)
    except Exception as err:  # pragma: no cover - a bug, not a user error
        raise CompileError(f"building the NPU emulator kernels failed: {err}") from err
    return [lib]


def run_npu_codegen(mod, backend_options: dict):
    """``attach_npu_constants`` then ``RunCodegen`` for the NPU backends in ``backend_options``."""
    reg = get_registry()
    for bid in backend_options:
        cg = reg.get(bid).codegen_factory()
        if cg is not None:
            cg.register()
    mod = attach_npu_constants(mod, set(backend_options))
    opts = {
        bid: {k: v for k, v in o.items() if isinstance(v, (str, int, float, bool))}
        for bid, o in backend_options.items()
    }
    return relax.transform.RunCodegen(opts)(mod)


