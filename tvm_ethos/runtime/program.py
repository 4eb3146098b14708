"""What a compiled network is to the executor: tensors, constants and subgraphs, as plain data.

Written by the compiler (``tvm_ethos.lower.split.read_program``), saved with the model
(``program.json`` + ``constants.npz``), read by :class:`~tvm_ethos.runtime.executor.Executor`.
No TVM objects: kernels are named by symbol (found in the model's library, or in the OpenCL
module spec).
"""
from __future__ import annotations

import io
import json
from dataclasses import dataclass, field

import numpy as np

PROGRAM_VERSION = 1


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
            lines.append(f"{i}: {sg.name} [{sg.backend}/{sg.device}] {len(sg.steps)} kernel(s) ({ins}) -> ({outs})")
        return "\n".join(lines)

    # ---- serialisation
    def to_json(self) -> str:
        return json.dumps(
            {
                "version": PROGRAM_VERSION,
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
            }
        )

    def constants_npz(self) -> bytes:
        buf = io.BytesIO()
        np.savez(buf, **{f"c{i}": c for i, c in enumerate(self.constants)})
        return buf.getvalue()

    @staticmethod
    def from_json(text: str, constants_npz: bytes | None = None) -> "NetworkProgram":
        d = json.loads(text)
        if d.get("version") != PROGRAM_VERSION:
            raise ValueError(f"program version {d.get('version')}, this tvm-ethos reads {PROGRAM_VERSION}")
        tensors = {t[0]: TensorSpec(t[0], t[1], tuple(t[2]), t[3]) for t in d["tensors"]}
        subgraphs = [
            SubgraphSpec(
                s["name"], s["backend"], s["kind"], s["device"], list(s["inputs"]), list(s["outputs"]),
                [Step(st[0], [tuple(a) for a in st[1]], list(st[2])) for st in s["steps"]],
            )
            for s in d["subgraphs"]
        ]
        consts: list = []
        if constants_npz:
            with np.load(io.BytesIO(constants_npz)) as z:
                consts = [np.ascontiguousarray(z[f"c{i}"]) for i in range(len(z.files))]
        opencl = None
        if d.get("opencl"):
            from tvm_ethos.runtime.opencl_device import OpenCLModuleSpec

            opencl = OpenCLModuleSpec.from_json(d["opencl"])
        return NetworkProgram(list(d["inputs"]), list(d["outputs"]), tensors, subgraphs, consts, opencl)
