"""``compile`` and ``CompiledModel``: partition, NPU codegen, host build, save and load."""
from __future__ import annotations

import difflib
import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from tvm_ethos.backends.base import HostBackend, HostOutput
from tvm_ethos.backends.ethos_u.tflite_export import export_tflite_bytes
from tvm_ethos.backends.registry import get_backend, get_registry
from tvm_ethos.errors import ModelLoadError, OptionError, TvmEthosError
from tvm_ethos.frontend import OUTPUT_NAMES_ATTR, OUTPUT_SHAPES_ATTR
from tvm_ethos.pipeline.planning import planning_options
from tvm_ethos.runtime import cache as model_cache
from tvm_ethos.runtime.host_cpu import check_host_cpu, read_cpu_record
from tvm_ethos.runtime.options import RUNTIME_OPTIONS, check_runtime_options
from tvm_ethos.targets import parse_targets
from tvm_ethos.tflite_source import source_of

if TYPE_CHECKING:
    from tvm_ethos.package import VerifiedPackage

log = logging.getLogger(__name__)


@dataclass
class IOSpec:
    name: str
    shape: tuple
    dtype: str


class CompiledModel:
    """A compiled network: a Relax VM executable, the executor's program (subgraphs per backend),
    and what was decided on the way. ``run`` / ``start_async`` go through the executor
    (tvm_ethos/runtime/executor.py); ``executable`` stays a plain Relax VM executable."""

    def __init__(
        self,
        executable,
        targets: str,
        report,
        inputs: list[IOSpec],
        outputs: list[IOSpec] | None = None,
        program=None,
        runtime_options: dict | None = None,
        library=None,
        plan_report=None,
        library_bytes: bytes | None = None,
    ):
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
        #: the exported shared library, kept once exported or loaded (save writes it again)
        self._saved_library = library_bytes
        self._executor = None
        self.from_cache = False
        self.cache_path = None
        #: the cascading planner's report (rfcs/0005): peak_memory_bytes, cycles, layers, and per
        #: NPU subgraph planned_bytes / scheduled_bytes by memory scope
        self.plan_report = plan_report
        #: the .tflite compiled (its bytes), for export_tflite; None when compiled from an
        #: IRModule or loaded from a package
        self.source_tflite = None
        #: what the host code needs of the CPU that runs it (runtime/host_cpu.py; None: a
        #: package older than the record, not checked)
        self.cpu_record = None

    # ------------------------------------------------------------------ running
    @property
    def vm(self):
        if self._vm is None:
            check_host_cpu(self.cpu_record, "this compiled model")
            # lazy: TVM loads when a model is built or run, not on import
            import tvm
            from tvm import relax

            self._vm = relax.VirtualMachine(self.executable, tvm.cpu())
        return self._vm

    def run(self, *inputs) -> list[np.ndarray]:
        """One inference through the executor (the VM where a model has no program).

        ``inputs``: the arrays in the order of :attr:`inputs` (as arguments, or one list of
        them), or one dict keyed by input name. The outputs come back in the order, and with
        the shapes, of :attr:`outputs` (the source model's: TFLite's ``(1, 10)`` where the
        module computes ``(1, 1, 1, 10)``)."""
        arrays = self._ordered_inputs(inputs)
        if self.program is not None:
            return self._shaped(self.executor.run(arrays))
        return self.run_vm(*arrays)

    def reset(self) -> None:
        """Put the model's states (an LSTM's hidden and cell state, which each :meth:`run`
        and request goes on from, as TFLite Micro's interpreter does between ``invoke()``
        calls) back to their reset values, as the interpreter's ``reset()`` does; a model
        without states has nothing to reset. A loaded package starts from them, and so does
        the first run after :meth:`unload`; :meth:`run_vm` keeps its own in the VM
        executable's constants, which this does not reach."""
        if self.program is not None and self.program.states and self._executor is not None:
            self._executor.reset_state()

    def _ordered_inputs(self, inputs: tuple) -> tuple:
        """Positional arrays, or one dict by input name turned into them (TvmEthosError naming
        the unknown or missing names)."""
        if len(inputs) == 1 and isinstance(inputs[0], (list, tuple)) and inputs[0] and all(
                isinstance(x, np.ndarray) for x in inputs[0]):
            return tuple(inputs[0])   # cm.run([x0, x1]) as cm.run(x0, x1)
        if len(inputs) != 1 or type(inputs[0]) is np.ndarray or not isinstance(inputs[0], Mapping):
            return inputs
        given, names = inputs[0], [s.name for s in self.inputs]
        unknown = [k for k in given if k not in names]
        missing = [n for n in names if n not in given]
        if unknown or missing:
            what = (f"unknown input name(s) {', '.join(map(repr, unknown))}" if unknown else
                    f"no array for input(s) {', '.join(map(repr, missing))}")
            raise TvmEthosError(f"{what}; the model's inputs are {', '.join(map(repr, names))}")
        return tuple(given[n] for n in names)

    def _shaped(self, outs: list[np.ndarray]) -> list[np.ndarray]:
        """The outputs reshaped (views, no copy) to :attr:`outputs`' shapes."""
        if len(outs) != len(self.outputs):
            return outs
        return [o if o.shape == s.shape or o.size != math.prod(s.shape) else o.reshape(s.shape)
                for o, s in zip(outs, self.outputs)]

    # ------------------------------------------------------------------ executor
    @property
    def executor(self):
        """The loaded network (created on first use; :meth:`unload` frees it)."""
        if self._executor is None or self._executor.closed:
            check_host_cpu(self.cpu_record, "this compiled model")

            if self.program is None:
                raise TvmEthosError("this compiled model has no executor program")
            lib = self._library if self._library is not None else self.executable.mod
            # lazy: start-up; the executor (its threads, memories, OpenCL) loads when a model
            # runs, not for a compile
            from tvm_ethos.runtime.executor import Executor

            self._executor = Executor(self.program, lib, **self.runtime_options)
        return self._executor

    def start_async(self, *inputs):
        """Start an inference (inputs as :meth:`run` takes them); returns a request whose
        ``wait()`` gives the outputs, shaped as :meth:`run` gives them."""
        return _ShapedRequest(self.executor.start_async(self._ordered_inputs(inputs)), self._shaped)

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

        inputs = self._ordered_inputs(inputs)
        if len(inputs) != len(self.inputs):
            raise TvmEthosError(f"the model takes {len(self.inputs)} input(s), {len(inputs)} given")
        args = []
        for spec, x in zip(self.inputs, inputs):
            x = np.asarray(x)
            if tuple(x.shape) != tuple(spec.shape):
                raise TvmEthosError(
                    f"input {spec.name!r}: shape {tuple(x.shape)}, expected {tuple(spec.shape)}"
                )
            if str(x.dtype) != spec.dtype:
                raise TvmEthosError(f"input {spec.name!r}: dtype {x.dtype}, expected {spec.dtype}")
            args.append(tvm.runtime.tensor(np.ascontiguousarray(x)))
        res = self.vm["main"](*args)
        return self._shaped(_flatten(res))

    # ------------------------------------------------------------------ info
    @property
    def partition_summary(self) -> dict:
        """Operator counts per target, e.g. ``{"ethos-n": 27, "llvm": 3}``."""
        return self.report.summary() if self.report is not None else {}

    @property
    def plan_table(self) -> str:
        """The per-layer plan table (stripes, buffers, regions, bytes, cycles, cascades)."""
        # lazy: the report module loads TVM; only the plan table needs it
        from tvm_ethos.pipeline.report import format_table

        return format_table(self.plan_report)

    @property
    def partition_report(self):
        return self.report

    # ------------------------------------------------------------------ save / load
    def export_tflite(self, path, model=None) -> str:
        """Write the model for TFLite Micro: its Ethos-U NPU subgraph as one ``ethos-u``
        custom operator in Vela's layout (tvm_ethos/backends/ethos_u/tflite_export.py says
        which models can be written; the others are refused by name).

        ``model``: the source .tflite (bytes or path), needed where this model does not hold
        it (compiled from an IRModule, or loaded from a package)."""
        data = export_tflite_bytes(self, model if model is not None else self.source_tflite)
        path = os.fspath(path)
        with open(path, "wb") as f:
            f.write(data)
        return path

    def save(self, path) -> str:
        """Write one file holding the executable's shared library and metadata: a tar when
        ``path`` ends in ``.tar`` (as tvmc's packages), a zip otherwise (tvm_ethos/package.py).

        A model that came from :func:`load` or the cache saves the library bytes it was loaded
        from (TVM cannot export a module loaded from a shared library), so saving it again gives
        the same file, byte for byte."""
        path = os.fspath(path)
        _package().write_package(path, self._package_members())
        return path

    def _package_members(self) -> list[tuple[str, bytes]]:
        """The package's members in their fixed order (tvm_ethos/package.py writes them)."""
        package = _package()
        meta = {
            "format_version": package.FORMAT_VERSION,
            "targets": self.targets,
            "report": self.report.to_json() if self.report is not None else None,
            "inputs": [[s.name, list(s.shape), s.dtype] for s in self.inputs],
            "outputs": [[s.name, list(s.shape), s.dtype] for s in self.outputs],
            "runtime_options": self.runtime_options,
            "plan_report": self.plan_report,
        }
        if self.cpu_record is not None:
            meta["host_cpu"] = self.cpu_record.to_json()
        members = [
            (package.LIBRARY, self._library_bytes()),
            (package.META, json.dumps(meta, sort_keys=True).encode()),
        ]
        if self.program is not None:  # the executor's subgraphs, edges' tensors, constants
            members += [(package.PROGRAM, self.program.to_json().encode()),
                        (package.CONSTANTS, self.program.constants_blob())]
        return members

    def _library_bytes(self) -> bytes:
        if self._saved_library is None:
            tmp = tempfile.mkdtemp(prefix="tvm_ethos_save_")
            try:
                lib = os.path.join(tmp, _package().LIBRARY)
                self.executable.export_library(lib)
                with open(lib, "rb") as f:
                    self._saved_library = f.read()
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        return self._saved_library

    def __repr__(self):
        return f"<CompiledModel targets={self.targets!r} partition={self.partition_summary}>"


class _ShapedRequest:
    """An executor request whose ``wait()`` gives the outputs in the model's shapes."""

    def __init__(self, request, shape):
        self._request, self._shape = request, shape

    def wait(self, timeout: float | None = None) -> list[np.ndarray]:
        return self._shape(self._request.wait(timeout))

    def __getattr__(self, name):   # stats, done
        return getattr(self._request, name)


def _flatten(res) -> list[np.ndarray]:
    if hasattr(res, "numpy"):
        return [res.numpy()]
    out = []
    for r in res:
        out.extend(_flatten(r))
    return out


def load(path, **runtime_options) -> CompiledModel:
    """Load a model written by ``CompiledModel.save`` (works in a fresh process).

    A package is code: loading one loads its shared library into this process (as TVM's
    ``tvm.runtime.load_module`` on an ``export_library`` file does), and that library runs
    with your rights. Load only packages you built or trust, as you would a ``.so``.

    ``runtime_options`` (``fallback_mode``, ``opencl_device``, ``misaligned``, ``max_requests``)
    override those saved with the model."""
    check_runtime_options(runtime_options)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelLoadError(f"compiled model not found: {path}")
    log.info("loading %s (its shared library runs in this process)", path)
    return load_members(_package().verify_package(path), path, runtime_options)


def load_members(pkg: VerifiedPackage, path: str, runtime_options: dict) -> CompiledModel:
    """:func:`load` on a package already verified (tvm_ethos/package.py: members, metadata,
    host): the last step, loading its library; ``path`` names the package in errors."""
    import tvm

    # lazy: partition loads TVM; TVM loads when a model is built or run, not on import
    from tvm_ethos.partition import PartitionReport

    library = _package().LIBRARY
    meta = pkg.meta
    record = read_cpu_record(dict(meta.extra), path)
    check_host_cpu(record, path)   # before its code is loaded: SIGILL otherwise
    # re-register the backends (codegens, emulator hooks) before the library is loaded
    reg = get_registry()
    for bid in meta.target_ids:
        if reg.is_registered(bid):
            cg = reg.get(bid).codegen_factory()
            if cg is not None:
                cg.register()
    tmp = tempfile.mkdtemp(prefix="tvm_ethos_load_")
    try:
        with open(os.path.join(tmp, library), "wb") as f:
            f.write(pkg.library)
        lib = tvm.runtime.load_module(os.path.join(tmp, library))
    except Exception as err:
        raise ModelLoadError(f"{path}: cannot load the executable: {err}") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ex = tvm.runtime.Executable(lib) if not hasattr(lib, "jit") else lib
    report = PartitionReport.from_json(meta.report) if meta.report else None
    ins = [IOSpec(n, tuple(s), d) for n, s, d in meta.inputs]
    outs = [IOSpec(n, tuple(s), d) for n, s, d in meta.outputs]
    opts = dict(meta.runtime_options)
    opts.update(runtime_options)
    cm = CompiledModel(
        ex,
        meta.targets,
        report,
        ins,
        outs,
        program=pkg.program,
        runtime_options=opts,
        library=lib,
        plan_report=dict(meta.plan_report) if meta.plan_report is not None else None,
        library_bytes=pkg.library,
    )
    cm.cpu_record = record
    return cm


def compile(mod, target: str = "ethos-n,llvm", **options) -> CompiledModel:  # noqa: A001
    """Partition ``mod`` for ``target``, build NPU subgraphs as emulator kernels and the rest for
    the host, and return a :class:`CompiledModel`. Options are validated up front: an unknown
    one is an :class:`OptionError` listing those allowed.

    ``mod``: an IRModule from :func:`load_model`, or what it takes (a .tflite/.onnx path, bytes).
    ``target``: a priority-ordered list ending with a host target, e.g. ``"ethos-n,opencl"``;
    each operator goes to the first target that takes it. ``"ethos-u"`` alone (or
    ``"ethos-u,tflite-micro"``) compiles a .tflite to a TFLite Micro file whose other
    operators stay TFLite operators (tvm_ethos/backends/tflite_micro/compile.py).

    Target options (also written inline, ``"ethos-u -accelerator_config=ethos-u55-256,llvm"``;
    a backend plugin adds its own, listed by its ``options_schema()``):

    * ``accelerator_config`` (ethos-u): ``"ethos-u55-32"`` ... ``"ethos-u85-2048"``;
    * ``variant`` (ethos-n, ``"n78"``), ``tops`` (1, 2, 4, 8), ``ple_ratio`` (2, 4),
      ``sram_size`` (bytes, 0 for the variant's own);
    * ``cpu_ops`` (opencl): operator kinds or TFLite names to run on the CPU instead of the GPU;
    * ``tiling`` (opencl): the conv kernels' work-group and register tile, ``"64x2x4"``;
    * ``mcpu`` (llvm): the LLVM CPU the host code is built for (``"x86-64-v3"``, ``"haswell"``;
      default this machine's). The model then runs on CPUs with that one's extensions only:
      its package records them and ``load`` refuses a CPU without them (runtime/host_cpu.py).

    Planning options (rfcs/0005):

    * ``budget``: the SRAM each NPU subgraph's plan must fit (bytes, or ``"300KiB"``: kB =
      1000, KiB = 1024, a bare ``k`` refused), ``"system"`` (the default: the device's SRAM),
      ``"smallest"`` (the plan of least memory), ``"size"`` (Vela's ``--optimise Size``: the
      least memory plus estimated command-stream bytes) or ``None`` (the fastest);
    * ``memory_pools``: memory regions overriding the device's (``{"sram": {"size": ...}}``,
      or tvmc's ``"sram:300KiB:read_bw=8"`` strings);
    * ``planner_options``: a dict or ``planner.options.PlannerOptions`` of search settings;
    * ``plan``: ``False`` skips the cascading planner (each layer alone).

    Runtime options, kept with the model and applied when it is loaded (not part of what is
    compiled or of the cache key): ``fallback_mode`` (``"auto"``, ``"import"``, ``"copy"``: how
    tensors cross from one backend to the next, rfcs/0003), ``opencl_device`` (a PyOpenCL
    device name), ``misaligned`` (``"copy"`` or ``"reject"`` a caller buffer the GPU cannot
    import in place), ``max_requests`` (concurrent :meth:`CompiledModel.start_async` requests),
    ``npu_runtime`` (``"stream"``, the default: each Ethos-U subgraph's generated command
    stream on the functional model, a subgraph without one on the TensorIR emulator;
    ``"tir"``: every NPU subgraph on the TensorIR emulator, which is faster; rfcs/0007).

    ``cache_dir`` (or ``$TVM_ETHOS_CACHE_DIR``; ``False`` disables): a compiled-model cache; a
    second compile of the same model, targets and options loads it (tvm_ethos/runtime/cache.py
    says how entries are guarded: they are native code).
    """
    host = _host_backend(target)
    if host is not None and host.host_output() is HostOutput.TFLITE:
        return host.compile_model(mod, target, options)   # the TFLite graph stays one
    runtime_opts = {k: options.pop(k) for k in RUNTIME_OPTIONS if k in options}

    plan_opts = planning_options(options)  # budget, memory_pools, planner_options, plan
    check_runtime_options(runtime_opts)
    cache_dir = model_cache.resolve_cache_dir(options.pop("cache_dir", None))
    check_target_options(target, options)
    key = None
    if cache_dir is not None:
        package = _package()
        # lazy: start-up, as _package (package.py loads it)
        from tvm_ethos.runtime.program import PROGRAM_VERSION

        tl0 = parse_targets(target, dict(options))  # errors before any hashing
        try:
            key = model_cache.cache_key(mod, str(tl0), dict(options, _planning=plan_opts.key()),
                                        (package.FORMAT_VERSION, PROGRAM_VERSION),
                                        cpu=_cpu_record_for(tl0).to_json())
        except TypeError:
            cache_dir = None  # a model object we cannot hash (e.g. a torch program): no caching
    if cache_dir is not None:
        model_cache.ensure_dir(cache_dir)   # 0700; CacheError when others could write there
        hit = model_cache.lookup(cache_dir, key)   # hash checked; CacheError if untrusted
        if hit is not None:
            path = model_cache.entry_path(cache_dir, key)
            try:
                cm = load_members(package.verify_package_bytes(hit, path), path, runtime_opts)
                cm.from_cache, cm.cache_path = True, path
                cm.source_tflite = _tflite_source(mod)
                log.info("loaded from the cache: %s", path)
                return cm
            except ModelLoadError as err:   # hash right, content unreadable (an older format)
                model_cache.damaged(path, str(err))
        log.info("not in the cache %s: compiling", cache_dir)
    t0 = time.perf_counter()
    cm = _compile(mod, target, runtime_opts, plan_opts, **options)
    cm.source_tflite = _tflite_source(mod)
    log.info("compiled for %s in %.1f s: %s", cm.targets, time.perf_counter() - t0,
             ", ".join(f"{t} {n}" for t, n in cm.partition_summary.items()))
    if cache_dir is not None:
        cm.cache_path = model_cache.store(cache_dir, key,
                                          package.package_bytes(cm._package_members()))
        log.info("stored in the cache: %s", cm.cache_path)
    return cm


def _package():
    """tvm_ethos/package.py, imported when a package is written, read or cached: a compile to
    a ``.tflite`` never needs it, nor the executor program format and the archive modules it
    loads (start-up)."""
    # lazy: start-up (see the docstring)
    from tvm_ethos import package

    return package


def _host_backend(target) -> HostBackend | None:
    """The target list's host backend (the contract says what its compile produces), None for
    a host that does not implement the host contract (a package)."""
    host = get_backend(parse_targets(target).host.backend_id)
    return host if isinstance(host, HostBackend) else None


def _tflite_source(mod):
    """The .tflite ``mod`` is or was imported from (its bytes), else None."""
    return source_of(mod)


#: The planning options ``compile`` and ``partition_for*`` take.
PLANNING_OPTIONS = ("budget", "memory_pools", "planner_options", "plan")
#: ``compile``'s own options (the rest belong to the targets' backends).
COMPILE_OPTIONS = PLANNING_OPTIONS + RUNTIME_OPTIONS + ("cache_dir",)


def check_target_options(target, options: dict, own=COMPILE_OPTIONS,
                         caller: str = "compile") -> None:
    """An OptionError naming every option ``caller`` takes (``own``, then each target's) when
    one is neither (a misspelt ``budget`` must not read as a missing target option), with the
    closest accepted name."""
    if not options:
        return
    reg = get_registry()
    schemas = {t.backend_id: sorted(reg.get(t.backend_id).options_schema())
               for t in parse_targets(target, {}).targets}
    known = {k for keys in schemas.values() for k in keys}
    unknown = sorted(k for k in options if k not in known)
    if unknown:
        per_target = "; ".join(f"{b}: {', '.join(keys) or '(none)'}" for b, keys in schemas.items())
        close = difflib.get_close_matches(unknown[0], list(own) + sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise OptionError(f"unknown option{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(map(repr, unknown))}{hint}; allowed options: "
                          f"{', '.join(own)} ({caller}); {per_target}")


def compile_streams(mod, target: str, **options) -> CompiledModel:
    """:func:`compile` for an output that holds the NPU command streams and copies the other
    operators (a TFLite Micro ``.tflite``): partitioned, planned, its streams generated and
    checked and its executor program read, but no host or emulator library is built, so the
    model it returns cannot run (``executable`` is None) and is not cached (a cache entry is
    a runnable package). The options are :func:`compile`'s."""
    runtime_opts = {k: options.pop(k) for k in RUNTIME_OPTIONS if k in options}
    plan_opts = planning_options(options)
    check_runtime_options(runtime_opts)
    options.pop("cache_dir", None)
    check_target_options(target, options)
    cm = _compile(mod, target, runtime_opts, plan_opts, build=False, **options)
    cm.source_tflite = _tflite_source(mod)
    return cm


def _compile(mod, target, runtime_opts, plan_opts, build: bool = True,
             **options) -> CompiledModel:
    """The compile pipeline (``tvm_ethos.pipeline.driver``) on ``mod``, its result as a
    :class:`CompiledModel`; without ``build`` nothing is compiled (``compile_streams``)."""
    # lazy: TVM loads when a model is built or run, not on import
    from tvm_ethos.pipeline.driver import compile_network

    tl = parse_targets(target, options)  # raises TargetError / OptionError before any work
    done = compile_network(mod, tl, plan_opts, build=build)
    main = done.module["main"]
    ins = []
    for p in main.params:
        ty = p.ty
        ins.append(IOSpec(p.name, tuple(int(s) for s in ty.shape.values), str(ty.dtype)))
    cm = CompiledModel(done.executable, str(tl), done.partition, ins, output_specs(done.module),
                       program=done.program, runtime_options=runtime_opts,
                       plan_report=done.plan.to_json())
    cm.cpu_record = _cpu_record_for(tl)
    return cm


def _cpu_record_for(tl):
    """What the host code compiled for the target list ``tl`` needs of the CPU
    (its llvm ``-mcpu``, else this machine's)."""
    # lazy: TVM loads when a model is built or run, not on import
    from tvm_ethos.host.cpu.cpu_schedule import host_target
    from tvm_ethos.host.cpu.host_cpu import building_for, cpu_record

    with building_for(tl.host.options.get("mcpu")):
        return cpu_record(host_target())


def output_specs(mod) -> list[IOSpec]:
    """The outputs as the source model declares them: its names and shapes
    (tvm_ethos/frontend/relax_module.py records them; TVM's importers lose both), the module's
    own where the source gives none or a shape with another element count (a dynamic
    dimension)."""
    attrs = mod.attrs if mod.attrs is not None else {}
    names = [str(n) for n in attrs[OUTPUT_NAMES_ATTR]] if OUTPUT_NAMES_ATTR in attrs else []
    shapes = (
        [tuple(int(d) for d in s) for s in attrs[OUTPUT_SHAPES_ATTR]]
        if OUTPUT_SHAPES_ATTR in attrs
        else []
    )
    rt = mod["main"].ret_ty
    fields = list(rt.fields) if hasattr(rt, "fields") else [rt]
    outs = []
    for i, t in enumerate(fields):
        try:
            shape = tuple(int(d) for d in t.shape.values)
        except Exception:   # a dynamic shape: nothing to check a run's outputs against
            continue
        name = names[i] if i < len(names) and len(names) == len(fields) else f"output_{i}"
        src = shapes[i] if i < len(shapes) and len(shapes) == len(fields) else shape
        if all(d > 0 for d in src) and int(np.prod(src, dtype=np.int64)) == int(
            np.prod(shape, dtype=np.int64)
        ):
            shape = src
        outs.append(IOSpec(name, shape, str(t.dtype)))
    return outs
