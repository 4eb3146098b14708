"""`tvmc plan`: budget sweeps (CSV, PNG, local pool and Dask), the per-layer table, help, and
one-line exit-2 errors for bad input."""
import csv
import os
import struct
import subprocess
import sys
import time

import pytest

from planner import sweep
from planner.api import plan
from tests.helpers.models import MODELS_DIR
from tvm_ethos.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# Module constants (parametrize lists name them): the path the models_dir fixture gives.
KWS = str(MODELS_DIR / "ds_cnn_kws.tflite")
MBN = str(MODELS_DIR / "mobilenet_v1_0.25_96.tflite")
LO, HI, N = 8 * 1024, 256 * 1024, 10
# Vela 5.2.0, --optimise Size / Performance on ethos-u55-128 (shared/models/README.md), KiB.
VELA_KIB = {"ds_cnn_kws": {"Size": (15.6, 123164), "Performance": (21.6, 89916)},
            "mobilenet_v1_0.25_96": {"Size": (48.0, 377318), "Performance": (72.8, 368852)}}


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """Two models on a local pool of two processes, Vela included when installed."""
    out = tmp_path_factory.mktemp("sweep")
    rc = main(["plan", KWS, MBN, "--target", "ethos-u",
               "--target-ethos-u-accelerator_config=ethos-u55-128",
               "--sweep-budget", f"{LO // 1024}KiB:{HI // 1024}KiB:{N}",
               "--output-dir", str(out), "--jobs", "2", "--no-progress"])
    assert rc == 0
    return out


def test_sweep_writes_csv_points_and_png(swept):
    rows = read_csv(swept / "sweep.csv")
    assert list(rows[0]) == list(sweep.SWEEP_COLUMNS)
    assert [r["model"] for r in rows] == ["ds_cnn_kws"] * N + ["mobilenet_v1_0.25_96"] * N
    # two panels side by side
    w, h = png_size(swept / "sweep.png")
    assert w > h > 200 and os.path.getsize(swept / "sweep.png") > 20_000


@pytest.mark.parametrize("model", ["ds_cnn_kws", "mobilenet_v1_0.25_96"])
def test_sweep_rows_make_sense(swept, model):
    rows = [r for r in read_csv(swept / "sweep.csv") if r["model"] == model]
    points = [p for p in read_csv(swept / "points.csv") if p["model"] == model]
    front = [(int(p["memory_bytes"]), int(p["cycles"])) for p in points
             if p["kind"] == "frontier"]
    budgets = [int(r["budget_bytes"]) for r in rows]
    assert budgets == sweep.log_budgets(LO, HI, N) and budgets[0] == LO and budgets[-1] == HI
    ratios = [b / a for a, b in zip(budgets, budgets[1:])]
    assert max(ratios) / min(ratios) < 1.01  # log-spaced
    # the frontier: memory ascending, cycles descending
    assert front == sorted(front) and [c for _, c in front] == sorted(
        [c for _, c in front], reverse=True)
    smallest = front[0][0]
    feasible = [r for r in rows if r["feasible"] == "1"]
    for r in rows:
        b = int(r["budget_bytes"])
        assert (r["feasible"] == "1") == (b >= smallest), r
        if r["feasible"] == "0":
            assert r["peak_bytes"] == r["cycles"] == r["cascades"] == ""
        else:
            peak, cyc = int(r["peak_bytes"]), int(r["cycles"])
            # the fastest frontier point within the budget
            assert peak <= b and (peak, cyc) == [p for p in front if p[0] <= b][-1]
            assert int(r["cascades"]) >= 1
    assert feasible and len(feasible) < len(rows)  # the range straddles the minimum
    cycles = [int(r["cycles"]) for r in feasible]
    assert cycles == sorted(cycles, reverse=True)  # non-increasing as the budget grows
    naive = [p for p in points if p["kind"] == "naive"]
    assert len(naive) == 1
    # cascading never loses to layer-by-layer: the fastest point is at least as fast
    assert front[-1][1] <= int(naive[0]["cycles"])
    assert smallest <= int(naive[0]["memory_bytes"])


def test_sweep_agrees_with_plan_at_a_budget(swept):
    rows = [r for r in read_csv(swept / "sweep.csv")
            if r["model"] == "mobilenet_v1_0.25_96" and r["feasible"] == "1"]
    r = rows[0]
    res = plan(MBN, "ethos-u55-128", budget=int(r["budget_bytes"]))
    assert (res.chosen.memory_bytes, res.chosen.cycles, len(res.chosen.plans)) == (
        int(r["peak_bytes"]), int(r["cycles"]), int(r["cascades"]))


@pytest.mark.skipif(not sweep.vela_available(), reason="ethos-u-vela is not installed")
def test_sweep_has_vela_points(swept):
    points = read_csv(swept / "points.csv")
    for model, modes in VELA_KIB.items():
        for mode, (kib, cycles) in modes.items():
            got = [p for p in points if p["model"] == model and p["kind"] == f"vela_{mode.lower()}"]
            assert len(got) == 1, (model, mode)
            assert abs(int(got[0]["memory_bytes"]) / 1024 - kib) < 0.1
            assert int(got[0]["cycles"]) == cycles


def test_plan_prints_the_per_layer_table(capsys):
    rc = main(["plan", KWS, "--target", "ethos-u,llvm", "--budget", "20KiB", "--no-progress"])
    out = capsys.readouterr()
    assert rc == 0 and out.err == ""
    res = plan(KWS, "ethos-u55-128", budget="20KiB")
    assert "casc part" in out.out
    assert f"total: {len(res.chosen.plans)} cascades" in out.out
    assert f"{res.chosen.cycles:,} cycles" in out.out
    # one row per Part
    assert sum(1 for line in out.out.splitlines()
               if line.split()[:1] and line.split()[0].isdigit()) == len(res.graph.parts)


def test_inline_and_listed_accelerator_configs():
    from tvm_ethos.cli import parse_plan_target
    assert parse_plan_target("ethos-u", {}) == ["ethos-u55-128"]
    assert parse_plan_target("ethos-u -accelerator_config=ethos-u65-256,llvm", {}) == [
        "ethos-u65-256"]
    assert parse_plan_target("ethos-u", {"ethos-u": {
        "accelerator_config": "ethos-u55-64,ethos-u55-256"}}) == ["ethos-u55-64", "ethos-u55-256"]
    assert parse_plan_target("ethos-n,opencl", {"ethos-n": {"tops": "1,4"}}) == [
        "ethos-n78-1tops", "ethos-n78-4tops"]


def test_budget_helpers():
    assert sweep.parse_sweep("128KiB:2MiB:16") == (131072, 2097152, 16)
    assert sweep.log_budgets(100, 10000, 3) == [100, 1000, 10000]
    assert sweep.log_budgets(4096, 8192, 1) == [4096]


def test_local_pool_equals_in_process(tmp_path, swept):
    rc = main(["plan", KWS, "--target", "ethos-u", "--sweep-budget",
               f"{LO}:{HI}:{N}", "--output-dir", str(tmp_path), "--jobs", "1",
               "--no-vela", "--no-progress"])
    assert rc == 0
    serial = read_csv(tmp_path / "sweep.csv")
    pooled = [r for r in read_csv(swept / "sweep.csv") if r["model"] == "ds_cnn_kws"]
    assert serial == pooled


def test_dask_local_cluster(tmp_path, swept):
    distributed = pytest.importorskip("distributed", reason="dask.distributed not installed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=None) as cluster:
        rc = main(["plan", KWS, "--target", "ethos-u", "--sweep-budget", f"{LO}:{HI}:{N}",
                   "--output-dir", str(tmp_path), "--scheduler", cluster.scheduler_address,
                   "--no-vela", "--no-progress"])
    assert rc == 0
    pooled = [r for r in read_csv(swept / "sweep.csv") if r["model"] == "ds_cnn_kws"]
    assert read_csv(tmp_path / "sweep.csv") == pooled
    assert png_size(tmp_path / "sweep.png")[0] > 200


def test_scheduler_without_dask_is_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.distributed", None)
    rc = main(["plan", KWS, "--target", "ethos-u", "--sweep-budget", "8KiB:16KiB:2",
               "--output-dir", str(tmp_path), "--scheduler", "tcp://127.0.0.1:8786"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "dask" in err[0] and "pip install" in err[0]


def test_sweep_of_a_bad_model_names_it(tmp_path, capsys):
    bad = tmp_path / "junk.tflite"
    bad.write_bytes(b"not a flatbuffer" * 8)
    line = one_line_error(["plan", KWS, str(bad), "--target", "ethos-u", "--sweep-budget",
                           "8KiB:16KiB:2", "--output-dir", str(tmp_path / "o"), "--no-vela",
                           "--no-progress"], capsys)
    assert "junk.tflite on ethos-u55-128" in line
    assert not (tmp_path / "o" / "sweep.csv").exists()


def test_output_dir_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "taken"
    f.write_text("x")
    line = one_line_error(["plan", KWS, "--target", "ethos-u", "--sweep-budget", "8KiB:16KiB:2",
                           "--output-dir", str(f), "--no-vela", "--no-progress"], capsys)
    assert "--output-dir" in line


def one_line_error(argv, capsys):
    rc = main(argv)
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert rc == 2, (argv, out)
    assert len(lines) == 1, out.err
    assert "Traceback" not in out.err and out.out == ""
    return lines[0]


@pytest.mark.parametrize("argv,needle", [
    (["plan", "/nonexistent/model.tflite", "--target", "ethos-u"], "does not exist"),
    (["plan", KWS, "--target", "ethos-x"], "unknown target 'ethos-x'"),
    (["plan", KWS, "--target", "llvm"], "no NPU"),
    (["plan", KWS, "--target", "ethos-u,ethos-n"], "2 NPUs"),
    (["plan", KWS, "--target", "ethos-u -accelerator_config"], "cannot read option"),
    (["plan", KWS, "--target", "ethos-u", "--target-ethos-u-accelerator_config=ethos-u99"],
     "ethos-u99"),
    (["plan", KWS, "--target", "ethos-u", "--target-ethos-n-tops=4"], "--target-ethos-n-tops"),
    (["plan", KWS, "--target", "ethos-u -frobnicate=1"], "unknown option 'frobnicate'"),
    (["plan", KWS, "--target", "ethos-u", "--budget", "lots"], "cannot read memory size"),
    (["plan", KWS, "--target", "ethos-u", "--sweep-budget", "2MiB:128KiB:4"], "below LO"),
    (["plan", KWS, "--target", "ethos-u", "--sweep-budget", "128KiB"], "LO:HI:N"),
    (["plan", KWS, "--target", "ethos-u", "--frobnicate"], "unrecognized arguments"),
    (["plan", KWS, "--target", "ethos-u", "--io-region", "flash"], "invalid choice"),
    (["plan", KWS, "--target", "ethos-u", "--planner-max_plan_size=0"], "max_plan_size"),
    (["plan", KWS, "--target", "ethos-u", "--budget", "1MiB", "--sweep-budget", "1:2:2"],
     "not allowed with"),
    (["plan", KWS], "--target"),
    (["frobnicate"], "invalid choice"),
    ([], "required"),
])
def test_bad_input_is_exit_2_and_one_line(argv, needle, capsys):
    assert needle in one_line_error(argv, capsys)


def test_impossible_budget_gives_the_planners_message(capsys):
    smallest = plan(KWS, "ethos-u55-128").frontier[0][0]
    line = one_line_error(["plan", KWS, "--target", "ethos-u", "--budget", "1KiB",
                           "--no-progress"], capsys)
    assert "no schedule fits the memory budget of 1024 bytes" in line
    assert str(smallest) in line


def test_not_a_model(tmp_path, capsys):
    bad = tmp_path / "junk.tflite"
    bad.write_bytes(b"not a flatbuffer" * 8)
    one_line_error(["plan", str(bad), "--target", "ethos-u"], capsys)


@pytest.mark.parametrize("argv", [["--help"], ["plan", "--help"], ["plan", "-h"]])
def test_help(argv, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: tvmc")
    if "plan" in argv:
        for opt in ("--target-ethos-u-accelerator_config", "--sweep-budget", "--scheduler",
                    "--budget", "--io-region", "--output-dir"):
            assert opt in out


def test_python_m_tvm_ethos_plans_without_loading_tvm():
    code = ("import runpy, sys\n"
            "sys.argv = ['tvmc', 'plan', %r, '--target', 'ethos-u', '--no-progress']\n"
            "try:\n"
            "    runpy.run_module('tvm_ethos', run_name='__main__')\n"
            "except SystemExit as e:\n"
            "    assert e.code == 0, e.code\n"
            "print('TVM LOADED' if 'tvm' in sys.modules else 'NO TVM')\n" % KWS)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "total: " in r.stdout and r.stdout.strip().endswith("NO TVM")
    r = subprocess.run([sys.executable, "-m", "tvm_ethos", "plan", "--help"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0 and "usage: tvmc plan" in r.stdout


def test_progress_bar_only_after_a_second_and_only_on_a_terminal(capsys, monkeypatch):
    with sweep.Progress(2, "not a terminal", delay=0.1) as bar:
        time.sleep(0.3)
        bar.update(2)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    with sweep.Progress(3, "quick work", delay=1.0) as bar:
        bar.update(3)
    assert "quick work" not in capsys.readouterr().err
    with sweep.Progress(2, "slow work", delay=0.1) as bar:
        time.sleep(0.3)
        bar.update(2)
    assert "slow work" in capsys.readouterr().err
