"""Corrupted corpus streams and files: bit flips and truncation of the command words and of
whole Vela ``.tflite`` files (seeded, a bounded number of cases) end in a completed run or
in one :class:`StreamError`; nothing else escapes (no IndexError, MemoryError, numpy or
flatbuffer error), no case runs past ``CASE_SECONDS``, and nothing crashes the process.

The cases run in a child process (this file run as a script), because a corrupt operator
left to the CPU goes to TFLite Micro's native kernels: a crash there would end the child,
which the test reports with the case that caused it, rather than end the test session.
``STREAM_FUZZ_CASES`` sets the number of cases per kind (``make test`` runs the default,
``make test-slow`` ten times as many).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import numpy as np
import pytest

from ethosu_stream import StreamError
from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from ethosu_stream.tflite_graph import TfliteGraph
from tests.ethosu_stream.corpus import NOT_BUILT, compiled_cases, random_inputs, source_model
from tests.helpers.models import REPO

KINDS = ("stream-bitflip", "stream-truncate", "tflite-bitflip", "tflite-truncate")
CASES = int(os.environ.get("STREAM_FUZZ_CASES", 40))
SLOW_CASES = 10 * CASES
CASE_SECONDS = 10
#: the corpus's small models: each case runs in well under a second, so the bound on a
#: case's time is a bound on hangs, not on the model's size
MODELS = ("ds_cnn_kws", "hello_world_int8", "micro_speech_quantized",
          "keyword_scrambled_8bit", "trained_lstm_int8")


class _Overtime(Exception):
    pass


def _on_alarm(signum, frame):
    raise _Overtime


def _sources():
    return sorted(((c, p) for c, p in compiled_cases() if c.name in MODELS),
                  key=lambda cp: cp[0].id)


def _flip(data: np.ndarray, rs: np.random.RandomState, bits: int) -> np.ndarray:
    """``data`` (unsigned) with ``1..flips`` random bits inverted."""
    out = data.copy()
    width = out.dtype.itemsize * 8
    for _ in range(rs.randint(1, bits + 1)):
        i = rs.randint(out.size)
        out[i] ^= out.dtype.type(1 << rs.randint(width))
    return out


def run_case(kind: str, seed: int, sources) -> tuple[str, str]:
    """One corrupted case: (its name, its outcome: "ran" or "StreamError: ...")."""
    rs = np.random.RandomState(seed)
    case, path = sources[rs.randint(len(sources))]
    data = path.read_bytes()
    xs = random_inputs(source_model(case).read_bytes(), seed)
    name = f"{kind} seed {seed} on {case.id}"
    try:
        if kind.startswith("stream"):
            op = read_ethos_u_ops(data)[0]
            words = op.words.astype(np.uint32)
            if kind == "stream-bitflip":
                words = _flip(words, rs, 3)
            else:
                words = words[:rs.randint(words.size)]
            op = replace(op, words=words.astype(np.int64))
            # the stream reads whatever is at its inputs' places: any values of their types
            op.run([rs.randint(np.iinfo(s.dtype).min, np.iinfo(s.dtype).max + 1, s.shape)
                    .astype(s.dtype) for s in op.inputs], case.config)
        else:
            raw = np.frombuffer(data, np.uint8)
            raw = _flip(raw, rs, 8) if kind == "tflite-bitflip" else raw[:rs.randint(raw.size)]
            TfliteGraph(raw.tobytes(), case.config).run(xs)
    except StreamError as exc:
        return name, f"StreamError: {exc}"
    return name, "ran"


def _child(kind: str, cases: int) -> int:
    """Runs the cases of ``kind``, one JSON line each, so the parent sees how far it got."""
    sources = _sources()
    signal.signal(signal.SIGALRM, _on_alarm)
    for seed in range(cases):
        start = time.monotonic()
        signal.alarm(CASE_SECONDS)
        try:
            name, outcome = run_case(kind, seed, sources)
        except _Overtime:
            name, outcome = f"{kind} seed {seed}", f"ran past {CASE_SECONDS} s"
        except BaseException as exc:  # what escaped: the failure the test reports
            name, outcome = f"{kind} seed {seed}", f"escaped: {type(exc).__name__}: {exc}"
        finally:
            signal.alarm(0)
        print(json.dumps({"case": name, "outcome": outcome,
                          "seconds": round(time.monotonic() - start, 3)}), flush=True)
    return 0


@pytest.mark.parametrize("kind", KINDS)
def test_corrupted_corpus_streams_run_or_raise_stream_error(kind):
    _fuzz(kind, CASES)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_many_corrupted_corpus_streams_run_or_raise_stream_error(kind):
    _fuzz(kind, SLOW_CASES)


def _fuzz(kind: str, cases: int) -> None:
    """Runs ``cases`` seeded cases of ``kind`` in a child; fails on anything but a run or a
    StreamError that says where, on a case past ``CASE_SECONDS``, or on the child dying."""
    if not _sources():
        pytest.skip(NOT_BUILT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get(
        "PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, __file__, kind, str(cases)], capture_output=True,
                          text=True, env=env, timeout=cases * CASE_SECONDS + 120)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and len(results) == cases, (
        f"the child died (exit {proc.returncode}) after {len(results)} of {cases} cases; "
        f"the next one is seed {len(results)}:\n{proc.stderr[-3000:]}")
    bad = [r for r in results if r["outcome"] != "ran"
           and not r["outcome"].startswith("StreamError: ")]
    assert not bad, "\n".join(f"{r['case']}: {r['outcome']}" for r in bad)
    # a StreamError names where: in a stream the command, in a file the operator, tensor or
    # part of the file
    where = ("command #",) if kind.startswith("stream") else _WHERE
    unnamed = [r for r in results if r["outcome"].startswith("StreamError: ")
               and not any(k in r["outcome"] for k in where)]
    assert not unnamed, "\n".join(f"{r['case']}: {r['outcome']}" for r in unnamed)
    counts = {"ran": sum(r["outcome"] == "ran" for r in results)}
    counts["StreamError"] = len(results) - counts["ran"]
    print(f"\n{kind}: {cases} cases, {counts['ran']} ran, {counts['StreamError']} StreamError, "
          f"slowest {max(r['seconds'] for r in results):.2f} s")


#: words a StreamError uses to say where the fault is
_WHERE = ("command #", "operator", "tensor", ".tflite", "payload", "stream", "metadata",
          "input", "region", "output")


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], int(sys.argv[2])))
