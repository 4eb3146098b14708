"""From a partitioned module to code: NPU subgraphs via ``relax.ext.<id>``, host kernels via
call_tir.

* ``attach_npu_constants``: each NPU subgraph function gets its lowered constants (int8 weights,
  int32 bias, per-channel multipliers and shifts) as extra parameters, passed as ``R.const`` at
  the call site, so that after ``RunCodegen`` the VM hands them to the emulator kernel.
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

from tvm_ethos.compute.subgraph import LoweredSubgraph, lower_function
from tvm_ethos.errors import CompileError
from tvm_ethos.host.cpu.cpu_tir_pipeline import PIPELINE_NAME
from tvm_ethos.stages import stage

NUM_INPUTS_ATTR = "tvm_ethos.num_inputs"


def _tensor_ty(shape, dtype):
    return relax.TensorType([int(s) for s in shape], str(dtype))


def _rebuild_main(mod, fn_rewrite):
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
    from tvm_ethos.backends.base import NpuBackend
    from tvm_ethos.backends.registry import get_backend

    backend = get_backend(str(f.attrs["Codegen"]))
    return isinstance(backend, NpuBackend) and backend.emulator_lowering().tflite_fc_rounding


def lower_npu_subgraphs(mod, backend_ids=None) -> dict[str, LoweredSubgraph]:
    """The unscheduled TE/PrimFunc of every NPU subgraph of a partitioned module, by symbol.

    This is the seam for a cascading scheduler: it can schedule these PrimFuncs (s_tir) before
    they are built.
    """
    out = {}
    for gv, f in npu_functions(mod, backend_ids):
        sym = str(f.attrs["global_symbol"])
        out[sym] = lower_function(f, sym, tflite_fc_rounding=tflite_fc_rounding(f))
    return out


def attach_npu_constants(mod, backend_ids=None, lowered_out: dict | None = None):
    """Give every NPU subgraph its lowered constants as parameters and call-site arguments.

    ``lowered_out`` (optional) receives each subgraph's LoweredSubgraph by symbol: the same one
    ``lower_npu_subgraphs`` gives for the new function (its body is unchanged)."""
    consts_by_gv = {}
    for gv, f in npu_functions(mod, backend_ids):
        if f.attrs is not None and NUM_INPUTS_ATTR in f.attrs:
            continue
        sym = str(f.attrs["global_symbol"])
        lw = lower_function(f, sym, num_inputs=len(f.params),
                            tflite_fc_rounding=tflite_fc_rounding(f))
        if lowered_out is not None:
            lowered_out[sym] = lw
        extra = [
            relax.Var(f"npu_const{i}", _tensor_ty(a.shape, a.dtype))
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

    return _rebuild_main(mod, rewrite)


def host_kernels_vnni(tl) -> bool:
    """Whether the host kernels are built for VNNI: the llvm host target has it and no OpenCL
    device shares the kernels (an OpenCL build takes the same PrimFuncs)."""
    from tvm_ethos.host.cpu.cpu_schedule import host_target
    from tvm_ethos.host.cpu.x86_dot import has_vnni

    return "opencl" not in tl.ids and has_vnni(host_target())


def host_kernels_avx2(tl) -> bool:
    """Whether the host kernels are built for AVX2's multiply-add (``x86_avx2``): the llvm
    host target has AVX2 but no VNNI, and no OpenCL device shares the kernels."""
    from tvm_ethos.host.cpu.cpu_schedule import host_target
    from tvm_ethos.host.cpu.x86_avx2 import has_avx2
    from tvm_ethos.host.cpu.x86_dot import has_vnni

    host = host_target()
    return "opencl" not in tl.ids and has_avx2(host) and not has_vnni(host)


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
                    outs = [_tensor_ty([int(s) for s in o.shape], str(o.dtype)) for o in lw.outputs]
                    args = list(v.args) + [relax.const(c) for c in lw.consts]
                    return relax.call_tir(
                        pgv, relax.Tuple(args), outs[0] if len(outs) == 1 else outs
                    )
        return None

    mod = _rebuild_main(mod, rewrite)
    for gv in replace:
        del mod[gv]
    return mod


#: Scheduled PrimFuncs of the NPU subgraphs being compiled, by symbol (the cascading
#: scheduler's output, tvm_ethos/pipeline/planning.py); set around RunCodegen only.
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
    from tvm_ethos.emulator.stripe_kernels import schedule_stripes
    from tvm_ethos.host.cpu.cpu_schedule import host_target

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
        if sym in _SCHEDULED:  # planned and scheduled from this very function (cascade.py)
            prims[sym] = schedule_stripes(_SCHEDULED[sym])
        else:
            prims[sym] = lower_function(f, sym, tflite_fc_rounding=tflite_fc_rounding(f)).primfunc
    irmod = tvm.IRModule(prims)
    try:
        lib = tvm.tirx.build(irmod, target=tvm.target.Target(host_target()), pipeline=PIPELINE_NAME)
    except Exception as err:  # pragma: no cover - a bug, not a user error
        raise CompileError(f"building the NPU emulator kernels failed: {err}") from err
    return [lib]


def run_npu_codegen(mod, backend_options: dict):
    """``attach_npu_constants`` then ``RunCodegen`` for the NPU backends in ``backend_options``."""
    from tvm_ethos.backends.registry import get_registry

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


def command_streams(pmod, tl, lowered: dict, plan_report: dict,
                    proposals: dict | None = None) -> dict:
    """Every NPU subgraph's own device code where its backend makes one
    (``Backend.command_stream``: Ethos-U register command streams), by symbol. Each one is
    run once on the functional model (zero inputs) so the plan report can show what the
    stream touches beside what the plan predicts; a subgraph the generator cannot express
    keeps the emulator, and the report says why (``plan_report["streams"]``). ``proposals``:
    ``(match, proposal, device)`` per planned symbol, the schedule a stream executes."""
    from tvm_ethos.backends.base import NpuBackend
    from tvm_ethos.backends.registry import get_registry

    reg = get_registry()
    payloads: dict = {}
    streams: dict = {}
    for spec in tl.accelerators:
        backend = reg.get(spec.backend_id)
        if not isinstance(backend, NpuBackend):
            continue
        for _gv, f in npu_functions(pmod, {spec.backend_id}):
            sym = str(f.attrs["global_symbol"])
            planned = plan_report.get("subgraphs", {}).get(sym) or {}
            try:
                payload = backend.command_stream(lowered[sym], spec.options,
                                                 (proposals or {}).get(sym))
                if payload is None:
                    continue
                entry = backend.stream_report(payload, planned.get("peak_memory_bytes"))
            except CompileError as err:
                streams[sym] = {"generated": False, "reason": str(err)}
                continue
            payloads[sym] = payload
            # a stream generated from the plan executes its schedule within the plan's peak;
            # working memory of an operator lowered to several NPU operations (SOFTMAX's
            # int32 intermediates) is not in the plan's memory model: where the plan leaves
            # no room for it, or the stream is layer by layer, no claim is made
            entry["realizes_plan"] = entry.get("schedule") == "plan" or (
                realizes_plan(planned) and not entry.get("work_bytes"))
            check_stream_memory(sym, entry)
            streams[sym] = entry
    if streams:
        plan_report["streams"] = streams
    return payloads


def realizes_plan(planned: dict) -> bool:
    """Whether a layer-by-layer stream is the planned schedule itself: every Plan one Part
    over its whole tensors (one stripe), no buffer of its own in SRAM (a staged input, weights
    copied there)."""
    plans = planned.get("plans") or []
    return bool(plans) and all(len(p["parts"]) == 1 and p["stripes"] == 1 and not p["weights"]
                               and p["planned_bytes"] == 0 for p in plans)


def check_stream_memory(sym: str, entry: dict) -> None:
    """A stream that realizes its plan must touch exactly the SRAM the plan predicts, as the
    scheduled TIR must allocate it (``schedule.check``)."""
    from tvm_ethos.emulator.schedule import MemoryMismatchError

    touched = entry.get("sram_high_water_bytes", entry.get("scratch_high_water_bytes"))
    planned = entry.get("planned_peak_bytes")
    # a planned arena may end with reserved weight bytes the stream does not touch (reported)
    reserved = entry.get("untouched_top_bytes") or 0
    if entry.get("realizes_plan") and touched is not None and touched + reserved != planned:
        above = f" below {reserved:,} B of reserved weights" if reserved else ""
        raise MemoryMismatchError(
            f"NPU subgraph {sym}: its command stream touches {touched:,} B of SRAM on the "
            f"functional model{above}, its plan predicts a peak of {planned:,} B; the stream "
            "generator's arena layout and the planner's memory model disagree")


def offload(pmod, tl, plan_opts, devices: dict, payloads_out: dict | None = None,
            emulator: bool = True):
    """A partitioned module made ready for a plain ``tvm.compile``: every NPU subgraph planned,
    scheduled and built by ``relax.ext.<npu>`` (its calls become ``call_dps_packed`` of the
    emulator kernels, kept in the module's ``external_mods``), every host composite a
    ``call_tir`` of its exact kernel. Returns ``(module, plan report)``; ``tvm_ethos.compile``
    and ``partition_for_*`` share it, so both build the same kernels. ``payloads_out``, when
    given, receives the subgraphs' command streams (:func:`command_streams`). ``emulator``:
    False builds no emulator kernels (:func:`without_emulator`)."""
    from tvm_ethos.pipeline import planning as cascade

    npu_opts = {t.backend_id: t.options for t in tl.accelerators}
    lowered: dict = {}
    with stage("lower"):
        pmod = attach_npu_constants(pmod, set(npu_opts), lowered_out=lowered)
    proposals: dict = {}
    with stage("plan"):
        plan_report, scheduled = cascade.plan_subgraphs(pmod, None, tl, plan_opts, devices,
                                                        lowered, proposals)
    if payloads_out is not None:
        with stage("streams"):
            payloads_out.update(command_streams(pmod, tl, lowered, plan_report, proposals))
    with stage("emulator" if emulator else "npu calls"), scheduled_primfuncs(scheduled), (
            contextlib.nullcontext() if emulator else without_emulator()):
        pmod = run_npu_codegen(pmod, npu_opts)
    with stage("host kernels"):
        return (lower_host_composites(pmod, tl.host.backend_id, host_kernels_vnni(tl),
                                      host_kernels_avx2(tl)), plan_report)
