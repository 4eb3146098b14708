"""Reading what Vela's ``.tflite`` hands TFLite Micro: the ``ethos-u`` custom operator's
driver payload (command stream), read-only "flash" buffer and scratch arena, and where the
network's input and output sit in that arena (the ``OfflineMemoryAllocation`` metadata).
"""
from __future__ import annotations

import contextlib
import struct
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np

from ethos_arch.accelerators import by_config_id

from .accelerator import accelerator_info
from .errors import StreamError
from .memory import SHRAM_REGION, Memory
from .run import StreamStats, run_stream

CUSTOM_CODE = b"ethos-u"
_FOURCC = int.from_bytes(b"COP1", "little")
_DA_CONFIG, _DA_CMDSTREAM, _DA_READ_APB, _DA_DUMP_SHRAM, _DA_NOP = 1, 2, 3, 4, 5
# region (base-pointer index) of each custom-op input after the command stream
FLASH_REGION, SCRATCH_REGION, SCRATCH_FAST_REGION = 0, 1, 2
#: the TFLite types an ``ethos-u`` operator's tensors may have (int64: ARG_MAX's output,
#: which Vela writes as int32 pairs)
FM_DTYPES = {9: np.int8, 3: np.uint8, 7: np.int16, 2: np.int32, 4: np.int64}
_UINT8 = 3
#: the most bytes one region (scratch arena, fast scratch) or feature map may need: a larger
#: one comes from a corrupt shape, not from a network an Ethos-U system could hold
MAX_ARENA_BYTES = 256 << 20
#: the ``ethos-u`` operator's inputs before the feature maps
_FIXED_INPUTS = ("command stream", "flash", "scratch", "fast scratch")


@contextlib.contextmanager
def reading(what: str) -> Iterator[None]:
    """Turns what a malformed flatbuffer makes the generated readers raise (an offset past
    the buffer, a field of the wrong width) into one :class:`StreamError` naming ``what``
    was being read."""
    try:
        yield
    except StreamError:
        raise
    except (IndexError, struct.error) as exc:
        raise StreamError(f"the .tflite is malformed or cut short (reading {what}): an offset "
                          f"points past the end of the file ({exc})") from None
    except (KeyError, ValueError, TypeError, OverflowError, UnicodeDecodeError,
            AttributeError) as exc:
        raise StreamError(f"the .tflite is malformed (reading {what}): "
                          f"{type(exc).__name__}: {exc}") from None


def parse_model(data: bytes):
    """The root ``Model`` table of a ``.tflite`` flatbuffer (the ``tflite`` package's
    reader), after checking that ``data`` can hold one."""
    import tflite

    data = bytes(data)
    if len(data) < 8 or data[4:8] != b"TFL3":
        raise StreamError(f"not a .tflite file: {len(data)} bytes without the 'TFL3' "
                          "identifier at byte 4")
    root = int.from_bytes(data[:4], "little")
    if root + 4 > len(data):
        raise StreamError(f"the .tflite is malformed: its root table offset {root} lies past "
                          f"its {len(data)} bytes (a cut file?)")
    with reading("the model table"):
        return tflite.Model.GetRootAsModel(data, 0)


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


def payload_accelerator(data: bytes) -> str | None:
    """The accelerator the first ``ethos-u`` operator of the ``.tflite`` ``data`` was built
    for, from its driver payload's config word (the product, U55 or U65, and the MACs per
    cycle, which the Ethos-U driver checks against the hardware before it runs a stream), or
    None where the file does not say (no ``ethos-u`` operator, no or an unknown config)."""
    model = parse_model(data)
    g = model.Subgraphs(0)
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        if model.OperatorCodes(op.OpcodeIndex()).CustomCode() != CUSTOM_CODE:
            continue
        buf = model.Buffers(g.Tensors(op.Inputs(0)).Buffer())
        words = np.frombuffer(buf.DataAsNumpy().tobytes(), "<u4") if buf.DataLength() else []
        if len(words) < 3 or int(words[0]) != _FOURCC or int(words[1]) & 0xFF != _DA_CONFIG:
            return None
        config = int(words[2])
        found = by_config_id(config >> 28, config & 0xF)
        return None if found is None else found.name
    return None


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
            *, compute: bool = True, after: dict | None = None
            ) -> tuple[list[np.ndarray], StreamStats]:
        """Places ``inputs`` at their arena offsets, runs the stream (``trace`` and
        ``compute`` as in :func:`run_stream`) and reads the outputs back. ``after``, when
        given, receives each input's value as the stream left it (tensor index -> array):
        a variable tensor (an LSTM's state) is an input the stream updates in place."""
        if len(inputs) != len(self.inputs):
            raise StreamError(f"the ethos-u operator takes {len(self.inputs)} input(s), "
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
                raise StreamError(f"input {slot.name!r} must be {slot.dtype} with shape "
                                  f"{slot.shape}, got {x.dtype} {x.shape}")
            x = x.reshape(-1).view(np.uint8)
            mem.regions[SCRATCH_REGION][slot.arena_offset:slot.arena_offset + x.size] = x
        stats = run_stream(self.words, mem, accelerator, trace, compute=compute)
        outs = []
        for slot in self.outputs:
            n = int(np.prod(slot.shape)) * slot.dtype.itemsize
            raw = mem.regions[SCRATCH_REGION][slot.arena_offset:slot.arena_offset + n]
            outs.append(raw.copy().view(slot.dtype).reshape(slot.shape))
        if after is not None:
            for slot in self.inputs:
                n = int(np.prod(slot.shape)) * slot.dtype.itemsize
                raw = mem.regions[SCRATCH_REGION][slot.arena_offset:slot.arena_offset + n]
                after[slot.index] = raw.copy().view(slot.dtype).reshape(slot.shape)
        return outs, stats


def _offline_offsets(model) -> list[int] | None:
    """The arena offset of each tensor of subgraph 0 (``OfflineMemoryAllocation``: version,
    subgraph, count, then one offset per tensor)."""
    for i in range(model.MetadataLength()):
        md = model.Metadata(i)
        if md.Name() != b"OfflineMemoryAllocation":
            continue
        if not 0 <= md.Buffer() < model.BuffersLength():
            raise StreamError(f"the OfflineMemoryAllocation metadata names buffer "
                              f"{md.Buffer()}, but the file has {model.BuffersLength()}")
        raw = model.Buffers(md.Buffer()).DataAsNumpy()
        raw = raw.tobytes() if isinstance(raw, np.ndarray) else b""
        if len(raw) % 4 or len(raw) < 12:
            raise StreamError(f"the OfflineMemoryAllocation metadata is {len(raw)} bytes: not "
                              "a version, subgraph, count and one 32-bit offset per tensor")
        vals = np.frombuffer(raw, "<i4")
        if int(vals[2]) != vals.size - 3:
            raise StreamError(f"the OfflineMemoryAllocation metadata announces {int(vals[2])} "
                              f"offsets but holds {vals.size - 3}")
        return [int(v) for v in vals[3:]]
    return None


def _shape(tensor) -> tuple[int, ...]:
    return tuple(int(d) for d in tensor.ShapeAsNumpy()) if tensor.ShapeLength() else ()


def checked_nbytes(shape: tuple[int, ...], itemsize: int, what: str) -> int:
    """``shape``'s bytes, refused past ``MAX_ARENA_BYTES`` or with a negative dimension."""
    n = itemsize
    for d in shape:
        if d < 0:
            raise StreamError(f"{what} has shape {list(shape)}, with a negative dimension")
        n *= d
        if n > MAX_ARENA_BYTES:
            raise StreamError(f"{what} of shape {list(shape)} needs more than the "
                              f"{MAX_ARENA_BYTES}-byte limit (MAX_ARENA_BYTES): a corrupt shape")
    return n


def read_ethos_u_ops(data: bytes) -> list[EthosUOp]:
    """Every ``ethos-u`` operator of subgraph 0 of a Vela-compiled ``.tflite``. A file that is
    malformed, or whose ``ethos-u`` operator has the wrong number of inputs, tensors of the
    wrong type, missing or inconsistent arena offsets, or a region past ``MAX_ARENA_BYTES``,
    raises :class:`StreamError` naming the operator and tensor."""
    model = parse_model(data)
    with reading("subgraph 0 and its metadata"):
        if model.SubgraphsLength() < 1:
            raise StreamError("the .tflite has no subgraph")
        g = model.Subgraphs(0)
        offsets = _offline_offsets(model)
        ntensors = g.TensorsLength()
    if offsets is None:
        raise StreamError("the model has no OfflineMemoryAllocation metadata: not written by "
                          "Vela's CLI, so the arena offsets of its input/output are unknown")
    if len(offsets) < ntensors:
        raise StreamError(f"the OfflineMemoryAllocation metadata holds {len(offsets)} offsets "
                          f"for {ntensors} tensors")
    ops = []
    for i in range(g.OperatorsLength()):
        with reading(f"operator {i}"):
            op = g.Operators(i)
            k = op.OpcodeIndex()
            if not 0 <= k < model.OperatorCodesLength():
                raise StreamError(f"operator {i} names operator code {k}, but the file has "
                                  f"{model.OperatorCodesLength()}")
            if model.OperatorCodes(k).CustomCode() != CUSTOM_CODE:
                continue
            ins = [int(op.Inputs(j)) for j in range(op.InputsLength())]
            outs = [int(op.Outputs(j)) for j in range(op.OutputsLength())]
            ops.append(_read_op(model, g, i, ins, outs, offsets))
    return ops


def _read_op(model, g, i: int, ins: list[int], outs: list[int], offsets: list[int]) -> EthosUOp:
    where = f"ethos-u operator {i}"
    if len(ins) < len(_FIXED_INPUTS) or not outs:
        raise StreamError(f"{where} has {len(ins)} input(s) and {len(outs)} output(s); Vela's "
                          f"has {len(_FIXED_INPUTS)} ({', '.join(_FIXED_INPUTS)}) then the "
                          "feature maps in, and at least one output")
    bad = [t for t in ins + outs if not 0 <= t < g.TensorsLength()]
    if bad:
        raise StreamError(f"{where} names tensor(s) {bad}, but the subgraph has "
                          f"{g.TensorsLength()}")
    for t, role in zip(ins, _FIXED_INPUTS):
        if g.Tensors(t).Type() != _UINT8:
            raise StreamError(f"{where}: its {role} tensor {t} has TFLite type "
                              f"{g.Tensors(t).Type()}, not UINT8 ({_UINT8})")

    def buffer(t: int) -> bytes:
        b = g.Tensors(t).Buffer()
        if not 0 <= b < model.BuffersLength():
            raise StreamError(f"{where}: tensor {t} names buffer {b}, but the file has "
                              f"{model.BuffersLength()}")
        b = model.Buffers(b)
        return b.DataAsNumpy().tobytes() if b.DataLength() else b""

    def region(t: int, role: str) -> int:
        return checked_nbytes(_shape(g.Tensors(t)), 1, f"{where}: the {role} tensor {t}")

    def slot(t: int) -> TensorSlot:
        tens = g.Tensors(t)
        name = tens.Name().decode(errors="replace")
        if tens.Type() not in FM_DTYPES:
            raise StreamError(f"{where}: feature map tensor {t} ({name!r}) has TFLite type "
                              f"{tens.Type()}; the model reads int8, uint8, int16, int32 or int64")
        dtype = np.dtype(FM_DTYPES[tens.Type()])
        shape = _shape(tens)
        n = checked_nbytes(shape, dtype.itemsize, f"{where}: feature map tensor {t} ({name!r})")
        if not 0 <= offsets[t] <= MAX_ARENA_BYTES - n:
            raise StreamError(f"{where}: feature map tensor {t} ({name!r}) sits at arena offset "
                              f"{offsets[t]}, outside [0, MAX_ARENA_BYTES - its {n} bytes]")
        q = tens.Quantization()
        scale = float(q.ScaleAsNumpy()[0]) if q is not None and q.ScaleLength() else 0.0
        zp = int(q.ZeroPointAsNumpy()[0]) if q is not None and q.ZeroPointLength() else 0
        return TensorSlot(t, name, shape, dtype, offsets[t], scale, zp)

    return EthosUOp(i, command_words(buffer(ins[0])), buffer(ins[1]), region(ins[2], "scratch"),
                    region(ins[3], "fast scratch"), tuple(slot(t) for t in ins[4:]),
                    tuple(slot(t) for t in outs))
