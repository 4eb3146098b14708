"""Command-stream bytes per NPU operation of every shipped model, before and after a change
(issue 27: "stream bytes per NPU operation <= Vela's").

For each model x accelerator x budget (the stream golden's cases, ``benchmarks/stream_golden``,
plus the ``size`` budget of ``--optimise Size``) this compiles the TFLite Micro ``.tflite``
(target ``ethos-u``) and prints the bytes of its ``ethos-u`` operators' command streams, their
NPU operations (convolution, depthwise, pool and elementwise commands, as
``benchmarks/compile_speed`` counts them), the bytes per operation, the weight bytes the
streams' DMAs move into SRAM in one inference and the SRAM touched (both emulated: the
compile's dry run of each stream on the functional model, its plan report).

``--before OTHER_CHECKOUT`` measures the same cases with another tree's code, in a process of
its own, and prints both side by side with the change in stream bytes.

  python benchmarks/stream_bytes.py [--only resnet8_cifar ...] [--accelerators ethos-u55-128]
      [--budgets default,smallest,size] [--before OTHER_CHECKOUT]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

#: the tree whose code is measured: this one, or ``--before``'s in the child process
CODE = os.environ.get("STREAM_BYTES_CODE") or os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))
sys.path.insert(0, CODE)

from benchmarks.compile_speed import npu_operations  # noqa: E402
from benchmarks.stream_golden import compile_case, models  # noqa: E402
from ethosu_stream.tflite_custom_op import read_ethos_u_ops  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
BUDGETS = ("default", "smallest", "size")


def measure(model: str, accelerator: str, budget: str) -> dict:
    """Stream bytes, NPU operations, weight DMA into SRAM and SRAM touched of ``model``'s
    ``.tflite`` for ``accelerator`` at ``budget`` ("default": compile's own), or ``why`` it
    was refused."""
    try:
        cm = compile_case(model, accelerator, budget)
    except Exception as e:  # noqa: BLE001 - a refusal is a row of the table
        return {"why": f"{type(e).__name__}: {str(e).splitlines()[0][:60] if str(e) else ''}"}
    stream = ops = 0
    for op in read_ethos_u_ops(cm.tflite):
        stream += 4 * len(op.words)
        ops += npu_operations(op.words)
    entries = [e for r in cm.plan_reports for e in r.get("streams", {}).values()]
    dma = sum(n for e in entries for k, n in e.get("dma_bytes", {}).items()
              if k.split("->")[1] in ("1", "2"))
    sram = sum(e.get("sram_high_water_bytes", 0) for e in entries)
    return {"stream": stream, "ops": ops, "dma": dma, "sram": sram}


def measure_all(only, accelerators, budgets) -> dict[str, dict]:
    out = {}
    for model in models():
        if only and os.path.splitext(os.path.basename(model))[0] not in only:
            continue
        for accelerator in accelerators:
            for budget in budgets:
                key = f"{model} {accelerator} {budget}"
                out[key] = measure(model, accelerator, budget)
                print(f"{key}: {out[key]}", file=sys.stderr, flush=True)
    return out


def _before(code: str, argv: list[str]) -> dict[str, dict]:
    """The same cases measured with the code of checkout ``code``."""
    env = dict(os.environ, STREAM_BYTES_CODE=os.path.abspath(code))
    r = subprocess.run([sys.executable, os.path.abspath(__file__), *argv, "--json"], env=env,
                       stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(r.stdout)


def _cells(m: dict | None) -> str:
    if m is None:
        return f"{'-':>9} {'':>5} {'':>6} {'':>9} {'':>8}"
    if "why" in m:
        return f"{m['why'][:42]:>41}"
    return (f"{m['stream']:>9,} {m['ops']:>5} {m['stream'] / max(m['ops'], 1):>6.1f} "
            f"{m['dma']:>9,} {m['sram']:>8,}")


def table(now: dict[str, dict], before: dict[str, dict] | None) -> str:
    head = f"{'stream B':>9} {'ops':>5} {'B/op':>6} {'DMA B':>9} {'SRAM B':>8}"
    width = len(head)
    lines = ([f"{'':62} {'before':^{width}}   {'after':^{width}}"] if before else []) + \
        [f"{'case':62} " + (f"{head}   " if before else "") + head
         + ("   stream change" if before else "")]
    for key, m in now.items():
        row = f"{key:62} "
        if before is not None:
            b = before.get(key)
            row += _cells(b) + "   "
            if b and "stream" in b and "stream" in m:
                d = m["stream"] - b["stream"]
                change = f"{d:+,} B ({100 * d / b['stream']:+.1f} %)" if d else "same"
            else:
                change = ""
        row += _cells(m)
        if before is not None:
            row += f"   {change}"
        lines.append(row)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", help="model names (no folder, no .tflite)")
    ap.add_argument("--accelerators", default=",".join(ACCELERATORS))
    ap.add_argument("--budgets", default=",".join(BUDGETS))
    ap.add_argument("--before", default=None, metavar="OTHER_CHECKOUT")
    ap.add_argument("--json", action="store_true", help="print the measures as JSON")
    args = ap.parse_args(argv)
    cases = ["--accelerators", args.accelerators, "--budgets", args.budgets]
    if args.only:
        cases += ["--only", *args.only]
    before = _before(args.before, cases) if args.before else None
    now = measure_all(args.only, args.accelerators.split(","), args.budgets.split(","))
    print(json.dumps(now) if args.json else table(now, before))
    return 0


if __name__ == "__main__":
    sys.exit(main())
