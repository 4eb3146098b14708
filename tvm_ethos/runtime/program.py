"""What a compiled network is to the executor: tensors, constants and subgraphs, as plain data.

Written by the compiler (``tvm_ethos.lower.network_build.read_program``), saved with the model
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

PROGRAM_VERSION = 1
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
        extra = {"payloads": {k: _payload_json(v) for k, v in sorted(self.payloads.items())}} \
            if self.payloads else {}
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
    def from_json(text: str, constants_blob: bytes | None = None) -> "NetworkProgram":
        d = json.loads(text)
        if d.get("version") != PROGRAM_VERSION:
            raise ValueError(
                f"program version {d.get('version')}, this tvm-ethos reads {PROGRAM_VERSION}"
            )
        tensors = {t[0]: TensorSpec(t[0], t[1], tuple(t[2]), t[3]) for t in d["tensors"]}
        subgraphs = [
            SubgraphSpec(
                s["name"],
                s["backend"],
                s["kind"],
                s["device"],
                list(s["inputs"]),
                list(s["outputs"]),
                [Step(st[0], [tuple(a) for a in st[1]], list(st[2])) for st in s["steps"]],
            )
            for s in d["subgraphs"]
        ]
        consts: list = []
        for off, dt, shape in d.get("constants", []):
            n = int(np.prod(shape, dtype=np.int64)) * np.dtype(dt).itemsize
            if constants_blob is None or off + n > len(constants_blob):
                raise ValueError("constants.bin is missing or shorter than its index")
            consts.append(
                np.frombuffer(
                    constants_blob, dtype=dt, count=n // np.dtype(dt).itemsize, offset=off
                )
                .reshape(shape)
                .copy()
            )
        opencl = None
        if d.get("opencl"):
            from tvm_ethos.runtime.opencl_device import OpenCLModuleSpec

            opencl = OpenCLModuleSpec.from_json(d["opencl"])
        payloads = {k: _payload_from_json(v) for k, v in d.get("payloads", {}).items()}
        return NetworkProgram(
            list(d["inputs"]), list(d["outputs"]), tensors, subgraphs, consts, opencl, payloads
        )


_PAYLOAD_BYTES = ("driver_payload", "flash")


def _payload_json(p) -> dict:
    import base64
    import dataclasses

    d = dataclasses.asdict(p)
    for k in _PAYLOAD_BYTES:
        d[k] = base64.b64encode(d[k]).decode()
    for k in ("inputs", "outputs"):
        d[k] = [[a["name"], list(a["shape"]), a["dtype"], a["offset"]] for a in d[k]]
    return d


def _payload_from_json(d: dict):
    import base64

    from tvm_ethos.backends.ethos_u.payload import ArenaTensor, EthosUPayload

    d = dict(d)
    for k in _PAYLOAD_BYTES:
        d[k] = base64.b64decode(d[k])
    for k in ("inputs", "outputs"):
        d[k] = tuple(ArenaTensor(n, tuple(s), t, o) for n, s, t, o in d[k])
    d["block_configs"] = tuple((str(why), int(n)) for why, n in d.get("block_configs", ()))
    return EthosUPayload(**d)
