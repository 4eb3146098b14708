"""Data-movement operators on the Ethos-U: tvm-ethos's generated streams beside Vela 5.2.

For each one-operator model of ``tests/tvm_ethos/test_stream_movement.py`` (PAD, SPLIT,
CONCATENATION, SLICE, SQUEEZE, nearest resizes), compiled for its accelerator: the operators
each leaves on the CPU, the NPU operations each runs (Vela: its passes after fusing; ours: the
stream's kernel operations, NPU_OP_CONV, _DEPTHWISE, _POOL and _ELEMENTWISE, not its DMAs)
and the SRAM each uses (Vela ``--optimise Size``'s "Total SRAM used"; ours: the emulated
high-water mark the functional model records). Prints one table.

    PYTHONPATH=. python benchmarks/movement_ops.py [case ...]
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

import test_stream_movement as cases  # noqa: E402

import tvm_ethos  # noqa: E402
from ethosu_stream.run import KERNEL_OPERATIONS  # noqa: E402
from planner.vela_run import VelaError, run_vela  # noqa: E402


def ours(model: bytes, config: str) -> dict:
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={config},llvm",
                           npu_runtime="stream", cache_dir=False)
    streams = cm.plan_report.get("streams", {}).values()
    return {
        "cpu": sum(op.placed_on != "ethos-u" for op in cm.partition_report.operators),
        "npu_ops": sum(n for e in streams if e.get("generated")
                       for k, n in e["commands"].items() if k in KERNEL_OPERATIONS),
        "sram": sum(e.get("sram_high_water_bytes", 0) for e in streams if e.get("generated")),
        "streamed": all(e.get("generated") for e in streams) and bool(streams),
    }


def vela(model: bytes, config: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.tflite")
        Path(path).write_bytes(model)
        try:
            run = run_vela(path, config, "--optimise", "Size")
        except VelaError as err:
            return {"error": str(err).splitlines()[-1][:60]}
    cpu = re.search(r"CPU operators = (\d+)", run.stdout)
    return {"cpu": int(cpu.group(1)) if cpu else -1,
            "npu_ops": int(float(run.summary["passes_after_fusing"])),
            "sram": run.sram_bytes}


def main(names: list[str]) -> None:
    head = (f"{'case':24} {'accelerator':14} {'CPU ops':>12} {'NPU ops':>12} "
            f"{'SRAM B':>14} streamed")
    print(head)
    print(f"{'':24} {'':14} {'vela / ours':>12} {'vela / ours':>12} {'vela / ours':>14}")
    for name in names or sorted(cases.CASES):
        build, config, _ = cases.CASES[name]
        model = build()
        v, o = vela(model, config), ours(model, config)
        if "error" in v:
            print(f"{name:24} {config:14} vela: {v['error']}")
            continue
        print(f"{name:24} {config:14} {v['cpu']:>5} / {o['cpu']:<4} "
              f"{v['npu_ops']:>5} / {o['npu_ops']:<4} {v['sram']:>6} / {o['sram']:<6} "
              f"{o['streamed']}")


if __name__ == "__main__":
    main(sys.argv[1:])
