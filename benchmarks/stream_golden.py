"""Golden compiled files: prove a refactor left every Ethos-U `.tflite` byte-identical.

For every shipped model (random-weight and trained) x accelerator x budget this compiles the
TFLite Micro `.tflite` (`ethos-u`, so the host operators stay TFLite operators) and writes
(``--write``) or compares (``--check``) the SHA-256 of its bytes; a model the compiler refuses
records its one-line error instead, so a change in what is refused is caught too.

    .venv/bin/python benchmarks/stream_golden.py --write /tmp/golden-streams.json
    .venv/bin/python benchmarks/stream_golden.py --check /tmp/golden-streams.json

Exit status 1 when any case differs (each one named on one line).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import tvm_ethos  # noqa: E402
from tests.helpers.models import MODELS_DIR  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
BUDGETS = ("default", "smallest")


def models() -> list[str]:
    """Every shipped `.tflite` but Vela's own output, by path relative to the models folder."""
    found = []
    for root, _, files in os.walk(MODELS_DIR):
        for name in files:
            if name.endswith(".tflite") and not name.endswith("_vela.tflite"):
                found.append(os.path.relpath(os.path.join(root, name), MODELS_DIR))
    return sorted(found)


def compile_case(model: str, accelerator: str, budget: str):
    """``model`` (relative to the models folder) compiled to a TFLite Micro file for
    ``accelerator`` at ``budget`` ("default": compile's own); raises what the compiler raises."""
    with open(os.path.join(MODELS_DIR, model), "rb") as f:
        data = f.read()
    options = {"accelerator_config": accelerator}
    if budget != "default":
        options["budget"] = budget
    return tvm_ethos.compile_tflite(data, "ethos-u", **options)


def digest(model: str, accelerator: str, budget: str) -> str:
    """``sha256:<hex>`` of the compiled file, or ``error:<first line>`` when refused."""
    try:
        cm = compile_case(model, accelerator, budget)
    except Exception as e:  # noqa: BLE001 - the refusal itself is the recorded result
        return f"error:{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return "sha256:" + hashlib.sha256(cm.tflite).hexdigest()


def digests() -> dict[str, str]:
    out = {}
    for model in models():
        for accelerator in ACCELERATORS:
            for budget in BUDGETS:
                key = f"{model} {accelerator} {budget}"
                out[key] = digest(model, accelerator, budget)
                print(f"{key}: {out[key][:23]}", file=sys.stderr, flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", metavar="FILE")
    mode.add_argument("--check", metavar="FILE")
    args = ap.parse_args(argv)
    now = digests()
    if args.write:
        with open(args.write, "w") as f:
            json.dump(now, f, indent=1, sort_keys=True)
        print(f"wrote {len(now)} digests to {args.write}")
        return 0
    with open(args.check) as f:
        golden = json.load(f)
    bad = [k for k in sorted(set(golden) | set(now)) if golden.get(k) != now.get(k)]
    for k in bad:
        print(f"differs: {k}: {golden.get(k)} -> {now.get(k)}")
    print(f"{len(now) - len(bad)} of {len(set(golden) | set(now))} identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
