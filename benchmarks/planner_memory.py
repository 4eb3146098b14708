"""Peak SRAM of MobileNetV1-224 on ethos-u55-128, counted as Vela counts it.

Every feature map (the network input and output included), rolling buffers, staging buffers
and weight copies in SRAM count; weights in flash do not. Prints the smallest-memory
Proposal, the fastest one, the frontier point nearest 300 KiB, and the same with the network
input and output in DRAM, against the anchors of issue 2: naive 1176 KiB, Vela 441 KiB (Size),
TVM's test bound 1,010,000 B, the RFC's ~300 kB; goals: smallest <= 250 KiB, a point
<= 300 KiB, DRAM io <= 200 KiB (Vela's comparable figure 336 KiB).

    .venv/bin/python benchmarks/planner_memory.py [--models ../shared/models]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from planner.api import plan  # noqa: E402
from planner.errors import PlannerError  # noqa: E402
from planner.options import PlannerOptions  # noqa: E402
from planner.simulate import simulate  # noqa: E402
from tests.helpers.models import MODELS_DIR  # noqa: E402


def kib(b: int) -> str:
    return f"{b / 1024:8.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--models", default=str(MODELS_DIR))
    ap.add_argument("--device", default="ethos-u55-128")
    args = ap.parse_args()
    model = os.path.join(args.models, "mobilenet_v1_1.0_224.tflite")
    print(f"MobileNetV1-224 on {args.device}: peak SRAM (KiB) and estimated cycles")
    print(f"{'case':<42} {'KiB':>8} {'cycles':>13} {'simulated KiB':>14}")
    results = {}
    for io in ("sram", "dram"):
        t0 = time.perf_counter()
        r = plan(model, args.device, io_region=io)
        dt = time.perf_counter() - t0
        search_front = r.frontier
        from planner.proposals import ProposalSearch
        s = ProposalSearch(r.graph, r.device, r.options)
        smallest = s.proposal(0)
        fastest = s.proposal(len(search_front) - 1)
        near300 = max((k for k, (m, _) in enumerate(search_front) if m <= 300 * 1024),
                      default=None)
        cases = [(f"io={io}: smallest-memory proposal", smallest),
                 (f"io={io}: fastest proposal", fastest)]
        if near300 is not None:
            cases.append((f"io={io}: fastest within 300 KiB", s.proposal(near300)))
        for label, p in cases:
            sim = simulate(r.graph, r.device, p).peak_bytes
            print(f"{label:<42} {kib(p.memory_bytes)} {p.cycles:>13,} {kib(sim):>14}")
        results[io] = smallest.memory_bytes
        print(f"{'':<42} (planned in {dt:.2f} s, {len(search_front)} frontier points)")
    naive = plan(model, args.device, options=PlannerOptions(max_plan_size=1))
    print(f"{'layer by layer, no cascading (min)':<42} {kib(naive.frontier[0][0])}")
    print("\nanchors: naive 1176 KiB | Vela Size 441 KiB | TVM test bound 986 KiB "
          "(1,010,000 B) | RFC ~293 KiB (300 kB) | Vela DRAM-io 336 KiB")
    ok1 = results["sram"] <= 250 * 1024
    ok2 = results["dram"] <= 200 * 1024
    print(f"goal smallest <= 250 KiB: {'met' if ok1 else 'NOT met'} ({results['sram'] / 1024:.1f})")
    print(f"goal DRAM io <= 200 KiB: {'met' if ok2 else 'NOT met'} ({results['dram'] / 1024:.1f})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except PlannerError as e:      # a missing or malformed model: one line, not a traceback
        sys.exit(f"error: {e}")
