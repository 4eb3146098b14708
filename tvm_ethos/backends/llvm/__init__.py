"""The CPU host backend: quantized operators as exact integer kernels, the rest through TVM, for
llvm.

Option ``mcpu``: the LLVM CPU the host code is built for (``haswell``, ``znver3``,
``x86-64-v3``...); empty, the compiling machine's. A model runs only on CPUs with every
extension of that one (tvm_ethos/runtime/host_cpu.py checks it at load), so a model for older
machines is built for them: ``--target "llvm -mcpu=x86-64-v3"``.
"""
from tvm_ethos.backends.base import BACKEND_API_VERSION, OptionSpec, Plugin
from tvm_ethos.backends.host_common import KernelHostBackend

BACKEND_ID = "llvm"


def _cpu_ok(value) -> bool:
    from tvm_ethos.host.cpu.host_cpu import is_valid_cpu

    return value == "" or is_valid_cpu(value)


class LlvmBackend(KernelHostBackend):
    """The CPU host's whole contract: the integer kernels built by TVM for llvm, in a package."""

    backend_id = BACKEND_ID

    def options_schema(self):
        return {
            "mcpu": OptionSpec(
                "", validator=_cpu_ok,
                help="an LLVM CPU name of this machine's architecture, e.g. haswell, znver3, "
                "cascadelake, x86-64-v3 (empty: this machine's CPU)",
            ),
        }



plugin = Plugin(BACKEND_ID, BACKEND_API_VERSION, LlvmBackend)
