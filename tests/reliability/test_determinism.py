"""Same input, same bytes (issue 8): the compiled artifact, the partition and plan reports and
the planner JSON are byte-identical across runs and across ``PYTHONHASHSEED`` values.

Each side runs in its own process with its own hash seed, so set and dict iteration order,
``id()``-based ordering, timestamps and temporary paths all get a chance to differ. The rules
these tests hold the code to are in rfcs/0006-reliability.md.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.models import MODELS_DIR as MODELS

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ("0", "4242")


def _model(name: str) -> str:
    p = MODELS / f"{name}.tflite"
    if not p.exists():
        pytest.skip(f"model {p} not available")
    return str(p)


def _env(seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=seed)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _differences(a: Path, b: Path) -> list[str]:
    """Files of directory ``a`` whose bytes differ in ``b`` (zip members named)."""
    out = []
    for f in sorted(p.name for p in a.iterdir()):
        x, y = (a / f).read_bytes(), (b / f).read_bytes() if (b / f).exists() else None
        if x == y:
            continue
        if f.endswith(".tvmethos") and y is not None:
            with zipfile.ZipFile(a / f) as za, zipfile.ZipFile(b / f) as zb:
                ia = {i.filename: (i.date_time, i.external_attr) for i in za.infolist()}
                ib = {i.filename: (i.date_time, i.external_attr) for i in zb.infolist()}
                members = [n for n in ia if za.read(n) != (zb.read(n) if n in ib else None)]
                out.append(f"{f}: members {members} differ; headers {ia} vs {ib}")
        else:
            out.append(f"{f} differs")
    return out


def test_compiled_artifact_and_partition_reports_are_byte_identical(tmp_path):
    model = _model("ds_cnn_kws")
    procs = []
    for seed in SEEDS:
        out = tmp_path / f"seed{seed}"
        procs.append((out, subprocess.Popen(
            [sys.executable, "-m", "tests.reliability.determinism_probe", model, str(out)],
            cwd=ROOT, env=_env(seed), stdout=subprocess.PIPE, stderr=subprocess.PIPE)))
    for out, p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err.decode()[-3000:]
    (a, _), (b, _) = procs
    assert sorted(x.name for x in a.iterdir()) == sorted(x.name for x in b.iterdir())
    assert _differences(a, b) == []
    # the report really carries decisions (an empty report would be trivially identical)
    report = json.loads((a / "partition-ethos-u.json").read_text())
    assert len(report["operators"]) >= 10
    assert {op["placed_on"] for op in report["operators"]} >= {"ethos-u"}


@pytest.mark.parametrize("model,extra", [
    ("ds_cnn_kws", ()),
    ("mobilenet_v1_0.25_96", ("--budget", "60KiB")),
    ("mobilenet_v1_0.25_96", ("--device", "ethos-n78-1tops", "--io-region", "dram")),
])
def test_planner_json_and_plan_report_are_byte_identical(model, extra):
    path = _model(model)
    outs = {}
    for seed in SEEDS:
        for fmt in (("--json",), ()):
            r = subprocess.run([sys.executable, "-m", "planner", "plan", path, *extra, *fmt],
                               cwd=ROOT, env=_env(seed), capture_output=True, timeout=300)
            assert r.returncode == 0, r.stderr.decode()
            outs[seed, fmt] = r.stdout
    for fmt in (("--json",), ()):
        a, b = (outs[s, fmt] for s in SEEDS)
        assert a == b, f"{model} {extra} {fmt or 'report'} differs between hash seeds"
    plan = json.loads(outs[SEEDS[0], ("--json",)])
    assert plan["plans"] and plan["frontier"]
    assert b"cascades" in outs[SEEDS[0], ()]


def test_differences_names_what_changed(tmp_path):
    """The comparison can fail: a zip whose timestamp moved is reported, member by member."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    for d, stamp in ((a, (2020, 1, 1, 0, 0, 0)), (b, (2021, 1, 1, 0, 0, 0))):
        with zipfile.ZipFile(d / "m.tvmethos", "w") as z:
            z.writestr(zipfile.ZipInfo("meta.json", date_time=stamp), b"{}")
        (d / "report.txt").write_text("same")
    diff = _differences(a, b)
    assert len(diff) == 1 and "m.tvmethos" in diff[0] and "2020" in diff[0]
