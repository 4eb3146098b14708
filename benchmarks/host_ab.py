#!/usr/bin/env python3
"""Host (llvm) latency of two source trees and LiteRT XNNPack, measured in turn.

Run: ``.venv/bin/python benchmarks/host_ab.py --base /path/to/base/tree [--models a,b]
[--rounds 5] [--slice 1.5] [--threads N] [--cpu-time]``. One child process per column
(XNNPack with 2 threads or ``--threads``, the base tree, this tree) loads its model
once (``target="llvm"``); then the children run one at a time, ``--slice`` seconds each, for
``--rounds`` rounds, so load from other processes falls on all columns alike, which
back-to-back runs of ``host_speed.py`` do not give on a shared machine.
Prints the median milliseconds of all runs, the 25th percentile, and the ratio to XNNPack.
``--threads N`` also sets TVM_NUM_THREADS of the two trees (unset, TVM takes half the
logical CPUs on x86). ``--threads 1 --cpu-time`` times the CPU seconds of the one thread that
runs each inference (``time.thread_time``) instead of wall time: on a machine whose cores
other processes hold, a parallel loop waits for its slowest thread and a preempted run counts
the time it waited, which swamps kernel differences; CPU time leaves the waiting out.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = "ds_cnn_kws,resnet8_cifar,mobilenet_v1_0.25_96,mobilenet_v1_1.0_224"

CHILD = r"""
import os, statistics, sys, time
import numpy as np
sys.path.insert(0, os.environ["PYTHONPATH"])
from tests.helpers.models import MODELS_DIR
from tests.helpers.tflite_oracle import random_inputs
name, rounds, slice_s, go = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
threads = int(os.environ.get("AB_THREADS", "2"))
clock = time.thread_time if os.environ.get("AB_CPU_TIME") else time.perf_counter
path = MODELS_DIR / (name + ".tflite")
xs = random_inputs(path, np.random.RandomState(0))
if os.environ.get("AB_XNNPACK"):
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_path=str(path), num_threads=threads)
    it.allocate_tensors()
    ins = it.get_input_details()
    def run():
        for d, x in zip(ins, xs):
            it.set_tensor(d["index"], x)
        it.invoke()
else:
    import tvm_ethos
    cm = tvm_ethos.compile(tvm_ethos.load_model(str(path)), target="llvm")
    def run():
        cm.run(*xs)
run(); run()
open(go + ".ready", "w").close()
lat = []
for r in range(rounds):
    while not os.path.exists(f"{go}{r}"):
        time.sleep(0.01)
    end = time.perf_counter() + slice_s
    while time.perf_counter() < end:
        t0 = clock(); run(); lat.append(clock() - t0)
    open(f"{go}{r}.done", "w").close()
lat.sort()
print(f"{statistics.median(lat) * 1e3:.4f} {lat[len(lat) // 4] * 1e3:.4f}")
"""


def measure(model: str, trees: dict, rounds: int, slice_s: float, env_all=None) -> dict:
    """Median and 25th-percentile ms per column, the columns run in turn."""
    with tempfile.TemporaryDirectory() as tmp:
        procs = {}
        for col, (tree, env_extra) in trees.items():
            env = dict(os.environ, PYTHONPATH=str(tree), **(env_all or {}), **env_extra)
            go = os.path.join(tmp, col)
            procs[col] = (go, subprocess.Popen(
                [sys.executable, "-c", CHILD, model, str(rounds), str(slice_s), go],
                env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
        for go, proc in procs.values():
            while not os.path.exists(go + ".ready"):
                if proc.poll() is not None:
                    raise RuntimeError(f"{model}: a child exited before it was ready")
                time.sleep(0.05)
        for r in range(rounds):
            for go, _proc in procs.values():
                Path(f"{go}{r}").touch()
                while not os.path.exists(f"{go}{r}.done"):
                    time.sleep(0.01)
        out = {}
        for col, (_go, proc) in procs.items():
            med, p25 = proc.communicate()[0].split()
            out[col] = (float(med), float(p25))
        return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the other source tree (a checkout)")
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slice", type=float, default=1.5)
    ap.add_argument("--threads", type=int, default=None,
                    help="XNNPack's threads (2 if not given) and the trees' TVM_NUM_THREADS")
    ap.add_argument("--cpu-time", action="store_true",
                    help="the running thread's CPU time instead of wall time (with --threads 1)")
    args = ap.parse_args(argv)
    if args.cpu_time and args.threads != 1:
        ap.error("--cpu-time measures one thread: pass --threads 1")
    env_all = {}
    if args.threads is not None:
        env_all = {"AB_THREADS": str(args.threads), "TVM_NUM_THREADS": str(args.threads)}
    if args.cpu_time:
        env_all["AB_CPU_TIME"] = "1"
    trees = {"xnnpack": (REPO, {"AB_XNNPACK": "1"}), "base": (Path(args.base), {}),
             "this": (REPO, {})}
    print("| model | xnnpack | llvm base | llvm this |\n|---|---|---|---|")
    for model in args.models.split(","):
        res = measure(model, trees, args.rounds, args.slice, env_all)
        x = res["xnnpack"][0]
        cells = [f"{x:.3f}"] + [f"{res[c][0]:.3f} ({res[c][0] / x:.2f}x, p25 {res[c][1]:.3f})"
                                for c in ("base", "this")]
        print(f"| {model} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
