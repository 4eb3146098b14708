"""Malformed models never crash, hang or leak a raw exception (issue 8).

``test_tflite_fuzz_campaign`` mutates the shipped TFLite models and single-operator builder
models 10,000 times (``tests/reliability/tflite_mutator.py``; the default suite runs the
campaign's first 2,000 cases, the slow suite all of them) and feeds every case to
``planner.tflite.load_tflite`` and to ``tvm_ethos.load_model`` (up to TVM's converter); the
cases tvm-ethos' validation accepts then go through the real TVM import while a time budget
lasts. Workers are separate processes watched by the parent (``fuzz_harness.py``): a segfault,
a hang or a raw exception fails the test and leaves the offending input under
``out/fuzz-failures/`` (``TVM_ETHOS_FUZZ_SAVE`` to change), reproducible from its campaign and
case number. ``TVM_ETHOS_FUZZ_CAMPAIGN`` picks another campaign, ``TVM_ETHOS_FUZZ_CASES``
another size. The longer local target is ``benchmarks/fuzz_models.py``.

The harness tests below show that each kind of failure is caught.
"""
from __future__ import annotations

import os
import struct

import pytest

from tests.reliability.fuzz_harness import ROOT, run_campaign
from tests.reliability.tflite_mutator import MODELS, Corpus, layout, mutate

CAMPAIGN = int(os.environ.get("TVM_ETHOS_FUZZ_CAMPAIGN", "0"))
CASES = int(os.environ.get("TVM_ETHOS_FUZZ_CASES", "10000"))
#: the default suite's share of the campaign: its first cases, with the same share of the
#: full-import time budget
DEFAULT_SHARE = 5
FULL_BUDGET_S = 30.0
SAVE = os.environ.get("TVM_ETHOS_FUZZ_SAVE", str(ROOT / "out" / "fuzz-failures"))


def _fail_report(report) -> str:
    return (report.summary() + f"\nreproduce: TVM_ETHOS_FUZZ_CAMPAIGN={report.campaign}; each "
            "failure's input is saved as named above")


@pytest.mark.parametrize("share", [
    pytest.param(DEFAULT_SHARE, id="first-fifth"),
    pytest.param(1, id="whole", marks=pytest.mark.slow)])
def test_tflite_fuzz_campaign(share):
    cases = CASES // share
    report = run_campaign(cases, campaign=CAMPAIGN, workers=2, full_budget=FULL_BUDGET_S / share,
                          save_dir=os.path.join(SAVE, f"tflite-c{CAMPAIGN}"))
    print("\n" + report.summary())
    assert not report.failures, _fail_report(report)
    assert report.cases == cases, _fail_report(report)
    assert sum(report.counts["planner"].values()) == cases
    assert sum(report.counts["frontend"].values()) == cases
    # the campaign must reach both sides of every check: most cases rejected, some accepted
    for target in ("planner", "frontend"):
        c = report.counts[target]
        accepted = c.get("ok", 0) + c.get("validated", 0)
        assert 0.02 * cases < accepted < 0.6 * cases, (target, dict(c))
    assert report.full_cases > 0, "no validated case reached the full TVM import"


def test_onnx_fuzz_campaign():
    pytest.importorskip("onnx", reason="ONNX fuzzing needs the optional 'onnx' package")
    report = run_campaign(2000, campaign=CAMPAIGN, workers=1, corpus="onnx", targets="onnx",
                          save_dir=os.path.join(SAVE, f"onnx-c{CAMPAIGN}"))
    print("\n" + report.summary())
    assert not report.failures, _fail_report(report)
    assert report.cases == 2000


# ----------------------------------------------------------------------------- the generator
def test_cases_are_reproducible_and_varied():
    corpus = Corpus.default()
    a = [corpus.case(3, i) for i in range(200)]
    assert a == [corpus.case(3, i) for i in range(200)]
    assert len({d for d, _ in a}) > 190
    kinds = {desc.split(": ")[1] for _, desc in a if desc.count(": ") >= 1}
    for k in ("truncate", "bitflip", "shape", "quant", "index", "opcode", "vtable", "options"):
        assert k in kinds


def test_layout_finds_the_fields():
    path = MODELS / "ds_cnn_kws.tflite"
    if not path.exists():
        pytest.skip(f"model {path} not available")
    data = path.read_bytes()
    L = layout(data)
    # every shape site holds a dimension of the model
    dims = {struct.unpack_from("<i", data, p)[0] for p, _ in L.sites["shape"]}
    assert {1, 49, 10, 64} <= dims
    assert L.sites["vtable_entry:tensor:12"] and L.sites["scale"] and L.sites["op_io"]
    # the weights are excluded from the byte mutations
    assert L.structural_bytes < 0.5 * len(data)
    import random
    rng = random.Random(0)
    same = sum(mutate(rng, data, L)[0] == data for _ in range(100))
    assert same < 10          # a byte set to the value it had is the only no-op


# ----------------------------------------------------------------------------- the harness
@pytest.mark.parametrize("mode,kind", [("crash", "crash"), ("hang", "hang"),
                                       ("slow", "violation"), ("raw", "violation"),
                                       ("unclear", "violation")])
def test_harness_catches_and_saves(mode, kind, tmp_path, monkeypatch):
    monkeypatch.setenv("TVM_ETHOS_FUZZ_SELFTEST", f"{mode}:5")
    report = run_campaign(12, campaign=1, workers=1, targets="selftest", case_timeout=0.5,
                          watchdog=2.0, save_dir=str(tmp_path))
    assert [(f.kind, f.index) for f in report.failures] == [(kind, 5)], report.summary()
    failure = report.failures[0]
    saved = failure.saved
    assert saved and os.path.exists(saved)
    with open(saved, "rb") as f:
        assert f.read() == Corpus.default().case(1, 5)[0]
    if kind in ("crash", "hang"):
        # the worker was restarted after the case and finished the range
        assert report.cases == 11
        assert "Fatal Python error" in failure.detail or kind == "hang"
    else:
        assert report.cases == 12
