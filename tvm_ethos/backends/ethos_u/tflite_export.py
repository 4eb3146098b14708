"""The compiled model as a TFLite Micro ``.tflite``: the NPU subgraph's command stream written
as one ``ethos-u`` custom operator in the layout Vela's writer uses, so TFLite Micro's Ethos-U
kernel and driver run it on a board.

The operator's inputs are, in Vela's order: the driver payload (command stream), the
read-only flash buffer, the scratch arena, the fast scratch, then the IFMs; its outputs are
the OFMs. The command stream addresses feature maps as offsets in the scratch arena, so the
``OfflineMemoryAllocation`` metadata pins every IFM/OFM at its arena offset (the scratch
tensor at 0), as Vela's does. Where the fast scratch is empty the scratch tensor is passed
twice, as Vela does on an Ethos-U55.

Only a model whose operators all run in one Ethos-U subgraph with a generated stream can be
written (the one subgraph from the model's inputs to its outputs); anything else is refused by
name rather than written as a file that would compute something else.
"""

from __future__ import annotations

import flatbuffers
import numpy as np

from tvm_ethos.errors import CompileError, TargetError, UnsupportedModelError

BACKEND = "ethos-u"
CUSTOM_CODE = "ethos-u"
#: Vela's custom options of an NPU operator: a FlexBuffer holding the uint8 1
#: (``CustomOptionsSerializer.CUSTOM_OPTIONS_NPU_OP`` in ethosu/vela/tflite_mapping.py)
NPU_OP_OPTIONS = bytes([0x01, 0x04, 0x01])
_BUILTIN_CUSTOM = 32
_SCHEMA_VERSION = 3
_UINT8 = 3
_TYPES = {"int8": 9, "uint8": 3, "int16": 7, "int32": 2}
#: what TFLite Micro's offline planner reads (version, subgraphs, tensors, then one offset per
#: tensor, -1 for "allocate it yourself")
OFFLINE_ALLOCATION = "OfflineMemoryAllocation"


def export_tflite_bytes(cm, source) -> bytes:
    """The ``.tflite`` of ``cm``, a CompiledModel compiled from the TFLite model ``source``
    (its bytes or path): the source names, shapes and quantization of the model's inputs and
    outputs, which the compiled model does not keep."""
    sym, payload = _the_npu_subgraph(cm)
    model = _read_source(source)
    g = model.Subgraphs(0)
    in_tensors = _boundary(g, g.InputsAsNumpy(), cm.inputs, "input")
    out_tensors = _boundary(g, g.OutputsAsNumpy(), cm.outputs, "output")
    spec = next(s for s in cm.program.subgraphs if s.name == sym)
    by_prog_in = dict(zip(cm.program.inputs, in_tensors))
    by_prog_out = dict(zip(cm.program.outputs, out_tensors))
    if (
        sorted(spec.inputs) != sorted(by_prog_in)
        or sorted(spec.outputs) != sorted(by_prog_out)
        or len(set(spec.inputs) | set(spec.outputs)) != len(spec.inputs) + len(spec.outputs)
    ):
        raise UnsupportedModelError(
            f"NPU subgraph {sym} does not run from the model's inputs straight to "
            "its outputs; only that graph shape is written as an ethos-u operator"
        )
    ifms = [(g.Tensors(by_prog_in[t]), a) for t, a in zip(spec.inputs, payload.inputs)]
    ofms = [(g.Tensors(by_prog_out[t]), a) for t, a in zip(spec.outputs, payload.outputs)]
    for tensor, arena in ifms + ofms:
        _check_same(sym, tensor, arena)
    # the graph's inputs/outputs in the source's order, as positions among the written tensors
    first = 4 if payload.fast_scratch_bytes else 3
    pos = {
        src: first + i
        for i, src in enumerate(
            [by_prog_in[t] for t in spec.inputs] + [by_prog_out[t] for t in spec.outputs]
        )
    }
    return _Writer(payload, ifms, ofms).model(
        [pos[int(t)] for t in g.InputsAsNumpy()], [pos[int(t)] for t in g.OutputsAsNumpy()]
    )


def _the_npu_subgraph(cm):
    """(symbol, payload) of the one Ethos-U subgraph, or the refusal naming what is in the way."""
    ids = [t.strip().split()[0] for t in str(cm.targets).split(",") if t.strip()]
    if BACKEND not in ids:
        raise TargetError(
            f"a TFLite Micro .tflite holds Ethos-U command streams; this model was "
            f"compiled for {cm.targets}: compile it for 'ethos-u,llvm'"
        )
    if cm.program is None:
        raise UnsupportedModelError("the compiled model has no executor program to export")
    host = [s for s in cm.program.subgraphs if not (s.kind == "npu" and s.backend == BACKEND)]
    if host:
        names = _operators_on(cm, {s.backend for s in host} | {s.name for s in host})
        raise UnsupportedModelError(
            f"subgraph {host[0].name} runs on {host[0].backend}"
            + (f" ({', '.join(names)})" if names else "")
            + ": writing host operators beside the ethos-u operator is not supported; only a "
            "model whose operators all go to one Ethos-U subgraph can be exported"
        )
    npu = [s.name for s in cm.program.subgraphs]
    if len(npu) != 1:
        raise UnsupportedModelError(
            f"the model has {len(npu)} Ethos-U subgraphs ({', '.join(npu)}); only a "
            "model that is one Ethos-U subgraph can be exported"
        )
    sym = npu[0]
    payload = cm.program.payloads.get(sym)
    if payload is None:
        entry = ((cm.plan_report or {}).get("streams") or {}).get(sym) or {}
        why = entry.get("reason", "no command stream was generated for it")
        raise UnsupportedModelError(
            f"NPU subgraph {sym} has no command stream ({why}); it runs only on the "
            "emulator, so it cannot be written as an ethos-u operator"
        )
    return sym, payload


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


def _read_source(source: bytes):
    import tflite

    if source is None:
        raise UnsupportedModelError(
            "the compiled model does not hold its source .tflite (it was loaded from "
            "a package or compiled from an IRModule): pass it as "
            "export_tflite(path, model=...)"
        )
    if not isinstance(source, (bytes, bytearray)):
        with open(source, "rb") as f:
            source = f.read()
    source = bytes(source)
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


_NOT_THE_SOURCE = "export with the .tflite it was compiled from"


def _boundary(g, indices, specs, what: str) -> list[int]:
    """The source tensor of each compiled input/output, by the name the importer kept."""
    names = [g.Tensors(t).Name().decode() for t in indices.tolist()]
    if sorted(names) != sorted(s.name for s in specs) or len(set(names)) != len(names):
        raise UnsupportedModelError(
            f"the source .tflite's {what}s {names} are not the compiled model's "
            f"{[s.name for s in specs]}: {_NOT_THE_SOURCE}"
        )
    return [int(indices[names.index(s.name)]) for s in specs]


def _check_same(sym: str, tensor, arena) -> None:
    dtype = {v: k for k, v in _TYPES.items()}.get(tensor.Type())
    n = int(np.prod(tensor.ShapeAsNumpy())) if tensor.ShapeLength() else 1
    if dtype != arena.dtype or n != int(np.prod(arena.shape)):
        raise UnsupportedModelError(
            f"NPU subgraph {sym}: tensor {tensor.Name().decode()!r} is {dtype} "
            f"with {n} elements in the source, the stream's is {arena.dtype} "
            f"{arena.shape}: {_NOT_THE_SOURCE}"
        )


class _Writer:
    """One flatbuffer: operator code, the tensors, one operator, buffers, metadata. Vela's
    generated schema modules (``ethosu.vela.tflite``) hold the builder functions."""

    def __init__(self, payload, ifms, ofms):
        self.payload, self.ifms, self.ofms = payload, ifms, ofms
        self.b = flatbuffers.Builder(1024 + len(payload.driver_payload) + len(payload.flash))
        self.buffers: list[bytes] = [b""]

    def _buffer(self, data: bytes) -> int:
        if not data:
            return 0
        self.buffers.append(bytes(data))
        return len(self.buffers) - 1

    def _ints(self, vals, width=4) -> int:
        b = self.b
        b.StartVector(width, len(vals), width)
        for v in reversed(list(vals)):
            (b.PrependInt32 if width == 4 else b.PrependInt64)(int(v))
        return b.EndVector()

    def _floats(self, vals) -> int:
        b = self.b
        b.StartVector(4, len(vals), 4)
        for v in reversed(list(vals)):
            b.PrependFloat32(float(v))
        return b.EndVector()

    def _bytes(self, data: bytes, alignment: int = 1) -> int:
        b = self.b
        b.StartVector(1, len(data), alignment)
        b.head = b.head - len(data)
        b.Bytes[b.head : b.head + len(data)] = data
        return b.EndVector()

    def _offsets(self, offs) -> int:
        b = self.b
        b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def _tensor(self, name: str, shape, ttype: int, buffer: int, quant=None) -> int:
        Q, Tensor = _schema("QuantizationParameters"), _schema("Tensor")
        b = self.b
        name_off = b.CreateString(name)
        shape_off = self._ints(shape)
        q_off = None
        if quant is not None and (quant.ScaleLength() or quant.ZeroPointLength()):
            scale = self._floats(quant.ScaleAsNumpy().tolist() if quant.ScaleLength() else [])
            zp = self._ints(quant.ZeroPointAsNumpy().tolist() if quant.ZeroPointLength() else [], 8)
            Q.QuantizationParametersStart(b)
            Q.QuantizationParametersAddScale(b, scale)
            Q.QuantizationParametersAddZeroPoint(b, zp)
            Q.QuantizationParametersAddQuantizedDimension(b, quant.QuantizedDimension())
            q_off = Q.QuantizationParametersEnd(b)
        Tensor.TensorStart(b)
        Tensor.TensorAddShape(b, shape_off)
        Tensor.TensorAddType(b, ttype)
        Tensor.TensorAddBuffer(b, buffer)
        Tensor.TensorAddName(b, name_off)
        if q_off is not None:
            Tensor.TensorAddQuantization(b, q_off)
        return Tensor.TensorEnd(b)

    def model(self, graph_inputs: list[int], graph_outputs: list[int]) -> bytes:
        """The file: the tensors (constants first, IFMs, OFMs), the one operator, the
        subgraph whose inputs/outputs are ``graph_inputs``/``graph_outputs`` (tensor
        indices), then buffers and the arena offsets."""
        Model = _schema("Model")
        b, p = self.b, self.payload
        tensors, offsets = self._tensors()
        n_fixed, n_ifm = len(tensors) - len(self.ifms) - len(self.ofms), len(self.ifms)
        # the scratch tensor stands in for the fast scratch where there is none
        op_inputs = [0, 1, 2, 3 if p.fast_scratch_bytes else 2]
        op_inputs += list(range(n_fixed, n_fixed + n_ifm))
        op_outputs = list(range(n_fixed + n_ifm, len(tensors)))
        subgraph = self._subgraph(tensors, op_inputs, op_outputs, graph_inputs, graph_outputs)
        code = self._operator_code()
        allocation = np.array([0, 1, len(offsets)] + offsets, "<i4").tobytes()
        buffers, metadata = self._buffers_and_metadata(self._buffer(allocation))
        codes_off, subgraphs_off = self._offsets([code]), self._offsets([subgraph])
        buffers_off, md_off = self._offsets(buffers), self._offsets([metadata])
        description = b.CreateString(f"tvm-ethos Ethos-U {p.accelerator}")
        Model.ModelStart(b)
        Model.ModelAddVersion(b, _SCHEMA_VERSION)
        Model.ModelAddOperatorCodes(b, codes_off)
        Model.ModelAddSubgraphs(b, subgraphs_off)
        Model.ModelAddDescription(b, description)
        Model.ModelAddBuffers(b, buffers_off)
        Model.ModelAddMetadata(b, md_off)
        b.Finish(Model.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def _tensors(self) -> tuple[list[int], list[int]]:
        """(tensor offsets, arena offset of each tensor or -1)."""
        p = self.payload
        cmd_buf, flash_buf = self._buffer(p.driver_payload), self._buffer(p.flash)
        tensors = [
            self._tensor("ethos_u_command_stream", [len(p.driver_payload)], _UINT8, cmd_buf),
            self._tensor("read_only", [len(p.flash)], _UINT8, flash_buf),
            self._tensor("scratch", [p.scratch_bytes], _UINT8, 0),
        ]
        offsets = [-1, -1, 0]
        if p.fast_scratch_bytes:
            tensors.append(self._tensor("scratch_fast", [p.fast_scratch_bytes], _UINT8, 0))
            offsets.append(0)
        for src, arena in self.ifms + self.ofms:
            shape = src.ShapeAsNumpy().tolist() if src.ShapeLength() else []
            name = src.Name().decode()
            tensors.append(self._tensor(name, shape, src.Type(), 0, src.Quantization()))
            offsets.append(arena.offset)
        return tensors, offsets

    def _subgraph(self, tensors, op_inputs, op_outputs, graph_inputs, graph_outputs) -> int:
        Operator, SubGraph = _schema("Operator"), _schema("SubGraph")
        b = self.b
        options = self._bytes(NPU_OP_OPTIONS)
        op_in, op_out = self._ints(op_inputs), self._ints(op_outputs)
        Operator.OperatorStart(b)
        Operator.OperatorAddOpcodeIndex(b, 0)
        Operator.OperatorAddInputs(b, op_in)
        Operator.OperatorAddOutputs(b, op_out)
        Operator.OperatorAddCustomOptions(b, options)
        Operator.OperatorAddCustomOptionsFormat(b, 0)  # FLEXBUFFERS
        op = Operator.OperatorEnd(b)
        tensors_off, ops_off = self._offsets(tensors), self._offsets([op])
        g_in, g_out = self._ints(graph_inputs), self._ints(graph_outputs)
        name = b.CreateString("main")
        SubGraph.SubGraphStart(b)
        SubGraph.SubGraphAddTensors(b, tensors_off)
        SubGraph.SubGraphAddInputs(b, g_in)
        SubGraph.SubGraphAddOutputs(b, g_out)
        SubGraph.SubGraphAddOperators(b, ops_off)
        SubGraph.SubGraphAddName(b, name)
        return SubGraph.SubGraphEnd(b)

    def _operator_code(self) -> int:
        OperatorCode = _schema("OperatorCode")
        b = self.b
        custom = b.CreateString(CUSTOM_CODE)
        OperatorCode.OperatorCodeStart(b)
        OperatorCode.OperatorCodeAddDeprecatedBuiltinCode(b, _BUILTIN_CUSTOM)
        OperatorCode.OperatorCodeAddBuiltinCode(b, _BUILTIN_CUSTOM)
        OperatorCode.OperatorCodeAddCustomCode(b, custom)
        OperatorCode.OperatorCodeAddVersion(b, 1)
        return OperatorCode.OperatorCodeEnd(b)

    def _buffers_and_metadata(self, allocation_buffer: int) -> tuple[list[int], int]:
        """Every buffer (data 16-byte aligned, as Vela writes it: the driver wants the
        command stream there) and the ``OfflineMemoryAllocation`` entry."""
        Buffer, Metadata = _schema("Buffer"), _schema("Metadata")
        b = self.b
        buffers = []
        for data in self.buffers:
            data_off = self._bytes(data, 16) if data else None
            Buffer.BufferStart(b)
            if data_off is not None:
                Buffer.BufferAddData(b, data_off)
            buffers.append(Buffer.BufferEnd(b))
        name = b.CreateString(OFFLINE_ALLOCATION)
        Metadata.MetadataStart(b)
        Metadata.MetadataAddName(b, name)
        Metadata.MetadataAddBuffer(b, allocation_buffer)
        return buffers, Metadata.MetadataEnd(b)


def _schema(table: str):
    """Vela's generated TFLite schema module of ``table`` (the builder functions the
    ``tflite`` package lacks), or a CompileError saying how to install Vela."""
    import importlib

    try:
        return importlib.import_module(f"ethosu.vela.tflite.{table}")
    except ImportError:
        raise CompileError(
            "writing a TFLite Micro .tflite needs Vela's schema modules: "
            "pip install 'tvm-ethos[vela]' (ethos-u-vela)"
        ) from None
