"""The TFLite oracle: ai-edge-litert's interpreter with the reference kernels, random inputs
for a model, and the bit-exact comparison of a compiled model against it."""
from __future__ import annotations

import re

import numpy as np

from tests.helpers.tflite_split import needs_split, split_before_softmax


def oracle(model, inputs, reference=True):
    """Outputs of ai-edge-litert's interpreter. ``reference=True`` selects TFLite's reference
    kernels (BUILTIN_REF): the integer arithmetic the NPU emulator reproduces. The default
    resolver adds XNNPack, whose int8 requantization is float-based and differs by 1 LSB."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = (OpResolverType.BUILTIN_REF if reference
            else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    if isinstance(model, (bytes, bytearray)):
        it = Interpreter(model_content=bytes(model), experimental_op_resolver_type=kind)
    else:
        it = Interpreter(model_path=str(model), experimental_op_resolver_type=kind)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def random_inputs(model, rs):
    from ai_edge_litert.interpreter import Interpreter

    if isinstance(model, (bytes, bytearray)):
        it = Interpreter(model_content=bytes(model))
    else:
        it = Interpreter(model_path=str(model))
    out = []
    for d in it.get_input_details():
        if np.issubdtype(d["dtype"], np.integer):
            info = np.iinfo(d["dtype"])
            out.append(rs.randint(info.min, info.max + 1, size=d["shape"]).astype(d["dtype"]))
        else:
            out.append(rs.randn(*d["shape"]).astype(d["dtype"]))
    return out


def assert_bit_exact(compiled, model, n_inputs=3, seed=0, reference=True):
    rs = np.random.RandomState(seed)
    for _ in range(n_inputs):
        xs = random_inputs(model, rs)
        got = compiled.run(*xs)
        ref = oracle(model, xs, reference=reference)
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.size == r.size
            g = g.reshape(r.shape)
            diff = np.abs(g.astype(np.int64) - r.astype(np.int64))
            assert diff.max() == 0, f"max diff {diff.max()} at {np.argwhere(diff)[:5].tolist()}"


# --------------------------------------------------------------------------------------------
# TFLite Micro: the reference for what a valid model is, and the oracle of Ethos-U paths
# --------------------------------------------------------------------------------------------
#: TFLite Micro's arena: its own default (ten times the model) can be too small for a model
#: whose activations outweigh its weights, which is no fault of the model.
TFLM_MIN_ARENA = 16 << 20


def _tflm(data: bytes):
    from tflite_micro.python.tflite_micro import runtime

    return runtime.Interpreter.from_bytes(bytes(data),
                                          arena_size=max(10 * len(data), TFLM_MIN_ARENA))


def _io_count(data: bytes) -> tuple[int, int]:
    import tflite

    sg = tflite.Model.GetRootAs(bytes(data), 0).Subgraphs(0)
    return sg.InputsLength(), sg.OutputsLength()


def tflm_oracle(model, inputs) -> list[np.ndarray]:
    """TFLite Micro's outputs for ``model`` (bytes or a path) on ``inputs``, from a fresh
    interpreter (:class:`TflmOracle`)."""
    data = model if isinstance(model, (bytes, bytearray)) else open(model, "rb").read()
    return TflmOracle(data).run(inputs)


class TflmOracle:
    """TFLite Micro's outputs for one model, call after call (state tensors carry over, as on
    a board): its interpreter on the whole model or, where the model ends in an int8 SOFTMAX
    on which TFLite Micro's reference kernel can abort the process (a row of 512 or more, as
    MobileNetV1-224's), its interpreter up to the logits and that kernel's own integer
    arithmetic for the SOFTMAX (``tflite_split``, rfcs/0002)."""

    def __init__(self, data: bytes):
        data = bytes(data)
        self._split = split_before_softmax(data) if needs_split(data) else None
        self._data = data if self._split is None else self._split.logits
        self._it = _tflm(self._data)
        self._outputs = _io_count(self._data)[1]

    def run(self, inputs) -> list[np.ndarray]:
        for k, x in enumerate(inputs):
            self._it.set_input(np.ascontiguousarray(x), k)
        self._it.invoke()
        outs = [self._it.get_output(k).copy() for k in range(self._outputs)]
        return outs if self._split is None else [self._split.finish(outs[0])]


def tflm_random_inputs(model, rs) -> list[np.ndarray]:
    """Random inputs over the whole range of each input's type, per TFLite Micro's details."""
    data = model if isinstance(model, (bytes, bytearray)) else open(model, "rb").read()
    it = _tflm(data)
    out = []
    for k in range(_io_count(data)[0]):
        d = it.get_input_details(k)
        info = np.iinfo(d["dtype"])
        out.append(rs.randint(info.min, info.max + 1, size=d["shape"]).astype(d["dtype"]))
    return out


def tflm_accepts(data: bytes) -> str:
    """``"ok"`` when TFLite Micro allocates ``data`` and invokes it on zeros, else why not.
    Run it where a crash costs nothing (:func:`tflm_verdicts`): TFLite Micro trusts the
    flatbuffer, and a damaged one can take the process down."""
    try:
        it = _tflm(data)
        n_in, n_out = _io_count(data)
        for k in range(n_in):
            d = it.get_input_details(k)
            it.set_input(np.zeros(d["shape"], d["dtype"]), k)
        it.invoke()
        for k in range(n_out):
            it.get_output(k)
    except Exception as err:      # noqa: BLE001 - any refusal is the verdict
        return _refused(err)
    return "ok"


def litert_accepts(data: bytes) -> str:
    """:func:`tflm_accepts` for LiteRT's reference kernels (BUILTIN_REF): the reference for
    the operators TFLite Micro has no kernel of (GELU, the uint8 tables)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    try:
        it = Interpreter(model_content=bytes(data),
                         experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
        it.invoke()
        for d in it.get_output_details():
            it.get_tensor(d["index"])
    except Exception as err:      # noqa: BLE001 - any refusal is the verdict
        return _refused(err)
    return "ok"


def _refused(err: Exception) -> str:
    return f"refused: {type(err).__name__}: {str(err).strip()[:200]}"


#: What TFLite Micro logs when its op resolver has no kernel for a builtin operator.
_NO_KERNEL = re.compile(r"Didn't find op for builtin opcode '([A-Z0-9_]+)'")
#: How :func:`tflm_verdicts` starts the verdict on such a model.
NO_KERNEL = "no kernel"


def runs(verdict: str) -> bool:
    """Whether a verdict of :func:`tflm_verdicts` says the model runs: on TFLite Micro or,
    where TFLite Micro has no kernel for one of its builtin operators, on LiteRT's."""
    return verdict == "ok" or (verdict.startswith(NO_KERNEL) and verdict.endswith("LiteRT: ok"))


def tflm_verdicts(cases: list[bytes], timeout: float = 20.0) -> list[str]:
    """:func:`tflm_accepts` of each case, in worker processes: a case whose worker dies is
    ``"crash"``, one that gives no verdict within ``timeout`` seconds ``"hang"``; a new worker
    takes the next case. A model TFLite Micro refuses for want of a builtin operator's kernel
    is ``"no kernel: OP; LiteRT: <litert_accepts>"`` (:func:`runs` reads it): a missing kernel
    says nothing about the model."""
    import select
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    verdicts: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for k, data in enumerate(cases):
            Path(tmp, f"{k}.tflite").write_bytes(data)
        while len(verdicts) < len(cases):
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.tflite_oracle", tmp, str(len(verdicts)),
                 str(len(cases))], cwd=root, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, text=True)
            # the worker's start (importing TFLite Micro, then READY) is not the case's time
            select.select([proc.stdout], [], [], 300.0)
            while len(verdicts) < len(cases):
                ready, _, _ = select.select([proc.stdout], [], [], timeout)
                line = proc.stdout.readline() if ready else None
                if line is None:
                    proc.kill()
                    verdicts.append("hang")
                    break
                if not line:
                    proc.wait()
                    verdicts.append(f"crash (exit status {proc.returncode})")
                    break
                if line.startswith("V "):
                    verdicts.append(line[2:].rstrip("\n"))
            proc.stdout.close()
            proc.wait()
    return verdicts


def _worker(folder: str, start: int, stop: int) -> None:
    import os
    import sys
    import tempfile
    from pathlib import Path

    from tflite_micro.python.tflite_micro import runtime  # noqa: F401  (imported before READY)

    log = tempfile.TemporaryFile()          # TFLite Micro's log (its stderr) of each case
    os.dup2(log.fileno(), 2)
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    for k in range(start, stop):
        data = Path(folder, f"{k}.tflite").read_bytes()
        log.seek(0)
        log.truncate()
        verdict = tflm_accepts(data)
        log.seek(0)
        missing = _NO_KERNEL.search(log.read().decode("utf-8", "replace"))
        if verdict != "ok" and missing:
            verdict = f"{NO_KERNEL}: {missing[1]}; LiteRT: {litert_accepts(data)}"
        sys.stdout.write("V " + verdict.replace("\n", " ") + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    import sys

    _worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))


def inputs_for(specs, rs) -> list[np.ndarray]:
    """Uniform integers over each input's whole range, for a compiled model's ``inputs``
    (anything with ``shape`` and ``dtype``)."""
    out = []
    for s in specs:
        info = np.iinfo(s.dtype)
        out.append(rs.randint(info.min, info.max + 1, size=s.shape).astype(s.dtype))
    return out


def compiled_matches(data: bytes, target: str = "ethos-u", seed: int = 0, runs: int = 2,
                     reference=tflm_oracle):
    """``tvm_ethos.compile(data, target)``, its outputs on ``runs`` random inputs (seeded)
    each equal to ``reference``'s on the source model (TFLite Micro's unless told), and the
    compiled model returned for the caller's placement checks."""
    import tvm_ethos  # the oracle helpers above serve TVM-free tests too

    cm = tvm_ethos.compile(data, target, cache_dir=False)
    rs = np.random.RandomState(seed)
    for _ in range(runs):
        xs = inputs_for(cm.inputs, rs)
        got, want = cm.run(*xs), reference(data, xs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.array_equal(g.reshape(w.shape), w), (g.ravel()[:8], w.ravel()[:8])
    return cm
