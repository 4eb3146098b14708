"""Planner speed: MobileNetV1-224 with all defaults, and synthetic graphs of 30-3000 Parts.

Prints CPU seconds (``time.process_time`` plus the forked workers' CPU from
``getrusage(RUSAGE_CHILDREN)``: the machine is shared, so wall time is noisy) and wall seconds
of cold searches, seconds per Part, and the ratio to the goals (issue 2): MobileNetV1 in at
most 0.5 s on 2 cores; seconds per Part flat within 2x from 30 to 3000 Parts. MobileNetV1 is
searched with two processes and, as the peer measured in the same run (the two taking turns),
with one; the synthetic graphs with ``--workers`` (default 1). The planner's default is one
process (``ProposalSearch``).
Cold: the module memos are cleared and the device (with its performance model's caches) is
built afresh before every search, so each one pays what a fresh process pays.
The CPU of MobileNetV1's costing phase alone (``costing_cpu``: every distinct request the
walks make of the performance model, one process) is printed beside it.

Then (first, and alone with ``--models-only``) the shipped models' table: in-process seconds
of ``planner.api.plan`` (cold, one process, graph loaded beforehand), median of ``--repeat``,
at the device's default budget, within 300 KiB and at ``budget="smallest"``, with the
candidate count; each code tree (this one, and ``--code OTHER_TREE``, e.g. a checkout of
main) is measured in its own subprocess, the trees taking turns model by model so that they
meet the same load.

    .venv/bin/python benchmarks/planner_speed.py [--models ../shared/models] [--sizes 30,300,3000]
        [--timeline] [--models-only] [--code OTHER_TREE]
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.synthetic import chain, residual  # noqa: E402
from planner import (
    devices,  # noqa: E402
    sink_walks,  # noqa: E402
)
from planner.errors import PlannerError  # noqa: E402
from planner.options import PlannerOptions  # noqa: E402
from planner.plans import PlanGenerator, clear_caches  # noqa: E402
from planner.proposals import ProposalSearch  # noqa: E402
from planner.sink_walks import distinct_cost_requests  # noqa: E402
from planner.tflite import load_tflite  # noqa: E402
from tests.helpers.models import MODELS_DIR  # noqa: E402

GOAL_SECONDS = 0.5

#: The models of the per-model table, by the path under the models folder.
MODEL_TABLE = {"mobilenet_v1_1.0_224": "mobilenet_v1_1.0_224.tflite",
               "resnet8_cifar": "resnet8_cifar.tflite",
               "ds_cnn_kws": "ds_cnn_kws.tflite",
               "person_detect": os.path.join("tflite-micro", "person_detect.tflite")}
BUDGETS = ("system", "300KiB", "smallest")

#: Run in a subprocess whose PYTHONPATH is the tree measured: only the planner's public API
#: (load_tflite, get_device, plan, the memo clearers), which every tree compared has. One
#: process: an older tree's default forks a second one where a core is idle, so its time
#: would follow the machine's load rather than the code.
_MEASURE = """
import json, sys, time
from planner import devices, proposals
from planner.api import plan
from planner.plans import clear_caches
from planner.tflite import load_tflite
proposals.default_workers = lambda parts: 1
path, device, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
budgets = sys.argv[4].split(",")
graph = load_tflite(path)
out = {"parts": len(graph.parts), "seconds": {}}
for budget in budgets:
    times = []
    for _ in range(repeat):
        clear_caches()
        devices.clear_caches()
        t0, c0 = time.perf_counter(), time.process_time()
        result = plan(graph, device, budget=budget)
        times.append((time.perf_counter() - t0, time.process_time() - c0))
    out["seconds"][budget] = times
    out["candidates"] = result.plan_candidates
print(json.dumps(out))
"""


def _children_cpu() -> float:
    use = resource.getrusage(resource.RUSAGE_CHILDREN)
    return use.ru_utime + use.ru_stime


def cold_search(graph, device_name: str, workers: int | None
                ) -> tuple[float, float, ProposalSearch]:
    """(CPU seconds of all processes, wall seconds, search) of one cold search with
    ``workers`` processes (None: the planner's default)."""
    clear_caches()
    devices.clear_caches()   # devices are memoised: a fresh one, fresh perf caches
    device = devices.get_device(device_name)
    w0, c0, k0 = time.perf_counter(), time.process_time(), _children_cpu()
    if sink_walks.TIMELINE is not None:
        sink_walks.TIMELINE[:] = [("start", w0)]
    search = ProposalSearch(graph, device, workers=workers)
    wall = time.perf_counter() - w0
    if sink_walks.TIMELINE is not None:
        sink_walks.TIMELINE.append(("end", w0 + wall))
    return time.process_time() - c0 + _children_cpu() - k0, wall, search


def timeline(graph, device_name: str, repeat: int) -> list[tuple[str, float]]:
    """The phases of a cold two-process search (planner.sink_walks.TIMELINE), seconds from
    its start, of the fastest of ``repeat`` searches."""
    best: list = []
    sink_walks.TIMELINE = marks = []
    try:
        for _ in range(repeat):
            cold_search(graph, device_name, 2)
            run = [(event, t - marks[0][1]) for event, t in marks]
            if not best or run[-1][1] < best[-1][1]:
                best = run
    finally:
        sink_walks.TIMELINE = None
    return best[1:]


def costing_cpu(graph, device_name: str, repeat: int = 5) -> tuple[float, int]:
    """(CPU seconds, requests) of the costing phase alone, one process, cold, best of
    ``repeat``: every distinct (Part signature, stripe) the walks ask for
    (``PlanGenerator.cost_requests``), costed with ``warm_costs`` as a costing worker does, the
    collector paused as in the search. The requests are found before the clock starts."""
    best, count = math.inf, 0
    for _ in range(repeat):
        clear_caches()
        devices.clear_caches()
        gen = PlanGenerator(graph, devices.get_device(device_name), PlannerOptions())
        todo = distinct_cost_requests(gen)
        gc.disable()
        try:
            c0 = time.process_time()
            gen.warm_costs(todo)
            best = min(best, time.process_time() - c0)
        finally:
            gc.enable()
        count = len(todo)
    return best, count


def timed(graph, device_name: str, repeat: int = 5, peers=(None,)) -> list[tuple]:
    """Per worker setting in ``peers``: (CPU seconds, wall seconds, search), each the best of
    ``repeat`` cold searches, the settings taking turns so that they meet the same load."""
    best = [[math.inf, math.inf, None] for _ in peers]
    for _ in range(repeat):
        for slot, workers in zip(best, peers):
            cpu, wall, slot[2] = cold_search(graph, device_name, workers)
            slot[0], slot[1] = min(slot[0], cpu), min(slot[1], wall)
    return [tuple(slot) for slot in best]


def measure_models(models_dir: str, device: str, repeat: int, trees: list[str]
                   ) -> dict[tuple[str, str], dict]:
    """{(tree, model): {"parts", "candidates", "seconds": {budget: [s, ...]}}}, each tree in
    its own subprocess per model, the trees taking turns."""
    out = {}
    for name, rel in MODEL_TABLE.items():
        for tree in trees:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
            model = os.path.abspath(os.path.join(models_dir, rel))
            done = subprocess.run(
                [sys.executable, "-c", _MEASURE, model, device, str(repeat), ",".join(BUDGETS)],
                env=env, capture_output=True, text=True, cwd=os.path.abspath(tree))
            if done.returncode != 0:
                raise SystemExit(f"measuring {name} with the tree {tree} failed:\n"
                                 f"{done.stderr[-2000:]}")
            out[tree, name] = json.loads(done.stdout.splitlines()[-1])
    return out


def model_table(results: dict, trees: list[str], repeat: int, device: str) -> str:
    """The per-model table: median seconds per budget and candidates, per tree; the ratio of
    each further tree's MobileNetV1 default-budget time to the first's."""
    def median(r: dict, budget: str, which: int) -> float:
        return statistics.median(t[which] for t in r["seconds"][budget])

    lines = [f"planner.api.plan in-process on {device}, one process, cold, median of "
             f"{repeat}: CPU seconds per budget (the machine may be shared: wall seconds "
             "follow its load), wall seconds at the default budget; trees: " +
             ", ".join(f"[{k}] {t}" for k, t in enumerate(trees))]
    head = f"{'model':<22} {'tree':>4} {'parts':>5} " + \
        " ".join(f"{b + ' cpu':>13}" for b in BUDGETS) + f" {'system wall':>12}" + \
        f" {'candidates':>11}"
    lines.append(head)
    for name in MODEL_TABLE:
        for k, tree in enumerate(trees):
            r = results[tree, name]
            lines.append(f"{name:<22} {k:>4} {r['parts']:>5} " +
                         " ".join(f"{median(r, b, 1):>13.3f}" for b in BUDGETS) +
                         f" {median(r, 'system', 0):>12.3f} {r['candidates']:>11,}")
    mobilenet = [median(results[t, "mobilenet_v1_1.0_224"], "system", 1) for t in trees]
    lines.append(f"MobileNetV1-224 at the default budget: {mobilenet[0]:.3f} s cpu = "
                 f"{mobilenet[0] / GOAL_SECONDS:.2f}x the {GOAL_SECONDS} s goal" +
                 "".join(f"; tree [{k}] {m:.3f} s cpu ({m / mobilenet[0]:.2f}x tree [0])"
                         for k, m in enumerate(mobilenet[1:], 1)))
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=str(MODELS_DIR))
    ap.add_argument("--sizes", default="30,300,3000")
    ap.add_argument("--device", default="ethos-u55-128")
    ap.add_argument("--workers", type=int, default=1, help="processes for the synthetic graphs")
    ap.add_argument("--repeat", type=int, default=5, help="cold searches per graph below "
                    "1000 Parts (best taken); one above")
    ap.add_argument("--timeline", action="store_true", help="also print when the phases of "
                    "MobileNetV1's two-process search end (fastest of --repeat)")
    ap.add_argument("--models-only", action="store_true",
                    help="print the per-model table only")
    ap.add_argument("--code", action="append", default=[], metavar="OTHER_TREE",
                    help="also measure the per-model table with the planner of this tree "
                    "(e.g. a checkout of main); may be repeated")
    ap.add_argument("--model-repeat", type=int, default=3,
                    help="plans per model, tree and budget (the median is printed)")
    args = ap.parse_args()
    for rel in MODEL_TABLE.values():
        if not os.path.isfile(os.path.join(args.models, rel)):
            sys.exit(f"error: {os.path.join(args.models, rel)}: no such model; --models names "
                     "the folder of the shipped models (../shared/models)")
    load = os.getloadavg()[0]         # before this run adds to it
    trees = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] + args.code
    results = measure_models(args.models, args.device, args.model_repeat, trees)
    print(model_table(results, trees, args.model_repeat, args.device))
    if args.models_only:
        return 0
    rows = []
    g = load_tflite(os.path.join(args.models, "mobilenet_v1_1.0_224.tflite"))
    mobilenet = {}
    for workers, (cpu, wall, s) in zip((2, 1), timed(g, args.device, args.repeat, (2, 1))):
        mobilenet[workers] = (cpu, wall)
        rows.append((f"mobilenet_v1_1.0_224/{workers}p", len(g.parts), cpu, wall,
                     s.plan_candidates, len(s.frontier)))
    phases = timeline(g, args.device, args.repeat) if args.timeline else []
    costing, requests = costing_cpu(g, args.device, args.repeat)
    for n in (int(x) for x in args.sizes.split(",") if x):
        for make in (chain, residual):
            g = make(n)
            [(cpu, wall, s)] = timed(g, args.device, 1 if n >= 1000 else args.repeat,
                                     (args.workers,))
            rows.append((f"{g.name}/{args.workers}p", len(g.parts), cpu, wall, s.plan_candidates,
                         len(s.frontier)))
    print(f"planner speed on {args.device}, cold searches (best of {args.repeat} below 1000 "
          "parts; 1 run above); /Np: N processes; load average at the start "
          f"{load:.2f} on {os.cpu_count()} cores")
    print(f"{'graph':<24} {'parts':>6} {'cpu s':>9} {'wall s':>9} {'cpu ms/part':>12} "
          f"{'candidates':>11} {'frontier':>9}")
    for name, n, cpu, wall, cands, front in rows:
        print(f"{name:<24} {n:>6} {cpu:>9.3f} {wall:>9.3f} {1000 * cpu / n:>12.2f} "
              f"{cands:>11,} {front:>9}")
    for kind in ("chain", "residual"):
        per = [cpu / n for name, n, cpu, _, _, _ in rows if name.startswith(kind)]
        if len(per) > 1:
            print(f"{kind}: cpu seconds per part max/min = {max(per) / min(per):.2f}x "
                  f"(goal: within 2x)")
    print(f"MobileNetV1-224 costing phase alone (one process, cold, best of {args.repeat}): "
          f"{costing:.3f} s cpu for {requests:,} requests")
    if phases:
        print("MobileNetV1-224 two-process timeline (s from the start, fastest of "
              f"{args.repeat}): " + ", ".join(f"{event} {t:.3f}" for event, t in phases))
    cpu, wall = mobilenet[2]
    cpu1, wall1 = mobilenet[1]
    print(f"MobileNetV1-224, two processes: {wall:.3f} s wall ({cpu:.3f} s cpu) = "
          f"{wall / GOAL_SECONDS:.2f}x the {GOAL_SECONDS} s goal; one process: {wall1:.3f} s "
          f"wall ({cpu1:.3f} s cpu); two/one wall {wall / wall1:.2f}; the planner's default: "
          "one process")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PlannerError as e:      # a missing or malformed model: one line, not a traceback
        sys.exit(f"error: {e}")
