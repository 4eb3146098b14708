"""TFLite's 16x8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED (int16 activations, int8
weights, int64 bias) on the NPU beside Vela 5.2 ``--optimise Size``, per accelerator: one
operator per row and a chain of them (tests/tvm_ethos/int16x8_models.py). Ours, the plan of
the least memory (``budget="smallest"``, as Vela's Size): NPU operations, DMA bytes and SRAM
high water of the stream (emulated, the functional model) and whether the outputs equal
TFLite Micro's on three random inputs; Vela's: CPU operators, SRAM used (its summary CSV) and
whether its own stream, run on the functional model, equals TFLite Micro's. Nothing here is
timed.

  python benchmarks/int16x8_ops.py
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "tests" / "tvm_ethos"))

from int16x8_models import chain_16x8, model_16x8  # noqa: E402

import tvm_ethos  # noqa: E402
from planner.vela_run import run_vela  # noqa: E402
from tests.helpers.tflite_oracle import tflm_oracle  # noqa: E402
from tvm_ethos import tflite_run  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
MAP = (1, 32, 32, 16)

#: name -> (model, input shape)
MODELS = {
    "CONV_2D 3x3 32x32x16->16": (lambda: model_16x8("conv", np.random.RandomState(0),
                                                    in_shape=MAP, cout=16), MAP),
    "DEPTHWISE_CONV_2D 3x3 32x32x16": (lambda: model_16x8("depthwise", np.random.RandomState(1),
                                                          in_shape=MAP), MAP),
    "FULLY_CONNECTED 256->64": (lambda: model_16x8("fc", np.random.RandomState(2),
                                                   in_shape=(1, 256), cout=64), (1, 256)),
    "chain conv/dw/conv/fc 16x16x8": (lambda: chain_16x8(np.random.RandomState(3)),
                                      (1, 16, 16, 8)),
}
RUNS = 3


def _inputs(shape) -> list[np.ndarray]:
    rs = np.random.RandomState(11)
    return [rs.randint(-32768, 32768, size=shape).astype(np.int16) for _ in range(RUNS)]


def _ours(data: bytes, acc: str, xs) -> dict:
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={acc},llvm",
                           npu_runtime="stream", cache_dir=False, budget="smallest")
    (entry,) = cm.plan_report["streams"].values()
    cmds = entry.get("commands", {})
    equal = all((cm.run(x)[0].reshape(w.shape) == w).all()
                for x, w in ((x, tflm_oracle(data, [x])[0]) for x in xs))
    return {"stream": entry["generated"],
            "npu_ops": sum(v for k, v in cmds.items() if k.startswith("NPU_OP_") and k not in (
                "NPU_OP_STOP", "NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT")),
            "dma_bytes": sum(entry.get("dma_bytes", {}).values()),
            "sram_bytes": entry.get("sram_high_water_bytes"),
            "eq_tflm": "yes" if equal else "NO"}


def _vela(data: bytes, acc: str, xs) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.tflite")
        Path(path).write_bytes(data)
        run = run_vela(path, acc, "--optimise", "Size")
    cpu = next((line.split("=")[1].split()[0] for line in run.stdout.splitlines()
                if line.startswith("CPU operators")), "0")
    prepared = tflite_run.prepare(run.tflite, "vela.tflite", None)
    equal = True
    for x in xs:
        want = tflm_oracle(data, [x])[0]
        got = np.asarray(tflite_run.run(prepared, [x]).outputs[0]).reshape(want.shape)
        equal = equal and bool((got == want).all())
    return {"vela_cpu_ops": int(cpu),
            "vela_sram_bytes": round(float(run.summary["sram_memory_used"]) * 1024),
            "vela_eq_tflm": "yes" if equal else "NO"}


def run() -> list[dict]:
    rows = []
    for name, (make, shape) in MODELS.items():
        data = make()
        xs = _inputs(shape)
        for acc in ACCELERATORS:
            rows.append({"model": name, "accelerator": acc, **_ours(data, acc, xs),
                         **_vela(data, acc, xs)})
    return rows


def table(rows: list[dict]) -> str:
    head = ("model", "accelerator", "stream", "npu_ops", "dma_bytes", "sram_bytes", "eq_tflm",
            "vela_cpu_ops", "vela_sram_bytes", "vela_eq_tflm")
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in head]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(str(r[h]).ljust(w) for h, w in zip(head, widths)) for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)   # --help
    print("ours: emulated (functional model); Vela: its own summary, its stream emulated")
    print(table(run()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
