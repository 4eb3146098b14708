"""A lighter TIR pipeline for the OpenCL kernels (registered as ``"tvm_ethos_gpu"``).

TVM's default pipeline (``s_tir``) with the passes left out that only restructure or simplify
control flow and index expressions: ``LoopPartition``, ``HoistIfThenElse``, ``RemoveNoOp``,
``RenormalizeSplitPattern`` and the late ``StmtSimplify`` (here and in the device
finalisation; the early ``s_tir.StmtSimplify`` stays). On the exact integer kernels (padded
reads guarded by ``if_then_else``, dlight-scheduled) they take nearly all of the lowering time
(rfcs/0003 section 7.2, measured with ``PassTimingInstrument``) and change no arithmetic: the
OpenCL tests compare bit for bit with TFLite.
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx

GPU_PIPELINE_NAME = "tvm_ethos_gpu"


def _passes(config):
    passes = [
        s_tir.transform.CanonicalizeLoop(),
        s_tir.transform.LowerCrossThreadReduction(),
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.LiftThreadBinding(),
        s_tir.transform.ManifestSharedMemoryLocalStage(),
        s_tir.transform.CompactBufferAllocation(),
        s_tir.transform.LowerAutoCopy(),
        s_tir.transform.UnifyThreadBinding(),
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.StmtSimplify(),
        s_tir.transform.InjectPermutedLayout(),
        s_tir.transform.AnnotateIrregularLoop(),
        s_tir.transform.InjectSoftwarePipeline(),
        s_tir.transform.TransformMmaBufferLayout(),
        s_tir.transform.LowerOpaqueBlock(),
        tirx.transform.FlattenBuffer(),
        tirx.transform.BF16ComputeLegalize(),
        tirx.transform.NarrowDataType(32),
        tirx.transform.VectorizeLoop(not bool(config.get("tirx.disable_vectorize", False))),
        s_tir.transform.InjectVirtualThread(),
        s_tir.transform.InjectDoubleBuffer(),
        tirx.transform.StorageRewrite(),
        tirx.transform.UnrollLoop(),
        s_tir.transform.RewriteUnsafeSelect(),
        tirx.transform.CommonSubexprElim(),
        tirx.transform.FP8ComputeLegalize(),
        tirx.transform.VerifyMemory(),
        tirx.transform.AnnotateEntryFunc(),
        s_tir.transform.ThreadSync("shared"),
        s_tir.transform.ThreadSync("shared.dyn"),
        s_tir.transform.ThreadSync("warp"),
        s_tir.transform.InferFragment(),
        s_tir.transform.LowerThreadAllreduce(),
        s_tir.transform.MergeSharedMemoryAllocations(),
        tirx.transform.SplitHostDevice(),
        tirx.transform.MakePackedAPI(),
        tirx.transform.FP8StorageLegalize(),
        tirx.transform.BF16StorageLegalize(),
    ]
    return passes


def _finalize_device():
    return tvm.ir.transform.Sequential(
        [tirx.transform.LowerWarpMemory(), tirx.transform.LowerIntrin()]
    )


def tvm_ethos_gpu_pipeline():
    @tvm.transform.module_pass(opt_level=0)
    def _pipeline(mod, _ctx):
        cfg = tvm.transform.PassContext.current().config
        return tvm.ir.transform.Sequential(_passes(cfg))(mod)

    return _pipeline, s_tir.pipeline.finalize_host_passes, _finalize_device


def register() -> str:
    tirx.register_tir_pipeline(GPU_PIPELINE_NAME, tvm_ethos_gpu_pipeline)
    return GPU_PIPELINE_NAME


register()
