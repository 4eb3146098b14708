"""The TFLite front door: the flatbuffer check run before TVM's importer or the planner's
reader (:mod:`planner.tflite`) sees a file, so that ``tvmc compile`` and ``tvmc plan`` refuse
the same models with the same one-line message.

It walks the whole flatbuffer once, with bounds checks: every table, vector and string a reader
touches, every index, shape, type, quantization parameter and the options of the operators the
NPUs take. A file that cannot be read (truncated, corrupt) fails with an
:class:`~planner.errors.InvalidModelError` naming what is wrong; a readable file whose content
contradicts the schema or itself (another schema version, an index out of range, a NaN scale)
or that tvm-ethos cannot import (no quantization on an int8 tensor, a dynamic or absurd shape)
with an :class:`~planner.errors.UnimportableModelError` (``tvm_ethos.frontend.tflite_check``
raises them as its ModelLoadError and UnsupportedModelError). It imports no TVM: this module is
the one owner of the rules, the planner's reader and TVM's side both call it.
The rules are listed in rfcs/0006-reliability.md. The format facts it shares with the planner's
reader (identifier, TensorTypes, what counts as truncated) live in planner/tflite_format.py.

TFLite Micro's interpreter is the reference for what is a valid model: what it allocates and
runs is never called invalid here (one scale quantizes a whole tensor whatever
``quantized_dimension`` says; an LSTM's intermediate tensors have empty shapes; optional
inputs are -1). Content tvm-ethos cannot import is a :class:`Finding` tied to the operator or
tensor it concerns, so that ``tvm_ethos.frontend.tflite_support`` can say per operator what
imports; :func:`front_door` raises the first one that counts (:func:`refusing_findings`).
"""
from __future__ import annotations

import inspect
import math
import os
import struct
from dataclasses import dataclass
from pathlib import PurePath
from typing import NamedTuple

import numpy as np

from planner.errors import InvalidModelError, UnimportableModelError
from planner.tflite_format import (
    FILE_IDENTIFIER,
    TENSOR_TYPES,
    Truncated,
    check_external_buffer,
    describe_decoding_error,
    enum_names,
)

# Quantized integer types: zero points must lie in their range.
_QUANT_RANGE = {9: (-128, 127), 3: (0, 255), 7: (-32768, 32767)}
MAX_TENSOR_BYTES = 1 << 31      # 2 GiB: no NPU network has a larger tensor
MAX_RANK = 8
_MIN_SCALE, _MAX_SCALE = 2.0 ** -126, 2.0 ** 64     # normal float32, and far above any model's
_FUSED_ACTIVATIONS = range(6)   # NONE, RELU, RELU_N1_TO_1, RELU6, TANH, SIGN_BIT
# Builtin operator -> (options table, required?, {accessor: smallest allowed value}).
_WINDOW = {"StrideH": 1, "StrideW": 1}
_DILATED = dict(_WINDOW, DilationHFactor=1, DilationWFactor=1)
_POOL = ("Pool2DOptions", True, dict(_WINDOW, FilterHeight=1, FilterWidth=1))
_OP_OPTIONS = {
    "CONV_2D": ("Conv2DOptions", True, _DILATED),
    "DEPTHWISE_CONV_2D": ("DepthwiseConv2DOptions", True, dict(_DILATED, DepthMultiplier=0)),
    "TRANSPOSE_CONV": ("TransposeConvOptions", True, _WINDOW),
    "AVERAGE_POOL_2D": _POOL, "MAX_POOL_2D": _POOL, "L2_POOL_2D": _POOL,
    "FULLY_CONNECTED": ("FullyConnectedOptions", True, {}),
    "ADD": ("AddOptions", False, {}), "SUB": ("SubOptions", False, {}),
    "MUL": ("MulOptions", False, {}), "DIV": ("DivOptions", False, {}),
    "CONCATENATION": ("ConcatenationOptions", False, {}),
    "SOFTMAX": ("SoftmaxOptions", False, {}), "RESHAPE": ("ReshapeOptions", False, {}),
    "MEAN": ("ReducerOptions", False, {}), "SUM": ("ReducerOptions", False, {}),
    "REDUCE_MAX": ("ReducerOptions", False, {}), "REDUCE_MIN": ("ReducerOptions", False, {}),
    "PAD": ("PadOptions", False, {}), "PADV2": ("PadV2Options", False, {}),
    "RESIZE_BILINEAR": ("ResizeBilinearOptions", False, {}),
    "RESIZE_NEAREST_NEIGHBOR": ("ResizeNearestNeighborOptions", False, {}),
    "STRIDED_SLICE": ("StridedSliceOptions", False, {}),
    "SPLIT": ("SplitOptions", False, {"NumSplits": 1}),
    "SPLIT_V": ("SplitVOptions", False, {"NumSplits": 1}),
    "DEPTH_TO_SPACE": ("DepthToSpaceOptions", True, {"BlockSize": 1}),
    "SPACE_TO_DEPTH": ("SpaceToDepthOptions", True, {"BlockSize": 1}),
    "LEAKY_RELU": ("LeakyReluOptions", False, {}), "SQUEEZE": ("SqueezeOptions", False, {}),
    "TRANSPOSE": ("TransposeOptions", False, {}), "HARD_SWISH": ("HardSwishOptions", False, {}),
}
# Builtin operator -> (fewest inputs, most inputs, optional input positions (may be -1)).
_UNARY = (1, 1, ())
_BINARY = (2, 2, ())
_OP_INPUTS = {
    "CONV_2D": (2, 3, (2,)), "DEPTHWISE_CONV_2D": (2, 3, (2,)), "TRANSPOSE_CONV": (3, 4, (3,)),
    "FULLY_CONNECTED": (2, 3, (2,)), "AVERAGE_POOL_2D": _UNARY, "MAX_POOL_2D": _UNARY,
    "L2_POOL_2D": _UNARY, "ADD": _BINARY, "SUB": _BINARY, "MUL": _BINARY, "DIV": _BINARY,
    "MAXIMUM": _BINARY, "MINIMUM": _BINARY, "SOFTMAX": _UNARY, "LOGISTIC": _UNARY,
    "TANH": _UNARY, "RELU": _UNARY, "RELU6": _UNARY, "RELU_N1_TO_1": _UNARY,
    "LEAKY_RELU": _UNARY, "HARD_SWISH": _UNARY, "QUANTIZE": _UNARY, "DEQUANTIZE": _UNARY,
    "RESHAPE": (1, 2, ()), "SQUEEZE": _UNARY, "MEAN": _BINARY, "PAD": _BINARY,
    "PADV2": (2, 3, ()), "RESIZE_BILINEAR": _BINARY, "RESIZE_NEAREST_NEIGHBOR": _BINARY,
    "STRIDED_SLICE": (4, 4, ()), "SLICE": (3, 3, ()), "SPLIT": _BINARY, "SPLIT_V": (3, 3, ()),
    "TRANSPOSE": _BINARY, "DEPTH_TO_SPACE": _UNARY, "SPACE_TO_DEPTH": _UNARY,
    "ABS": _UNARY, "ELU": _UNARY, "EXP": _UNARY, "GELU": _UNARY, "LOG": _UNARY, "NEG": _UNARY,
    "RSQRT": _UNARY, "RELU_0_TO_1": _UNARY, "PRELU": _BINARY, "SUM": _BINARY,
    "REDUCE_MAX": _BINARY, "REDUCE_MIN": _BINARY, "REVERSE_V2": _BINARY, "TILE": _BINARY,
    "MIRROR_PAD": _BINARY, "UNPACK": _UNARY, "PACK": (1, 1 << 16, ()),
    "SQUARED_DIFFERENCE": _BINARY,
    "BATCH_MATMUL": _BINARY,
    "ARG_MAX": _BINARY,
}
#: Builtin operators with several outputs (every other operator in ``_OP_INPUTS`` has one).
_MULTI_OUTPUT = frozenset({"SPLIT", "SPLIT_V", "UNPACK"})
# Builtin operator -> (input positions that must be 4-D, input positions that must be constant,
# {input position: required rank}); output 0 of the first group's operators is 4-D too.
_OP_OPERANDS = {
    "CONV_2D": ((0, 1), (1, 2), {2: 1}), "DEPTHWISE_CONV_2D": ((0, 1), (1, 2), {2: 1}),
    "TRANSPOSE_CONV": ((1, 2), (0, 1, 3), {0: 1, 3: 1}),
    "FULLY_CONNECTED": ((), (), {1: 2, 2: 1}),
    "AVERAGE_POOL_2D": ((0,), (), {}), "MAX_POOL_2D": ((0,), (), {}), "L2_POOL_2D": ((0,), (), {}),
    "RESIZE_BILINEAR": ((0,), (), {}), "RESIZE_NEAREST_NEIGHBOR": ((0,), (), {}),
    "DEPTH_TO_SPACE": ((0,), (), {}), "SPACE_TO_DEPTH": ((0,), (), {}),
}
# Builtin operators whose input 0 must be computed (TVM's converters look it up among the
# computed tensors; a constant there is a KeyError deep in the importer).
_COMPUTED_INPUT0 = {"CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "AVERAGE_POOL_2D",
                    "MAX_POOL_2D", "L2_POOL_2D", "SOFTMAX", "LOGISTIC", "TANH", "RELU", "RELU6",
                    "RELU_N1_TO_1", "LEAKY_RELU", "HARD_SWISH", "MEAN", "PAD", "PADV2",
                    "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "DEPTH_TO_SPACE",
                    "SPACE_TO_DEPTH"}
# Builtin operators whose computed inputs and outputs share one type (TFLite's kernels refuse a
# mix; TVM's importer would build it and compute something): (the weights' type per activation
# type, the bias types per activation type), None for operators without weights.
_ACT_WEIGHTS = {0: (0,), 9: (9,), 3: (3,), 7: (9,)}      # FLOAT32, INT8, UINT8, INT16
_ACT_BIAS = {0: (0,), 9: (2,), 3: (2,), 7: (2, 4)}       # INT32 bias; INT16 may take INT64
WEIGHTED_OPERATORS = ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED")
_SAME_TYPE = frozenset(WEIGHTED_OPERATORS + (
    "AVERAGE_POOL_2D", "MAX_POOL_2D", "L2_POOL_2D", "ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM",
    "SOFTMAX", "LOGISTIC", "TANH", "RELU", "RELU6", "RELU_N1_TO_1", "LEAKY_RELU", "RESHAPE",
    "HARD_SWISH", "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "CONCATENATION", "PAD", "PADV2",
    "RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR", "DEPTH_TO_SPACE", "SPACE_TO_DEPTH",
    "SPLIT", "SPLIT_V", "SQUEEZE", "TRANSPOSE", "STRIDED_SLICE", "SLICE"))
# Input positions that are no activation (axes, shapes, paddings, sizes, split counts).
_PARAMETER_INPUTS = {"MEAN": (1,), "SUM": (1,), "REDUCE_MAX": (1,), "REDUCE_MIN": (1,),
                     "PAD": (1,), "PADV2": (1,), "RESIZE_BILINEAR": (1,),
                     "RESIZE_NEAREST_NEIGHBOR": (1,), "SPLIT": (0,), "SPLIT_V": (1, 2),
                     "TRANSPOSE": (1,), "STRIDED_SLICE": (1, 2, 3), "SLICE": (1, 2),
                     "RESHAPE": (1,)}
# Types TVM's TFLite importer has a Relax dtype for.
_IMPORTABLE_TYPES = {0, 1, 2, 3, 4, 6, 7, 8, 9, 12, 15}
# Types TFLite Micro has no element size for (``TfLiteTypeSizeOf``): STRING, VARIANT.
_UNSIZED_TYPES = frozenset({5, 14})


#: The operator name (as :class:`CheckedOperator` gives it) of the custom operator Vela and
#: tvm-ethos's TFLite export put an NPU command stream in.
ETHOS_U_OPERATOR = "CUSTOM 'ethos-u'"
#: Its inputs TFLite Micro allocates (the scratch and fast scratch arenas): written by no
#: operator, yet defined.
_ETHOS_U_ARENA_INPUTS = (2, 3)
#: Operators whose intermediate tensors no kernel reads (TFLite's converter writes an LSTM's
#: with empty shapes): what the check finds about those tensors refuses no model.
_UNREAD_INTERMEDIATES = frozenset({"UNIDIRECTIONAL_SEQUENCE_LSTM"})


@dataclass(frozen=True)
class Finding:
    """Content tvm-ethos cannot import, in a well-formed model: the one-line reason (without the
    file name), and the operator or tensor it concerns (None: the model as a whole)."""

    message: str
    subgraph: int = 0
    operator: int | None = None
    tensor: int | None = None


@dataclass(frozen=True)
class CheckedOperator:
    """One operator as the check read it: its builtin name (``CUSTOM 'name'`` for a custom
    operator), its tensor indices (-1: an absent optional input) and whether any of its
    inputs or outputs is quantized."""

    subgraph: int
    index: int
    name: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    intermediates: tuple[int, ...]
    quantized: bool


class TensorFacts(NamedTuple):
    """One tensor as the check read it (what the rules about operators ask of it)."""

    name: str
    type: int                   # TensorType code
    quantized: bool
    has_shape: bool
    defined: bool               # holds data or is a variable: no operator need write it
    rank: int
    constant: bool
    shape: tuple[int, ...]
    scale: float | None         # the first scale, None where not quantized
    zero_point: int             # the first zero point
    scales: int                 # how many scales


@dataclass(frozen=True)
class CheckedModel:
    """What :func:`check_tflite` found: the ``tflite.Model``, the operators of every subgraph
    in order, the findings in the order the walk met them and every subgraph's tensors."""

    model: object
    operators: tuple[CheckedOperator, ...]
    findings: tuple[Finding, ...]
    tensors: tuple[tuple[TensorFacts, ...], ...]

    def operator_findings(self, op: CheckedOperator) -> tuple[Finding, ...]:
        """The findings about ``op`` or about a tensor it reads or writes."""
        tensors = {t for t in op.inputs + op.outputs + op.intermediates if t >= 0}
        return tuple(f for f in self.findings if f.subgraph == op.subgraph and (
            f.operator == op.index or (f.operator is None and f.tensor in tensors)))


_I8 = struct.Struct("<b").unpack_from
_U8 = struct.Struct("<B").unpack_from
_U16 = struct.Struct("<H").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_U64 = struct.Struct("<Q").unpack_from


class _Table:
    """One flatbuffer table, read with bounds checks (the generated Python accessors do none:
    a negative position silently reads from the end of the buffer, a string slices short)."""

    __slots__ = ("d", "n", "pos", "vt", "vlen")

    def __init__(self, d: bytes, pos: int):
        n = len(d)
        if not 0 <= pos <= n - 4:
            raise Truncated(f"a table at byte {pos} lies outside the file")
        vt = pos - _I32(d, pos)[0]
        if not 0 <= vt <= n - 4:
            raise Truncated(f"the vtable of the table at byte {pos} lies outside the file")
        vlen = _U16(d, vt)[0]
        if vlen < 4 or vlen % 2 or vt + vlen > n:
            raise Truncated(f"the vtable at byte {vt} has an invalid size {vlen}")
        self.d, self.n, self.pos, self.vt, self.vlen = d, n, pos, vt, vlen

    def field(self, slot: int) -> int:
        """Absolute position of field ``slot`` (its vtable byte offset: 4, 6, ...), 0 if absent."""
        if slot >= self.vlen:
            return 0
        o = _U16(self.d, self.vt + slot)[0]
        return self.pos + o if o else 0

    def scalar(self, slot: int, unpack, width: int, default=0):
        p = self.field(slot)
        if not p:
            return default
        if p + width > self.n:
            raise Truncated(f"a field at byte {p} runs past the end")
        return unpack(self.d, p)[0]

    def ref(self, slot: int) -> int | None:
        """Where a table / vector / string field points, or None when absent."""
        p = self.field(slot)
        if not p:
            return None
        if p + 4 > self.n:
            raise Truncated(f"a field at byte {p} runs past the end")
        target = p + _U32(self.d, p)[0]
        if target + 4 > self.n:
            raise Truncated(f"a reference at byte {p} points past the end ({target})")
        return target

    def vector(self, slot: int, width: int) -> tuple[int, int]:
        """(start, length) of a vector field, checked to lie inside the file; (0, 0) if absent."""
        p = self.ref(slot)
        if p is None:
            return 0, 0
        length = _U32(self.d, p)[0]
        if p + 4 + length * width > self.n:
            raise Truncated(f"a vector of {length} elements at byte {p} runs past the end")
        return p + 4, length

    def ints(self, slot: int):
        start, length = self.vector(slot, 4)
        return np.frombuffer(self.d, "<i4", length, start) if length else np.zeros(0, "<i4")

    def string(self, slot: int) -> bytes | None:
        if self.ref(slot) is None:
            return None
        start, length = self.vector(slot, 1)
        return self.d[start:start + length]

    def table(self, slot: int) -> "_Table | None":
        p = self.ref(slot)
        return None if p is None else _Table(self.d, p)

    def tables(self, slot: int) -> list:
        start, length = self.vector(slot, 4)
        d = self.d
        return [_Table(d, start + 4 * k + _U32(d, start + 4 * k)[0]) for k in range(length)]


class _TfliteChecker:
    """The checks, over :class:`_Table` reads (slot numbers from tensorflow/lite/schema.fbs)."""

    def __init__(self, data: bytes, name: str):
        import tflite  # lazy: planner imports without the tflite package (planner.tflite._tfl)

        self.tfl = tflite
        self.data = data
        self.name = name
        self._ops = enum_names(tflite.BuiltinOperator)
        self._opt_types = enum_names(tflite.BuiltinOptions)
        self.findings: list[Finding] = []
        self.operators: list[CheckedOperator] = []
        self._subgraph = 0

    def invalid(self, msg: str) -> InvalidModelError:
        """A file no TFLite runtime reads (TFLite Micro refuses it too)."""
        return InvalidModelError(f"{self.name}: invalid TFLite model: {msg}")

    def bad(self, msg: str) -> UnimportableModelError:
        """Content that contradicts the schema or itself. TFLite Micro does not check most of
        it and may run such a model all the same, so it is not called invalid: tvm-ethos
        cannot import it, and says what is wrong."""
        return UnimportableModelError(f"{self.name}: cannot import this model: {msg}")

    def unsupported(self, msg: str) -> UnimportableModelError:
        return UnimportableModelError(f"{self.name}: {msg}")

    def refuse(self, msg: str, operator: int | None = None, tensor: int | None = None) -> None:
        """Record content tvm-ethos cannot import; the walk goes on (the file may still be
        invalid further on, and every operator's verdict is wanted)."""
        self.findings.append(Finding(msg, self._subgraph, operator, tensor))

    def check(self) -> CheckedModel:
        model = _Table(self.data, _U32(self.data, 0)[0])
        version = model.scalar(4, _U32, 4)
        if version != 3:
            # TFLite Micro's interpreter reads the file whatever the version says
            raise self.bad(f"schema version {version}, expected 3")
        # the description, the signatures and the subgraphs' names are read by neither TFLite
        # Micro nor TVM's importer: damage there is no reason to refuse a model
        model.vector(14, 4)                                      # metadata_buffer
        for meta in model.tables(16):
            meta.string(4)
        subgraphs = model.tables(8)
        if not subgraphs:
            raise self.invalid("the model has no subgraph")
        buffer_bytes = []
        for b, buf in enumerate(model.tables(12)):
            _, size = buf.vector(4, 1)
            off, ext = buf.scalar(6, _U64, 8), buf.scalar(8, _U64, 8)
            if off > 1:
                check_external_buffer(b, off, ext, len(self.data))
                size = ext
            buffer_bytes.append(size)
        codes = []
        for c, oc in enumerate(model.tables(6)):
            builtin, deprecated = oc.scalar(10, _I32, 4), oc.scalar(4, _I8, 1)
            code = max(builtin, deprecated)                      # TFLite's GetBuiltinCode
            # the tflite package (TVM's and the planner's reader) takes deprecated_builtin_code
            # whenever builtin_code < 127: the two must agree
            if code != (deprecated if builtin < 127 else builtin):
                raise self.bad(f"operator code {c} is inconsistent: builtin_code {builtin}, "
                               f"deprecated_builtin_code {deprecated}")
            custom = oc.string(6)
            oc.scalar(8, _I32, 4)
            if code not in self._ops:
                raise self.unsupported(f"operator code {c} is builtin operator {code}, which "
                                       "this TFLite schema does not define")
            codes.append(self._ops[code] if code != 32 or not custom else
                         f"CUSTOM {custom.decode('utf-8', 'replace')!r}")
        tensors = []
        for s, sg in enumerate(subgraphs):
            self._subgraph = s
            tensors.append(self.check_subgraph(sg, s, codes, buffer_bytes))
        return CheckedModel(self.tfl.Model.GetRootAs(self.data, 0), tuple(self.operators),
                            tuple(self.findings), tuple(tensors))

    def check_subgraph(self, sg: _Table, s: int, codes: list, buffer_bytes: list
                       ) -> tuple[TensorFacts, ...]:
        where = f"subgraph {s}: " if s else ""
        tensors = sg.tables(4)
        n_tensors = len(tensors)
        before = len(self.findings)
        infos = [self.check_tensor(ten, t, where, buffer_bytes) for t, ten in enumerate(tensors)]
        tensor_findings = self.findings[before:]
        del self.findings[before:]
        touched = set()

        def index(i, what, optional=False):
            i = int(i)
            if optional and i == -1:
                return None
            if not 0 <= i < n_tensors:
                raise self.bad(f"{where}{what} refers to tensor {i}; the subgraph has "
                               f"{n_tensors} tensors")
            return i

        if sg.ref(6) is None or sg.ref(8) is None:
            raise self.bad(f"{where}the subgraph has no list of "
                           f"{'inputs' if sg.ref(6) is None else 'outputs'}")
        used = set()
        graph_inputs = [index(i, f"graph input {k}") for k, i in enumerate(sg.ints(6))]
        graph_outputs = [index(i, f"graph output {k}") for k, i in enumerate(sg.ints(8))]
        used.update(graph_inputs, graph_outputs)
        for i in graph_inputs:
            if not infos[i].has_shape:
                self.refuse(f"{where}graph input {i} ({infos[i].name!r}) has no shape; "
                            "tvm-ethos needs static shapes")
        # a tensor is defined once it is a graph input, a constant, a variable or the output of
        # an earlier operator (TFLite runs operators in the order they are stored)
        defined = set(graph_inputs) | {t for t, info in enumerate(infos) if info.defined}
        produced = {}
        for o, op in enumerate(sg.tables(10)):
            c = op.scalar(4, _U32, 4)
            if c >= len(codes):
                raise self.bad(f"{where}operator {o} uses operator code {c}; the model has "
                               f"{len(codes)}")
            opname = codes[c]
            what = f"operator {o} ({opname})"
            ins = op.ints(6).tolist()
            outs = op.ints(8).tolist()
            arity = _OP_INPUTS.get(opname)
            if arity is not None and not arity[0] <= len(ins) <= arity[1]:
                want = str(arity[0]) if arity[0] == arity[1] else f"{arity[0]} to {arity[1]}"
                raise self.bad(f"{where}{what} has {len(ins)} inputs; {opname} takes {want}")
            for k, i in enumerate(ins):
                optional = k > 0 and (arity is None or k in arity[2])
                i = index(i, f"{what} input {k}", optional=optional)
                if i is None:
                    continue
                used.add(i)
                if i not in defined and not (opname == ETHOS_U_OPERATOR
                                             and k in _ETHOS_U_ARENA_INPUTS):
                    raise self.bad(f"{where}{what} reads tensor {i} ({infos[i].name!r}), which is "
                                   "no graph input, constant or output of an earlier operator")
            if opname in _COMPUTED_INPUT0 and ins and ins[0] >= 0 and infos[ins[0]].constant:
                self.refuse(f"{where}{what}: input 0 ({infos[ins[0]].name!r}) is a constant; "
                            "fold it before conversion", operator=o)
            if not outs:
                raise self.bad(f"{where}{what} has no outputs")
            if arity is not None and opname not in _MULTI_OUTPUT and len(outs) != 1:
                raise self.bad(f"{where}{what} has {len(outs)} outputs; {opname} has one")
            for k, i in enumerate(outs):
                i = index(i, f"{what} output {k}")
                used.add(i)
                if i in produced:
                    raise self.bad(f"{where}tensor {i} is the output of both operator "
                                   f"{produced[i]} and operator {o}")
                if infos[i].defined:
                    raise self.bad(f"{where}{what} writes tensor {i} ({infos[i].name!r}), which is "
                                   "a constant")
                produced[i] = o
                defined.add(i)
            operands = _OP_OPERANDS.get(opname)
            if operands is not None:
                self.check_operands(what, where, opname, operands, ins, outs, infos, o)
            op.vector(14, 1)                                     # custom_options
            op.vector(18, 1)                                     # mutating_variable_inputs
            mids = [index(i, f"{what} intermediate {k}") for k, i in enumerate(op.ints(20))]
            for k, i in enumerate(mids):
                self.check_intermediate(f"{where}{what} intermediate {k}", i, infos[i])
            opts = self.check_options(op, o, opname, where)
            if opname in _SAME_TYPE:
                self.check_types(what, where, opname, ins, outs, infos, o)
            if opname == "SOFTMAX" and ins and ins[0] >= 0 and infos[ins[0]].scale is not None:
                self.check_softmax_beta(what, where, opts, infos[ins[0]].scale, o)
            if opname in WEIGHTED_OPERATORS:
                self.check_weighted(what, where, opname, opts, ins, infos, o)
                self.check_bias_scale(what, where, opname, ins, outs, infos, o)
            io = [i for i in ins + outs if i >= 0]
            touched.update(io, mids)
            self.operators.append(CheckedOperator(
                s, o, opname, tuple(ins), tuple(outs), tuple(mids),
                any(infos[i].quantized for i in io)))
        for k, i in enumerate(graph_outputs):
            if i not in defined:
                raise self.bad(f"{where}graph output {k} (tensor {i}, {infos[i].name!r}) is "
                               "produced by no operator")
        # what is wrong with a tensor matters only where something reads or writes it
        touched.update(used)
        self.findings.extend(f for f in tensor_findings if f.tensor in touched)
        names = {}
        for i in sorted(used):
            info = infos[i]
            if info.type not in _IMPORTABLE_TYPES:
                self.refuse(f"{where}tensor {i} ({info.name!r}) is {TENSOR_TYPES[info.type][0]}, "
                            "which TVM's TFLite importer cannot represent", tensor=i)
            if info.name in names:
                self.refuse(f"{where}tensors {names[info.name]} and {i} are both named "
                            f"{info.name!r}; TVM's TFLite importer binds tensors by name")
            names[info.name] = i
            if info.type in _QUANT_RANGE and not info.quantized:
                self.refuse(
                    f"{where}tensor {i} ({info.name!r}) is {TENSOR_TYPES[info.type][0]} but has no "
                    "quantization parameters; tvm-ethos imports float models and fully "
                    "quantized (int8 / int16) models only", tensor=i)
        return tuple(infos)

    def check_intermediate(self, what: str, t: int, info: TensorFacts) -> None:
        """TFLite Micro gives an operator's intermediate tensors no memory: its allocator
        refuses the model unless each one holds zero bytes, a shape with a 0 dimension (a
        missing shape is a scalar) of a type it knows the size of."""
        name, ttype, shape = info.name, info.type, list(info.shape)
        label = f"{what} (tensor {t}, {name!r})"
        if ttype in _UNSIZED_TYPES:
            raise self.bad(f"{label} is {TENSOR_TYPES[ttype][0]}, which TFLite Micro cannot "
                           "size; expected a numeric type with an empty shape such as [0]")
        if math.prod(shape) != 0:
            raise self.bad(f"{label} has shape {shape}, which holds data; TFLite Micro "
                           "allocates no intermediate tensor: expected an empty shape such "
                           "as [0]")

    def check_softmax_beta(self, what, where, opts, in_scale: float, o: int) -> None:
        """TFLite's integer SOFTMAX scales input differences by ``beta * scale * 2^26`` as a
        multiplier above one (``QuantizeMultiplierGreaterThanOne``, an abort in TFLite
        Micro otherwise); without SoftmaxOptions beta is the schema's default, 0."""
        beta = float(opts.Beta()) if opts is not None else 0.0
        if not (math.isfinite(beta) and beta * in_scale * 2.0 ** 26 > 1.0):
            self.refuse(f"{where}{what}: beta {beta} with input scale {in_scale:.6g}; TFLite's "
                        "integer softmax needs beta x scale x 2^26 above 1", operator=o)

    def check_types(self, what, where, opname, ins, outs, infos, o) -> None:
        """One activation type per operator; weights and bias of the types TFLite's kernels
        take with it (an int8 convolution's bias is INT32, a float one's FLOAT32)."""
        skip = _PARAMETER_INPUTS.get(opname, ())
        weighted = opname in WEIGHTED_OPERATORS
        acts = [("input", k, i) for k, i in enumerate(ins)
                if i >= 0 and k not in skip and not (weighted and k > 0)]
        acts += [("output", k, i) for k, i in enumerate(outs)]
        types = {infos[i].type for _, _, i in acts}
        if opname == "SOFTMAX" and [infos[i].type for _, _, i in acts] == [9, 7]:
            types = {9}                                          # int8 in, int16 out: TFLite's
        if len(types) > 1:
            listed = ", ".join(f"{kind} {k} {TENSOR_TYPES[infos[i].type][0]}"
                               for kind, k, i in acts)
            return self.refuse(f"{where}{what} mixes tensor types ({listed}); TFLite's "
                               f"{opname} takes one type", operator=o)
        if not weighted or not types:
            return None
        act = types.pop()
        operands = [(_ACT_WEIGHTS, ins[1], "{} weights")]
        if len(ins) > 2 and ins[2] >= 0:
            operands.append((_ACT_BIAS, ins[2], "a {} bias"))
        for allowed, i, noun in operands:
            got = infos[i].type
            if got not in allowed.get(act, (got,)):
                return self.refuse(
                    f"{where}{what}: {TENSOR_TYPES[act][0]} activations with "
                    f"{noun.format(TENSOR_TYPES[got][0])}; TFLite's {opname} takes "
                    f"{' or '.join(TENSOR_TYPES[t][0] for t in allowed[act])}", operator=o)
        return None

    def check_weighted(self, what, where, opname, opts, ins, infos, o) -> None:
        """What TVM's convolution and fully-connected converters assert without a message."""
        if len(ins) > 2 and ins[2] < 0 and opname != "FULLY_CONNECTED":
            self.refuse(f"{where}{what} has an absent (-1) bias, which TVM's TFLite importer "
                        "cannot convert", operator=o)
        w = infos[ins[1]]
        if w.type not in (0, 3, 9):
            self.refuse(f"{where}{what}: weights are {TENSOR_TYPES[w.type][0]}; TVM's TFLite "
                        "importer takes INT8, UINT8 or FLOAT32 weights", operator=o)
        if len(ins) > 2 and ins[2] >= 0 and infos[ins[2]].type not in (0, 2, 4):
            self.refuse(f"{where}{what}: bias is {TENSOR_TYPES[infos[ins[2]].type][0]}; TVM's "
                        "TFLite importer takes INT32, INT64 or FLOAT32 bias", operator=o)
        if opname == "DEPTHWISE_CONV_2D" and opts is not None:
            c, oc, m = infos[ins[0]].shape[3], w.shape[3], opts.DepthMultiplier()
            if w.shape[0] != 1 or oc != c * m:
                self.refuse(
                    f"{where}{what}: weights of shape {list(w.shape)} for {c} input channels "
                    f"disagree with depth_multiplier {m} (TVM's importer needs "
                    f"[1, kh, kw, channels * depth_multiplier])", operator=o)

    def check_bias_scale(self, what, where, opname, ins, outs, infos, o) -> None:
        """TFLite's kernels add a bias at input scale x weight scale and refuse to prepare
        (``GetQuantizedConvolutionMultipler``, in LiteRT and TFLite Micro alike) unless the
        bias's own scale (0 when it has none) is that product to within 0.02 of the output
        scale: a quantized FULLY_CONNECTED with one weight scale, and a CONV_2D or
        DEPTHWISE_CONV_2D of uint8 (the legacy form; int8 and int16 convolutions are not
        checked)."""
        if len(ins) < 3 or ins[2] < 0:
            return
        x, w, b, y = infos[ins[0]], infos[ins[1]], infos[ins[2]], infos[outs[0]]
        if x.scale is None or w.scale is None or y.scale is None:
            return
        if opname == "FULLY_CONNECTED" and w.scales != 1:
            return
        if opname != "FULLY_CONNECTED" and x.type != 3:         # UINT8
            return
        product, bias = x.scale * w.scale, b.scale or 0.0
        if abs(product - bias) / y.scale > 0.02:
            kernel = ("TFLite Micro's FULLY_CONNECTED" if opname == "FULLY_CONNECTED"
                      else f"TFLite's uint8 {opname}")
            self.refuse(f"{where}{what}: bias scale {bias:.6g} is not input scale x weight "
                        f"scale ({product:.6g}); {kernel} needs them equal to within 0.02 x "
                        f"the output scale ({y.scale:.6g})", operator=o)

    def check_operands(self, what, where, opname, operands, ins, outs, infos, o) -> None:
        four_d, constant, ranks = operands
        for k in four_d:
            if k < len(ins) and ins[k] >= 0 and infos[ins[k]].rank != 4:
                raise self.bad(f"{where}{what}: input {k} has rank {infos[ins[k]].rank}; {opname} "
                               "needs a 4-D tensor")
        if four_d and infos[outs[0]].rank != 4:
            raise self.bad(f"{where}{what}: the output has rank {infos[outs[0]].rank}; {opname} "
                           "produces a 4-D tensor")
        for k, rank in ranks.items():
            if k < len(ins) and ins[k] >= 0 and infos[ins[k]].rank != rank:
                raise self.bad(f"{where}{what}: input {k} has rank {infos[ins[k]].rank}, "
                               f"expected {rank}")
        for k in constant:
            if k < len(ins) and ins[k] >= 0 and not infos[ins[k]].constant:
                self.refuse(f"{where}{what}: input {k} ({infos[ins[k]].name!r}) is not a "
                            "constant; tvm-ethos needs constant weights and bias", operator=o)

    def check_tensor(self, ten: _Table, t: int, where: str, buffer_bytes: list) -> TensorFacts:
        try:
            raw = ten.string(10)
        except Truncated as err:        # TFLite Micro reads no names; TVM's importer does
            raw = None
            self.refuse(f"{where}tensor {t}'s name cannot be read ({err}); TVM's TFLite "
                        "importer binds tensors by name", tensor=t)
        if raw is None:
            name = f"tvmgen_tensor_{t}"
        else:
            try:
                name = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise self.bad(f"{where}tensor {t} has a name that is not UTF-8 "
                               f"({raw[:40]!r})") from None
        label = f"{where}tensor {t} ({name!r})"
        ttype = ten.scalar(6, _I8, 1)
        if ttype not in TENSOR_TYPES:
            raise self.bad(f"{label} has type code {ttype}, which is no TFLite TensorType")
        tname, itemsize = TENSOR_TYPES[ttype]
        shape = ten.ints(4)
        signature = ten.ints(18)
        buf = ten.scalar(8, _U32, 4)
        if buf >= len(buffer_bytes):
            raise self.bad(f"{label} refers to buffer {buf}; the model has {len(buffer_bytes)}")
        if len(shape) > MAX_RANK:
            self.refuse(f"{label} has rank {len(shape)}; at most {MAX_RANK} dimensions are "
                        "supported", tensor=t)
        if (shape < 0).any():
            if not (len(signature) and (signature < 0).any()):
                raise self.bad(f"{label} has a negative dimension in {shape.tolist()}")
            self.refuse(f"{label} has a dynamic shape (signature {signature.tolist()}); "
                        "tvm-ethos needs static shapes", tensor=t)
        elif (shape == 0).any():
            self.refuse(f"{label} has an empty dimension in {shape.tolist()}", tensor=t)
        elements = 1
        for dim in shape.tolist():
            elements *= max(dim, 0)
        nbytes = elements * (itemsize or 1)
        if nbytes > MAX_TENSOR_BYTES:
            self.refuse(f"{label} has shape {shape.tolist()} ({nbytes:,} bytes); tensors are "
                        f"limited to {MAX_TENSOR_BYTES:,} bytes", tensor=t)
        stored = buffer_bytes[buf] if buf else 0
        if stored and itemsize is not None and stored != elements * itemsize:
            raise self.bad(f"{label} is a constant of shape {shape.tolist()} {tname}, which "
                           f"needs {elements * itemsize} bytes, but its buffer holds {stored}")
        q = ten.table(12)
        scale, zero, n_scales = (self.check_quantization(q, label, ttype, shape, t)
                                 if q is not None else (None, 0, 0))
        variable = bool(ten.scalar(14, _U8, 1))
        has_shape = ten.ref(4) is not None
        return TensorFacts(name, ttype, scale is not None, has_shape, bool(stored) or variable,
                           len(shape), bool(stored), tuple(shape.tolist()), scale, zero,
                           n_scales)

    def check_quantization(self, q: _Table, label: str, ttype: int, shape, t: int
                           ) -> tuple[float | None, int, int]:
        """The quantization's first scale (None: not quantized), zero point and number of
        scales, once checked."""
        s0, n_scale = q.vector(8, 4)
        z0, n_zp = q.vector(10, 8)
        q.vector(4, 4), q.vector(6, 4)                           # min, max
        axis = q.scalar(16, _I32, 4)
        if q.scalar(12, _U8, 1):                                 # details (custom quantization)
            q.table(14)
        if n_scale == 0:
            if n_zp:
                raise self.bad(f"{label} has {n_zp} zero points but no scales")
            return None, 0, 0
        if n_zp != n_scale:
            raise self.bad(f"{label} has {n_scale} quantization scales but {n_zp} zero points")
        scale = np.frombuffer(self.data, "<f4", n_scale, s0)
        zp = np.frombuffer(self.data, "<i8", n_zp, z0)
        # TFLite turns scale ratios into Q31 multipliers and shifts: a subnormal or huge scale
        # gives none it can represent (TFLite Micro aborts or fails to prepare)
        ok = np.isfinite(scale) & (scale >= _MIN_SCALE) & (scale <= _MAX_SCALE)
        if not ok.all():
            raise self.bad(f"{label} has quantization scale(s) {scale[~ok][:4].tolist()}; "
                           f"scales must be finite, positive and in [{_MIN_SCALE:.3g}, "
                           f"{_MAX_SCALE:.3g}]")
        # one scale quantizes the whole tensor: TFLite (and TFLite Micro) ignore the axis then
        # and a 1-D tensor's scales run along its only dimension (converters copy a depthwise
        # weight's dimension 3 onto its bias; TFLite Micro never reads the bias's scales)
        if n_scale > 1:
            if len(shape) == 1:
                axis = 0
            if not 0 <= axis < len(shape):
                raise self.bad(f"{label} has {n_scale} per-channel scales along "
                               f"quantized_dimension {axis}, out of range for shape "
                               f"{shape.tolist()}")
            if int(shape[axis]) != n_scale:
                raise self.bad(f"{label} has {n_scale} per-channel scales along dimension "
                               f"{axis} of shape {shape.tolist()}")
            if zp.any():
                self.refuse(f"{label} is quantized per channel with non-zero zero points, "
                            "which TFLite's quantization spec does not allow", tensor=t)
        lim = _QUANT_RANGE.get(ttype)
        if lim is not None:
            out = (zp < lim[0]) | (zp > lim[1])
            if out.any():
                raise self.bad(f"{label} is {TENSOR_TYPES[ttype][0]} with zero point(s) "
                               f"{zp[out][:4].tolist()} outside [{lim[0]}, {lim[1]}]")
        return float(scale[0]), int(zp[0]), n_scale

    def check_options(self, op: _Table, o: int, opname: str, where: str):
        kind = op.scalar(10, _U8, 1)
        what = f"{where}operator {o} ({opname})"
        if kind not in self._opt_types:
            raise self.bad(f"{what} has options of type {kind}, which TFLite does not define")
        table = op.table(12)
        spec = _OP_OPTIONS.get(opname)
        if table is None or kind == 0:
            if spec is not None and spec[1]:
                raise self.bad(f"{what} has no {spec[0]}")
            return None
        if spec is not None and self._opt_types[kind] != spec[0]:
            raise self.bad(f"{what} carries {self._opt_types[kind]}, expected {spec[0]}")
        cls = getattr(self.tfl, self._opt_types[kind], None)
        if cls is None:
            return None
        opts = cls()
        opts.Init(self.data, table.pos)
        for attr in _accessors(cls):                             # every field is readable
            getattr(opts, attr)()
        for attr, lo in (spec[2] if spec is not None else {}).items():
            v = getattr(opts, attr)()
            if v < lo:
                raise self.bad(f"{what}: {attr} is {v}, must be at least {lo}")
        if hasattr(opts, "FusedActivationFunction"):
            act = opts.FusedActivationFunction()
            if act not in _FUSED_ACTIVATIONS:
                raise self.bad(f"{what}: fused activation {act} is not a TFLite "
                               "ActivationFunctionType (0..5)")
        if hasattr(opts, "Padding") and opts.Padding() not in (0, 1):
            raise self.bad(f"{what}: padding {opts.Padding()} is neither SAME (0) nor VALID (1)")
        return opts


_ACCESSORS: dict[type, tuple[str, ...]] = {}


def _accessors(cls) -> tuple[str, ...]:
    """Zero-argument field accessors of a generated flatbuffer table class."""
    got = _ACCESSORS.get(cls)
    if got is None:
        got = tuple(n for n, f in inspect.getmembers(cls, inspect.isfunction)
                    if n[0].isupper() and not n.startswith(("GetRootAs", "Init"))
                    and list(inspect.signature(f).parameters) == ["self"])
        _ACCESSORS[cls] = got
    return got


def source_label(source: object) -> str:
    """The name the front door's messages give a model: its path as given (normalised as
    ``pathlib`` writes it), ``<bytes>`` for anything else; both readers use it, so a refusal
    reads the same from ``tvmc compile`` and ``tvmc plan``."""
    if isinstance(source, (str, os.PathLike)):
        return str(PurePath(source))
    return "<bytes>"


def check_identifier(data: bytes, name: str) -> None:
    """Whether ``data`` is a TFLite file at all: not empty, the flatbuffer identifier at
    bytes 4..8; an InvalidModelError naming ``name`` otherwise."""
    if not data:
        raise InvalidModelError(f"{name}: the file is empty")
    if data[4:8] != FILE_IDENTIFIER:
        raise InvalidModelError(f"{name}: not a TFLite flatbuffer (file identifier "
                                f"{bytes(data[4:8])!r}, expected {FILE_IDENTIFIER!r})")


def check_tflite(data: bytes, name: str) -> CheckedModel:
    """Walk the flatbuffer and check it: an InvalidModelError when the file is invalid
    (damaged, or content no TFLite runtime takes), an UnimportableModelError when its content
    contradicts the schema or itself, else what was read and the findings. Any other failure
    of a read is the file's damage, not a bug here: the generated accessors the options check
    calls raise whatever their arithmetic hits. ``name`` begins every message."""
    try:
        return _TfliteChecker(data, name).check()
    except (InvalidModelError, UnimportableModelError):
        raise
    except Exception as err:
        raise InvalidModelError(f"{name}: truncated or corrupt TFLite file ({len(data)} "
                                f"bytes): {describe_decoding_error(err)}") from None


def refusing_findings(checked: CheckedModel) -> tuple[Finding, ...]:
    """The findings that refuse the model: all but those about the intermediate tensors of
    :data:`_UNREAD_INTERMEDIATES` (empty shapes in TFLite's converter's files, read by no
    kernel)."""
    unread = {(op.subgraph, t) for op in checked.operators
              if op.name in _UNREAD_INTERMEDIATES for t in op.intermediates}
    return tuple(f for f in checked.findings
                 if not (f.operator is None and (f.subgraph, f.tensor) in unread))


def front_door(data: bytes, name: str, *, compiled: bool = True) -> CheckedModel:
    """:func:`check_identifier`, :func:`check_tflite`, and the first of
    :func:`refusing_findings` raised as an UnimportableModelError: every rule a model must
    pass before either reader converts it. ``compiled=False``: a model holding an
    ``ethos-u`` operator (a command stream compiled already, whose tensors break the rules
    for layers) is refused first, naming it, for a reader that cannot keep the operator as
    it is (the planner's)."""
    check_identifier(data, name)
    checked = check_tflite(data, name)
    if not compiled:
        op = next((op for op in checked.operators if op.name == ETHOS_U_OPERATOR), None)
        if op is not None:
            raise UnimportableModelError(
                f"{name}: the model is compiled for Ethos-U already (operator {op.index} is "
                "an 'ethos-u' operator holding an NPU command stream, as Vela and tvm-ethos's "
                ".tflite output write it): plan the .tflite it was compiled from")
    refusing = refusing_findings(checked)
    if refusing:
        raise UnimportableModelError(f"{name}: {refusing[0].message}")
    return checked
