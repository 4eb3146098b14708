"""What a compiled network is to the executor: tensors, constants and subgraphs, as plain data.

Written by the compiler (``tvm_ethos.pipeline.network_build.read_program``), saved with the model
(``program.json`` + ``constants.bin``: the constants back to back, 64 B aligned, their dtype /
shape / offset in the JSON - byte-identical from run to run, unlike an ``.npz`` whose inner zip
carries timestamps), read by :class:`~tvm_ethos.runtime.executor.Executor`.
No TVM objects: kernels are named by symbol (found in the model's library, or in the OpenCL
module spec).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

from tvm_ethos.runtime.opencl_device import (
    FunctionSpec,
    KernelArg,
    KernelLaunch,
    OpenCLModuleSpec,
    ParamSpec,
    WorkspaceSpec,
)
from tvm_ethos.runtime.payloads import payload_from_json, payload_to_json
from tvm_ethos.schema import MAX_TENSOR_BYTES, Node, SchemaError, check_tensor_size, parse_json

#: the newest program version this reads: 2 carries ``states``; a program without states is
#: written as version 1, which readers before states read as well
PROGRAM_VERSION = 2
STATELESS_PROGRAM_VERSION = 1
CONSTANT_ALIGNMENT = 64


@dataclass(frozen=True)
class TensorSpec:
    tid: int
    name: str
    shape: tuple
    dtype: str

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class Step:
    """One kernel call in destination-passing style: ``func(*args, *outs)``.

    ``args``: ``("t", tensor id)`` or ``("c", constant index)``.
    """

    func: str
    args: list
    outs: list


@dataclass
class SubgraphSpec:
    """A run of kernels on one backend.

    ``kind``: ``"npu"`` (an emulated NPU subgraph: one emulator kernel) or ``"host"``;
    ``device``: where its kernels run, ``"cpu"`` (TVM llvm functions) or ``"opencl"``.
    """

    name: str
    backend: str
    kind: str
    device: str
    inputs: list
    outputs: list
    steps: list = field(default_factory=list)

    def reads(self) -> list:
        out = []
        for s in self.steps:
            out.extend(a[1] for a in s.args if a[0] == "t")
        return out


@dataclass
class NetworkProgram:
    inputs: list
    outputs: list
    tensors: dict
    subgraphs: list
    constants: list
    opencl: object = None  # OpenCLModuleSpec | None
    #: generated Ethos-U command streams by NPU kernel symbol (``EthosUPayload``), run on the
    #: functional model when the executor's ``npu_runtime`` is "stream"
    payloads: dict = field(default_factory=dict)
    #: indices of the constants that are variables of the model (an LSTM's states): the
    #: kernels write them back in place, the executor keeps its own copy from one run to the
    #: next and ``reset_state`` restores these arrays (their reset values)
    states: tuple = ()

    # ---- derived facts
    def producer(self) -> dict:
        """tensor id -> index of the subgraph that writes it (network inputs: -1)."""
        out = {t: -1 for t in self.inputs}
        for i, sg in enumerate(self.subgraphs):
            for s in sg.steps:
                for o in s.outs:
                    out[o] = i
        return out

    def consumers(self) -> dict:
        """tensor id -> indices of the subgraphs that read it (in order, no duplicates)."""
        out: dict = {}
        for i, sg in enumerate(self.subgraphs):
            for t in sg.inputs:
                lst = out.setdefault(t, [])
                if i not in lst:
                    lst.append(i)
        return out

    def backends(self) -> list:
        seen = []
        for sg in self.subgraphs:
            if sg.backend not in seen:
                seen.append(sg.backend)
        return seen

    def summary(self) -> str:
        lines = []
        for i, sg in enumerate(self.subgraphs):
            ins = ", ".join(self.tensors[t].name for t in sg.inputs)
            outs = ", ".join(self.tensors[t].name for t in sg.outputs)
            lines.append(
                f"{i}: {sg.name} [{sg.backend}/{sg.device}] {len(sg.steps)} kernel(s) ({ins}) -> "
                f"({outs})"
            )
        return "\n".join(lines)

    # ---- serialisation
    def to_json(self) -> str:
        extra = {"payloads": {k: payload_to_json(v) for k, v in sorted(self.payloads.items())}} \
            if self.payloads else {}
        if self.states:
            extra["states"] = sorted(self.states)
        return json.dumps(
            {
                "version": PROGRAM_VERSION if self.states else STATELESS_PROGRAM_VERSION,
                "inputs": self.inputs,
                "outputs": self.outputs,
                "tensors": [[t.tid, t.name, list(t.shape), t.dtype] for t in self.tensors.values()],
                "subgraphs": [
                    {
                        "name": s.name, "backend": s.backend, "kind": s.kind, "device": s.device,
                        "inputs": s.inputs, "outputs": s.outputs,
                        "steps": [[st.func, [list(a) for a in st.args], st.outs] for st in s.steps],
                    }
                    for s in self.subgraphs
                ],
                "opencl": self.opencl.to_json() if self.opencl is not None else None,
                "constants": self._constant_index(),
                **extra,
            }
        )

    def _constant_index(self) -> list:
        out, off = [], 0
        for c in self.constants:
            off = -(-off // CONSTANT_ALIGNMENT) * CONSTANT_ALIGNMENT
            out.append([off, str(c.dtype), list(c.shape)])
            off += c.nbytes
        return out

    def constants_blob(self) -> bytes:
        """All constants back to back (64 B aligned), in the order of the JSON index."""
        parts, off = [], 0
        for (start, _dt, _shape), c in zip(self._constant_index(), self.constants):
            parts.append(b"\0" * (start - off))
            raw = np.ascontiguousarray(c).tobytes()
            parts.append(raw)
            off = start + len(raw)
        return b"".join(parts)

    @staticmethod
    def from_json(text: str | bytes, constants_blob: bytes | None = None) -> "NetworkProgram":
        """Parse and validate ``program.json`` (and ``constants.bin``): every field's type and
        range, every tensor / constant reference and every constant's place in the blob are
        checked, so a damaged description is one :class:`~tvm_ethos.schema.SchemaError` (a
        ``ValueError``) naming the field, before any kernel is looked up."""
        data = text.encode() if isinstance(text, str) else text
        return _parse_program(parse_json(data, "program.json"), constants_blob)


_SUBGRAPH_FIELDS = ("name", "backend", "kind", "device", "inputs", "outputs", "steps")
_PROGRAM_FIELDS = ("version", "inputs", "outputs", "tensors", "subgraphs", "opencl",
                   "constants", "payloads", "states")
SUBGRAPH_KINDS = ("npu", "host")
DEVICES = ("cpu", "opencl")


def _parse_program(d: dict, blob: bytes | None) -> NetworkProgram:
    root = Node(d, "program.json").obj(_PROGRAM_FIELDS)
    version = root.get("version").int()
    if not STATELESS_PROGRAM_VERSION <= version <= PROGRAM_VERSION:
        raise SchemaError(f"program.json: program version {version}, this tvm-ethos reads "
                          f"{STATELESS_PROGRAM_VERSION} to {PROGRAM_VERSION}")
    tensors: dict = {}
    for t in root.get("tensors").items():
        tid_n, name_n, shape_n, dtype_n = t.items(length=4)
        tid = tid_n.int(0, 2**31)
        if tid in tensors:
            raise tid_n.error(f"tensor id {tid} given twice")
        shape, dtype = shape_n.shape(), dtype_n.dtype()
        check_tensor_size(shape, dtype, t.where)
        tensors[tid] = TensorSpec(tid, name_n.str(), shape, dtype)

    def tensor_id(n: Node) -> int:
        tid = n.int(0, 2**31)
        if tid not in tensors:
            raise n.error(f"tensor id {tid} is not in program.json.tensors")
        return tid

    def tensor_ids(node: Node) -> list:
        return [tensor_id(n) for n in node.items()]

    consts = _constants(root.get("constants"), blob)
    subgraphs = []
    for s in root.get("subgraphs").items():
        s.obj(_SUBGRAPH_FIELDS)
        steps = []
        for st in s.get("steps").items():
            func_n, args_n, outs_n = st.items(length=3)
            args = []
            for a in args_n.items():
                tag_n, ref_n = a.items(length=2)
                tag = tag_n.str(("t", "c"))
                if tag == "t":
                    args.append(("t", tensor_id(ref_n)))
                else:
                    c = ref_n.int(0, 2**31)
                    if c >= len(consts):
                        raise ref_n.error(f"constant {c} is not in program.json.constants "
                                          f"({len(consts)} of them)")
                    args.append(("c", c))
            steps.append(Step(func_n.str(nonempty=True), args, tensor_ids(outs_n)))
        subgraphs.append(SubgraphSpec(
            s.get("name").str(), s.get("backend").str(nonempty=True),
            s.get("kind").str(SUBGRAPH_KINDS), s.get("device").str(DEVICES),
            tensor_ids(s.get("inputs")), tensor_ids(s.get("outputs")), steps))
    opencl = None
    if root.opt("opencl") is not None:
        opencl = _opencl(root.get("opencl"))
    payloads = {}
    node = root.opt("payloads")
    if node is not None:
        payloads = {k: payload_from_json(v) for k, v in node.entries()}
    inputs, outputs = tensor_ids(root.get("inputs")), tensor_ids(root.get("outputs"))
    _check_dataflow(inputs, outputs, subgraphs)
    states = _states(root.opt("states"), version, len(consts))
    return NetworkProgram(inputs, outputs, tensors, subgraphs, consts, opencl, payloads, states)


def _states(node: Node | None, version: int, n_consts: int) -> tuple:
    """The state constants' indices: distinct, in range, and only in a version-2 program."""
    if node is None:
        return ()
    if version < PROGRAM_VERSION:
        raise node.error(f"states in a version-{version} program (they came with version "
                         f"{PROGRAM_VERSION}); recompile the model")
    out = []
    for n in node.items():
        c = n.int(0, 2**31)
        if c >= n_consts:
            raise n.error(f"state {c} is not in program.json.constants ({n_consts} of them)")
        if c in out:
            raise n.error(f"state {c} given twice")
        out.append(c)
    return tuple(out)


def _check_dataflow(inputs: list, outputs: list, subgraphs: list) -> None:
    """Every tensor is written before it is read: a subgraph's inputs and its steps' tensor
    arguments come from the network's inputs, an earlier subgraph or an earlier step; each
    subgraph writes all its outputs; the network's outputs are written by some subgraph."""
    available = set(inputs)
    for i, sg in enumerate(subgraphs):
        where = f"program.json.subgraphs[{i}]"
        for t in sg.inputs:
            if t not in available:
                raise SchemaError(f"{where}.inputs: tensor {t} is neither a network input nor "
                                  "written by an earlier subgraph")
        written: set = set()
        for j, st in enumerate(sg.steps):
            for a in st.args:
                if a[0] == "t" and a[1] not in available and a[1] not in written:
                    raise SchemaError(f"{where}.steps[{j}]: reads tensor {a[1]} before "
                                      "anything writes it")
            written.update(st.outs)
        missing = [t for t in sg.outputs if t not in written]
        if missing:
            raise SchemaError(f"{where}.outputs: tensor {missing[0]} is not written by any of "
                              "its steps")
        available |= written
    missing = [t for t in outputs if t not in available]
    if missing:
        raise SchemaError(f"program.json.outputs: tensor {missing[0]} is written by no "
                          "subgraph")


def _constants(node: Node, blob: bytes | None) -> list:
    """The constants of the index ``node``, read from ``blob``: each at the first 64 B aligned
    offset after the one before it (no gaps, no overlaps), inside the blob, which ends where
    the last one does (as written)."""
    consts, end = [], 0
    items = list(node.items())
    if items and blob is None:
        raise SchemaError("constants.bin is missing but program.json.constants lists "
                          f"{len(items)} constant(s)")
    for c in items:
        off_n, dtype_n, shape_n = c.items(length=3)
        off, dtype, shape = off_n.int(), dtype_n.dtype(), shape_n.shape()
        n = check_tensor_size(shape, dtype, c.where)
        start = -(-end // CONSTANT_ALIGNMENT) * CONSTANT_ALIGNMENT
        if off != start:
            raise off_n.error(f"offset {off}: a constant starts at the first "
                              f"{CONSTANT_ALIGNMENT} B aligned offset after the one before "
                              f"it, here {start}")
        end = off + n
        if end > len(blob):
            raise c.error(f"bytes {off}..{end} are past the end of constants.bin "
                          f"({len(blob)} bytes)")
        consts.append(np.frombuffer(blob, dtype=dtype, count=n // np.dtype(dtype).itemsize,
                                    offset=off).reshape(shape).copy())
    if blob is not None and len(blob) != end:
        raise SchemaError(f"constants.bin is {len(blob)} bytes, its index in program.json "
                          f"ends at {end}")
    return consts


def _opencl(node: Node):
    """The OpenCL kernels' description (a JSON text inside program.json), field by field."""
    text = node.str()
    root = Node(parse_json(text.encode("utf-8", "replace"), f"{node.where} (JSON text)"),
                node.where).obj(("source", "functions"))
    functions = {}
    for key, f in root.get("functions").entries():
        f.obj(("name", "params", "launches", "workspaces"))
        params = []
        for p in f.get("params").items():
            p.obj(("name", "shape", "dtype", "written"))
            shape, dtype = p.get("shape").shape(), p.get("dtype").dtype()
            check_tensor_size(shape, dtype, p.where)
            params.append(ParamSpec(p.get("name").str(), shape, dtype, p.get("written").bool()))
        launches = []
        for k in f.get("launches").items():
            k.obj(("kernel", "args", "global_size", "local_size"))
            args = []
            for a in k.get("args").items():
                a.obj(("kind", "name", "dtype", "value"))
                value = a.opt("value")
                if value is not None and (isinstance(value.value, bool) or
                                          not isinstance(value.value, (int, float))):
                    raise value.error(f"a number or null, got {value.value!r:.40}")
                args.append(KernelArg(a.get("kind").str(("param", "workspace", "scalar")),
                                      a.get("name").str(), a.get("dtype").str(),
                                      None if value is None else value.value))
            launches.append(KernelLaunch(
                k.get("kernel").str(nonempty=True), tuple(args),
                tuple(d.int(0, 2**31) for d in k.get("global_size").items(max_len=3)),
                tuple(d.int(0, 2**31) for d in k.get("local_size").items(max_len=3))))
        workspaces = tuple(
            WorkspaceSpec(w.obj(("name", "nbytes")).get("name").str(),
                          w.get("nbytes").int(0, MAX_TENSOR_BYTES))
            for w in f.get("workspaces").items())
        functions[key] = FunctionSpec(f.get("name").str(), tuple(params), tuple(launches),
                                      workspaces)
    return OpenCLModuleSpec(source=root.get("source").str(), functions=functions)
