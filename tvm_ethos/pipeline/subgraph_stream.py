"""One planned NPU subgraph's command stream, where its backend makes one, and the stream's
report: run once on the functional model (zero inputs), what it touched beside what the plan
predicts. No TVM: the command-stream stage (``streams``) calls it for every subgraph of a
partitioned module, the TVM-free ``.tflite`` path (``tvm_ethos.tflite_direct``) for the
subgraph it reads from the TFLite graph."""
from __future__ import annotations

from typing import NamedTuple

from tvm_ethos.backends.base import NpuBackend
from tvm_ethos.emulator.planned_memory import MemoryMismatchError
from tvm_ethos.errors import CompileError
from tvm_ethos.pipeline.frozen_heap import frozen_heap
from tvm_ethos.pipeline.report import PlannedSubgraph, StreamReport, SubgraphPlan, jsonable


class SubgraphStream(NamedTuple):
    """A subgraph's stream: its payload (None where it has none) and its report (None where
    the backend made no stream and gave no reason)."""

    payload: object | None
    report: StreamReport | None


def subgraph_stream(backend: NpuBackend, sym: str, lowered, options: dict,
                    planned: PlannedSubgraph | None, sub) -> SubgraphStream:
    """The command stream of NPU subgraph ``sym`` (``lowered``, with the target's
    ``options``) executing ``planned``; ``sub``: its plan report entry (a SubgraphPlan, or
    None). A stream the generator refuses is a report that says why. The objects the compile
    holds already stay out of the garbage collector's passes meanwhile (``frozen_heap``)."""
    sub_json = jsonable(sub.to_json()) if isinstance(sub, SubgraphPlan) else {}
    try:
        with frozen_heap():
            payload = backend.command_stream(lowered, options, planned)
            if payload is None:
                return SubgraphStream(None, None)
            figures = backend.stream_report(payload, sub_json.get("peak_memory_bytes"))
    except CompileError as err:
        return SubgraphStream(None, StreamReport.refused(str(err)))
    # a stream generated from the plan executes its schedule within the plan's peak
    # (its Plans hold the working memory of operators lowered to several NPU
    # operations, SOFTMAX's int32 intermediates); a layer-by-layer stream makes the
    # claim only where it needs no working memory
    report = StreamReport(True, figures, figures.get("schedule") == "plan" or (
        realizes_plan(sub_json) and not figures.get("work_bytes")))
    check_stream_memory(sym, report.to_json())
    return SubgraphStream(payload, report)


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
