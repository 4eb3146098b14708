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


def source_model(case: Case | str) -> Path:
    """The shipped model a case was compiled from (the case, or its ``model``)."""
    return MODELS_DIR / f"{case if isinstance(case, str) else case.model}.tflite"


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


def intermediates(data: bytes):
    """(tensor index, ``data`` with that tensor as its only output) for every operator's
    output, last operator first: TFLite Micro reuses its arena, so an intermediate tensor is
    read by making it the output."""
    import flatbuffers
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    g = model.subgraphs[0]
    for op in reversed(g.operators):
        for t in op.outputs:
            g.outputs = [int(t)]
            b = flatbuffers.Builder(1024)
            b.Finish(model.Pack(b), file_identifier=b"TFL3")
            yield int(t), bytes(b.Output())


def ifm_reads():
    """A ``trace`` for the streams that keeps every operation's IFM (and IFM2) box as the
    stream reads it, (height, width, depth), and the list it fills."""
    from ethosu_stream.feature_map import from_registers
    from ethosu_stream.ops_common import ifm_hw, kernel, ofm_shape

    seen: list[np.ndarray] = []

    def keep(cmd, state, mem):
        if cmd.name not in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL",
                            "NPU_OP_ELEMENTWISE"):
            return
        h, w, c = ofm_shape(state)
        prefixes = ["IFM"]
        if cmd.name == "NPU_OP_ELEMENTWISE":
            if state.has("IFM2_REGION"):
                prefixes.append("IFM2")
        else:
            h, w = ifm_hw(state, kernel(state), (h, w))
            if cmd.name == "NPU_OP_CONV":
                c = state.param("IFM_DEPTH_M1") + 1
        for prefix in prefixes:
            try:
                fm = from_registers(state, prefix)
                seen.append(np.asarray(mem.read(fm.region, fm.grid(h, w, c), fm.dtype))
                            .reshape(h, w, c))
            except Exception:  # noqa: BLE001 - a box this guess gets wrong is just not kept
                continue

    return keep, seen
