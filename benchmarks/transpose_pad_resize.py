"""TRANSPOSE, PAD before a convolution and RESIZE_BILINEAR on the Ethos-U: tvm-ethos's
generated streams beside Vela 5.2 (issue 28).

For each one- or two-operator model below, compiled for ethos-u55-128 with the llvm host
(``npu_runtime="stream"``, the planner's default plan): the operators each leaves on the CPU,
the NPU operations each runs (Vela: its passes after fusing, and the kernel operations its
stream runs on the functional model, emulated; ours: the stream's NPU_OP_* commands), the SRAM
each uses (Vela ``--optimise Size``'s "Total SRAM used"; ours: the
emulated high-water mark the functional model records) and ours' working memory beyond the
plan. Prints one table.

    PYTHONPATH=. python benchmarks/transpose_pad_resize.py [case ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from ai_edge_litert.interpreter import Interpreter

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

import tflite_builder as tb  # noqa: E402
from test_pad_fold import pad_conv_model  # noqa: E402
from test_tflite_transpose import transpose_model  # noqa: E402

import tvm_ethos  # noqa: E402
from benchmarks.movement_ops import vela  # noqa: E402
from ethosu_stream.errors import StreamError  # noqa: E402
from ethosu_stream.run import KERNEL_OPERATIONS  # noqa: E402
from ethosu_stream.tflite_graph import TfliteGraph  # noqa: E402
from tests.helpers.vela_cli import vela_compile  # noqa: E402

CONFIG = "ethos-u55-128"

CASES = {
    "transpose_hw_1x16x16x8": lambda: transpose_model((1, 16, 16, 8), (0, 2, 1, 3)),
    "transpose_nchw_1x16x16x8": lambda: transpose_model((1, 16, 16, 8), (0, 3, 1, 2)),
    "transpose_wc_1x16x16x8": lambda: transpose_model((1, 16, 16, 8), (0, 1, 3, 2)),
    "transpose_rev_2x8x6x4": lambda: transpose_model((2, 8, 6, 4), (3, 2, 1, 0)),
    "transpose_i32_hw_1x16x16x8": lambda: transpose_model((1, 16, 16, 8), (0, 2, 1, 3),
                                                          (0.5, 0), "int32"),
    "transpose_i32_wc_2x8x16x8": lambda: transpose_model((2, 8, 16, 8), (0, 1, 3, 2),
                                                         (0.5, 0), "int32"),
    "transpose_i32_nchw_1x16x16x8": lambda: transpose_model((1, 16, 16, 8), (0, 3, 1, 2),
                                                            (0.5, 0), "int32"),
    "transpose_7d_rev_2x3x2x2x3x2x2": lambda: transpose_model((2, 3, 2, 2, 3, 2, 2),
                                                              (6, 5, 4, 3, 2, 1, 0)),
    "transpose_8d_2x3x2x2x3x2x2x2": lambda: transpose_model((2, 3, 2, 2, 3, 2, 2, 2),
                                                            (7, 1, 5, 3, 4, 2, 6, 0)),
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


def vela_kernel_operations(model: bytes) -> int | str:
    """The kernel operations Vela's ``--optimise Size`` stream runs on the functional model
    (emulated, zero inputs), or "-" where its file does not run (an operator it left to
    TFLite Micro, which TFLite Micro refuses: an int32 TRANSPOSE)."""
    graph = TfliteGraph(vela_compile(model, CONFIG, options=("--optimise", "Size")), CONFIG)
    inputs = Interpreter(model_content=model).get_input_details()
    try:
        _, stats = graph.run([np.zeros(d["shape"], d["dtype"]) for d in inputs])
    except StreamError:
        return "-"
    return sum(n for k, n in stats.commands.items() if k in KERNEL_OPERATIONS)


def main(names: list[str]) -> None:
    print(f"{'case':32} {'CPU ops':>12} {'NPU ops':>19} {'SRAM B':>16} {'work B':>7}")
    print(f"{'':32} {'vela / ours':>12} {'vela (run) / ours':>19} {'vela / ours':>16}")
    for name in names or list(CASES):
        model = CASES[name]()
        v, o = vela(model, CONFIG), ours(model)
        if "error" in v:
            v = {"cpu": "-", "npu_ops": "-", "sram": "-"}
        run = vela_kernel_operations(model)
        print(f"{name:32} {v['cpu']:>5} / {o['cpu']:<4} {v['npu_ops']:>5} ({run:>4}) / "
              f"{o['npu_ops']:<4} {v['sram']:>7} / {o['sram']:<6} {o['work']:>7}")


if __name__ == "__main__":
    main(sys.argv[1:])
