"""Every shipped model compiled for the Ethos-U to a TFLite Micro ``.tflite`` (target
``ethos-u``: NPU groups as ``ethos-u`` operators, the rest kept as TFLite operators), per
accelerator: whether it compiles, operators on the NPU / kept on the CPU against the CPU
operators of Vela 5.2 ``--optimise Size`` and whether every operator Vela puts on the NPU is on
ours (issue 28's "partition like Vela, or better"), the ethos-u operators' arena the streams
touched on the functional model (emulated), the SRAM the application touches with each file
(``sram_touched``) ours against Vela Size's, Vela's own "Total SRAM used", the bytes the
streams' DMA commands move in one inference against those of Vela Size's own streams (both
emulated), the arena a TFLite Micro application gives each file in all, ours and Vela Size's (the
ethos-u operators' arena plus what the CPU operators' tensors, states and scratch need:
``benchmarks/tflm_arena.py`` gives the rule; Vela's SRAM figure leaves out the states and
scratch of the operators it keeps on the CPU),
whether the outputs equal TFLite Micro's interpreter on the source on N random inputs (plus
tflite-micro's two test images for person_detect; where the source ends in a SOFTMAX that
TFLite Micro's kernel aborts on, as MobileNetV1-224's, its interpreter up to the logits and
that kernel's arithmetic after: ``TflmOracle``), and the compile time. A printed table, not
a test.

  python benchmarks/real_models.py [--models DIR] [--runs 20] [--only NAME ...]
                                   [--accelerators ethos-u55-128,ethos-u55-256,ethos-u65-256]
                                   [--budget smallest|SIZE|system|none|vela]

Each (model, accelerator) runs in a process of its own, so one that crashes an interpreter
reports as such instead of ending the table.
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

from tvm_ethos.reports.tflite_ops import operator_kinds

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.tflm_arena import tflm_arena  # noqa: E402

ACCELERATORS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
IMAGES = {"person_detect": ("person.bmp", "no_person.bmp")}


def model_files(models_dir: str) -> list[str]:
    return sorted(glob.glob(os.path.join(models_dir, "*.tflite"))
                  + glob.glob(os.path.join(models_dir, "tflite-micro", "*.tflite")))


def vela_size(model: str, accelerator: str) -> dict:
    """Vela 5.2 ``--optimise Size`` on ``model``: its "Total SRAM used" (``sram`` KiB), its
    CPU operator count (``cpu``, from its summary) and the ``.tflite`` it wrote
    (``tflite``); ``why`` instead when Vela fails."""
    from planner.vela_run import VelaError, run_vela

    try:
        run = run_vela(model, accelerator, "--optimise", "Size")
    except VelaError as err:
        return {"why": str(err).splitlines()[-1][-60:]}
    cpu = re.search(r"CPU operators = (\d+)", run.stdout)
    return {"sram": run.sram_bytes / 1024, "cpu": int(cpu.group(1)) if cpu else None,
            "tflite": run.tflite}


def vela_cpu_indices(source: bytes, vela_tflite: bytes) -> set[int] | None:
    """The indices in ``source`` of the operators Vela left on the CPU: Vela copies them in
    source order with their kind and output shape, so each is matched to the next source
    operator of that kind and shape; an ``ethos-u`` operator of the source (compiled
    already) is one Vela keeps too. None when one cannot be matched."""
    src = operator_kinds(source)
    kept, at = {i for i, (kind, _) in enumerate(src) if kind == "ethos-u"}, 0
    for kind, shape in operator_kinds(vela_tflite):
        if kind == "ethos-u":
            continue
        while at < len(src) and src[at] != (kind, shape):
            at += 1
        if at == len(src):
            return None
        kept.add(at)
        at += 1
    return kept


def _dma(stats) -> int:
    return int(sum(stats.dma_bytes.values()))


def one(model: str, accelerator: str, runs: int, budget: str, vela_file: str = "") -> dict:
    """Compile and compare one model for one accelerator (run in a child process) within
    ``budget`` (a compile budget, or "" for compile's default); ``vela_file``, Vela Size's
    ``.tflite`` for it (or ""), gives the operators Vela left on the CPU and its DMA bytes."""
    import tvm_ethos
    from ethosu_stream.tflite_graph import TfliteGraph
    from tests.helpers.tflite_oracle import TflmOracle
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
    ours_cpu = {p.index for p in cm.placement if p.placed_on != "ethos-u"}
    out = {"compiled": True, "seconds": seconds, "npu": summary.get("ethos-u", 0),
           "kept": summary.get("tflite-micro", 0),
           "kept_kinds": sorted({p.kind for p in cm.placement if p.placed_on != "ethos-u"})}
    vela_tflite = b""
    if vela_file:
        with open(vela_file, "rb") as f:
            vela_tflite = f.read()
        vela_cpu = vela_cpu_indices(source, vela_tflite)
        kinds = [p.kind for p in cm.placement]
        out["not_taken"] = None if vela_cpu is None else \
            [f"{kinds[i]}@{i}" for i in sorted(ours_cpu - vela_cpu)]
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
        got_all, arena, fast, dma = [], 0, 0, 0
        for xs in inputs:
            got, stats = graph.run(xs)
            got_all.append(got)
            arena = max(arena, stats.high_water.get(1, 0))
            fast = max(fast, stats.high_water.get(2, 0))
            dma = max(dma, _dma(stats))
        out["dma"] = dma
        out["tflm"] = tflm_arena(graph).total
    except Exception as err:   # a runner that cannot run the file: reported, not raised
        out.update(equal=None, why=f"the file: {type(err).__name__}: "
                                   f"{str(err).splitlines()[0][:70]}")
        return out
    if vela_tflite:
        try:
            vela_graph = TfliteGraph(vela_tflite, accelerator)
            out["vela_dma"] = _dma(vela_graph.run(inputs[0])[1])
            out["vela_tflm"] = tflm_arena(vela_graph).total
        except Exception as err:   # the functional model cannot run Vela's file: no figure
            out["vela_note"] = (f"Vela's file on the functional model: {type(err).__name__}: "
                                f"{str(err).splitlines()[0][:60]}")
    if cm.tflite == source:   # compiled already, written as it is: no reference runs it
        return dict(out, inputs=len(inputs), arena=arena, fast=fast, equal=None,
                    why="written as it is (its ethos-u operator compiled already)")
    out.update(inputs=len(inputs), arena=arena, fast=fast, equal=None,
               why="TFLite Micro's interpreter died on the source model")
    print(json.dumps(out), flush=True)
    ref = TflmOracle(source)   # split before a final SOFTMAX TFLite Micro aborts on
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


def _child(model: str, accelerator: str, runs: int, budget: str, vela_tflite: bytes) -> dict:
    with tempfile.NamedTemporaryFile(suffix="_vela.tflite") as f:
        f.write(vela_tflite)
        f.flush()
        r = subprocess.run([sys.executable, __file__, "--child", model, accelerator, str(runs),
                            budget, f.name if vela_tflite else ""],
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
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(one(args.child[0], args.child[1], int(args.child[2]),
                             args.child[3], args.child[4])), flush=True)
        return 0
    models = [m for m in model_files(args.models)
              if args.only is None or os.path.splitext(os.path.basename(m))[0] in args.only]
    if not models:
        print(f"no .tflite under {args.models}", file=sys.stderr)
        return 2
    head = (f"{'model':<28} {'accelerator':<14} {'compiled':>8} {'NPU':>4} {'CPU':>4} "
            f"{'Vela CPU':>8} {'<=Vela':>6} {'NPU>=Vela':>9} {'arena B':>9} {'fast B':>8} "
            f"{'SRAM B':>9} {'Vela SRAM B':>11} {'<=Vela':>6} {'Vela rep KiB':>12} "
            f"{'DMA B':>9} {'Vela DMA B':>10} "
            f"{'<=Vela':>6} {'TFLM B':>7} {'Vela TFLM B':>11} {'<=Vela':>6} {'=TFLM':>6} "
            f"{'compile s':>9}  notes")
    print(head)
    print("-" * len(head))
    for model in models:
        name = os.path.splitext(os.path.basename(model))[0]
        for acc in args.accelerators.split(","):
            vela = vela_size(model, acc)
            budget = args.budget
            if budget == "vela":
                budget = str(int(vela["sram"] * 1024)) if "sram" in vela else ""
            r = _child(model, acc, args.runs, budget, vela.get("tflite", b""))
            vela_cpu = vela.get("cpu")
            if not r.get("compiled"):
                done = "no" if r.get("compiled") is False else "crash"
                print(f"{name:<28} {acc:<14} {done:>8} {'':>4} {'':>4} {_n(vela_cpu):>8} "
                      f"{'':>6} {'':>9} {'':>9} {'':>8} {'':>9} {'':>11} {'':>6} "
                      f"{_kib(vela.get('sram')):>12} "
                      f"{'':>9} {'':>10} {'':>6} {'':>7} {'':>11} {'':>6} {'':>6} "
                      f"{'':>9}  "
                      f"{r.get('why', '')}")
                continue
            sram, vela_sram = sram_touched(acc, r, vela)
            eq = {True: f"yes/{r.get('inputs')}", False: "NO", None: "-"}[r.get("equal")]
            not_taken = r.get("not_taken")
            superset = "" if "not_taken" not in r else \
                ("?" if not_taken is None else "yes" if not not_taken else "no")
            notes = []
            if not_taken:
                notes.append("Vela takes, we do not: " + ", ".join(not_taken))
            if r["kept_kinds"]:
                notes.append("kept: " + ", ".join(r["kept_kinds"]))
            if "why" in vela:
                notes.append(f"Vela: {vela['why']}")
            if r.get("vela_note"):
                notes.append(r["vela_note"])
            if r.get("why"):
                notes.append(r["why"])
            print(f"{name:<28} {acc:<14} {'yes':>8} {r['npu']:>4} {r['kept']:>4} "
                  f"{_n(vela_cpu):>8} {_le(r['kept'], vela_cpu):>6} {superset:>9} "
                  f"{_n(r.get('arena')):>9} {_n(r.get('fast')):>8} "
                  f"{_n(sram):>9} {_n(vela_sram):>11} {_le(sram, vela_sram):>6} "
                  f"{_kib(vela.get('sram')):>12} "
                  f"{_n(r.get('dma')):>9} {_n(r.get('vela_dma')):>10} "
                  f"{_le(r.get('dma'), r.get('vela_dma')):>6} {_n(r.get('tflm')):>7} "
                  f"{_n(r.get('vela_tflm')):>11} {_le(r.get('tflm'), r.get('vela_tflm')):>6} "
                  f"{eq:>6} "
                  f"{r['seconds']:>9.1f}  {'; '.join(notes)}", flush=True)
    print("\narena: emulated (the functional model's high-water marks over every run) of the "
          "ethos-u operators' arena. SRAM: the SRAM the application touches, ours and Vela "
          "Size's file alike: on an Ethos-U55 (Shared_Sram) the whole TFLite Micro arena "
          "(TFLM below: the ethos-u operators' arena as the file lays it out plus what the "
          "operators kept on the CPU need, as their states live in SRAM too), on an Ethos-U65 "
          "(Dedicated_Sram) the fast scratch (ours emulated, Vela's its report). Vela rep: "
          "Vela's own \"Total SRAM used\", which leaves out its CPU operators. =TFLM: "
          "outputs equal TFLite Micro's on every input (random ones, plus the test images "
          "where the model has them; TFLite Micro up to the logits and its SOFTMAX "
          "arithmetic after, where its kernel aborts on the model's SOFTMAX). CPU: "
          "operators kept as TFLite operators; Vela CPU: "
          "Vela's summary's CPU operators. NPU>=Vela: every source operator Vela puts on the "
          "NPU is on ours (Vela's CPU operators matched to the source by kind and output "
          "shape, in order). DMA: bytes the streams' DMA commands moved in one inference, "
          "ours and Vela Size's .tflite, both run on the functional model (emulated). TFLM: "
          "the arena a TFLite Micro application gives the file in all (the ethos-u "
          "operators' arena as the file lays it out, plus the CPU operators' states and the "
          "largest CPU operator's tensors and scratch outside it, as TFLite Micro's "
          "allocator plans each; benchmarks/tflm_arena.py), ours and Vela Size's; on an "
          "Ethos-U65 that arena is DRAM and the fast scratch is apart.")
    return 0


def sram_touched(accelerator: str, ours: dict, vela: dict) -> tuple[int | None, int | None]:
    """The SRAM the application touches with our file and with Vela Size's, in bytes: on an
    Ethos-U55 (Shared_Sram: TFLite Micro's whole arena lies in SRAM) the whole arena, the
    operators kept on the CPU included, so a model whose operators Vela keeps on the CPU
    and ours runs on the NPU is compared whole; on an Ethos-U65 (Dedicated_Sram: the arena
    is DRAM) the fast scratch, Vela's from its report. None where unknown."""
    if accelerator.startswith("ethos-u65"):
        return ours.get("fast"), None if "sram" not in vela else round(vela["sram"] * 1024)
    return ours.get("tflm"), ours.get("vela_tflm")


def _le(ours, vela, slack=0) -> str:
    """"yes" when ``ours`` <= ``vela`` (+ ``slack``), "" when either is unknown."""
    if ours is None or vela is None:
        return ""
    return "yes" if ours <= vela + slack else "no"


def _kib(v) -> str:
    return "" if v is None else f"{v:.1f}"


def _n(v) -> str:
    return "" if v is None else f"{v:,}"


if __name__ == "__main__":
    sys.exit(main())
