"""The long, local malformed-model fuzz target (CI runs 10,000 cases of it in
tests/reliability/test_fuzz_models.py).

    python benchmarks/fuzz_models.py --cases 200000 --seconds 1800 [--campaign 7] [--long]
    python benchmarks/fuzz_models.py --onnx --cases 20000          # needs the 'onnx' package
    python benchmarks/fuzz_models.py --atheris --seconds 600       # needs 'atheris' (pip)

The default mode runs the CI harness (crash-isolated workers, watchdog, saved reproducers) on
more cases, a time limit (``--seconds``: no new case after that) and, with ``--long``, the
4.5 MB MobileNet as a seed too. Failures are saved under ``--save`` (default
``out/fuzz-failures``); the exit status is 1 when any case failed.

``--atheris`` runs Google's coverage-guided fuzzer over the same two loaders instead, seeded
with the shipped models: it finds inputs the mutation catalogue would not, at the price of no
watchdog of ours (libFuzzer's own ``-timeout`` and crash files apply). atheris is not a
dependency of the project.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "tvm_ethos")]


def _harness(a) -> int:
    from tests.reliability.fuzz_harness import run_campaign

    campaign = a.campaign if a.campaign is not None else int(time.time()) % 100000
    kind = "onnx" if a.onnx else "tflite"
    save = os.path.join(a.save, f"{kind}-c{campaign}")
    print(f"fuzzing {kind}: campaign {campaign}, up to {a.cases} cases, {a.workers} workers"
          + (f", {a.seconds:.0f} s" if a.seconds else "") + f"; failures go to {save}",
          flush=True)
    report = run_campaign(a.cases, campaign=campaign, workers=a.workers, corpus=kind,
                          targets="onnx" if a.onnx else "planner,frontend",
                          full_budget=0.0 if a.onnx else a.full_budget,
                          deadline=a.seconds / 1.0, long=a.long, save_dir=save,
                          first=a.first, max_restarts=1000)
    print(report.summary())
    print("\nby mutation (target: outcomes):")
    for key, c in sorted(report.by_mutator.items()):
        print(f"  {key:28s} " + ", ".join(f"{k} {v}" for k, v in c.most_common()))
    print("\nmost frequent messages:")
    for target, t in sorted(report.templates.items()):
        for msg, n in t.most_common(a.top):
            print(f"  {target:14s} {n:6d}  {msg}")
    return 1 if report.failures else 0


def _atheris(a) -> int:
    try:
        import atheris
    except ImportError:
        print("--atheris needs the 'atheris' package (pip install atheris)", file=sys.stderr)
        return 2
    with atheris.instrument_imports():
        import planner.tflite
        import tvm_ethos.frontend
    import tvm.relax.frontend.tflite as tfl

    from planner.errors import PlannerError
    from tvm_ethos.errors import TvmEthosError

    class Validated(BaseException):
        pass

    def stand_in(*_args, **_kwargs):   # whatever tflite_import.py passes (op_converter too)
        raise Validated()

    tfl.from_tflite = stand_in          # validation only: the TVM import is another target

    def one_input(data: bytes) -> None:
        try:
            planner.tflite.load_tflite(data)
        except PlannerError:
            pass
        try:
            tvm_ethos.frontend.load_model(data)
        except (TvmEthosError, Validated):
            pass

    corpus = Path(a.save) / "atheris-corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    from tests.reliability.tflite_mutator import MODELS, builder_models
    for name in ("ds_cnn_kws", "resnet8_cifar"):
        p = MODELS / f"{name}.tflite"
        if p.exists():
            (corpus / f"{name}.tflite").write_bytes(p.read_bytes())
    for name, data in builder_models():
        if "/" not in name:
            (corpus / f"{name}.tflite").write_bytes(data)
    argv = [sys.argv[0], str(corpus), f"-max_total_time={int(a.seconds or 600)}",
            "-timeout=10", "-rss_limit_mb=4096", f"-artifact_prefix={a.save}/atheris-"]
    if a.cases:
        argv.append(f"-runs={a.cases}")
    atheris.Setup(argv, one_input)
    atheris.Fuzz()
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=100000, help="most cases (default 100000)")
    ap.add_argument("--seconds", type=float, default=0.0,
                    help="stop taking new cases after this long (default: no limit)")
    ap.add_argument("--campaign", type=int, default=None,
                    help="campaign seed (default: from the clock; printed)")
    ap.add_argument("--first", type=int, default=0, help="first case index (resume)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full-budget", type=float, default=120.0,
                    help="seconds of full TVM imports of the cases validation accepts")
    ap.add_argument("--long", action="store_true", help="add mobilenet_v1_1.0_224 as a seed")
    ap.add_argument("--onnx", action="store_true", help="fuzz ONNX bytes instead")
    ap.add_argument("--atheris", action="store_true", help="coverage-guided, with atheris")
    ap.add_argument("--save", default=str(ROOT / "out" / "fuzz-failures"))
    ap.add_argument("--top", type=int, default=15, help="messages listed per target")
    a = ap.parse_args(argv)
    return _atheris(a) if a.atheris else _harness(a)


if __name__ == "__main__":
    sys.exit(main())
