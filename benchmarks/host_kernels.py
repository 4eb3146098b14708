#!/usr/bin/env python3
"""Where a shipped model's host (llvm) inference goes: each kernel alone, and the executor.

Run: ``PYTHONPATH=$PWD .venv/bin/python benchmarks/host_kernels.py [--model resnet8_cifar]
[--seconds 0.3]``. Compiles the model for ``target="llvm"``, runs it twice (so its slot holds
its bound calls), then prints the median microseconds of:

* each kernel called alone in a loop with the arguments the executor bound (the caller's
  input and the returned outputs replaced by tensors of their own), and their sum;
* ``cm.run``, ``executor.run`` and the kernels one after the other: the difference is the
  executor's own time (Python, argument passing, output arrays);
* ``executor.run`` with every kernel replaced by a no-op Python function: the executor alone.

Medians of back-to-back calls in one process: compare trees by running it for each, back to
back (rfcs/0008 section 5).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.helpers.models import MODELS_DIR  # noqa: E402


def _median_us(fn, seconds: float) -> float:
    lat = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        fn()
        lat.append(time.perf_counter() - t0)
    return statistics.median(lat) * 1e6


def _own_tensor(plan):
    import tvm

    return tvm.runtime.tensor(np.zeros(plan.shape, plan.dtype))


def measure(model: str, seconds: float = 0.3) -> dict:
    """``{"kernels": [(name, us)], "sum": us, "run": us, "executor": us, "calls": us,
    "no_op": us, "cpu_calls": the kernels an inference calls}`` for ``model`` (a stem of the
    shipped models) on ``target="llvm"``."""
    import tvm_ethos
    from tests.helpers.tflite_oracle import random_inputs

    path = MODELS_DIR / f"{model}.tflite"
    xs = random_inputs(path, np.random.RandomState(0))
    cm = tvm_ethos.compile(tvm_ethos.load_model(str(path)), target="llvm")
    cm.run(*xs)
    cm.run(*xs)
    ex = cm.executor
    slot = ex._slots[0]
    out = {"kernels": [], "cpu_calls": ex.last_run_stats.cpu_calls}
    calls = []
    for i in sorted(slot.bound):
        for func, name, args, late in slot.bound[i]:
            args = list(args)
            for k, tid, _is_input in late:
                args[k] = _own_tensor(ex.plans[tid])
            calls.append((name, func, args))
    for name, func, args in calls:
        out["kernels"].append((name, _median_us(lambda f=func, a=args: f(*a), seconds)))
    out["sum"] = sum(us for _, us in out["kernels"])

    def all_calls():
        for _name, func, args in calls:
            func(*args)

    out["run"] = _median_us(lambda: cm.run(*xs), 3 * seconds)
    out["executor"] = _median_us(lambda: ex.run(xs), 3 * seconds)
    out["calls"] = _median_us(all_calls, 3 * seconds)
    flat = getattr(slot, "flat", None)  # trees before the flat calls have none
    if flat is not None:
        saved = list(flat.calls), list(flat.base)

        def no_op(*_args):
            return None

        flat.calls[:] = [(no_op, a, s) for _f, a, s in saved[0]]
        flat.base[:] = [(no_op, a, s) for _f, a, s in saved[1]]
        try:
            out["no_op"] = _median_us(lambda: ex.run(xs), 3 * seconds)
        finally:
            flat.calls[:], flat.base[:] = saved
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet8_cifar")
    ap.add_argument("--seconds", type=float, default=0.3, help="per kernel (3x for the runs)")
    args = ap.parse_args(argv)
    res = measure(args.model, args.seconds)
    for name, us in res["kernels"]:
        print(f"{name:44s} {us:8.2f} us")
    print(f"{'sum of the kernels alone':44s} {res['sum']:8.2f} us")
    print(f"{'kernels one after the other':44s} {res['calls']:8.2f} us")
    print(f"{'executor.run':44s} {res['executor']:8.2f} us")
    print(f"{'cm.run':44s} {res['run']:8.2f} us")
    if "no_op" in res:
        print(f"{'executor.run, kernels replaced by no-ops':44s} {res['no_op']:8.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
