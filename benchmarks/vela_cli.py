"""A Vela user's command line, run by Vela 5.2 and by ``tvmc compile`` with the same flags:
the two summary CSVs side by side (issue 27).

For each shipped model and each ``--optimise``, on ethos-u55-128 in Vela's default system
(``Ethos_U55_High_End_Embedded`` / ``Shared_Sram``): SRAM used (Vela's, and the plan's peak:
estimated), off-chip flash used, NPU cycles (Vela's estimate and the planner's), network MACs
(Vela's ``nn_macs`` and ours, which must agree) and the MACs our stream computes with its
recomputation (emulated). Nothing here is timed.

  python benchmarks/vela_cli.py [--models ../shared/models] [--out out/vela_cli]
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import io
import os
import subprocess
import sys

from tvm_ethos.cli import main

MODELS = ("ds_cnn_kws", "mobilenet_v1_0.25_96", "resnet8_cifar")
FLAGS = ["--accelerator-config", "ethos-u55-128", "--system-config",
         "Ethos_U55_High_End_Embedded", "--memory-mode", "Shared_Sram"]
SUMMARY = "_summary_Ethos_U55_High_End_Embedded.csv"


def _row(folder: str, model: str) -> dict:
    with open(os.path.join(folder, model + SUMMARY), newline="") as f:
        return next(csv.DictReader(f))


def run(models_dir: str, out: str) -> list[dict]:
    vela = os.path.join(os.path.dirname(sys.executable), "vela")
    rows = []
    for model in MODELS:
        path = os.path.join(models_dir, model + ".tflite")
        for optimise in ("Size", "Performance"):
            flags = FLAGS + ["--optimise", optimise]
            vdir, odir = (os.path.join(out, who, optimise) for who in ("vela", "tvmc"))
            subprocess.run([vela, path, "--output-dir", vdir, *flags], check=True,
                           capture_output=True)
            with contextlib.redirect_stdout(io.StringIO()):
                rc = main(["compile", path, "--target", "ethos-u,llvm", *flags, "--output-dir",
                           odir, "--no-progress", "-q"])
            if rc != 0:
                raise SystemExit(f"tvmc compile {model} --optimise {optimise} failed ({rc})")
            v, o = _row(vdir, model), _row(odir, model)
            rows.append({"model": model, "optimise": optimise,
                         "vela_sram_kib": float(v["sram_memory_used"]),
                         "ours_sram_kib": float(o["sram_memory_used"]),
                         "vela_flash_kib": float(v["off_chip_flash_memory_used"]),
                         "ours_flash_kib": float(o["off_chip_flash_memory_used"]),
                         "vela_cycles": int(float(v["cycles_total"])),
                         "ours_cycles": int(o["cycles_total"]),
                         "vela_nn_macs": int(v["nn_macs"]), "ours_nn_macs": int(o["nn_macs"]),
                         "computed_macs": int(o["tvm_ethos_computed_macs"])})
    return rows


def table(rows: list[dict]) -> str:
    head = (f"{'model':<22} {'optimise':<11} {'SRAM KiB Vela':>13} {'ours (est.)':>11} "
            f"{'flash KiB Vela':>14} {'ours':>8} {'cycles Vela':>12} {'ours (est.)':>12} "
            f"{'nn_macs':>11} {'same':>4} {'computed MACs (emul.)':>21}")
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(f"{r['model']:<22} {r['optimise']:<11} {r['vela_sram_kib']:>13.1f} "
                     f"{r['ours_sram_kib']:>11.1f} {r['vela_flash_kib']:>14.1f} "
                     f"{r['ours_flash_kib']:>8.1f} {r['vela_cycles']:>12,} "
                     f"{r['ours_cycles']:>12,} {r['vela_nn_macs']:>11,} "
                     f"{'yes' if r['vela_nn_macs'] == r['ours_nn_macs'] else 'NO':>4} "
                     f"{r['computed_macs']:>21,}")
    return "\n".join(lines)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "shared", "models"))
    ap.add_argument("--out", default="out/vela_cli")
    a = ap.parse_args()
    print(table(run(a.models, a.out)))
