"""Planned against touched memory for every frontier Proposal of the shipped models (issue 28):
each Proposal streamed as if the planner had chosen it (``tests/helpers/frontier_streams``).

Per model and accelerator: how many frontier Proposals there are, how many streams execute
their plan touching exactly its peak (planned: estimated; touched: emulated, plus reserved
weight bytes above it), and of the others how many grew past the plan, the largest growth,
and their frontier indices. ``--rows`` prints every Proposal.

  PYTHONPATH=. python benchmarks/frontier_memory.py [--only resnet8_cifar ...]
      [--accelerators ethos-u55-128 ethos-u65-256] [--rows]
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.helpers.frontier_streams import frontier_streams  # noqa: E402
from tests.helpers.models import MODELS_DIR  # noqa: E402

MODELS = ("resnet8_cifar", "ds_cnn_kws", "mobilenet_v1_0.25_96", "tflite-micro/person_detect")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=list(MODELS), choices=MODELS)
    ap.add_argument("--accelerators", nargs="*", default=["ethos-u55-128", "ethos-u65-256"])
    ap.add_argument("--rows", action="store_true", help="print every Proposal")
    args = ap.parse_args(argv)
    print(f"{'model':<28} {'accelerator':<14} {'Proposals':>9} {'= plan':>6} "
          f"{'beyond':>6} {'most B over':>11}  beyond at")
    for model in args.only:
        with open(os.path.join(MODELS_DIR, f"{model}.tflite"), "rb") as f:
            data = f.read()
        for accelerator in args.accelerators:
            rows = list(frontier_streams(data, accelerator))
            off = [r for r in rows if not r.realizes_plan]
            most = max((r.touched - r.planned for r in off), default=0)
            print(f"{model:<28} {accelerator:<14} {len(rows):>9} {len(rows) - len(off):>6} "
                  f"{len(off):>6} {most:>11,}  {' '.join(str(r.index) for r in off)}",
                  flush=True)
            if args.rows:
                for r in rows:
                    print(f"  {r.subgraph}:{r.index:<4} planned {r.planned:>9,} touched "
                          f"{r.touched:>9,}  {r.schedule}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
