"""Graph-level NPU operators: TFLite operators the Ethos-U runs that Relax cannot express
(TVM's importer has no converter for them), turned into an ``ethos-u`` operator straight
from the TFLite graph, one operator each.

Every other NPU operator reaches the stream through the importer (``compile.py`` cuts a
group of importable operators out and compiles it). An operator of :data:`GRAPH_NPU_OPERATORS`
never goes through Relax: its entry's ``check`` says whether the NPU takes this instance
(``""``) or why not, its ``emit`` writes its command stream. Each kind (an LSTM, an SVDF)
is one row of the table.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from tvm_ethos.backends.ethos_u import ops_lstm, ops_svdf, stream_lstm, stream_svdf, svdf_plan
from tvm_ethos.backends.ethos_u.payload import EthosUPayload
from tvm_ethos.backends.ethos_u.stream_report_lines import stream_report_lines
from tvm_ethos.backends.ethos_u.stream_run import stream_report
from tvm_ethos.backends.ethos_u.svdf_plan import SvdfEstimate
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph


class GraphPart(NamedTuple):
    """One graph-level operator as an ``ethos-u`` operator: its payload, the source tensors
    of the payload's inputs and outputs (in its order), and its plan report (no plan: the
    operator is its own stream; the report's peak is the arena it needs)."""

    payload: EthosUPayload
    ifms: tuple[int, ...]
    ofms: tuple[int, ...]
    plan_report: dict


class GraphNpuOperator(NamedTuple):
    """A TFLite builtin the NPU runs from the graph: ``check(graph, index)`` is ``""`` when
    the NPU takes operator ``index``, else why not (one line); ``emit(graph, index,
    accelerator, name, shared)`` its :class:`GraphPart`, where ``shared`` maps a source
    tensor other ethos-u operators already hold to (its offset in that operator's
    stretch of the arena, the stretch's bytes): the part lays out a tensor it shares with
    them so that their stretches line up and leave what it keeps alone."""

    builtin: str
    check: Callable[[SourceGraph, int], str]
    emit: Callable[[SourceGraph, int, str, str, dict], GraphPart]


def _lstm_emit(graph: SourceGraph, index: int, accelerator: str, name: str,
               shared: dict) -> GraphPart:
    lstm = ops_lstm.read_lstm(graph, index)
    ifms = ops_lstm.state_and_sequence_tensors(graph, index)
    ofms = tuple(graph.writes[index][:1])
    names = tuple((graph.g.Tensors(t).Name() or b"").decode() for t in ifms + ofms)
    near = {t: ops_lstm.Neighbour(*shared[t]) for t in (ifms[0], ofms[0]) if t in shared}
    stream = stream_lstm.planned_lstm_stream(lstm, accelerator, names, near.get(ifms[0]),
                                 near.get(ofms[0]))
    report = _report(name, stream.payload, stream.planned_peak, PLANNED_ALONE,
                     layer=_layer_row(name, stream_lstm.PART, stream.cycles))
    return GraphPart(stream.payload, ifms, ofms, report)


class FloorAt(NamedTuple):
    """The key in ``shared`` of what an SVDF records of its output tensor for the SVDFs
    after it (:class:`Floor`)."""

    tensor: int


class Floor(NamedTuple):
    """Where the lowest SVDF state placed so far starts, relative to the address of the
    tensor it is recorded for (an SVDF's output), and that tensor's offset in the stretch
    of the ethos-u operator reading it and that stretch's bytes (None: no such operator
    held it): an SVDF reading what that operator writes finds the floor from them."""

    below: int
    reader_offset: int | None
    reader_bytes: int | None


def _svdf_emit(graph: SourceGraph, index: int, accelerator: str, name: str,
               shared: dict) -> GraphPart:
    svdf = ops_svdf.read_svdf(graph, index)
    x, state, y = ops_svdf.svdf_tensors(graph, index)
    names = tuple((graph.g.Tensors(t).Name() or b"").decode() for t in (x, state, y))
    near = {t: stream_svdf.Neighbour(*shared[t], _kept(graph, t, shared))
            for t in (x, y) if t in shared}
    floor = _floor(graph, x, shared)
    kept = x in graph.graph_outputs or any(x in graph.reads[i] for i in range(len(graph.kinds))
                                           if i != index)
    arena = stream_svdf.SvdfArena.of(svdf, near.get(x), near.get(y), floor, kept)
    payload = stream_svdf.svdf_payload(svdf, accelerator, names, arena)
    lowest = arena.state - arena.input if floor is None else min(floor,
                                                                 arena.state - arena.input)
    reader = near.get(y)
    shared[FloorAt(y)] = Floor(lowest + arena.input - arena.output,
                               reader.offset if reader else None,
                               reader.stretch_bytes if reader else None)
    estimate = svdf_plan.plan_svdf(svdf, accelerator)
    peak = estimate.memory_bytes if estimate.sram_is_arena else None
    return GraphPart(payload, (x, state), (y,),
                     _report(name, payload, peak, PLANNED_APART, estimate,
                             _layer_row(name, svdf_plan.PART, estimate.cycles,
                                        estimate.macs)))


def _floor(graph: SourceGraph, x: int, shared: dict) -> int | None:
    """Where the lowest state of the SVDFs before the one reading ``x`` starts, relative to
    ``x``'s address: recorded with ``x`` where an SVDF wrote it, else found through the
    ethos-u operator writing ``x`` from an earlier SVDF's output (the nearest such output
    upstream, read by an operator whose stretch is as long as the writer's, as
    :func:`_kept` tells stretches apart); None where no SVDF came before."""
    if FloorAt(x) in shared:
        return shared[FloorAt(x)].below
    if x not in shared:
        return None
    seen, todo = {x}, [x]
    while todo:
        t = todo.pop(0)
        for i in range(len(graph.kinds)):
            if t not in graph.writes[i] or graph_operator(graph, i) is not None:
                continue
            for r in graph.reads[i]:
                rec = shared.get(FloorAt(r))
                if rec is not None and rec.reader_bytes == shared[x][1]:
                    return rec.below + rec.reader_offset - shared[x][0]
                if r not in seen:
                    seen.add(r)
                    todo.append(r)
    return None


def _kept(graph: SourceGraph, t: int, shared: dict) -> tuple[tuple[int, int], ...]:
    """(offset, bytes) in the stretch of the ethos-u operator holding ``t`` of the variable
    tensors it keeps between invocations (an SVDF's or LSTM's states, the operators writing
    or reading ``t`` whose variable tensors ``shared`` places in a stretch of that size):
    the SVDF's stretch must not cover them."""
    kept = set()
    for i in range(len(graph.kinds)):
        if t not in graph.reads[i] and t not in graph.writes[i]:
            continue
        for v in graph.all_inputs(i):
            if v >= 0 and v in shared and graph.g.Tensors(v).IsVariable() and \
                    shared[v][1] == shared[t][1]:
                n, kind = graph.numel_dtype(v)
                kept.add((shared[v][0], n * _ITEM_BYTES.get(kind, 4)))
    return tuple(sorted(kept))


#: bytes of an element of the TFLite types a state may have (int8, int16, int32)
_ITEM_BYTES = {9: 1, 7: 2, 2: 4}


#: why a graph-level operator has no cascade
NOT_PLANNED = "a graph-level NPU operator: one stream of its own, no cascade to plan"
#: how a graph-level operator with a planner Part (an LSTM) is planned
PLANNED_ALONE = ("a graph-level NPU operator: its stream emitted from its own Plan, its "
                 "neighbours planned apart")
#: how a graph-level operator planned for its estimates alone (an SVDF) is planned
PLANNED_APART = ("a graph-level NPU operator: planned alone for its estimates, its stream "
                 "laid out beside its neighbours")


def _layer_row(name: str, part: str, cycles: int, macs: int | None = None) -> dict:
    """The plan report's layer row of a graph-level operator: its Part's name and kind, its
    cycles (estimated) and its subgraph, the keys of a planned Part's row
    (``planner.report.layer_rows``) that the per-layer reports read, so that they give the
    operator its own cycles (its subgraph is not planned, so no plan table prints the row);
    ``macs``: its plan's (estimated), where Vela's count of the operator
    (:func:`tvm_ethos.reports.tflite_ops.vela_macs`) leaves it out."""
    row = {"part": part, "operator": part, "cycles": cycles, "subgraph": name}
    if macs is not None:
        row["macs"] = macs
    return row


def _report(name: str, payload: EthosUPayload, planned_peak: int | None,
            reason: str = NOT_PLANNED, estimate: SvdfEstimate | None = None,
            layer: dict | None = None) -> dict:
    """A plan report of one stream written from the graph: its arena (an LSTM's states,
    sequences and gate buffers) is its peak, so a merged report's memory peak counts it;
    its stream entry holds the planner's peak for the operator alone (None where the
    planner has none) beside what the stream touched; ``reason`` says how it was planned
    (:data:`NOT_PLANNED`, :data:`PLANNED_ALONE`, :data:`PLANNED_APART`). ``estimate``: the
    plan's cycles and MACs, which its subgraph entry's ``macs`` carries (estimated);
    ``layer``: the operator's layer row (:func:`_layer_row`), whose cycles are the
    report's (and so count in a merged report's total)."""
    sub = {"planned": False, "backend": "ethos-u", "reason": reason,
           "peak_memory_bytes": payload.scratch_bytes}
    if estimate is not None:
        sub.update(device=estimate.device, cycles=estimate.cycles, macs=estimate.macs,
                   planned_peak_bytes=estimate.memory_bytes,
                   sram_is_arena=estimate.sram_is_arena)
    return {"planned": False, "graph_operator": True,
            "cycles": layer["cycles"] if layer is not None else None,
            "peak_memory_bytes": payload.scratch_bytes,
            "layers": [layer] if layer is not None else [],
            "subgraphs": {name: sub},
            "streams": {name: stream_report(payload, planned_peak)}}


def how_it_runs(part: GraphPart) -> str:
    """How the NPU runs a graph-level operator (its report's one reason, e.g.
    :data:`PLANNED_APART`): what its placement says."""
    (sub,) = part.plan_report["subgraphs"].values()
    return sub["reason"]


def format_report(report: dict) -> str:
    """The plan-table lines of a graph-level operator's report: how it was planned (the
    plan's estimates where it has them), its arena, what its stream did on the functional
    model."""
    out = []
    for name, sub in report["subgraphs"].items():
        how = "planned alone" if sub["reason"] in (PLANNED_ALONE, PLANNED_APART) \
            else "not planned"
        out.append(f"{name} on ethos-u: {how} ({sub['reason']}); arena "
                   f"{sub['peak_memory_bytes']:,} B (its inputs, outputs and working buffers)")
        if "cycles" in sub:
            held = ("its input, output, state and working buffers" if sub["sram_is_arena"]
                    else "the fast scratch its working buffers would take; its stream keeps "
                    "them in the arena")
            out.append(f"   plan on {sub['device']}: {sub['cycles']:,} NPU cycles, "
                       f"{sub['macs']:,} MACs, peak {sub['planned_peak_bytes']:,} B ({held}; "
                       "estimated)")
        out.extend(stream_report_lines(report["streams"][name]))
    return "\n".join(out)


#: graph-level NPU operators by TFLite builtin name
GRAPH_NPU_OPERATORS: dict[str, GraphNpuOperator] = {
    ops_lstm.KIND: GraphNpuOperator(ops_lstm.KIND, ops_lstm.refusal, _lstm_emit),
    ops_svdf.KIND: GraphNpuOperator(ops_svdf.KIND, ops_svdf.refusal, _svdf_emit),
}


def graph_operator(graph: SourceGraph, index: int) -> GraphNpuOperator | None:
    """The table's entry for source operator ``index``, or None for any other kind."""
    return GRAPH_NPU_OPERATORS.get(graph.kinds[index])
