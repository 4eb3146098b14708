"""LOGISTIC, TANH, LEAKY_RELU, RSQRT, QUANTIZE, the int16 LEAKY_RELU and RELU6 and the uint8
tables (LOGISTIC, TANH, LEAKY_RELU, HARD_SWISH, GELU) on the NPU
(backends/ethos_u/ops_lut.py) beside Vela 5.2 ``--optimise Size``: one operator on a
1 x 32 x 32 x 16 map per row, for each accelerator. Ours: whether the stream was generated, its
NPU operations, DMA bytes and SRAM high water (emulated, the functional model); Vela's: CPU
operators and SRAM used (its summary CSV). Nothing here is timed.

  python benchmarks/lut_ops.py [--only "LEAKY_RELU int16" RSQRT ...]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "tests" / "tvm_ethos"))

import tflite  # noqa: E402
import tflite_builder as tb  # noqa: E402

import tvm_ethos  # noqa: E402
from planner.vela_run import run_vela  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
SHAPE = (1, 32, 32, 16)


def _quantize(src, dst):
    x = tb.T(list(SHAPE), src[0], scale=src[1], zp=src[2])
    y = tb.T(list(SHAPE), dst[0], scale=dst[1], zp=dst[2])
    return tb.build([x, y], [0], [1], tb.BO.QUANTIZE)


def _unary(code, dtype, in_q, out_q, options_type=0, options_fn=None):
    x = tb.T(list(SHAPE), dtype, scale=in_q[0], zp=in_q[1])
    y = tb.T(list(SHAPE), dtype, scale=out_q[0], zp=out_q[1])
    return tb.build([x, y], [0], [1], code, options_type, options_fn)


def _gelu_options(b):
    tflite.GeluOptionsStart(b)
    tflite.GeluOptionsAddApproximate(b, False)
    return tflite.GeluOptionsEnd(b)


#: uint8 quantizations: LOGISTIC / TANH take the outputs TFLite's uint8 kernels require
_U8_IN, _U8_OUT = (0.05, 128), (0.04, 120)


MODELS = {
    "LOGISTIC": lambda: tb.activation("sigmoid", shape=SHAPE),
    "TANH": lambda: tb.activation("tanh", shape=SHAPE),
    "LEAKY_RELU": lambda: tb.activation("leaky_relu", shape=SHAPE),
    "LEAKY_RELU int16": lambda: tb.activation("leaky_relu", shape=SHAPE, dtype="int16",
                                              in_q=(0.001, 0), out_q=(0.0007, 0)),
    "RELU6 int16": lambda: _unary(tb.BO.RELU6, "int16", (1 / 4096, 0), (1 / 4096, 0)),
    "RSQRT": lambda: _unary(tb.BO.RSQRT, "int8", (0.05, -128), (0.04, -128)),
    "QUANTIZE int8->int8": lambda: _quantize(("int8", 0.05, 3), ("int8", 0.02, -7)),
    "QUANTIZE int16->int8": lambda: _quantize(("int16", 0.001, 0), ("int8", 0.05, 2)),
    "LOGISTIC uint8": lambda: tb.activation("sigmoid", SHAPE, _U8_IN, (1 / 256, 0),
                                            dtype="uint8"),
    "TANH uint8": lambda: tb.activation("tanh", SHAPE, _U8_IN, (1 / 128, 128), dtype="uint8"),
    "LEAKY_RELU uint8": lambda: tb.activation("leaky_relu", SHAPE, _U8_IN, _U8_OUT,
                                              dtype="uint8"),
    "HARD_SWISH uint8": lambda: _unary(tb.BO.HARD_SWISH, "uint8", _U8_IN, _U8_OUT),
    "GELU uint8": lambda: _unary(tb.BO.GELU, "uint8", _U8_IN, _U8_OUT, tb.BOPT.GeluOptions,
                                 _gelu_options),
}


def _vela(path: str, accelerator: str) -> dict:
    run = run_vela(path, accelerator, "--optimise", "Size")
    cpu = next((line.split("=")[1].split()[0] for line in run.stdout.splitlines()
                if line.startswith("CPU operators")), "0")
    return {"vela_cpu_ops": int(cpu),
            "vela_sram_bytes": round(float(run.summary["sram_memory_used"]) * 1024)}


def run(only=None) -> list[dict]:
    rows = []
    for name, make in MODELS.items():
        if only and name not in only:
            continue
        data = make()
        for acc in ACCELERATORS:
            cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={acc},llvm",
                                   npu_runtime="stream", cache_dir=False)
            (entry,) = cm.plan_report["streams"].values()
            cmds = entry.get("commands", {})
            row = {"operator": name, "accelerator": acc, "stream": entry["generated"],
                   "npu_ops": sum(v for k, v in cmds.items()
                                  if k.startswith("NPU_OP_") and k not in (
                                      "NPU_OP_STOP", "NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT")),
                   "dma_bytes": sum(entry.get("dma_bytes", {}).values()),
                   "sram_bytes": entry.get("sram_high_water_bytes")}
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, "m.tflite")
                Path(path).write_bytes(data)
                row.update(_vela(path, acc))
            rows.append(row)
    return rows


def table(rows: list[dict]) -> str:
    head = ("operator", "accelerator", "stream", "npu_ops", "dma_bytes", "sram_bytes",
            "vela_cpu_ops", "vela_sram_bytes")
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in head]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(str(r[h]).ljust(w) for h, w in zip(head, widths)) for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", choices=sorted(MODELS), metavar="OPERATOR",
                    help=f"rows to run (default all: {', '.join(MODELS)})")
    args = ap.parse_args(argv)
    print("ours: emulated (functional model); Vela: its own summary")
    print(table(run(args.only)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
