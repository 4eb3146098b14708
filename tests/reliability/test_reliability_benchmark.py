"""benchmarks/reliability.py counts what it claims: its worker runner, given cases that
crash, hang in C, hang in Python, raise or come out wrong, counts each once, in its column,
and goes on with the next case; a short run of the planner corpus prints a clean row."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.reliability import _run_workers

ROOT = Path(__file__).resolve().parents[2]


def test_the_runner_counts_each_failure_in_its_column():
    modes = {"1": "crash", "3": "hang", "5": "slow", "6": "raw", "8": "wrong"}
    r = _run_workers("selftest", 10, 0, 2.0, ["--extra", json.dumps(modes)])
    assert r["cases"] == 10, r
    assert (r["crashes"], r["hangs"], r["tracebacks"], r["wrong"]) == (1, 2, 1, 1), r
    assert r["accepted"] == 5, r                       # 0, 2, 4, 7, 9
    assert any(e.startswith("crash case 1") for e in r["examples"]), r["examples"]
    assert any(e.startswith("hang case 3") for e in r["examples"]), r["examples"]


@pytest.mark.slow
def test_a_short_planner_run_is_clean():
    r = subprocess.run([sys.executable, "benchmarks/reliability.py", "--cases", "40",
                        "--corpora", "planner"], capture_output=True, text=True, cwd=ROOT,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    row = next(line.split() for line in r.stdout.splitlines() if line.startswith("planner "))
    assert row[1] == "40" and row[3:7] == ["0", "0", "0", "0"], row
