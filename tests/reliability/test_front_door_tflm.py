"""The front door accepts what TFLite Micro's interpreter accepts and refuses what it refuses
(issue 30): TFLite Micro (allocation and one invocation, in crash-isolated workers) and
``load_model`` judge the same models — the trained models, the shipped ones, the builder's
defective models and semantic mutations of them (``front_door_cases.py``).

A model TFLite Micro runs is never called invalid (ModelLoadError; tvm-ethos may still refuse
to import it, saying why); one it refuses, or that crashes it, never imports; every refusal is
one clear line. Where TFLite Micro refuses a model only for want of a builtin operator's kernel
(GELU), LiteRT's reference kernels judge it (``tflite_oracle.runs``): tvm-ethos takes such
operators with LiteRT as their reference. ``TVM_ETHOS_FRONT_DOOR_CAMPAIGN`` picks another set of
mutations.
"""
from __future__ import annotations

import os
from collections import Counter

import pytest

from tests.helpers.tflite_oracle import runs, tflm_verdicts
from tests.reliability.front_door_cases import (
    TRAINED_DIR,
    disagreement,
    front_door,
    mutated,
    seed_models,
)

CAMPAIGN = int(os.environ.get("TVM_ETHOS_FRONT_DOOR_CAMPAIGN", "0"))


def _judge(cases):
    """(table of (TFLite Micro, load_model) outcomes, disagreements)."""
    verdicts = tflm_verdicts([data for _, data in cases])
    table, wrong = Counter(), []
    for (name, data), tflm in zip(cases, verdicts):
        ours = front_door(data, full=False)
        if ours.outcome == "validated" and not runs(tflm):
            ours = front_door(data, full=True)      # through TVM's importer: must refuse
        table[(tflm.split(":")[0].split(" (")[0], ours.outcome)] += 1
        problem = disagreement(tflm, ours)
        if problem:
            wrong.append(f"{name}: {problem}")
    return table, wrong


def _check(cases):
    table, wrong = _judge(cases)
    print("\n".join(f"{t:>8} | {o:<22} {n}" for (t, o), n in sorted(table.items())))
    assert not wrong, "\n".join(wrong[:20])
    # both sides of the question were reached
    assert table[("ok", "validated")] > 0
    assert sum(n for (t, _), n in table.items() if t != "ok") > 0
    return table


def test_trained_models_agree_with_tflite_micro():
    if not TRAINED_DIR.exists():
        pytest.skip(f"{TRAINED_DIR} not available (set TVM_ETHOS_MODELS)")
    seeds = [(n, d) for n, d in seed_models() if "/" not in n]
    verdicts = dict(zip([n for n, _ in seeds], tflm_verdicts([d for _, d in seeds])))
    # TFLite Micro runs every trained model (its Python build has no ethos-u operator)
    assert {n for n, v in verdicts.items() if v != "ok"} == {"person_detect_vela"}
    ours = {n: front_door(d, full=True) for n, d in seeds
            if n in ("person_detect", "micro_speech_quantized", "hello_world_int8",
                     "trained_lstm_int8", "keyword_scrambled_8bit", "person_detect_vela")}
    # the int8 LSTM imports for an ethos-u package (its NPU's emulator runs it)
    assert {n for n, v in ours.items() if v.outcome == "imported"} == {
        "person_detect", "micro_speech_quantized", "hello_world_int8", "trained_lstm_int8"}
    for n in ("keyword_scrambled_8bit", "person_detect_vela"):
        assert ours[n].outcome == "UnsupportedModelError", (n, ours[n])
        assert disagreement(verdicts[n], ours[n]) is None


def test_front_door_agrees_with_tflite_micro():
    """A third of the builder's defective models and 100 semantic mutations."""
    seeds = seed_models()
    defective = [c for c in seeds if "/" in c[0]]
    _check(defective[CAMPAIGN % 3::3] + mutated(seeds, 100, CAMPAIGN))


@pytest.mark.slow
def test_front_door_agrees_with_tflite_micro_long():
    """Every defective builder model and 2,000 semantic mutations of the trained, shipped and
    builder models."""
    seeds = seed_models()
    _check(seeds + mutated(seeds, 2000, CAMPAIGN + 1))
