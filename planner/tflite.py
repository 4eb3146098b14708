"""TFLite flatbuffer -> PlannerGraph, without TVM.

The planner has to run on models before (or without) TVM's frontend, for benchmarks against
Vela and for ``python -m planner``. This module reads the flatbuffer directly with the ``tflite``
package and turns every operator of the main subgraph into Parts built by :mod:`planner.parts`,
so propagators and constant tensors are exactly the ones the TVM path produces.

Conventions:

* Activation tensors keep their TFLite names (made unique deterministically, see
  :func:`_unique_names`); Parts are named ``<operator>_<index>`` in lower case
  (``conv_2d_0``), and Parts a single operator needs in addition are named
  ``<part>/<what>`` (``fully_connected_10/reshape``).
* Weights and biases are the constants that the Part constructors create (``<part>:weights``,
  ``<part>:bias``); their shapes are checked against the model's. Other constant operands
  (an ADD of a constant, a constant in a CONCATENATION) become ``<part>:const<i>``.
* Every computed output shape is checked against the shape the model declares, so a
  wrong padding or propagator cannot pass silently.
* A file is read only once it passes the front door (:func:`planner.tflite_check.front_door`,
  the rules ``tvmc compile`` applies): a model compile refuses is refused here with the same
  message, never planned.
* Anything that cannot be planned (an unsupported operator, float tensors, dynamic shapes, a
  damaged file) raises :class:`~planner.errors.PlannerError` with a one-line message.
"""
from __future__ import annotations

import dataclasses
import math
import os
from fractions import Fraction
from typing import TYPE_CHECKING, Callable, Sequence, Union

import numpy as np

from ethos_arch.ops import Op
from planner import parts
from planner.errors import PlannerError
from planner.graph import Part, PlannerGraph, Tensor
from planner.limits import MAX_AXIS, check_graph
from planner.propagator import Propagator
from planner.tflite_check import front_door, source_label
from planner.tflite_format import (
    DECODING_ERRORS,
    TENSOR_TYPES,
    Truncated,
    describe_decoding_error,
    enum_names,
)
from planner.vela_layouts import vela_layouts

if TYPE_CHECKING:  # pragma: no cover
    import tflite as _tflite_t

__all__ = ["load_tflite", "graph_from_tflite_model", "SUPPORTED_OPERATORS"]

ModelSource = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]

# TensorType -> planner dtype. Types missing here cannot appear anywhere in a planned graph.
_DTYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 7: "int16",
           9: "int8"}
# The NPU computes on quantized integers only; everything between Parts must be one of these.
_ACTIVATION_DTYPES = ("int8", "uint8", "int16")
#: wider tensors the NPU only moves, as the bytes of each element: taken where every operator
#: that reads or writes one is among these
_MOVED_DTYPES = ("int32",)
_MOVERS = ("TRANSPOSE",)
#: ARG_MAX's outputs
_INDEX_DTYPES = ("int32", "int64")
_NUMPY = {"int8": np.int8, "uint8": np.uint8, "int16": np.int16, "int32": np.int32,
          "int64": np.int64, "float32": np.float32, "float16": np.float16}

# ActivationFunctionType -> parts.ACTIVATIONS (SIGN_BIT=5 has no NPU equivalent).
_FUSED = {0: None, 1: "relu", 2: "relu_n1_to_1", 3: "relu6", 4: "tanh"}

# Flatbuffer vtable slots of the fields read with bounds checks (tensorflow/lite/schema.fbs).
_SLOT_TENSOR_NAME = 10
_SLOT_OPCODE_CUSTOM = 6
_SLOT_SUBGRAPH_NAME = 12


def _tfl():
    """Import the flatbuffer bindings lazily: planner must import without the tflite package."""
    try:
        import tflite
    except ImportError as e:  # pragma: no cover - tflite is a declared dependency
        raise PlannerError("reading TFLite files needs the 'tflite' package") from e
    return tflite


def _string(tab, slot: int) -> bytes | None:
    """A flatbuffer string field with bounds checks (the generated accessor slices silently)."""
    import flatbuffers  # installed with tflite
    uoffset = flatbuffers.number_types.UOffsetTFlags
    o = tab.Offset(slot)
    if o == 0:
        return None
    pos = tab.Pos + o
    pos += tab.Get(uoffset, pos)
    n = tab.Get(uoffset, pos)
    if pos + 4 + n > len(tab.Bytes):
        raise Truncated(f"a string at byte {pos} runs past the end of the file")
    return bytes(tab.Bytes[pos + 4:pos + 4 + n])


def _ints(x) -> tuple[int, ...]:
    """A generated ``...AsNumpy()`` result (0 when the vector is absent) as ints."""
    if isinstance(x, int):
        return ()
    return tuple(int(v) for v in x)


@dataclasses.dataclass
class _TInfo:
    index: int
    raw_name: str
    shape: tuple[int, ...]
    type_code: int
    buffer: int
    constant: bool
    variable: bool
    name: str = ""

    @property
    def type_name(self) -> str:
        return TENSOR_TYPES[self.type_code][0] if self.type_code in TENSOR_TYPES \
            else f"type {self.type_code}"

    @property
    def dtype(self) -> str | None:
        return _DTYPES.get(self.type_code)


def _unique_names(infos: Sequence[_TInfo]) -> None:
    """Give every listed tensor a distinct name, deterministically.

    The first tensor (by index) with a name keeps it; a repeat gets ``<name>_<k>`` with the
    smallest ``k >= 1`` that no listed tensor is named; a nameless tensor becomes
    ``tensor_<index>``. Only activation tensors are passed in, so weights never push an
    activation off its name.
    """
    taken = {i.raw_name for i in infos}
    used: set[str] = set()
    for info in sorted(infos, key=lambda i: i.index):
        base = info.raw_name or f"tensor_{info.index}"
        name = base
        if name in used or (not info.raw_name and name in taken):
            k = 1
            while f"{base}_{k}" in used or f"{base}_{k}" in taken:
                k += 1
            name = f"{base}_{k}"
        used.add(name)
        info.name = name


class _Converter:
    def __init__(self, model, data: bytes | memoryview, weight_compression: float,
                 name: str | None, where: str) -> None:
        self.model = model
        self.data = data
        self.wc = weight_compression
        self.where = where
        tfl = _tfl()
        self.tfl = tfl
        self.names = enum_names(tfl.BuiltinOperator)
        self.sg = model.Subgraphs(0)
        self.graph_name = name or (_string(self.sg._tab, _SLOT_SUBGRAPH_NAME) or b"").decode(
            "utf-8", "replace") or "tflite"
        self.tinfo = [self._read_tensor(i) for i in range(self.sg.TensorsLength())]
        self.values: dict[int, Tensor] = {}
        self.parts: list[Part] = []
        self.reserved: set[str] = set()
        self.part_names: set[str] = set()
        #: tensors of _MOVED_DTYPES only _MOVERS read and write (:meth:`moved_only`)
        self.moved: set[int] = set()

    # -- errors -------------------------------------------------------------------------------
    def err(self, msg: str) -> PlannerError:
        return PlannerError(f"{self.where}{msg}")

    def op_err(self, index: int, opname: str, msg: str) -> PlannerError:
        return self.err(f"operator {index} ({opname}): {msg}")

    # -- reading ------------------------------------------------------------------------------
    def _read_tensor(self, i: int) -> _TInfo:
        t = self.sg.Tensors(i)
        raw = _string(t._tab, _SLOT_TENSOR_NAME) or b""
        buf = t.Buffer()
        constant = False
        if buf > 0:     # the front door checked the index and the buffer's size
            b = self.model.Buffers(buf)
            constant = b.DataLength() > 0 or b.Offset() > 1
        return _TInfo(i, raw.decode("utf-8", "replace"), _ints(t.ShapeAsNumpy()),
                      t.Type(), buf, constant, bool(t.IsVariable()))

    def info(self, i: int, who: str = "") -> _TInfo:
        if not 0 <= i < len(self.tinfo):
            raise self.err(f"{who}tensor index {i} is out of range (the subgraph has "
                           f"{len(self.tinfo)} tensors)")
        return self.tinfo[i]

    def const_array(self, i: int) -> np.ndarray:
        """The contents of a constant tensor, shaped and typed."""
        info = self.tinfo[i]
        dtype = info.dtype
        if dtype is None:
            raise self.err(f"constant tensor {info.raw_name!r} has unsupported type "
                           f"{info.type_name}")
        b = self.model.Buffers(info.buffer)
        if b.Offset() > 1:
            raw = bytes(self.data[b.Offset():b.Offset() + b.Size()])
        else:
            raw = b.DataAsNumpy().tobytes()
        count = math.prod(info.shape)
        item = np.dtype(_NUMPY[dtype]).itemsize
        if len(raw) != count * item:
            raise self.err(f"constant tensor {info.raw_name!r} holds {len(raw)} bytes, its "
                           f"shape {list(info.shape)} of {info.type_name} needs {count * item}")
        return np.frombuffer(raw, dtype=_NUMPY[dtype]).reshape(info.shape)

    def check_shape(self, info: _TInfo) -> None:
        # a static shape whose signature leaves an axis open (a batch converted as dynamic)
        # is planned at its shape, as TFLite Micro and TVM's importer run it; a shape left
        # open the front door refuses
        if not info.shape:
            raise self.err(f"tensor {info.raw_name!r} (index {info.index}) has an unknown or "
                           "scalar shape")
        if any(s < 1 for s in info.shape):
            raise self.err(f"tensor {info.raw_name!r} (index {info.index}) has an unknown or "
                           f"empty dimension in {list(info.shape)}")
        if any(s > MAX_AXIS for s in info.shape):
            raise self.err(f"tensor {info.raw_name!r} (index {info.index}) has shape "
                           f"{list(info.shape)}; the planner's limit is {MAX_AXIS:,} elements "
                           "per axis (the NPUs' 16-bit dimension fields)")

    def check_activation(self, info: _TInfo, indices: bool = False) -> str:
        """The tensor's dtype, refused unless an activation's (``indices``: an ARG_MAX's
        int32 or int64 output)."""
        self.check_shape(info)
        if info.variable:
            raise self.err(f"tensor {info.raw_name!r} (index {info.index}) is a variable "
                           "(state tensors are not supported)")
        if indices and info.dtype not in _INDEX_DTYPES:
            raise self.err(f"tensor {info.raw_name!r} (index {info.index}) is {info.type_name}; "
                           "ARG_MAX writes int32 or int64 indices")
        if not indices and info.dtype not in _ACTIVATION_DTYPES and info.index not in self.moved:
            raise self.err(f"tensor {info.raw_name!r} (index {info.index}) is {info.type_name}; "
                           "the NPU runs int8, uint8 or int16 activations only (int32: read "
                           "and written by TRANSPOSEs only, or an output a QUANTIZE of int16 "
                           "writes)")
        return info.dtype

    def moved_only(self, ops, op_io) -> set[int]:
        """The :data:`_MOVED_DTYPES` tensors that only :data:`_MOVERS` read or write, as
        their data input or output: the NPU copies their bytes; and the int32 outputs of a
        QUANTIZE of int16 that no operator reads: the NPU writes them (an int32 OFM)."""
        others, written = set(), set()
        for op, (ins, outs) in zip(ops, op_io):
            name = self.opname(op)[0]
            if name == "QUANTIZE" and ins and ins[0] >= 0 \
                    and self.tinfo[ins[0]].dtype == "int16":
                written.update(outs)
                others.update(ins)
            elif name not in _MOVERS:
                others.update(ins + outs)
            else:
                others.update(ins[1:])   # a permutation is no moved tensor
        read = {i for ins, _ in op_io for i in ins}
        wide = {i for i in written if self.tinfo[i].dtype == "int32" and i not in read}
        return wide | {i for i, info in enumerate(self.tinfo)
                       if info.dtype in _MOVED_DTYPES and i not in others | written}

    # -- conversion ---------------------------------------------------------------------------
    def convert(self) -> PlannerGraph:
        ops = [self.sg.Operators(k) for k in range(self.sg.OperatorsLength())]
        op_io = [(_ints(op.InputsAsNumpy()), _ints(op.OutputsAsNumpy())) for op in ops]
        graph_in = _ints(self.sg.InputsAsNumpy())
        graph_out = _ints(self.sg.OutputsAsNumpy())
        self.moved = self.moved_only(ops, op_io)
        # Activation tensors: graph inputs, op outputs, non-constant op inputs.
        act: dict[int, _TInfo] = {}
        for i in graph_in + graph_out:
            act[i] = self.info(i, "graph input/output: ")
        for ins, outs in op_io:
            for i in outs:
                act[i] = self.info(i)
            for i in ins:
                if i >= 0 and not self.info(i).constant:
                    act[i] = self.tinfo[i]
        _unique_names(list(act.values()))
        for name in (a.name for a in act.values()):
            for k, ch in enumerate(name):
                if ch == ":":
                    self.reserved.add(name[:k])
        for i in graph_in:
            info = self.tinfo[i]
            if info.constant:
                raise self.err(f"graph input {info.raw_name!r} is a constant")
            self.values[i] = Tensor(info.name, info.shape, self.check_activation(info))
        for k, (op, (ins, outs)) in enumerate(zip(ops, op_io)):
            self.convert_op(k, op, ins, outs)
        outputs = []
        for i in graph_out:
            if i not in self.values:
                raise self.err(f"graph output {self.tinfo[i].raw_name!r} is produced by no "
                               "operator")
            outputs.append(self.values[i])
        inputs = tuple(self.values[i] for i in graph_in)
        graph = PlannerGraph(vela_layouts(self.parts, inputs, outputs), inputs,
                             tuple(outputs), self.graph_name)
        try:
            check_graph(graph)      # window attributes and sizes, before any planning
        except PlannerError as e:
            raise self.err(str(e)) from None
        return graph

    def opname(self, op) -> tuple[str, int]:
        n = self.model.OperatorCodesLength()
        idx = op.OpcodeIndex()
        if idx >= n:
            raise Truncated(f"opcode index {idx} out of range ({n} operator codes)")
        oc = self.model.OperatorCodes(idx)
        code = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        name = self.names.get(code, f"BUILTIN_{code}")
        if name == "CUSTOM":
            custom = _string(oc._tab, _SLOT_OPCODE_CUSTOM) or b""
            name = f"CUSTOM {custom.decode('utf-8', 'replace')!r}"
        return name, code

    def part_name(self, base: str) -> str:
        """A part name whose ``<name>:...`` constants cannot collide with a model tensor."""
        name = base
        while name in self.reserved or name in self.part_names:
            name += "_"
        self.part_names.add(name)
        return name

    def convert_op(self, index: int, op, ins: tuple[int, ...], outs: tuple[int, ...]) -> None:
        opname, _ = self.opname(op)
        handler: Callable | None = _HANDLERS.get(opname)
        if handler is None:
            if opname == "DEQUANTIZE":
                raise self.op_err(index, opname, "produces float; int8 NPUs cannot run it, "
                                  "use a fully quantized model")
            raise self.op_err(index, opname, "operator is not supported by the planner")
        ctx = _OpContext(self, index, opname, op, ins, outs)
        handler(ctx)


class _OpContext:
    """What one operator's handler needs: its tensors, options and helpers to emit Parts."""

    def __init__(self, conv: _Converter, index: int, opname: str, op, ins, outs) -> None:
        self.c, self.index, self.opname, self.op = conv, index, opname, op
        self.ins, self.outs = ins, outs
        self.name = conv.part_name(f"{opname.lower()}_{index}")

    def err(self, msg: str) -> PlannerError:
        return self.c.op_err(self.index, self.opname, msg)

    def expect(self, n_in: Sequence[int] | int, n_out: int = 1) -> None:
        n_in = (n_in,) if isinstance(n_in, int) else tuple(n_in)
        if len(self.ins) not in n_in:
            raise self.err(f"has {len(self.ins)} inputs, expected "
                           f"{' or '.join(map(str, n_in))}")
        if n_out >= 0 and len(self.outs) != n_out:
            raise self.err(f"has {len(self.outs)} outputs, expected {n_out}")

    def options(self, cls_name: str):
        """The operator's builtin options table, or None when the model omits it."""
        cls = getattr(self.c.tfl, cls_name)
        expected = getattr(self.c.tfl.BuiltinOptions, cls_name)
        kind = self.op.BuiltinOptionsType()
        table = self.op.BuiltinOptions()
        if table is None or kind == 0:
            return None
        if kind != expected:
            raise self.err(f"carries options of type {kind}, expected {cls_name}")
        opts = cls()
        opts.Init(table.Bytes, table.Pos)
        return opts

    def fused(self, opts) -> str | None:
        code = 0 if opts is None else opts.FusedActivationFunction()
        if code not in _FUSED:
            raise self.err(f"fused activation {code} (SIGN_BIT or unknown) is not supported")
        return _FUSED[code]

    def act(self, k: int) -> Tensor:
        """Input ``k`` as an activation produced earlier (or a graph input)."""
        if k >= len(self.ins) or self.ins[k] < 0:
            raise self.err(f"input {k} is missing")
        i = self.ins[k]
        info = self.c.tinfo[i]
        if info.constant:
            raise self.err(f"input {k} ({info.raw_name!r}) is a constant; only activations are "
                           "supported there")
        t = self.c.values.get(i)
        if t is None:
            raise self.err(f"input {k} ({info.name!r}) is neither a graph input nor the output "
                           "of an earlier operator")
        return t

    def int8_input(self, what: str, planned: str, rank: int, reads: str) -> Tensor:
        """Input 0 as an int8 activation of ``rank`` axes (a recurrent operator's sequence or
        input), else refused saying what the planner plans (``planned``) and what the
        operator ``reads``."""
        x = self.act(0)
        dtype = self.c.tinfo[self.ins[0]].dtype
        if dtype != "int8":
            raise self.err(f"its {what} is {dtype}; the planner plans {planned}")
        if len(x.shape) != rank:
            raise self.err(f"its {what} has shape {list(x.shape)}; {reads}")
        return x

    def operand(self, k: int) -> Tensor:
        """Input ``k``, activation or constant (constants become ``<part>:const<k>``)."""
        if k < len(self.ins) and self.ins[k] >= 0 and self.c.tinfo[self.ins[k]].constant:
            info = self.c.tinfo[self.ins[k]]
            if any(d < 1 for d in info.shape):
                raise self.err(f"constant input {k} has an empty dimension in "
                               f"{list(info.shape)}")
            if info.dtype is None:
                raise self.err(f"constant input {k} has unsupported type {info.type_name}")
            # A scalar constant is stored as shape (1,): parts' broadcast propagators need a
            # rank of at least one (an empty linear part loses the output's rank).
            return Tensor(f"{self.name}:const{k}", info.shape or (1,), info.dtype, True)
        return self.act(k)

    def const(self, k: int, what: str) -> np.ndarray:
        if k >= len(self.ins) or self.ins[k] < 0:
            raise self.err(f"{what} (input {k}) is missing")
        if not self.c.tinfo[self.ins[k]].constant:
            raise self.err(f"{what} (input {k}) must be a constant")
        return self.c.const_array(self.ins[k])

    def const_info(self, k: int, what: str, optional: bool = False) -> _TInfo | None:
        if k >= len(self.ins) or self.ins[k] < 0:
            if optional:
                return None
            raise self.err(f"{what} (input {k}) is missing")
        info = self.c.tinfo[self.ins[k]]
        if not info.constant:
            raise self.err(f"{what} (input {k}, {info.raw_name!r}) must be a constant")
        return info

    def out_info(self, j: int = 0, indices: bool = False) -> _TInfo:
        info = self.c.tinfo[self.outs[j]]
        self.c.check_activation(info, indices)
        return info

    def emit(self, part: Part, j: int = 0, final: bool = True, indices: bool = False) -> Tensor:
        """Add ``part``; when ``final`` its output is output ``j`` of the operator: check the
        shape against the model's and give it the model's dtype (``indices``: int32 or
        int64, ARG_MAX's)."""
        if final:
            info = self.out_info(j, indices)
            if part.output.shape != info.shape:
                raise self.err(f"computed output shape {list(part.output.shape)} but the model "
                               f"declares {list(info.shape)}")
            if part.output.dtype != info.dtype:
                part = dataclasses.replace(part, output=dataclasses.replace(
                    part.output, dtype=info.dtype))
            self.c.values[self.outs[j]] = part.output
        self.c.parts.append(part)
        return part.output

    def out_name(self, j: int = 0) -> str:
        return self.c.tinfo[self.outs[j]].name

    def sub_name(self, what: str) -> str:
        return self.c.part_name(f"{self.name}/{what}")


def _padding(ctx: _OpContext, opts, h: int, w: int, k: tuple[int, int], s: tuple[int, int],
             d: tuple[int, int]) -> tuple[int, int, int, int]:
    """TFLite SAME/VALID as explicit (top, left, bottom, right)."""
    code = 0 if opts is None else opts.Padding()
    if code == 1:
        return (0, 0, 0, 0)
    if code != 0:
        raise ctx.err(f"unknown padding {code}")
    top, bottom = parts.same_padding(h, k[0], s[0], d[0])
    left, right = parts.same_padding(w, k[1], s[1], d[1])
    return (top, left, bottom, right)


def _strides(ctx: _OpContext, opts) -> tuple[int, int]:
    s = (opts.StrideH(), opts.StrideW()) if opts is not None else (0, 0)
    if min(s) < 1:
        raise ctx.err(f"strides {list(s)} must be positive")
    return s


def _dilation(ctx: _OpContext, opts) -> tuple[int, int]:
    d = (opts.DilationHFactor(), opts.DilationWFactor()) if opts is not None else (1, 1)
    if min(d) < 1:
        raise ctx.err(f"dilation {list(d)} must be positive")
    return d


def _weights(ctx: _OpContext, k: int, rank: int) -> _TInfo:
    info = ctx.const_info(k, "weights")
    if len(info.shape) != rank:
        raise ctx.err(f"weights {info.raw_name!r} have shape {list(info.shape)}, expected "
                      f"{rank} dims")
    if any(d < 1 for d in info.shape):
        raise ctx.err(f"weights {info.raw_name!r} have an empty or negative dimension in "
                      f"{list(info.shape)}")
    return info


def _bias(ctx: _OpContext, part: Part, k: int, channels: int) -> Part:
    """Check the model's bias against the constructor's and keep the model's dtype (int64
    for 16x8 models)."""
    info = ctx.const_info(k, "bias", optional=True)
    if info is None:
        return part
    if info.shape != (channels,):
        raise ctx.err(f"bias {info.raw_name!r} has shape {list(info.shape)}, expected "
                      f"[{channels}]")
    if info.dtype is not None and info.dtype != "int32":
        inputs = tuple(dataclasses.replace(t, dtype=info.dtype)
                       if t.name == f"{part.name}:bias" else t for t in part.inputs)
        part = dataclasses.replace(part, inputs=inputs)
    return part


def _conv_2d(ctx: _OpContext) -> None:
    ctx.expect((2, 3))
    x = ctx.act(0)
    if len(x.shape) != 4:
        raise ctx.err(f"input must be NHWC, has shape {list(x.shape)}")
    wi = _weights(ctx, 1, 4)
    o, kh, kw, icg = wi.shape
    c = x.shape[3]
    if c % icg:
        raise ctx.err(f"weights have {icg} input channels, which does not divide the input's "
                      f"{c}")
    opts = ctx.options("Conv2DOptions")
    s, d = _strides(ctx, opts), _dilation(ctx, opts)
    pads = _padding(ctx, opts, x.shape[1], x.shape[2], (kh, kw), s, d)
    has_bias = len(ctx.ins) > 2 and ctx.ins[2] >= 0
    part = parts.conv2d(ctx.name, x, out_channels=o, kernel=(kh, kw), strides=s, dilation=d,
                        padding=pads, groups=c // icg, activation=ctx.fused(opts),
                        weight_compression=ctx.c.wc, bias=has_bias,
                        output_name=ctx.out_name())
    ctx.emit(_bias(ctx, part, 2, o))


def _depthwise_conv_2d(ctx: _OpContext) -> None:
    ctx.expect((2, 3))
    x = ctx.act(0)
    if len(x.shape) != 4:
        raise ctx.err(f"input must be NHWC, has shape {list(x.shape)}")
    wi = _weights(ctx, 1, 4)
    one, kh, kw, oc = wi.shape
    c = x.shape[3]
    if one != 1 or oc % c:
        raise ctx.err(f"weights shape {list(wi.shape)} is not [1, kh, kw, {c} * multiplier]")
    # The multiplier follows from the shapes; newer converters leave the option at 0 or 1.
    m = oc // c
    opts = ctx.options("DepthwiseConv2DOptions")
    if opts is not None and opts.DepthMultiplier() not in (0, 1, m):
        raise ctx.err(f"depth_multiplier {opts.DepthMultiplier()} disagrees with the weights "
                      f"({oc} channels for {c} inputs)")
    s, d = _strides(ctx, opts), _dilation(ctx, opts)
    pads = _padding(ctx, opts, x.shape[1], x.shape[2], (kh, kw), s, d)
    has_bias = len(ctx.ins) > 2 and ctx.ins[2] >= 0
    part = parts.depthwise_conv2d(ctx.name, x, kernel=(kh, kw), strides=s, dilation=d,
                                  padding=pads, depth_multiplier=m,
                                  activation=ctx.fused(opts), weight_compression=ctx.c.wc,
                                  bias=has_bias, output_name=ctx.out_name())
    ctx.emit(_bias(ctx, part, 2, oc))


def _pool(pool_type: str) -> Callable[[_OpContext], None]:
    def handler(ctx: _OpContext) -> None:
        ctx.expect(1)
        x = ctx.act(0)
        if len(x.shape) != 4:
            raise ctx.err(f"input must be NHWC, has shape {list(x.shape)}")
        opts = ctx.options("Pool2DOptions")
        if opts is None:
            raise ctx.err("has no Pool2DOptions")
        k = (opts.FilterHeight(), opts.FilterWidth())
        if min(k) < 1:
            raise ctx.err(f"filter size {list(k)} must be positive")
        s = _strides(ctx, opts)
        pads = _padding(ctx, opts, x.shape[1], x.shape[2], k, s, (1, 1))
        ctx.emit(parts.pool2d(ctx.name, x, pool_type=pool_type, pool_size=k, strides=s,
                              padding=pads, activation=ctx.fused(opts),
                              output_name=ctx.out_name()))
    return handler


def _mean(ctx: _OpContext) -> None:
    ctx.expect(2)
    x = ctx.act(0)
    axes = ctx.const(1, "axes").reshape(-1)
    rank = len(x.shape)
    norm = tuple(sorted({int(a) % rank for a in axes if -rank <= a < rank}))
    if rank != 4 or not norm or not set(norm) <= {1, 2} or \
            any(not -rank <= a < rank for a in axes):
        raise ctx.err(f"only a mean over H, W or both of an NHWC tensor is supported, got "
                      f"axes {[int(a) for a in axes]} of shape {list(x.shape)}")
    opts = ctx.options("ReducerOptions")
    keep = bool(opts.KeepDims()) if opts is not None else False
    ctx.emit(parts.mean(ctx.name, x, keepdims=keep, output_name=ctx.out_name(), axes=norm))


def _reduce_over_depth(kind: Op):
    """SUM, REDUCE_MAX and REDUCE_MIN over the depth, height, width or both with it: the
    reductions an Ethos-U takes there (``parts.reduce_over_depth``)."""
    def handler(ctx: _OpContext) -> None:
        ctx.expect(2)
        x = ctx.act(0)
        axes = ctx.const(1, "axes").reshape(-1)
        rank = len(x.shape)
        norm = tuple(sorted({int(a) % rank for a in axes if -rank <= a < rank}))
        if rank != 4 or norm not in parts.DEPTH_REDUCTION_AXES or \
                any(not -rank <= a < rank for a in axes):
            raise ctx.err(f"only a reduction over the depth (with any of H and W) of an NHWC "
                          f"tensor is supported, got axes {[int(a) for a in axes]} of shape "
                          f"{list(x.shape)}")
        opts = ctx.options("ReducerOptions")
        keep = bool(opts.KeepDims()) if opts is not None else False
        ctx.emit(parts.reduce_over_depth(ctx.name, x, kind, norm, keep,
                                         output_name=ctx.out_name()))
    return handler


def _fully_connected(ctx: _OpContext) -> None:
    ctx.expect((2, 3))
    x = ctx.act(0)
    wi = _weights(ctx, 1, 2)
    units, k = wi.shape
    opts = ctx.options("FullyConnectedOptions")
    if opts is not None and opts.WeightsFormat() != 0:
        raise ctx.err(f"weights format {opts.WeightsFormat()} (shuffled) is not supported")
    if x.elements % k:
        raise ctx.err(f"input of {x.elements} elements cannot be rows of {k} features")
    rows = x.elements // k
    if x.shape != (rows, k):
        # FULLY_CONNECTED flattens its input implicitly; the planner needs it explicit.
        x = ctx.emit(parts.reshape(ctx.sub_name("reshape"), x, (rows, k)), final=False)
    has_bias = len(ctx.ins) > 2 and ctx.ins[2] >= 0
    out = ctx.out_info()
    fc_final = out.shape == (rows, units)
    part = parts.fully_connected(ctx.name, x, units, activation=ctx.fused(opts),
                                 weight_compression=ctx.c.wc, bias=has_bias,
                                 output_name=ctx.out_name() if fc_final else None)
    part = _bias(ctx, part, 2, units)
    if fc_final:
        ctx.emit(part)
        return
    # keep_num_dims: the model keeps the input's leading dims; reshape back to them.
    y = ctx.emit(dataclasses.replace(part, output=dataclasses.replace(
        part.output, dtype=out.dtype)), final=False)
    if math.prod(out.shape) != y.elements:
        raise ctx.err(f"computed output {list(y.shape)} but the model declares "
                      f"{list(out.shape)}")
    ctx.emit(parts.reshape(ctx.sub_name("unflatten"), y, out.shape,
                           output_name=ctx.out_name()))


def _binary(op: str, options: str | None) -> Callable[[_OpContext], None]:
    def handler(ctx: _OpContext) -> None:
        ctx.expect(2)
        a, b = ctx.operand(0), ctx.operand(1)
        if a.is_constant and b.is_constant:
            raise ctx.err("both inputs are constants")
        act = ctx.fused(ctx.options(options)) if options else None
        ctx.emit(parts.elementwise(ctx.name, a, b, op=op, activation=act,
                                   output_name=ctx.out_name()))
    return handler


def _concatenation(ctx: _OpContext) -> None:
    if not ctx.ins:
        raise ctx.err("has no inputs")
    ctx.expect(len(ctx.ins))
    xs = [ctx.operand(k) for k in range(len(ctx.ins))]
    if all(t.is_constant for t in xs):
        raise ctx.err("all inputs are constants")
    opts = ctx.options("ConcatenationOptions")
    axis = opts.Axis() if opts is not None else 0
    rank = len(xs[0].shape)
    if not -rank <= axis < rank:
        raise ctx.err(f"axis {axis} is out of range for rank {rank}")
    part = parts.concatenate(ctx.name, xs, axis=axis, output_name=ctx.out_name())
    act = ctx.fused(opts)
    if act is not None:
        part = part.with_attrs(activation=act)
    ctx.emit(part)


def _pad(ctx: _OpContext) -> None:
    ctx.expect((2, 3))
    x = ctx.act(0)
    p = ctx.const(1, "paddings")
    if p.shape != (len(x.shape), 2) or (p < 0).any():
        raise ctx.err(f"paddings {p.tolist()} are not non-negative (before, after) pairs for "
                      f"shape {list(x.shape)}")
    ctx.emit(parts.pad(ctx.name, x, [(int(a), int(b)) for a, b in p],
                       output_name=ctx.out_name()))


def _resize(method: str, options: str) -> Callable[[_OpContext], None]:
    def handler(ctx: _OpContext) -> None:
        ctx.expect(2)
        x = ctx.act(0)
        if len(x.shape) != 4:
            raise ctx.err(f"input must be NHWC, has shape {list(x.shape)}")
        opts = ctx.options(options)
        align = bool(opts.AlignCorners()) if opts is not None else False
        half = bool(opts.HalfPixelCenters()) if opts is not None else False
        if align:
            raise ctx.err("align_corners=True is not supported (it is not an integer upscale)")
        out = ctx.out_info()
        if len(out.shape) != 4:
            raise ctx.err(f"output must be NHWC, has shape {list(out.shape)}")
        oh, ow = out.shape[1], out.shape[2]
        h, w = x.shape[1], x.shape[2]
        if oh % h or ow % w:
            raise ctx.err(f"{h}x{w} -> {oh}x{ow} is not an integer upscale")
        part = parts.resize(ctx.name, x, scale=(oh // h, ow // w), method=method,
                            output_name=ctx.out_name())
        if method == "bilinear" and not half:
            # parts.resize models half-pixel centres. Without them output row r reads rows
            # floor(r/s) and floor(r/s) + 1: offset 0, extent (h-1)/s + 2.
            fh, fw = Fraction(h, oh), Fraction(w, ow)
            prop = Propagator.build([[1, 0, 0, 0], [0, fh, 0, 0], [0, 0, fw, 0], [0, 0, 0, 1]],
                                    [0, 2 - fh, 2 - fw, 0], [0, 0, 0, 0])
            part = dataclasses.replace(part, propagators=(prop,))
        if method == "bilinear":
            part = part.with_attrs(half_pixel_centers=half)
        ctx.emit(part)
    return handler


def _reshape(ctx: _OpContext) -> None:
    ctx.expect((1, 2))
    x = ctx.act(0)
    out = ctx.out_info()
    if math.prod(out.shape) != x.elements:
        raise ctx.err(f"cannot reshape {list(x.shape)} to {list(out.shape)}")
    ctx.emit(parts.reshape(ctx.name, x, out.shape, output_name=ctx.out_name()))


def _transpose(ctx: _OpContext) -> None:
    ctx.expect(2)
    x = ctx.act(0)
    perm = [int(v) for v in ctx.const(1, "perm").reshape(-1)]
    ctx.emit(parts.transpose(ctx.name, x, perm, output_name=ctx.out_name()))


def _batch_matmul(ctx: _OpContext) -> None:
    ctx.expect(2)
    a, b = ctx.operand(0), ctx.operand(1)
    if a.is_constant and b.is_constant:
        raise ctx.err("both operands are constants")
    opts = ctx.options("BatchMatMulOptions")
    adj_x, adj_y = (bool(opts.AdjX()), bool(opts.AdjY())) if opts is not None else (False, False)
    ctx.emit(parts.batch_matmul(ctx.name, a, b, adj_x, adj_y, output_name=ctx.out_name()))


def _arg_max(ctx: _OpContext) -> None:
    ctx.expect(2)
    x = ctx.act(0)
    axis = ctx.const(1, "axis").reshape(-1)
    rank = len(x.shape)
    if axis.size != 1 or not -rank <= int(axis[0]) < rank or int(axis[0]) % rank != rank - 1:
        raise ctx.err(f"only an ARG_MAX along the last axis is supported, got axis "
                      f"{[int(a) for a in axis]} of shape {list(x.shape)}")
    ctx.emit(parts.arg_max(ctx.name, x, output_name=ctx.out_name()), indices=True)


def _softmax(ctx: _OpContext) -> None:
    ctx.expect(1)
    x = ctx.act(0)
    opts = ctx.options("SoftmaxOptions")
    beta = float(opts.Beta()) if opts is not None else 1.0
    ctx.emit(parts.softmax(ctx.name, x, beta, output_name=ctx.out_name()))


def _unidirectional_sequence_lstm(ctx: _OpContext) -> None:
    # inputs: 0 the sequence, 1-4 input weights, 5-8 recurrent weights, 9-11 peepholes,
    # 12-15 biases, 16-17 projection, 18-19 the states (variable tensors), 20-23 layer norm
    ctx.expect((20, 24))
    x = ctx.int8_input("sequence", "int8 LSTMs (int16 cell)", 3,
                       "an LSTM reads (batch, time, features)")
    weights = ctx.const_info(1, "the input gate's weights (no input gate: CIFG is not planned)")
    if ctx.const_info(16, "projection weights", optional=True) is not None:
        raise ctx.err("a projection layer (the output would not be the cell state's size)")
    cells = weights.shape[0]
    opts = ctx.options("UnidirectionalSequenceLSTMOptions")
    time_major = bool(opts is not None and opts.TimeMajor())
    ctx.emit(parts.lstm(ctx.name, x, cells, time_major=time_major, weight_compression=ctx.c.wc,
                        output_name=ctx.out_name()))


def _svdf(ctx: _OpContext) -> None:
    # inputs: 0 the input, 1 weights_feature, 2 weights_time, 3 the bias, 4 the state (a
    # variable tensor); the forms the Ethos-U stream takes (an int8 input, state and
    # weights_time, a bias), the rest refused by name
    ctx.expect(5)
    x = ctx.int8_input("input", "int8 SVDFs", 2, "an SVDF reads (batches, input size)")
    feature = ctx.const_info(1, "weights_feature")
    time = ctx.const_info(2, "weights_time")
    ctx.const_info(3, "the bias (TFLite Micro's prepare reads its scale)")
    if ctx.ins[4] < 0 or not ctx.c.tinfo[ctx.ins[4]].variable:
        raise ctx.err("its state (input 4) is not a variable tensor")
    state = ctx.c.tinfo[ctx.ins[4]]
    if time.dtype != "int8" or state.dtype != "int8":
        raise ctx.err(f"its weights_time and state are {time.type_name} and "
                      f"{state.type_name}; the NPU's weights are 8-bit, so the planner plans "
                      "an int8 state")
    opts = ctx.options("SVDFOptions")
    rank = int(opts.Rank()) if opts is not None else 0
    filters, memory = time.shape if len(time.shape) == 2 else (0, 0)
    if rank < 1 or filters < 1 or filters % rank or feature.shape != (filters, x.shape[1]):
        raise ctx.err(f"weights_feature {list(feature.shape)}, weights_time "
                      f"{list(time.shape)} and rank {rank} do not make filters of the input's "
                      f"{x.shape[1]} values that the rank divides")
    ctx.emit(parts.svdf(ctx.name, x, filters // rank, rank, memory,
                        weight_compression=ctx.c.wc, output_name=ctx.out_name()))

def _unary(op: str) -> Callable[[_OpContext], None]:
    def handler(ctx: _OpContext) -> None:
        ctx.expect(1)
        x = ctx.act(0)
        part = parts.unary(ctx.name, x, op=op, output_name=ctx.out_name())
        if op == "leaky_relu":
            opts = ctx.options("LeakyReluOptions")
            part = part.with_attrs(alpha=float(opts.Alpha()) if opts is not None else 0.0)
        ctx.emit(part)
    return handler


def _quantize(ctx: _OpContext) -> None:
    ctx.expect(1)
    i = ctx.ins[0] if ctx.ins[0] >= 0 else None
    if i is not None and ctx.c.tinfo[i].dtype not in _ACTIVATION_DTYPES:
        raise ctx.err(f"quantizes a {ctx.c.tinfo[i].type_name} tensor; the NPU only "
                      "requantizes integer tensors")
    _unary("quantize")(ctx)


def _slice_parts(ctx: _OpContext, x: Tensor, begin: list[int], size: list[int],
                 j: int = 0, suffix: str | None = None,
                 strides: list[int] | None = None) -> None:
    """A slice of ``x``, plus a reshape when the model drops sliced-to-1 axes."""
    out = ctx.out_info(j)
    name = ctx.name if suffix is None else ctx.sub_name(suffix)
    if tuple(size) == out.shape:
        ctx.emit(parts.strided_slice(name, x, begin, size, output_name=ctx.out_name(j),
                                     strides=strides), j)
        return
    if math.prod(size) != math.prod(out.shape) or [s for s in size if s != 1] != \
            [s for s in out.shape if s != 1]:
        raise ctx.err(f"computed slice {size} does not match the declared output "
                      f"{list(out.shape)}")
    y = ctx.emit(parts.strided_slice(name, x, begin, size, strides=strides), final=False)
    ctx.emit(parts.reshape(ctx.c.part_name(f"{name}/reshape"), y, out.shape,
                           output_name=ctx.out_name(j)), j)


def _slice(ctx: _OpContext) -> None:
    ctx.expect(3)
    x = ctx.act(0)
    begin = [int(v) for v in ctx.const(1, "begin").reshape(-1)]
    size = [int(v) for v in ctx.const(2, "size").reshape(-1)]
    if len(begin) != len(x.shape) or len(size) != len(x.shape):
        raise ctx.err(f"begin {begin} and size {size} need {len(x.shape)} values")
    size = [n - b if s == -1 else s for b, s, n in zip(begin, size, x.shape)]
    for b, s, n in zip(begin, size, x.shape):
        if b < 0 or s < 1 or b + s > n:
            raise ctx.err(f"slice begin={begin} size={size} is outside {list(x.shape)}")
    _slice_parts(ctx, x, begin, size)


def _strided_slice(ctx: _OpContext) -> None:
    ctx.expect(4)
    x = ctx.act(0)
    rank = len(x.shape)
    begin = [int(v) for v in ctx.const(1, "begin").reshape(-1)]
    end = [int(v) for v in ctx.const(2, "end").reshape(-1)]
    strides = [int(v) for v in ctx.const(3, "strides").reshape(-1)]
    if not len(begin) == len(end) == len(strides) == rank:
        raise ctx.err(f"begin, end and strides need {rank} values each")
    opts = ctx.options("StridedSliceOptions")
    bm = opts.BeginMask() if opts is not None else 0
    em = opts.EndMask() if opts is not None else 0
    shrink = opts.ShrinkAxisMask() if opts is not None else 0
    if opts is not None and (opts.EllipsisMask() or opts.NewAxisMask()):
        raise ctx.err("ellipsis_mask and new_axis_mask are not supported")
    relative = bool(opts.Offset()) if opts is not None else False
    b_out, s_out = [], []
    for a, n in enumerate(x.shape):
        if strides[a] < 1:
            raise ctx.err(f"stride {strides[a]} on axis {a}; only positive strides are "
                          "supported")
        b = 0 if bm >> a & 1 else begin[a]
        b = b + n if b < 0 else b
        b = min(max(b, 0), n)
        if shrink >> a & 1:
            e = b + 1
        elif em >> a & 1:
            e = n
        else:
            e = b + end[a] if relative else end[a]
            e = e + n if e < 0 and not relative else e
            e = min(max(e, 0), n)
        if e - b < 1:
            raise ctx.err(f"axis {a}: the slice [{b}, {e}) of {n} is empty")
        b_out.append(b)
        s_out.append(-(-(e - b) // strides[a]))
    _slice_parts(ctx, x, b_out, s_out, strides=None if set(strides) == {1} else strides)


def _split_common(ctx: _OpContext, x: Tensor, axis_arr: np.ndarray, n_splits: int | None) -> None:
    if axis_arr.size != 1:
        raise ctx.err(f"axis must be one value, got {axis_arr.tolist()}")
    rank = len(x.shape)
    axis = int(axis_arr.reshape(-1)[0])
    if not -rank <= axis < rank:
        raise ctx.err(f"axis {axis} is out of range for rank {rank}")
    axis %= rank
    if n_splits is not None and n_splits != len(ctx.outs):
        raise ctx.err(f"num_splits is {n_splits} but there are {len(ctx.outs)} outputs")
    start = 0
    for j in range(len(ctx.outs)):
        out = ctx.out_info(j)
        if len(out.shape) != rank:
            raise ctx.err(f"output {j} has shape {list(out.shape)}, rank {rank} expected")
        begin = [0] * rank
        begin[axis] = start
        ctx.emit(parts.strided_slice(ctx.name if len(ctx.outs) == 1 else ctx.sub_name(str(j)),
                                     x, begin, list(out.shape), output_name=ctx.out_name(j)),
                 j)
        start += out.shape[axis]
    if start != x.shape[axis]:
        raise ctx.err(f"outputs cover {start} of the {x.shape[axis]} elements of axis {axis}")


def _split(ctx: _OpContext) -> None:
    ctx.expect(2, -1)
    if not ctx.outs:
        raise ctx.err("has no outputs")
    opts = ctx.options("SplitOptions")
    _split_common(ctx, ctx.act(1), ctx.const(0, "axis"),
                  opts.NumSplits() if opts is not None else None)


def _split_v(ctx: _OpContext) -> None:
    ctx.expect(3, -1)
    if not ctx.outs:
        raise ctx.err("has no outputs")
    x = ctx.act(0)
    ctx.const(1, "size_splits")  # must be constant; the output shapes carry the sizes
    opts = ctx.options("SplitVOptions")
    _split_common(ctx, x, ctx.const(2, "axis"), opts.NumSplits() if opts is not None else None)


def _depth_to_space(ctx: _OpContext) -> None:
    ctx.expect(1)
    x = ctx.act(0)
    opts = ctx.options("DepthToSpaceOptions")
    b = opts.BlockSize() if opts is not None else 0
    if len(x.shape) != 4 or b < 1 or x.shape[3] % (b * b):
        raise ctx.err(f"block size {b} does not fit input shape {list(x.shape)}")
    n, h, w, c = x.shape
    ctx.emit(parts.opaque(ctx.name, Op.DEPTH_TO_SPACE, x, (n, h * b, w * b, c // (b * b)),
                          output_name=ctx.out_name(), block_size=b))


_HANDLERS: dict[str, Callable[[_OpContext], None]] = {
    "CONV_2D": _conv_2d,
    "DEPTHWISE_CONV_2D": _depthwise_conv_2d,
    "AVERAGE_POOL_2D": _pool("avg"),
    "MAX_POOL_2D": _pool("max"),
    "MEAN": _mean,
    "SUM": _reduce_over_depth(Op.REDUCE_SUM),
    "REDUCE_MAX": _reduce_over_depth(Op.REDUCE_MAX),
    "REDUCE_MIN": _reduce_over_depth(Op.REDUCE_MIN),
    "FULLY_CONNECTED": _fully_connected,
    "ADD": _binary("add", "AddOptions"),
    "SUB": _binary("sub", "SubOptions"),
    "MUL": _binary("mul", "MulOptions"),
    "MAXIMUM": _binary("maximum", None),
    "MINIMUM": _binary("minimum", None),
    "SQUARED_DIFFERENCE": _binary("squared_difference", None),
    "CONCATENATION": _concatenation,
    "PAD": _pad,
    "PADV2": _pad,
    "RESIZE_NEAREST_NEIGHBOR": _resize("nearest", "ResizeNearestNeighborOptions"),
    "RESIZE_BILINEAR": _resize("bilinear", "ResizeBilinearOptions"),
    "RESHAPE": _reshape,
    "SQUEEZE": _reshape,
    "EXPAND_DIMS": _reshape,
    "TRANSPOSE": _transpose,
    "SOFTMAX": _softmax,
    "UNIDIRECTIONAL_SEQUENCE_LSTM": _unidirectional_sequence_lstm,
    "SVDF": _svdf,
    "BATCH_MATMUL": _batch_matmul,
    "LOGISTIC": _unary("sigmoid"),
    "TANH": _unary("tanh"),
    "RELU": _unary("relu"),
    "RELU6": _unary("relu6"),
    "RELU_N1_TO_1": _unary("relu_n1_to_1"),
    "RELU_0_TO_1": _unary("relu0_to_1"),
    "LEAKY_RELU": _unary("leaky_relu"),
    "HARD_SWISH": _unary("hard_swish"),
    "RSQRT": _unary("rsqrt"),
    "EXP": _unary("exp"),
    "GELU": _unary("gelu"),
    "LOG": _unary("log"),
    "NEG": _unary("neg"),
    "QUANTIZE": _quantize,
    "SLICE": _slice,
    "STRIDED_SLICE": _strided_slice,
    "SPLIT": _split,
    "SPLIT_V": _split_v,
    "DEPTH_TO_SPACE": _depth_to_space,
    "ARG_MAX": _arg_max,
}

#: TFLite builtin operators that :func:`load_tflite` maps to Parts.
SUPPORTED_OPERATORS: tuple[str, ...] = tuple(sorted(_HANDLERS))


def _check_compression(weight_compression: float) -> float:
    if isinstance(weight_compression, bool):
        raise PlannerError(f"weight_compression must be a number in (0, 1], got "
                           f"{weight_compression!r}")
    try:
        wc = float(weight_compression)
    except (TypeError, ValueError):
        raise PlannerError(f"weight_compression must be a number in (0, 1], got "
                           f"{weight_compression!r}") from None
    if not 0 < wc <= 1:
        raise PlannerError(f"weight_compression must be in (0, 1], got {weight_compression!r}")
    return wc


def _run(build: Callable[[], PlannerGraph], where: str) -> PlannerGraph:
    """Turn every low-level decoding failure into a PlannerError about the file."""
    try:
        return build()
    except PlannerError:
        raise
    except DECODING_ERRORS as e:
        raise PlannerError(f"{where}truncated or corrupt TFLite flatbuffer: "
                           f"{describe_decoding_error(e)}") from None


def graph_from_tflite_model(model: "_tflite_t.Model", *, weight_compression: float = 1.0,
                            name: str | None = None) -> PlannerGraph:
    """Convert an already parsed ``tflite.Model`` (its main subgraph, index 0), once its
    bytes pass the front door (:func:`planner.tflite_check.front_door`, its messages naming
    ``<model>``).

    Args:
        model: a ``tflite.Model`` root table (``tflite.Model.GetRootAs(buf)``).
        weight_compression: compression ratio in (0, 1] given to every weight tensor, so that
            memory estimates can account for the NPU's weight encoding.
        name: the graph's name; defaults to the subgraph's name, else ``"tflite"``.
    """
    wc = _check_compression(weight_compression)
    data = model._tab.Bytes

    def build() -> PlannerGraph:
        front_door(bytes(data), "<model>", compiled=False)
        return _Converter(model, data, wc, name, "").convert()

    return _run(build, "")


def load_tflite(source: ModelSource, *, weight_compression: float = 1.0,
                name: str | None = None) -> PlannerGraph:
    """Read a TFLite flatbuffer (a path or its bytes) into a PlannerGraph.

    Args:
        source: a file path, or the file's bytes.
        weight_compression: compression ratio in (0, 1] of every weight tensor.
        name: the graph's name; defaults to the file's stem for a path, else the subgraph's
            name.

    Raises:
        PlannerError: the file cannot be read, is not a valid TFLite flatbuffer, or uses an
            operator, type or shape the planner does not support. The message is one line and
            names the operator and its index, or what is wrong with the file. What the front
            door refuses (an InvalidModelError or UnimportableModelError) is worded as
            ``tvmc compile`` words it, after the path as given (``<bytes>`` for bytes).
    """
    wc = _check_compression(weight_compression)
    if name is not None and not isinstance(name, str):
        raise PlannerError(f"name must be a str or None, got {type(name).__name__}")
    if isinstance(source, (bytes, bytearray, memoryview)):
        data, where = bytes(source), ""
    elif not isinstance(source, (str, os.PathLike)):
        raise PlannerError(f"source must be a path or the file's bytes, got "
                           f"{type(source).__name__}")
    else:
        path = os.fspath(source)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise PlannerError(f"cannot read TFLite file {path!r}: {e.strerror}") from None
        where = f"{os.path.basename(path)}: "
        if name is None:
            stem = os.path.basename(path)
            name = stem[:-len(".tflite")] if stem.endswith(".tflite") else stem

    def build() -> PlannerGraph:
        checked = front_door(data, source_label(source), compiled=False)
        return _Converter(checked.model, data, wc, name, where).convert()

    return _run(build, where)
