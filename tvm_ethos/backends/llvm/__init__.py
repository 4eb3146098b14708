"""The CPU host backend: quantized operators as exact integer kernels, the rest through TVM, for llvm."""
from tvm_ethos.backends.base import BACKEND_API_VERSION
from tvm_ethos.backends.host_common import HostBackend

BACKEND_ID = "llvm"


class LlvmBackend(HostBackend):
    backend_id = BACKEND_ID
    build_target = "llvm"


class _Plugin:
    @staticmethod
    def get_backend_id():
        return BACKEND_ID

    @staticmethod
    def get_version():
        return BACKEND_API_VERSION

    @staticmethod
    def backend_factory():
        return LlvmBackend()


plugin = _Plugin()
