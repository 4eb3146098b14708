"""The GPU host backend (OpenCL).

For now its kernels are built for llvm (``build_target``): OpenCL execution through PyOpenCL is
the runtime's work (tvm_ethos/runtime/opencl_device.py). The seam is this backend's
``build_target`` and ``capabilities`` (dma-buf / malloc import for the zero-copy fallback).
"""
from tvm_ethos.backends.base import BACKEND_API_VERSION, Capabilities
from tvm_ethos.backends.host_common import HostBackend

BACKEND_ID = "opencl"


class OpenclBackend(HostBackend):
    backend_id = BACKEND_ID
    build_target = "llvm"  # TODO(runtime): "opencl" once the PyOpenCL executor lands

    def capabilities(self):
        return Capabilities(
            memory_alignment=4096,
            import_memory_sources=frozenset({"malloc", "dma_buf"}),
            export_memory_sources=frozenset({"malloc"}),
            fallback_import_memory_required=False,
            is_host=True,
            is_npu=False,
        )


class _Plugin:
    @staticmethod
    def get_backend_id():
        return BACKEND_ID

    @staticmethod
    def get_version():
        return BACKEND_API_VERSION

    @staticmethod
    def backend_factory():
        return OpenclBackend()


plugin = _Plugin()
