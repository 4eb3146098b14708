#!/usr/bin/env python3
"""Host (llvm) latency of two source trees and LiteRT XNNPack, measured in turn.

Run: ``.venv/bin/python benchmarks/host_ab.py --base /path/to/base/tree [--models a,b]
[--rounds 5] [--slice 1.5] [--mcpu znver3] [--threads N] [--cpu-time]``. One child process
per column (XNNPack with 2 threads or ``--threads``, the base tree, this tree) loads its
model once (``target="llvm"``; ``--mcpu``: both trees' host kernels built for that CPU); then
the children run one at a time,
``--slice`` seconds each, for ``--rounds`` rounds, so load from other processes falls on all
columns alike, which back-to-back runs of ``host_speed.py`` do not give on a shared machine.
Prints the median milliseconds of all runs, the 25th percentile, and the ratio to XNNPack, and
the CPU milliseconds per inference (user + system, all threads, during the slices) with its
ratio: on a machine other processes load, a column's wall time says how much CPU it got as much
as what it costs. ``--threads N`` also sets TVM_NUM_THREADS of the two trees (unset,
``import tvm_ethos`` takes one thread per physical core). ``--threads 1 --cpu-time`` times
the CPU seconds of the one thread that runs each inference (``time.thread_time``) instead of
wall time: a preempted run then does not count the time it waited.
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
import os, resource, statistics, sys, time
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
    if os.environ.get("AB_MCPU"):  # host kernels for that CPU (e.g. znver3: AVX2, no VNNI)
        from tvm_ethos.host.cpu import cpu_schedule
        cpu_schedule.host_target = lambda: {"kind": "llvm", "mcpu": os.environ["AB_MCPU"]}
    cm = tvm_ethos.compile(tvm_ethos.load_model(str(path)), target="llvm")
    def run():
        cm.run(*xs)
run(); run()
open(go + ".ready", "w").close()
def cpu_s():
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime
lat, cpu = [], 0.0
for r in range(rounds):
    while not os.path.exists(f"{go}{r}"):
        time.sleep(0.01)
    end = time.perf_counter() + slice_s
    c0 = cpu_s()
    while time.perf_counter() < end:
        t0 = clock(); run(); lat.append(clock() - t0)
    cpu += cpu_s() - c0
    open(f"{go}{r}.done", "w").close()
lat.sort()
print(f"{statistics.median(lat) * 1e3:.4f} {lat[len(lat) // 4] * 1e3:.4f} "
      f"{cpu / len(lat) * 1e3:.4f}")
"""


def measure(model: str, trees: dict, rounds: int, slice_s: float, env_all=None) -> dict:
    """Median and 25th-percentile ms per column, and CPU ms per inference (all its threads),
    the columns run in turn."""
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
            med, p25, cpu = proc.communicate()[0].split()
            out[col] = (float(med), float(p25), float(cpu))
        return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True, help="the other source tree (a checkout)")
    ap.add_argument("--models", default=MODELS)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--slice", type=float, default=1.5)
    ap.add_argument("--mcpu", help="build both trees' host kernels for this CPU (e.g. znver3: "
                    "AVX2, no VNNI) instead of the compiling machine's; XNNPack is unchanged")
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
    cpu = {"AB_MCPU": args.mcpu} if args.mcpu else {}
    trees = {"xnnpack": (REPO, {"AB_XNNPACK": "1"}), "base": (Path(args.base), cpu),
             "this": (REPO, cpu)}
    print("| model | xnnpack | llvm base | llvm this |\n|---|---|---|---|")
    for model in args.models.split(","):
        res = measure(model, trees, args.rounds, args.slice, env_all)
        x, xc = res["xnnpack"][0], res["xnnpack"][2]
        cells = [f"{x:.3f} (cpu {xc:.3f})"] + [
            f"{res[c][0]:.3f} ({res[c][0] / x:.2f}x, p25 {res[c][1]:.3f}, "
            f"cpu {res[c][2]:.3f} = {res[c][2] / xc:.2f}x)" for c in ("base", "this")]
        print(f"| {model} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
