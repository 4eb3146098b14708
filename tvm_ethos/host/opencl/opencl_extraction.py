"""Extract TVM's OpenCL kernels and their launch recipe into a plain OpenCLModuleSpec.

The compile-time half of the GPU fallback (rfcs/0003): the apache-tvm 0.27 wheel generates
OpenCL C but links no OpenCL runtime, so the network builder (``tvm_ethos.pipeline.network_build``)
takes from TVM's lowered modules what PyOpenCL cannot know - the kernel source and, per kernel,
its argument order and launch sizes - and stores it as a serialisable
:class:`~tvm_ethos.runtime.opencl_device.OpenCLModuleSpec`, which
``tvm_ethos.runtime.opencl_device`` runs without TVM. See that module's docstring for where the
launch sizes come from and why operands are mapped back to parameters by buffer.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import numpy as np
import tvm
import tvm_ffi
from tvm import tirx
from tvm.s_tir import dlight as dl
from tvm.target import Target

from tvm_ethos.errors import TvmEthosError
from tvm_ethos.runtime.opencl_device import (
    FunctionSpec,
    KernelArg,
    KernelLaunch,
    OpenCLModuleSpec,
    ParamSpec,
    WorkspaceSpec,
)

#: The dlight rules TVM's generic GPU pipeline applies (relax/backend/gpu_generic), in order.
_DLIGHT_RULES = ("Matmul", "GEMV", "Reduction", "GeneralReduction", "Fallback")


class UnsupportedKernelError(TvmEthosError, ValueError):
    """TVM produced something this launcher cannot run (dynamic shapes, dynamic shared memory)."""


def extract_opencl(
    mod: Any, target: Any = "opencl", *, schedule: bool = True, tir_pipeline: str | None = None
) -> OpenCLModuleSpec:
    """Lower ``mod`` for an OpenCL target and return its kernels with their launch recipe.

    ``mod`` is a ``tirx.PrimFunc``, an ``IRModule`` of PrimFuncs, or an IRModule with Relax
    functions (those go through TVM's default GPU Relax pipeline first; only the resulting
    PrimFuncs are kept - calling them in order is the executor's job). Unscheduled PrimFuncs get
    TVM's default GPU schedules (the dlight rules of ``relax.backend.gpu_generic``); PrimFuncs
    marked ``tirx.is_scheduled`` are left alone, as dlight does.

    The steps are exactly those of ``tvm.tirx.build`` (bind target, default TIR pipeline,
    host/device split, device finalisation, ``target.build.opencl``), so the source equals what
    ``tvm.compile(mod, target="opencl")`` embeds; we stop before the host is compiled because the
    launch sizes are still readable there. ``tir_pipeline``: the name of a registered TIR
    pipeline to use instead of TVM's default (the compiler uses ``"tvm_ethos_gpu"``, which skips
    three passes that cost seconds on the integer kernels and change nothing for them).
    """
    build_mod = _tirx_build_module()
    tgt = Target(target) if not isinstance(target, Target) else target
    if tgt.kind.name != "opencl":
        raise UnsupportedKernelError(
            f"extract_opencl needs an opencl target, got {tgt.kind.name!r}"
        )

    if isinstance(mod, tirx.PrimFunc):
        symbol = mod.attrs.get("global_symbol", "main") if mod.attrs is not None else "main"
        mod = tvm.IRModule({str(symbol): mod})
    if any(isinstance(f, tvm.relax.Function) for f in mod.functions.values()):
        with tgt:
            mod = tvm.relax.get_default_pipeline(tgt)(mod)
    prims = {gv: f for gv, f in mod.functions.items() if isinstance(f, tirx.PrimFunc)}
    if not prims:
        raise UnsupportedKernelError("the module has no PrimFunc to run on OpenCL")
    mod = tvm.IRModule(prims, attrs=mod.attrs)
    if schedule:
        with tgt:
            mod = dl.ApplyDefaultSchedule(*(getattr(dl.gpu, r)() for r in _DLIGHT_RULES))(mod)

    originals = {gv.name_hint: f for gv, f in mod.functions.items()}
    host_target = Target("llvm" if tvm.runtime.enabled("llvm") else "c")
    bound_target = tgt.with_host(host_target)
    lowered = tirx.transform.BindTarget(bound_target)(mod)
    if tir_pipeline is None:
        pipeline, _finalize_host, finalize_device = tirx.get_default_tir_pipeline(bound_target)
    else:
        pipeline, _finalize_host, finalize_device = tirx.get_tir_pipeline(tir_pipeline)
    lowered = pipeline(lowered)
    host_mod, device_mods = build_mod.split_host_device_mods(lowered)

    sources: list[str] = []
    kernels: dict[str, Any] = {}
    for dev_target, dev_mod in device_mods.items():
        if len(dev_mod.functions) == 0:
            continue
        if dev_target.kind.name != "opencl":
            raise UnsupportedKernelError(f"device code for {dev_target.kind.name}, not opencl")
        finalized = finalize_device()(dev_mod)
        sources.append(build_mod.codegen_build(finalized, dev_target).inspect_source())
        for gv, f in dev_mod.functions.items():
            kernels[gv.name_hint] = f

    functions: dict[str, FunctionSpec] = {}
    for gv, host_func in host_mod.functions.items():
        name = gv.name_hint
        if name not in originals:
            continue  # host helpers the pipeline created
        functions[name] = _function_spec(
            name, originals[name], host_func, kernels, tvm, tirx, tvm_ffi
        )
    return OpenCLModuleSpec(source="\n".join(sources), functions=functions)


def _tirx_build_module() -> Any:
    """``tvm.tirx.build`` the module (the name is shadowed by the function of the same name)."""
    import importlib

    return importlib.import_module("tvm.tirx.build")


def _key(obj: Any) -> int:
    """Identity of a TVM node across Python wrappers (wrappers are recreated on each access)."""
    return int(obj.__chandle__())


def _function_spec(
    name: str, original: Any, host_func: Any, kernels: Mapping[str, Any], tvm: Any, tirx: Any,
    tvm_ffi: Any,
) -> FunctionSpec:
    """Read one lowered host function: its kernel calls, workspaces and the PrimFunc's params."""
    params: list[tuple[str, tuple[int, ...], str]] = []
    for p in original.params:
        ty = p.ty
        if not isinstance(ty, tirx.BufferType):
            raise UnsupportedKernelError(
                f"{name}: parameter {p.name} is a scalar; "
                "only static-shape tensor parameters are supported"
            )
        try:
            shape = tuple(int(d) for d in ty.shape)
        except TypeError as exc:
            raise UnsupportedKernelError(f"{name}: parameter {p.name} has a dynamic shape") from exc
        params.append((p.name, shape, str(ty.dtype)))
    param_names = {n for n, _, _ in params}

    decl_data: dict[int, Any] = {}  # buffer var -> physical data expression
    allocs: dict[int, tuple[str, int]] = {}
    calls: list[Any] = []
    depth = [0]
    # Exceptions raised inside FFI callbacks come back re-wrapped: collect, raise after the walk.
    problems: list[str] = []

    def on_call(node: Any, visitor: Any) -> None:
        if getattr(node.op, "name", None) == "tirx.call_ffi_kernel":
            if depth[0]:
                problems.append(
                    f"{name}: a kernel launch sits inside host control flow; only straight-line "
                    "launch sequences (static shapes) are supported"
                )
            calls.append(node)
        visitor.default_visit(node)

    def on_decl(node: Any, visitor: Any) -> None:
        decl_data[_key(node.buffer)] = node.data
        visitor.default_visit(node)

    def on_alloc(node: Any, visitor: Any) -> None:
        buf = node.buffer
        try:
            n = int(np.prod([int(d) for d in buf.shape], dtype=np.int64))
            allocs[_key(buf)] = (buf.name, n * np.dtype(str(buf.dtype)).itemsize)
        except TypeError:
            problems.append(f"{name}: workspace {buf.name} has a dynamic size")
        visitor.default_visit(node)

    def on_control(node: Any, visitor: Any) -> None:
        depth[0] += 1
        try:
            visitor.default_visit(node)
        finally:
            depth[0] -= 1

    tvm_ffi.structural_visit(
        host_func.body,
        [
            (tvm.ir.Call, on_call),
            (tirx.DeclBuffer, on_decl),
            (tirx.AllocBuffer, on_alloc),
            ((tirx.For, tirx.While, tirx.IfThenElse), on_control),
            (object, lambda n, v: v.default_visit(n)),
        ],
    )
    if problems:
        raise UnsupportedKernelError(problems[0])

    def resolve(expr: Any) -> KernelArg:
        """Follow buffer_data / DeclBuffer views back to a parameter or an allocation."""
        if isinstance(expr, tirx.IntImm):
            return KernelArg("scalar", value=int(expr.value), dtype=str(expr.dtype))
        if isinstance(expr, tirx.FloatImm):
            return KernelArg("scalar", value=float(expr.value), dtype=str(expr.dtype))
        seen = 0
        while isinstance(expr, tvm.ir.Call) and getattr(expr.op, "name", "") == "tirx.buffer_data":
            buf = expr.args[0]
            k = _key(buf)
            if k in allocs:
                return KernelArg("workspace", name=allocs[k][0])
            data = decl_data.get(k)
            if data is None:
                break
            if not (
                isinstance(data, tvm.ir.Call) and getattr(data.op, "name", "") == "tirx.buffer_data"
            ):
                # The outermost declaration: MakePackedAPI names it after the PrimFunc param.
                if buf.name in param_names:
                    return KernelArg("param", name=buf.name)
                break
            expr = data
            seen += 1
            if seen > 64:
                break
        raise UnsupportedKernelError(f"{name}: cannot map kernel operand {expr} to a parameter")

    written: set[str] = set()
    launches: list[KernelLaunch] = []
    for call in calls:
        symbol = str(call.args[0].value)
        tags = [str(t) for t in call.attrs.launch_params]
        thread_tags = [t for t in tags if t.startswith(("blockIdx.", "threadIdx."))]
        if "tirx.use_dyn_shared_memory" in tags:
            raise UnsupportedKernelError(f"{symbol}: dynamic shared memory is not supported")
        unknown = [t for t in tags if t not in thread_tags and not t.startswith("tirx.use_")]
        if unknown:
            raise UnsupportedKernelError(f"{symbol}: unknown launch tags {unknown}")
        operands = list(call.args[1 : len(call.args) - len(thread_tags)])
        values = list(call.args[len(call.args) - len(thread_tags) :])
        block = [1, 1, 1]
        thread = [1, 1, 1]
        used = 0
        for tag, v in zip(thread_tags, values):
            if not isinstance(v, tirx.IntImm):
                raise UnsupportedKernelError(f"{symbol}: launch extent {tag}={v} is not a constant")
            axis = "xyz".index(tag[-1])
            used = max(used, axis + 1)
            # As TVM's LaunchParamConfig: an extent of 0 (empty dynamic dim) still launches 1.
            (block if tag.startswith("blockIdx") else thread)[axis] = max(int(v.value), 1)
        used = max(used, 1)
        args = tuple(resolve(op) for op in operands)
        kernel = kernels.get(symbol)
        if kernel is None:
            raise UnsupportedKernelError(f"{name}: host calls unknown kernel {symbol}")
        if len(kernel.params) != len(args):
            raise UnsupportedKernelError(
                f"{symbol}: {len(args)} operands for {len(kernel.params)} kernel parameters"
            )
        typed = []
        for a, kp in zip(args, kernel.params):
            if a.kind == "scalar":
                a = dataclasses.replace(a, dtype=str(kp.dtype))
            typed.append(a)
        launches.append(
            KernelLaunch(
                kernel=symbol,
                args=tuple(typed),
                global_size=tuple(block[i] * thread[i] for i in range(used)),
                local_size=tuple(thread[i] for i in range(used)),
            )
        )
        for index in _stored_param_indices(kernel, tvm, tirx, tvm_ffi):
            if typed[index].kind == "param":
                written.add(typed[index].name)

    return FunctionSpec(
        name=name,
        params=tuple(ParamSpec(n, s, d, n in written) for n, s, d in params),
        launches=tuple(launches),
        workspaces=tuple(WorkspaceSpec(n, b) for n, b in allocs.values()),
    )


def _stored_param_indices(kernel: Any, tvm: Any, tirx: Any, tvm_ffi: Any) -> set[int]:
    """Indices of the kernel parameters some BufferStore writes through."""
    param_keys = {_key(p): i for i, p in enumerate(kernel.params)}
    decl_data: dict[int, Any] = {}
    stored: list[Any] = []

    def on_decl(node: Any, visitor: Any) -> None:
        decl_data[_key(node.buffer)] = node.data
        visitor.default_visit(node)

    def on_store(node: Any, visitor: Any) -> None:
        stored.append(node.buffer)
        visitor.default_visit(node)

    tvm_ffi.structural_visit(
        kernel.body,
        [
            (tirx.DeclBuffer, on_decl),
            (tirx.BufferStore, on_store),
            (object, lambda n, v: v.default_visit(n)),
        ],
    )
    out: set[int] = set()
    for buf in stored:
        expr: Any = decl_data.get(_key(buf))
        for _ in range(64):
            if expr is None:
                break
            if isinstance(expr, tvm.ir.Call) and getattr(expr.op, "name", "") == "tirx.buffer_data":
                expr = decl_data.get(_key(expr.args[0]))
                continue
            if _key(expr) in param_keys:
                out.add(param_keys[_key(expr)])
            break
    return out
