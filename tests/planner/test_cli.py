"""`python -m planner`: the JSON contract acceptance checks rely on, and its errors."""
import json
import os
import subprocess
import sys

import pytest

from tests.helpers.models import MODELS_DIR

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KWS = str(MODELS_DIR / "ds_cnn_kws.tflite")


def run(*args):
    return subprocess.run([sys.executable, "-m", "planner", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def kws_json():
    r = run("plan", KWS, "--device", "ethos-u55-128", "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_json_has_the_documented_fields(kws_json):
    d = kws_json
    assert d["peak_memory_bytes"] > 0 and d["cycles"] > 0
    front = d["frontier"]
    assert front and all(set(p) == {"memory_bytes", "cycles"} for p in front)
    # without a budget the fastest Proposal is chosen: the frontier's last point
    assert (d["peak_memory_bytes"], d["cycles"]) == (front[-1]["memory_bytes"],
                                                      front[-1]["cycles"])
    covered = [p for plan in d["plans"] for p in plan["parts"]]
    assert len(covered) == len(set(covered)) == 13
    for plan in d["plans"]:
        assert {"parts", "output_stripe", "buffering", "tensors", "schedule"} <= set(plan)


def test_budget_picks_fastest_that_fits(kws_json):
    front = kws_json["frontier"]
    mid = front[len(front) // 2]
    r = run("plan", KWS, "--device", "ethos-u55-128", "--budget", str(mid["memory_bytes"]),
            "--json")
    d = json.loads(r.stdout)
    assert d["peak_memory_bytes"] <= mid["memory_bytes"]
    assert d["cycles"] == mid["cycles"]


def test_infeasible_budget_exits_2_with_one_line(kws_json):
    smallest = kws_json["frontier"][0]["memory_bytes"]
    r = run("plan", KWS, "--device", "ethos-u55-128", "--budget", "1KiB", "--json")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1
    assert "1024 bytes" in lines[0] and str(smallest) in lines[0]


@pytest.mark.parametrize("args,needle", [
    (("plan", "/nonexistent.tflite"), "does not exist"),
    (("plan", KWS, "--device", "ethos-u99"), "unknown device"),
    (("plan", KWS, "--budget", "lots"), "cannot read memory size"),
])
def test_bad_input_is_one_clear_line(args, needle):
    r = run(*args)
    assert r.returncode == 2
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_not_a_model(tmp_path):
    bad = tmp_path / "x.tflite"
    bad.write_bytes(b"this is not a flatbuffer at all" * 4)
    r = run("plan", str(bad))
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_dram_io_needs_less_sram():
    sram = json.loads(run("plan", KWS, "--json").stdout)["frontier"][0]["memory_bytes"]
    dram = json.loads(run("plan", KWS, "--json", "--io-region", "dram").stdout)
    assert dram["frontier"][0]["memory_bytes"] < sram
