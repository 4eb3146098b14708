"""Reading what Vela's ``.tflite`` hands TFLite Micro: the ``ethos-u`` custom operator's
driver payload (command stream), read-only "flash" buffer and scratch arena, and where the
network's input and output sit in that arena (the ``OfflineMemoryAllocation`` metadata).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .accelerator import accelerator_info
from .errors import StreamError
from .memory import SHRAM_REGION, Memory
from .run import StreamStats, run_stream

CUSTOM_CODE = b"ethos-u"
_FOURCC = int.from_bytes(b"COP1", "little")
_DA_CONFIG, _DA_CMDSTREAM, _DA_READ_APB, _DA_DUMP_SHRAM, _DA_NOP = 1, 2, 3, 4, 5
# region (base-pointer index) of each custom-op input after the command stream
FLASH_REGION, SCRATCH_REGION, SCRATCH_FAST_REGION = 0, 1, 2
_DTYPES = {9: np.int8, 3: np.uint8, 7: np.int16, 2: np.int32}


def command_words(payload: bytes) -> np.ndarray:
    """The register command words inside a driver payload (``COP1`` header, config, NOPs,
    then one command-stream block)."""
    if len(payload) % 4:
        raise StreamError(f"the driver payload is {len(payload)} bytes, not whole 32-bit words")
    w = np.frombuffer(payload, "<u4")
    if w.size == 0 or int(w[0]) != _FOURCC:
        raise StreamError("the driver payload does not start with 'COP1': not a Vela command "
                          "stream tensor")
    i = 1
    while i < w.size:
        tag = int(w[i])
        kind = tag & 0xFF
        if kind == _DA_CMDSTREAM:
            n = (tag >> 16) | (((tag >> 8) & 0xFF) << 16)
            if i + 1 + n > w.size:
                raise StreamError(f"the driver payload announces {n} command words but holds "
                                  f"{w.size - i - 1}: the stream is cut short")
            return w[i + 1:i + 1 + n].astype(np.int64)
        if kind not in (_DA_CONFIG, _DA_READ_APB, _DA_DUMP_SHRAM, _DA_NOP):
            raise StreamError(f"driver payload word {i}: unknown driver action {kind}")
        i += 3 if kind == _DA_CONFIG else 1
    raise StreamError("the driver payload holds no command stream")


@dataclass(frozen=True)
class TensorSlot:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    arena_offset: int
    scale: float
    zero_point: int


@dataclass(frozen=True)
class EthosUOp:
    """One ``ethos-u`` custom operator of a Vela output model."""

    op_index: int
    words: np.ndarray
    flash: bytes
    scratch_bytes: int
    scratch_fast_bytes: int
    inputs: tuple[TensorSlot, ...]
    outputs: tuple[TensorSlot, ...]

    def run(self, inputs: list[np.ndarray], accelerator: str, trace: Callable | None = None,
            *, compute: bool = True) -> tuple[list[np.ndarray], StreamStats]:
        """Places ``inputs`` at their arena offsets, runs the stream (``trace`` and
        ``compute`` as in :func:`run_stream`) and reads the outputs back."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f"the ethos-u operator takes {len(self.inputs)} input(s), "
                             f"got {len(inputs)}")
        slots = self.inputs + self.outputs
        arena = max([self.scratch_bytes] + [s.arena_offset + int(np.prod(s.shape)) *
                                            s.dtype.itemsize for s in slots])
        mem = Memory({FLASH_REGION: self.flash, SCRATCH_REGION: arena,
                      SCRATCH_FAST_REGION: max(self.scratch_fast_bytes, 1),
                      SHRAM_REGION: accelerator_info(accelerator).shram_bytes})
        for slot, x in zip(self.inputs, inputs):
            x = np.asarray(x)
            if x.dtype != slot.dtype or x.size != int(np.prod(slot.shape)):
                raise ValueError(f"input {slot.name!r} must be {slot.dtype} with shape "
                                 f"{slot.shape}, got {x.dtype} {x.shape}")
            x = x.reshape(-1).view(np.uint8)
            mem.regions[SCRATCH_REGION][slot.arena_offset:slot.arena_offset + x.size] = x
        stats = run_stream(self.words, mem, accelerator, trace, compute=compute)
        outs = []
        for slot in self.outputs:
            n = int(np.prod(slot.shape)) * slot.dtype.itemsize
            raw = mem.regions[SCRATCH_REGION][slot.arena_offset:slot.arena_offset + n]
            outs.append(raw.copy().view(slot.dtype).reshape(slot.shape))
        return outs, stats


def _offline_offsets(model) -> list[int] | None:
    for i in range(model.MetadataLength()):
        md = model.Metadata(i)
        if md.Name() == b"OfflineMemoryAllocation":
            raw = model.Buffers(md.Buffer()).DataAsNumpy()
            vals = np.frombuffer(raw.tobytes(), "<i4")
            return [int(v) for v in vals[3:]]
    return None


def read_ethos_u_ops(data: bytes) -> list[EthosUOp]:
    """Every ``ethos-u`` operator of subgraph 0 of a Vela-compiled ``.tflite``."""
    import tflite

    model = tflite.Model.GetRootAsModel(data, 0)
    g = model.Subgraphs(0)
    offsets = _offline_offsets(model)
    if offsets is None:
        raise ValueError("the model has no OfflineMemoryAllocation metadata: not written by "
                         "Vela's CLI, so the arena offsets of its input/output are unknown")

    def buffer(t: int) -> bytes:
        b = model.Buffers(g.Tensors(t).Buffer())
        return b.DataAsNumpy().tobytes() if b.DataLength() else b""

    def slot(t: int) -> TensorSlot:
        tens = g.Tensors(t)
        q = tens.Quantization()
        scale = float(q.ScaleAsNumpy()[0]) if q is not None and q.ScaleLength() else 0.0
        zp = int(q.ZeroPointAsNumpy()[0]) if q is not None and q.ZeroPointLength() else 0
        return TensorSlot(t, tens.Name().decode(), tuple(int(d) for d in tens.ShapeAsNumpy()),
                          np.dtype(_DTYPES[tens.Type()]), offsets[t], scale, zp)

    ops = []
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        if model.OperatorCodes(op.OpcodeIndex()).CustomCode() != CUSTOM_CODE:
            continue
        ins = [op.Inputs(j) for j in range(op.InputsLength())]
        outs = [op.Outputs(j) for j in range(op.OutputsLength())]

        def size(t: int) -> int:
            return int(np.prod(g.Tensors(t).ShapeAsNumpy()))

        ops.append(EthosUOp(i, command_words(buffer(ins[0])), buffer(ins[1]), size(ins[2]),
                            size(ins[3]), tuple(slot(t) for t in ins[4:]),
                            tuple(slot(t) for t in outs)))
    return ops


def run_vela_model(data: bytes, inputs: list[np.ndarray], accelerator: str
                   ) -> tuple[list[np.ndarray], StreamStats]:
    """Runs a Vela-layout ``.tflite``: its ``ethos-u`` operators on the functional model, the
    operators left on the CPU through TFLite's reference kernels (:mod:`.tflite_graph`).
    Returns the graph's outputs and what the streams did together."""
    from .tflite_graph import TfliteGraph

    return TfliteGraph(data, accelerator).run(inputs)
