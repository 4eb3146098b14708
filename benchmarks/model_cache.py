#!/usr/bin/env python3
"""First-ever inference latency vs first inference latency from the model cache (seed 003).

Run: ``.venv/bin/python benchmarks/model_cache.py`` (options: ``--models ds_cnn_kws,resnet8_cifar``,
``--targets ethos-n,llvm;ethos-n,opencl``, ``--repeat 3``). Prints one table.

OpenVINO's NPU plugin definitions, measured here in fresh Python processes (so nothing is
warm in memory; ``import tvm, tvm_ethos`` is outside the timed region):

* **FEIL** (first-ever inference latency): ``compile`` with an empty cache directory (partition,
  NPU codegen, host / OpenCL build, save into the cache) + loading the network (OpenCL program
  build, buffers) + the first inference.
* **FIL** (first inference latency): ``compile`` of the same model, targets and options with the
  cache populated - a cache hit, i.e. ``load`` of the stored model - + loading the network + the
  first inference.

Each figure is the median of ``--repeat`` processes (FEIL: a new empty cache directory each
time). PoCL keeps its own on-disk kernel cache (``~/.cache/pocl``): it compiles a kernel for a
work-group size at its first launch, so FEIL's first inference of an opencl model includes that
compile the first time a model is ever seen, and FIL's first inference finds it on disk.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.models import MODELS_DIR as MODELS  # noqa: E402

CHILD = r"""
import json, sys, time
import numpy as np
import tvm, tvm_ethos  # imports outside the timed region (tvm alone takes ~1 s)
model, target, cache = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
cm = tvm_ethos.compile(model, target=target, cache_dir=cache)
t1 = time.perf_counter()
ex = cm.executor            # load the network: kernels, OpenCL program, constants
t2 = time.perf_counter()
x = [np.zeros(s.shape, s.dtype) for s in cm.inputs]
cm.run(*x)
t3 = time.perf_counter()
print(json.dumps({"hit": cm.from_cache, "compile_or_load": t1 - t0, "network": t2 - t1,
                  "infer": t3 - t2, "total": t3 - t0}))
"""


def child(model: str, target: str, cache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run(
        [sys.executable, "-c", CHILD, model, target, cache],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-3000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="ds_cnn_kws,resnet8_cifar,mobilenet_v1_0.25_96")
    ap.add_argument(
        "--targets", default="ethos-n,llvm;ethos-n,opencl", help="';'-separated target lists"
    )
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    rows = []
    for name in args.models.split(","):
        path = str(MODELS / f"{name}.tflite")
        for target in args.targets.split(";"):
            feil, fil = [], []
            for _ in range(args.repeat):
                for _attempt in range(3):
                    with tempfile.TemporaryDirectory(prefix="tvm_ethos_cache_") as d:
                        cold = child(path, target, d)
                        assert not cold["hit"]
                        warm = child(path, target, d)
                    if warm["hit"]:
                        break
                    # the key covers a digest of tvm-ethos's sources: someone edited one in between
                    print("# cache miss after a source change; measuring again", file=sys.stderr)
                else:
                    raise RuntimeError(
                        "the cache never hit: are the sources changing continuously?"
                    )
                feil.append(cold)
                fil.append(warm)
            med = {k: statistics.median(r[k] for r in feil) for k in feil[0] if k != "hit"}
            medw = {k: statistics.median(r[k] for r in fil) for k in fil[0] if k != "hit"}
            rows.append((name, target, med, medw))
            print(
                f"# {name} {target}: FEIL {med['total']:.2f} s, FIL {medw['total']:.2f} s",
                file=sys.stderr,
                flush=True,
            )
    print(f"median of {args.repeat} fresh processes each; seconds")
    print()
    print(
        "| model | targets | FEIL total | compile | load network | 1st inference | FIL total | "
        "load from cache | load network | 1st inference | FEIL / FIL |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, target, a, b in rows:
        print(
            f"| {name} | {target} | {a['total']:.2f} | {a['compile_or_load']:.2f} | "
            f"{a['network']:.2f} | {a['infer']:.3f} | "
            f"{b['total']:.2f} | {b['compile_or_load']:.2f} | {b['network']:.2f} | "
            f"{b['infer']:.3f} | {a['total'] / b['total']:.1f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
