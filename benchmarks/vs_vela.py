"""tvm-ethos's planner side by side with Arm's Vela 5.2.0 (issue 7).

Three tables, for every shipped model on ethos-u55-128, ethos-u55-256 and ethos-u65-256:

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
   config, run by :func:`tvm_ethos.sweep.vela_task`) against the planner's whole frontier:
   SRAM KiB and cycles, the planner's smallest memory at no more than Vela's cycles and its
   fewest cycles within Vela's memory, as ratios, and compile wall times.

Prints the tables; ``--out DIR`` also writes ``calibration_layers.csv``, ``calibration.csv``,
``memory.csv``, ``vs_vela.csv`` and ``frontier.csv``. Skips with a message when Vela is not
installed.

    .venv/bin/python benchmarks/vs_vela.py [--models ../shared/models] [--out out/vs_vela]
"""
from __future__ import annotations

import argparse
import csv
import glob
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from planner.devices import get_device  # noqa: E402
from planner.graph import PlannerGraph  # noqa: E402
from planner.options import PlannerOptions  # noqa: E402
from planner.plans import PlanGenerator  # noqa: E402
from planner.proposals import Proposal, ProposalSearch, live_boundary_bytes  # noqa: E402
from planner.stripes import StripeConfig  # noqa: E402
from planner.tflite import load_tflite  # noqa: E402
from tvm_ethos.sweep import vela_available, vela_task  # noqa: E402

MODELS = ("mobilenet_v1_0.25_96", "ds_cnn_kws", "resnet8_cifar", "mobilenet_v1_1.0_224")
SMALL_MODELS = MODELS[:3]
CONFIGS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
DEFAULT_MODELS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                  "shared", "models")
#: Vela options giving the planner's memory layout on the Ethos-U65 (see the module doc).
U65_SHARED_SRAM = ("--config", "Arm/vela.ini", "--system-config", "Ethos_U65_Client_Server",
                   "--memory-mode", "Shared_Sram")
#: Calibration goals (issue 7): median per-layer |error| and network-total |error|.
GOAL_MEDIAN, GOAL_TOTAL = 0.10, 0.05
#: The planner's options where it is compared with Vela: Vela pre-buffers the next operation's
#: weights, so the planner's cross-Plan weight prefetch (a study setting) is on.
VELA_LIKE = PlannerOptions(weight_prefetch=True)
#: The planner's options for Vela's layer-by-layer runs: one Part per Plan, run whole.
UNSTRIPED_LAYERS = PlannerOptions(max_plan_size=1, stripe_factors=1, multi_dimensional=False,
                                  weight_prefetch=True)
#: Vela's allocation granularity: every tensor starts on a 16-byte boundary.
VELA_ALIGNMENT = 16
#: NHCWB16 stores channels in bricks of 16 (Vela's storage_rounding_quantums).
BRICK_DEPTH = 16


def vela_flags(config: str) -> tuple[str, ...]:
    """System/memory-mode options for a calibration run of ``config``."""
    return U65_SHARED_SRAM if config.startswith("ethos-u65") else ()


# ---------------------------------------------------------------------------------------------
# Running Vela for its per-layer figures


@dataclass
class VelaRun:
    """What one Vela compilation reported: per-layer CSV rows (operators with cycles only),
    the summary CSV row, the ops Vela striped (from ``--verbose-schedule``), wall time."""
    layers: list[dict]
    summary: dict
    striped_ops: list[tuple[str, tuple[int, ...], tuple[int, ...]]]
    weight_buffers: list[int]
    seconds: float

    @property
    def sram_bytes(self) -> int:
        return int(round(float(self.summary["sram_memory_used"]) * 1024))

    @property
    def cycles(self) -> int:
        return int(float(self.summary["cycles_total"]))


def run_vela_layers(model: str, config: str, *flags: str, work_dir: str | None = None,
                    timeout: float = 300.0) -> VelaRun:
    """Run Vela with ``--verbose-performance --verbose-schedule`` plus ``flags`` and read its
    per-layer and summary CSVs. Raises RuntimeError with Vela's last line on failure."""
    with tempfile.TemporaryDirectory(prefix="vs-vela-", dir=work_dir) as out:
        cmd = [sys.executable, "-m", "ethosu.vela", os.path.abspath(model),
               "--accelerator-config", config, "--verbose-performance", "--verbose-schedule",
               *flags, "--output-dir", out]
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=out)
        seconds = time.perf_counter() - t0
        layer_csv = glob.glob(os.path.join(out, "*_per-layer.csv"))
        summary_csv = glob.glob(os.path.join(out, "*_summary_*.csv"))
        if proc.returncode != 0 or not layer_csv or not summary_csv:
            tail = (proc.stderr or proc.stdout).strip().splitlines()
            raise RuntimeError(f"vela {os.path.basename(model)} {config} {' '.join(flags)}: "
                               f"exit {proc.returncode}: {tail[-1] if tail else 'no output'}")
        with open(layer_csv[0], newline="") as f:
            layers = [r for r in csv.DictReader(f)
                      if float(r["Op Cycles"]) > 0 or float(r["NPU"]) > 0]
        with open(summary_csv[0], newline="") as f:
            summary = next(csv.DictReader(f))
    buffers = [int(b) for b in re.findall(r"Weight buffer = (\d+) bytes", proc.stdout)]
    return VelaRun(layers, summary, _striped_ops(proc.stdout), buffers, seconds)


_OP_LINE = re.compile(r"^\s*\d+: Operation (\w+)\s+- OFM ([\d, ]+)")
_STRIPE_LINE = re.compile(r"^\s*OFM Stripe\s*=\s*\[([\d, ]+)\]")


def _striped_ops(schedule: str) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """(operation, OFM, OFM stripe) of the final schedule's operations whose OFM stripe is
    smaller than their OFM, in schedule order."""
    blocks = schedule.split("Schedule: ")
    last = blocks[-1] if len(blocks) > 1 else ""
    out, op = [], None
    for line in last.splitlines():
        m = _OP_LINE.match(line)
        if m:
            op = (m.group(1), tuple(int(v) for v in m.group(2).split(",")))
            continue
        m = _STRIPE_LINE.match(line)
        if m and op is not None:
            stripe = tuple(int(v) for v in m.group(1).split(","))
            if stripe != op[1]:
                out.append((op[0], op[1], stripe))
            op = None
    return out


def match_layers(graph: PlannerGraph, layers: list[dict]) -> dict[str, list[dict]]:
    """Vela's per-layer rows grouped by the planner Part that computes the same operator.

    Vela names each row after the tensor it writes; the last NPU operation of a TFLite
    operator writes that operator's output, which is the Part's output tensor (the TFLite
    converter keeps tensor names). Rows writing intermediates (MEAN's partial sums, the 28
    passes of SOFTMAX) belong to the next row that names a Part's output."""
    by_output = {p.output.name: p.name for p in graph.parts}
    out: dict[str, list[dict]] = {}
    pending: list[dict] = []
    for row in layers:
        pending.append(row)
        part = by_output.get(row["Name"])
        if part is not None:
            out.setdefault(part, []).extend(pending)
            pending = []
    if pending:
        raise ValueError(f"Vela rows matching no Part output: {[r['Name'] for r in pending]}")
    return out


# ---------------------------------------------------------------------------------------------
# Calibration


@dataclass
class LayerRow:
    part: str
    kind: str
    vela_ops: str
    vela_npu: int
    model_npu: int
    vela_layer: int               # Op Cycles, Performance schedule
    vela_layer_flat: int          # Op Cycles, cascading disabled
    planner_layer: int            # part_cost, one whole stripe, weights streamed once
    planner_layer_buffered: int   # charged in the fastest unstriped layer-by-layer Proposal
    vela_access: dict = field(default_factory=dict)

    @staticmethod
    def err(ref: int, got: int) -> float | None:
        return None if ref == 0 else (got - ref) / ref


@dataclass
class Stats:
    layers: int
    median: float
    worst: float
    vela_total: int
    ours_total: int

    @property
    def total_error(self) -> float:
        return (self.ours_total - self.vela_total) / self.vela_total

    @property
    def meets_goal(self) -> bool:
        return self.median <= GOAL_MEDIAN and abs(self.total_error) <= GOAL_TOTAL


def _stats(pairs: list[tuple[int, int]]) -> Stats:
    """Per-layer errors over layers Vela gives cycles to; totals over every Part (a Part
    Vela makes free, such as a reshape, still counts what the planner charges for it)."""
    errs = [abs(b - a) / a for a, b in pairs if a > 0]
    return Stats(len(errs), statistics.median(errs) if errs else 0.0, max(errs, default=0.0),
                 sum(a for a, _ in pairs), sum(b for _, b in pairs))


@dataclass
class Calibration:
    model: str
    config: str
    rows: list[LayerRow]
    npu: Stats
    layer_perf: Stats             # against the Performance schedule
    layer_flat: Stats             # against the cascading-disabled schedule
    striped: list[tuple]          # ops Vela striped in its Performance run (none expected)
    vela_sram_no_cascade: int
    vela_sram_performance: int
    weight_buffers: list[int]     # Vela's weight buffers, Performance run, in op order

    @property
    def layer_reference(self) -> str:
        """The Vela schedule the layer comparison is judged on (see the module doc)."""
        return "no-cascade" if self.config.startswith("ethos-u65") else "Performance"

    @property
    def layer(self) -> Stats:
        return self.layer_flat if self.layer_reference == "no-cascade" else self.layer_perf


def calibrate(model_path: str, config: str, graph: PlannerGraph | None = None,
              work_dir: str | None = None) -> Calibration:
    """Compare every Part of ``model_path`` with Vela's per-layer figures on ``config``."""
    graph = graph or load_tflite(model_path)
    flags = vela_flags(config)
    flat = run_vela_layers(model_path, config, "--disable-cascading", *flags,
                           work_dir=work_dir)
    perf = run_vela_layers(model_path, config, "--optimise", "Performance", *flags,
                           work_dir=work_dir)
    npu_rows, op_rows = match_layers(graph, flat.layers), match_layers(graph, perf.layers)
    device = get_device(config)
    gen = PlanGenerator(graph, device, VELA_LIKE)
    buffered = layer_charges(
        ProposalSearch(graph, device, UNSTRIPED_LAYERS, workers=1).select(None))
    rows = []
    for part in graph.topological_parts():
        a, b = npu_rows.get(part.name, []), op_rows.get(part.name, [])
        whole = StripeConfig.whole(part.output.shape)
        access = {k: sum(int(float(r[k])) for r in b)
                  for k in ("NPU", "SRAM AC", "DRAM AC", "OffFlash AC")}
        rows.append(LayerRow(
            part.name, part.kind, "+".join(r["NNG Operator"] for r in a),
            sum(int(float(r["NPU"])) for r in a),
            device.perf.compute_cycles(part, part.output.shape),
            sum(int(float(r["Op Cycles"])) for r in b),
            sum(int(float(r["Op Cycles"])) for r in a),
            gen.part_cost(part, whole, "flash"), buffered[part.name], access))
    name = os.path.splitext(os.path.basename(model_path))[0]
    return Calibration(name, config, rows,
                       _stats([(r.vela_npu, r.model_npu) for r in rows]),
                       _stats([(r.vela_layer, r.planner_layer_buffered) for r in rows]),
                       _stats([(r.vela_layer_flat, r.planner_layer) for r in rows]),
                       perf.striped_ops, flat.sram_bytes, perf.sram_bytes,
                       perf.weight_buffers)


# ---------------------------------------------------------------------------------------------
# Memory in Vela's terms


def nhwc_tensors(graph: PlannerGraph) -> set[str]:
    """Tensors laid out NHWC (Part attrs set by the TFLite converter); the rest are NHCWB16."""
    out = set()
    for p in graph.parts:
        if p.attr("ofm_format") == "NHWC":
            out.add(p.output.name)
        for key, k in (("ifm_format", 0), ("ifm2_format", 1)):
            if p.attr(key) == "NHWC" and k < len(p.inputs):
                out.add(p.inputs[k].name)
    return out


def vela_bytes(tensor, shape, nhwc: set[str], align: int = VELA_ALIGNMENT,
               brick: int = BRICK_DEPTH) -> int:
    """Bytes Vela allocates for a ``shape`` block of ``tensor``: NHCWB16 feature maps have
    their channels rounded up to 16, and every allocation starts on a 16-byte boundary."""
    shape = tuple(int(s) for s in shape)
    if not tensor.is_constant and len(shape) == 4 and tensor.name not in nhwc:
        shape = shape[:3] + (-(-shape[3] // brick) * brick,)
    raw = math.ceil(math.prod(shape) * tensor.itemsize * tensor.compression_ratio)
    return -(-raw // align) * align


def vela_terms_peak(graph: PlannerGraph, device, proposal: Proposal,
                    align: int = VELA_ALIGNMENT, brick: int = BRICK_DEPTH,
                    weight_staging: bool = True) -> int:
    """Peak SRAM of ``proposal`` counted as Vela counts "SRAM used".

    The same live set as the planner's (``proposals.live_boundary_bytes``: every feature map
    in the feature-map region from its producer's Plan to its last reader's, network inputs and
    outputs included when they live there, plus each Plan's buffers: cascade intermediates,
    staging rings, weight copies), with each allocation sized as Vela sizes it
    (:func:`vela_bytes`). ``align=1, brick=1`` gives the planner's own figure;
    ``weight_staging=False`` leaves out the weights each Plan holds in SRAM (its weight
    staging double buffer and weights prefetched for it or for the next Plan): Vela with
    cascading off reads weights straight from flash and allocates none."""
    nhwc = nhwc_tensors(graph)

    def size(t, shape=None) -> int:
        return vela_bytes(t, t.shape if shape is None else shape, nhwc, align, brick)

    # the planner's own live set, each tensor sized as Vela sizes it
    base, own_bytes = live_boundary_bytes(graph, device, size)
    tensors = {t.name: t for t in graph.inputs}
    for p in graph.parts:
        tensors[p.output.name] = p.output
        for t in p.inputs:
            tensors.setdefault(t.name, t)
    peak = 0
    for plan in proposal.plans:
        live, own = base[plan.start], own_bytes[plan.end]
        buffers = 0
        for tc in plan.tensor_configs:
            if tc.tensor == plan.output and tc.copy_region == tc.home_region:
                continue  # the Plan's output in its home: counted as ``own``
            t = tensors[tc.tensor]
            if not weight_staging and t.is_constant:
                continue
            raw = t.region_bytes(tc.buffer_shape)
            copies = round(tc.buffer_bytes / raw) if raw else 1
            buffers += copies * size(t, tc.buffer_shape)
        peak = max(peak, live + own + buffers)
    return peak


def layer_by_layer(graph: PlannerGraph, device) -> Proposal:
    """The planner's schedule without cascading: one Part per Plan, fastest."""
    return ProposalSearch(graph, device, PlannerOptions(max_plan_size=1, weight_prefetch=True),
                          workers=1).select(None)


def layer_charges(proposal: Proposal) -> dict[str, int]:
    """Cycles per Part as a Proposal charges them, a prefetch credit moved from the Plan
    that took it (``Plan.prefetch_credit``, the idle cycles that hid the copy) to the Part
    whose weights it copied, as Vela reports a pre-buffered copy on the receiving operation.
    The values add up to ``proposal.cycles`` (a Plan's cycles are its schedules' less its
    credit)."""
    out: dict[str, int] = {}
    credit = 0
    for plan in proposal.plans:
        for k, ps in enumerate(plan.part_schedules):
            out[ps.part] = ps.cycles - (credit if k == 0 else 0)
        credit = plan.prefetch_credit
    return out


# ---------------------------------------------------------------------------------------------
# Side by side


def _pareto(points: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for m, c in sorted(points):
        if not out or c < out[-1][1]:
            out.append((m, c))
    return out


@dataclass
class SideBySide:
    model: str
    config: str
    vela: dict                       # {"Size": {...}, "Performance": {...}} from vela_task
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
    vela = {mode: vela_task(model_path, config, mode) for mode in ("Size", "Performance")}
    t0 = time.perf_counter()  # the planner's compile: read the file, search the frontier
    graph = load_tflite(model_path)
    device = get_device(config, io_region=io_region)
    search = ProposalSearch(graph, device)
    seconds = time.perf_counter() - t0
    raw = list(search.frontier)
    recount = [(vela_terms_peak(graph, device, search.proposal(k)), c)
               for k, (_, c) in enumerate(raw)]
    return SideBySide(name, config, vela, _pareto(recount), raw, seconds)


# ---------------------------------------------------------------------------------------------
# Tables


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2%}"


def _kib(b: int | None) -> str:
    return "-" if b is None else f"{b / 1024:.1f}"


def _ratio(a: int | None, b: int | None) -> str:
    return "-" if a is None or not b else f"{a / b:.3f}"


def calibration_table(cals: list[Calibration]) -> str:
    def st(x: Stats) -> str:
        return f"{x.median:>7.2%} {x.worst:>8.2%} {x.total_error:>+8.2%}"

    head = (f"{'model':<22} {'config':<14} {'n':>3} | {'NPU med':>7} {'max':>8} {'total':>8} | "
            f"{'Perf med':>7} {'max':>8} {'total':>8} | {'flat med':>7} {'max':>8} "
            f"{'total':>8} | goal NPU / layer")
    out = [head, "-" * len(head)]
    for c in cals:
        perf = "  (Vela cascaded: not comparable)  " if c.striped else st(c.layer_perf)
        layer_ok = c.layer.meets_goal and not (c.striped and c.layer_reference == "Performance")
        out.append(f"{c.model:<22} {c.config:<14} {c.npu.layers:>3} | {st(c.npu)} | {perf} | "
                   f"{st(c.layer_flat)} | {'met' if c.npu.meets_goal else 'MISSED'} / "
                   f"{'met' if layer_ok else 'missed'} (vs {c.layer_reference})")
    return "\n".join(out)


def layer_table(c: Calibration) -> str:
    head = (f"{c.model} on {c.config} (Op Cycles and access cycles: Vela's Performance run)\n"
            f"{'part':<24} {'Vela NPU':>9} {'model':>9} {'err':>8} | {'Vela op':>9} "
            f"{'flat op':>9} {'planner':>9} {'err':>8} | {'SRAM AC':>8} {'DRAM AC':>8} "
            f"{'flash AC':>8}\n(planner: its layer-by-layer charge, prefetch included, against "
            f"the Performance run; part_cost, weights streamed once, against the flat run)")
    out = [head]
    for r in c.rows:
        a = r.vela_access
        flat = c.layer_reference == "no-cascade"
        ref = r.vela_layer_flat if flat else r.vela_layer
        ours = r.planner_layer if flat else r.planner_layer_buffered
        out.append(f"{r.part[:24]:<24} {r.vela_npu:>9} {r.model_npu:>9} "
                   f"{_pct(LayerRow.err(r.vela_npu, r.model_npu)):>8} | {r.vela_layer:>9} "
                   f"{r.vela_layer_flat:>9} {ours:>9} "
                   f"{_pct(LayerRow.err(ref, ours)):>8} | {a['SRAM AC']:>8} "
                   f"{a['DRAM AC']:>8} {a['OffFlash AC']:>8}")
    out.append(f"{'total':<24} {c.npu.vela_total:>9} {c.npu.ours_total:>9} "
               f"{_pct(c.npu.total_error):>8} | {c.layer_perf.vela_total:>9} "
               f"{c.layer_flat.vela_total:>9} {c.layer.ours_total:>9} "
               f"{_pct(c.layer.total_error):>8}")
    return "\n".join(out)


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
    Part of several stripes; *overhead*: ``stripe_overhead_cycles``; *transfers*: what the
    memory ports add where they, not the NPU, decide a stripe, plus one-off weight copies;
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
            ovh = sum(n for _, n in shapes) * perf.stripe_overhead_cycles(p)
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
