"""Bytes per NPU operation of the ``size`` budget's choice against its frontier neighbours
(issue 27: where the stream bytes per operation stay above Vela Size's, is it the plan?).

For each model, on one accelerator: the planner's frontier (memory ascending), the Proposal
the ``size`` budget chooses (``planner.size_choice``) and ``--span`` Proposals either side of
it, each compiled to a TFLite Micro ``.tflite`` as if the ``size`` rule had chosen it. Per
Proposal: its SRAM and estimated stream bytes (what the rule adds), the estimated NPU
operations (``planner.stream_estimate``), and then the written stream's bytes, NPU
operations (convolution, depthwise, pool and elementwise commands), bytes per operation and
the SRAM it touched (emulated), and how many of its operations run the same layer as the
operation before them (their settings mostly stay: only the boxes' addresses change).

  python benchmarks/size_neighbours.py [--only resnet8_cifar person_detect]
      [--accelerator ethos-u55-128] [--span 3]
"""
from __future__ import annotations

import argparse
import os
import sys
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import planner.api  # noqa: E402
import tvm_ethos  # noqa: E402
from ethosu_stream.registers import decode_stream  # noqa: E402
from ethosu_stream.run import KERNEL_OPERATIONS  # noqa: E402
from ethosu_stream.tflite_custom_op import read_ethos_u_ops  # noqa: E402
from planner.size_choice import size_objective, walk_frontier  # noqa: E402
from planner.stream_estimate import plan_stream  # noqa: E402
from tests.helpers.models import MODELS_DIR  # noqa: E402

MODELS = {"mobilenet_v1_1.0_224": "mobilenet_v1_1.0_224.tflite",
          "resnet8_cifar": "resnet8_cifar.tflite",
          "person_detect": os.path.join("tflite-micro", "person_detect.tflite")}
#: the registers naming a layer's weights: an operation that keeps them runs the same layer
#: (or one of its weight slices) as the operation before it
LAYER_REGISTERS = ("WEIGHT_BASE", "WEIGHT_LENGTH", "SCALE_BASE")


def written(tflite: bytes) -> tuple[int, int, int]:
    """(stream bytes, NPU operations, operations that write none of LAYER_REGISTERS nor a
    different operation kind than the one before them) of every ``ethos-u`` operator."""
    stream = ops = same = 0
    for op in read_ethos_u_ops(tflite):
        stream += 4 * len(op.words)
        changed, kind = set(), None
        for c in decode_stream(op.words):
            if c.name in KERNEL_OPERATIONS:
                ops += 1
                same += kind == c.name and not changed
                changed, kind = set(), c.name
            elif c.name.startswith("NPU_SET_"):
                name = c.name[len("NPU_SET_"):]
                if name in LAYER_REGISTERS:
                    changed.add(name)
    return stream, ops, same


def neighbours(model: str, accelerator: str, span: int) -> list[dict]:
    """One row per frontier Proposal within ``span`` of the ``size`` choice."""
    with open(os.path.join(MODELS_DIR, MODELS[model]), "rb") as f:
        data = f.read()
    forced: dict = {}
    real_size_choice = planner.api.size_choice

    def choose(search, budget=None):
        k, objective = walk_frontier([m for m, _ in search.frontier],
                                     lambda j: size_objective(search.proposal(j), search),
                                     budget)
        forced.setdefault("chosen", k)
        forced["n"] = len(search.frontier)
        j = min(max(k + forced.get("offset", 0), 0), len(search.frontier) - 1)
        proposal = search.proposal(j)
        forced["row"] = {"index": j, "chosen": j == k,
                         "memory": proposal.memory_bytes,
                         "estimated": proposal.estimated_stream_bytes,
                         "estimated_ops": sum(plan_stream(p, search.graph, search.device)
                                              .operations for p in proposal.plans),
                         "plans": len(proposal.plans)}
        return proposal, size_objective(proposal, search)

    rows = []
    with mock.patch.object(planner.api, "size_choice", choose):
        for offset in range(-span, span + 1):
            forced["offset"] = offset
            cm = tvm_ethos.compile_tflite(data, "ethos-u", accelerator_config=accelerator,
                                          budget="size", cache_dir=False)
            row = dict(forced["row"])
            if any(r["index"] == row["index"] for r in rows):
                continue   # clamped at the frontier's end
            row["stream"], row["ops"], row["same"] = written(cm.tflite)
            entries = [e for r in cm.plan_reports for e in r.get("streams", {}).values()]
            row["sram"] = sum(e.get("sram_high_water_bytes", 0) for e in entries)
            rows.append(row)
    assert planner.api.size_choice is real_size_choice
    return rows


def table(model: str, rows: list[dict]) -> str:
    lines = [f"{model}: frontier index, SRAM + estimated stream (the size rule's sum), "
             "estimated ops, written stream / ops / B/op, operations of the same layer as the "
             "one before, SRAM touched (emulated); * the size choice",
             f"{'':2}{'k':>4} {'plans':>5} {'memory B':>9} {'est. stream':>11} {'sum':>9} "
             f"{'est. ops':>8} {'stream B':>9} {'ops':>5} {'B/op':>6} {'same layer':>10} "
             f"{'SRAM B':>8}"]
    for r in rows:
        lines.append(f"{'*' if r['chosen'] else ' ':2}{r['index']:>4} {r['plans']:>5} "
                     f"{r['memory']:>9,} {r['estimated']:>11,} "
                     f"{r['memory'] + r['estimated']:>9,} {r['estimated_ops']:>8} "
                     f"{r['stream']:>9,} {r['ops']:>5} {r['stream'] / r['ops']:>6.1f} "
                     f"{r['same']:>10} {r['sram']:>8,}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=["resnet8_cifar", "person_detect"],
                    choices=sorted(MODELS))
    ap.add_argument("--accelerator", default="ethos-u55-128")
    ap.add_argument("--span", type=int, default=3)
    args = ap.parse_args(argv)
    for model in args.only:
        print(table(model, neighbours(model, args.accelerator, args.span)), flush=True)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
