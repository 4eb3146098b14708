"""The phases of one in-process planner search, this tree against others, on one core.

Issue 27 measures ``planner.api.plan`` as a second call in a process (imports done, the
device's performance model warm, ``planner.plans.clear_caches()`` before it), on one
worker. This prints that search's CPU seconds split into its phases: the cost-free pre-walk
that lists the cost requests (``sink_walks.distinct_cost_requests``), the costing
(``PlanGenerator.warm_costs``), the bounded walks (``PlanGenerator.interval_frontiers``)
and the whole call.

The trees take turns in one process (each round swaps the ``planner`` and ``ethos_arch``
packages by forgetting their modules and importing them from the next tree, alternating the
order), so that they meet the same load on a shared machine: per round and tree, the fastest
of ``--repeat`` searches; the table gives the median and the least over the rounds.

    .venv/bin/python benchmarks/planner_phases.py MODEL.tflite --code ../main [--rounds 8]
        [--repeat 2] [--device ethos-u55-128]
"""
from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
import time

PHASES = ("requests", "costs", "walks", "total")
_PACKAGES = ("planner", "ethos_arch")


def _load(tree: str) -> dict:
    """The modules the measurement uses, imported from ``tree`` (none kept from another)."""
    for name in list(sys.modules):
        if name.split(".")[0] in _PACKAGES:
            del sys.modules[name]
    sys.path.insert(0, tree)
    try:
        mods = {name: importlib.import_module(f"planner.{name}")
                for name in ("sink_walks", "tflite", "api", "plans", "proposals")}
    finally:
        sys.path.remove(tree)
    if not mods["api"].__file__.startswith(os.path.abspath(tree) + os.sep):
        raise SystemExit(f"{tree} has no planner package of its own "
                         f"(imported {mods['api'].__file__}); name a repository root")
    # one process: an older tree's default forks a second one where a core is idle
    mods["proposals"].default_workers = lambda parts: 1
    return mods


def _timed(obj, attr: str, phase: str, into: dict) -> None:
    """Wrap ``obj.attr`` so that its CPU seconds add up in ``into[phase]``."""
    inner = getattr(obj, attr)

    def wrapper(*args, **kwargs):
        t0 = time.process_time()
        try:
            return inner(*args, **kwargs)
        finally:
            into[phase] = into.get(phase, 0.0) + time.process_time() - t0

    setattr(obj, attr, wrapper)


def measure(tree: str, model: str, device: str, repeat: int) -> dict[str, float]:
    """Per phase, the least CPU seconds over ``repeat`` second-in-process searches."""
    mods = _load(tree)
    spent: dict[str, float] = {}
    _timed(mods["sink_walks"], "distinct_cost_requests", "requests", spent)
    _timed(mods["plans"].PlanGenerator, "warm_costs", "costs", spent)
    _timed(mods["plans"].PlanGenerator, "interval_frontiers", "walks", spent)
    load, plan, clear = mods["tflite"].load_tflite, mods["api"].plan, mods["plans"].clear_caches
    plan(load(model), device)        # the first call: imports, the device's model warmed
    best: dict[str, float] = {}
    for _ in range(repeat):
        clear()
        graph = load(model)
        spent.clear()
        t0 = time.process_time()
        plan(graph, device)
        spent["total"] = time.process_time() - t0
        for phase in PHASES:
            best[phase] = min(best.get(phase, float("inf")), spent.get(phase, 0.0))
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="a .tflite file")
    ap.add_argument("--code", action="append", default=[], metavar="OTHER_TREE",
                    help="another repository root to measure beside this one (repeatable)")
    ap.add_argument("--device", default="ethos-u55-128")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2, help="searches per round and tree")
    args = ap.parse_args()
    if args.rounds < 1 or args.repeat < 1:
        ap.error("--rounds and --repeat must be at least 1")
    if not os.path.isfile(args.model):
        ap.error(f"no model file {args.model!r}: give the path of a .tflite file")
    trees = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] + \
        [os.path.abspath(t) for t in args.code]
    runs: list[dict[str, list[float]]] = [{p: [] for p in PHASES} for _ in trees]
    for r in range(args.rounds):
        order = range(len(trees)) if r % 2 == 0 else reversed(range(len(trees)))
        for k in order:
            for phase, seconds in measure(trees[k], args.model, args.device,
                                          args.repeat).items():
                runs[k][phase].append(seconds)
    print(f"{os.path.basename(args.model)} on {args.device}, one process, second search in "
          f"the process: CPU seconds, median (least) of {args.rounds} rounds of the fastest "
          f"of {args.repeat}")
    print(f"{'tree':40s}" + "".join(f"{p:>18s}" for p in PHASES))
    for tree, got in zip(trees, runs):
        print(f"{tree[-40:]:40s}" + "".join(
            f"{statistics.median(got[p]):>10.3f} ({min(got[p]):.3f})" for p in PHASES))
    for tree, got in zip(trees[1:], runs[1:]):
        print(f"this tree / {tree}: total median "
              f"{statistics.median(runs[0]['total']) / statistics.median(got['total']):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
