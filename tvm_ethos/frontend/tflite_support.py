"""Which operators of a TFLite model the importer can convert, one verdict per operator.

Paths that keep some operators as TFLite operators (an Ethos-U ``.tflite`` run by TFLite Micro)
ask here which ones the importer converts; ``import_tflite`` asks the same question before
TVM's importer runs, so an operator it cannot convert is refused in one line that names the
operator and the target that takes it, instead of TVM's own error.

An operator is importable when TVM's converter (with tvm-ethos's extensions) has a converter
for it, takes its quantized form when it is quantized, and the flatbuffer check found nothing
about it or the tensors it reads and writes. INT16 activations are not importable: TVM's
importer computes them through float32 quantize / dequantize, not TFLite's integer
arithmetic, so their results would not be TFLite's. The INT16 forms the patterns read as
integer operators are importable: a QUANTIZE between INT8 and INT16 or of INT16 into INT32, a
SOFTMAX of INT8 to
INT16 or of INT16 to INT16 (zero points 0, the output scale 1/32768), ADD, SUB, MUL,
MINIMUM, MAXIMUM, RELU, RELU6 (any output quantization: it clamps codes), LEAKY_RELU, LOGISTIC and
TANH with every tensor INT16, EXP and LOG with every tensor INT16 and zero points 0, PRELU
of INT16 with an INT8 alpha (TFLite Micro's kernel: :func:`prelu_type_refusal`), and
TFLite's 16x8 CONV_2D, DEPTHWISE_CONV_2D and FULLY_CONNECTED (INT16 activations with zero
point 0, INT8 weights, an INT32 or INT64 bias), its 16x8 TRANSPOSE_CONV (the same with an
INT64 bias or none: :func:`transpose_conv_form_refusal`), and MAX_POOL_2D, AVERAGE_POOL_2D,
MEAN and REDUCE_MAX of INT16 into INT16 (the pools quantized alike, the reductions over
height and width: :func:`int16_pooling_refusal`) (``tflite_check``). A form no TFLite kernel
defines (a uint8 SQUARED_DIFFERENCE: :data:`UNDEFINED_FORMS`) is not importable: it has no
result to compute.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ethos_arch.mean_window import mean_kernel
from ethos_arch.ops import Op
from planner.tflite_format import TENSOR_TYPES
from tvm_ethos.compute import float_lut16, int16x8, softmax16
from tvm_ethos.compute.mirror_pad import kernel_refusal as mirror_pad_refusal
from tvm_ethos.compute.quant import f32, prelu_alpha_codes, prelu_alpha_map, quantize_multipliers
from tvm_ethos.frontend.tflite_check import (
    CheckedModel,
    CheckedOperator,
    already_compiled,
    check_tflite,
)

#: Where an operator the importer cannot convert can still run: the tflite-micro host (what
#: ``ethos-u`` alone in a target list means) puts it on the NPU from the TFLite graph where a
#: graph-level NPU operator takes it (backends/tflite_micro/graph_operators.py), else keeps
#: it a TFLite operator for TFLite Micro.
TFLM_TARGET_HINT = ("target ethos-u (= ethos-u,tflite-micro) takes it from the TFLite graph, "
                    "on the NPU where the Ethos-U expresses it (an int8 LSTM) or else as a "
                    "TFLite operator that TFLite Micro runs: tvmc compile --target ethos-u "
                    "--output-format tflite")


@dataclass(frozen=True)
class OperatorSupport:
    """The importer's verdict on one operator: ``index`` in ``subgraph``, its builtin name
    (``"CUSTOM 'name'"`` for a custom operator), whether it imports, and why not (one line;
    empty when it imports)."""

    subgraph: int
    index: int
    builtin: str
    importable: bool
    reason: str


def operator_support(data: bytes, name: str = "<bytes>") -> tuple[OperatorSupport, ...]:
    """Per operator of every subgraph of the TFLite model ``data``, in order, whether the
    importer can convert it. A file that is no valid TFLite model raises
    :class:`~tvm_ethos.errors.ModelLoadError` (or UnsupportedModelError for a model already
    compiled for Ethos-U) naming ``name``."""
    return support_of(check_tflite(bytes(data), name))


def support_of(checked: CheckedModel) -> tuple[OperatorSupport, ...]:
    """:func:`operator_support` of a model already checked."""
    out = []
    for op in checked.operators:
        reason = (graph_level_refusal(op) or softmax16_quantization_refusal(checked, op)
                  or int16_zero_point_refusal(checked, op) or kernel_form_refusal(checked, op))
        if not reason:
            found = checked.operator_findings(op)
            reason = found[0].message if found else ""
        out.append(OperatorSupport(op.subgraph, op.index, op.name, not reason, reason))
    return tuple(out)


def kernel_form_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why the importer cannot convert ``op`` as a TFLite kernel computes it (a form no kernel
    defines, one TVM's converter computes otherwise, or one it has no converter for), or
    ``""``: the refusals :func:`support_of` and the importer share, in the order they ask."""
    return (float_table16_refusal(checked, op) or squared_difference16_refusal(checked, op)
            or undefined_form_refusal(checked, op) or prelu_type_refusal(checked, op)
            or resize_bilinear16_refusal(checked, op)
            or transpose_conv_form_refusal(checked, op) or converter_refusal(op)
            or strided_slice_refusal(checked, op) or form_refusal(checked, op))


def softmax16_quantization_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why an INT16 -> INT16 SOFTMAX is not in the form of TFLite's int16 kernel, which the
    importer reads exactly (input zero point 0, output quantized (1/32768, 0)), naming the
    quantization in the way; ``""`` for any other operator or form."""
    pair = _int16_unary(checked, op, ("SOFTMAX",))
    if pair is None:
        return ""
    qx, qy = (_quantization(t) for t in pair)
    if qx is not None and qx[1] != 0:
        return (f"an int16 SOFTMAX with input zero point {qx[1]}: TFLite's int16 kernel "
                "requires 0 (quantize the input symmetrically)")
    if qy is not None and (qy[1] != 0 or abs(qy[0] * 32768 - 1) > 1e-3):
        return (f"an int16 SOFTMAX with output quantization ({qy[0]:g}, {qy[1]}): TFLite's "
                "int16 kernel requires (1/32768, 0)")
    return ""


def _int16_unary(checked: CheckedModel, op: CheckedOperator, names: tuple[str, ...]):
    """The (input, output) tensors of ``op`` where it is one of ``names`` with one INT16
    input and one INT16 output, else None."""
    from tflite.TensorType import TensorType

    if op.name not in names or not op.int16 or len(op.inputs) != 1 or op.inputs[0] < 0 \
            or len(op.outputs) != 1:
        return None
    graph = checked.model.Subgraphs(op.subgraph)
    x, y = graph.Tensors(op.inputs[0]), graph.Tensors(op.outputs[0])
    if x.Type() != TensorType.INT16 or y.Type() != TensorType.INT16:
        return None
    return x, y


def _quantization(t) -> tuple[float, int] | None:
    """A tensor's first (scale, zero point), None where it is not quantized."""
    q = t.Quantization()
    if q is None or not q.ScaleLength():
        return None
    zero_point = int(q.ZeroPointAsNumpy()[0]) if q.ZeroPointLength() else 0
    return float(q.ScaleAsNumpy()[0]), zero_point


def squared_difference16_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why an all-INT16 SQUARED_DIFFERENCE the importer does not read is not in the form
    TFLite Micro's int16 kernel takes (every zero point 0), naming the tensors in the way;
    ``""`` for any other operator or form."""
    from tflite.TensorType import TensorType

    if op.name != "SQUARED_DIFFERENCE" or not op.int16:
        return ""
    graph = checked.model.Subgraphs(op.subgraph)
    tensors = [graph.Tensors(i) for i in (*op.inputs, *op.outputs) if i >= 0]
    if any(t.Type() != TensorType.INT16 for t in tensors):
        return ""
    quantized = [(t.Name().decode(), _quantization(t)) for t in tensors]
    off = [f"{name!r} {q[1]}" for name, q in quantized if q is not None and q[1] != 0]
    if off:
        return (f"an int16 SQUARED_DIFFERENCE with zero points other than 0 ({', '.join(off)}): "
                "TFLite Micro's int16 kernel requires 0 (quantize symmetrically)")
    if any(q is None for _, q in quantized):
        return ("an int16 SQUARED_DIFFERENCE without quantization; TFLite Micro's int16 "
                "kernel is quantized")
    return ""


class KernelTypes(NamedTuple):
    """The tensor types TFLite Micro's and LiteRT's kernels of one operator take."""

    tflite_micro: str
    litert: str


#: operator forms of a tensor type neither TFLite Micro nor LiteRT has a kernel of, so that
#: nothing defines their result: the importer refuses them (TVM's converter would compute
#: one in float32: a uint8 SQUARED_DIFFERENCE as a float SUBTRACT and MULTIPLY)
UNDEFINED_FORMS: dict[tuple[str, str], KernelTypes] = {
    ("SQUARED_DIFFERENCE", "UINT8"): KernelTypes("float32, int32, int8 and int16",
                                                 "float32, int32 and int8"),
    ("EXP", "UINT8"): KernelTypes("float32", "float32, int8 and int16"),
}


#: (operator, input type, type of its other tensor: QUANTIZE's output, DEPTHWISE_CONV_2D's
#: bias) pairs that both TFLite Micro's and LiteRT's kernels refuse or misread -> why
UNDEFINED_PAIRS: dict[tuple[str, str, str], str] = {
    ("QUANTIZE", "INT16", "UINT8"):
        "TFLite Micro's QUANTIZE refuses an int16 input to uint8 and LiteRT's requantizes an "
        "int16 input to int8, int16 or int32 only (requantize to int8 or int16)",
    ("DEPTHWISE_CONV_2D", "INT16", "INT32"):
        "LiteRT's int16 kernel refuses an INT32 bias and TFLite Micro's reads its bytes as "
        "INT64 values (write the bias as INT64)",
}


def _other_tensor(op: CheckedOperator) -> int:
    """The tensor :data:`UNDEFINED_PAIRS` pairs with ``op``'s input: a DEPTHWISE_CONV_2D's
    bias (-1 when it has none), any other operator's output."""
    if op.name == "DEPTHWISE_CONV_2D":
        return op.inputs[2] if len(op.inputs) > 2 else -1
    return op.outputs[0] if op.outputs else -1


def undefined_form_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why ``op`` has no result to compute: a tensor of a type that no TFLite kernel of the
    operator takes (:data:`UNDEFINED_FORMS`), or a pair of types none takes or reads as
    written (:data:`UNDEFINED_PAIRS`); ``""`` for any other operator or form."""
    graph = checked.model.Subgraphs(op.subgraph)

    def kind_of(i: int) -> str:
        return TENSOR_TYPES.get(graph.Tensors(i).Type(), ("",))[0] if i >= 0 else ""

    pair = (op.name, kind_of(op.inputs[0]) if op.inputs else "", kind_of(_other_tensor(op)))
    if pair in UNDEFINED_PAIRS:
        role = "bias" if op.name == "DEPTHWISE_CONV_2D" else "output"
        return (f"a {op.name} with input type {pair[1]} and {role} type {pair[2]} is defined "
                f"by no kernel: {UNDEFINED_PAIRS[pair]}")
    for i in (*op.inputs, *op.outputs):
        kind = TENSOR_TYPES.get(graph.Tensors(i).Type(), ("",))[0] if i >= 0 else ""
        kernels = UNDEFINED_FORMS.get((op.name, kind))
        if kernels is not None:
            return (f"a {kind.lower()} {op.name} is defined by no kernel: TFLite Micro's takes "
                    f"{kernels.tflite_micro}, LiteRT's {kernels.litert} (quantize it to int8)")
    return ""


#: a quantized PRELU's input type -> the alpha type its kernel reads (TFLite Micro's int8 and
#: int16 kernels, LiteRT's uint8 one: TFLite Micro has none)
PRELU_ALPHA_TYPES = {"INT8": "INT8", "INT16": "INT8", "UINT8": "UINT8"}


def prelu_type_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why a quantized PRELU's tensor types are no kernel's, naming them; ``""`` for any other
    operator or form. The output must be of the input's type, and alpha of the type the
    kernel reads: an int16 kernel reads int8 alpha codes (TFLite Micro refuses any other
    alpha; LiteRT, whose int16 kernel reads the alpha's bytes as int8 codes whatever its
    type, computes no defined result for an INT16 one), and LiteRT's uint8 kernel reads
    uint8 codes (an INT8 alpha's bytes read as uint8: no defined result either)."""
    if op.name != "PRELU" or not op.quantized or len(op.inputs) != 2 or min(op.inputs) < 0 \
            or len(op.outputs) != 1:
        return ""
    graph = checked.model.Subgraphs(op.subgraph)
    x, alpha, y = (TENSOR_TYPES.get(graph.Tensors(i).Type(), ("?",))[0]
                   for i in (op.inputs[0], op.inputs[1], op.outputs[0]))
    want = PRELU_ALPHA_TYPES.get(x)
    if want is None:
        return ""
    if y != x:
        return (f"a PRELU of {x} codes with {y} output codes: TFLite's PRELU kernels write "
                "the input's type")
    if alpha != want:
        kernel = ("TFLite Micro's int16 kernel takes an INT8 alpha only, and LiteRT's reads "
                  "the alpha's bytes as int8 codes" if x == "INT16" else
                  "LiteRT's uint8 kernel (TFLite Micro has none) reads the alpha's bytes as "
                  "uint8 codes" if x == "UINT8" else "TFLite's int8 kernel reads int8 codes")
        return (f"a PRELU of {x} codes with {alpha} alpha codes: {kernel}, so no kernel "
                f"defines its result (quantize alpha to {want})")
    return ""


def resize_bilinear16_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why an INT16 RESIZE_BILINEAR the importer does not read is not in the form LiteRT's
    int16 kernel computes exactly (it interpolates the codes, so the output must be quantized
    as the input), naming both quantizations; ``""`` for any other operator or form."""
    if op.name != "RESIZE_BILINEAR" or not op.int16:
        return ""
    graph = checked.model.Subgraphs(op.subgraph)
    x, y = graph.Tensors(op.inputs[0]), graph.Tensors(op.outputs[0])
    qx, qy = _quantization(x), _quantization(y)
    if qx is None or qy is None:
        return ("an int16 RESIZE_BILINEAR without quantization; TFLite's int16 kernel is "
                "quantized")
    return (f"an int16 RESIZE_BILINEAR from {x.Name().decode()!r} quantized {qx} to "
            f"{y.Name().decode()!r} quantized {qy}: TFLite's int16 kernel interpolates the "
            "codes, exact only for an output quantized as its input (quantize them alike)")


#: INT16 operators of one input whose TFLite kernels (TFLite Micro's and LiteRT's) fail to
#: prepare unless the input and the output have zero point 0
_INT16_SYMMETRIC_UNARY = ("ABS", "EXP", "LOG")


def int16_zero_point_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why an INT16 -> INT16 ABS, EXP or LOG with a zero point other than 0 is refused:
    TFLite's int16 kernels require 0 on both tensors, so no runtime defines its result. Names
    each tensor in the way and its zero point, and the fix; ``""`` for any other operator or
    form."""
    pair = _int16_unary(checked, op, _INT16_SYMMETRIC_UNARY)
    if pair is None:
        return ""
    off = []
    for role, tensor in zip(("input", "output"), pair):
        q = _quantization(tensor)
        if q is not None and q[1] != 0:
            off.append(f"{role} {tensor.Name().decode()!r} has zero point {q[1]}")
    if not off:
        return ""
    return (f"an int16 {op.name} whose {' and whose '.join(off)}: TFLite's int16 {op.name} "
            "kernels require zero point 0 on the input and the output; quantize "
            f"{'it' if len(off) == 1 else 'them'} symmetrically (zero point 0, as TFLite's "
            "converter quantizes int16 activations)")


def transpose_conv_form_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why a TRANSPOSE_CONV of an INT16 or UINT8 input is not in a form an integer kernel
    computes, naming the tensor in the way: TFLite Micro's 16x8 kernel (INT8 weights, an INT64
    bias or none, an INT16 output, zero points 0, a scale and a bias its int64 requantization
    takes) or LiteRT's uint8 one (UINT8 weights of one scale and zero point: it reads no
    per-channel ones; an INT32 bias, a UINT8 output), or of an INT8 input whose weights have a
    zero point; ``""`` for any other operator or form."""
    if op.name != "TRANSPOSE_CONV" or len(op.inputs) < 3 or min(op.inputs[1:3]) < 0:
        return ""
    graph = checked.model.Subgraphs(op.subgraph)
    x, w, y = (graph.Tensors(i) for i in (op.inputs[2], op.inputs[1], op.outputs[0]))
    b = graph.Tensors(op.inputs[3]) if len(op.inputs) > 3 and op.inputs[3] >= 0 else None
    kind = TENSOR_TYPES[x.Type()][0]
    if kind == "UINT8":
        return _transpose_conv_uint8_refusal(w, y, b)
    if kind == "INT8":
        return _transpose_conv_int8_refusal(w)
    if kind != "INT16":
        return ""

    def named(t) -> str:
        return f"{t.Name().decode()!r} ({TENSOR_TYPES[t.Type()][0]})"

    if TENSOR_TYPES[w.Type()][0] != "INT8":
        return (f"an int16 TRANSPOSE_CONV with weights {named(w)}: TFLite Micro's 16x8 kernel "
                "takes INT8 weights")
    if TENSOR_TYPES[y.Type()][0] != "INT16":
        return (f"an int16 TRANSPOSE_CONV into {named(y)}: TFLite Micro's 16x8 kernel writes "
                "INT16")
    if b is not None and TENSOR_TYPES[b.Type()][0] == "INT16":
        return (f"an int16 TRANSPOSE_CONV with the bias {named(b)}: TFLite Micro widens it to "
                "INT64, but TVM's TFLite importer takes an INT32 or INT64 bias (write it as "
                "INT64)")
    if b is not None and TENSOR_TYPES[b.Type()][0] != "INT64":
        return (f"an int16 TRANSPOSE_CONV with the bias {named(b)}: TFLite Micro's 16x8 kernel "
                "reads its bias as INT64, so this is no bias it computes with (write it as "
                "INT64)")
    zero_points = ((x, (_quantization(x) or (0, 0))[1]), (y, (_quantization(y) or (0, 0))[1]),
                   (w, _weight_zero_point(w)))
    off = [f"{t.Name().decode()!r} {zp}" for t, zp in zero_points if zp != 0]
    if off:
        return (f"an int16 TRANSPOSE_CONV with zero points other than 0 ({', '.join(off)}): "
                "TFLite's 16x8 kernels require 0 (quantize symmetrically)")
    return _transpose_conv16_scale_refusal(checked.model, x, w, y, b)


def _weight_zero_point(w) -> int:
    """The largest magnitude among a weight tensor's zero points (0 where it has none)."""
    wq = w.Quantization()
    return int(np.abs(wq.ZeroPointAsNumpy()).max()) if wq is not None and wq.ZeroPointLength() \
        else 0


def _transpose_conv_int8_refusal(w) -> str:
    """Why an int8 TRANSPOSE_CONV is not computed as TFLite computes it: weights of a zero point
    other than 0, which TFLite's int8 kernels read as if it were 0 (TVM's converter would
    subtract it, and its float transpose has no integer kernel), or ``""``."""
    zp = _weight_zero_point(w)
    if zp == 0:
        return ""
    return (f"an int8 TRANSPOSE_CONV whose weights {w.Name().decode()!r} have zero point {zp}: "
            "TFLite's int8 kernels take weights of zero point 0 (TFLite Micro reads them as if "
            "it were 0); quantize the weights symmetrically")


def _transpose_conv16_scale_refusal(model, x, w, y, b) -> str:
    """Why TFLite's int64 requantization cannot scale a 16x8 TRANSPOSE_CONV (an output scale
    so small that its rounding shift vanishes) or sum its bias (beyond 47 bits), or ``""``."""
    qx, qy, wq = _quantization(x), _quantization(y), w.Quantization()
    if qx is None or qy is None or wq is None or not wq.ScaleLength():
        return ""
    _, shift = quantize_multipliers([f32(qx[0]) * float(s) / f32(qy[0])
                                     for s in np.asarray(wq.ScaleAsNumpy(), np.float32)])
    why = int16x8.refusal(shift)
    if why:
        return f"an int16 TRANSPOSE_CONV with {why}"
    bias = _const_ints(model, b) if b is not None else None
    if bias and max(abs(v) for v in bias) >= 1 << 47:
        return (f"an int16 TRANSPOSE_CONV with a bias beyond 47 bits ({b.Name().decode()!r}): "
                "TFLite's int64 requantization takes sums below 2**47")
    return ""


def _transpose_conv_uint8_refusal(w, y, b) -> str:
    """Why LiteRT's uint8 TRANSPOSE_CONV kernel does not compute with the weights ``w``, the
    output ``y`` and the bias ``b`` (None: none), or ``""``."""
    name = w.Name().decode()
    if TENSOR_TYPES[w.Type()][0] != "UINT8":
        return (f"a uint8 TRANSPOSE_CONV with weights {name!r} "
                f"({TENSOR_TYPES[w.Type()][0]}): LiteRT's uint8 kernel takes UINT8 weights")
    for t, want, what in ((y, "UINT8", "output"), (b, "INT32", "bias")):
        if t is not None and TENSOR_TYPES[t.Type()][0] != want:
            return (f"a uint8 TRANSPOSE_CONV with the {what} {t.Name().decode()!r} "
                    f"({TENSOR_TYPES[t.Type()][0]}): LiteRT's uint8 kernel takes {want}")
    q = w.Quantization()
    if q is not None and (q.ScaleLength() > 1 or q.ZeroPointLength() > 1):
        return (f"a uint8 TRANSPOSE_CONV with weights {name!r} quantized per channel: LiteRT's "
                "uint8 kernel reads one weight scale and zero point (quantize them per "
                "tensor)")
    return ""


def float_table16_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why an INT16 -> INT16 EXP / LOG is not in the form LiteRT's int16 kernel takes (zero
    points 0, ``compute.float_lut16.refusal``), naming the quantization in the way; ``""`` for
    any other operator or form."""
    pair = _int16_unary(checked, op, ("EXP", "LOG"))
    if pair is None:
        return ""
    qx, qy = (_quantization(t) for t in pair)
    if qx is None or qy is None:
        return f"an int16 {op.name} without quantization; TFLite's int16 kernel is quantized"
    return float_lut16.refusal(Op(op.name.lower()), qx, qy)


#: quantized operators the importer converts only for an NPU that takes them whole (an
#: int8 LSTM for the Ethos-U of a package: ``tflite_converter.NPU_ONLY_OPS``); the
#: tflite-micro host takes them from the TFLite graph itself (graph_operators.py)
GRAPH_LEVEL_OPERATORS = frozenset({"UNIDIRECTIONAL_SEQUENCE_LSTM"})
#: operators TVM's converter converts, quantized too, known without asking it (which imports
#: TVM): those the TVM-free .tflite path reads (tvm_ethos.tflite_direct); a test checks the
#: converter's own lists hold them
CONVERTED_QUANTIZED = frozenset({"ADD", "AVERAGE_POOL_2D", "CONV_2D", "DEPTHWISE_CONV_2D",
                                 "FULLY_CONNECTED", "MAX_POOL_2D", "MEAN", "RESHAPE",
                                 "SOFTMAX"})


def graph_level_refusal(op: CheckedOperator) -> str:
    """Why a path that keeps TFLite operators (the tflite-micro host's cut) does not import
    ``op``: a quantized operator of :data:`GRAPH_LEVEL_OPERATORS`, which that host puts on
    the NPU from the TFLite graph; ``""`` for any other."""
    if op.quantized and op.name in GRAPH_LEVEL_OPERATORS:
        return (f"a quantized {op.name} is imported for an ethos-u package (ethos-u,llvm) "
                "only; the tflite-micro host takes it from the TFLite graph")
    return ""


def converter_refusal(op: CheckedOperator) -> str:
    """Why TVM's converter cannot take ``op`` at all (its kind, its quantized or INT16 form),
    or ``""``."""
    if op.name.startswith("CUSTOM"):
        return already_compiled(op.name) or (
            f"{op.name} is a custom operator, which the TFLite importer has no converter for")
    if op.name not in CONVERTED_QUANTIZED:   # asking the converter imports TVM
        names, quantized = _converter_names()
        if op.name not in names:
            return f"TVM's TFLite importer has no converter for {op.name}"
        if op.quantized and op.name not in quantized:
            return f"TVM's TFLite importer does not convert a quantized {op.name}"
    if op.int16 and op.name not in GRAPH_LEVEL_OPERATORS:   # an LSTM's int16 cell state
        return (f"{op.name} has INT16 tensors; the TFLite importer computes them in float32, "
                "not with TFLite's integer arithmetic")
    return ""


def strided_slice_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why the converter cannot take a quantized STRIDED_SLICE (it takes every stride-th
    element of a box: constant positive strides, no ellipsis or new axis), or ``""``."""
    if op.name != "STRIDED_SLICE" or not op.quantized or len(op.inputs) < 4:
        return ""
    model = checked.model
    graph = model.Subgraphs(op.subgraph)
    data = model.Buffers(graph.Tensors(op.inputs[3]).Buffer()).DataAsNumpy()
    strides = np.frombuffer(data.tobytes(), "<i4") if hasattr(data, "tobytes") else None
    if strides is None or strides.size == 0:
        return "a quantized STRIDED_SLICE's strides are computed at run time"
    if (strides < 1).any():
        return (f"a quantized STRIDED_SLICE with strides {strides.tolist()} reads backwards "
                "(tvm-ethos takes positive strides)")
    from tflite.StridedSliceOptions import StridedSliceOptions

    table = graph.Operators(op.index).BuiltinOptions()
    if table is not None:
        opts = StridedSliceOptions()
        opts.Init(table.Bytes, table.Pos)
        if opts.EllipsisMask() or opts.NewAxisMask():
            return "a quantized STRIDED_SLICE with an ellipsis or a new axis"
    return ""


def _mirror_pads(model, graph, inputs) -> list[list[int]] | None:
    """A MIRROR_PAD's constant paddings, (before, after) per axis (None where they are no
    constant: the converter refuses those itself)."""
    from tflite.TensorType import TensorType

    pads = graph.Tensors(inputs[1])
    dtype = {TensorType.INT32: np.int32, TensorType.INT64: np.int64}.get(pads.Type())
    data = model.Buffers(pads.Buffer()).DataAsNumpy()
    if dtype is None or not hasattr(data, "tobytes") or not data.size:
        return None
    return np.frombuffer(data.tobytes(), dtype).reshape(-1, 2).tolist()


def _softmax16_refusal(graph, op: CheckedOperator, table) -> str:
    """Why TFLite's int16 SOFTMAX kernel cannot compute an int16 SOFTMAX the check let
    through (its scale x beta shifts the input difference past int32, or its rows are long
    enough to overflow the int32 sum of exponentials), or ``""`` (also for other SOFTMAXes)."""
    from tflite.SoftmaxOptions import SoftmaxOptions
    from tflite.TensorType import TensorType

    x = graph.Tensors(op.inputs[0])
    quant = x.Quantization()
    if x.Type() != TensorType.INT16 or quant is None or not quant.ScaleLength():
        return ""
    beta = 0.0
    if table is not None:
        opts = SoftmaxOptions()
        opts.Init(table.Bytes, table.Pos)
        beta = float(opts.Beta())
    scale = float(quant.ScaleAsNumpy()[0])
    _, shift = softmax16.input_multiplier(scale, beta, softmax16.Kernel.LITERT)
    if shift > softmax16.MAX_LEFT_SHIFT:
        return (f"an int16 SOFTMAX with input scale x beta = {scale * beta:g}: TFLite's kernel "
                f"shifts the input difference left by {shift} bits in int32, which overflows "
                f"past {softmax16.MAX_LEFT_SHIFT} (a smaller input scale or beta would fit)")
    depth = int(x.ShapeAsNumpy()[-1]) if x.ShapeLength() else 1
    if depth > softmax16.MAX_DEPTH:
        return (f"an int16 SOFTMAX over rows of {depth}: over {softmax16.MAX_DEPTH} values "
                "TFLite's int32 sum of exponentials can overflow")
    return ""


def form_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why the converter cannot take the form of a quantized operator it converts
    (``EthosOperatorConverter``): a PRELU whose alpha is no constant per channel or map, a
    SYMMETRIC MIRROR_PAD the integer kernels do not take (``mirror_pad.kernel_refusal``), a
    BATCH_MATMUL of two constants or not quantized per tensor throughout, an int16 SOFTMAX
    TFLite's kernel overflows on; or ``""``."""
    if not op.quantized or not op.inputs:
        return ""
    why = int16_pooling_refusal(checked, op)
    if why:
        return why
    graph = checked.model.Subgraphs(op.subgraph)
    table = graph.Operators(op.index).BuiltinOptions()
    if op.name == "PRELU" and len(op.inputs) > 1:
        from tflite.TensorType import TensorType

        x, alpha = graph.Tensors(op.inputs[0]), graph.Tensors(op.inputs[1])
        data = checked.model.Buffers(alpha.Buffer()).DataAsNumpy()
        codes = {TensorType.INT8: np.int8, TensorType.UINT8: np.uint8}.get(alpha.Type())
        values = None
        if hasattr(data, "tobytes") and data.size and codes is not None:
            values = np.frombuffer(data.tobytes(), codes).reshape(
                [int(d) for d in alpha.ShapeAsNumpy()] if alpha.ShapeLength() else [])
        shape = [int(d) for d in x.ShapeAsNumpy()] if x.ShapeLength() else []
        if values is None or (prelu_alpha_codes(values, shape) is None
                              and prelu_alpha_map(values, shape) is None):
            return ("a quantized PRELU whose alpha is no constant tensor of 8-bit codes "
                    "broadcasting to the input as one value per channel or a map over the "
                    "height, width and depth of a 4-D input: tvm-ethos takes no alpha varying "
                    "along the batch")
    if op.name == "SOFTMAX" and not op.int16 and op.inputs[0] >= 0:
        why = _softmax16_refusal(graph, op, table)
        if why:
            return why
    if op.name == "BATCH_MATMUL":
        if all(t >= 0 and _is_constant(checked, graph, t) for t in op.inputs[:2]):
            return ("a quantized BATCH_MATMUL of two constants: tvm-ethos multiplies a "
                    "computed operand (TFLite's converter folds a product of constants)")
        for t in (*op.inputs[:2], *op.outputs[:1]):
            quant = graph.Tensors(t).Quantization() if t >= 0 else None
            if quant is None or quant.ScaleLength() != 1 or quant.ZeroPointLength() > 1:
                return ("a quantized BATCH_MATMUL with a tensor not quantized per tensor: "
                        "TFLite's int8 kernel takes one scale and zero point for each operand "
                        "and the output")
    if op.name == "MIRROR_PAD" and table is not None:
        from tflite.MirrorPadOptions import MirrorPadOptions

        opts = MirrorPadOptions()
        opts.Init(table.Bytes, table.Pos)
        pads = _mirror_pads(checked.model, graph, op.inputs) if opts.Mode() != 0 else None
        why = mirror_pad_refusal(pads) if pads is not None else ""
        if why:
            return (f"a quantized {why}, in SYMMETRIC mode (TVM's legalization pads in "
                    "REFLECT mode only)")
    return ""


#: the axes of an NHWC tensor besides height and width (sorted) whose int16 SUM, REDUCE_MAX
#: and REDUCE_MIN the integer kernels take: the height, the width, or the depth with any of them
_INT16_REDUCE_MAX_AXES = ([1], [2], [3], [1, 3], [2, 3], [1, 2, 3])


def int16_pooling_refusal(checked: CheckedModel, op: CheckedOperator) -> str:
    """Why an INT16 pool, MEAN, SUM or REDUCE_MAX (which ``tflite_check`` lets through) is not
    in the form the integer kernels take, naming what is: TFLite's pools require the output
    quantized as the input; MEAN, SUM and REDUCE_MAX reduce height and width of NHWC
    (constant axes 1 and 2; SUM, REDUCE_MAX and REDUCE_MIN the height or the width alone
    too, or the depth with any of them), and REDUCE_MAX picks a
    code, so its output is quantized as its input, with zero point 0 (LiteRT's int16 kernel;
    TFLite Micro has none). TVM's importer would compute any other reduction in float32.
    ``""`` for any other operator or form."""
    from tflite.TensorType import TensorType

    if op.name not in ("MAX_POOL_2D", "AVERAGE_POOL_2D", "MEAN", "SUM", "REDUCE_MAX",
                       "REDUCE_MIN") \
            or not op.inputs or min(op.inputs) < 0 or len(op.outputs) != 1:
        return ""
    graph = checked.model.Subgraphs(op.subgraph)
    x, y = graph.Tensors(op.inputs[0]), graph.Tensors(op.outputs[0])
    if x.Type() != TensorType.INT16 or y.Type() != TensorType.INT16:
        return ""
    qx, qy = _quantization(x), _quantization(y)
    if op.name.endswith("POOL_2D"):
        if qx != qy:
            return (f"an int16 {op.name} with input quantization {_shown(qx)} and output "
                    f"{_shown(qy)}: TFLite's pool kernels require them equal (quantize the "
                    "output as the input)")
        return ""
    if len(op.inputs) != 2:
        return ""
    axes = _const_ints(checked.model, graph.Tensors(op.inputs[1]))
    if axes is None:
        return (f"an int16 {op.name} whose axes are computed at run time: tvm-ethos reduces "
                "int16 over constant axes 1 and 2 (height and width) only")
    rank = x.ShapeLength()
    over_hw = sorted(a % rank if -rank <= a < rank else a for a in axes) == [1, 2]
    norm = sorted(a % 4 if -4 <= a < 4 else a for a in axes) if rank == 4 else None
    # TFLite Micro's int16 SUM and LiteRT's int16 REDUCE_MAX / REDUCE_MIN over the height or
    # the width alone, or the depth with any of them
    other_axes = op.name in ("SUM", "REDUCE_MAX", "REDUCE_MIN") and \
        norm in _INT16_REDUCE_MAX_AXES
    if op.name == "MEAN" and all(-rank <= a < rank for a in axes):
        # the NPU's MEAN (batch 1) also reduces the height or the width alone, of 2-D and
        # 3-D tensors too (ethos_arch.mean_window)
        distinct = len({a % rank for a in axes}) == len(axes)
        if not over_hw and (not distinct or mean_kernel(x.ShapeAsNumpy(), axes) is None):
            return (f"an int16 MEAN over axes {axes} of a {rank}-D tensor: the integer kernels "
                    "reduce height and width of NHWC (axes [1, 2]), the NPU's the height, the "
                    "width or both of a batch of one (of a 3-D tensor the first two axes, of a "
                    "2-D one the first); TVM's importer computes other int16 reductions in "
                    "float32")
    elif not over_hw and not other_axes:
        return (f"an int16 {op.name} over axes {axes} of a {rank}-D tensor: the integer "
                "kernel reduces height and width of NHWC (axes [1, 2]; a SUM, REDUCE_MAX or "
                "REDUCE_MIN the height or the width alone too, or the depth with any of "
                "them); TVM's importer computes other int16 reductions in float32")
    if op.name in ("REDUCE_MAX", "REDUCE_MIN") and qx != qy:
        return (f"an int16 {op.name} with input quantization {_shown(qx)} and output "
                f"{_shown(qy)}: TFLite's kernel picks a code and requires them equal "
                "(quantize the output as the input)")
    if op.name in ("REDUCE_MAX", "REDUCE_MIN") and qx is not None and qx[1] != 0:
        return (f"an int16 {op.name} with zero point {qx[1]}: LiteRT's int16 kernel "
                "requires 0 and TFLite Micro has none (quantize symmetrically)")
    return ""


def _shown(q: tuple[float, int] | None) -> str:
    """A (scale, zero point) as a message shows it: the scale to six significant digits."""
    return "none" if q is None else f"({q[0]:g}, {q[1]})"


def _const_ints(model, tensor) -> list[int] | None:
    """The values of a constant INT32 / INT64 tensor (None where it is no such constant)."""
    from tflite.TensorType import TensorType

    dtype = {TensorType.INT32: "<i4", TensorType.INT64: "<i8"}.get(tensor.Type())
    data = model.Buffers(tensor.Buffer()).DataAsNumpy()
    if dtype is None or not hasattr(data, "tobytes") or not data.size:
        return None
    return [int(v) for v in np.frombuffer(data.tobytes(), dtype)]


def _is_constant(checked: CheckedModel, graph, index: int) -> bool:
    """Whether tensor ``index`` of ``graph`` holds data in the file (a constant)."""
    data = checked.model.Buffers(graph.Tensors(index).Buffer()).DataAsNumpy()
    return hasattr(data, "size") and data.size > 0


@lru_cache(maxsize=1)
def _converter_names() -> tuple[frozenset, frozenset]:
    """The operator names TVM's converter (tvm-ethos's subclass) converts, and those of them
    it converts quantized."""
    # imported here: it imports TVM, whose cost load_model pays only when it imports a model
    from tvm_ethos.tflite_converter import EthosOperatorConverter

    conv = EthosOperatorConverter(None, None, None, None)
    return frozenset(conv.convert_map), frozenset(EthosOperatorConverter._SUPPORTED_QUANTIZED_OPS)
