"""tvm-ethos's planner and its command streams side by side with Arm's Vela 5.2.0.

Four tables, for every shipped model on ethos-u55-128, ethos-u55-256 and ethos-u65-256:

1. **Calibration** of the cost model, layer by layer, unstriped. Two comparisons:

   * *NPU*: Vela's per-layer "NPU" cycles with cascading disabled (``--disable-cascading
     --verbose-performance``) against ``device.perf.compute_cycles(part, whole output)``:
     the figure ``planner/perf/ethos_u.py`` models. The goal (median per-layer |error| <= 10 %,
     network total within 5 %) applies here.
   * *Layer*: Vela's per-layer "Op Cycles" (the max of NPU and the access cycles of every
     memory) against what the planner charges for the layer run whole (compute overlapped
     with the transfers on each port, plus the stripe overhead). Vela has no schedule that
     streams each layer's weights once: with cascading disabled it streams weights from
     their home but re-reads them for every OFM block; with ``--optimise Performance``
     (which cascades nothing here, checked from ``--verbose-schedule``) it copies them into
     SRAM buffers, prefetching an operation's weights under the previous one. Each is
     compared with the planner's equivalent: the cascading-disabled run with
     ``PlanGenerator.part_cost`` of one whole-output stripe, weights streamed once from their
     home ("flat"); the Performance run with the planner's fastest Proposal of unstriped
     one-Part Plans (``UNSTRIPED_LAYERS``), so cross-Plan weight prefetch is the only
     difference from the flat figure, each Part charged its own
     cycles less the part of its weight copy the previous Plan hid (``layer_charges``). The
     goal is judged on the pair whose dominant terms agree: Performance on the Ethos-U55
     (re-reading from a 1 B/cycle flash dominates the other run), cascading disabled on the
     Ethos-U65 (re-reads from DRAM are cheap, and the output stage waits on the weights'
     memory latency, DRAM's 500 cycles, as the planner assumes). See rfcs/0001 appendix,
     "Calibration against Vela".

   The Ethos-U65 runs use Vela's ``Ethos_U65_Client_Server`` system with the ``Shared_Sram``
   memory mode: feature maps in SRAM, weights in DRAM, as the planner's U65 device has them
   (Vela's default U65 memory mode keeps the arena in DRAM and uses the SRAM as a cache).

2. **Memory** in Vela's terms: the planner's layer-by-layer peak (``max_plan_size=1``) counted
   as Vela allocates (:func:`vela_terms_peak`), against Vela's "SRAM used" without cascading
   and with ``--optimise Performance``.

3. **Side by side**: Vela ``--optimise Size`` and ``--optimise Performance`` (default system
   config, run by :func:`planner.vela_run.vela_point`) against the planner's whole frontier:
   SRAM KiB and cycles, the planner's smallest memory at no more than Vela's cycles and its
   fewest cycles within Vela's memory, as ratios, and compile wall times.

4. **Streams** (``--streams``, printed alone): Vela's own ``.tflite`` (Size and Performance)
   and tvm-ethos's generated stream, each run on the functional Ethos-U model: SRAM touched,
   flash, DMA bytes, command counts, compile time and exactness against LiteRT
   (``benchmarks/stream_compare.py``), with issue 15's MobileNetV1-224 goal.

Prints the tables; ``--out DIR`` also writes ``calibration_layers.csv``, ``calibration.csv``,
``memory.csv``, ``vs_vela.csv`` and ``frontier.csv``. Skips with a message when Vela is not
installed.

    .venv/bin/python benchmarks/vs_vela.py [--models ../shared/models] [--out out/vs_vela]
    .venv/bin/python benchmarks/vs_vela.py --streams [--only resnet8_cifar]
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from planner.devices import get_device  # noqa: E402
from planner.pareto import frontier  # noqa: E402
from planner.proposals import ProposalSearch  # noqa: E402
from planner.stripes import StripeConfig  # noqa: E402
from planner.tflite import load_tflite  # noqa: E402
from planner.vela_compare import (  # noqa: E402
    GOAL_MEDIAN,
    GOAL_TOTAL,
    LayerRow,
    calibrate,
    calibration_table,
    layer_by_layer,
    layer_table,
    match_layers,
    run_vela_layers,
    vela_terms_peak,
)
from planner.vela_run import VELA_MODES, vela_available, vela_point  # noqa: E402
from tests.helpers.models import MODELS_DIR  # noqa: E402

MODELS = ("mobilenet_v1_0.25_96", "ds_cnn_kws", "resnet8_cifar", "mobilenet_v1_1.0_224")
SMALL_MODELS = MODELS[:3]
CONFIGS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
DEFAULT_MODELS_DIR = str(MODELS_DIR)
# ---------------------------------------------------------------------------------------------
# Side by side


@dataclass
class SideBySide:
    model: str
    config: str
    vela: dict                       # {"Size": {...}, "Performance": {...}} from vela_point
    frontier: list[tuple[int, int]]  # the planner's, memory in Vela's terms
    raw_frontier: list[tuple[int, int]]
    planner_seconds: float

    def mem_at_cycles(self, cycles: int) -> int | None:
        """The planner's least memory at no more than ``cycles``."""
        fits = [m for m, c in self.frontier if c <= cycles]
        return min(fits) if fits else None

    def cycles_at_mem(self, memory: int) -> int | None:
        """The planner's fewest cycles within ``memory`` bytes."""
        fits = [c for m, c in self.frontier if m <= memory]
        return min(fits) if fits else None


def side_by_side(model_path: str, config: str, io_region: str = "sram") -> SideBySide:
    name = os.path.splitext(os.path.basename(model_path))[0]
    vela = {mode: vela_point(model_path, config, mode) for mode in VELA_MODES}
    t0 = time.perf_counter()  # the planner's compile: read the file, search the frontier
    graph = load_tflite(model_path)
    device = get_device(config, io_region=io_region)
    search = ProposalSearch(graph, device)
    seconds = time.perf_counter() - t0
    raw = list(search.frontier)
    recount = [(vela_terms_peak(graph, device, search.proposal(k)), c)
               for k, (_, c) in enumerate(raw)]
    return SideBySide(name, config, vela, frontier(recount), raw, seconds)


# ---------------------------------------------------------------------------------------------
# Tables


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2%}"


def _kib(b: int | None) -> str:
    return "-" if b is None else f"{b / 1024:.1f}"


def _ratio(a: int | None, b: int | None) -> str:
    return "-" if a is None or not b else f"{a / b:.3f}"


def memory_table(rows: list[dict]) -> str:
    head = (f"{'model':<22} {'config':<14} {'planner':>8} {'Vela terms':>10} "
            f"{'Vela no-casc':>12} {'Vela Perf':>9}   (KiB, layer by layer)")
    out = [head, "-" * len(head)]
    for r in rows:
        out.append(f"{r['model']:<22} {r['config']:<14} {_kib(r['planner_bytes']):>8} "
                   f"{_kib(r['vela_terms_bytes']):>10} {_kib(r['vela_no_cascade_bytes']):>12} "
                   f"{_kib(r['vela_performance_bytes']):>9}")
    return "\n".join(out)


def side_rows(s: SideBySide) -> list[dict]:
    rows = []
    for mode, v in s.vela.items():
        row = {"model": s.model, "config": s.config, "vela_mode": mode}
        if "error" in v:
            row["error"] = v["error"]
            rows.append(row)
            continue
        mem, cyc = v["sram_bytes"], v["cycles"]
        m_at, c_at = s.mem_at_cycles(cyc), s.cycles_at_mem(mem)
        row.update(vela_sram_bytes=mem, vela_cycles=cyc, vela_seconds=round(v["seconds"], 3),
                   planner_min_bytes=s.frontier[0][0], planner_min_cycles=s.frontier[0][1],
                   planner_fastest_bytes=s.frontier[-1][0],
                   planner_fastest_cycles=s.frontier[-1][1],
                   planner_bytes_at_vela_cycles=m_at,
                   mem_ratio=None if m_at is None else m_at / mem,
                   planner_cycles_at_vela_bytes=c_at,
                   cycles_ratio=None if c_at is None else c_at / cyc,
                   planner_seconds=round(s.planner_seconds, 3), frontier_points=len(s.frontier))
        rows.append(row)
    return rows


def side_table(rows: list[dict]) -> str:
    head = (f"{'model':<22} {'config':<14} {'Vela':<5} {'KiB':>7} {'cycles':>11} {'s':>5} | "
            f"{'mem@cyc':>8} {'ratio':>6} | {'cyc@mem':>11} {'ratio':>6} | {'planner s':>9}")
    out = [head, "-" * len(head)]
    for r in rows:
        if "error" in r:
            out.append(f"{r['model']:<22} {r['config']:<14} {r['vela_mode'][:5]:<5} "
                       f"vela failed: {r['error']}")
            continue
        out.append(
            f"{r['model']:<22} {r['config']:<14} {r['vela_mode'][:5]:<5} "
            f"{_kib(r['vela_sram_bytes']):>7} {r['vela_cycles']:>11,} {r['vela_seconds']:>5.2f} | "
            f"{_kib(r['planner_bytes_at_vela_cycles']):>8} "
            f"{_ratio(r['planner_bytes_at_vela_cycles'], r['vela_sram_bytes']):>6} | "
            f"{(r['planner_cycles_at_vela_bytes'] or 0):>11,} "
            f"{_ratio(r['planner_cycles_at_vela_bytes'], r['vela_cycles']):>6} | "
            f"{r['planner_seconds']:>9.2f}")
    return "\n".join(out)


def goal_report(s: SideBySide) -> list[str]:
    """Issue 7's goal on MobileNetV1-224 / ethos-u55-128."""
    size, perf = s.vela.get("Size", {}), s.vela.get("Performance", {})
    if "error" in size or "error" in perf or not size or not perf:
        return ["goal: Vela runs failed, not evaluated"]
    cap = 0.68 * size["sram_bytes"]
    hits = [(m, c) for m, c in s.frontier if m <= cap and c <= size["cycles"]]
    best = min((c for m, c in s.frontier if m <= cap), default=None)
    out = [f"goal 1: a point with <= 68% of Vela Size SRAM ({_kib(int(cap))} KiB) at <= "
           f"{size['cycles']:,} cycles: " + (
               f"MET by {_kib(hits[0][0])} KiB / {hits[0][1]:,} cycles" if hits else
               f"NOT MET (fewest cycles within {_kib(int(cap))} KiB: "
               f"{'none' if best is None else f'{best:,}'}; least memory at <= "
               f"{size['cycles']:,} cycles: {_kib(s.mem_at_cycles(size['cycles']))} KiB)")]
    c_at = s.cycles_at_mem(perf["sram_bytes"])
    ok = c_at is not None and c_at <= perf["cycles"]
    out.append(f"goal 2: within Vela Performance SRAM ({_kib(perf['sram_bytes'])} KiB) cycles "
               f"<= {perf['cycles']:,}: {'MET' if ok else 'NOT MET'} "
               f"({'none fits' if c_at is None else f'{c_at:,}'})")
    return out


def goal_breakdown(model_path: str, config: str = "ethos-u55-128", share: float = 0.68
                   ) -> str:
    """Where the cycles go (issue 7, goal 1): the planner's fastest Proposal within ``share``
    of Vela ``--optimise Size``'s SRAM (in Vela's terms), per Part and term, beside the same
    Part unstriped and Vela's Size figures for the layer (thousands of cycles).

    *steady*: the stripes' NPU cycles less their fill and drain; *fill/drain*: paid once per
    Part of several stripes; *overhead*: ``stripe_overhead_cycles`` per NPU operation (a
    staged convolution's stripe runs one per weight slice: ``operations_per_stripe``);
    *transfers*: what the memory ports add where they, not the NPU, decide a stripe, plus
    one-off weight copies;
    *recompute*: the part of *steady* that recomputes halos (stripes' elements beyond the
    whole output's, at the whole layer's rate)."""
    graph = load_tflite(model_path)
    device = get_device(config)
    size = run_vela_layers(model_path, config, "--optimise", "Size")
    vela = {k: (sum(int(float(r["NPU"])) for r in v), sum(int(float(r["Op Cycles"])) for r in v))
            for k, v in match_layers(graph, size.layers).items()}
    search = ProposalSearch(graph, device, workers=1)
    cap = share * size.sram_bytes
    fits = [(c, k) for k, (_, c) in enumerate(search.frontier)
            if vela_terms_peak(graph, device, search.proposal(k)) <= cap]
    if not fits:
        return f"breakdown: no Proposal within {cap / 1024:.1f} KiB"
    prop = search.proposal(min(fits)[1])
    perf, gen, parts = device.perf, search.gen, {p.name: p for p in graph.parts}
    k = lambda x: f"{x / 1000:,.0f}"  # noqa: E731
    out = [f"{os.path.basename(model_path)} on {config}: {prop.cycles:,} cycles, "
           f"{vela_terms_peak(graph, device, prop) / 1024:.2f} KiB in Vela's terms "
           f"(cap {cap / 1024:.1f} KiB); Vela Size {size.cycles:,} cycles, "
           f"{size.sram_bytes / 1024:.1f} KiB",
           f"{'part':<24} {'stripes':>7} {'charged':>8} {'steady':>7} {'fill':>5} {'ovh':>5} "
           f"{'transf':>7} {'recomp':>7} {'whole':>7} {'Vela NPU':>9} {'Vela Op':>8}"]
    for plan in prop.plans:
        for ps in plan.part_schedules:
            p = parts[ps.part]
            shapes = [(sh, n) for sh, n in ps.stripe.count_stripes().items() if 0 not in sh]
            many = ps.stripe.total_stripes > 1
            steady = sum(n * (perf.compute_cycles(p, sh) - perf.fill_drain_cycles(p, sh))
                         for sh, n in shapes)
            fill = (max(perf.fill_drain_cycles(p, sh) for sh, _ in shapes) if many else
                    sum(perf.fill_drain_cycles(p, sh) for sh, _ in shapes))
            ops = 1 if p.name in plan.spec.weights else \
                gen.operations_per_stripe(p, gen.weight_stage_bytes(p, ps.stripe))
            ovh = sum(n for _, n in shapes) * ops * perf.stripe_overhead_cycles(p)
            elems = sum(n * math.prod(sh) for sh, n in shapes) / math.prod(p.output.shape)
            recomp = round((elems - 1) * perf.compute_cycles(p, p.output.shape))
            whole = gen.part_cost(p, StripeConfig.whole(p.output.shape), "flash")
            vn, vo = vela.get(p.name, (0, 0))
            out.append(f"{p.name[:24]:<24} {ps.stripe.total_stripes:>7} {k(ps.cycles):>8} "
                       f"{k(steady):>7} {k(fill):>5} {k(ovh):>5} "
                       f"{k(ps.cycles - steady - fill - ovh):>7} {k(recomp):>7} {k(whole):>7} "
                       f"{k(vn):>9} {k(vo):>8}")
    return "\n".join(out)


def _write_csv(path: str, rows: list[dict]) -> None:
    if not rows:
        return
    keys: list[str] = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def streams_main(args, models: list[str], configs: list[str]) -> int:
    """Table 4: Vela's streams and tvm-ethos's, run on the functional model."""
    from benchmarks.stream_compare import compare, goal_lines, stream_table

    rows = [r for m in models for c in configs
            for r in compare(os.path.join(args.models, m + ".tflite"), c, args.stream_budget)]
    print("Command streams side by side, run on the functional Ethos-U model "
          "(benchmarks/stream_compare.py says what each column is)")
    print(stream_table(rows))
    goal = goal_lines(rows)
    if goal:
        print("\nMobileNetV1-224 on ethos-u55-128 (issue 15):")
        for line in goal:
            print("  " + line)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        _write_csv(os.path.join(args.out, "streams.csv"), [r.__dict__ for r in rows])
        print(f"\nCSV written to {args.out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default=DEFAULT_MODELS_DIR, help="folder of the .tflite files")
    ap.add_argument("--only", default=",".join(MODELS), help="model names, comma separated")
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--io-region", default="sram", choices=("sram", "dram"))
    ap.add_argument("--out", help="write the CSVs to this folder")
    ap.add_argument("--layers", action="store_true", help="print every layer's calibration")
    ap.add_argument("--skip-calibration", action="store_true")
    ap.add_argument("--breakdown", action="store_true",
                    help="only print where MobileNetV1-224's cycles go within 68%% of Vela "
                         "Size's SRAM on ethos-u55-128, per Part and term")
    ap.add_argument("--streams", action="store_true",
                    help="only print the command streams side by side (table 4)")
    ap.add_argument("--stream-budget", default="300KiB",
                    help="with --streams, also plan tvm-ethos within this budget where its "
                         "default stream touches more (issue 15's goal: 300KiB); 'none' to "
                         "skip")
    args = ap.parse_args(argv)
    if not vela_available():
        print("vs_vela: skipped: Vela is not installed (pip install ethos-u-vela==5.2.0)")
        return 0
    if args.breakdown:
        print(goal_breakdown(os.path.join(args.models, "mobilenet_v1_1.0_224.tflite")))
        return 0
    models = [m for m in args.only.split(",") if m]
    configs = [c for c in args.configs.split(",") if c]
    missing = [m for m in models if not os.path.exists(os.path.join(args.models, m + ".tflite"))]
    if missing:
        print(f"vs_vela: skipped: models not found in {args.models}: {missing}")
        return 0
    if args.streams:
        if str(args.stream_budget).lower() == "none":
            args.stream_budget = None
        return streams_main(args, models, configs)
    cals, mem_rows, sides, layer_csv = [], [], [], []
    for model in models:
        path = os.path.join(args.models, model + ".tflite")
        graph = load_tflite(path)
        for config in configs:
            if not args.skip_calibration:
                cal = calibrate(path, config, graph)
                cals.append(cal)
                if args.layers:
                    print(layer_table(cal) + "\n")
                for r in cal.rows:
                    layer_csv.append({
                        "model": model, "config": config, "part": r.part, "kind": r.kind,
                        "vela_ops": r.vela_ops, "vela_npu": r.vela_npu, "model_npu": r.model_npu,
                        "npu_error": LayerRow.err(r.vela_npu, r.model_npu),
                        "vela_op_cycles_performance": r.vela_layer,
                        "vela_op_cycles_no_cascade": r.vela_layer_flat,
                        "planner_part_cost": r.planner_layer,
                        "planner_layer_by_layer": r.planner_layer_buffered,
                        "layer_error_vs_performance": LayerRow.err(r.vela_layer,
                                                                   r.planner_layer_buffered),
                        "layer_error_vs_no_cascade": LayerRow.err(r.vela_layer_flat,
                                                                  r.planner_layer),
                        **{f"vela_performance_{k.replace(' ', '_').lower()}": v
                           for k, v in r.vela_access.items()}})
                device = get_device(config)
                lbl = layer_by_layer(graph, device)
                mem_rows.append({
                    "model": model, "config": config, "planner_bytes": lbl.memory_bytes,
                    "vela_terms_bytes": vela_terms_peak(graph, device, lbl),
                    "vela_no_cascade_bytes": cal.vela_sram_no_cascade,
                    "vela_performance_bytes": cal.vela_sram_performance})
            sides.append(side_by_side(path, config, args.io_region))
    if cals:
        print("Calibration, per layer, unstriped. NPU: Vela's NPU cycles (cascading disabled) "
              "vs compute_cycles.\nPerf / flat: Vela's Op Cycles of its Performance / "
              "cascading-disabled schedule vs the planner's part_cost of one stripe.\n"
              f"Goal: median |error| <= {GOAL_MEDIAN:.0%} and total within {GOAL_TOTAL:.0%}; "
              "the layer goal is judged against the schedule named.")
        print(calibration_table(cals) + "\n")
        print("Memory in Vela's terms: layer-by-layer peak (NHCWB16 channels to 16, "
              "16-byte alignment)")
        print(memory_table(mem_rows) + "\n")
    side = [r for s in sides for r in side_rows(s)]
    print(f"Side by side (planner io_region={args.io_region}; planner memory in Vela's terms; "
          "mem@cyc: its least KiB at <= Vela's cycles;\ncyc@mem: its fewest cycles within "
          "Vela's KiB; ratios planner/Vela; Vela with its default system config)")
    print(side_table(side))
    for s in sides:
        if s.model == "mobilenet_v1_1.0_224" and s.config == "ethos-u55-128":
            print("\nMobileNetV1-224 on ethos-u55-128:")
            for line in goal_report(s):
                print("  " + line)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        _write_csv(os.path.join(args.out, "calibration_layers.csv"), layer_csv)
        _write_csv(os.path.join(args.out, "calibration.csv"), [
            {"model": c.model, "config": c.config, "layers": c.npu.layers,
             "npu_median": c.npu.median, "npu_max": c.npu.worst,
             "npu_total_vela": c.npu.vela_total, "npu_total_model": c.npu.ours_total,
             "npu_total_error": c.npu.total_error,
             **{f"layer_{tag}_{k}": v for tag, st in (("performance", c.layer_perf),
                                                      ("no_cascade", c.layer_flat))
                for k, v in (("median", st.median), ("max", st.worst),
                             ("total_vela", st.vela_total), ("total_planner", st.ours_total),
                             ("total_error", st.total_error))},
             "layer_goal_reference": c.layer_reference,
             "npu_goal_met": c.npu.meets_goal, "layer_goal_met": c.layer.meets_goal,
             "vela_striped_ops": len(c.striped)}
            for c in cals])
        _write_csv(os.path.join(args.out, "memory.csv"), mem_rows)
        _write_csv(os.path.join(args.out, "vs_vela.csv"), side)
        _write_csv(os.path.join(args.out, "frontier.csv"), [
            {"model": s.model, "config": s.config, "io_region": args.io_region,
             "memory_bytes_vela_terms": m, "cycles": c}
            for s in sides for m, c in s.frontier])
        print(f"\nCSV written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
