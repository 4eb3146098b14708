"""The CPU host backend: quantized operators as exact integer kernels, the rest through TVM, for
llvm."""
from tvm_ethos.backends.base import BACKEND_API_VERSION, Plugin
from tvm_ethos.backends.host_common import HostBackend

BACKEND_ID = "llvm"


class LlvmBackend(HostBackend):
    backend_id = BACKEND_ID
    build_target = "llvm"


plugin = Plugin(BACKEND_ID, BACKEND_API_VERSION, LlvmBackend)
