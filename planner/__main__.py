"""`python -m planner`: plan a model without TVM.

  python -m planner plan MODEL.tflite|GRAPH.json --device ethos-u55-128 [--budget 300KiB]
                    [--io-region sram|dram] [--planner-<field>=VALUE ...] [--json]
  python -m planner demo MODEL.tflite --device ethos-u55-128

The --planner-<field> options are tvmc's (planner/option_flags.py); their defaults are the
settings tvmc compile realizes, so both report the same plan for the same budget.

Exit status 0 on success, 2 on bad input or an infeasible budget (one line on stderr).
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from ethos_arch.accelerators import DEFAULT_ACCELERATOR
from planner import option_flags
from planner.budgets import BUDGET_HELP, budget_line
from planner.errors import PlannerError


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m planner", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    for name, help_ in (("plan", "plan a model and print the chosen Proposal"),
                        ("demo", "plan a model and print the frontier and per-layer table")):
        p = sub.add_parser(name, help=help_)
        p.add_argument("model", help="a .tflite model or a planner graph .json")
        p.add_argument("--device", default=DEFAULT_ACCELERATOR.name)
        p.add_argument("--budget", default="system", help=BUDGET_HELP)
        p.add_argument("--io-region", default="sram", choices=["sram", "dram"],
                       help="where the network input and output live")
        option_flags.add_arguments(p)
        if name == "plan":
            p.add_argument("--json", action="store_true", help="print one JSON object")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    from planner.api import plan
    from planner.report import frontier_table, layer_table
    try:
        options = option_flags.options_from_args(args)
        t0 = time.perf_counter()
        result = plan(args.model, args.device, budget=args.budget, io_region=args.io_region,
                      options=options)
        elapsed = time.perf_counter() - t0
    except PlannerError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps(result.to_json(), sort_keys=True))
        return 0
    g, ch = result.graph, result.chosen
    head = (f"{g.name}: {len(g.parts)} parts on {result.device.name} "
            f"(io in {result.device.io_region}); {result.plan_candidates:,} plan candidates")
    if args.command == "demo":
        print(f"{head} costed in {elapsed:.2f} s")
    else:
        # the plan report is byte-identical from run to run (rfcs/0006); the time is not
        print(head)
        print(f"planned in {elapsed:.2f} s", file=sys.stderr)
    if args.command == "demo":
        print("\nPareto frontier of Proposals (peak SRAM incl. network input/output, "
              "estimated cycles):")
        print(frontier_table(result.frontier, result.chosen_index, max_rows=16))
        print(f"\nSmallest memory: {result.frontier[0][0] / 1024:.1f} KiB; fastest: "
              f"{result.frontier[-1][1]:,} cycles at {result.frontier[-1][0] / 1024:.1f} KiB")
        print("\nChosen plan:")
    print(budget_line(result.budget, result.budget_source))
    print(layer_table(g, ch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
