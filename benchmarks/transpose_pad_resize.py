"""TRANSPOSE, PAD before a convolution and RESIZE_BILINEAR on the Ethos-U: tvm-ethos's
generated streams beside Vela 5.2 (issue 28).

For each one- or two-operator model below, compiled for ethos-u55-128 with the llvm host
(``npu_runtime="stream"``, the planner's default plan): the operators each leaves on the CPU,
the NPU operations each runs (Vela: its passes after fusing; ours: the stream's NPU_OP_*
commands), the SRAM each uses (Vela ``--optimise Size``'s "Total SRAM used"; ours: the
emulated high-water mark the functional model records) and ours' working memory beyond the
plan. Prints one table.

    PYTHONPATH=. python benchmarks/transpose_pad_resize.py [case ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

import tflite_builder as tb  # noqa: E402
from test_pad_fold import pad_conv_model  # noqa: E402
from test_tflite_transpose import transpose_model  # noqa: E402

import tvm_ethos  # noqa: E402
from benchmarks.movement_ops import vela  # noqa: E402

CONFIG = "ethos-u55-128"

CASES = {
    "transpose_hw_1x16x16x8": lambda: transpose_model((1, 16, 16, 8), (0, 2, 1, 3)),
    "transpose_nchw_1x16x16x8": lambda: transpose_model((1, 16, 16, 8), (0, 3, 1, 2)),
    "transpose_wc_1x16x16x8": lambda: transpose_model((1, 16, 16, 8), (0, 1, 3, 2)),
    "transpose_rev_2x8x6x4": lambda: transpose_model((2, 8, 6, 4), (3, 2, 1, 0)),
    "pad1_conv3x3_1x16x16x8": lambda: pad_conv_model(np.random.RandomState(0), (1, 16, 16, 8),
                                                     (1, 1, 1, 1), (3, 3), (1, 1)),
    "pad01_conv3x3s2_1x16x16x8": lambda: pad_conv_model(np.random.RandomState(0),
                                                        (1, 16, 16, 8), (0, 1, 0, 1), (3, 3),
                                                        (2, 2)),
    "pad2_conv3x3_1x16x16x8": lambda: pad_conv_model(np.random.RandomState(0), (1, 16, 16, 8),
                                                     (2, 2, 2, 2), (3, 3), (1, 1)),
    "bilinear_2x_1x8x8x8": lambda: tb.resize_bilinear(in_shape=(1, 8, 8, 8), size=(16, 16)),
    "bilinear_4x_1x8x8x8": lambda: tb.resize_bilinear(in_shape=(1, 8, 8, 8), size=(32, 32)),
    "bilinear_8x_1x4x4x8": lambda: tb.resize_bilinear(in_shape=(1, 4, 4, 8), size=(32, 32)),
    "bilinear_2x_hp_1x8x8x8": lambda: tb.resize_bilinear(in_shape=(1, 8, 8, 8), size=(16, 16),
                                                         half_pixel=True),
    "bilinear_4x_ac_1x8x8x8": lambda: tb.resize_bilinear(in_shape=(1, 8, 8, 8), size=(29, 29),
                                                         align_corners=True),
}


def ours(model: bytes) -> dict:
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={CONFIG},llvm",
                           npu_runtime="stream", cache_dir=False)
    streams = [e for e in cm.plan_report.get("streams", {}).values() if e.get("generated")]
    return {
        "cpu": sum(op.placed_on != "ethos-u" for op in cm.partition_report.operators),
        "npu_ops": sum(n for e in streams for k, n in e["commands"].items()
                       if k.startswith("NPU_OP_") and k != "NPU_OP_STOP"),
        "sram": sum(e.get("sram_high_water_bytes", 0) for e in streams),
        "work": sum(e.get("work_bytes", 0) for e in streams),
    }


def main(names: list[str]) -> None:
    print(f"{'case':28} {'CPU ops':>12} {'NPU ops':>12} {'SRAM B':>16} {'work B':>7}")
    print(f"{'':28} {'vela / ours':>12} {'vela / ours':>12} {'vela / ours':>16}")
    for name in names or list(CASES):
        model = CASES[name]()
        v, o = vela(model, CONFIG), ours(model)
        if "error" in v:
            v = {"cpu": "-", "npu_ops": "-", "sram": "-"}
        print(f"{name:28} {v['cpu']:>5} / {o['cpu']:<4} {v['npu_ops']:>5} / {o['npu_ops']:<4} "
              f"{v['sram']:>7} / {o['sram']:<6} {o['work']:>7}")


if __name__ == "__main__":
    main(sys.argv[1:])
