"""Writing a one-subgraph TFLite flatbuffer from plain values: tensors (with their constant
data and quantization), operators (builtin or custom) and the ``OfflineMemoryAllocation``
metadata TFLite Micro's planner reads. The builder functions are Vela's generated schema
modules (``ethosu.vela.tflite``, the ``vela`` extra), which the ``tflite`` reader package
lacks; options of operators copied from a source model are carried by Vela's own options
serializers, the ones its writer uses for the operators it leaves on the CPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import flatbuffers
import numpy as np

from tvm_ethos.errors import CompileError, UnsupportedModelError

_SCHEMA_VERSION = 3
#: what TFLite Micro's offline planner reads (version, subgraphs, tensors, then one offset per
#: tensor, -1 for "allocate it yourself")
OFFLINE_ALLOCATION = "OfflineMemoryAllocation"


@dataclass(frozen=True)
class Tensor:
    """``quant`` is the source's ``tflite.QuantizationParameters`` (or None); ``offset`` the
    arena offset TFLite Micro must give it, -1 to let its planner choose; ``variable`` marks
    a state tensor an operator keeps between inferences (SVDF's, an LSTM's)."""

    name: str
    shape: tuple[int, ...]
    ttype: int
    data: bytes = b""
    quant: object = None
    offset: int = -1
    variable: bool = False


@dataclass(frozen=True)
class Operator:
    """``code`` is (builtin code, custom code or None, version); ``options`` writes the
    builtin options table and returns (options type, offset)."""

    code: tuple[int, str | None, int]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    options: Callable | None = None
    custom_options: bytes | None = None
    #: the tensors a kernel keeps its intermediate results in (an LSTM's gates)
    intermediates: tuple[int, ...] = ()


def write_model(tensors: list[Tensor], operators: list[Operator], inputs: list[int],
                outputs: list[int], description: str) -> bytes:
    """The file: one subgraph ``main`` of ``tensors`` and ``operators`` (in execution order),
    its inputs/outputs (tensor indices), constant data 16-byte aligned as Vela writes it
    (the driver wants the command stream there), and the arena offsets."""
    return _Writer().model(tensors, operators, inputs, outputs, description)


def copied_options(source_model: bytes, op_index: int) -> tuple[Callable | None, bytes | None]:
    """(builtin options writer, custom options) of operator ``op_index`` of subgraph 0 of
    ``source_model``, carried unchanged; an operator whose options cannot be read back whole
    is refused by name rather than written with defaults."""
    Model = _schema("Model")
    from ethosu.vela.tflite_mapping import builtin_operator_map

    m = Model.Model.GetRootAs(source_model, 0)
    op = m.Subgraphs(0).Operators(op_index)
    code = m.OperatorCodes(op.OpcodeIndex())
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    custom = bytes(op.CustomOptionsAsNumpy().tobytes()) if op.CustomOptionsLength() else None
    entry = builtin_operator_map.get(builtin)
    if entry is None:
        raise UnsupportedModelError(f"operator {op_index} (builtin code {builtin}) is not one "
                                    "Vela's schema knows, so it cannot be copied")
    serializer = entry[1]
    if serializer is None or not hasattr(serializer, "members") or not op.BuiltinOptions():
        return None, custom  # no options table in the source: none in the copy
    attrs = serializer.deserialize(op)
    absent = _absent_vectors(serializer, op, attrs.get("attribute_read_error", []))
    unread = [a for a in attrs.get("attribute_read_error", []) if a not in absent]
    if unread:
        raise UnsupportedModelError(
            f"operator {op_index} ({serializer.name}): cannot read its options "
            f"{', '.join(unread)}, so it cannot be copied")
    attrs["attribute_read_error"] = []
    if any(isinstance(v, (str, bytes)) for v in attrs.values()):
        raise UnsupportedModelError(f"operator {op_index} ({serializer.name}) has string "
                                    "options, which are not copied")

    def write(builder):
        a = dict(attrs)
        offset, _ = serializer.serialize(builder, a)
        if [m for m in a.get("attribute_write_error", []) if m not in absent]:
            raise UnsupportedModelError(
                f"operator {op_index} ({serializer.name}): cannot write its options "
                f"{', '.join(a['attribute_write_error'])}")
        return serializer.builtin_opt_type, offset

    if serializer.builtin_opt_type >= 127:
        raise UnsupportedModelError(f"operator {op_index} ({serializer.name}) uses the second "
                                    "options union, which is not copied")
    return write, custom


def _absent_vectors(serializer, op, unread: list[str]) -> set[str]:
    """The options among ``unread`` that are vectors the source leaves out (RESHAPE's
    ``new_shape`` where the shape is an input): written out again by leaving them out."""
    if not unread or not op.BuiltinOptions():
        return set()
    table = serializer.cls()
    table.Init(op.BuiltinOptions().Bytes, op.BuiltinOptions().Pos)
    out = set()
    for under, camel, _, _, is_vector in serializer.members:
        length = getattr(table, camel + "Length", None)
        if under in unread and is_vector and length is not None and length() == 0:
            out.add(under)
    return out


class _Writer:
    def __init__(self):
        self.b = flatbuffers.Builder(1 << 16)

    def _ints(self, vals, width=4) -> int:
        # each checked as a Python int: one that does not fit the width is an OverflowError,
        # never wrapped
        return self._array(np.array([int(v) for v in vals], "<i4" if width == 4 else "<i8"))

    def _array(self, values: np.ndarray) -> int:
        """A vector of ``values`` (little-endian elements of their dtype)."""
        return self._bytes(values.tobytes(), values.itemsize, values.itemsize)

    def _bytes(self, data: bytes, alignment: int = 1, width: int = 1) -> int:
        """A vector of ``len(data) // width`` elements of ``width`` bytes, ``data`` copied in
        at once: the bytes the builder's element-by-element ``Prepend`` calls write, without a
        Python call per element (a per-channel quantization has one scale per channel)."""
        b = self.b
        b.StartVector(width, len(data) // width, alignment)
        b.head = b.head - len(data)
        b.Bytes[b.head : b.head + len(data)] = data
        return b.EndVector()

    def _offsets(self, offs) -> int:
        b = self.b
        b.StartVector(4, len(offs), 4)
        for o in reversed(offs):
            b.PrependUOffsetTRelative(o)
        return b.EndVector()

    def model(self, tensors, operators, inputs, outputs, description) -> bytes:
        Model = _schema("Model")
        b = self.b
        data = [b""] + [t.data for t in tensors if t.data]
        buffer_of, n = [], 1
        for t in tensors:
            buffer_of.append(n if t.data else 0)
            n += bool(t.data)
        codes = sorted({op.code for op in operators}, key=[op.code for op in operators].index)
        offsets = [t.offset for t in tensors]
        data.append(np.array([0, 1, len(offsets)] + offsets, "<i4").tobytes())
        tensor_offs = [self._tensor(t, buf) for t, buf in zip(tensors, buffer_of)]
        op_offs = [self._operator(op, codes.index(op.code)) for op in operators]
        subgraph = self._subgraph(tensor_offs, op_offs, inputs, outputs)
        code_offs = [self._operator_code(c) for c in codes]
        buffers = [self._buffer(d) for d in data]
        metadata = self._metadata(len(data) - 1)
        codes_off, subgraphs_off = self._offsets(code_offs), self._offsets([subgraph])
        buffers_off, md_off = self._offsets(buffers), self._offsets([metadata])
        desc = b.CreateString(description)
        Model.ModelStart(b)
        Model.ModelAddVersion(b, _SCHEMA_VERSION)
        Model.ModelAddOperatorCodes(b, codes_off)
        Model.ModelAddSubgraphs(b, subgraphs_off)
        Model.ModelAddDescription(b, desc)
        Model.ModelAddBuffers(b, buffers_off)
        Model.ModelAddMetadata(b, md_off)
        b.Finish(Model.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def _tensor(self, t: Tensor, buffer: int) -> int:
        Q, TensorT = _schema("QuantizationParameters"), _schema("Tensor")
        b = self.b
        name_off = b.CreateString(t.name)
        shape_off = self._ints(t.shape)
        q_off = None
        quant = t.quant
        if quant is not None and (quant.ScaleLength() or quant.ZeroPointLength()):
            scale = self._array(np.asarray(
                quant.ScaleAsNumpy() if quant.ScaleLength() else [], "<f4"))
            zp = self._array(np.asarray(
                quant.ZeroPointAsNumpy() if quant.ZeroPointLength() else [], "<i8"))
            Q.QuantizationParametersStart(b)
            Q.QuantizationParametersAddScale(b, scale)
            Q.QuantizationParametersAddZeroPoint(b, zp)
            Q.QuantizationParametersAddQuantizedDimension(b, quant.QuantizedDimension())
            q_off = Q.QuantizationParametersEnd(b)
        TensorT.TensorStart(b)
        TensorT.TensorAddShape(b, shape_off)
        TensorT.TensorAddType(b, t.ttype)
        TensorT.TensorAddBuffer(b, buffer)
        TensorT.TensorAddName(b, name_off)
        if q_off is not None:
            TensorT.TensorAddQuantization(b, q_off)
        if t.variable:
            TensorT.TensorAddIsVariable(b, True)
        return TensorT.TensorEnd(b)

    def _operator(self, op: Operator, code_index: int) -> int:
        OperatorS = _schema("Operator")
        b = self.b
        options = op.options(b) if op.options is not None else None
        custom = self._bytes(op.custom_options) if op.custom_options is not None else None
        op_in, op_out = self._ints(op.inputs), self._ints(op.outputs)
        op_mid = self._ints(op.intermediates) if op.intermediates else None
        OperatorS.OperatorStart(b)
        OperatorS.OperatorAddOpcodeIndex(b, code_index)
        OperatorS.OperatorAddInputs(b, op_in)
        OperatorS.OperatorAddOutputs(b, op_out)
        if op_mid is not None:
            OperatorS.OperatorAddIntermediates(b, op_mid)
        if options is not None:
            OperatorS.OperatorAddBuiltinOptionsType(b, options[0])
            OperatorS.OperatorAddBuiltinOptions(b, options[1])
        if custom is not None:
            OperatorS.OperatorAddCustomOptions(b, custom)
            OperatorS.OperatorAddCustomOptionsFormat(b, 0)  # FLEXBUFFERS
        return OperatorS.OperatorEnd(b)

    def _subgraph(self, tensors, ops, inputs, outputs) -> int:
        SubGraph = _schema("SubGraph")
        b = self.b
        tensors_off, ops_off = self._offsets(tensors), self._offsets(ops)
        g_in, g_out = self._ints(inputs), self._ints(outputs)
        name = b.CreateString("main")
        SubGraph.SubGraphStart(b)
        SubGraph.SubGraphAddTensors(b, tensors_off)
        SubGraph.SubGraphAddInputs(b, g_in)
        SubGraph.SubGraphAddOutputs(b, g_out)
        SubGraph.SubGraphAddOperators(b, ops_off)
        SubGraph.SubGraphAddName(b, name)
        return SubGraph.SubGraphEnd(b)

    def _operator_code(self, code: tuple[int, str | None, int]) -> int:
        OperatorCode = _schema("OperatorCode")
        b = self.b
        builtin, custom, version = code
        custom_off = b.CreateString(custom) if custom is not None else None
        OperatorCode.OperatorCodeStart(b)
        OperatorCode.OperatorCodeAddDeprecatedBuiltinCode(b, min(builtin, 127))
        OperatorCode.OperatorCodeAddBuiltinCode(b, builtin)
        if custom_off is not None:
            OperatorCode.OperatorCodeAddCustomCode(b, custom_off)
        OperatorCode.OperatorCodeAddVersion(b, version)
        return OperatorCode.OperatorCodeEnd(b)

    def _buffer(self, data: bytes) -> int:
        Buffer = _schema("Buffer")
        b = self.b
        data_off = self._bytes(data, 16) if data else None
        Buffer.BufferStart(b)
        if data_off is not None:
            Buffer.BufferAddData(b, data_off)
        return Buffer.BufferEnd(b)

    def _metadata(self, buffer: int) -> int:
        Metadata = _schema("Metadata")
        b = self.b
        name = b.CreateString(OFFLINE_ALLOCATION)
        Metadata.MetadataStart(b)
        Metadata.MetadataAddName(b, name)
        Metadata.MetadataAddBuffer(b, buffer)
        return Metadata.MetadataEnd(b)


def _schema(table: str):
    """Vela's generated TFLite schema module of ``table``, or a CompileError saying how to
    install Vela."""
    import importlib

    try:
        return importlib.import_module(f"ethosu.vela.tflite.{table}")
    except ImportError:
        raise CompileError(
            "writing a TFLite Micro .tflite needs Vela's schema modules: "
            "pip install 'tvm-ethos[vela]' (ethos-u-vela)"
        ) from None
