"""Running Arm's Vela compiler (``ethos-u-vela``, optional) and reading the CSVs it writes.

The planner is compared with Vela (benchmarks/vs_vela.py, tests/planner/test_vela_calibration.py,
budget sweeps), so every comparison must run Vela the same way and read the same columns:
this is the one place that does. Vela runs in a child process (``python -m ethosu.vela``), so
importing this module imports nothing of Vela's; ``vela_available`` says whether it is there.
"""
from __future__ import annotations

import csv
import glob
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass

from planner.errors import PlannerError

#: Vela's ``--optimise`` strategies.
VELA_MODES = ("Size", "Performance")


class VelaError(PlannerError):
    """Vela failed, timed out or wrote no summary; the message names the run and Vela's last
    line."""


def vela_available() -> bool:
    """Whether ``ethos-u-vela`` is importable here."""
    try:
        return importlib.util.find_spec("ethosu.vela") is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class VelaRun:
    """What one Vela compilation reported: its per-layer CSV rows (operators with cycles
    only; empty without ``--verbose-performance``), its summary CSV row, its stdout (the
    ``--verbose-*`` reports), its wall time and the ``.tflite`` it wrote (the ``ethos-u``
    operators' command streams, for the stream comparisons)."""
    layers: list[dict]
    summary: dict
    stdout: str
    seconds: float
    tflite: bytes = b""

    @property
    def sram_bytes(self) -> int:
        """Vela's "Total SRAM used" (``sram_memory_used`` is in KiB)."""
        return int(round(float(self.summary["sram_memory_used"]) * 1024))

    @property
    def cycles(self) -> int:
        """Vela's estimate of the whole network (``cycles_total``)."""
        return int(float(self.summary["cycles_total"]))


def run_vela(model: str, config: str, *flags: str, timeout: float = 600.0,
             work_dir: str | None = None) -> VelaRun:
    """Run Vela on the TFLite file ``model`` for the accelerator ``config`` with ``flags``
    (e.g. ``--optimise Size``, ``--verbose-performance``) in a temporary output folder (under
    ``work_dir`` if given) and read its CSVs. Raises VelaError when Vela is not installed,
    fails, times out or writes no summary."""
    where = f"vela {os.path.basename(model)} {config} {' '.join(flags)}".rstrip()
    if not vela_available():
        raise VelaError(f"{where}: ethos-u-vela is not installed "
                        "(pip install ethos-u-vela==5.2.0)")
    with tempfile.TemporaryDirectory(prefix="vela-", dir=work_dir) as out:
        cmd = [sys.executable, "-m", "ethosu.vela", os.path.abspath(model),
               "--accelerator-config", config, *flags, "--output-dir", out]
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  cwd=out)
        except subprocess.TimeoutExpired:
            raise VelaError(f"{where}: timed out after {timeout:.0f} s") from None
        seconds = time.perf_counter() - t0
        summaries = glob.glob(os.path.join(out, "*_summary_*.csv"))
        if proc.returncode != 0 or not summaries:
            tail = (proc.stderr or proc.stdout).strip().splitlines()
            raise VelaError(f"{where}: exit {proc.returncode}: "
                            f"{tail[-1] if tail else 'no output'}")
        with open(summaries[0], newline="") as f:
            summary = next(csv.DictReader(f))
        layers = []
        for path in glob.glob(os.path.join(out, "*_per-layer.csv")):
            with open(path, newline="") as f:
                layers = [r for r in csv.DictReader(f)
                          if float(r["Op Cycles"]) > 0 or float(r["NPU"]) > 0]
        written = glob.glob(os.path.join(out, "*_vela.tflite"))
        tflite = b""
        if written:
            with open(written[0], "rb") as f:
                tflite = f.read()
    return VelaRun(layers, summary, proc.stdout, seconds, tflite)


def vela_point(model: str, config: str, optimise: str, *flags: str,
               timeout: float = 600.0) -> dict:
    """Vela ``--optimise optimise`` as one point beside a planner frontier:
    ``{"sram_bytes", "cycles", "seconds"}``, or ``{"error": line}`` where the run failed (a
    failed run is reported in a table, never fatal to it)."""
    if optimise not in VELA_MODES:
        raise PlannerError(f"vela --optimise must be one of {VELA_MODES}, got {optimise!r}")
    try:
        run = run_vela(model, config, "--optimise", optimise, *flags, timeout=timeout)
        return {"sram_bytes": run.sram_bytes, "cycles": run.cycles, "seconds": run.seconds}
    except VelaError as e:
        return {"error": str(e)}
    except (KeyError, ValueError) as e:
        return {"error": f"cannot read vela's summary CSV: {e}"}
