"""The CPU host backend: quantized operators as exact integer kernels, the rest through TVM, for
llvm.

Option ``mcpu``: the LLVM CPU the host code is built for (``haswell``, ``znver3``,
``x86-64-v3``...); empty, the compiling machine's. A model runs only on CPUs with every
extension of that one (tvm_ethos/runtime/host_cpu.py checks it at load), so a model for older
machines is built for them: ``--target "llvm -mcpu=x86-64-v3"``.
"""
from tvm_ethos.backends.base import BACKEND_API_VERSION, HostBackend, HostOutput, OptionSpec, Plugin
from tvm_ethos.backends.host_common import CPU_CAPABILITIES, kernel_layer_support
from tvm_ethos.backends.npu_common import HostCodegen

BACKEND_ID = "llvm"


def _cpu_ok(value) -> bool:
    from tvm_ethos.host.cpu.host_cpu import is_valid_cpu

    return value == "" or is_valid_cpu(value)


class LlvmBackend(HostBackend):
    """The CPU host's whole contract: the integer kernels built by TVM for llvm, in a package."""

    backend_id = BACKEND_ID
    build_target = "llvm"
    device_target = "llvm"

    def options_schema(self):
        return {
            "mcpu": OptionSpec(
                "", validator=_cpu_ok,
                help="an LLVM CPU name of this machine's architecture, e.g. haswell, znver3, "
                "cascadelake, x86-64-v3 (empty: this machine's CPU)",
            ),
        }

    def layer_support(self):
        return kernel_layer_support()

    def codegen_factory(self):
        return HostCodegen(self.backend_id, self.build_target, self.device_target)

    def capabilities(self):
        return CPU_CAPABILITIES

    def host_output(self):
        return HostOutput.PACKAGE


plugin = Plugin(BACKEND_ID, BACKEND_API_VERSION, LlvmBackend)
