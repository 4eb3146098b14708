"""int8 BATCH_MATMUL on the Ethos-U55-128: tvm-ethos's stream beside Vela 5.2's.

For each one-operator model (shapes of ``tests/tvm_ethos/test_tflite_batch_matmul.py``'s
builder; the last three with a constant operand, either side): the NPU operations each stream
runs (its NPU_OP_* commands on the functional model), the NPU cycles (Vela's estimate; ours:
the planner's, estimated), the SRAM each touches (the functional model's high-water mark,
emulated: ours includes the int32 products, which lie outside the plan's memory model) and
whether each output equals TFLite Micro's on two random inputs. Prints one table.

    PYTHONPATH=. python benchmarks/batch_matmul_ops.py
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

from test_tflite_batch_matmul import bmm_model  # noqa: E402

import tvm_ethos  # noqa: E402
from ethosu_stream.tflite_graph import run_vela_model  # noqa: E402
from planner.vela_run import run_vela  # noqa: E402
from tests.helpers.tflite_oracle import tflm_oracle  # noqa: E402

CONFIG = "ethos-u55-128"
#: (name, a shape, b shape, adj_x, adj_y, the constant operand or None)
CASES = [
    ("4x8 @ 8x4, 4 batches", (1, 4, 4, 8), (1, 4, 8, 4), False, False, None),
    ("16x64 @ 64x16", (16, 64), (64, 16), False, False, None),
    ("attention 4x(32x16 @ 16x32)", (1, 4, 32, 16), (1, 4, 32, 16), False, True, None),
    ("b broadcast 3x(24x32 @ 32x24)", (3, 24, 32), (32, 24), False, False, None),
    ("adj_x 2x(40x20)^T @ 40x8", (2, 40, 20), (2, 40, 8), True, False, None),
    ("16x64 @ const 64x16", (16, 64), (64, 16), False, False, 1),
    ("3x(24x32) @ const (24x32)^T", (3, 24, 32), (24, 32), False, True, 1),
    ("const 24x32 @ 3x(32x24)", (24, 32), (3, 32, 24), False, False, 0),
]


def _inputs(shapes, seed: int) -> list[np.ndarray]:
    rs = np.random.RandomState(seed)
    return [rs.randint(-128, 128, s).astype(np.int8) for s in shapes]


def ours(data: bytes, shapes) -> dict:
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={CONFIG},llvm",
                           npu_runtime="stream", cache_dir=False)
    streams = [e for e in cm.plan_report.get("streams", {}).values() if e.get("generated")]
    exact = all(np.array_equal(cm.run(*xs)[0].reshape(w.shape), w)
                for xs in (_inputs(shapes, s) for s in (0, 1))
                for (w,) in [tflm_oracle(data, xs)])
    return {"npu_ops": sum(n for e in streams for k, n in e["commands"].items()
                           if k.startswith("NPU_OP_") and k != "NPU_OP_STOP"),
            "cycles": int(cm.plan_report.get("cycles", 0)),
            "sram": sum(e.get("sram_high_water_bytes", 0) for e in streams),
            "exact": exact and bool(streams)}


def vela(data: bytes, shapes) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.tflite")
        Path(path).write_bytes(data)
        run = run_vela(path, CONFIG)
    exact, ops, sram = True, 0, 0
    for seed in (0, 1):
        xs = _inputs(shapes, seed)
        (got,), stats = run_vela_model(run.tflite, xs, CONFIG)
        (want,) = tflm_oracle(data, xs)
        exact &= bool(np.array_equal(got.reshape(want.shape), want))
        ops = sum(n for k, n in stats.commands.items()
                  if k.startswith("NPU_OP_") and k != "NPU_OP_STOP")
        sram = stats.high_water.get(1, 0)
    return {"npu_ops": ops, "cycles": run.cycles, "sram": sram, "exact": exact}


def main() -> None:
    print(f"{'case':32} {'NPU ops ours/Vela':>18} {'cycles ours/Vela':>18} "
          f"{'SRAM B ours/Vela':>18} {'= TFLM ours/Vela':>17}")
    for name, a_shape, b_shape, adj_x, adj_y, constant in CASES:
        data = bmm_model(a_shape, b_shape, adj_x, adj_y, constant=constant)
        shapes = [s for k, s in enumerate((a_shape, b_shape)) if k != constant]
        o, v = ours(data, shapes), vela(data, shapes)
        print(f"{name:32} {o['npu_ops']:>8}/{v['npu_ops']:<9} {o['cycles']:>8}/{v['cycles']:<9} "
              f"{o['sram']:>8}/{v['sram']:<9} {str(o['exact']):>7}/{v['exact']!s:<9}")


if __name__ == "__main__":
    main()
