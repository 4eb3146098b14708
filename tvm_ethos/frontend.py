"""Model import: TFLite (primary), ONNX (QDQ) and PyTorch (torch.export) into a Relax IRModule.

``load_model`` picks the importer from the object type, the file's magic bytes and its suffix,
validates the file before TVM sees it, and turns every failure into a
:class:`~tvm_ethos.errors.ModelLoadError` or :class:`~tvm_ethos.errors.UnsupportedModelError`
that names the file and the problem.

Int8 TFLite models import as QDQ Relax: ``R.dequantize`` / ``R.quantize`` around float
operators, the int32 bias dequantized and added, fused activations as ``R.clip`` in the
integer domain; data-movement operators (reshape, split, depth-to-space, nearest resize) act on
the codes directly (TVM's converter is extended for the quantized ones it refuses:
``tvm_ethos.tflite_converter``). ``tvm_ethos.patterns`` matches those regions back into
quantized operators.
"""
from __future__ import annotations

import numbers
import os
import re
import struct
import sys
from pathlib import Path
from typing import Any

from tvm_ethos.errors import ModelLoadError, OptionError, UnsupportedModelError

TFLITE_MAGIC = b"TFL3"
_TFLITE_SUFFIXES = {".tflite", ".tfl", ".lite"}
_ONNX_SUFFIXES = {".onnx"}
_TORCH_SUFFIXES = {".pt2", ".pt", ".pth"}


def load_model(path_or_module: Any, shape_dict: dict | None = None, example_inputs: Any = None):
    """Import a model into a Relax ``tvm.IRModule``.

    ``path_or_module`` may be a path (str / Path), the file's bytes, a ``tvm.IRModule``
    (returned as is), an ``onnx.ModelProto``, a ``torch.export.ExportedProgram``, a
    ``torch.nn.Module`` with ``example_inputs`` (a tuple of tensors, exported with
    ``torch.export.export``), or a ``(torch.nn.Module, example_inputs)`` pair.
    """
    shape_dict = _check_shape_dict(shape_dict)
    import tvm  # noqa: F401  (import cost paid only here)

    obj = path_or_module
    if example_inputs is not None:
        return _import_torch((obj, example_inputs), "<torch object>")
    if _is_torch_object(obj):
        return _import_torch(obj, "<torch object>")
    if isinstance(obj, tvm.IRModule):
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        return _load_bytes(data, name="<bytes>", suffix="", shape_dict=shape_dict)
    if isinstance(obj, (str, os.PathLike)):
        path = Path(obj)
        if not path.exists():
            raise ModelLoadError(f"model file not found: {path}")
        if path.is_dir():
            raise ModelLoadError(f"model path is a directory, not a file: {path}")
        try:
            data = path.read_bytes()
        except OSError as err:
            raise ModelLoadError(f"cannot read model file {path}: {err.strerror}") from None
        return _load_bytes(data, name=str(path), suffix=path.suffix.lower(), shape_dict=shape_dict)
    mod_name = type(obj).__module__ or ""
    if mod_name.startswith("onnx"):
        return _import_onnx(obj, "<onnx.ModelProto>", shape_dict)
    if mod_name.startswith("torch") or (isinstance(obj, tuple) and len(obj) == 2):
        return _import_torch(obj, "<torch object>")
    raise UnsupportedModelError(
        f"cannot import an object of type {type(obj).__name__}: pass a .tflite/.onnx/.pt2 path, "
        "the file's bytes, a tvm.IRModule, an onnx.ModelProto or a torch ExportedProgram"
    )


def _check_shape_dict(shape_dict):
    """``shape_dict``: None, or input name -> shape (positive ints); an OptionError otherwise."""
    if shape_dict is None:
        return None
    if not isinstance(shape_dict, dict):
        raise OptionError(f"option 'shape_dict': bad value of type {type(shape_dict).__name__}; "
                          "allowed: None or a dict of input name -> shape, e.g. "
                          "{'input': (1, 224, 224, 3)}")
    out = {}
    for key, shape in shape_dict.items():
        if not isinstance(key, str):
            raise OptionError(f"option 'shape_dict': key {key!r} is not an input name (a str)")
        dims = None if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__") \
            else list(shape)
        if dims is None or any(isinstance(d, bool) or not isinstance(d, numbers.Integral)
                               or d < 1 for d in dims):
            raise OptionError(f"option 'shape_dict': bad shape {shape!r} for input {key!r}; "
                              "allowed: a sequence of integers >= 1")
        out[key] = tuple(int(d) for d in dims)
    return out


def _load_bytes(data: bytes, name: str, suffix: str, shape_dict):
    if len(data) == 0:
        raise ModelLoadError(f"{name}: the file is empty")
    if len(data) >= 8 and data[4:8] == TFLITE_MAGIC:
        return _import_tflite(data, name, shape_dict)
    if suffix in _TFLITE_SUFFIXES:
        raise ModelLoadError(
            f"{name}: not a TFLite flatbuffer (file identifier {data[4:8]!r}, expected {TFLITE_MAGIC!r})"
        )
    if suffix in _ONNX_SUFFIXES:
        return _import_onnx(data, name, shape_dict)
    if suffix in _TORCH_SUFFIXES or data[:2] == b"PK":
        return _import_torch(data, name)
    raise ModelLoadError(
        f"{name}: not a recognised model file (no TFLite identifier 'TFL3'; "
        f"suffix {suffix or '(none)'!r} is none of .tflite, .onnx, .pt2)"
    )


# ---------------------------------------------------------------- TFLite
# Validation walks the whole flatbuffer once, with bounds checks, before TVM's importer sees it:
# every table, vector and string a reader touches, every index, shape, type, quantization
# parameter and the options of the operators the NPUs take. A corrupt file fails with a
# ModelLoadError naming what is wrong; a well-formed file with content tvm-ethos cannot import
# (no quantization on an int8 tensor, a dynamic or absurd shape) with an UnsupportedModelError.
# The rules are listed in rfcs/0006-reliability.md.

# TensorType -> (name, bytes per element; None: variable width or sub-byte)
_TFL_TYPES = {0: ("FLOAT32", 4), 1: ("FLOAT16", 2), 2: ("INT32", 4), 3: ("UINT8", 1),
              4: ("INT64", 8), 5: ("STRING", None), 6: ("BOOL", 1), 7: ("INT16", 2),
              8: ("COMPLEX64", 8), 9: ("INT8", 1), 10: ("FLOAT64", 8), 11: ("COMPLEX128", 16),
              12: ("UINT64", 8), 13: ("RESOURCE", None), 14: ("VARIANT", None),
              15: ("UINT32", 4), 16: ("UINT16", 2), 17: ("INT4", None), 18: ("BFLOAT16", 2)}
# Quantized integer types: zero points must lie in their range.
_QUANT_RANGE = {9: (-128, 127), 3: (0, 255), 7: (-32768, 32767)}
MAX_TENSOR_BYTES = 1 << 31      # 2 GiB: no NPU network has a larger tensor
MAX_RANK = 8
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
}
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
# Types TVM's TFLite importer has a Relax dtype for.
_IMPORTABLE_TYPES = {0, 1, 2, 3, 4, 6, 7, 8, 9, 12, 15}


class _Corrupt(Exception):
    """Internal: a read that would fall outside the file."""


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
            raise _Corrupt(f"a table at byte {pos} lies outside the file")
        vt = pos - _I32(d, pos)[0]
        if not 0 <= vt <= n - 4:
            raise _Corrupt(f"the vtable of the table at byte {pos} lies outside the file")
        vlen = _U16(d, vt)[0]
        if vlen < 4 or vlen % 2 or vt + vlen > n:
            raise _Corrupt(f"the vtable at byte {vt} has an invalid size {vlen}")
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
            raise _Corrupt(f"a field at byte {p} runs past the end")
        return unpack(self.d, p)[0]

    def ref(self, slot: int) -> int | None:
        """Where a table / vector / string field points, or None when absent."""
        p = self.field(slot)
        if not p:
            return None
        if p + 4 > self.n:
            raise _Corrupt(f"a field at byte {p} runs past the end")
        target = p + _U32(self.d, p)[0]
        if target + 4 > self.n:
            raise _Corrupt(f"a reference at byte {p} points past the end ({target})")
        return target

    def vector(self, slot: int, width: int) -> tuple[int, int]:
        """(start, length) of a vector field, checked to lie inside the file; (0, 0) if absent."""
        p = self.ref(slot)
        if p is None:
            return 0, 0
        length = _U32(self.d, p)[0]
        if p + 4 + length * width > self.n:
            raise _Corrupt(f"a vector of {length} elements at byte {p} runs past the end")
        return p + 4, length

    def ints(self, slot: int):
        import numpy as np

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
        import tflite

        self.tfl = tflite
        self.data = data
        self.name = name
        self._ops = {v: k for k, v in vars(tflite.BuiltinOperator).items()
                     if not k.startswith("_") and isinstance(v, int)}
        self._opt_types = {v: k for k, v in vars(tflite.BuiltinOptions).items()
                           if not k.startswith("_") and isinstance(v, int)}

    def bad(self, msg: str) -> ModelLoadError:
        return ModelLoadError(f"{self.name}: invalid TFLite model: {msg}")

    def unsupported(self, msg: str) -> UnsupportedModelError:
        return UnsupportedModelError(f"{self.name}: {msg}")

    def check(self):
        model = _Table(self.data, _U32(self.data, 0)[0])
        version = model.scalar(4, _U32, 4)
        if version != 3:
            raise self.bad(f"schema version {version}, expected 3")
        model.string(10)                                         # description
        model.vector(14, 4)                                      # metadata_buffer
        for meta in model.tables(16):
            meta.string(4)
        for sig in model.tables(18):
            sig.string(8)
            sig.tables(4), sig.tables(6)
        subgraphs = model.tables(8)
        if not subgraphs:
            raise self.bad("the model has no subgraph")
        buffer_bytes = []
        for b, buf in enumerate(model.tables(12)):
            _, size = buf.vector(4, 1)
            off, ext = buf.scalar(6, _U64, 8), buf.scalar(8, _U64, 8)
            if off > 1:
                if off + ext > len(self.data):
                    raise self.bad(f"buffer {b} lies at bytes {off}..{off + ext} but the file "
                                   f"has {len(self.data)} bytes (truncated)")
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
        for s, sg in enumerate(subgraphs):
            self.check_subgraph(sg, s, codes, buffer_bytes)
        return self.tfl.Model.GetRootAs(self.data, 0)

    def check_subgraph(self, sg: _Table, s: int, codes: list, buffer_bytes: list) -> None:
        where = f"subgraph {s}: " if s else ""
        tensors = sg.tables(4)
        n_tensors = len(tensors)
        sg.string(12)
        infos = [self.check_tensor(ten, t, where, buffer_bytes) for t, ten in enumerate(tensors)]

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
            if not infos[i][3]:
                raise self.unsupported(f"{where}graph input {i} ({infos[i][0]!r}) has no shape; "
                                       "tvm-ethos needs static shapes")
        # a tensor is defined once it is a graph input, a constant, a variable or the output of
        # an earlier operator (TFLite runs operators in the order they are stored)
        defined = set(graph_inputs) | {t for t, info in enumerate(infos) if info[4]}
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
                if i not in defined:
                    raise self.bad(f"{where}{what} reads tensor {i} ({infos[i][0]!r}), which is "
                                   "no graph input, constant or output of an earlier operator")
            if opname in _COMPUTED_INPUT0 and ins and ins[0] >= 0 and infos[ins[0]][6]:
                raise self.unsupported(f"{where}{what}: input 0 ({infos[ins[0]][0]!r}) is a "
                                       "constant; fold it before conversion")
            if not outs:
                raise self.bad(f"{where}{what} has no outputs")
            if arity is not None and opname not in ("SPLIT", "SPLIT_V") and len(outs) != 1:
                raise self.bad(f"{where}{what} has {len(outs)} outputs; {opname} has one")
            for k, i in enumerate(outs):
                i = index(i, f"{what} output {k}")
                used.add(i)
                if i in produced:
                    raise self.bad(f"{where}tensor {i} is the output of both operator "
                                   f"{produced[i]} and operator {o}")
                if infos[i][4]:
                    raise self.bad(f"{where}{what} writes tensor {i} ({infos[i][0]!r}), which is "
                                   "a constant")
                produced[i] = o
                defined.add(i)
            operands = _OP_OPERANDS.get(opname)
            if operands is not None:
                self.check_operands(what, where, opname, operands, ins, outs, infos)
            op.vector(14, 1)                                     # custom_options
            op.vector(18, 1)                                     # mutating_variable_inputs
            for k, i in enumerate(op.ints(20)):                  # intermediates
                index(i, f"{what} intermediate {k}")
            opts = self.check_options(op, o, opname, where)
            if opname in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
                self.check_weighted(what, where, opname, opts, ins, infos)
        for k, i in enumerate(graph_outputs):
            if i not in defined:
                raise self.bad(f"{where}graph output {k} (tensor {i}, {infos[i][0]!r}) is "
                               "produced by no operator")
        names = {}
        for i in sorted(used):
            info = infos[i]
            if info[1] not in _IMPORTABLE_TYPES:
                raise self.unsupported(f"{where}tensor {i} ({info[0]!r}) is "
                                       f"{_TFL_TYPES[info[1]][0]}, which TVM's TFLite importer "
                                       "cannot represent")
            if info[0] in names:
                raise self.unsupported(
                    f"{where}tensors {names[info[0]]} and {i} are both named {info[0]!r}; "
                    "TVM's TFLite importer binds tensors by name")
            names[info[0]] = i
            if info[1] in _QUANT_RANGE and not info[2]:
                raise self.unsupported(
                    f"{where}tensor {i} ({info[0]!r}) is {_TFL_TYPES[info[1]][0]} but has no "
                    "quantization parameters; tvm-ethos imports float models and fully "
                    "quantized (int8 / int16) models only")

    def check_weighted(self, what, where, opname, opts, ins, infos) -> None:
        """What TVM's convolution and fully-connected converters assert without a message."""
        if len(ins) > 2 and ins[2] < 0 and opname != "FULLY_CONNECTED":
            raise self.unsupported(f"{where}{what} has an absent (-1) bias, which TVM's TFLite "
                                   "importer cannot convert")
        w = infos[ins[1]]
        if w[1] not in (0, 3, 9):
            raise self.unsupported(f"{where}{what}: weights are {_TFL_TYPES[w[1]][0]}; TVM's "
                                   "TFLite importer takes INT8, UINT8 or FLOAT32 weights")
        if len(ins) > 2 and ins[2] >= 0 and infos[ins[2]][1] not in (0, 2, 4):
            raise self.unsupported(f"{where}{what}: bias is {_TFL_TYPES[infos[ins[2]][1]][0]}; "
                                   "TVM's TFLite importer takes INT32, INT64 or FLOAT32 bias")
        if opname == "DEPTHWISE_CONV_2D" and opts is not None:
            c, oc, m = infos[ins[0]][7][3], w[7][3], opts.DepthMultiplier()
            if w[7][0] != 1 or oc != c * m:
                raise self.unsupported(
                    f"{where}{what}: weights of shape {list(w[7])} for {c} input channels "
                    f"disagree with depth_multiplier {m} (TVM's importer needs "
                    f"[1, kh, kw, channels * depth_multiplier])")

    def check_operands(self, what, where, opname, operands, ins, outs, infos) -> None:
        four_d, constant, ranks = operands
        for k in four_d:
            if k < len(ins) and ins[k] >= 0 and infos[ins[k]][5] != 4:
                raise self.bad(f"{where}{what}: input {k} has rank {infos[ins[k]][5]}; {opname} "
                               "needs a 4-D tensor")
        if four_d and infos[outs[0]][5] != 4:
            raise self.bad(f"{where}{what}: the output has rank {infos[outs[0]][5]}; {opname} "
                           "produces a 4-D tensor")
        for k, rank in ranks.items():
            if k < len(ins) and ins[k] >= 0 and infos[ins[k]][5] != rank:
                raise self.bad(f"{where}{what}: input {k} has rank {infos[ins[k]][5]}, "
                               f"expected {rank}")
        for k in constant:
            if k < len(ins) and ins[k] >= 0 and not infos[ins[k]][6]:
                raise self.unsupported(f"{where}{what}: input {k} ({infos[ins[k]][0]!r}) is not "
                                       "a constant; tvm-ethos needs constant weights and bias")

    def check_tensor(self, ten: _Table, t: int, where: str, buffer_bytes: list) -> tuple:
        import numpy as np

        raw = ten.string(10)
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
        if ttype not in _TFL_TYPES:
            raise self.bad(f"{label} has type code {ttype}, which is no TFLite TensorType")
        tname, itemsize = _TFL_TYPES[ttype]
        shape = ten.ints(4)
        signature = ten.ints(18)
        buf = ten.scalar(8, _U32, 4)
        if buf >= len(buffer_bytes):
            raise self.bad(f"{label} refers to buffer {buf}; the model has {len(buffer_bytes)}")
        if len(shape) > MAX_RANK:
            raise self.unsupported(f"{label} has rank {len(shape)}; at most {MAX_RANK} "
                                   "dimensions are supported")
        if (shape < 0).any():
            if len(signature) and (signature < 0).any():
                raise self.unsupported(f"{label} has a dynamic shape (signature "
                                       f"{signature.tolist()}); tvm-ethos needs static shapes")
            raise self.bad(f"{label} has a negative dimension in {shape.tolist()}")
        if (shape == 0).any():
            raise self.unsupported(f"{label} has an empty dimension in {shape.tolist()}")
        elements = 1
        for dim in shape.tolist():
            elements *= dim
        nbytes = elements * (itemsize or 1)
        if nbytes > MAX_TENSOR_BYTES:
            raise self.unsupported(f"{label} has shape {shape.tolist()} ({nbytes:,} bytes); "
                                   f"tensors are limited to {MAX_TENSOR_BYTES:,} bytes")
        stored = buffer_bytes[buf] if buf else 0
        if stored and itemsize is not None and stored != elements * itemsize:
            raise self.bad(f"{label} is a constant of shape {shape.tolist()} {tname}, which "
                           f"needs {elements * itemsize} bytes, but its buffer holds {stored}")
        q = ten.table(12)
        quantized = self.check_quantization(q, label, ttype, shape) if q is not None else False
        variable = bool(ten.scalar(14, _U8, 1))
        has_shape = ten.ref(4) is not None
        # (name, type, quantized, has a shape, defined without a producer, rank, constant, shape)
        return (name, ttype, quantized, has_shape, bool(stored) or variable, len(shape),
                bool(stored), tuple(shape.tolist()))

    def check_quantization(self, q: _Table, label: str, ttype: int, shape) -> bool:
        import numpy as np

        s0, n_scale = q.vector(8, 4)
        z0, n_zp = q.vector(10, 8)
        q.vector(4, 4), q.vector(6, 4)                           # min, max
        axis = q.scalar(16, _I32, 4)
        if q.scalar(12, _U8, 1):                                 # details (custom quantization)
            q.table(14)
        if n_scale == 0:
            if n_zp:
                raise self.bad(f"{label} has {n_zp} zero points but no scales")
            return False
        if n_zp != n_scale:
            raise self.bad(f"{label} has {n_scale} quantization scales but {n_zp} zero points")
        scale = np.frombuffer(self.data, "<f4", n_scale, s0)
        zp = np.frombuffer(self.data, "<i8", n_zp, z0)
        ok = np.isfinite(scale) & (scale > 0)
        if not ok.all():
            raise self.bad(f"{label} has quantization scale(s) {scale[~ok][:4].tolist()}; "
                           "scales must be finite and positive")
        if not 0 <= axis < max(len(shape), 1):
            raise self.bad(f"{label} has quantized_dimension {axis}, out of range for shape "
                           f"{shape.tolist()}")
        if n_scale > 1:
            if axis >= len(shape) or int(shape[axis]) != n_scale:
                raise self.bad(f"{label} has {n_scale} per-channel scales along dimension "
                               f"{axis} of shape {shape.tolist()}")
            if zp.any():
                raise self.unsupported(f"{label} is quantized per channel with non-zero zero "
                                       "points, which TFLite's quantization spec does not allow")
        lim = _QUANT_RANGE.get(ttype)
        if lim is not None:
            out = (zp < lim[0]) | (zp > lim[1])
            if out.any():
                raise self.bad(f"{label} is {_TFL_TYPES[ttype][0]} with zero point(s) "
                               f"{zp[out][:4].tolist()} outside [{lim[0]}, {lim[1]}]")
        return True

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
        import inspect

        got = tuple(n for n, f in inspect.getmembers(cls, inspect.isfunction)
                    if n[0].isupper() and not n.startswith(("GetRootAs", "Init"))
                    and list(inspect.signature(f).parameters) == ["self"])
        _ACCESSORS[cls] = got
    return got


def _validate_tflite(data: bytes, name: str):
    """Walk the flatbuffer and check it (see the comment above); returns the ``tflite.Model``."""
    try:
        return _TfliteChecker(data, name).check()
    except (ModelLoadError, UnsupportedModelError):
        raise
    except _Corrupt as err:
        raise ModelLoadError(f"{name}: truncated or corrupt TFLite file ({len(data)} bytes): "
                             f"{err}") from None
    except struct.error:
        raise ModelLoadError(f"{name}: truncated or corrupt TFLite file ({len(data)} bytes): a "
                             "field lies past the end of the data") from None
    except Exception as err:  # ValueError, TypeError, IndexError from a cut flatbuffer
        raise ModelLoadError(
            f"{name}: truncated or corrupt TFLite file ({len(data)} bytes): "
            f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        ) from None


def _import_tflite(data: bytes, name: str, shape_dict):
    try:
        import tflite  # noqa: F401
        from tvm.relax.frontend.tflite import from_tflite

        from tvm_ethos.tflite_converter import EthosOperatorConverter
    except ImportError as err:  # pragma: no cover - tflite is a hard dependency
        raise UnsupportedModelError(f"{name}: TFLite import needs the 'tflite' package ({err})") from None
    model = _validate_tflite(data, name)
    if shape_dict:
        sg = model.Subgraphs(0)
        inputs = []
        for i in sg.InputsAsNumpy():
            raw = sg.Tensors(int(i)).Name()
            inputs.append(raw.decode("utf-8") if raw is not None else f"tvmgen_tensor_{i}")
        for key in shape_dict:
            if key not in inputs:
                raise OptionError(f"option 'shape_dict': {key!r} is no input of {name}; its "
                                  f"inputs are {', '.join(map(repr, inputs)) or '(none)'}")
    try:
        mod = from_tflite(model, shape_dict=shape_dict, op_converter=EthosOperatorConverter)
    except Exception as err:
        raise UnsupportedModelError(
            f"{name}: the TFLite importer cannot convert this model: {_importer_failure(err)}"
        ) from None
    mod = _restore_softmax_beta(_finish(mod), _softmax_betas(model), name)
    mod = mod.with_attr("tvm_ethos.source_format", "tflite")
    return _with_output_specs(mod, *_tflite_outputs(model))


#: Module attributes with the source model's output names and shapes (compiler.py reads them).
OUTPUT_NAMES_ATTR = "tvm_ethos.output_names"
OUTPUT_SHAPES_ATTR = "tvm_ethos.output_shapes"


def _tflite_outputs(model) -> tuple[list[str], list[list[int]]]:
    """The main subgraph's output tensor names and declared shapes."""
    sg = model.Subgraphs(0)
    names, shapes = [], []
    for i in sg.OutputsAsNumpy():
        t = sg.Tensors(int(i))
        raw = t.Name()
        names.append(raw.decode("utf-8") if raw is not None else f"tvmgen_tensor_{i}")
        shapes.append([int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else [])
    return names, shapes


def _with_output_specs(mod, names: list[str], shapes: list[list[int]]):
    """Record the source model's output names and shapes on ``mod``. TVM 0.27's TFLite
    importer names no outputs and keeps FULLY_CONNECTED's input rank (a (1,1,1,64) input gives
    (1,1,1,10) where TFLite, with keep_num_dims false, gives (1,10)); the compiled model hands
    its outputs back under these names and shapes (same elements, a reshape)."""
    return mod.with_attr(OUTPUT_NAMES_ATTR, list(names)).with_attr(OUTPUT_SHAPES_ATTR, [list(s) for s in shapes])


def _softmax_betas(model) -> list[float]:
    """The ``beta`` of every SOFTMAX of the main subgraph, in operator order."""
    import tflite

    sg = model.Subgraphs(0)
    betas = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) != tflite.BuiltinOperator.SOFTMAX:
            continue
        beta = 1.0
        table = op.BuiltinOptions()
        if table is not None:
            opts = tflite.SoftmaxOptions()
            opts.Init(table.Bytes, table.Pos)
            beta = float(opts.Beta())
        betas.append(beta)
    return betas


def _restore_softmax_beta(mod, betas: list[float], name: str):
    """TVM's TFLite importer drops SOFTMAX's ``beta`` (it emits ``softmax(x)`` for
    ``softmax(beta * x)``): put it back as ``softmax(multiply(x, beta))`` on each softmax whose
    beta is not 1. The importer converts operators in order, so the k-th ``relax.nn.softmax``
    of ``main`` is the k-th SOFTMAX."""
    if all(b == 1.0 for b in betas):
        return mod
    from tvm import relax

    calls = []
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and getattr(v.op, "name", "") == "relax.nn.softmax":
                calls.append(v)
    if len(calls) != len(betas):
        raise UnsupportedModelError(
            f"{name}: found {len(calls)} softmax operators in the imported module for "
            f"{len(betas)} SOFTMAX operators with beta {betas}; cannot restore beta"
        )
    scaled = {c: b for c, b in zip(calls, betas) if b != 1.0}

    @relax.expr_functor.mutator
    class _AddBeta(relax.PyExprMutator):
        def visit_call_(self, call):
            new = super().visit_call_(call)
            beta = scaled.get(call)
            if beta is None:
                return new
            arg = new.args[0]
            dtype = str(arg.ty.dtype)
            k = self.builder_.emit(relax.op.multiply(arg, relax.const(beta, dtype)))
            return relax.Call(new.op, [k], new.attrs)

    mutator = _AddBeta(mod)
    mod["main"] = mutator.visit_expr(mod["main"])
    return _finish(mod)


def _importer_failure(err: BaseException) -> str:
    """One line about an exception from TVM's TFLite importer: the operator it was converting
    (found in the traceback) and the error's own message, or its type when it has none."""
    op = ""
    tb = err.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "convert_op_to_relax" and "op_idx" in frame.f_locals:
            code = frame.f_locals.get("op_code_str")
            op = f"operator {frame.f_locals['op_idx']}" + (f" ({code})" if code else "") + ": "
        tb = tb.tb_next
    return op + _one_line(err)


def _one_line(err: BaseException, last: bool = True) -> str:
    """An exception's message on one line: TVM errors carry a C++ backtrace before the message
    (``last``: keep the last line), checkers add context lines (``last=False``: join them);
    printed IR and its metadata notes are dropped, and a bare or cryptic message gets the
    exception's type."""
    lines = [ln.strip() for ln in str(err).strip().splitlines()
             if ln.strip() and not ln.strip().startswith(("# Metadata omitted", "==>"))]
    text = (lines[-1] if last else " ".join(lines)) if lines else ""
    # TVM's ICHECK text: "Check failed: pb->value != 0 (0 vs. 0) : Divide by zero" -> the reason
    text = re.sub(r"^.*Check failed: .*? : (?=\S)", "", text)
    # "In ir.Op(span=None, ..., name=\"relax.add\", ...), the first ..." -> "relax.add: the first ..."
    text = re.sub(r'In ir\.Op\(.*?name="([\w.]+)".*?support_level=\d+\),\s*', r"\1: ", text)
    # any other printed op ("Size mismatch: ir.Op(span=None, ..., name=\"relax.dequantize\", ...")
    # -> its name; what follows a complete dump is kept, a truncated dump is dropped
    text = re.sub(r'ir\.Op\(.*?name="([\w.]+)"(?:.*?support_level=\d+\)|.*$)', r"\1", text)
    if len(text) > 300:
        text = text[:297] + "..."
    if not text or isinstance(err, (KeyError, IndexError, TypeError, AssertionError)) or \
            len(text) < 12:
        text = f"{type(err).__name__}{': ' + text if text else ''}"
    return text


# ---------------------------------------------------------------- ONNX
def _import_onnx(data_or_model, name: str, shape_dict):
    try:
        import onnx
    except ImportError:
        raise UnsupportedModelError(
            f"{name}: ONNX import needs the optional 'onnx' package (pip install onnx)"
        ) from None
    from tvm.relax.frontend.onnx import from_onnx

    if isinstance(data_or_model, (bytes, bytearray)):
        try:
            model = onnx.load_model_from_string(bytes(data_or_model))
            onnx.checker.check_model(model)
        except Exception as err:
            raise ModelLoadError(f"{name}: not a valid ONNX model: {_one_line(err, last=False)}") \
                from None
        # the checker lets undefined element types through; TVM's importer then fails on a
        # KeyError of the type's number
        known = set(onnx.TensorProto.DataType.values())
        g = model.graph
        for t in g.initializer:
            if t.data_type not in known or t.data_type == 0:
                raise ModelLoadError(f"{name}: not a valid ONNX model: initializer {t.name!r} "
                                     f"has data type {t.data_type}, which ONNX does not define")
        for v in list(g.input) + list(g.output) + list(g.value_info):
            if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type not in known:
                raise ModelLoadError(f"{name}: not a valid ONNX model: {v.name!r} has element "
                                     f"type {v.type.tensor_type.elem_type}, which ONNX does not "
                                     "define")
        # window attributes the checker does not range-check (TVM divides by them)
        for k, node in enumerate(g.node):
            if node.op_type not in ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"):
                continue
            for a in node.attribute:
                bad = (a.name in ("strides", "dilations", "kernel_shape") and
                       any(v < 1 for v in a.ints)) or \
                    (a.name in ("pads", "output_padding") and any(v < 0 for v in a.ints)) or \
                    (a.name == "group" and a.i < 1)
                if bad:
                    value = a.i if a.name == "group" else list(a.ints)
                    raise ModelLoadError(f"{name}: not a valid ONNX model: node {k} "
                                         f"({node.op_type} {node.name!r}): {a.name} {value} is "
                                         "out of range")
    else:
        model = data_or_model
    try:
        mod = from_onnx(model, shape_dict=shape_dict)
    except Exception as err:
        raise UnsupportedModelError(
            f"{name}: the ONNX importer cannot convert this model: {_one_line(err)}"
        ) from None
    g = model.graph
    shapes = [[int(d.dim_value) for d in v.type.tensor_type.shape.dim] for v in g.output]
    return _with_output_specs(_finish(mod).with_attr("tvm_ethos.source_format", "onnx"),
                              [v.name for v in g.output], shapes)


# ---------------------------------------------------------------- PyTorch
def _is_torch_object(obj) -> bool:
    """A torch ``nn.Module`` or ``ExportedProgram`` (without importing torch: a program that
    holds one has imported it already)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return False
    return isinstance(obj, (torch.nn.Module, torch.export.ExportedProgram))


def _import_torch(obj, name: str):
    try:
        import torch
    except ImportError:
        raise UnsupportedModelError(
            f"{name}: PyTorch import needs the optional 'torch' package "
            "(pip install 'tvm-ethos[torch]', which pins torch==2.13.0)"
        ) from None
    from tvm.relax.frontend.torch import from_exported_program

    try:
        if isinstance(obj, (bytes, bytearray)):
            import io

            prog = torch.export.load(io.BytesIO(bytes(obj)))
        elif isinstance(obj, tuple):
            module, example = obj
            if isinstance(module, torch.export.ExportedProgram):
                prog = module
            elif not isinstance(module, torch.nn.Module):
                raise ModelLoadError(f"{name}: example_inputs go with a torch.nn.Module, not a "
                                     f"{type(module).__name__}")
            else:
                if isinstance(example, torch.Tensor):
                    example = (example,)
                prog = torch.export.export(module.eval(), tuple(example))
        elif isinstance(obj, torch.nn.Module):
            raise ModelLoadError(f"{name}: a torch.nn.Module needs example_inputs "
                                 "(load_model(module, example_inputs=(x,))) to be exported")
        else:
            prog = obj
    except ModelLoadError:
        raise
    except Exception as err:
        raise ModelLoadError(f"{name}: cannot load a torch.export program: {_one_line(err)}") \
            from None
    try:
        mod = from_exported_program(prog)
    except Exception as err:
        raise UnsupportedModelError(
            f"{name}: the PyTorch importer cannot convert this program: {_one_line(err)}"
        ) from None
    return _finish(mod).with_attr("tvm_ethos.source_format", "torch")


def _finish(mod):
    """Normalise an imported module: dataflow blocks everywhere (FuseOpsByPattern needs them)."""
    from tvm import relax

    return relax.transform.ConvertToDataflow()(mod)
