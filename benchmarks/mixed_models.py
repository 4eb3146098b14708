"""Random multi-operator int8 models through the Ethos-U stream against TFLite Micro (issue 28's
operators mixed: tests/tvm_ethos/mixed_models.py draws them, mixed_run.py checks one).

    python benchmarks/mixed_models.py --models 300 [--seed 1] [--llvm-every 5] [--wide]

``--wide`` draws issue 28's second set too (PRELU, SQUARED_DIFFERENCE, MAXIMUM / MINIMUM,
MIRROR_PAD, PADV2, TRANSPOSE_CONV, SUM / REDUCE_MAX / REDUCE_MIN, RELU6, QUANTIZE,
FULLY_CONNECTED) and int8, uint8 or int16 chains; a model TFLite Micro has no kernel for (most
uint8 ones) is judged by LiteRT's reference kernels as an ``ethos-u,llvm`` package only.

Each model is compiled for ``ethos-u`` (the TFLite Micro host) at the default budget and at its
largest subgraph's least memory (estimated by the planner), both files run on the functional
model and TFLite Micro's kernels, output bytes compared with TFLite Micro on the source; every
``--llvm-every``-th model also as an ``ethos-u,llvm`` package. Prints the models that differ or
fail to compile (their recipes: ``mixed_models.Recipe``), the operators drawn, how many went to
the NPU, and how many tight plans cascaded. The exit status is 1 when any model failed.
"""
from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "tvm_ethos")]

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from mixed_models import build, recipes  # noqa: E402
from mixed_run import check  # noqa: E402


def draw(count: int, campaign: int, wide: bool = False) -> list:
    """``count`` recipes, the same for the same ``campaign``."""
    out = []

    @seed(campaign)
    @settings(max_examples=count, database=None, deadline=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(recipes(wide=wide))
    def collect(recipe):
        out.append(recipe)

    collect()
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1, help="the campaign: which models are drawn")
    ap.add_argument("--llvm-every", type=int, default=5,
                    help="every N-th model also on ethos-u,llvm (0: none)")
    ap.add_argument("--wide", action="store_true",
                    help="issue 28's second set of kinds too, and uint8 / int16 chains")
    a = ap.parse_args(argv)
    kinds, placed, failures = collections.Counter(), collections.Counter(), []
    hosts, cascaded, splits, seen = collections.Counter(), 0, 0, set()
    dtypes, oracles = collections.Counter(), collections.Counter()
    t0 = time.time()
    for i, recipe in enumerate(draw(a.models, a.seed, a.wide)):
        if recipe in seen:          # hypothesis may draw one twice
            continue
        seen.add(recipe)
        kinds.update(s.kind.value for s in recipe.steps)
        dtypes[recipe.dtype.value] += 1
        llvm = a.llvm_every > 0 and i % a.llvm_every == 0
        try:
            out = check(build(recipe), seed=i, llvm=llvm)
        except Exception as e:   # noqa: BLE001 -- every failure is reported, then the next
            failures.append((recipe, f"{type(e).__name__}: {str(e)[:300]}"))
            print(f"FAIL {recipe}\n     {failures[-1][1]}", flush=True)
            continue
        placed.update(out.placed)
        oracles[out.oracle] += 1
        cascaded += out.cascaded
        splits += out.oracle_split
        hosts.update(r.split(":")[0] + ":" + r.split(":", 1)[1][:400] for r in out.host_reasons)
    n = len(seen)
    print(f"\n{n} models ({a.models} drawn, campaign {a.seed}), {len(failures)} failed, "
          f"{time.time() - t0:.0f} s")
    print(f"tight plans that cascade (a plan of several parts): {cascaded} of "
          f"{n - len(failures)}")
    print(f"models where TFLite Micro and LiteRT's reference kernels disagree (ours equal to "
          f"LiteRT's; mixed_run.py): {splits}")
    print("chains by input type: " + ", ".join(f"{k} {v}" for k, v in sorted(dtypes.items())))
    print("oracles (tflm: TFLite Micro, litert: LiteRT's reference kernels, ethos-u,llvm only): "
          + ", ".join(f"{k} {v}" for k, v in sorted(oracles.items())))
    print("operators placed: " + ", ".join(f"{k} {v}" for k, v in sorted(placed.items())))
    print("\n| operator | drawn |\n| --- | --- |")
    for k, v in sorted(kinds.items()):
        print(f"| {k} | {v} |")
    if hosts:
        print("\noperators left on the TFLite Micro host, and why:")
        for r, c in hosts.most_common():
            print(f"  {c:4d}  {r}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
