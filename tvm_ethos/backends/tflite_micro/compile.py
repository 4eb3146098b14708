"""Compiling a ``.tflite`` for ``ethos-u,tflite-micro``: the NPU takes what it can, every
other operator stays the TFLite operator it was, for TFLite Micro's kernels.

The model is partitioned on its TFLite graph (``cut.py``): each convex group of operators the
importer takes is cut out as a model of its own and compiled for ``ethos-u,llvm``; what the
Ethos-U took of it becomes ``ethos-u`` operators, what it did not (and every operator the
importer cannot take) is copied from the source unchanged. A group whose compile or export
is refused stays TFLite operators, its reason kept in :attr:`Placement.why`; so does one
whose ethos-u operator has no place in the shared arena beside the others
(``arena_layout.LayoutRefusal``), and a group whose stream writes over a model input read
again after it is compiled one operator per group instead. Relax and TVM see only the
groups, so a model TVM's importer refuses in part still compiles.
"""
from __future__ import annotations

import os
from pathlib import Path

from ethosu_stream.tflite_custom_op import payload_accelerator
from planner.errors import PlannerError
from planner.tflite_check import source_label
from planner.tflite_format import TFLITE_SUFFIXES
from tvm_ethos.backends.ethos_u.arena_layout import InputOverwritten, LayoutRefusal
from tvm_ethos.backends.ethos_u.ops_lstm import KIND as LSTM
from tvm_ethos.backends.ethos_u.tflite_export import (
    SourceGraph,
    npu_parts,
    read_source,
    write_tflite,
)
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.backends.tflite_micro.cut import cut_model, import_refusals, npu_candidates
from tvm_ethos.backends.tflite_micro.graph_operators import graph_operator, how_it_runs
from tvm_ethos.backends.tflite_micro.lstm_cascade import lstm_group, lstm_side
from tvm_ethos.backends.tflite_micro.model import Placement, TfliteMicroModel
from tvm_ethos.compiler import COMPILE_OPTIONS, compile_streams
from tvm_ethos.errors import OptionError, TargetError, TvmEthosError, UnsupportedModelError
from tvm_ethos.frontend.tflite_check import check_identifier
from tvm_ethos.pipeline.planning import planning_options
from tvm_ethos.runtime.options import RUNTIME_OPTIONS, check_runtime_options
from tvm_ethos.stages import stage
from tvm_ethos.targets import parse_targets
from tvm_ethos.tflite_direct.group import compile_group
from tvm_ethos.tflite_direct.operators import Declined
from tvm_ethos.tflite_source import source_of

BACKEND_ID = "tflite-micro"
NPU_ID = "ethos-u"


def compile_tflite(model, target="ethos-u,tflite-micro", **options) -> TfliteMicroModel:
    """Compile the TFLite model ``model`` (a path, its bytes, or a module ``load_model``
    imported from one) for ``target`` (``ethos-u`` and the ``tflite-micro`` host; ``ethos-u``
    alone means both). ``options`` are those of :func:`tvm_ethos.compile` (target options
    such as ``accelerator_config``, ``budget``, ``planner_options``, ``cache_dir``); they
    apply to every NPU group."""
    schemas = {b: get_registry().get(b).options_schema() for b in (NPU_ID, BACKEND_ID)}
    target_opts = {k: options.pop(k) for k in list(options)
                   if any(k in s for s in schemas.values())}
    tl = parse_targets(target, target_opts)
    if tl.host.backend_id != BACKEND_ID or tl.ids != [NPU_ID, BACKEND_ID]:
        raise TargetError(f"target {tl} for a TFLite Micro file: the tflite-micro host takes "
                          "one accelerator, ethos-u ('ethos-u' or 'ethos-u,tflite-micro')")
    data = source_of(model)
    if data is None and isinstance(model, (str, os.PathLike)) and os.path.isfile(model) \
            and Path(model).suffix.lower() in TFLITE_SUFFIXES:
        check_identifier(Path(model).read_bytes(), source_label(model))   # raises: why not
    if data is None:
        raise TargetError(
            "the tflite-micro host keeps a .tflite's other operators as TFLite operators, so "
            "it compiles a .tflite model (its path or bytes, or load_model's module of one); "
            f"this {type(model).__name__} is none: compile it for a host such as "
            "'ethos-u,llvm'")
    _check_options(options)
    npu_target = f"{tl.targets[0]},llvm"
    accelerator = str(tl.options_of(NPU_ID)["accelerator_config"])
    with stage("importer check"):   # the front door first: the graph's reader trusts the file
        refusals = import_refusals(data, source_label(model))
    source = read_source(data)
    graph = SourceGraph(source)
    split: tuple[frozenset[int], ...] = ()
    host: dict[int, str] = {}
    attempts: dict[tuple, object] = {}
    while True:
        try:
            return _placed(data, graph, refusals, str(tl), npu_target, accelerator, options,
                           split, host, attempts)
        except _Split as err:
            split += (err.operators,)
        except _Host as err:
            host.update(err.why)


class _Split(Exception):
    """An NPU group's stream writes over a model input read again after it (the group's
    plan reuses the input's place once its own operators have read it): its ``operators``
    are compiled one by one, each of whose streams leaves its input where it was."""

    def __init__(self, operators: frozenset[int]):
        super().__init__(sorted(operators))
        self.operators = operators


def _importer_refuses(reason: str) -> str:
    """An operator's placement note where TVM's importer has no converter for it."""
    return f"the importer refuses it: {reason}"


class _Host(Exception):
    """An NPU group's ethos-u operator has no place in the arena beside the others (a tensor
    two of them share sits at offsets their streams cannot both reach): the group's
    operators stay TFLite operators, ``why`` by operator."""

    def __init__(self, why: dict[int, str]):
        super().__init__(sorted(why))
        self.why = why


def _placed(data, graph, refusals, target: str, npu_target: str, accelerator: str,
            options: dict, split: tuple, host: dict, attempts: dict) -> TfliteMicroModel:
    """The written model, every operator of a set in ``split`` an NPU group of its own and
    those of ``host`` TFLite operators for its reason (``_npu_groups``); ``attempts``: the
    group compiles made so far, by operators."""
    why = {i: _importer_refuses(r) for i, r in enumerate(refusals) if r}
    npu: list[tuple] = []
    groups: dict[str, tuple] = {}
    plans = []
    alone = frozenset().union(*split)
    written = _npu_groups(data, graph, refusals, npu_target, options, why, alone, attempts,
                          host)
    for gi, (cut, cm, parts, taken) in enumerate(written):
        plans.append(cm.plan_report)
        for spec, payload in parts:
            name = f"g{gi}_{spec.name}"
            sub_ops, ifms, ofms = taken[spec.name]
            npu.append((name, payload))
            groups[name] = (tuple(cut.operators[j] for j in sub_ops),
                            tuple(cut.tensors[t] for t in ifms),
                            tuple(cut.tensors[t] for t in ofms))
        on_npu = {cut.operators[j] for spec, _ in parts for j in taken[spec.name][0]}
        why.update((i, _host_reason(cm, graph.kinds[i])) for i in cut.operators
                   if i not in on_npu)
    with stage("LSTM with its neighbours"):
        joined = _joined_lstms(graph, refusals, written, npu_target, options, why)
    for i, (gi, name, group) in joined.items():   # one operator: the LSTM and its group
        npu = [(n, group.payload if n == name else p) for n, p in npu]
        ops, ifms, ofms = groups[name]
        own, h, c = group.lstm_tensors
        groups[name] = (tuple(sorted(ops + (i,))),
                        (own, h, c) if group.first else ifms + (h, c),
                        ofms if group.first else (own,))
        plans[gi] = group.plan_report
    shared = {t: (a.offset, p.scratch_bytes) for name, p in npu
              for t, a in zip(groups[name][1] + groups[name][2], p.inputs + p.outputs)}
    graph_parts = _graph_parts(graph, refusals, accelerator, len(plans), why, shared,
                               set(joined))
    compiled = [i for i, kind in enumerate(graph.kinds) if kind == NPU_ID]
    if compiled:
        return _compiled_already(data, target, accelerator, graph, compiled, groups,
                                 graph_parts, why)
    with stage("write"):
        try:
            written_file = write_tflite(data, npu + [(n, p.payload) for _, n, p in graph_parts],
                                        {**groups, **{n: ((i,), p.ifms, p.ofms)
                                                      for i, n, p in graph_parts}})
        except UnsupportedModelError as err:
            ops = groups.get(getattr(err, "operator", None), ((),))[0]
            if isinstance(err, InputOverwritten) and len(ops) > 1:
                raise _Split(frozenset(ops)) from None
            if isinstance(err, LayoutRefusal) and ops:
                raise _Host({i: f"its ethos-u operator does not fit the arena's layout: "
                             f"{err}" for i in ops}) from None
            if not graph_parts:
                raise
            for i, _, _ in graph_parts:   # its state has no place in the arena beside the rest
                why[i] += f"; its ethos-u operator does not fit the arena's layout: {err}"
            graph_parts = []
            written_file = write_tflite(data, npu, groups)
    npu += [(n, p.payload) for _, n, p in graph_parts]
    groups.update((n, ((i,), p.ifms, p.ofms)) for i, n, p in graph_parts)
    for i, _, p in graph_parts:   # on the NPU after all: how it runs there, then what befell it
        why[i] = how_it_runs(p) + why[i].removeprefix(_importer_refuses(refusals[i]))
    plans += [p.plan_report for _, _, p in graph_parts]
    owner = {i: name for name, (ops, _, _) in groups.items() for i in ops}
    placement = tuple(
        Placement(i, graph.kinds[i], NPU_ID if i in owner else BACKEND_ID,
                  owner.get(i, ""), why.get(i, ""))
        for i in range(len(graph.kinds)))
    return TfliteMicroModel(written_file, target, accelerator, placement, tuple(plans),
                            dict(npu))


def _compiled_already(data: bytes, target: str, accelerator: str, graph, compiled: list,
                      groups: dict, graph_parts: list, why: dict) -> TfliteMicroModel:
    """A source that holds ``ethos-u`` operators already (Vela's output, or ours): written
    as it is, those operators kept as they are, as Vela does. Its ethos-u operators place
    their tensors by the file's offline arena plan, which a new ethos-u operator's plan
    would have to share: where the NPU would take other operators too, refused, naming
    them."""
    taken = sorted({i for ops, _, _ in groups.values() for i in ops}
                   | {i for i, _, _ in graph_parts})
    if taken:
        raise UnsupportedModelError(
            f"the model holds operators already compiled for Ethos-U (operator "
            f"{', '.join(map(str, compiled))}: 'ethos-u') and operators the NPU would take "
            f"beside them ({', '.join(f'{i} ({graph.kinds[i]})' for i in taken)}); "
            "compiling them would need one arena plan for old and new streams: compile the "
            "original .tflite instead")
    built_for = payload_accelerator(data)
    if built_for is not None and built_for != accelerator:
        raise UnsupportedModelError(
            f"the model is compiled for Ethos-U already, for {built_for} (its ethos-u "
            f"operator's driver payload says so, and the Ethos-U driver refuses it on another "
            f"accelerator); the target asks for {accelerator}: compile it with "
            f"'-accelerator_config={built_for}' to keep it as it is, or compile the original "
            f".tflite for {accelerator}")
    placement = tuple(Placement(i, graph.kinds[i], BACKEND_ID, "", why.get(i, ""))
                      for i in range(len(graph.kinds)))
    return TfliteMicroModel(bytes(data), target, accelerator, placement, (), {})


def _joined_lstms(graph, refusals, written, target: str, options: dict, why: dict) -> dict:
    """{LSTM: (its group's index, the group's subgraph name, ``lstm_cascade.LstmGroup``)}
    for every LSTM the Ethos-U takes from the graph beside a written group the Ethos-U
    took whole as one subgraph, that reads only the LSTM's output or writes only its input
    (``lstm_cascade.lstm_side``; the group after the LSTM first): the two become one
    operator. Where that is refused, ``why`` says why and the LSTM stays an operator of
    its own; a group joins one LSTM at most."""
    out: dict = {}
    for side in (True, False):
        for i, r in enumerate(refusals):
            entry = graph_operator(graph, i) if r and i not in out else None
            if entry is None or entry.builtin != LSTM or entry.check(graph, i):
                continue
            for gi, (cut, _cm, parts, taken) in enumerate(written):
                if len(parts) != 1 or lstm_side(graph, i, cut) is not side or \
                        gi in {g for g, _, _ in out.values()}:
                    continue
                spec = parts[0][0]
                if len(taken[spec.name][0]) != len(cut.operators):
                    continue
                try:
                    out[i] = (gi, f"g{gi}_{spec.name}",
                              lstm_group(graph, i, cut, side, target, options))
                except (TvmEthosError, PlannerError) as err:
                    where = "after" if side else "before"
                    why[i] += f"; planned apart from the operators {where} it: {err}"
    return out


def _host_reason(cm, kind: str) -> str:
    """Why a group's partition left its operator of TFLite ``kind`` to the host: the
    Ethos-U's reasons where it rejected exactly one operator of that kind in the group, else
    the general line."""
    line = "the Ethos-U does not take it (the partition gives it to the host)"
    report = cm.partition_report
    rejected = [d.rejections[NPU_ID] for d in (report.operators if report else ())
                if d.tflite_name == kind and d.placed_on != NPU_ID and d.rejections.get(NPU_ID)]
    return f"{line}: {'; '.join(rejected[0])}" if len(rejected) == 1 else line


def _graph_parts(graph, refusals, accelerator: str, first: int, why: dict,
                 shared: dict, merged: set = frozenset()) -> list[tuple]:
    """(source operator, name, GraphPart) of every operator the importer refuses that a
    graph-level NPU operator (``graph_operators``) takes, named as the merged plan report
    names its subgraph (``g<report index>_``, the reports numbered from ``first``); for the
    others of such a kind ``why`` gains the reason. ``shared``: each tensor an NPU group
    holds, its offset in the group's stretch of the arena and the stretch's bytes;
    ``merged``: operators already in an NPU group's operator (an LSTM, ``_joined_lstms``)."""
    out = []
    for i, r in enumerate(refusals):
        entry = graph_operator(graph, i) if r and i not in merged else None
        if entry is None:
            continue
        reason = entry.check(graph, i)
        if not reason:
            sub = f"op{i}_{entry.builtin.lower()}"
            try:
                with stage("graph-level NPU operator"):
                    part = entry.emit(graph, i, accelerator, sub, shared)
            except TvmEthosError as err:
                reason = str(err)
            else:
                out.append((i, f"g{first + len(out)}_{sub}", part))
                p = part.payload   # the next graph-level operator lines up with this one
                shared.update((t, (a.offset, p.scratch_bytes)) for t, a in
                              zip(part.ifms + part.ofms, p.inputs + p.outputs))
                continue
        why[i] += f"; the Ethos-U does not take it from the graph: {reason}"
    return out


def _npu_groups(data, graph, refusals, target, options, why, split=frozenset(),
                done=None, host=None) -> list[tuple]:
    """(cut, compiled model, parts, taken) of every NPU group written, in source order;
    a group with an operator of ``split`` is split into one group per operator, the
    operators of ``host`` stay TFLite operators (the reason theirs); ``done``: the compiles
    made so far, by operators (kept from one call to the next).

    A group whose compile or export is refused is tried again one operator at a time: the
    operators refused alone leave the candidates (``why`` says why) and the groups are
    formed anew without them, so one operator the NPU cannot write (a QUANTIZE without a
    stream) does not keep its neighbours off the NPU. A group refused although each of its
    operators compiles alone stays TFLite operators whole."""
    out_of: dict[int, str] = {}
    done = {} if done is None else done
    held = dict(host or {})

    def attempt(ops):
        if ops not in done:
            cut = cut_model(data, graph, ops)
            cm = None
            try:
                direct = compile_group(cut.data, target, options)
                if not isinstance(direct, Declined):   # the group without TVM
                    done[ops] = (cut, direct, direct.parts, direct.taken)
                    return done[ops]
                cm = _compile_group(cut.data, target, options)
                done[ops] = (cut, cm) + npu_parts(cm, cut.data)
            except TvmEthosError as err:
                done[ops] = _partly_taken(cm) or str(err)
        return done[ops]

    while True:
        candidates = [c for ops in npu_candidates(graph, [r is None and i not in out_of
                                                          and i not in held
                                                          for i, r in enumerate(refusals)])
                      for c in ([(i,) for i in ops] if split & set(ops) else [ops])]
        left = len(out_of)
        for ops in candidates:
            result = attempt(ops)
            if not isinstance(result, str):
                continue
            alone = {i: attempt((i,)) for i in ops} if len(ops) > 1 else {ops[0]: result}
            failed = {i: r for i, r in alone.items() if isinstance(r, str)}
            for i in ops if not failed else failed:
                out_of[i] = failed.get(i, result)
        if len(out_of) == left:
            break
    why.update((i, f"it does not compile for the Ethos-U: {r.removeprefix('<bytes>: ')}")
               for i, r in out_of.items())
    why.update(held)
    return [done[ops] for ops in candidates if not isinstance(done[ops], str)]


def _partly_taken(cm) -> str:
    """Why a group compiled (``cm``; None where it did not) cannot be written where the
    Ethos-U rejected some of the Relax operators its source operators became (a
    STRIDED_SLICE over the depth: the slice to the host, the reshape the importer adds to
    the NPU): the Ethos-U's own reasons, '' where it rejected none."""
    report = cm.partition_report if cm is not None else None
    reasons = sorted({r for d in (report.operators if report else ())
                      if d.placed_on != NPU_ID for r in d.rejections.get(NPU_ID, ())})
    return f"the Ethos-U rejects {'; '.join(reasons)}" if reasons else ""


def _check_options(options: dict) -> None:
    """An OptionError for an option no group compile takes or a bad value, up front: a
    group whose compile is refused stays TFLite operators, which must not hide a typo."""
    unknown = sorted(k for k in options if k not in COMPILE_OPTIONS)
    if unknown:
        raise OptionError(f"unknown option{'s' if len(unknown) > 1 else ''} "
                          f"{', '.join(map(repr, unknown))} for target ethos-u,tflite-micro; "
                          f"allowed options: accelerator_config, {', '.join(COMPILE_OPTIONS)}")
    planning_options(dict(options))
    check_runtime_options({k: v for k, v in options.items() if k in RUNTIME_OPTIONS})


def _compile_group(data: bytes, target: str, options: dict):
    # the file holds the streams and copies the other operators: no library is built

    return compile_streams(data, target=target, **options)
