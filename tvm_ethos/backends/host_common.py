"""Host (fallback) backends: the quantized operators they run with TFLite-exact integer kernels.

A host backend takes every quantized operator tvm-ethos has an exact integer kernel for; those
become ``R.call_tir`` of the same TE kernels the NPU emulator uses, built by TVM's normal
pipeline for the host target. Everything else (float operators) goes through TVM's legalization.
"""
from __future__ import annotations

from ethos_arch.mean_window import mean_kernel
from ethos_arch.ops import Op
from tvm_ethos.backends.base import Capabilities, HostOutput, LayerSupport
from tvm_ethos.backends.base import HostBackend as HostContract
from tvm_ethos.backends.npu_common import HostCodegen


def _nhwc(q, o):
    r = []
    for k in ("data_layout", "layout"):
        if k in q.attrs and q.attrs[k] != "NHWC":
            r.append(f"{k} {q.attrs[k]}; the integer kernels take NHWC")
    if q.kind in (Op.AVG_POOL2D, Op.MAX_POOL2D) and q.attrs.get("ceil_mode"):
        r.append("ceil_mode pooling")
    if q.kind == Op.AVG_POOL2D and q.attrs.get("count_include_pad"):
        r.append("average pool counting padding")
    if q.kind == Op.MEAN and not _host_mean(q):
        r.append(
            f"mean over axes {q.attrs.get('axis')}; the integer kernel reduces H and W of NHWC"
            " (or either alone, or the first axes of a 2-D or 3-D tensor)"
        )
    # ARG_MAX writes indices (int32 or int64, ``patterns._read_arg_max``), not codes; a
    # QUANTIZE into int32 (``patterns``' wide quantize) TFLite's int32 requantization
    wide = q.kind == Op.ARG_MAX or (q.kind == Op.REQUANTIZE and q.out_dtype == "int32")
    for dt in list(q.in_dtypes) + ([] if wide else [q.out_dtype]):
        if dt not in ("int8", "uint8", "int16"):
            r.append(f"type {dt}; the integer kernels take int8, uint8 and int16")
    return r


def _host_mean(q) -> bool:
    """H and W of NHWC (any batch), or the height, the width or both of the NHWC view of a
    2-D to 4-D tensor (``ethos_arch.mean_window``): the reductions ``te_ops.lower_mean``
    computes as TFLite's integer MEAN."""
    axis, shape = q.attrs.get("axis"), tuple(q.in_shapes[0])
    if axis in ((1, 2), (2, 1)) and len(shape) == 4:
        return True
    return bool(axis) and len(set(axis)) == len(axis) and \
        mean_kernel((1,) + shape[1:] if len(shape) == 4 else shape, axis) is not None


def _ok(q, o):
    return []


def host_checks():
    from tvm_ethos.compute.te_ops import LOWERINGS

    return {k: _ok for k in LOWERINGS}


def kernel_layer_support() -> LayerSupport:
    """Every quantized operator with an exact integer kernel, in NHWC."""
    return LayerSupport(host_checks(), common=_nhwc)


#: A CPU host's memory: the process's own, imported and exported as is.
CPU_CAPABILITIES = Capabilities(
    memory_alignment=64,
    import_memory_sources=frozenset({"malloc"}),
    export_memory_sources=frozenset({"malloc"}),
    fallback_import_memory_required=False,
    is_host=True,
    is_npu=False,
)


class KernelHostBackend(HostContract):
    """A host whose kernels TVM builds (``build_target`` in the Relax VM executable, run on
    ``device_target``) into a package: write its ``backend_id``, targets and options."""

    build_target = "llvm"
    device_target = "llvm"

    def options_schema(self):
        return {}

    def host_output(self):
        return HostOutput.PACKAGE

    def layer_support(self):
        return kernel_layer_support()

    def codegen_factory(self):
        return HostCodegen(self.backend_id, self.build_target, self.device_target)

    def capabilities(self):
        return CPU_CAPABILITIES


#: Backend API 1.0's name of :class:`KernelHostBackend` (third-party hosts subclass it).
HostBackend = KernelHostBackend
