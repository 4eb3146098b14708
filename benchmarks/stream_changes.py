"""Which compiled Ethos-U files a change altered, and whether each altered file still computes
the same outputs: the stream golden's cases (``benchmarks/stream_golden``) compiled with this
tree and with another checkout, side by side.

For every shipped model x accelerator x budget whose ``.tflite`` differs, both files run on the
functional Ethos-U model (this tree's ``ethosu_stream``, the host operators through the
interpreter ``ethosu_stream.tflite_graph`` uses) on ``--runs`` seeded random inputs (and
person_detect's two test images); the outputs must be equal to each other and to TFLite
Micro's (``tests.helpers.tflite_oracle.TflmOracle``). Printed per case: the stream bytes and
NPU operations before and after, the file bytes (the stream and the flash), and the two
verdicts. Exit status 1 when an altered file's outputs differ.

  python benchmarks/stream_changes.py --before OTHER_CHECKOUT [--runs 2]
      [--budgets default,smallest] [--accelerators ethos-u55-128,ethos-u65-256]
      [--only resnet8_cifar ...]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

#: the tree whose code compiles: this one, or ``--before``'s in the child process
CODE = os.environ.get("STREAM_CHANGES_CODE") or os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))
sys.path.insert(0, CODE)

from benchmarks.compile_speed import npu_operations  # noqa: E402
from benchmarks.stream_golden import ACCELERATORS, BUDGETS, compile_case, models  # noqa: E402
from ethosu_stream.tflite_custom_op import read_ethos_u_ops  # noqa: E402
from tests.helpers.models import MODELS_DIR  # noqa: E402

#: test images run beside the random inputs (``tvm_ethos.demo_person``)
IMAGES = {"person_detect": ("person.bmp", "no_person.bmp")}


def _name(case: tuple[str, str, str]) -> str:
    model, accelerator, budget = case
    return f"{model.replace('/', '__')}.{accelerator}.{budget}.tflite"


def write_cases(cases: list[tuple[str, str, str]], out_dir: str) -> None:
    """Each case's compiled file into ``out_dir`` (a refused case writes no file)."""
    for case in cases:
        try:
            cm = compile_case(*case)
        except Exception as e:  # noqa: BLE001 - a refusal is a row of the table
            print(f"{' '.join(case)}: refused: {str(e).splitlines()[0][:80]}", file=sys.stderr)
            continue
        with open(os.path.join(out_dir, _name(case)), "wb") as f:
            f.write(cm.tflite)


def _stream(data: bytes) -> tuple[int, int]:
    """(command-stream bytes, NPU kernel operations) of the file's ``ethos-u`` operators."""
    ops = read_ethos_u_ops(data)
    return sum(4 * len(op.words) for op in ops), sum(npu_operations(op.words) for op in ops)


def _inputs(model: str, runs: int, specs) -> list[list[np.ndarray]]:
    from tvm_ethos.demo_person import image_input

    rs = np.random.RandomState(0)
    out = [[rs.randint(np.iinfo(s.dtype).min, np.iinfo(s.dtype).max + 1, size=s.shape)
            .astype(s.dtype) for s in specs] for _ in range(runs)]
    name = os.path.splitext(os.path.basename(model))[0]
    for image in IMAGES.get(name, ()):
        out.append([image_input(os.path.join(MODELS_DIR, os.path.dirname(model), image),
                                specs[0].shape)])
    return out


def _equal(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return len(a) == len(b) and all(
        x.size == y.size and np.array_equal(np.asarray(x).reshape(-1).astype(np.int64),
                                            np.asarray(y).reshape(-1).astype(np.int64))
        for x, y in zip(a, b))


def compare(case: tuple[str, str, str], before: bytes, after: bytes, runs: int) -> dict:
    """Both files' streams and whether their outputs agree (with each other and with TFLite
    Micro) on the same inputs."""
    from ethosu_stream.tflite_graph import TfliteGraph
    from tests.helpers.tflite_oracle import TflmOracle
    from tvm_ethos.tflite_run import inputs_of

    model, accelerator, _ = case
    with open(os.path.join(MODELS_DIR, model), "rb") as f:
        source = f.read()
    xs = _inputs(model, runs, inputs_of(after))
    old, new = TfliteGraph(before, accelerator), TfliteGraph(after, accelerator)
    ref = TflmOracle(source)
    same = tflm = True
    for x in xs:
        got = new.run(x)[0]
        same &= _equal(got, old.run(x)[0])
        tflm &= _equal(got, ref.run(x))
    return {"stream": (_stream(before), _stream(after)), "file": (len(before), len(after)),
            "inputs": len(xs), "same": same, "tflm": tflm}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, metavar="OTHER_CHECKOUT")
    ap.add_argument("--runs", type=int, default=2, help="random inputs per altered file")
    ap.add_argument("--accelerators", default=",".join(ACCELERATORS))
    ap.add_argument("--budgets", default=",".join(BUDGETS))
    ap.add_argument("--only", nargs="*", help="model names (no folder, no .tflite)")
    ap.add_argument("--write-dir", help=argparse.SUPPRESS)   # the child's side
    args = ap.parse_args(argv)
    cases = [(m, a, b) for m in models()
             if not args.only or os.path.splitext(os.path.basename(m))[0] in args.only
             for a in args.accelerators.split(",") for b in args.budgets.split(",")]
    if args.write_dir:
        write_cases(cases, args.write_dir)
        return 0
    with tempfile.TemporaryDirectory() as before_dir, tempfile.TemporaryDirectory() as now_dir:
        child = [sys.executable, os.path.abspath(__file__), "--before", args.before,
                 "--accelerators", args.accelerators, "--budgets", args.budgets,
                 "--write-dir", before_dir] + (["--only", *args.only] if args.only else [])
        env = dict(os.environ, STREAM_CHANGES_CODE=os.path.abspath(args.before),
                   PYTHONPATH=os.path.abspath(args.before))
        subprocess.run(child, env=env, check=True, cwd=os.path.abspath(args.before))
        write_cases(cases, now_dir)
        bad = 0
        head = (f"{'case':58} {'stream B before -> after':>26} {'ops':>11} "
                f"{'file B change':>13}  outputs")
        print(head)
        print("-" * len(head))
        for case in cases:
            paths = [os.path.join(d, _name(case)) for d in (before_dir, now_dir)]
            key = " ".join(case)
            if not all(os.path.exists(p) for p in paths):
                print(f"{key:58} refused: {'before' if not os.path.exists(paths[0]) else ''} "
                      f"{'after' if not os.path.exists(paths[1]) else ''}")
                bad += os.path.exists(paths[0]) != os.path.exists(paths[1])
                continue
            before, after = (open(p, "rb").read() for p in paths)
            if before == after:
                print(f"{key:58} same bytes")
                continue
            r = compare(case, before, after, args.runs)
            (sb, ob), (sa, oa) = r["stream"]
            ok = r["same"] and r["tflm"]
            bad += not ok
            print(f"{key:58} {sb:>11,} -> {sa:>11,} {ob:>5}->{oa:<5} "
                  f"{r['file'][1] - r['file'][0]:>+13,}  "
                  f"{'equal to before' if r['same'] else 'DIFFER from before'}, "
                  f"{'equal to' if r['tflm'] else 'DIFFER from'} TFLite Micro "
                  f"({r['inputs']} inputs)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
