"""A lighter TIR pipeline for the emulator kernels and the exact host kernels.

The integer kernels guard padded reads with ``if_then_else``; TVM's default CPU pipeline then
spends most of its time in ``HoistIfThenElse``, ``RemoveNoOp`` and ``LoopPartition`` (figures in
rfcs/0002), which buy nothing for these loops. This pipeline runs the lowering passes a CPU
build needs and leaves those three out. Registered as ``"tvm_ethos"``.
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx

PIPELINE_NAME = "tvm_ethos"


def _passes():
    cfg = tvm.transform.PassContext.current().config
    seq = [
        s_tir.transform.CanonicalizeLoop(),
        s_tir.transform.LowerCrossThreadReduction(),
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.CompactBufferAllocation(),
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.StmtSimplify(),
        s_tir.transform.LowerOpaqueBlock(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.NarrowDataType(32),
        tirx.transform.VectorizeLoop(not bool(cfg.get("tirx.disable_vectorize", False))),
        tirx.transform.StorageRewrite(),
        tirx.transform.UnrollLoop(),
        tirx.transform.StmtSimplify(),
        s_tir.transform.RewriteUnsafeSelect(),
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
        tirx.transform.SplitHostDevice(),
        tirx.transform.MakePackedAPI(),
    ]
    return seq


def tvm_ethos_pipeline():
    @tvm.transform.module_pass(opt_level=0)
    def _pipeline(mod, _ctx):
        return tvm.ir.transform.Sequential(_passes())(mod)

    return _pipeline, s_tir.pipeline.finalize_host_passes, s_tir.pipeline.finalize_device_passes


def register() -> str:
    tirx.register_tir_pipeline(PIPELINE_NAME, tvm_ethos_pipeline)
    return PIPELINE_NAME


register()
