"""Planner speed: MobileNetV1-224 with all defaults, and synthetic graphs of 30-3000 Parts.

Prints seconds and seconds per Part. Goals (issue 2): MobileNetV1 in at most 0.5 s on 2
cores; seconds per Part flat within 2x from 30 to 3000 Parts.

    .venv/bin/python benchmarks/planner_speed.py [--models ../shared/models] [--sizes 30,300,3000]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.synthetic import chain, residual  # noqa: E402
from planner.devices import get_device  # noqa: E402
from planner.plans import clear_caches  # noqa: E402
from planner.proposals import ProposalSearch  # noqa: E402
from planner.tflite import load_tflite  # noqa: E402


def timed(graph, device, repeat: int = 3) -> tuple[float, ProposalSearch]:
    """Best of ``repeat`` cold searches (module caches cleared before each)."""
    best, search = None, None
    for _ in range(repeat):
        clear_caches()
        t0 = time.perf_counter()
        search = ProposalSearch(graph, device)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best, search


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "shared", "models"))
    ap.add_argument("--sizes", default="30,300,3000")
    ap.add_argument("--device", default="ethos-u55-128")
    args = ap.parse_args()
    device = get_device(args.device)
    rows = []
    g = load_tflite(os.path.join(args.models, "mobilenet_v1_1.0_224.tflite"))
    dt, s = timed(g, device)
    rows.append(("mobilenet_v1_1.0_224", len(g.parts), dt, s.plan_candidates, len(s.frontier)))
    for n in (int(x) for x in args.sizes.split(",")):
        for make in (chain, residual):
            g = make(n)
            dt, s = timed(g, device, repeat=1 if n >= 1000 else 3)
            rows.append((g.name, len(g.parts), dt, s.plan_candidates, len(s.frontier)))
    print(f"planner speed on {device.name} (best of 3 below 1000 parts; 1 run above)")
    print(f"{'graph':<24} {'parts':>6} {'seconds':>9} {'ms/part':>9} {'candidates':>11} "
          f"{'frontier':>9}")
    for name, n, dt, cands, front in rows:
        print(f"{name:<24} {n:>6} {dt:>9.3f} {1000 * dt / n:>9.2f} {cands:>11,} {front:>9}")
    for kind in ("chain", "residual"):
        per = [dt / n for name, n, dt, _, _ in rows if name.startswith(kind)]
        if len(per) > 1:
            print(f"{kind}: seconds per part max/min = {max(per) / min(per):.2f}x "
                  f"(goal: within 2x)")
    mn = rows[0][2]
    print(f"MobileNetV1-224: {mn:.3f} s (goal: at most 0.5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
