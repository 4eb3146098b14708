"""The TVM side of the TFLite front door: :mod:`planner.tflite_check` owns the rules (both
``tvmc compile`` and ``tvmc plan`` apply them); here its refusals become tvm-ethos's
:class:`~tvm_ethos.errors.ModelLoadError` and :class:`~tvm_ethos.errors.UnsupportedModelError`,
and each operator gets what only the importer asks: whether it has INT16 tensors in a form the
patterns do not read as TFLite's integer kernel (:attr:`CheckedOperator.int16`), and whether it
is an NPU command stream compiled already (:func:`already_compiled`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from planner import tflite_check as front_door
from planner.errors import InvalidModelError, UnimportableModelError
from planner.tflite_check import (
    ETHOS_U_OPERATOR,
    WEIGHTED_OPERATORS,
    CheckedModel,
    Finding,
    TensorFacts,
    refusing_findings,
)
from tvm_ethos.errors import ModelLoadError, UnsupportedModelError

__all__ = ["CheckedModel", "CheckedOperator", "Finding", "already_compiled", "check_identifier",
           "check_tflite", "refusing_findings", "validate_tflite", "ETHOS_U_OPERATOR"]


@dataclass(frozen=True)
class CheckedOperator(front_door.CheckedOperator):
    """:class:`planner.tflite_check.CheckedOperator`, and whether any of its inputs or outputs
    is INT16 in a form the importer's patterns do not read as TFLite's integer kernel."""

    int16: bool = False


def check_tflite(data: bytes, name: str) -> CheckedModel:
    """:func:`planner.tflite_check.check_tflite` with tvm-ethos's errors (a ModelLoadError for
    a file that cannot be read, an UnsupportedModelError for content that contradicts the
    schema or itself), its operators as :class:`CheckedOperator`."""
    try:
        checked = front_door.check_tflite(data, name)
    except InvalidModelError as err:
        raise ModelLoadError(str(err)) from None
    except UnimportableModelError as err:
        raise UnsupportedModelError(str(err)) from None
    ops = tuple(CheckedOperator(**{f.name: getattr(op, f.name)
                                   for f in dataclasses.fields(op)},
                                int16=_int16_unread(op, checked.tensors[op.subgraph]))
                for op in checked.operators)
    return dataclasses.replace(checked, operators=ops)


def check_identifier(data: bytes, name: str) -> None:
    """:func:`planner.tflite_check.check_identifier` with tvm-ethos's ModelLoadError."""
    try:
        front_door.check_identifier(data, name)
    except InvalidModelError as err:
        raise ModelLoadError(str(err)) from None


def validate_tflite(data: bytes, name: str):
    """Walk the flatbuffer and check it (see :mod:`planner.tflite_check`); returns the
    ``tflite.Model``, or raises the first :class:`Finding` as an UnsupportedModelError."""
    checked = check_tflite(data, name)
    if checked.findings:
        raise UnsupportedModelError(f"{name}: {checked.findings[0].message}")
    return checked.model


def already_compiled(op_name: str) -> str:
    """Why an ``ethos-u`` operator is not imported (``""`` for any other operator): its
    command stream is compiled already. A path that keeps TFLite operators keeps it as it is
    (Vela does the same); a Relax import cannot hold it."""
    if op_name != ETHOS_U_OPERATOR:
        return ""
    return ("an 'ethos-u' operator is compiled for Ethos-U already (its custom operator holds "
            "an NPU command stream, as Vela and tvm-ethos's .tflite output write it)")


#: INT16, INT8: a QUANTIZE between them is TFLite's integer Requantize, which the importer's
#: dequantize -> quantize pair is matched as (patterns' "requantize", integer arithmetic);
#: TFLite Micro has no UINT8 <-> INT16 QUANTIZE; LiteRT's kernel requantizes UINT8 into INT16
#: the same way (it has none from INT16 into UINT8); INT16 into INT32 both kernels requantize
#: alike too, which the importer writes as its wide quantize (``tflite_converter.quantize``)
_REQUANTIZE_TYPES = frozenset({7, 9})
_UINT8, _INT16, _INT32 = 3, 7, 2


def _integer_requantize(opname: str, io: list[int], infos) -> bool:
    if opname != "QUANTIZE":
        return False
    types = [infos[i].type for i in io]
    return set(types) <= _REQUANTIZE_TYPES or types in ([_UINT8, _INT16], [_INT16, _INT32])


#: INT16 elementwise operators (and RELU, a requantization; RELU6, a clamp of the codes; ABS,
#: a requantization of ``|x|``; LEAKY_RELU, a function of one code; LOGISTIC and TANH,
#: TFLite's int16 table interpolation; EXP and LOG, its interpolated float table;
#: SQUARED_DIFFERENCE, TFLite Micro's int16 kernel) whose integer kernels the patterns read
#: exactly (every tensor INT16)
_INT16_ELEMENTWISE = frozenset({"ADD", "SUB", "MUL", "MINIMUM", "MAXIMUM", "RELU", "RELU6",
                                "ABS", "LEAKY_RELU", "LOGISTIC", "TANH", "EXP", "LOG",
                                "SQUARED_DIFFERENCE"})


def _int16_elementwise(opname: str, io: list[int], infos) -> bool:
    """Every tensor INT16; LOGISTIC and TANH also with TFLite's output scale, 2**-15; RELU6
    with any output quantization (TFLite's kernel clamps codes and never requantizes, and the
    converter quantizes it with the input's parameters, ``tflite_converter.convert_relu6``);
    EXP, LOG, ABS and SQUARED_DIFFERENCE with zero points 0, which TFLite's int16 kernels
    require."""
    if opname not in _INT16_ELEMENTWISE or {infos[i].type for i in io} != {7}:
        return False
    out_scale = infos[io[-1]].scale
    if opname == "RELU6":
        return out_scale is not None and infos[io[0]].scale is not None
    if opname in ("EXP", "LOG", "ABS", "SQUARED_DIFFERENCE"):   # int16 kernels: zero points 0
        return all(infos[i].scale is not None and infos[i].zero_point == 0 for i in io)
    return opname not in ("LOGISTIC", "TANH") or (
        out_scale is not None and abs(out_scale * 32768 - 1) <= 1e-3)


def _int16_prelu(opname: str, ins: list[int], outs: list[int], infos) -> bool:
    """TFLite Micro's int16 PRELU: INT16 input and output, an INT8 alpha (its kernel reads
    alpha as int8 codes and refuses any other alpha type), which the patterns read as that
    integer kernel (``te_ops.lower_prelu``); an INT16 alpha is refused by name
    (``tflite_support.prelu_type_refusal``)."""
    return (opname == "PRELU" and len(ins) == 2 and min(ins) >= 0 and len(outs) == 1
            and [infos[i].type for i in (ins[0], outs[0], ins[1])] == [7, 7, 9])


def _int8_to_int16_softmax(opname: str, ins: list[int], outs: list[int], infos) -> bool:
    """TFLite's SOFTMAX of int8 codes to int16 ones with the output scale TFLite requires
    (1/65536): the 8-bit reference kernel with a wider output, which the importer's patterns
    read exactly (``fixed_point.softmax_8bit``)."""
    return (opname == "SOFTMAX" and [infos[i].type for i in ins if i >= 0] == [9]
            and [infos[i].type for i in outs] == [7] and infos[outs[0]].scale is not None
            and abs(infos[outs[0]].scale * 65536 - 1) <= 1e-3)


def _int16_softmax(opname: str, ins: list[int], outs: list[int], infos) -> bool:
    """TFLite's int16 SOFTMAX: INT16 in and out, input zero point 0 and the output
    quantization TFLite requires, (1/32768, 0); the patterns read it as the integer kernel
    (``te_ops.lower_softmax16``) and name what else it does not take (beta, a scale that
    overflows its shift, rows too long)."""
    if opname != "SOFTMAX" or len(outs) != 1 or [infos[i].type for i in ins if i >= 0] != [7] \
            or infos[outs[0]].type != 7:
        return False
    out_scale = infos[outs[0]].scale
    return (out_scale is not None and abs(out_scale * 32768 - 1) <= 1e-3
            and infos[outs[0]].zero_point == 0 and infos[ins[0]].zero_point == 0)


def _int16x8_weighted(opname: str, ins: list[int], outs: list[int], infos) -> bool:
    """TFLite's 16x8 CONV_2D, DEPTHWISE_CONV_2D or FULLY_CONNECTED: INT16 input and output
    with zero point 0, INT8 weights and a constant bias. With an INT64 bias (what TFLite's
    converter writes) its kernels accumulate in int64 and scale with the reduced (15-bit)
    multiplier, with an INT32 one in int32 as the int8 kernels; the patterns read either as
    an integer operator (``compute.int16x8``). Without a bias TFLite Micro picks the
    accumulator from an option TVM's importer does not read, its DEPTHWISE_CONV_2D reads any
    bias as INT64 (an INT32 one is no bias it computes with), and its convolutions ignore a
    non-zero int16 zero point its FULLY_CONNECTED applies: no exact kernel here computes
    those."""
    if opname not in WEIGHTED_OPERATORS or len(ins) < 3 or min(ins[:3]) < 0 or len(outs) != 1:
        return False
    biases = (4,) if opname == "DEPTHWISE_CONV_2D" else (2, 4)
    return ([infos[i].type for i in ins[:2]] == [7, 9] and infos[ins[2]].type in biases
            and infos[outs[0]].type == 7
            and infos[ins[0]].zero_point == infos[outs[0]].zero_point == 0)


def _int16x8_transpose_conv(opname: str, ins: list[int], outs: list[int], infos) -> bool:
    """TFLite Micro's 16x8 TRANSPOSE_CONV: INT16 input and output with zero point 0 (its
    kernel reads neither zero point), INT8 weights and an INT64 bias or none (it accumulates
    in int64 either way, scaling with the reduced multiplier, ``compute.int16x8``); the
    patterns read it as an integer operator. It reads an INT32 bias as INT64 too: no bias it
    computes with (an INT16 one it widens, but TVM's converter takes none)."""
    if opname != "TRANSPOSE_CONV" or len(ins) < 3 or min(ins[1:3]) < 0 or len(outs) != 1:
        return False
    bias = ins[3] if len(ins) > 3 else -1
    return ([infos[i].type for i in ins[1:3]] == [9, 7] and (bias < 0 or infos[bias].type == 4)
            and infos[outs[0]].type == 7
            and infos[ins[2]].zero_point == infos[outs[0]].zero_point == 0)


#: INT16 operators that only move codes: the importer moves the codes themselves (PAD where
#: the zero point is 0, as TFLite Micro's int16 PAD fills with 0 whatever the zero point;
#: CONCATENATION where every tensor is quantized alike; MIRROR_PAD quantized as its input;
#: PADV2 where its input, output and constant are quantized alike: TFLite's kernel fills with
#: the constant's code)
_INT16_MOVEMENT = frozenset({"TRANSPOSE", "TILE", "PAD", "CONCATENATION", "MIRROR_PAD",
                             "PADV2"})


def _int16_movement(opname: str, ins: list[int], outs: list[int], infos) -> bool:
    """A TRANSPOSE, TILE, PAD (zero point 0), CONCATENATION (its tensors quantized alike),
    MIRROR_PAD (its output quantized as its input) or PADV2 (its input, output and constant
    quantized alike) of INT16 codes: the importer moves the codes themselves, exactly."""
    if opname not in _INT16_MOVEMENT or not ins or ins[0] < 0 or infos[ins[0]].type != 7 \
            or [infos[i].type for i in outs] != [7]:
        return False
    if opname == "CONCATENATION":
        q = _quantization(infos[outs[0]])
        return all(infos[i].type == 7 and _quantization(infos[i]) == q for i in ins)
    if opname == "PAD":
        return infos[outs[0]].zero_point in (0, None) and infos[ins[0]].zero_point in (0, None)
    if opname == "MIRROR_PAD":
        return _quantization(infos[ins[0]]) == _quantization(infos[outs[0]])
    if opname == "PADV2":
        q = _quantization(infos[outs[0]])
        return len(ins) == 3 and ins[2] >= 0 and infos[ins[2]].type == 7 and q[0] is not None \
            and _quantization(infos[ins[0]]) == q and _quantization(infos[ins[2]]) == q
    return True


#: INT16 operators that copy codes between tensors quantized alike (a reshape, a split, a
#: slice, PACK / UNPACK, a nearest-neighbour resize, a reversal): the importer moves the codes
#: themselves
_INT16_COPIES = frozenset({"RESHAPE", "SQUEEZE", "EXPAND_DIMS", "SPLIT", "SPLIT_V", "SLICE",
                           "STRIDED_SLICE", "PACK", "UNPACK", "RESIZE_NEAREST_NEIGHBOR",
                           "REVERSE_V2"})


def _int16_copies(opname: str, ins: list[int], outs: list[int], infos) -> bool:
    """One of :data:`_INT16_COPIES` whose INT16 inputs and outputs are quantized alike (its
    other inputs, shapes and positions, are INT32)."""
    if opname not in _INT16_COPIES or not outs:
        return False
    data = [i for i in ins if i >= 0 and infos[i].type == 7]
    q = _quantization(infos[outs[0]])
    return bool(data) and q[0] is not None and all(
        infos[i].type == 7 and _quantization(infos[i]) == q for i in outs) and all(
        _quantization(infos[i]) == q for i in data)


def _int16_bilinear(opname: str, ins: list[int], outs: list[int], infos) -> bool:
    """A RESIZE_BILINEAR of INT16 codes into INT16 codes quantized alike: the patterns read
    LiteRT's int16 kernel, which interpolates the codes in fixed point as its int8 one
    (``compute.resize_bilinear``); other quantizations are refused by
    ``tflite_support.resize_bilinear16_refusal``."""
    if opname != "RESIZE_BILINEAR" or not ins or ins[0] < 0 or len(outs) != 1:
        return False
    x, y = infos[ins[0]], infos[outs[0]]
    return (x.type == y.type == 7 and x.scale is not None
            and _quantization(x) == _quantization(y))


#: INT16 pools and reductions over height and width whose integer kernels the patterns read
#: exactly: TFLite's int16 MAX_POOL_2D and AVERAGE_POOL_2D (TVM's converter pools the codes
#: themselves, the average in int32), MEAN and SUM (TFLite Micro's multiplier of the sum)
#: and REDUCE_MAX / REDUCE_MIN (the largest / smallest code)
_INT16_POOLING = frozenset({"MAX_POOL_2D", "AVERAGE_POOL_2D", "MEAN", "SUM", "REDUCE_MAX",
                            "REDUCE_MIN"})


def _int16_pooling(opname: str, ins: list[int], outs: list[int], infos) -> bool:
    """A pool, MEAN, SUM, REDUCE_MAX or REDUCE_MIN of a quantized 4-D INT16 input into INT16:
    the patterns read
    its integer kernel (``te_ops``); the quantizations and the axes the kernels take are
    checked by ``tflite_support.int16_pooling_refusal``."""
    if opname not in _INT16_POOLING or not ins or ins[0] < 0 or len(outs) != 1:
        return False
    x, y = infos[ins[0]], infos[outs[0]]
    return x.type == y.type == 7 and x.scale is not None and y.scale is not None and \
        (x.rank == 4 or opname == "MEAN" and x.rank in (2, 3))


def _quantization(t: TensorFacts) -> tuple[float | None, int]:
    """A tensor's first (scale, zero point): two tensors quantized alike share it."""
    return t.scale, t.zero_point


def _int16_unread(op: front_door.CheckedOperator, infos: tuple[TensorFacts, ...]) -> bool:
    """Whether ``op`` reads or writes INT16 in no form the patterns read exactly."""
    ins, outs, opname = list(op.inputs), list(op.outputs), op.name
    io = [i for i in ins + outs if i >= 0]
    return (any(infos[i].type == 7 for i in io) and not _integer_requantize(opname, io, infos)
            and not _int8_to_int16_softmax(opname, ins, outs, infos)
            and not _int16_softmax(opname, ins, outs, infos)
            and not _int16_elementwise(opname, io, infos)
            and not _int16_prelu(opname, ins, outs, infos)
            and not _int16x8_weighted(opname, ins, outs, infos)
            and not _int16x8_transpose_conv(opname, ins, outs, infos)
            and not _int16_movement(opname, ins, outs, infos)
            and not _int16_copies(opname, ins, outs, infos)
            and not _int16_bilinear(opname, ins, outs, infos)
            and not _int16_pooling(opname, ins, outs, infos))
