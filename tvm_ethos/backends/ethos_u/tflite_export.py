"""The compiled model as a TFLite Micro ``.tflite``: each Ethos-U subgraph's command stream
written as one ``ethos-u`` custom operator in the layout Vela's writer uses, the operators
that run on the host copied from the source model around them, so TFLite Micro's Ethos-U
kernel and driver run the NPU part on a board and its reference kernels the rest.

An ``ethos-u`` operator's inputs are, in Vela's order: its driver payload (command stream),
the read-only flash buffer, the scratch arena, the fast scratch, then its IFMs; its outputs
are its OFMs. Every operator shares one flash tensor and one scratch arena, as in Vela's
files; the command stream addresses feature maps as offsets in that arena, so the
``OfflineMemoryAllocation`` metadata pins every IFM/OFM at its arena offset (the scratch
tensor at 0), and TFLite Micro's planner places the host operators' other tensors. Each
subgraph's stream was generated with its data at offset 0 of its own regions; with several,
each gets its own stretch of the flash and arena and its stream is relocated there
(``ethosu_stream.relocate``). Where the fast scratch is empty the scratch tensor is passed
twice, as Vela does on an Ethos-U55.

Which source operators an NPU subgraph took is recovered from the source graph: the
operators the partition report puts on the host are every source operator of their kinds,
the rest fall into connected NPU groups, and each group must match one subgraph's inputs and
outputs. A model where that cannot be told (an operator kind on both sides, groups that do not
match) is refused by name rather than written as a file that would compute something else.
"""

from __future__ import annotations

import dataclasses
import heapq
from collections import Counter

import numpy as np

from ethosu_stream.relocate import relocate
from ethosu_stream.tflite_custom_op import command_words
from planner.tflite_format import DECODING_ERRORS
from tvm_ethos.backends.ethos_u.arena_layout import CpuStep, NpuStep, Slot, arena_bases
from tvm_ethos.backends.ethos_u.stream_base import npu_accelerator, vela_api
from tvm_ethos.backends.ethos_u.stream_run import arena_writes
from tvm_ethos.backends.ethos_u.tflite_writer import Operator, Tensor, copied_options, write_model
from tvm_ethos.errors import TargetError, UnsupportedModelError

BACKEND = "ethos-u"
CUSTOM_CODE = "ethos-u"
#: Vela's custom options of an NPU operator: a FlexBuffer holding the uint8 1
#: (``CustomOptionsSerializer.CUSTOM_OPTIONS_NPU_OP`` in ethosu/vela/tflite_mapping.py)
NPU_OP_OPTIONS = bytes([0x01, 0x04, 0x01])
_BUILTIN_CUSTOM = 32
_UINT8 = 3
_TYPES = {"int8": 9, "uint8": 3, "int16": 7, "int32": 2, "int64": 4}   # int64: ARG_MAX
_TYPE_NAMES = {v: k for k, v in _TYPES.items()}
#: where each subgraph's flash, arena and fast scratch start (the streams' own alignment)
_ALIGN = 16
_NOT_THE_SOURCE = "export with the .tflite it was compiled from"


def export_tflite_bytes(cm, source) -> bytes:
    """The ``.tflite`` of ``cm``, a CompiledModel compiled from the TFLite model ``source``
    (its bytes or path): the source names, shapes and quantization of the model's tensors and
    its host operators, which the compiled model does not keep."""
    data = _source_bytes(source)
    npu, groups = npu_parts(cm, data)
    return write_tflite(data, [(spec.name, payload) for spec, payload in npu], groups)


def npu_parts(cm, data: bytes) -> tuple[list[tuple], dict[str, tuple]]:
    """(spec, payload) of every Ethos-U subgraph of ``cm`` (compiled from the TFLite model
    ``data``) and, by subgraph name, the source operators it took with its IFM and OFM source
    tensors (the payload's order); the refusal naming what is in the way otherwise."""
    npu = _npu_subgraphs(cm)
    model = _read_source(data)
    g = model.Subgraphs(0)
    graph = SourceGraph(model)
    known = dict(zip(cm.program.inputs, _boundary(g, g.InputsAsNumpy(), cm.inputs, "input")))
    known.update(zip(cm.program.outputs, _boundary(g, g.OutputsAsNumpy(), cm.outputs, "output")))
    return npu, _npu_groups(cm, graph, npu, known)


def write_tflite(data: bytes, npu: list[tuple], groups: dict[str, tuple]) -> bytes:
    """The TFLite Micro file of the source model ``data``: each (name, payload) of ``npu`` as
    an ``ethos-u`` operator in place of the source operators ``groups[name]`` names (with its
    IFM and OFM source tensors), every other source operator copied unchanged."""
    model = _read_source(data)
    return _Layout(data, SourceGraph(model), npu, groups).write()


def _npu_subgraphs(cm) -> list[tuple]:
    """(spec, payload) of every Ethos-U subgraph in program order, or the refusal naming what
    is in the way."""
    ids = [t.strip().split()[0] for t in str(cm.targets).split(",") if t.strip()]
    if BACKEND not in ids:
        raise TargetError(
            f"a TFLite Micro .tflite holds Ethos-U command streams; this model was "
            f"compiled for {cm.targets}: compile it for 'ethos-u,llvm'"
        )
    if cm.program is None:
        raise UnsupportedModelError("the compiled model has no executor program to export")
    other = [s for s in cm.program.subgraphs if s.kind == "npu" and s.backend != BACKEND]
    if other:
        raise UnsupportedModelError(
            f"subgraph {other[0].name} runs on {other[0].backend}; a TFLite Micro file holds "
            "Ethos-U operators and TFLite operators only"
        )
    out = []
    for spec in cm.program.subgraphs:
        if spec.kind != "npu":
            continue
        payload = cm.program.payloads.get(spec.name)
        if payload is None:
            entry = ((cm.plan_report or {}).get("streams") or {}).get(spec.name) or {}
            why = entry.get("reason", "no command stream was generated for it")
            raise UnsupportedModelError(
                f"NPU subgraph {spec.name} has no command stream ({why}); it runs only on the "
                "emulator, so it cannot be written as an ethos-u operator"
            )
        out.append((spec, payload))
    if not out:
        names = _operators_on(cm, {s.backend for s in cm.program.subgraphs})
        rejected = _rejections(cm)
        raise UnsupportedModelError(
            "no operator of the model runs on the Ethos-U"
            + (f" ({', '.join(names)} run on the host)" if names else "")
            + ": there is no ethos-u operator to write"
            + (f" (the Ethos-U rejects {'; '.join(rejected)})" if rejected else "")
        )
    return out


def _operators_on(cm, where: set) -> list[str]:
    """TFLite operator names the partition report places on a host subgraph/backend."""
    if cm.report is None:
        return []
    return sorted(
        {
            op.tflite_name
            for op in cm.report.operators
            if op.placed_on in where or op.subgraph in where
        }
    )


def _rejections(cm) -> list[str]:
    """What the Ethos-U's checks said of each operator they rejected, in program order."""
    if cm.report is None:
        return []
    return [f"{op.tflite_name}: {'; '.join(op.rejections[BACKEND])}"
            for op in cm.report.operators if op.rejections.get(BACKEND)]


def _source_bytes(source) -> bytes:
    if source is None:
        raise UnsupportedModelError(
            "the compiled model does not hold its source .tflite (it was loaded from "
            "a package, or compiled from an IRModule not imported from a .tflite in this "
            "process): pass it as "
            "export_tflite(path, model=...)"
        )
    if not isinstance(source, (bytes, bytearray)):
        with open(source, "rb") as f:
            source = f.read()
    return bytes(source)


def read_source(source: bytes):
    """The source's flatbuffer model, refused by name unless a TFLite model of one
    subgraph."""
    return _read_source(source)


def _read_source(source: bytes):
    import tflite

    if len(source) < 8 or source[4:8] != b"TFL3":
        raise UnsupportedModelError(
            "the source model is not a TFLite flatbuffer; only a model compiled "
            "from a .tflite can be exported as one"
        )
    model = tflite.Model.GetRootAsModel(source, 0)
    if model.SubgraphsLength() != 1:
        raise UnsupportedModelError(
            f"the source .tflite has {model.SubgraphsLength()} subgraphs; only "
            "a model of one subgraph can be exported"
        )
    return model


def _boundary(g, indices, specs, what: str) -> list[int]:
    """The source tensor of each compiled input/output, by the name the importer kept."""
    names = [g.Tensors(t).Name().decode() for t in indices.tolist()]
    if sorted(names) != sorted(s.name for s in specs) or len(set(names)) != len(names):
        raise UnsupportedModelError(
            f"the source .tflite's {what}s {names} are not the compiled model's "
            f"{[s.name for s in specs]}: {_NOT_THE_SOURCE}"
        )
    return [int(indices[names.index(s.name)]) for s in specs]


class SourceGraph:
    """The source subgraph's operators as tensor reads and writes."""

    def __init__(self, model):
        import tflite

        self.model = model
        self.g = g = model.Subgraphs(0)
        names = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}
        self.kinds, self.reads, self.writes, self.codes = [], [], [], []
        for i in range(g.OperatorsLength()):
            op = g.Operators(i)
            code = model.OperatorCodes(op.OpcodeIndex())
            builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
            custom = code.CustomCode().decode() if code.CustomCode() else None
            self.kinds.append(custom or names.get(builtin, str(builtin)))
            self.codes.append((builtin, custom, max(code.Version(), 1)))
            self.reads.append([int(t) for t in op.InputsAsNumpy() if t >= 0
                               and not self.constant(int(t))] if op.InputsLength() else [])
            self.writes.append([int(t) for t in op.OutputsAsNumpy()] if op.OutputsLength() else [])
        self.graph_outputs = set(g.OutputsAsNumpy().tolist())

    def constant(self, t: int) -> bool:
        return self.model.Buffers(self.g.Tensors(t).Buffer()).DataLength() > 0

    def intermediates(self, i: int) -> list[int]:
        op = self.g.Operators(i)
        return [int(t) for t in op.IntermediatesAsNumpy()] if op.IntermediatesLength() else []

    def all_inputs(self, i: int) -> list[int]:
        op = self.g.Operators(i)
        return [int(t) for t in op.InputsAsNumpy()] if op.InputsLength() else []

    def boundary(self, ops: set[int]) -> tuple[list[int], list[int]]:
        """(tensors ``ops`` read that none of them writes, tensors they write that another
        operator or the graph's outputs read), each in first-use order."""
        written = {t for i in ops for t in self.writes[i]}
        read_outside = {t for i in range(len(self.kinds)) if i not in ops for t in self.reads[i]}
        ins, outs = [], []
        for i in sorted(ops):
            # one at a time: an operator may read one tensor twice (``x * x``), still one input
            for t in self.reads[i]:
                if t not in written and t not in ins:
                    ins.append(t)
            for t in self.writes[i]:
                if (t in read_outside or t in self.graph_outputs) and t not in outs:
                    outs.append(t)
        return ins, outs

    def numel_dtype(self, t: int) -> tuple[int, int]:
        tensor = self.g.Tensors(t)
        n = int(np.prod(tensor.ShapeAsNumpy())) if tensor.ShapeLength() else 1
        return n, tensor.Type()


def _npu_groups(cm, graph: SourceGraph, npu, known: dict) -> dict[str, tuple]:
    """Subgraph name -> (its source operators, its IFM source tensors, its OFM source
    tensors), IFMs/OFMs in the payload's order; ``known`` (program tensor -> source tensor)
    grows as the subgraphs are matched."""
    n_ops = len(graph.kinds)
    host_kinds = Counter(op.tflite_name for op in (cm.report.operators if cm.report else [])
                         if op.placed_on != BACKEND)
    if "?" in host_kinds:
        raise UnsupportedModelError("the partition report has a host operator of unknown kind, "
                                    "so the host operators cannot be found in the source")
    source_kinds = Counter(graph.kinds)
    for kind, n in sorted(host_kinds.items()):
        if source_kinds[kind] != n:
            raise UnsupportedModelError(
                f"{n} of the source's {source_kinds[kind]} {kind} operators run on the host "
                f"and the rest on the Ethos-U{_rejected_for(cm, kind)}; which is which cannot "
                "be told from the source, so the model cannot be written with host operators "
                f"(change the model so that the Ethos-U takes every {kind} or none)"
            )
    npu_ops = [i for i in range(n_ops) if graph.kinds[i] not in host_kinds]
    # one subgraph and nothing on the host: every operator is in it, joined or not
    groups = [set(npu_ops)] if len(npu) == 1 and not host_kinds else _connected(graph, npu_ops)
    out: dict[str, tuple] = {}
    for spec, payload in npu:
        matches = []
        for ops in groups:
            ins, outs = graph.boundary(ops)
            pair = (_match(graph, spec.inputs, payload.inputs, ins, known),
                    _match(graph, spec.outputs, payload.outputs, outs, known))
            if None not in pair:
                matches.append((ops, pair))
        if len(matches) != 1:
            raise UnsupportedModelError(
                f"NPU subgraph {spec.name} matches {len(matches)} of the source's "
                f"{len(groups)} groups of NPU operators by its inputs and outputs; the "
                "operators it took cannot be told, so the model cannot be written"
            )
        ops, (ifms, ofms) = matches[0]
        groups.remove(ops)
        known.update(zip(spec.inputs, ifms))
        known.update(zip(spec.outputs, ofms))
        out[spec.name] = (tuple(sorted(ops)), tuple(ifms), tuple(ofms))
    if groups:
        left = sorted(graph.kinds[i] for ops in groups for i in ops)
        raise UnsupportedModelError(
            f"source operators {', '.join(left)} belong to no compiled subgraph; "
            f"{_NOT_THE_SOURCE}"
        )
    return out


def _rejected_for(cm, kind: str) -> str:
    """Why the Ethos-U rejected the host operators of ``kind`` (the partition report's
    reasons, each once), as words after a clause; "" where it gave none."""
    reasons = sorted({r for op in (cm.report.operators if cm.report else [])
                      if op.placed_on != BACKEND and op.tflite_name == kind
                      for r in op.rejections.get(BACKEND, ())})
    return f" (the Ethos-U rejects {'; '.join(reasons)})" if reasons else ""


def _connected(graph: SourceGraph, ops: list[int]) -> list[set[int]]:
    """``ops`` in groups joined by the tensors one writes and another reads."""
    import networkx as nx

    writer = {t: i for i in ops for t in graph.writes[i]}
    g = nx.Graph()
    g.add_nodes_from(ops)
    g.add_edges_from((writer[t], i) for i in ops for t in graph.reads[i] if t in writer)
    return sorted((set(c) for c in nx.connected_components(g)), key=min)


def _match(graph, program_tensors, arena_tensors, source_tensors, known) -> list[int] | None:
    """The source tensor of each of a subgraph's boundary tensors (payload order), or None
    where they do not correspond one to one: a tensor already identified must be that one,
    the others are told apart by element count and type."""
    if len(program_tensors) != len(source_tensors):
        return None
    left = list(source_tensors)
    out: list[int | None] = []
    for pt, at in zip(program_tensors, arena_tensors):
        if pt in known:
            out.append(known[pt] if known[pt] in left else -1)
        else:
            key = (int(np.prod(at.shape)), _TYPES.get(at.dtype))
            same = [t for t in left if graph.numel_dtype(t) == key]
            out.append(same[0] if len(same) == 1 else -1)
        if out[-1] == -1:
            return None
        left.remove(out[-1])
    for t, at in zip(out, arena_tensors):
        if graph.numel_dtype(t) != (int(np.prod(at.shape)), _TYPES.get(at.dtype)):
            return None
    return out


class _Layout:
    """The written file: operators in an execution order, tensors in first-use order, each
    subgraph's flash, arena and fast scratch at its own offset."""

    def __init__(self, data: bytes, graph: SourceGraph, npu, groups):
        self.data, self.graph = data, graph
        self.npu = list(npu)
        self.groups = groups
        self.order = self._order()
        arena_at = self._arena_bases()
        flash = fast = 0
        self.bases = {}
        for name, p in self.npu:
            flash, fast = _aligned(flash), _aligned(fast)
            self.bases[name] = (flash, arena_at[name], fast)
            flash, fast = flash + len(p.flash), fast + p.fast_scratch_bytes
        arena = max((arena_at[name] + p.scratch_bytes for name, p in self.npu), default=0)
        parts, end = [], 0
        for name, p in self.npu:
            parts.append(bytes(self.bases[name][0] - end) + p.flash)
            end = self.bases[name][0] + len(p.flash)
        self.flash_bytes = b"".join(parts)
        self.arena_bytes, self.fast_bytes = arena, fast
        self.accelerator = self.npu[0][1].accelerator if self.npu else None

    def write(self) -> bytes:
        g = self.graph.g
        tensors: list[Tensor] = []
        index: dict = {}

        def tensor(key, make) -> int:
            if key not in index:
                index[key] = len(tensors)
                tensors.append(make())
            return index[key]

        offsets: dict[int, int] = {}
        operators = []
        for node in self.order:
            if isinstance(node, str):
                operators.append(self._npu_operator(node, tensor, offsets))
            else:
                ins = [tensor(t, lambda t=t: self._source_tensor(t)) if t >= 0 else -1
                       for t in self.graph.all_inputs(node)]
                outs = [tensor(t, lambda t=t: self._source_tensor(t))
                        for t in self.graph.writes[node]]
                mids = [tensor(t, lambda t=t: self._source_tensor(t))
                        for t in self.graph.intermediates(node)]
                options, custom = copied_options(self.data, node)
                operators.append(Operator(self.graph.codes[node], tuple(ins), tuple(outs),
                                          options, custom, tuple(mids)))
        graph_in = [tensor(int(t), lambda t=int(t): self._source_tensor(t))
                    for t in g.InputsAsNumpy()]
        graph_out = [tensor(int(t), lambda t=int(t): self._source_tensor(t))
                     for t in g.OutputsAsNumpy()]
        for t, off in offsets.items():
            tensors[index[t]] = dataclasses.replace(tensors[index[t]], offset=off)
        return write_model(tensors, operators, graph_in, graph_out,
                           f"tvm-ethos Ethos-U {self.accelerator}" if self.accelerator
                           else "tvm-ethos (no Ethos-U operator)")

    def _arena_bases(self) -> dict[str, int]:
        """Each subgraph's start in the shared arena (arena_layout.py: a tensor two ethos-u
        operators share sits at one address, so their stretches may overlap)."""
        payloads = dict(self.npu)
        reads = [tuple(self.groups[n][1]) if isinstance(n, str) else tuple(self.graph.reads[n])
                 for n in self.order]
        read_later = [set(self.graph.graph_outputs).union(*reads[k + 1:])
                      for k in range(len(reads))]
        g = self.graph.g
        steps = []
        for k, node in enumerate(self.order):
            if isinstance(node, str):
                _, ifms, ofms = self.groups[node]
                p = payloads[node]
                # an input read again after it must lie where the stream writes nothing,
                # and a stream with a state may cover the states of others it does not
                # write: what it writes is found only then (a dry run of the stream)
                writes = arena_writes(p) if read_later[k] & set(ifms) or any(
                    g.Tensors(t).IsVariable() for t in ifms) else None
                steps.append(NpuStep(node, _slots(ifms, p.inputs), _slots(ofms, p.outputs),
                                     p.scratch_bytes, writes))
            else:
                steps.append(CpuStep(reads[k], tuple(self.graph.writes[node])))
        names = {t: (g.Tensors(t).Name() or b"").decode() for s in steps
                 if isinstance(s, NpuStep) for t in (x.tensor for x in s.ifms + s.ofms)}
        variables = frozenset(t for s in steps if isinstance(s, NpuStep) for t in
                              (x.tensor for x in s.ifms) if g.Tensors(t).IsVariable())
        return arena_bases(steps, set(self.graph.graph_outputs), names, variables)

    def _order(self) -> list:
        """Host operators and subgraphs, each after what it reads (ties: source order)."""
        owner = {i: name for name, (ops, _, _) in self.groups.items() for i in ops}
        nodes = {}
        for i in range(len(self.graph.kinds)):
            node = owner.get(i, i)
            nodes.setdefault(node, []).append(i)
        writer = {t: owner.get(i, i) for i in range(len(self.graph.kinds))
                  for t in self.graph.writes[i]}
        deps = {n: {writer[t] for i in ops for t in self.graph.reads[i]
                    if t in writer and writer[t] != n} for n, ops in nodes.items()}
        key = {n: (min(ops), str(n)) for n, ops in nodes.items()}
        ready = [key[n] + (n,) for n in nodes if not deps[n]]
        heapq.heapify(ready)
        done, order = set(), []
        while ready:
            *_, n = heapq.heappop(ready)
            done.add(n)
            order.append(n)
            for m in nodes:
                if m not in done and n in deps[m] and deps[m] <= done and \
                        all(r[-1] != m for r in ready):
                    heapq.heappush(ready, key[m] + (m,))
        if len(order) != len(nodes):
            raise UnsupportedModelError(
                "the Ethos-U subgraphs and the host operators read each other's results in a "
                "cycle, so no operator order runs them; the model cannot be written")
        return order

    def _npu_operator(self, name: str, tensor, offsets: dict) -> Operator:
        payload = dict(self.npu)[name]
        flash_base, arena_base, fast_base = self.bases[name]
        _, ifms, ofms = self.groups[name]
        cmd = self._driver_payload(name, payload)
        cmd_t = tensor(("cmd", name), lambda: Tensor("ethos_u_command_stream", (len(cmd),),
                                                      _UINT8, cmd))
        flash_t = tensor("flash", lambda: Tensor("read_only", (len(self.flash_bytes),), _UINT8,
                                                 self.flash_bytes))
        scratch_t = tensor("scratch", lambda: Tensor("scratch", (self.arena_bytes,), _UINT8,
                                                     offset=0))
        fast_t = scratch_t
        if self.fast_bytes:
            fast_t = tensor("fast", lambda: Tensor("scratch_fast", (self.fast_bytes,), _UINT8,
                                                   offset=0))
        fm = []
        for src, arena in list(zip(ifms, payload.inputs)) + list(zip(ofms, payload.outputs)):
            _check_same(name, self.graph.g.Tensors(src), arena)
            off = arena_base + arena.offset
            if offsets.setdefault(src, off) != off:
                raise UnsupportedModelError(
                    f"tensor {self.graph.g.Tensors(src).Name().decode()!r} sits at arena "
                    f"offset {offsets[src]} for one Ethos-U subgraph and {off} for {name}; "
                    "one tensor has one place in a TFLite Micro arena"
                )
            fm.append(tensor(src, lambda src=src: self._source_tensor(src)))
        inputs = (cmd_t, flash_t, scratch_t, fast_t) + tuple(fm[: len(ifms)])
        return Operator((_BUILTIN_CUSTOM, CUSTOM_CODE, 1), inputs, tuple(fm[len(ifms):]),
                        custom_options=NPU_OP_OPTIONS)

    def _driver_payload(self, name: str, payload) -> bytes:
        flash, arena, fast = self.bases[name]
        if not (flash or arena or fast):
            return payload.driver_payload

        words = relocate(command_words(payload.driver_payload), {0: flash, 1: arena, 2: fast})
        return bytes(vela_api().npu_create_driver_payload(
            [int(w) for w in words], npu_accelerator(payload.accelerator)))

    def _source_tensor(self, t: int) -> Tensor:
        return source_tensor(self.graph, t)


def source_tensor(graph: SourceGraph, t: int) -> Tensor:
    """Source tensor ``t`` as the writer takes it: name, shape, type, constant data,
    quantization and whether it is a state tensor, unchanged."""
    src = graph.g.Tensors(t)
    shape = tuple(int(d) for d in src.ShapeAsNumpy()) if src.ShapeLength() else ()
    buf = graph.model.Buffers(src.Buffer())
    data = buf.DataAsNumpy().tobytes() if buf.DataLength() else b""
    return Tensor(_name(src), shape, src.Type(), data, src.Quantization(),
                  variable=bool(src.IsVariable()))


def _name(src) -> str:
    """A source tensor's name; ``""`` where it cannot be read (its string runs past the end
    of the file, which the front door lets through for the operators TFLite Micro keeps:
    TFLite Micro reads no names, so the copy goes without it)."""
    try:
        return (src.Name() or b"").decode()
    except DECODING_ERRORS:
        return ""


def _slots(tensors, arena) -> tuple[Slot, ...]:
    return tuple(Slot(t, a.offset, int(np.prod(a.shape)) * np.dtype(a.dtype).itemsize)
                 for t, a in zip(tensors, arena))


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def _check_same(sym: str, tensor, arena) -> None:
    dtype = _TYPE_NAMES.get(tensor.Type())
    n = int(np.prod(tensor.ShapeAsNumpy())) if tensor.ShapeLength() else 1
    if dtype != arena.dtype or n != int(np.prod(arena.shape)):
        raise UnsupportedModelError(
            f"NPU subgraph {sym}: tensor {tensor.Name().decode()!r} is {dtype} "
            f"with {n} elements in the source, the stream's is {arena.dtype} "
            f"{arena.shape}: {_NOT_THE_SOURCE}"
        )
