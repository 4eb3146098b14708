"""The GPU host backend (OpenCL).

Its subgraphs run on an OpenCL device through PyOpenCL (``device_target = "opencl"``): the
compiler takes TVM's OpenCL C for them (default GPU schedules, dlight;
tvm_ethos/host/opencl/opencl_extraction.py) and the executor launches it
(tvm_ethos/runtime/opencl_device.py, rfcs/0003). Inside the Relax VM executable
(``CompiledModel.executable``) the same operators are built for llvm (``build_target``), so
that executable still runs anywhere.

Option ``cpu_ops``: operator kinds or TFLite names (``softmax``, ``AVERAGE_POOL_2D``...) the GPU
leaves to the CPU (the llvm backend), like an operator a GPU backend rejects in Arm NN's
``GpuAcc, CpuAcc`` preference list. Several: ``+``-separated (``softmax+mean``) or a list.

Option ``tiling``: the register tile of the conv / depthwise / pooling kernels,
``THREADSxCOLUMNSxLANES`` (``tvm_ethos/host/opencl/gpu_schedule.py``). The default,
``64x2x4``, suits devices with few compute units (PoCL on a CPU, and the same reasoning holds
for a mobile GPU); a large discrete GPU wants one output per work-item to fill its cores
(``256x1x1``; rfcs/0008).
"""
from tvm_ethos.backends.base import (
    BACKEND_API_VERSION,
    Capabilities,
    HostBackend,
    HostOutput,
    OptionSpec,
    Plugin,
)
from tvm_ethos.backends.host_common import kernel_layer_support
from tvm_ethos.backends.npu_common import HostCodegen

BACKEND_ID = "opencl"


def _ops_ok(value) -> bool:
    if isinstance(value, str):
        return True
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def _tiling_ok(value) -> bool:
    from tvm_ethos.host.opencl.gpu_schedule import parse_tiling

    try:
        parse_tiling(value)
    except ValueError:
        return False
    return True


class OpenclBackend(HostBackend):
    """The GPU host's whole contract: the integer kernels as OpenCL C, launched by the
    executor, in a package."""

    backend_id = BACKEND_ID
    build_target = "llvm"  # the VM executable's copy of these kernels
    device_target = "opencl"  # what the executor runs

    def options_schema(self):
        return {
            "cpu_ops": OptionSpec(
                "", validator=_ops_ok,
                help="operator kinds or TFLite names to run on the CPU (llvm) instead of the GPU, "
                "'+'-separated or a list",
            ),
            "tiling": OptionSpec(
                "64x2x4", validator=_tiling_ok,
                help="work-items per work-group x output columns x output channels per work-item, "
                "powers of two, e.g. 64x2x4 (PoCL, small GPUs) or 256x1x1 (large discrete GPUs)",
            ),
        }

    def capabilities(self):
        # Like Arm NN's ClImportTensorHandleFactory: the GPU imports host memory
        # (CL_MEM_USE_HOST_PTR over malloc, memfd or a mapped dma-buf) but cannot export its
        # own, so every edge leaving it needs fallback memory. The device's own facts
        # (alignment, unified memory) come from the OpenCL driver at load time.
        return Capabilities(
            memory_alignment=128,
            import_memory_sources=frozenset({"malloc", "memfd", "dma_buf"}),
            export_memory_sources=frozenset(),
            fallback_import_memory_required=True,
            is_host=True,
            is_npu=False,
        )

    def layer_support(self):
        return kernel_layer_support()

    def codegen_factory(self):
        return HostCodegen(self.backend_id, self.build_target, self.device_target)

    def host_output(self):
        return HostOutput.PACKAGE


plugin = Plugin(BACKEND_ID, BACKEND_API_VERSION, OpenclBackend)
