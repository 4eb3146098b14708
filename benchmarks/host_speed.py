#!/usr/bin/env python3
"""Inference latency of every shipped model: LiteRT against tvm-ethos's host, emulator and GPU
builds.

Run: ``.venv/bin/python benchmarks/host_speed.py`` (options: ``--models ds_cnn_kws,resnet8_cifar``,
``--runs ethos-u,llvm;llvm``, ``--seconds 2``, ``--threads 2``, ``--mcpu znver3``: the host
kernels built for that CPU instead of this machine's). Prints one table.

Columns, each measured in this one run on the same input (random int8 codes, seed 0):

* ``xnnpack``: LiteRT's default resolver (XNNPack delegate), the peer every ratio is against;
* ``litert-ref``: LiteRT without the default delegates (``BUILTIN_WITHOUT_DEFAULT_DELEGATES``:
  its optimized builtin kernels);
* ``llvm``: ``tvm_ethos.compile(model, target="llvm")``, every operator a host kernel;
* ``ethos-u,llvm``: the NPU part run on the emulator (its scheduled TIR, emulated, not NPU
  speed), the rest host kernels;
* ``opencl``: ``target="opencl"`` run through PyOpenCL on the first OpenCL device (PoCL here).

Each cell is the median latency in milliseconds over ``--seconds`` of back-to-back inferences
(after two warm-up runs), with the ratio to XNNPack. The tvm-ethos outputs are checked equal to
LiteRT's reference kernels (``BUILTIN_REF``, run in a child process: they abort on
MobileNetV1-224 in this build, where the builtin kernels are the reference instead, as in
tests/tvm_ethos/test_models.py), and a mismatch is printed in the cell. Compile seconds per
tvm-ethos target are printed below the table.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.models import MODELS_DIR as MODELS  # noqa: E402

TVM_RUNS = ("llvm", "ethos-u,llvm", "opencl")


def median_ms(fn, seconds: float) -> float:
    """Median wall milliseconds of ``fn()`` over ``seconds`` (at least three runs)."""
    fn()
    fn()
    lat = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(lat) < 3:
        t0 = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - t0)
    return statistics.median(lat) * 1e3


def litert(path: Path, resolver: str, threads: int):
    """A LiteRT interpreter and a function that runs it on given inputs."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = getattr(OpResolverType, resolver)
    it = Interpreter(model_path=str(path), experimental_op_resolver_type=kind, num_threads=threads)
    it.allocate_tensors()
    ins, outs = it.get_input_details(), it.get_output_details()

    def run(xs):
        for d, x in zip(ins, xs):
            it.set_tensor(d["index"], x)
        it.invoke()
        return [it.get_tensor(d["index"]) for d in outs]

    return it, run


REF_CHILD = r"""
import sys, numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
it = Interpreter(model_path=sys.argv[1], experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
it.allocate_tensors()
xs = np.load(sys.argv[2])
for k, d in enumerate(it.get_input_details()):
    it.set_tensor(d["index"], xs[f"x{k}"])
it.invoke()
outs = it.get_output_details()
np.savez(sys.argv[3], **{f"y{k}": it.get_tensor(d["index"]) for k, d in enumerate(outs)})
"""


def reference_outputs(path: Path, xs) -> list | None:
    """LiteRT's reference kernels (BUILTIN_REF) on ``xs``, in a child process (they abort on
    some models in this build); None where the child fails."""
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        x_file, y_file = Path(tmp) / "x.npz", Path(tmp) / "y.npz"
        np.savez(x_file, **{f"x{k}": x for k, x in enumerate(xs)})
        done = subprocess.run(
            [sys.executable, "-c", REF_CHILD, str(path), str(x_file), str(y_file)],
            capture_output=True,
        )
        if done.returncode != 0 or not y_file.exists():
            return None
        with np.load(y_file) as ys:
            return [ys[f"y{k}"] for k in range(len(ys.files))]


def model_inputs(path: Path) -> list[np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter

    it = Interpreter(model_path=str(path))
    rng = np.random.RandomState(0)
    xs = []
    for d in it.get_input_details():
        info = np.iinfo(d["dtype"])
        xs.append(rng.randint(info.min, info.max + 1, size=tuple(d["shape"])).astype(d["dtype"]))
    return xs


def measure_model(path: Path, runs: list[str], seconds: float, threads: int) -> tuple[dict, dict]:
    """Median ms per column (a string where the column failed) and compile seconds per target."""
    import tvm_ethos

    xs = model_inputs(path)
    cells: dict = {}
    for col, resolver in (("xnnpack", "AUTO"), ("litert-ref", "BUILTIN_WITHOUT_DEFAULT_DELEGATES")):
        _it, run = litert(path, resolver, threads)
        cells[col] = median_ms(lambda: run(xs), seconds)
    expected = reference_outputs(path, xs)
    if expected is None:  # BUILTIN_REF aborts on MobileNetV1-224 in this build: its builtin kernels
        expected = [e.copy() for e in run(xs)]
    compile_s: dict = {}
    for target in runs:
        try:
            t0 = time.perf_counter()
            # the emulated column times the TensorIR emulator (the command stream's functional
            # model is a checker, not a fast path)
            cm = tvm_ethos.compile(tvm_ethos.load_model(str(path)), target=target,
                                   npu_runtime="tir")
            compile_s[target] = time.perf_counter() - t0
            got = cm.run(*xs)
            if not all(
                np.array_equal(np.asarray(g).reshape(e.shape), e) for g, e in zip(got, expected)
            ):
                cells[target] = "MISMATCH"
            else:
                cells[target] = median_ms(lambda: cm.run(*xs), seconds)
            cm.unload()
        except Exception as err:  # a column that cannot run is reported, not fatal
            cells[target] = f"error: {type(err).__name__}"
        print(
            f"# {path.stem} {target}: "
            f"{cells[target] if isinstance(cells[target], str) else f'{cells[target]:.2f} ms'}",
            file=sys.stderr,
            flush=True,
        )
    return cells, compile_s


def _cell(v, peer: float) -> str:
    if isinstance(v, str):
        return v
    return f"{v:.2f} ({v / peer:.1f}x)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--models", default=None, help="comma-separated model stems (default: every shipped model)"
    )
    ap.add_argument("--runs", default=";".join(TVM_RUNS), help="tvm-ethos targets, ';'-separated")
    ap.add_argument(
        "--seconds", type=float, default=2.0, help="measuring time per column and model"
    )
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="LiteRT threads")
    ap.add_argument("--mcpu", help="build the host kernels for this CPU (e.g. znver3: AVX2, no "
                    "VNNI) instead of this machine's; LiteRT is unchanged")
    args = ap.parse_args(argv)
    if args.mcpu:
        from tvm_ethos.host.cpu import cpu_schedule

        cpu_schedule.host_target = lambda: {"kind": "llvm", "mcpu": args.mcpu}

    if args.models:
        paths = [MODELS / f"{m}.tflite" for m in args.models.split(",")]
    else:
        paths = sorted(MODELS.glob("*.tflite"))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        print(
            f"host_speed: no model file {', '.join(missing)}; "
            f"pass --models with stems of {MODELS}/*.tflite",
            file=sys.stderr,
        )
        return 2
    runs = [r.strip() for r in args.runs.split(";") if r.strip()]
    cols = ["xnnpack", "litert-ref", *runs]
    table, compiles = {}, {}
    for p in paths:
        table[p.stem], compiles[p.stem] = measure_model(p, runs, args.seconds, args.threads)

    print(f"median ms per inference (ratio to LiteRT XNNPack), {args.seconds:g} s per cell, "
          f"LiteRT threads {args.threads}; NPU columns emulated on the host")
    print()
    print("| model | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for stem, cells in table.items():
        peer = cells["xnnpack"]
        print(f"| {stem} | " + " | ".join(_cell(cells[c], peer) for c in cols) + " |")
    print()
    print(
        "compile seconds: "
        + "; ".join(
            f"{stem} " + ", ".join(f"{t} {s:.1f}" for t, s in cs.items())
            for stem, cs in compiles.items()
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
