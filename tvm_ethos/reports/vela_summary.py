"""Vela's reports for a compiled Ethos-U model: the network summary printed as Vela prints it
and written as ``<model>_summary_<system>.csv``, and the per-layer CSV of
``--verbose-performance`` (``<model>_per-layer.csv``), with Vela's column names where the
quantity exists here and tvm-ethos's own columns after them.

Every figure says where it comes from: MACs as Vela counts them come from the model file
(:mod:`tvm_ethos.reports.tflite_ops`); cycles are the planner's estimates; memory is what the
written ``.tflite`` declares (its scratch, fast scratch and flash; the plan's peak where no
stream was generated); the computed MACs and DMA bytes were counted by running the command
stream on the functional model (emulated). The arena line says what a TFLite Micro
application must give the ``ethos-u`` operators: the scratch tensor in its tensor arena and,
on an Ethos-U65, the fast scratch in the NPU's SRAM.
"""
from __future__ import annotations

import csv
import io
import os
import re
from typing import NamedTuple

from ethos_arch.accelerators import accelerator
from tvm_ethos.reports.tflite_ops import TfliteOperator, read_operators
from tvm_ethos.vela_options import MEMORIES, VelaSystem

#: Vela's display names of its memories (``MemArea.display_name``), by identifier.
_DISPLAY = {"sram": "SRAM", "dram": "DRAM", "on_chip_flash": "On-chip Flash",
            "off_chip_flash": "Off-chip Flash"}
#: The planner's part-name suffix for a TFLite operator where the two spell it differently
#: (a QUANTIZE is the planner's requantize; an LSTM's Part is named for its kind alone).
_ALIASES = {"averagepool2d": "avgpool2d", "requantize": "quantize",
            "unidirectionalsequencelstm": "lstm"}
_ALIGN = 16


class Arena(NamedTuple):
    """What the ``ethos-u`` operators of the written ``.tflite`` need at run time."""

    scratch_bytes: int        # the scratch tensor, in TFLite Micro's tensor arena
    fast_scratch_bytes: int   # the fast scratch (an Ethos-U65's SRAM); 0 on an Ethos-U55

    def line(self, accelerator: str) -> str:
        """The one line an application writer needs."""
        fast = (f"fast scratch {self.fast_scratch_bytes:,} B (the {accelerator}'s SRAM, "
                "given to the NPU driver)" if self.fast_scratch_bytes else
                "no fast scratch")
        return (f"TFLite Micro arena for the ethos-u operators: scratch {self.scratch_bytes:,} B "
                f"in the tensor arena (plus the host operators' tensors), {fast}")


def arena(payloads) -> Arena:
    """The scratch and fast scratch of the ``.tflite`` ``export_tflite`` writes: every
    subgraph's at its own 16-byte-aligned offset, as the exporter lays them out."""
    scratch = fast = 0
    for name in sorted(payloads):
        p = payloads[name]
        scratch = -(-scratch // _ALIGN) * _ALIGN + p.scratch_bytes
        fast = -(-fast // _ALIGN) * _ALIGN + p.fast_scratch_bytes
    return Arena(scratch, fast)


class Layer(NamedTuple):
    """One operator of the model with the plan's row for it (None where it has none)."""

    op: TfliteOperator
    target: str               # "NPU" or "CPU"
    plan: dict | None


def _norm(text: str) -> str:
    key = re.sub(r"[^a-z0-9]", "", text.lower())
    return _ALIASES.get(key, key)


def placements(ops: list[TfliteOperator], decisions, backend: str = "ethos-u"
               ) -> list[bool | None]:
    """Whether each operator of the file went to ``backend``, from the partition report's
    ``decisions`` (``OperatorDecision``s, in the module's order): the k-th decision naming a
    TFLite operator type is the k-th operator of that type in the file; operators the report
    does not name (a reshape it lists as ``?``) take the one placement those share, else None
    (unknown)."""
    by_type: dict[str, list[bool]] = {}
    unnamed = set()
    for d in decisions:
        if d.tflite_name and d.tflite_name != "?":
            by_type.setdefault(d.tflite_name, []).append(d.placed_on == backend)
        else:
            unnamed.add(d.placed_on == backend)
    counts = {t: sum(1 for op in ops if op.builtin == t) for t in by_type}
    seen: dict[str, int] = {}
    out: list[bool | None] = []
    for op in ops:
        if op.builtin in by_type and counts[op.builtin] == len(by_type[op.builtin]):
            k = seen.get(op.builtin, 0)
            seen[op.builtin] = k + 1
            out.append(by_type[op.builtin][k])
        else:
            out.append(next(iter(unnamed)) if len(unnamed) == 1 else None)
    return out


def layers(ops: list[TfliteOperator], plan_layers: list[dict],
           placed: list[bool | None] | None = None,
           owners: list[str] | None = None) -> list[Layer]:
    """The model's operators beside the plan's layers. Within one kind (the planner names a
    part ``l<i>_<kind>``, a graph-level operator's row its kind alone) the plan's parts are
    that kind's NPU operators in the model's order, so the k-th part of a kind is matched
    with the k-th operator of that kind that ``placed`` (:func:`placements`) does not put
    on the host. Matching kind by kind, not in one walk, keeps rows that a report lists
    out of the model's order (the graph-level operators' after the NPU groups') on their
    own operators. Where ``owners`` names the NPU operator (the plan's subgraph) each
    operator runs in, a part is matched only within its own subgraph, whatever the order of
    the subgraphs. An operator is an NPU one where ``placed`` says so, or where it is
    unknown and a part matched it."""
    placed = list(placed) if placed is not None else [None] * len(ops)
    owner = list(owners) if owners is not None else [None] * len(ops)
    queues: dict[tuple[str | None, str], list[int]] = {}
    for i, op in enumerate(ops):
        if placed[i] is not False:
            queues.setdefault((owner[i], _norm(op.builtin)), []).append(i)
    matched: dict[int, dict] = {}
    for layer in plan_layers:
        part = layer["part"]
        kind = _norm(part.split("_", 1)[1] if "_" in part else part)
        queue = queues.get((layer.get("subgraph") if owners is not None else None, kind))
        if queue:
            matched[queue.pop(0)] = layer
    rows = []
    for i, op in enumerate(ops):
        npu = placed[i] if placed[i] is not None else i in matched
        rows.append(Layer(op, "NPU" if npu else "CPU", matched.get(i)))
    return rows


class Summary(NamedTuple):
    """The figures of Vela's network summary for one compiled model."""

    network: str
    system: VelaSystem
    scratch_used: int         # bytes of the arena, in the feature maps' memory
    fast_used: int            # bytes of the fast scratch (an Ethos-U65's SRAM)
    flash_used: int           # command streams and encoded weights, in the weights' memory
    cycles: int               # NPU cycles (estimated); 0 where nothing was planned
    nn_macs: int              # as Vela counts them
    computed_macs: int | None  # counted by the functional model (emulated), recomputation included
    npu_operators: int
    cpu_operators: int
    dma_bytes: dict           # "src->dst" region names -> bytes (emulated)
    arena: Arena
    stream_bytes: int = 0     # the command streams' own bytes, part of flash_used
    #: MACs of the graph-level NPU operators (an SVDF), which Vela's count leaves out (it
    #: keeps them on the CPU): their plans' (estimated)
    graph_operator_macs: int = 0

    @property
    def inference_time(self) -> float:
        return self.cycles / self.system.core_clock

    def memory_used(self) -> dict[str, int]:
        """Bytes used per Vela memory (identifier names), as Vela's "Total ... used" lines."""
        ids = {display: ident for ident, display in _DISPLAY.items()}
        used = dict.fromkeys(MEMORIES, 0)
        used[ids[self.system.feature_map_area]] += self.scratch_used
        used["sram"] += self.fast_used
        used[ids[self.system.weights_area]] += self.flash_used
        return used

    def csv_row(self) -> dict:
        """Vela's summary columns where the quantity exists here, then tvm-ethos's own."""
        s = self.system
        row = {"experiment": "default", "network": self.network,
               "accelerator_configuration": _vela_accelerator(s.accelerator),
               "system_config": s.system_config, "memory_mode": s.memory_mode,
               "core_clock": s.core_clock, "arena_cache_size": s.arena_cache_size / 1024}
        row.update({f"{m}_bandwidth": bw / 1024 ** 3 for m, bw in s.bandwidth})
        row.update({"weights_storage_area": s.weights_area,
                    "feature_map_storage_area": s.feature_map_area,
                    "inferences_per_second": 1 / self.inference_time if self.cycles else "",
                    "batch_size": 1, "inference_time": self.inference_time if self.cycles
                    else ""})
        row.update({f"{m}_memory_used": n / 1024 for m, n in self.memory_used().items()})
        row.update({"nn_macs": self.nn_macs,
                    "nn_tops": self.nn_macs * 2 / self.inference_time / 1e12 if self.cycles
                    else "",
                    "cycles_npu": self.cycles or "", "cycles_total": self.cycles or ""})
        row.update({"tvm_ethos_computed_macs": "" if self.computed_macs is None
                    else self.computed_macs,
                    "tvm_ethos_npu_operators": self.npu_operators,
                    "tvm_ethos_cpu_operators": self.cpu_operators,
                    "tvm_ethos_command_stream_bytes": self.stream_bytes,
                    "tvm_ethos_tflm_scratch_bytes": self.arena.scratch_bytes,
                    "tvm_ethos_tflm_fast_scratch_bytes": self.arena.fast_scratch_bytes})
        for pair, n in sorted(self.dma_bytes.items()):
            row[f"tvm_ethos_dma_{pair.replace('->', '_to_')}_bytes"] = n
        return row

    def text(self) -> str:
        """Vela's printed network summary, its estimates marked as such."""
        s = self.system
        out = io.StringIO()
        w = out.write
        w(f"Network summary for {self.network}\n")
        w(f"Accelerator configuration        {_vela_accelerator(s.accelerator):>20}\n")
        w(f"System configuration             {s.system_config:>20}\n")
        w(f"Memory mode                      {s.memory_mode:>20}\n")
        w(f"Accelerator clock                        {int(s.core_clock / 1e6):12d} MHz\n")
        for m, bw in s.bandwidth:
            if _DISPLAY[m] in (s.weights_area, s.feature_map_area, "SRAM"):
                label = f"{_DISPLAY[m]} bandwidth"
                w(f"Design peak {label:25}    {bw / 1024 ** 3:12.2f} GB/s\n")
        w("\n")
        for m, n in self.memory_used().items():
            if n:
                label = f"{_DISPLAY[m]} used"
                w(f"Total {label:25}          {n / 1024:12.2f} KiB\n")
        if self.stream_bytes:
            label = f"of it command streams ({self.system.weights_area})"
            w(f"  {label:39}{self.stream_bytes / 1024:12.2f} KiB\n")
        w("\n")
        total = max(self.npu_operators + self.cpu_operators, 1)
        w(f"CPU operators = {self.cpu_operators:d} ({self.cpu_operators / total:4.1%})\n")
        w(f"NPU operators = {self.npu_operators:d} ({self.npu_operators / total:4.1%})\n\n")
        w(f"Neural network macs                      {self.nn_macs:12d} MACs/batch\n")
        if self.graph_operator_macs:
            w(f"Graph-level operators' macs (estimated)  {self.graph_operator_macs:12d} "
              "MACs/batch\n")
        if self.computed_macs is not None:
            w(f"Computed macs (emulated, recomputation)  {self.computed_macs:12d} MACs/batch\n")
        if not self.cycles:
            w("NPU cycles: none estimated (not planned)\n")
        else:
            w(f"NPU cycles (estimated)                   {self.cycles:12d} cycles/batch\n")
            w(f"Batch Inference time (estimated)  {self.inference_time * 1000:7.2f} ms, "
              f"{1 / self.inference_time:7.2f} inferences/s (batch size 1)\n")
        w("\n" + self.arena.line(s.accelerator) + "\n")
        return out.getvalue()


def _vela_accelerator(name: str) -> str:
    """``ethos-u55-128`` -> ``Ethos_U55_128``, Vela's ``Accelerator`` member name."""
    return accelerator(name).vela_name


def _owners(cm, ops: list[TfliteOperator]) -> list[str] | None:
    """The ethos-u operator (plan subgraph) each of ``ops`` runs in, where the compiled model
    records it per source operator (a TFLite Micro file's placement); else None."""
    placement = getattr(cm, "placement", None)
    if placement is None or len(placement) != len(ops):
        return None
    return [p.operator for p in placement]


def summarize(cm, network: str, source: bytes, system: VelaSystem) -> tuple[Summary,
                                                                             list[Layer]]:
    """The summary and per-layer rows of ``cm``, compiled from the TFLite model ``source``."""
    rep = cm.plan_report or {}
    streams = rep.get("streams") or {}
    ops = read_operators(source)
    placed = placements(ops, cm.report.operators) if cm.report is not None else None
    rows = layers(ops, [row for row in rep.get("layers", [])
                        if (rep.get("subgraphs", {}).get(row["subgraph"], {})
                            .get("backend") == "ethos-u")], placed, _owners(cm, ops))
    payloads = getattr(cm.program, "payloads", None) or {}
    ar = arena(payloads)
    generated = [s for s in streams.values() if s.get("generated")]
    stream_bytes = sum(s.get("command_stream_bytes", 0) for s in generated)
    flash = sum(s.get("flash_bytes", 0) for s in generated) + stream_bytes
    computed = sum(s.get("macs", 0) for s in generated) if generated else None
    dma: dict = {}
    for s in generated:
        for pair, n in s.get("dma_bytes", {}).items():
            key = "->".join(_region(r) for r in pair.split("->"))
            dma[key] = dma.get(key, 0) + n
    scratch = ar.scratch_bytes if payloads else rep.get("peak_memory_bytes") or 0
    nn_macs = sum(r.op.macs for r in rows if r.target == "NPU")
    # (only a graph-level operator's subgraph entry has its plan's MACs)
    graph_macs = sum(sub.get("macs", 0) for sub in (rep.get("subgraphs") or {}).values())
    cpu = sum(1 for r in rows if r.target == "CPU")
    summary = Summary(network, system, scratch, ar.fast_scratch_bytes, flash,
                      int(rep.get("cycles") or 0), nn_macs, computed, len(rows) - cpu, cpu, dma, ar,
                      stream_bytes, graph_macs)
    return summary, rows


_REGIONS = {"0": "flash", "1": "scratch", "2": "fast_scratch", "259": "lut"}


def _region(r: str) -> str:
    return _REGIONS.get(r.strip(), f"region{r.strip()}")


#: Vela's per-layer columns that exist here, then tvm-ethos's.
PER_LAYER_COLUMNS = ("Original Operator", "Target", "Op Cycles", "Network% (cycles)",
                     "MAC Count", "Network% (MAC)", "Util% (MAC)", "Name",
                     "NPU Operator", "Part", "Cascade", "Stripe", "Stripes", "Buffer", "Region",
                     "Bytes")


def per_layer_rows(rows: list[Layer], summary: Summary) -> list[dict]:
    """The per-layer CSV's rows: every operator of the model, keyed by Vela's ``Name`` (its
    output tensor's name); cycles are the planner's estimates, MACs Vela's count (the
    recomputed ones are the summary's, counted on the functional model; a graph-level
    operator's, which Vela keeps on the CPU, its plan's, estimated). ``Util% (MAC)`` is
    against the accelerator's MACs per cycle (the number its name ends in, as Vela's).
    ``NPU Operator`` names the ethos-u operator (the plan table's subgraph) that runs the
    layer: Part and Cascade are counted within it."""
    macs_per_cycle = int(summary.system.accelerator.rsplit("-", 1)[1])
    all_macs = summary.nn_macs + summary.graph_operator_macs
    out = []
    for r in rows:
        p = r.plan or {}
        cycles = p.get("cycles", 0) or 0
        macs = p.get("macs", r.op.macs)   # a graph-level operator's: its plan's (estimated)
        stripe = p.get("stripe")
        out.append({
            "Original Operator": r.op.vela_name, "Target": r.target, "Op Cycles": cycles,
            "Network% (cycles)": 100 * cycles / summary.cycles if summary.cycles else 0.0,
            "MAC Count": macs,
            "Network% (MAC)": 100 * macs / all_macs if all_macs else 0.0,
            "Util% (MAC)": (100 * macs / (cycles * macs_per_cycle) if cycles else 0.0),
            "Name": r.op.name, "NPU Operator": p.get("subgraph", ""),
            "Part": p.get("part", ""), "Cascade": p.get("cascade", ""),
            "Stripe": "x".join(map(str, stripe)) if stripe else "",
            "Stripes": p.get("stripes", ""), "Buffer": p.get("buffer", ""),
            "Region": p.get("region", ""), "Bytes": p.get("bytes", "")})
    return out


def write_csv(path: str, rows: list[dict], columns: tuple[str, ...] | None = None) -> None:
    """``rows`` (dicts of one set of keys, in order; ``columns`` where there may be none) as a
    CSV with a header."""
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns or rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def summary_path(output_dir: str, network: str, system: VelaSystem) -> str:
    return os.path.join(output_dir, f"{network}_summary_{system.system_config}.csv")


def per_layer_path(output_dir: str, network: str) -> str:
    return os.path.join(output_dir, f"{network}_per-layer.csv")


def per_layer_text(rows: list[dict]) -> str:
    """The per-layer table as Vela prints it with ``--verbose-performance`` (our columns
    after Vela's; cycles estimated)."""
    cols = [("Original Operator", 20), ("Target", 6), ("Op Cycles", 10),
            ("Network% (cycles)", 17), ("MAC Count", 10), ("Network% (MAC)", 14),
            ("Util% (MAC)", 12), ("NPU Operator", 26), ("Part", 24), ("Stripe", 14),
            ("Buffer", 9), ("Name", 0)]
    lines = [" ".join(f"{c:<{w}}" if w else c for c, w in cols),
             " ".join("-" * (w or 20) for _, w in cols)]
    for r in rows:
        cells = []
        for c, w in cols:
            v = r[c]
            v = f"{v:.2f}" if isinstance(v, float) else str(v)
            cells.append((f"{v:>{w}}" if c not in ("Original Operator", "Target",
                                                   "NPU Operator", "Part", "Stripe",
                                                   "Buffer") else f"{v:<{w}}")
                         if w else v)
        lines.append(" ".join(cells))
    return "Per-layer performance (Op Cycles estimated by the planner)\n" + "\n".join(lines)


def allocation_text(cm) -> str:
    """``--verbose-allocation``: where the plan's buffers live, per NPU subgraph and cascade,
    and the arena they add up to."""
    rep = cm.plan_report or {}
    lines = []
    for sym, sub in sorted((rep.get("subgraphs") or {}).items()):
        if sub.get("backend") != "ethos-u" or not sub.get("planned"):
            continue
        lines.append(f"{sym} on {sub['device']}: peak {sub['peak_memory_bytes']:,} B "
                     "(the plan's; it sizes the arena)")
        for k, plan in enumerate(sub.get("plans", [])):
            lines.append(f"  cascade {k:>3} {plan.get('buffering', ''):<14} "
                         f"{plan.get('planned_bytes', 0):>10,} B  {', '.join(plan['parts'])}")
        stream = (rep.get("streams") or {}).get(sym, {})
        if stream.get("generated"):
            lines.append(f"  stream: scratch high water {stream['scratch_high_water_bytes']:,} B,"
                         f" fast scratch {stream.get('fast_scratch_bytes', 0):,} B (emulated)")
    payloads = getattr(cm.program, "payloads", None) or {}
    if payloads:
        lines.append(arena(payloads).line(next(iter(payloads.values())).accelerator))
    return "\n".join(lines) if lines else "no planned Ethos-U subgraph: nothing allocated"
