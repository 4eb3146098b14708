"""The command-stream stage: every NPU subgraph's own device code where its backend makes one
(``Backend.command_stream``: Ethos-U register command streams), each run once on the
functional model (zero inputs) so the plan report shows what the stream touches beside what
the plan predicts. A subgraph the generator cannot express keeps the emulator, and its
:class:`~tvm_ethos.pipeline.report.StreamReport` says why."""
from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from tvm_ethos.backends.base import NpuBackend
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.emulator.schedule import MemoryMismatchError
from tvm_ethos.errors import CompileError
from tvm_ethos.pipeline.npu_subgraphs import npu_functions
from tvm_ethos.pipeline.report import (
    PlannedSubgraph,
    PlanReport,
    StreamReport,
    SubgraphPlan,
    jsonable,
)


class NpuStreams(NamedTuple):
    """The stream stage's result, by symbol: the payloads the executor runs and the program
    saves, and the report of every subgraph a generator was asked for."""

    payloads: Mapping[str, object]
    reports: Mapping[str, StreamReport]


def command_streams(pmod, tl, lowered: Mapping, plan: PlanReport,
                    planned: Mapping[str, PlannedSubgraph]) -> NpuStreams:
    """Every NPU subgraph's command stream where its backend makes one; ``planned``: the
    schedule a stream executes, per planned symbol."""
    reg = get_registry()
    payloads: dict = {}
    reports: dict = {}
    for spec in tl.accelerators:
        backend = reg.get(spec.backend_id)
        if not isinstance(backend, NpuBackend):
            continue
        for _gv, f in npu_functions(pmod, {spec.backend_id}):
            sym = str(f.attrs["global_symbol"])
            sub = plan.subgraphs.get(sym)
            sub_json = jsonable(sub.to_json()) if isinstance(sub, SubgraphPlan) else {}
            try:
                payload = backend.command_stream(lowered[sym], spec.options, planned.get(sym))
                if payload is None:
                    continue
                figures = backend.stream_report(payload, sub_json.get("peak_memory_bytes"))
            except CompileError as err:
                reports[sym] = StreamReport.refused(str(err))
                continue
            payloads[sym] = payload
            # a stream generated from the plan executes its schedule within the plan's peak
            # (its Plans hold the working memory of operators lowered to several NPU
            # operations, SOFTMAX's int32 intermediates); a layer-by-layer stream makes the
            # claim only where it needs no working memory
            report = StreamReport(True, figures, figures.get("schedule") == "plan" or (
                realizes_plan(sub_json) and not figures.get("work_bytes")))
            check_stream_memory(sym, report.to_json())
            reports[sym] = report
    return NpuStreams(payloads, reports)


def realizes_plan(planned: dict) -> bool:
    """Whether a layer-by-layer stream is the planned schedule itself: every Plan one Part
    over its whole tensors (one stripe), no buffer of its own in SRAM (a staged input, weights
    copied there)."""
    plans = planned.get("plans") or []
    return bool(plans) and all(len(p["parts"]) == 1 and p["stripes"] == 1 and not p["weights"]
                               and p["planned_bytes"] == 0 for p in plans)


def check_stream_memory(sym: str, entry: dict) -> None:
    """A stream that realizes its plan must touch exactly the SRAM the plan predicts, as the
    scheduled TIR must allocate it (``schedule.check``)."""
    touched = entry.get("sram_high_water_bytes", entry.get("scratch_high_water_bytes"))
    planned = entry.get("planned_peak_bytes")
    # a planned arena may end with reserved weight bytes the stream does not touch (reported)
    reserved = entry.get("untouched_top_bytes") or 0
    if entry.get("realizes_plan") and touched is not None and touched + reserved != planned:
        above = f" below {reserved:,} B of reserved weights" if reserved else ""
        raise MemoryMismatchError(
            f"NPU subgraph {sym}: its command stream touches {touched:,} B of SRAM on the "
            f"functional model{above}, its plan predicts a peak of {planned:,} B; the stream "
            "generator's arena layout and the planner's memory model disagree")
