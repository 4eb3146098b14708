"""What the NPU backends share: common constraints, the emulator codegen, the host codegen, the
NPUs' memory capabilities."""
from __future__ import annotations

import numpy as np

from tvm_ethos.backends.base import Capabilities, EmulatorLowering
from tvm_ethos.backends.base import NpuBackend as NpuContract

INT8_TYPES = ("int8", "uint8")


def shape_ok(shape, max_dim=65536):
    return all(isinstance(d, int) and 1 <= d <= max_dim for d in shape)


def common_npu_checks(q, options, act_types=INT8_TYPES, max_rank=4, max_dim=65536,
                      bias_types=("int32",)) -> list[str]:
    """Constraints every NPU operator has: integer types, rank, batch 1, dimension limits."""
    r = []
    for k, (shp, dt) in enumerate(zip(q.in_shapes, q.in_dtypes)):
        if dt not in act_types:
            r.append(f"input {k} has type {dt}; supported: {', '.join(act_types)}")
        if len(shp) > max_rank:
            r.append(f"input {k} is {len(shp)}-D; at most {max_rank}-D")
        if len(shp) == 4 and shp[0] != 1:
            r.append(f"batch size {shp[0]}; only batch 1")
        if not shape_ok(shp, max_dim):
            r.append(f"input {k} shape {shp} has a dimension outside [1, {max_dim}]")
    if q.out_dtype not in act_types:
        r.append(f"output has type {q.out_dtype}; supported: {', '.join(act_types)}")
    if not shape_ok(q.out_shape, max_dim):
        r.append(f"output shape {q.out_shape} has a dimension outside [1, {max_dim}]")
    if q.bias is not None and str(q.bias.dtype) not in bias_types:
        r.append(f"bias has type {q.bias.dtype}; only {', '.join(bias_types)}")
    if q.weights is not None and q.w_dtype not in INT8_TYPES:
        r.append(f"weights have type {q.w_dtype}; only 8-bit")
    for k, lay in (("data_layout", "NHWC"), ("layout", "NHWC"), ("out_layout", "NHWC")):
        if k in q.attrs and q.attrs[k] != lay:
            r.append(f"{k} {q.attrs[k]}; only {lay}")
    return r


def reshape_rank(q, options, max_rank=4) -> list[str]:
    """RESHAPE: the output rank too (common checks look at inputs); TVM's DEPTH_TO_SPACE
    reshapes through a 6-D tensor, which no NPU holds."""
    if len(q.out_shape) > max_rank:
        return [f"output is {len(q.out_shape)}-D; at most {max_rank}-D"]
    return []


def weight_sum_ok(q, limit=127 * 65536) -> bool:
    """Vela: the sum of |w - zp| over one output channel's weights must not exceed 127*65536."""
    w = q.weights.astype(np.int64)
    zp = np.broadcast_to(np.asarray(q.w_zp, dtype=np.int64), (w.shape[-1],))
    sums = np.abs(w - zp).reshape(-1, w.shape[-1]).sum(axis=0)
    return bool(np.all(sums <= limit))


#: NPU ids whose ``relax.ext.<id>`` is registered (registration is idempotent)
_REGISTERED: set[str] = set()


def _ext(functions, options, constant_names):
    # lazy: the emulator codegen imports all of TVM; it loads when RunCodegen first calls, so
    # registering the codegens needs tvm_ffi alone
    from tvm_ethos.pipeline.codegen import _npu_ext

    return _npu_ext(functions, options, constant_names)


def register_ext(name: str) -> None:
    """Register ``relax.ext.<name>`` as the NPU emulator codegen (idempotent)."""
    if name in _REGISTERED:
        return
    # lazy: tvm_ethos registers once tvm_ffi is loaded (tvm_ethos/after_import.py); the backend
    # loads on every compile, a .tflite compile without TVM included, which needs no tvm_ffi
    import tvm_ffi

    tvm_ffi.register_global_func(f"relax.ext.{name}", _ext, override=True)
    _REGISTERED.add(name)


class NpuCodegen:
    """Codegen of an NPU: ``relax.ext.<id>`` lowers each subgraph to TE with TFLite-exact integer
    arithmetic and builds it for the host: the NPU emulator kernel."""

    kind = "npu"

    def __init__(self, backend_id: str):
        self.name = backend_id

    def register(self):
        register_ext(self.name)


class HostCodegen:
    """Codegen of a host (fallback) target.

    ``build_target``: what its kernels are built for inside the Relax VM executable (llvm: the
    executable runs anywhere); ``device_target``: where the executor runs them (``"llvm"``, or
    ``"opencl"``: TVM's GPU pipeline, launched through PyOpenCL).
    """

    kind = "host"

    def __init__(self, backend_id: str, build_target: str, device_target: str | None = None):
        self.name = backend_id
        self.build_target = build_target
        self.device_target = device_target or build_target

    def register(self):
        pass


#: The memory an NPU imports (the host's, or a dma-buf) and exports (a dma-buf only), so every
#: edge from it to a host needs fallback memory.
NPU_CAPABILITIES = Capabilities(
    memory_alignment=64,
    import_memory_sources=frozenset({"malloc", "dma_buf"}),
    export_memory_sources=frozenset({"dma_buf"}),
    fallback_import_memory_required=True,
    is_host=False,
    is_npu=True,
)


def no_stream_lines(entry: dict) -> list[str]:
    """The plan table's line for a subgraph that has no command stream."""
    return [f"   command stream: none, the subgraph runs on the emulator: "
            f"{entry.get('reason', 'its backend makes none')}"]


class EmulatedNpuBackend(NpuContract):
    """An NPU the emulator alone runs: no planner model, no options, no command stream; only
    its pattern table (``layer_support``) to write. What a third-party accelerator written
    for Backend API 1.0 subclasses (as ``npu_common.NpuBackend``)."""

    def options_schema(self):
        return {}

    def codegen_factory(self):
        return NpuCodegen(self.backend_id)

    def capabilities(self) -> Capabilities:
        return NPU_CAPABILITIES

    def planner_device_name(self, options):
        return None

    def planner_sram_size(self, options):
        return None

    def planner_device_names(self):
        return ()

    def emulator_lowering(self):
        return EmulatorLowering()

    def command_stream(self, lowered, options: dict, planned=None):
        return None

    def stream_report(self, payload, planned_peak: int | None) -> dict:
        raise NotImplementedError(f"{self.backend_id} makes no command stream")

    def stream_report_lines(self, entry: dict) -> list[str]:
        return no_stream_lines(entry)


#: Backend API 1.0's name of :class:`EmulatedNpuBackend` (third-party NPUs subclass it).
NpuBackend = EmulatedNpuBackend
