"""``compile`` and ``CompiledModel``: partition, NPU codegen, host build, save and load."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass

import numpy as np

from tvm_ethos.errors import CompileError, ModelLoadError, TvmEthosError
from tvm_ethos.package import read_package, write_package

FORMAT_VERSION = 1
_META = "meta.json"
_LIB = "model.so"
_PROGRAM = "program.json"
_CONSTANTS = "constants.bin"
#: Options of the executor (applied when a model is loaded, not part of what is compiled).
RUNTIME_OPTIONS = ("fallback_mode", "opencl_device", "misaligned", "max_requests")


@dataclass
class IOSpec:
    name: str
    shape: tuple
    dtype: str


class CompiledModel:
    """A compiled network: a Relax VM executable, the executor's program (subgraphs per backend),
    and what was decided on the way. ``run`` / ``start_async`` go through the executor
    (tvm_ethos/runtime/executor.py); ``executable`` stays a plain Relax VM executable."""

    def __init__(self, executable, targets: str, report, inputs: list[IOSpec], outputs: list[IOSpec] | None = None,
                 program=None, runtime_options: dict | None = None, library=None, plan_report=None):
        self.executable = executable
        self.targets = targets
        self.report = report
        self.inputs = inputs
        self.outputs = outputs or []
        self._vm = None
        self._network_id = None
        self.program = program
        self.runtime_options = dict(runtime_options or {})
        self._library = library
        self._executor = None
        self.from_cache = False
        self.cache_path = None
        #: the cascading planner's report (rfcs/0005): peak_memory_bytes, cycles, layers, and per
        #: NPU subgraph planned_bytes / scheduled_bytes by memory scope
        self.plan_report = plan_report

    # ------------------------------------------------------------------ running
    @property
    def vm(self):
        if self._vm is None:
            import tvm
            from tvm import relax

            self._vm = relax.VirtualMachine(self.executable, tvm.cpu())
        return self._vm

    def run(self, *inputs) -> list[np.ndarray]:
        """One inference through the executor (the VM where a model has no program)."""
        if self.program is not None:
            return self.executor.run(inputs)
        return self.run_vm(*inputs)

    # ------------------------------------------------------------------ executor
    @property
    def executor(self):
        """The loaded network (created on first use; :meth:`unload` frees it)."""
        if self._executor is None or self._executor.closed:
            from tvm_ethos.runtime.executor import Executor

            if self.program is None:
                raise TvmEthosError("this compiled model has no executor program")
            lib = self._library if self._library is not None else self.executable.mod
            self._executor = Executor(self.program, lib, **self.runtime_options)
        return self._executor

    def start_async(self, *inputs):
        """Start an inference; returns a request whose ``wait()`` gives the outputs."""
        return self.executor.start_async(inputs)

    @property
    def last_run_stats(self):
        """Counters of the last inference (``bytes_copied``, ``bytes_imported``, ...), or None."""
        return self._executor.last_run_stats if self._executor is not None else None

    @property
    def edge_report(self):
        """The step chosen at every edge between backends, and why (loads the network)."""
        return self.executor.edge_report

    def unload(self) -> int:
        """Free the loaded network's memory; returns how many fallback buffers were freed."""
        if self._executor is None:
            return 0
        ex, self._executor = self._executor, None
        return ex.unload()

    def run_vm(self, *inputs) -> list[np.ndarray]:
        """One inference with the Relax VM on ``executable`` (everything on the CPU)."""
        import tvm

        if len(inputs) != len(self.inputs):
            raise TvmEthosError(f"the model takes {len(self.inputs)} input(s), {len(inputs)} given")
        args = []
        for spec, x in zip(self.inputs, inputs):
            x = np.asarray(x)
            if tuple(x.shape) != tuple(spec.shape):
                raise TvmEthosError(f"input {spec.name!r}: shape {tuple(x.shape)}, expected {tuple(spec.shape)}")
            if str(x.dtype) != spec.dtype:
                raise TvmEthosError(f"input {spec.name!r}: dtype {x.dtype}, expected {spec.dtype}")
            args.append(tvm.runtime.tensor(np.ascontiguousarray(x)))
        res = self.vm["main"](*args)
        return _flatten(res)

    # ------------------------------------------------------------------ info
    @property
    def partition_summary(self) -> dict:
        """Operator counts per target, e.g. ``{"ethos-n": 27, "llvm": 3}``."""
        return self.report.summary() if self.report is not None else {}

    @property
    def plan_table(self) -> str:
        """The per-layer plan table (stripes, buffers, regions, bytes, cycles, cascades)."""
        from tvm_ethos.lower.cascade import format_table

        return format_table(self.plan_report)

    @property
    def partition_report(self):
        return self.report

    # ------------------------------------------------------------------ save / load
    def save(self, path) -> str:
        """Write one file holding the executable's shared library and metadata: a tar when
        ``path`` ends in ``.tar`` (as tvmc's packages), a zip otherwise (tvm_ethos/package.py)."""
        path = os.fspath(path)
        tmp = tempfile.mkdtemp(prefix="tvm_ethos_save_")
        try:
            lib = os.path.join(tmp, _LIB)
            self.executable.export_library(lib)
            meta = {
                "format_version": FORMAT_VERSION,
                "targets": self.targets,
                "report": self.report.to_json() if self.report is not None else None,
                "inputs": [[s.name, list(s.shape), s.dtype] for s in self.inputs],
                "outputs": [[s.name, list(s.shape), s.dtype] for s in self.outputs],
                "runtime_options": self.runtime_options,
                "plan_report": self.plan_report,
            }
            with open(lib, "rb") as f:
                members = [(_LIB, f.read()), (_META, json.dumps(meta, sort_keys=True).encode())]
            if self.program is not None:  # the executor's subgraphs, edges' tensors, constants
                members += [(_PROGRAM, self.program.to_json().encode()),
                            (_CONSTANTS, self.program.constants_blob())]
            # Deterministic bytes, a tar for a *.tar name (tvmc's packages), else a zip
            write_package(path, members)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return path

    def __repr__(self):
        return f"<CompiledModel targets={self.targets!r} partition={self.partition_summary}>"


def _flatten(res) -> list[np.ndarray]:
    if hasattr(res, "numpy"):
        return [res.numpy()]
    out = []
    for r in res:
        out.extend(_flatten(r))
    return out


def load(path, **runtime_options) -> CompiledModel:
    """Load a model written by ``CompiledModel.save`` (works in a fresh process).

    ``runtime_options`` (``fallback_mode``, ``opencl_device``, ``misaligned``, ``max_requests``)
    override those saved with the model."""
    import tvm

    from tvm_ethos.runtime.program import NetworkProgram

    _check_runtime_options(runtime_options)

    from tvm_ethos.backends.registry import get_registry
    from tvm_ethos.partition import PartitionReport

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelLoadError(f"compiled model not found: {path}")
    members = read_package(path)
    try:
        meta = json.loads(members[_META])
    except (KeyError, ValueError) as err:
        raise ModelLoadError(f"{path}: not a tvm-ethos compiled model ({err})") from None
    if meta.get("format_version") != FORMAT_VERSION:
        raise ModelLoadError(f"{path}: format version {meta.get('format_version')}, this tvm-ethos reads {FORMAT_VERSION}")
    # re-register the backends (codegens, emulator hooks) before the library is loaded
    reg = get_registry()
    for bid in meta["targets_ids"] if "targets_ids" in meta else [t.split()[0] for t in meta["targets"].split(",")]:
        if reg.is_registered(bid):
            cg = reg.get(bid).codegen_factory()
            if cg is not None:
                cg.register()
    tmp = tempfile.mkdtemp(prefix="tvm_ethos_load_")
    try:
        with open(os.path.join(tmp, _LIB), "wb") as f:
            f.write(members[_LIB])
        lib = tvm.runtime.load_module(os.path.join(tmp, _LIB))
    except Exception as err:
        raise ModelLoadError(f"{path}: cannot load the executable: {err}") from None
    ex = tvm.runtime.Executable(lib) if not hasattr(lib, "jit") else lib
    report = PartitionReport.from_json(meta["report"]) if meta.get("report") else None
    ins = [IOSpec(n, tuple(s), d) for n, s, d in meta["inputs"]]
    outs = [IOSpec(n, tuple(s), d) for n, s, d in meta["outputs"]]
    program = None
    if _PROGRAM in members:
        try:
            program = NetworkProgram.from_json(members[_PROGRAM].decode(), members[_CONSTANTS])
        except (KeyError, ValueError) as err:
            raise ModelLoadError(f"{path}: cannot read the executor program: {err}") from None
    opts = dict(meta.get("runtime_options") or {})
    opts.update(runtime_options)
    return CompiledModel(ex, meta["targets"], report, ins, outs, program=program, runtime_options=opts, library=lib,
                         plan_report=meta.get("plan_report"))


def _check_runtime_options(opts: dict) -> None:
    from tvm_ethos.errors import OptionError
    from tvm_ethos.runtime.fallback_memory import FALLBACK_MODES

    unknown = sorted(set(opts) - set(RUNTIME_OPTIONS))
    if unknown:
        raise OptionError(f"unknown runtime option(s) {', '.join(unknown)}; allowed: {', '.join(RUNTIME_OPTIONS)}")
    if "fallback_mode" in opts and opts["fallback_mode"] not in FALLBACK_MODES:
        raise OptionError(
            f"option 'fallback_mode': bad value {opts['fallback_mode']!r}; allowed values: {', '.join(FALLBACK_MODES)}"
        )
    if "misaligned" in opts and opts["misaligned"] not in ("copy", "reject"):
        raise OptionError(f"option 'misaligned': bad value {opts['misaligned']!r}; allowed values: copy, reject")
    if "max_requests" in opts and (not isinstance(opts["max_requests"], int) or opts["max_requests"] < 1):
        raise OptionError(f"option 'max_requests': bad value {opts['max_requests']!r}; a positive integer")


def compile(mod, target: str = "ethos-n,llvm", **options) -> CompiledModel:  # noqa: A001
    """Partition ``mod`` for ``target``, build NPU subgraphs as emulator kernels and the rest for
    the host, and return a :class:`CompiledModel`. Options are validated up front.

    Runtime options (``fallback_mode="auto"|"import"|"copy"``, ``opencl_device``, ``misaligned``,
    ``max_requests``) are kept for the executor. ``cache_dir`` (or ``$TVM_ETHOS_CACHE_DIR``):
    a compiled-model cache; a second compile of the same model, targets and options loads it.
    """
    import tvm

    from tvm_ethos.runtime import cache as model_cache

    runtime_opts = {k: options.pop(k) for k in RUNTIME_OPTIONS if k in options}
    from tvm_ethos.lower.cascade import planning_options

    plan_opts = planning_options(options)  # budget, memory_pools, planner_options, plan
    _check_runtime_options(runtime_opts)
    cache_dir = model_cache.resolve_cache_dir(options.pop("cache_dir", None))
    key = None
    if cache_dir is not None:
        from tvm_ethos.runtime.program import PROGRAM_VERSION
        from tvm_ethos.targets import parse_targets

        tl0 = parse_targets(target, dict(options))  # errors before any hashing
        try:
            key = model_cache.cache_key(mod, str(tl0), dict(options, _planning=plan_opts.key()),
                                        (FORMAT_VERSION, PROGRAM_VERSION))
        except TypeError:
            cache_dir = None  # a model object we cannot hash (e.g. a torch program): no caching
    if cache_dir is not None:
        hit = model_cache.lookup(cache_dir, key)
        if hit is not None:
            try:
                cm = load(hit, **runtime_opts)
                cm.from_cache, cm.cache_path = True, hit
                return cm
            except ModelLoadError:
                pass  # a damaged entry: compile again and overwrite it
    cm = _compile(mod, target, runtime_opts, plan_opts, **options)
    if cache_dir is not None:
        cm.cache_path = model_cache.store(cache_dir, key, cm)
    return cm


def _compile(mod, target, runtime_opts, plan_opts, **options) -> CompiledModel:
    import tvm

    from tvm_ethos.frontend import load_model
    from tvm_ethos.lower.codegen import offload
    from tvm_ethos.lower.pipeline import PIPELINE_NAME
    from tvm_ethos.lower.split import build_network
    from tvm_ethos.partition import partition
    from tvm_ethos.targets import parse_targets

    tl = parse_targets(target, options)  # raises TargetError / OptionError before any work
    from tvm_ethos.lower import cascade

    devices = cascade.check_devices(tl, plan_opts)  # planner devices, memory pools: up front
    if not isinstance(mod, tvm.IRModule):
        mod = load_model(mod)
    pmod, report = partition(mod, tl)
    try:
        # plan every NPU subgraph and schedule it (rfcs/0005); the emulator builds the schedules
        pmod, plan_report = offload(pmod, tl, plan_opts, devices)
        # subgraphs per backend; one llvm build (the VM executable) + the OpenCL kernels
        ex, program = build_network(pmod, report, tl.host.backend_id, tl.host.options.get("cpu_ops"),
                                    tir_pipeline=PIPELINE_NAME)
    except TvmEthosError:
        raise
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise CompileError(f"compiling for {tl} failed: {msg[-1] if msg else type(err).__name__}") from err
    main = mod["main"]
    ins = []
    for p in main.params:
        ty = p.ty
        ins.append(IOSpec(p.name, tuple(int(s) for s in ty.shape.values), str(ty.dtype)))
    outs = []
    rt = main.ret_ty
    for t in (rt.fields if hasattr(rt, "fields") else [rt]):
        try:
            outs.append(IOSpec("output", tuple(int(s) for s in t.shape.values), str(t.dtype)))
        except Exception:
            pass
    return CompiledModel(ex, str(tl), report, ins, outs, program=program, runtime_options=runtime_opts,
                         plan_report=plan_report)
