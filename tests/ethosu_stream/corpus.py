"""The corpus of third-party streams (``make corpus``, tools/build_corpus.py) as the tests
see it: its manifest, each stream's bytes, and TFLite Micro's interpreter as the oracle."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from tests.helpers.models import MODELS_DIR, REPO
from tools.build_corpus import MANIFEST, Case

CORPUS_DIR = Path(os.environ.get("TVM_ETHOS_CORPUS", REPO / "build" / "corpus"))
NOT_BUILT = (f"the stream corpus is not built ({CORPUS_DIR / MANIFEST} is missing): run "
             "`make corpus` (or set TVM_ETHOS_CORPUS)")


def manifest() -> dict | None:
    path = CORPUS_DIR / MANIFEST
    return json.loads(path.read_text()) if path.exists() else None


def compiled_cases() -> list[tuple[Case, Path]]:
    """Every case Vela compiled, with its ``_vela.tflite``; empty when the corpus is absent."""
    m = manifest()
    if m is None:
        return []
    return [(Case(e["version"], e["model"], e["config"], e["optimise"]), CORPUS_DIR / e["file"])
            for e in m["cases"] if e["status"] == "ok"]


def source_model(case: Case) -> Path:
    return MODELS_DIR / f"{case.model}.tflite"


def tflm(data: bytes):
    """A fresh TFLite Micro interpreter for ``data`` (fresh: no state from earlier inputs)."""
    from tflite_micro.python.tflite_micro import runtime

    return runtime.Interpreter.from_bytes(bytes(data), arena_size=max(len(data) * 10, 1 << 22))


def _io_counts(data: bytes) -> tuple[int, int]:
    import tflite

    g = tflite.Model.GetRootAsModel(bytes(data), 0).Subgraphs(0)
    return g.InputsLength(), g.OutputsLength()


def input_details(data: bytes) -> list[tuple[tuple[int, ...], np.dtype]]:
    it = tflm(data)
    details = [it.get_input_details(i) for i in range(_io_counts(data)[0])]
    return [(tuple(int(s) for s in d["shape"]), np.dtype(d["dtype"])) for d in details]


def random_inputs(data: bytes, seed: int) -> list[np.ndarray]:
    """Uniform integers over each input's type (int8 or int16), from ``seed``."""
    rs = np.random.RandomState(seed)
    out = []
    for shape, dtype in input_details(data):
        info = np.iinfo(dtype)
        out.append(rs.randint(info.min, info.max + 1, shape).astype(dtype))
    return out


def oracle(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """TFLite Micro's outputs for ``inputs`` on the model ``data``."""
    it = tflm(data)
    for i, x in enumerate(inputs):
        it.set_input(x, i)
    it.invoke()
    return [np.asarray(it.get_output(i)).copy() for i in range(_io_counts(data)[1])]
