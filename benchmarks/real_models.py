"""Every shipped model compiled for the Ethos-U to a TFLite Micro ``.tflite`` (target
``ethos-u``: NPU groups as ``ethos-u`` operators, the rest kept as TFLite operators), per
accelerator: whether it compiles, operators on the NPU / kept, the SRAM the file's streams
touched on the functional model (emulated) against Vela 5.2 ``--optimise Size``'s "Total SRAM
used" for the same model in the same run, whether the outputs equal TFLite Micro's
interpreter on the source on N random inputs (plus tflite-micro's two test images for
person_detect), and the compile time. A printed table, not a test.

  python benchmarks/real_models.py [--models DIR] [--runs 20] [--only NAME ...]
                                   [--accelerators ethos-u55-128,ethos-u55-256,ethos-u65-256]
                                   [--budget smallest|SIZE|system|none|vela]

Each (model, accelerator) runs in a process of its own, so one that crashes an interpreter
reports as such instead of ending the table. SRAM is the arena on an Ethos-U55 (Vela's
Shared_Sram) and the fast scratch on an Ethos-U65 (Vela's Dedicated_Sram: its SRAM holds the
fast scratch, the arena lives in DRAM).
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

ACCELERATORS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
IMAGES = {"person_detect": ("person.bmp", "no_person.bmp")}


def model_files(models_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(models_dir, "*.tflite"))
                  + glob.glob(os.path.join(models_dir, "tflite-micro", "*.tflite")))


def vela_sram(model: str, accelerator: str) -> tuple[float | None, str]:
    """Vela 5.2 ``--optimise Size``'s "Total SRAM used" (KiB) and its CPU operator count
    line, or (None, why not)."""
    vela = os.path.join(os.path.dirname(sys.executable), "vela")
    with tempfile.TemporaryDirectory() as out:
        r = subprocess.run([vela, model, "--accelerator-config", accelerator, "--optimise",
                            "Size", "--output-dir", out], capture_output=True, text=True,
                           timeout=600)
    m = re.search(r"Total SRAM used\s+([\d.]+) KiB", r.stdout)
    cpu = re.search(r"CPU operators = (\d+)", r.stdout)
    if r.returncode or not m:
        tail = (r.stderr or r.stdout).strip().splitlines()
        return None, tail[-1][:60] if tail else f"exit {r.returncode}"
    return float(m.group(1)), cpu.group(1) if cpu else "?"


def one(model: str, accelerator: str, runs: int, budget: str) -> dict:
    """Compile and compare one model for one accelerator (run in a child process) within
    ``budget`` (a compile budget, or "" for compile's default)."""
    import tvm_ethos
    from ethosu_stream.tflite_graph import TfliteGraph
    from tvm_ethos.backends.tflite_micro.reference import TflmReference
    from tvm_ethos.demo_person import image_input

    name = os.path.splitext(os.path.basename(model))[0]
    with open(model, "rb") as f:
        source = f.read()
    t0 = time.perf_counter()
    try:
        options = {"budget": budget} if budget else {}
        cm = tvm_ethos.compile(source, f"ethos-u -accelerator_config={accelerator}",
                               cache_dir=False, **options)
    except tvm_ethos.TvmEthosError as err:
        return {"compiled": False,
                "why": str(err).splitlines()[0].removeprefix("<bytes>: ")[:90]}
    seconds = time.perf_counter() - t0
    summary = cm.partition_summary
    out = {"compiled": True, "seconds": seconds, "npu": summary.get("ethos-u", 0),
           "kept": summary.get("tflite-micro", 0),
           "kept_kinds": sorted({p.kind for p in cm.placement if p.placed_on != "ethos-u"})}
    print(json.dumps(dict(out, why="the process died running the file")), flush=True)
    rs = np.random.RandomState(0)
    inputs = []
    for _ in range(runs):
        inputs.append([rs.randint(np.iinfo(s.dtype).min, np.iinfo(s.dtype).max + 1,
                                  size=s.shape).astype(s.dtype) for s in cm.inputs])
    for image in IMAGES.get(name, ()):
        inputs.append([image_input(os.path.join(os.path.dirname(model), image),
                                   cm.inputs[0].shape)])
    # the file first, then TFLite Micro: each step reported before the next may crash
    try:
        graph = TfliteGraph(cm.tflite, accelerator)
        got_all, arena, fast = [], 0, 0
        for xs in inputs:
            got, stats = graph.run(xs)
            got_all.append(got)
            arena = max(arena, stats.high_water.get(1, 0))
            fast = max(fast, stats.high_water.get(2, 0))
    except Exception as err:   # a runner that cannot run the file: reported, not raised
        out.update(equal=None, why=f"the file: {type(err).__name__}: "
                                   f"{str(err).splitlines()[0][:70]}")
        return out
    out.update(inputs=len(inputs), arena=arena, fast=fast, equal=None,
               why="TFLite Micro's interpreter died on the source model")
    print(json.dumps(out), flush=True)
    ref = TflmReference(source)
    equal = True
    for xs, got in zip(inputs, got_all):
        want = ref.run(xs)
        equal &= len(got) == len(want) and all(
            g.size == w.size and np.array_equal(g.reshape(w.shape).astype(np.int64),
                                                w.astype(np.int64))
            for g, w in zip(got, want))
    out.update(equal=bool(equal))
    del out["why"]
    return out


def _child(model: str, accelerator: str, runs: int, budget: str) -> dict:
    r = subprocess.run([sys.executable, __file__, "--child", model, accelerator, str(runs),
                        budget],
                       capture_output=True, text=True, timeout=3600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if lines:   # the last step reported (a crash after it is named in its "why")
        return json.loads(lines[-1])
    if r.returncode:
        err = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        return {"compiled": None, "why": f"the process ended ({r.returncode}): {err[:60]}"}
    return {"compiled": None, "why": "the process reported nothing"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=os.path.join(os.path.dirname(__file__), "..", "..",
                                                      "shared", "models"))
    ap.add_argument("--runs", type=int, default=20, help="random inputs per model (20)")
    ap.add_argument("--only", nargs="*", default=None, metavar="NAME",
                    help="model names (no suffix) to run")
    ap.add_argument("--accelerators", default=",".join(ACCELERATORS))
    ap.add_argument("--budget", default="smallest",
                    help="the NPU groups' SRAM budget (compile's budget option: a size, "
                         "'smallest', 'system', 'none'); 'vela': Vela's Size SRAM for that "
                         "model and accelerator; default smallest, the plan of the least "
                         "memory, as Vela's --optimise Size")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(one(args.child[0], args.child[1], int(args.child[2]),
                             args.child[3])), flush=True)
        return 0
    models = [m for m in model_files(args.models)
              if args.only is None or os.path.splitext(os.path.basename(m))[0] in args.only]
    if not models:
        print(f"no .tflite under {args.models}", file=sys.stderr)
        return 2
    head = (f"{'model':<28} {'accelerator':<14} {'compiled':>8} {'NPU':>4} {'kept':>4} "
            f"{'arena B':>9} {'fast B':>8} {'SRAM KiB':>9} {'Vela KiB':>9} {'<=Vela':>6} "
            f"{'=TFLM':>6} {'compile s':>9}  notes")
    print(head)
    print("-" * len(head))
    for model in models:
        name = os.path.splitext(os.path.basename(model))[0]
        for acc in args.accelerators.split(","):
            vela, vela_cpu = vela_sram(model, acc)
            budget = args.budget
            if budget == "vela":
                budget = str(int(vela * 1024)) if vela else ""
            r = _child(model, acc, args.runs, budget)
            if not r.get("compiled"):
                done = "no" if r.get("compiled") is False else "crash"
                print(f"{name:<28} {acc:<14} {done:>8} {'':>4} {'':>4} {'':>9} {'':>8} "
                      f"{'':>9} {_kib(vela):>9} {'':>6} {'':>6} {'':>9}  {r.get('why', '')}")
                continue
            sram = (r["fast"] if acc.startswith("ethos-u65") else r["arena"]) \
                if "arena" in r else None
            le = "" if sram is None or vela is None else \
                ("yes" if sram / 1024 <= vela + 0.005 else "no")
            eq = {True: f"yes/{r.get('inputs')}", False: "NO", None: "-"}[r.get("equal")]
            notes = []
            if r["kept_kinds"]:
                notes.append("kept: " + ", ".join(r["kept_kinds"]))
            if vela is None:
                notes.append(f"Vela: {vela_cpu}")
            elif vela_cpu not in ("0", "?"):
                notes.append(f"Vela keeps {vela_cpu} on the CPU")
            if r.get("why"):
                notes.append(r["why"])
            print(f"{name:<28} {acc:<14} {'yes':>8} {r['npu']:>4} {r['kept']:>4} "
                  f"{_n(r.get('arena')):>9} {_n(r.get('fast')):>8} "
                  f"{'' if sram is None else f'{sram / 1024:.1f}':>9} {_kib(vela):>9} "
                  f"{le:>6} {eq:>6} {r['seconds']:>9.1f}  {'; '.join(notes)}", flush=True)
    print("\nSRAM: emulated (the functional model's high-water marks over every run) of the "
          "ethos-u operators' arena; the tensors of operators kept as TFLite operators are "
          "placed by TFLite Micro's planner and not counted. Vela's is its own report. =TFLM: "
          "outputs equal TFLite Micro's on every input (random ones, plus the test images "
          "where the model has them).")
    return 0


def _kib(v) -> str:
    return "" if v is None else f"{v:.1f}"


def _n(v) -> str:
    return "" if v is None else f"{v:,}"


if __name__ == "__main__":
    sys.exit(main())
