"""Split a partitioned main into backend subgraphs, and build what each of them runs.

After partitioning and NPU codegen, ``main`` is a sequence of bindings: NPU subgraph calls
(``R.call_dps_packed`` to an emulator kernel), exact host kernels (``R.call_tir``) and plain
Relax operators (the host's TVM-lowered fallback). The executor needs that sequence as
*subgraphs*, each on one backend, so that every tensor crossing from one backend to another is
an explicit edge (rfcs/0003).

1. :func:`assign_backends` gives each binding a backend: an NPU call its NPU (from the partition
   report); host kernels and Relax operators the host target, except the operator kinds in the
   opencl target's ``cpu_ops`` option, which go to the CPU (llvm: the GPU "rejects" them, as in
   Arm NN's GpuAcc -> CpuAcc preference list). Glue (quantize / dequantize) follows the operator
   it belongs to.
2. :func:`split_main`: consecutive host bindings on one backend become one Relax function
   (``tvm_ethos_seg<n>_<backend>``); ``main`` calls them in order, between the NPU calls. So the
   whole network is still one Relax program: the Relax VM executable (``CompiledModel.executable``)
   runs it as before.
3. :func:`legalize` runs TVM's legalization and fusion inside each segment function (never
   across: a fused kernel never spans two backends).
4. :func:`read_program` reads the legalized module into a
   :class:`~tvm_ethos.runtime.program.NetworkProgram`: tensors, constants, subgraphs and, per
   subgraph, its kernel calls in order.
5. :func:`build_network` compiles: one llvm library (emulator kernels, CPU kernels, the VM's
   ``main``) and, where a subgraph runs on OpenCL, the OpenCL C of its kernels with TVM's default
   GPU schedules (dlight) and their launch recipe (``extract_opencl``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import tvm
from tvm import relax

from ethos_arch.ops import Op
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.compute.subgraph import vars_read
from tvm_ethos.errors import CompileError
from tvm_ethos.host.cpu import cpu_schedule
from tvm_ethos.host.opencl import gpu_schedule, opencl_extraction
from tvm_ethos.host.opencl.gpu_tir_pipeline import GPU_PIPELINE_NAME
from tvm_ethos.runtime.program import NetworkProgram, Step, SubgraphSpec, TensorSpec

#: The CPU host backend that takes the operators a GPU host leaves to the CPU (``cpu_ops``).
CPU_BACKEND = "llvm"
GLUE_OPS = ("relax.quantize", "relax.dequantize")
SEGMENT_PREFIX = "tvm_ethos_seg"
_KERNEL_NAME = re.compile(r"^tvm_ethos_.+?_k\d+_(.+)$")


def _key(obj) -> int:
    return int(obj.__chandle__())


def _bindings(func):
    out = []
    for block in func.body.blocks:
        out.extend(block.bindings)
    return out


def _vars_in(expr) -> list:
    """Relax variables an expression reads (in order, without duplicates)."""
    seen, out = set(), []
    for v in vars_read(expr):
        if _key(v) not in seen:
            seen.add(_key(v))
            out.append(v)
    return out


def _substitute(expr, vmap: dict):
    """``expr`` with variables replaced by ``vmap[key(var)]`` (calls, tuples, projections)."""
    if isinstance(expr, relax.Var):
        return vmap.get(_key(expr), expr)
    if isinstance(expr, relax.Call):
        return relax.Call(
            expr.op, [_substitute(a, vmap) for a in expr.args], expr.attrs, expr.ty_args
        )
    if isinstance(expr, relax.Tuple):
        return relax.Tuple([_substitute(f, vmap) for f in expr.fields])
    if isinstance(expr, relax.TupleGetItem):
        return relax.TupleGetItem(_substitute(expr.tuple_value, vmap), expr.index)
    return expr


def _op_name(value) -> str | None:
    if isinstance(value, relax.Call) and isinstance(value.op, tvm.ir.Op):
        return value.op.name
    return None


def _normalise_ops(cpu_ops) -> set[str]:
    """``cpu_ops`` as a set of lower-case names: ``"softmax+conv2d"``, a list, or a tuple."""
    if cpu_ops is None or cpu_ops == "":
        return set()
    if isinstance(cpu_ops, str):
        items = re.split(r"[+;\s]+", cpu_ops)
    else:
        items = list(cpu_ops)
    return {str(i).strip().lower() for i in items if str(i).strip()}


def _matches(kind: str, names: set[str]) -> bool:
    """``kind`` (a composite's kind or a Relax operator's name) is named in ``names``, by
    itself or by the TFLite operator its :class:`Op` stands for."""
    try:
        tflite = Op(kind).tflite_name
    except ValueError:  # a Relax operator outside the vocabulary: its own name only
        tflite = kind
    return kind.lower() in names or tflite.lower() in names


@dataclass
class Assignment:
    """The backend of every binding of ``main`` (None: glue that stays in main)."""

    bindings: list
    backends: list  # str | None per binding
    npu: list  # bool per binding
    npu_backends: set = field(default_factory=set)


def assign_backends(mod, report, host_id: str, cpu_ops=None) -> Assignment:
    """Give every binding of ``mod["main"]`` its backend (see the module docstring)."""
    names = _normalise_ops(cpu_ops)
    sym2backend = {
        op.subgraph: op.placed_on for op in (report.operators if report else []) if op.via == "npu"
    }
    binds = _bindings(mod["main"])
    n = len(binds)
    backends: list = [None] * n
    is_npu = [False] * n
    glue: list[int] = []
    defined_at = {}
    for i, b in enumerate(binds):
        defined_at[_key(b.var)] = i
        v = b.value
        op = _op_name(v)
        if op == "relax.call_dps_packed":
            sym = str(v.args[0].global_symbol)
            if sym not in sym2backend:
                raise CompileError(f"NPU call {sym} has no backend in the partition report")
            backends[i], is_npu[i] = sym2backend[sym], True
        elif op == "relax.call_tir":
            m = _KERNEL_NAME.match(v.args[0].name_hint)
            kind = m.group(1) if m else v.args[0].name_hint
            backends[i] = CPU_BACKEND if names and _matches(kind, names) else host_id
        elif op in GLUE_OPS:
            glue.append(i)
        elif op is not None:
            kind = op.replace("relax.nn.", "").replace("relax.", "")
            backends[i] = CPU_BACKEND if names and _matches(kind, names) else host_id
        else:  # tuples, projections, aliases: decided below
            glue.append(i)
    users: dict[int, list[int]] = {}
    for i, b in enumerate(binds):
        for var in _vars_in(b.value):
            j = defined_at.get(_key(var))
            if j is not None:
                users.setdefault(j, []).append(i)

    def producer_backend(i):
        for var in _vars_in(binds[i].value):
            j = defined_at.get(_key(var))
            if j is not None and backends[j] is not None and not is_npu[j]:
                return backends[j]
        return None

    def consumer_backend(i, depth=0):
        for j in users.get(i, []):
            if backends[j] is not None and not is_npu[j]:
                return backends[j]
            if backends[j] is None and depth < 8:
                got = consumer_backend(j, depth + 1)
                if got is not None:
                    return got
        return None

    # quantize follows its producer, dequantize its consumer; tuples, projections and aliases
    # stay in main (split_main moves one into a segment when it sits inside that segment's run)
    for _ in range(2):
        for i in glue:
            if backends[i] is not None:
                continue
            op = _op_name(binds[i].value)
            if op == "relax.dequantize":
                backends[i] = consumer_backend(i) or producer_backend(i) or host_id
            elif op == "relax.quantize":
                backends[i] = producer_backend(i) or consumer_backend(i) or host_id
    return Assignment(binds, backends, is_npu, set(sym2backend.values()))


@dataclass
class Segment:
    name: str
    backend: str
    indices: list


def split_main(mod, assignment: Assignment):
    """Move each run of consecutive host bindings on one backend into its own Relax function.

    Returns ``(module, segments)``; ``main`` calls the segment functions and the NPU kernels in
    the original order, so the module computes exactly what it did.
    """
    binds, backends, is_npu = assignment.bindings, assignment.backends, assignment.npu
    main = mod["main"]
    # runs of host bindings; main-level glue (projections of NPU results) does not break a run
    runs: list[tuple[str, list[int]]] = []
    current = None
    for i, be in enumerate(backends):
        if be is not None and not is_npu[i]:
            if current is None or runs[current][0] != be:
                runs.append((be, []))
                current = len(runs) - 1
            runs[current][1].append(i)
        elif is_npu[i]:
            current = None
    # main glue (tuples, projections, aliases) that reads a value of a run still open at its
    # position joins that run; other main glue is emitted where it is, before the run's call
    defined_at = {_key(b.var): i for i, b in enumerate(binds)}
    for i, be in enumerate(backends):
        if be is not None or is_npu[i]:
            continue
        for run in runs:
            if run[1][0] < i < run[1][-1] and any(
                defined_at.get(_key(v), -1) in run[1] for v in _vars_in(binds[i].value)
            ):
                run[1].append(i)
                run[1].sort()
                break
    # main emits each run's call where the run ends
    seg_of = {}
    for r, (_be, idx) in enumerate(runs):
        for i in idx:
            seg_of[i] = r
    order: list = []  # ("main", binding index) | ("seg", run index)
    for i in range(len(binds)):
        r = seg_of.get(i)
        if r is None:
            order.append(("main", i))
        elif i == runs[r][1][-1]:
            order.append(("seg", r))
    # what each run reads and what later code reads from it
    defined_in = {}
    for r, (_be, idx) in enumerate(runs):
        for i in idx:
            defined_in[_key(binds[i].var)] = r
    used_after: dict[int, set] = {}
    for i, b in enumerate(binds):
        r_here = seg_of.get(i)
        for var in _vars_in(b.value):
            r = defined_in.get(_key(var))
            if r is not None and r != r_here:
                used_after.setdefault(r, set()).add(_key(var))
    for var in _vars_in(main.body.body):
        r = defined_in.get(_key(var))
        if r is not None:
            used_after.setdefault(r, set()).add(_key(var))

    base = mod.copy() if hasattr(mod, "copy") else mod
    main_gv = base.get_global_var("main")
    del base[main_gv]
    bb = relax.BlockBuilder(base)
    segments: list[Segment] = []
    seg_funcs: dict[int, tuple] = {}
    for r, (be, idx) in enumerate(runs):
        inside = {_key(binds[i].var) for i in idx}
        inputs, seen = [], set()
        for i in idx:
            for var in _vars_in(binds[i].value):
                k = _key(var)
                if k not in inside and k not in seen:
                    seen.add(k)
                    inputs.append(var)
        outputs = [binds[i].var for i in idx if _key(binds[i].var) in used_after.get(r, set())]
        if not outputs:
            continue  # dead code
        name = f"{SEGMENT_PREFIX}{r}_{be.replace('-', '_')}"
        params = [relax.Var(v.name, v.ty) for v in inputs]
        vmap = {_key(v): p for v, p in zip(inputs, params)}
        with bb.function(name, params):
            with bb.dataflow():
                for i in idx:
                    nv = bb.emit(_substitute(binds[i].value, vmap), name_hint=binds[i].var.name)
                    vmap[_key(binds[i].var)] = nv
                outs = [bb.emit_output(vmap[_key(o)]) for o in outputs]
            gv = bb.emit_func_output(outs[0] if len(outs) == 1 else relax.Tuple(outs))
        seg_funcs[r] = (gv, inputs, outputs)
        segments.append(Segment(name, be, idx))

    main_attrs = {k: main.attrs[k] for k in main.attrs.keys()} if main.attrs is not None else None
    with bb.function("main", list(main.params), attrs=main_attrs):
        vmap: dict = {}
        with bb.dataflow():
            for kind, x in order:
                if kind == "main":
                    b = binds[x]
                    vmap[_key(b.var)] = bb.emit(_substitute(b.value, vmap), name_hint=b.var.name)
                    continue
                if x not in seg_funcs:
                    continue
                gv, inputs, outputs = seg_funcs[x]
                call = relax.Call(gv, [_substitute(v, vmap) for v in inputs])
                res = bb.emit(call, name_hint=f"seg{x}")
                if len(outputs) == 1:
                    vmap[_key(outputs[0])] = res
                else:
                    for k, o in enumerate(outputs):
                        vmap[_key(o)] = bb.emit(relax.TupleGetItem(res, k), name_hint=o.name)
            ret = bb.emit_output(_substitute(main.body.body, vmap))
        bb.emit_func_output(ret)
    out = bb.get()
    for k in mod.attrs.keys() if mod.attrs is not None else []:
        if out.attrs is None or k not in out.attrs:
            out = out.with_attr(k, mod.attrs[k])
    return out, segments


def legalize(mod, target="llvm"):
    """TVM's legalization and fusion (inside each function: never across two backends)."""
    from tvm.relax.backend import cpu_generic

    tgt = tvm.target.Target(target)
    with tgt:
        seq = tvm.transform.Sequential(
            cpu_generic.library_dispatch_passes(tgt) + cpu_generic.legalize_passes(tgt)
        )
        return seq(mod)


def vm_tail(target="llvm"):
    """The rest of TVM's CPU Relax pipeline, after :func:`legalize` (no second fusion)."""
    from tvm.relax.backend import cpu_generic
    from tvm.relax.backend.cpu_generic import pipeline as cpu_pipeline

    tgt = tvm.target.Target(target)

    @tvm.transform.module_pass(opt_level=0)
    def _tail(mod, _ctx):
        with tgt:
            return tvm.transform.Sequential(
                cpu_pipeline.dataflow_lower_passes(tgt) + cpu_generic.finalize_passes(tgt)
            )(mod)

    return _tail


# ---------------------------------------------------------------------------- reading
class _Reader:
    def __init__(self):
        self.tensors: dict[int, TensorSpec] = {}
        self.constants: list[np.ndarray] = []
        self._const_ids: dict[int, int] = {}
        self._next = 0

    def new_tensor(self, ty, name: str) -> int:
        try:
            shape = tuple(int(s) for s in ty.shape.values)
        except Exception as err:
            raise CompileError(
                f"tensor {name} has no static shape ({ty}); the executor needs static shapes"
            ) from err
        tid = self._next
        self._next += 1
        self.tensors[tid] = TensorSpec(tid, name, shape, str(ty.dtype))
        return tid

    def const(self, c) -> int:
        k = _key(c)
        if k not in self._const_ids:
            self._const_ids[k] = len(self.constants)
            self.constants.append(np.ascontiguousarray(c.value.numpy()))
        return self._const_ids[k]


def _is_const(e) -> bool:
    return isinstance(e, tvm.ir.expr.GenericConst)


def _fields(ty) -> list:
    return list(ty.fields) if hasattr(ty, "fields") else [ty]


def read_program(fused, segments: list[Segment], npu_backends: set, host_id: str) -> NetworkProgram:
    """Read the legalized module into a :class:`NetworkProgram` (tensors, constants, steps)."""
    rd = _Reader()
    env: dict[int, object] = {}  # var key -> tid | list (tuple of values)
    main = fused["main"]
    inputs = []
    for p in main.params:
        tid = rd.new_tensor(p.ty, p.name)
        env[_key(p)] = tid
        inputs.append(tid)
    seg_by_name = {s.name: s for s in segments}
    subgraphs: list[SubgraphSpec] = []

    def arg_ref(e, local):
        if _is_const(e):
            return ("c", rd.const(e))
        if isinstance(e, relax.Var):
            v = local.get(_key(e))
            if isinstance(v, int):
                return ("t", v)
        raise CompileError(f"unsupported kernel argument {e!r}")

    def flatten(v) -> list:
        if isinstance(v, int):
            return [v]
        out = []
        for x in v:
            out.extend(flatten(x))
        return out

    def value_of(e, local):
        if isinstance(e, relax.Var):
            if _key(e) not in local:
                raise CompileError(f"variable {e.name} used before definition")
            return local[_key(e)]
        if isinstance(e, relax.Tuple):
            return [value_of(f, local) for f in e.fields]
        if isinstance(e, relax.TupleGetItem):
            return value_of(e.tuple_value, local)[e.index]
        raise CompileError(f"unsupported value {e!r}")

    for b in _bindings(main):
        v = b.value
        op = _op_name(v)
        if op == "relax.call_dps_packed":
            sym = str(v.args[0].global_symbol)
            backend = next(
                (
                    s_be
                    for s_be in npu_backends
                    if sym.startswith(f"tvm_ethos_{s_be.replace('-', '_')}_sg")
                ),
                None,
            )
            if backend is None:
                raise CompileError(f"cannot tell the NPU of {sym}")
            args = [arg_ref(a, env) for a in v.args[1].fields]
            outs = [
                rd.new_tensor(t, f"{sym}.out{k}")
                for k, t in enumerate(_fields(v.ty_args[0] if v.ty_args else b.var.ty))
            ]
            env[_key(b.var)] = outs[0] if len(outs) == 1 else outs
            ins = [r[1] for r in args if r[0] == "t"]
            subgraphs.append(
                SubgraphSpec(
                    sym, backend, "npu", "cpu", _dedupe(ins), outs, [Step(sym, args, outs)]
                )
            )
        elif (
            isinstance(v, relax.Call)
            and isinstance(v.op, tvm.ir.GlobalVar)
            and v.op.name_hint in seg_by_name
        ):
            seg = seg_by_name[v.op.name_hint]
            func = fused[v.op]
            local = {}
            ins = []
            for p, a in zip(func.params, v.args):
                tid = value_of(a, env)
                local[_key(p)] = tid
                ins.extend(flatten(tid))
            steps = []
            for fb in _bindings(func):
                fv = fb.value
                fop = _op_name(fv)
                if fop == "relax.call_tir":
                    if len(fv.args) > 2:
                        raise CompileError(
                            f"{seg.name}: call_tir with symbolic shape arguments is not supported"
                        )
                    gv = fv.args[0]
                    args = [arg_ref(a, local) for a in fv.args[1].fields]
                    outs = [
                        rd.new_tensor(t, f"{gv.name_hint}.out{k}")
                        for k, t in enumerate(_fields(fb.var.ty))
                    ]
                    local[_key(fb.var)] = outs[0] if len(outs) == 1 else outs
                    steps.append(Step(gv.name_hint, args, outs))
                elif isinstance(fv, (relax.Var, relax.Tuple, relax.TupleGetItem)):
                    local[_key(fb.var)] = value_of(fv, local)
                else:
                    raise CompileError(
                        f"{seg.name}: unsupported binding after legalization: {fb.value}"
                    )
            res = value_of(func.body.body, local)
            env[_key(b.var)] = res
            device = "opencl" if _device_target(seg.backend) == "opencl" else "cpu"
            subgraphs.append(
                SubgraphSpec(
                    seg.name, seg.backend, "host", device, _dedupe(ins), flatten(res), steps
                )
            )
        elif isinstance(v, (relax.Var, relax.Tuple, relax.TupleGetItem)):
            env[_key(b.var)] = value_of(v, env)
        else:
            raise CompileError(f"unsupported binding in main: {b.var.name} = {v}")
    outputs = flatten(value_of(main.body.body, env))
    return NetworkProgram(
        inputs=inputs,
        outputs=outputs,
        tensors=rd.tensors,
        subgraphs=subgraphs,
        constants=rd.constants,
    )


def state_constants(program: NetworkProgram, states: dict) -> tuple[int, ...]:
    """The program's constant indices that are state variables: ``states`` gives, per NPU
    kernel symbol, its constants' count and the states' positions among them; a kernel's
    constants are the last arguments of its call (``attach_npu_constants``)."""
    out = []
    for sg in program.subgraphs:
        for st in sg.steps:
            if st.func not in states:
                continue
            count, positions = states[st.func]
            for p in positions:
                tag, ref = st.args[len(st.args) - count + p]
                if tag != "c":
                    raise CompileError(f"{st.func}: its state argument {p} is no constant")
                out.append(ref)
    return tuple(out)


def _dedupe(xs):
    seen, out = set(), []
    for x in xs:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out


def _device_target(backend_id: str) -> str:
    cg = get_registry().get(backend_id).codegen_factory()
    return getattr(cg, "device_target", getattr(cg, "build_target", "llvm"))


# ---------------------------------------------------------------------------- building
GPU_THREADS = 64


def schedule_stages_for_gpu(prim, threads: int = GPU_THREADS):
    """Bind every stage of an exact integer kernel to GPU threads, one kernel per stage.

    Why not dlight: its fallback rule inlines every injective stage into its consumer, and the
    requantization stages read their input several times (the rounding nudge, the saturation
    test), so the inlined expression grows exponentially with the chain and TVM's simplifier
    stalls on it (rfcs/0003 section 7.2). Kept as stages, each is a plain kernel:
    spatial loops fused and split into blocks of ``threads`` threads, reductions serial inside.
    Intermediates between stages become global workspaces (``extract_opencl`` handles them).
    """
    from tvm import s_tir

    sch = s_tir.Schedule(prim)
    root = sch.get_sblock("root")
    blocks = list(sch.get_child_blocks(root))
    # an accumulator read only by the next stage at the same index is computed by the thread
    # that reads it (no global int32 workspace, one kernel less)
    fused_into = {}
    for block in blocks:
        if cpu_schedule.is_reduction(sch, block):
            users = sch.get_consumers(block)
            if len(users) == 1 and not cpu_schedule.is_reduction(sch, users[0]) and \
                    cpu_schedule.sole_same_shape_consumer(sch, block, users[0]):
                fused_into[sch.get(block).name_hint] = users[0]
    for block in blocks:
        if sch.get(block).name_hint in fused_into:
            continue
        loops = sch.get_loops(block)
        ivs = sch.get(block).iter_vars
        spatial = []
        for loop, iv in zip(loops, ivs):
            if int(iv.iter_type) != 0:  # DataPar
                break
            spatial.append(loop)
        if not spatial:
            spatial = [sch.add_unit_loop(block)]
            if loops:
                sch.reorder(spatial[0], *loops)
        fused = sch.fuse(*spatial) if len(spatial) > 1 else spatial[0]
        bx, tx = sch.split(fused, [None, threads])
        sch.bind(bx, "blockIdx.x")
        sch.bind(tx, "threadIdx.x")
    for block in blocks:
        user = fused_into.get(sch.get(block).name_hint)
        if user is not None:
            sch.compute_at(block, sch.get_loops(user)[-1], preserve_unit_loops=True)
            sch.set_scope(block, 0, "local")
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)


def opencl_kernels(fused, program: NetworkProgram, gpu_tiling=None):
    """The OpenCL C and launch recipe of every kernel an OpenCL subgraph calls (``gpu_schedule``
    for the exact integer kernels, with the opencl target's ``tiling``; dlight for the rest)."""
    names = sorted({s.func for sg in program.subgraphs if sg.device == "opencl" for s in sg.steps})
    if not names:
        return None
    prims = {}
    for name in names:
        f = fused[name]
        if f.attrs is not None and "tirx.is_scheduled" in f.attrs:
            # an exact integer kernel: register-tiled GPU schedule (dlight would inline the stages)
            f = gpu_schedule.schedule_for_gpu(f, gpu_schedule.parse_tiling(gpu_tiling))
        prims[name] = f.with_attr("global_symbol", name)
    try:
        return opencl_extraction.extract_opencl(tvm.IRModule(prims), "opencl",
                                                tir_pipeline=GPU_PIPELINE_NAME)
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise CompileError(
            f"building the OpenCL kernels failed: {msg[-1] if msg else type(err).__name__}"
        ) from err


def schedule_host_kernels(fused):
    """A copy of ``fused`` whose exact integer host kernels carry the CPU schedule
    (``cpu_schedule``); ``fused`` itself keeps them unscheduled for the OpenCL build."""
    tile = cpu_schedule.host_tile(cpu_schedule.host_target())
    funcs = {}
    for gv, f in fused.functions.items():
        if isinstance(f, tvm.tirx.PrimFunc) and _KERNEL_NAME.match(gv.name_hint):
            f = cpu_schedule.schedule_for_cpu(f, *tile)
        funcs[gv] = f
    return tvm.IRModule(funcs, attrs=fused.attrs, global_infos=fused.global_infos)


def build_network(pmod, report, host_id: str, cpu_ops=None, tir_pipeline=None, gpu_tiling=None):
    """Split, legalize, build: returns ``(executable, NetworkProgram)``."""
    asg = assign_backends(pmod, report, host_id, cpu_ops)
    smod, segments = split_main(pmod, asg)
    fused = legalize(smod)
    program = read_program(fused, segments, asg.npu_backends, host_id)
    kwargs = {"tir_pipeline": tir_pipeline} if tir_pipeline is not None else {}
    host = tvm.target.Target(cpu_schedule.host_target())
    ex = tvm.compile(
        schedule_host_kernels(fused), target=host, relax_pipeline=vm_tail(host), **kwargs
    )
    program.opencl = opencl_kernels(fused, program, gpu_tiling)
    return ex, program
