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
from tvm_ethos.pipeline.npu_subgraphs import npu_functions
from tvm_ethos.pipeline.report import PlannedSubgraph, PlanReport, StreamReport
from tvm_ethos.pipeline.subgraph_stream import (  # noqa: F401 - the stage's API
    check_stream_memory,
    realizes_plan,
    subgraph_stream,
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
            made = subgraph_stream(backend, sym, lowered[sym], spec.options, planned.get(sym),
                                   plan.subgraphs.get(sym))
            if made.payload is not None:
                payloads[sym] = made.payload
            if made.report is not None:
                reports[sym] = made.report
    return NpuStreams(payloads, reports)
