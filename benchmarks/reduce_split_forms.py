"""Issue 28's reductions and pools past one NPU operation, Vela 5.2 beside ours.

For each one-operator form (``FORMS``) this prints what Vela 5.2 ``--optimise Size`` does
(its summary's CPU operators and NPU operators) and what ours does on ethos-u55-128: the CPU
operators of the tflite-micro host, the NPU operations of the stream ``ethos-u,llvm``
generates (each ``NPU_OP_*`` but DMA and STOP), the SRAM its stream touches (emulated) and
whether its outputs equal TFLite Micro's (LiteRT's for uint8) on a random input and the
extremes.

    PYTHONPATH=. python benchmarks/reduce_split_forms.py [form ...]
"""
from __future__ import annotations

import os
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

import numpy as np  # noqa: E402

import tvm_ethos  # noqa: E402
from benchmarks.vela_superset_probes import BO, pool  # noqa: E402
from planner.vela_run import VelaError, run_vela  # noqa: E402
from tests.helpers.tflite_oracle import oracle, tflm_oracle  # noqa: E402
from tests.tvm_ethos.test_reduce_split import _inputs, reduce_model  # noqa: E402

U55 = "ethos-u55-128"

#: name -> (model builder, the reference's dtype)
FORMS = {
    "SUM over 100x8": lambda: reduce_model("SUM", (1, 100, 8, 8), (1, 2), out_q=(2.0, -2)),
    "SUM over 600x4": lambda: reduce_model("SUM", (1, 600, 4, 8), (1, 2), out_q=(2.0, -2)),
    "SUM over 100x4x4 (with the depth)": lambda: reduce_model(
        "SUM", (1, 100, 4, 4), (1, 2, 3), out_q=(2.0, -2)),
    "SUM over 600 rows and the depth": lambda: reduce_model(
        "SUM", (1, 600, 3, 5), (1, 3), out_q=(2.0, -2)),
    "MEAN over 100 rows of the height": lambda: reduce_model("MEAN", (1, 100, 4, 8), (1,)),
    "MEAN over 300 rows of the height": lambda: reduce_model("MEAN", (1, 300, 4, 8), (1,)),
    "MEAN over 70x70": lambda: reduce_model("MEAN", (1, 70, 70, 4), (1, 2)),
    "MEAN uint8 over 300x5 (rank 3)": lambda: reduce_model(
        "MEAN", (300, 5, 3), (0,), dtype="uint8", in_q=(0.05, 130), out_q=(0.04, 120)),
    "REDUCE_MAX over 300x4": lambda: reduce_model("REDUCE_MAX", (1, 300, 4, 8), (1, 2)),
    "REDUCE_MAX over 300 rows and the depth": lambda: reduce_model(
        "REDUCE_MAX", (1, 300, 4, 8), (1, 3)),
    "REDUCE_MIN over 300x4": lambda: reduce_model("REDUCE_MIN", (1, 300, 4, 8), (1, 2)),
    "REDUCE_MIN over 300x300x2": lambda: reduce_model("REDUCE_MIN", (1, 300, 300, 2),
                                                      (1, 2, 3)),
    "AVERAGE_POOL_2D one row, stride 5x1": lambda: pool(
        BO.AVERAGE_POOL_2D, (1, 6, 8, 8), (4, 2), (5, 1)),
    "MAX_POOL_2D one row, stride 5x2": lambda: pool(BO.MAX_POOL_2D, (1, 6, 8, 8), (4, 2),
                                                    (5, 2)),
}


def vela(model: bytes) -> tuple[str, str]:
    """Vela 5.2 Size's (CPU operators, NPU operators) from its summary."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.tflite")
        Path(path).write_bytes(model)
        try:
            run = run_vela(path, U55, "--optimise", "Size")
        except VelaError as err:
            return "fails", str(err).splitlines()[-1][:40]
    found = [re.search(rf"{kind} operators = (\d+)", run.stdout) for kind in ("CPU", "NPU")]
    return tuple(m.group(1) if m else "?" for m in found)


def ours(model: bytes) -> tuple[int, int, int, bool]:
    """Ours: (CPU operators on the tflite-micro host, NPU operations of the stream, SRAM it
    touches, equal to the reference)."""
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={U55}", cache_dir=False)
    cpu = sum(p.placed_on != "ethos-u" for p in cm.placement)
    stream = tvm_ethos.compile(model, f"ethos-u -accelerator_config={U55},llvm",
                               npu_runtime="stream", cache_dir=False)
    (entry,) = stream.plan_report["streams"].values()
    ops = sum(n for k, n in entry["commands"].items()
              if k.startswith("NPU_OP_") and k not in ("NPU_OP_STOP", "NPU_OP_DMA_START",
                                                       "NPU_OP_DMA_WAIT"))
    (spec,) = cm.inputs
    reference = oracle if np.dtype(spec.dtype) == np.uint8 else tflm_oracle
    equal = all(np.array_equal(c.run(x)[0].reshape(want.shape), want)
                for x in _inputs(cm, 0) for want in [reference(model, [x])[0]]
                for c in (cm, stream))
    return cpu, ops, int(entry["sram_high_water_bytes"]), equal


def main(names: list[str]) -> None:
    print("| form | Vela CPU ops | Vela NPU ops | ours CPU ops | ours NPU operations | "
          "ours SRAM touched, B (emulated) | = reference |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, build in FORMS.items():
        if names and name not in names:
            continue
        model = build()
        v_cpu, v_npu = vela(model)
        cpu, ops, sram, equal = ours(model)
        print(f"| {name} | {v_cpu} | {v_npu} | {cpu} | {ops} | {sram} | "
              f"{'yes' if equal else 'NO'} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
