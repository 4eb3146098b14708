"""A ``.tflite`` output builds nothing it does not write: no emulator kernels, no host
library, no emulator TIR scheduled (``compiler.compile_streams``), and its bytes are those the
full build writes, its plan report the full build's less what only scheduled TIR measures;
the compile's stages are timed and heard as they end (``tvm_ethos.stages``)."""

import logging
import os
import subprocess
import sys

import pytest
import tvm

import tvm_ethos
from tests.helpers.models import model_path
from tvm_ethos import stages
from tvm_ethos.backends.tflite_micro import compile as tflm_compile
from tvm_ethos.cli_compile import TVM_BACKEND_AUTOLOAD, skip_tvm_device_backends
from tvm_ethos.emulator import schedule
from tvm_ethos.targets import parse_targets
from tvm_ethos.tflite_direct.operators import Declined

pytest.importorskip("ethosu.vela")

ACCEL = "ethos-u55-128"


def _refuse_build(*_args, **_kwargs):
    raise AssertionError("a library was built for a .tflite output")


def _refuse_schedule(*_args, **_kwargs):
    raise AssertionError("emulator TIR was scheduled for a .tflite output")


def _through_tvm(*_args, **_kwargs) -> Declined:
    """The TVM-free path declining every group, so that the group goes through TVM."""
    return Declined("this test compiles through TVM")


def _unscheduled(subgraph: dict) -> dict:
    """A subgraph's plan report without what only scheduled TIR measures."""
    out = {k: v for k, v in subgraph.items() if not k.startswith("scheduled_")}
    if "plans" in out:
        out["plans"] = [{k: v for k, v in p.items() if k != "scheduled_bytes"}
                        for p in out["plans"]]
    return out


@pytest.fixture(scope="module")
def person():
    return model_path("tflite-micro/person_detect").read_bytes()


@pytest.fixture(scope="module")
def written(person):
    """person_detect compiled through TVM to a .tflite with every library build and TIR
    schedule refused: (the model, the stages heard in order)."""
    heard: list[str] = []
    mp = pytest.MonkeyPatch()
    mp.setattr(tflm_compile, "compile_group", _through_tvm)
    mp.setattr(tvm, "compile", _refuse_build)
    mp.setattr(tvm.tirx, "build", _refuse_build)
    mp.setattr(schedule, "apply_proposal", _refuse_schedule)
    try:
        with stages.listening(lambda name, _s: heard.append(name)):
            cm = tvm_ethos.compile_tflite(person, "ethos-u", accelerator_config=ACCEL)
    finally:
        mp.undo()
    return cm, heard


def test_a_tflite_output_builds_no_library(written):
    cm, heard = written
    assert cm.tflite[4:8] == b"TFL3"
    assert cm.partition_summary == {"ethos-u": 31}
    assert {"importer check", "import", "partition", "plan", "streams", "program",
            "write"} <= set(heard)
    assert "emulator" not in heard and "host build" not in heard
    assert heard.index("plan") < heard.index("streams") < heard.index("write")


def test_the_path_without_tvm_writes_the_same_file(written, person):
    """The default compile, which takes person_detect's group without TVM
    (``tvm_ethos.tflite_direct``), writes the bytes and the plan the TVM path writes."""
    heard: list[str] = []
    with stages.listening(lambda name, _s: heard.append(name)):
        direct = tvm_ethos.compile_tflite(person, "ethos-u", accelerator_config=ACCEL)
    assert "read without TVM" in heard and "import" not in heard
    assert direct.tflite == written[0].tflite
    assert direct.plan_report == written[0].plan_report


def test_the_file_is_the_one_the_full_build_writes(written, person, monkeypatch):
    """The group compiled by ``tvm_ethos.compile`` (emulator and host library built, as
    before) writes the very same bytes."""
    heard: list[str] = []
    monkeypatch.setattr(tflm_compile, "compile_group", _through_tvm)
    monkeypatch.setattr(tflm_compile, "_compile_group", lambda data, target, options:
                        tvm_ethos.compile(data, target=target, **options))
    with stages.listening(lambda name, _s: heard.append(name)):
        full = tvm_ethos.compile_tflite(person, "ethos-u", accelerator_config=ACCEL)
    assert "emulator" in heard and "host build" in heard   # this path did build them
    assert full.tflite == written[0].tflite
    # the plan is the same; only the full build measured scheduled TIR (equal to the plan)
    ours, theirs = written[0].plan_report, full.plan_report
    assert set(ours["subgraphs"]) == set(theirs["subgraphs"]) != set()
    for sym, sub in theirs["subgraphs"].items():
        assert "scheduled_bytes" in sub and "scheduled_bytes" not in ours["subgraphs"][sym]
        assert ours["subgraphs"][sym] == _unscheduled(sub)
    assert {k: v for k, v in ours.items() if k != "subgraphs"} == \
        {k: v for k, v in theirs.items() if k != "subgraphs"}


def test_a_stage_is_logged_and_heard_with_its_time(caplog):
    heard = []
    with caplog.at_level(logging.INFO, logger="tvm_ethos.stages"), \
            stages.listening(lambda name, s: heard.append((name, s))):
        with stages.stage("first"):
            pass
        with stages.stage("second"):
            sum(range(1000))
    assert [n for n, _ in heard] == ["first", "second"]
    assert all(s >= 0 for _, s in heard)
    lines = [r.getMessage() for r in caplog.records if r.name == "tvm_ethos.stages"]
    assert len(lines) == 2 and lines[0].startswith("stage first: ") and lines[0].endswith(" s")


def test_a_failed_stage_is_not_heard_and_a_listener_leaves():
    heard = []
    with stages.listening(lambda name, _s: heard.append(name)):
        with pytest.raises(ValueError), stages.stage("broken"):
            raise ValueError("no")
    with stages.stage("after"):   # the listener left with its block
        pass
    assert heard == []


@pytest.mark.parametrize("target,tvm_loaded,user_set,skips", [
    ("ethos-u", False, False, True),
    ("ethos-u", True, False, False),      # too late: TVM is loaded
    ("ethos-u", False, True, False),      # the user's setting stands
    ("ethos-u,llvm", False, False, False),   # a package may run OpenCL / LLVM code
])
def test_tvm_loads_its_device_backends_unless_only_the_npu_groups_compile(
        target, tvm_loaded, user_set, skips, monkeypatch):
    monkeypatch.delenv(TVM_BACKEND_AUTOLOAD, raising=False)
    if user_set:
        monkeypatch.setenv(TVM_BACKEND_AUTOLOAD, "1")
    if not tvm_loaded:
        monkeypatch.delitem(sys.modules, "tvm")
    assert skip_tvm_device_backends(parse_targets(target)) is skips
    assert os.environ.get(TVM_BACKEND_AUTOLOAD) == ("0" if skips else "1" if user_set else None)


def test_tvmc_compile_to_a_tflite_loads_no_tvm_device_backend(tmp_path, written):
    """A fresh ``tvmc compile`` process for ``--target ethos-u`` loads none of TVM's device
    backends (CUDA's PTX hooks, Adreno's target tags are two), runs every stage with the
    cyclic garbage collector paused (on again after) and writes the bytes compile_tflite
    does."""
    out = tmp_path / "person.tflite"
    code = ("import gc, sys; from tvm_ethos import stages; from tvm_ethos.cli import main\n"
            "on = []; stages._LISTENERS.append(lambda name, _s: on.append(gc.isenabled()))\n"
            "rc = main(sys.argv[1:])\n"
            "print(len(on), any(on), gc.isenabled())\n"
            "print(sorted(m for m in sys.modules if m.startswith(('tvm.backend.cuda.ptx', "
            "'tvm.backend.adreno'))))")
    env = {k: v for k, v in os.environ.items() if k != TVM_BACKEND_AUTOLOAD}
    done = subprocess.run(
        [sys.executable, "-c", code, "compile",
         str(model_path("tflite-micro/person_detect")), "--target", "ethos-u",
         "--accelerator-config", ACCEL, "-o", str(out), "-q", "--no-progress"],
        capture_output=True, text=True, env=env, check=True,
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    stages_heard, collector_in_a_stage, collector_after = done.stdout.splitlines()[-2].split()
    assert int(stages_heard) > 5
    assert (collector_in_a_stage, collector_after) == ("False", "True")
    assert done.stdout.splitlines()[-1] == "[]", done.stdout
    assert out.read_bytes() == written[0].tflite
