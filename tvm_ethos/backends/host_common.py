"""Host (fallback) backends: the quantized operators they run with TFLite-exact integer kernels.

A host backend takes every quantized operator tvm-ethos has an exact integer kernel for; those
become ``R.call_tir`` of the same TE kernels the NPU emulator uses, built by TVM's normal
pipeline for the host target. Everything else (float operators) goes through TVM's legalization.
"""
from __future__ import annotations

from ethos_arch.ops import Op
from tvm_ethos.backends.base import Backend, Capabilities, LayerSupport
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
    if q.kind == Op.MEAN and (
        q.attrs.get("axis") not in ((1, 2), (2, 1)) or len(q.in_shapes[0]) != 4
    ):
        r.append(
            f"mean over axes {q.attrs.get('axis')}; the integer kernel reduces H and W of NHWC"
        )
    for dt in list(q.in_dtypes) + [q.out_dtype]:
        if dt not in ("int8", "uint8", "int16"):
            r.append(f"type {dt}; the integer kernels take int8, uint8 and int16")
    return r


def _ok(q, o):
    return []


def host_checks():
    from tvm_ethos.lower.te_ops import LOWERINGS

    return {k: _ok for k in LOWERINGS}


class HostBackend(Backend):
    build_target = "llvm"
    device_target = "llvm"

    def layer_support(self):
        return LayerSupport(host_checks(), common=_nhwc)

    def codegen_factory(self):
        return HostCodegen(self.backend_id, self.build_target, self.device_target)

    def capabilities(self):
        return Capabilities(
            memory_alignment=64,
            import_memory_sources=frozenset({"malloc"}),
            export_memory_sources=frozenset({"malloc"}),
            fallback_import_memory_required=False,
            is_host=True,
            is_npu=False,
        )
