"""Golden planner outputs: prove a speed change left every result byte-identical.

For every shipped model x device x io region this writes (``--write``) or compares
(``--check``) two files: the CLI's ``python -m planner plan MODEL --device D [--io-region
dram] --json`` output (chosen Proposal, frontier, candidate count), and every frontier
Proposal rebuilt in full (so a change that only moved a non-chosen Proposal is caught too);
synthetic chains and residual graphs get the second file.

    .venv/bin/python benchmarks/planner_golden.py --write /tmp/h-speed/golden
    .venv/bin/python benchmarks/planner_golden.py --check /tmp/h-speed/golden

Exit status 1 when any file differs (each difference is named on one line). ``--ignore KEY``
(repeatable) compares the JSON with every KEY left out of both sides: a change that only adds
a reported field (``estimated_stream_bytes``) proves every other value unchanged.

The candidate count (``plan_candidates``) is information, not a result: it is printed, old
and new, where it changed, and never makes a file differ (what it counts changed with the
bounded walks, rfcs/0001). Every other value (the frontier, the chosen Proposal, its memory,
cycles, Plans, stripes and reports, every frontier Proposal in full) is compared.
"""
from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.synthetic import chain, residual  # noqa: E402
from planner.__main__ import main as cli  # noqa: E402
from planner.devices import get_device  # noqa: E402
from planner.graph import PlannerGraph  # noqa: E402
from planner.proposals import ProposalSearch  # noqa: E402
from planner.tflite import load_tflite  # noqa: E402
from tests.helpers.models import MODELS_DIR  # noqa: E402

DEVICES = ("ethos-u55-128", "ethos-u65-256", "ethos-n78-1tops")
IO_REGIONS = ("sram", "dram")


def outputs(model, device: str, io_region: str) -> dict[str, str]:
    """{file suffix: text} for one model (a path or a PlannerGraph) x device x io region."""
    graph = model if isinstance(model, PlannerGraph) else load_tflite(model)
    search = ProposalSearch(graph, get_device(device, io_region=io_region))
    proposals = [search.proposal(k).to_json() for k in range(len(search.frontier))]
    out = {"frontier.json": json.dumps(proposals, sort_keys=True) + "\n"}
    if isinstance(model, PlannerGraph):
        return out
    argv = ["plan", model, "--device", device, "--json"]
    if io_region == "dram":
        argv += ["--io-region", "dram"]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli(argv)
    if rc != 0:
        raise SystemExit(f"planner CLI failed (status {rc}) on {' '.join(argv)}")
    out["cli.json"] = buf.getvalue()
    return out


def cases(models_dir: str):
    """(name, model, device, io region): every shipped model on every device and io region,
    then synthetic chains and residual graphs (their many repeated Parts and joins)."""
    for model in sorted(glob.glob(os.path.join(models_dir, "*.tflite"))):
        stem = os.path.splitext(os.path.basename(model))[0]
        for device in DEVICES:
            for io_region in IO_REGIONS:
                yield f"{stem}.{device}.{io_region}", model, device, io_region
    for make in (chain, residual):
        for io_region in IO_REGIONS:
            g = make(60)
            yield f"{g.name}.ethos-u55-128.{io_region}", g, "ethos-u55-128", io_region


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="DIR")
    mode.add_argument("--check", metavar="DIR")
    ap.add_argument("--models", default=str(MODELS_DIR))
    ap.add_argument("--ignore", action="append", default=[], metavar="KEY",
                    help="with --check: leave this JSON key out of both sides")
    args = ap.parse_args()
    folder = args.write or args.check
    os.makedirs(folder, exist_ok=True)
    differ = 0
    for name, model, device, io_region in cases(args.models):
        for suffix, text in outputs(model, device, io_region).items():
            path = os.path.join(folder, f"{name}.{suffix}")
            if args.write:
                with open(path, "w") as f:
                    f.write(text)
                continue
            with open(path) as f:
                old = f.read()
            ignored = [*args.ignore, INFORMATION]
            same = _without(old, ignored) == _without(text, ignored)
            differ += not same
            counts = [_counts(t) for t in (old, text)]
            note = f"  ({INFORMATION} {counts[0]} -> {counts[1]})" \
                if counts[0] != counts[1] else ""
            print(f"{'same' if same else 'DIFFERS'}  {os.path.basename(path)}{note}")
    if args.check:
        print("all identical" if not differ else f"{differ} file(s) differ")
    return 1 if differ else 0


#: Printed where it changed, never compared.
INFORMATION = "plan_candidates"


def _counts(text: str) -> list:
    """The candidate counts of ``text``'s JSON lines (None for a line without one)."""
    return [json.loads(line).get(INFORMATION) if line.strip().startswith("{") else None
            for line in text.splitlines() if line.strip()]


def _without(text: str, keys: list[str]):
    """The JSON values of ``text`` (one per line) with every key in ``keys`` dropped."""
    def drop(value):
        if isinstance(value, dict):
            return {k: drop(v) for k, v in value.items() if k not in keys}
        if isinstance(value, list):
            return [drop(v) for v in value]
        return value
    return [drop(json.loads(line)) for line in text.splitlines() if line.strip()]


if __name__ == "__main__":
    sys.exit(main())
