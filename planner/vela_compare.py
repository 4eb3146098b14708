"""The planner against Vela's own reports: Vela's per-layer rows matched to Parts, the cost
model's and the planner's per-layer cycles compared with them (``calibrate``), and a
Proposal's memory counted as Vela allocates it (``vela_terms_peak``).

Used by benchmarks/vs_vela.py (the tables) and tests/planner/test_vela_calibration.py (the
goals); what is compared and why is in rfcs/0001-appendix-cost-model.md, "Calibration
against Vela". Vela runs through planner/vela_run.py.
"""
from __future__ import annotations

import math
import os
import re
import statistics
from dataclasses import dataclass, field

from ethos_arch.accelerators import Family
from planner.devices import get_device
from planner.graph import PlannerGraph
from planner.options import PlannerOptions
from planner.plans import PlanGenerator
from planner.proposals import Proposal, ProposalSearch, live_boundary_bytes
from planner.stripes import StripeConfig
from planner.tflite import load_tflite
from planner.vela_run import VelaError, VelaRun, run_vela

#: Vela options giving the planner's memory layout on the Ethos-U65 (benchmarks/vs_vela.py's
#: doc says why).
U65_SHARED_SRAM = ("--config", "Arm/vela.ini", "--system-config", "Ethos_U65_Client_Server",
                   "--memory-mode", "Shared_Sram")
#: Calibration goals: median per-layer |error| and network-total |error|.
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
    return U65_SHARED_SRAM if config.startswith(Family.ETHOS_U65.value) else ()


# ---------------------------------------------------------------------------------------------
# Running Vela for its per-layer figures


@dataclass(frozen=True)
class VelaLayers:
    """A Vela run with its per-layer report (planner.vela_run.VelaRun) and what its
    ``--verbose-schedule`` says: the ops Vela striped and its weight buffers."""
    run: VelaRun
    striped_ops: list[tuple[str, tuple[int, ...], tuple[int, ...]]]
    weight_buffers: list[int]

    @property
    def layers(self) -> list[dict]:
        return self.run.layers

    @property
    def sram_bytes(self) -> int:
        return self.run.sram_bytes

    @property
    def cycles(self) -> int:
        return self.run.cycles


def run_vela_layers(model: str, config: str, *flags: str, work_dir: str | None = None,
                    timeout: float = 300.0) -> VelaLayers:
    """Run Vela with ``--verbose-performance --verbose-schedule`` plus ``flags``
    (planner.vela_run.run_vela). Raises VelaError with Vela's last line on failure."""
    run = run_vela(model, config, "--verbose-performance", "--verbose-schedule", *flags,
                   timeout=timeout, work_dir=work_dir)
    if not run.layers:
        raise VelaError(f"vela {os.path.basename(model)} {config} {' '.join(flags)}: "
                        "no per-layer CSV")
    buffers = [int(b) for b in re.findall(r"Weight buffer = (\d+) bytes", run.stdout)]
    return VelaLayers(run, _striped_ops(run.stdout), buffers)


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
        """The Vela schedule the layer comparison is judged on (benchmarks/vs_vela.py's doc
        says why)."""
        return "no-cascade" if self.config.startswith(Family.ETHOS_U65.value) else "Performance"

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
            t = tensors.get(tc.tensor)
            if t is None:   # a Part's working memory or the states: bytes of no tensor
                buffers += -(-tc.buffer_bytes // align) * align
                continue
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
# Tables


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:+.2%}"


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
