"""``compile`` and ``CompiledModel``: partition, NPU codegen, host build, save and load."""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import zipfile
from dataclasses import dataclass

import numpy as np

from tvm_ethos.errors import CompileError, ModelLoadError, TvmEthosError

FORMAT_VERSION = 1
_META = "meta.json"
_LIB = "model.so"


@dataclass
class IOSpec:
    name: str
    shape: tuple
    dtype: str


class CompiledModel:
    """A compiled network: a Relax VM executable plus what was decided on the way."""

    def __init__(self, executable, targets: str, report, inputs: list[IOSpec], outputs: list[IOSpec] | None = None):
        self.executable = executable
        self.targets = targets
        self.report = report
        self.inputs = inputs
        self.outputs = outputs or []
        self._vm = None
        self._network_id = None

    # ------------------------------------------------------------------ running
    @property
    def vm(self):
        if self._vm is None:
            import tvm
            from tvm import relax

            self._vm = relax.VirtualMachine(self.executable, tvm.cpu())
        return self._vm

    def run(self, *inputs) -> list[np.ndarray]:
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
    def partition_report(self):
        return self.report

    # ------------------------------------------------------------------ save / load
    def save(self, path) -> str:
        """Write one file (a zip holding the executable's shared library and metadata)."""
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
            }
            with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as z:
                z.write(lib, _LIB)
                z.writestr(_META, json.dumps(meta))
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


def load(path) -> CompiledModel:
    """Load a model written by ``CompiledModel.save`` (works in a fresh process)."""
    import tvm

    from tvm_ethos.backends.registry import get_registry
    from tvm_ethos.partition import PartitionReport

    path = os.fspath(path)
    if not os.path.isfile(path):
        raise ModelLoadError(f"compiled model not found: {path}")
    try:
        z = zipfile.ZipFile(path)
        meta = json.loads(z.read(_META))
    except (zipfile.BadZipFile, KeyError, ValueError) as err:
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
        z.extract(_LIB, tmp)
        lib = tvm.runtime.load_module(os.path.join(tmp, _LIB))
    except Exception as err:
        raise ModelLoadError(f"{path}: cannot load the executable: {err}") from None
    ex = tvm.runtime.Executable(lib) if not hasattr(lib, "jit") else lib
    report = PartitionReport.from_json(meta["report"]) if meta.get("report") else None
    ins = [IOSpec(n, tuple(s), d) for n, s, d in meta["inputs"]]
    outs = [IOSpec(n, tuple(s), d) for n, s, d in meta["outputs"]]
    return CompiledModel(ex, meta["targets"], report, ins, outs)


def compile(mod, target: str = "ethos-n,llvm", **options) -> CompiledModel:  # noqa: A001
    """Partition ``mod`` for ``target``, build NPU subgraphs as emulator kernels and the rest for
    the host, and return a :class:`CompiledModel`. Options are validated up front."""
    import tvm

    from tvm_ethos.backends.registry import get_registry
    from tvm_ethos.frontend import load_model
    from tvm_ethos.lower.codegen import lower_host_composites, run_npu_codegen
    from tvm_ethos.lower.pipeline import PIPELINE_NAME
    from tvm_ethos.partition import partition
    from tvm_ethos.targets import parse_targets

    tl = parse_targets(target, options)  # raises TargetError / OptionError before any work
    if not isinstance(mod, tvm.IRModule):
        mod = load_model(mod)
    pmod, report = partition(mod, tl)
    reg = get_registry()
    npu_opts = {t.backend_id: t.options for t in tl.accelerators}
    host_backend = reg.get(tl.host.backend_id)
    build_target = host_backend.codegen_factory().build_target
    try:
        pmod = run_npu_codegen(pmod, npu_opts)
        pmod = lower_host_composites(pmod, tl.host.backend_id)
        ex = tvm.compile(pmod, target=build_target, tir_pipeline=PIPELINE_NAME)
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
    return CompiledModel(ex, str(tl), report, ins, outs)
