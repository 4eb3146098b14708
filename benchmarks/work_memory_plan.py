"""Working memory in the plan: CONV_2D -> X -> CONV_2D chains on the Ethos-U, X an operator
the stream lowers to several NPU operations through working memory of its own (issue 28).

For each chain, accelerator and budget: the plan's peak (estimated), the SRAM the stream
touches on the functional model (emulated; plus the reserved weight bytes above it), the
stream's working memory and its schedule ("plan": within the plan's peak; "plan, X beyond
its memory": the arena grew past the plan for working memory the plan did not hold), and
whether the outputs equal TFLite Micro's on two random inputs. Prints one table.

    PYTHONPATH=. python benchmarks/work_memory_plan.py [chain ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

from test_planned_work_memory import CHAINS  # noqa: E402

import tvm_ethos  # noqa: E402
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle  # noqa: E402

SHAPE = (1, 24, 20, 16)
ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
BUDGETS = ("smallest", None)


def row(name: str, accelerator: str, budget) -> dict:
    data = CHAINS[name](0, SHAPE)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, accelerator_config=accelerator,
                           budget=budget)
    (entry,) = cm.plan_report["streams"].values()
    rs = np.random.RandomState(0)
    equal = True
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        for got, want in zip(cm.run(*xs), tflm_oracle(data, xs)):
            equal &= bool(np.array_equal(np.asarray(got).reshape(want.shape), want))
    return {"chain": name, "accelerator": accelerator, "budget": budget or "default",
            "planned": entry["planned_peak_bytes"], "touched": entry["sram_high_water_bytes"],
            "reserved": entry.get("untouched_top_bytes") or 0, "work": entry["work_bytes"],
            "schedule": entry["schedule"], "tflm": "=" if equal else "DIFFERS"}


def main(argv: list[str]) -> int:
    names = argv or sorted(CHAINS)
    unknown = sorted(set(names) - set(CHAINS))
    if unknown:
        print(f"unknown chain(s) {', '.join(unknown)}; known: {', '.join(sorted(CHAINS))}",
              file=sys.stderr)
        return 2
    head = (f"{'chain':<26} {'accelerator':<14} {'budget':<9} {'planned B':>9} "
            f"{'touched B':>9} {'reserved':>8} {'work B':>7} {'TFLM':>4}  schedule")
    print(f"CONV_2D -> X -> CONV_2D over {'x'.join(map(str, SHAPE))} (planned: estimated; "
          "touched: emulated)")
    print(head)
    print("-" * len(head))
    for name in names:
        for accelerator in ACCELERATORS:
            for budget in BUDGETS:
                r = row(name, accelerator, budget)
                print(f"{r['chain']:<26} {r['accelerator']:<14} {r['budget']:<9} "
                      f"{r['planned']:>9,} {r['touched']:>9,} {r['reserved']:>8,} "
                      f"{r['work']:>7,} {r['tflm']:>4}  {r['schedule']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
