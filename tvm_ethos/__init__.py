"""tvm-ethos: compile int8 networks for Arm Ethos-N / Ethos-U NPUs with TVM, with a host fallback.

    import tvm_ethos
    mod = tvm_ethos.load_model("model.tflite")          # Relax IRModule (QDQ)
    cm = tvm_ethos.compile(mod, target="ethos-n,llvm")  # CompiledModel
    tm = tvm_ethos.compile("m.tflite", target="ethos-u") # a TFLite Micro .tflite (tflite-micro
    tm.export_tflite("m_ethos_u.tflite")                # host: other operators stay TFLite's)
    outputs = cm.run(x)                                 # list of numpy arrays
    cm.partition_summary                                # {"ethos-n": 27, "llvm": 3}
    print(tvm_ethos.partition_report(mod, "ethos-u,llvm"))
    cm.save("model.tvmethos"); cm2 = tvm_ethos.load("model.tvmethos")

The TVM way (importing tvm_ethos registers ``relax.ext.ethos-u`` / ``relax.ext.ethos-n`` and
every plugin NPU's codegen)::

    mod = tvm_ethos.partition_for_ethos_u(mod)           # planned, scheduled, NPU code built
    # mod = tvm_ethos.partition_for(mod, "ethos-n,ethos-u,llvm")   # any target list
    ex = tvm.compile(mod, target="llvm")
    outputs = relax.VirtualMachine(ex, tvm.cpu())["main"](*inputs)

The NPU subgraphs run on an emulator: their TE, with TFLite-exact integer arithmetic, built for
the host. Design record: rfcs/0002-byoc-and-backends.md.
"""
from tvm_ethos._version import __version__
from tvm_ethos.after_import import after_import
from tvm_ethos.errors import (
    BackendError,
    CompileError,
    MemoryBudgetError,
    ModelLoadError,
    OptionError,
    TargetError,
    TvmEthosError,
    UnsupportedModelError,
)
from tvm_ethos.runtime.host_threads import default_threads as _default_threads

__all__ = [
    "BackendError",
    "CompileError",
    "CompiledModel",
    "MemoryBudgetError",
    "ModelLoadError",
    "OptionError",
    "TargetError",
    "TvmEthosError",
    "UnsupportedModelError",
    "__version__",
    "compile",
    "compile_tflite",
    "load",
    "load_model",
    "parse_targets",
    "partition_for",
    "partition_for_ethos_n",
    "partition_for_ethos_u",
    "partition_report",
    "plan_report",
]

# before any host kernel runs: TVM's thread pool reads TVM_NUM_THREADS once per thread
_default_threads()


def __getattr__(name):
    # heavy imports (tvm) only when used
    if name == "load_model":
        from tvm_ethos.frontend import load_model

        return load_model
    if name in ("compile", "load", "CompiledModel"):
        from tvm_ethos import compiler

        return getattr(compiler, name)
    if name == "partition_report":
        from tvm_ethos import partition as _p

        return getattr(_p, name)
    if name in ("partition_for", "partition_for_ethos_n", "partition_for_ethos_u", "plan_report"):
        from tvm_ethos import byoc

        return getattr(byoc, name)
    if name == "compile_tflite":
        from tvm_ethos.backends.tflite_micro.compile import compile_tflite

        return compile_tflite
    if name == "parse_targets":
        from tvm_ethos.targets import parse_targets

        return parse_targets
    raise AttributeError(f"module 'tvm_ethos' has no attribute {name!r}")


def _register_codegens():
    from tvm_ethos.byoc import register_codegens

    register_codegens()


# the codegens are tvm_ffi's global functions: registered once tvm_ffi loads (by the user's
# import tvm or a TVM path of ours), so a compile that takes no TVM path never loads it
after_import("tvm_ffi", _register_codegens)
