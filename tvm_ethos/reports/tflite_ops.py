"""A ``.tflite`` model's operators as Vela's reports name and count them: the operator type
(Vela's ``Original Operator``), the name of its first output tensor (Vela's ``Name``) and its
multiply-accumulates as Vela's performance estimator counts them (``npu_performance.py``:
``measure_cycle_cost``), computed once per operator of the network, so a plan that recomputes
overlapping stripes does not change the figure. TVM-free.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import tflite

#: Vela's operator name per TFLite builtin it maps to another (``tflite_mapping``'s Op, less
#: the ``Bias`` its convolutions carry internally).
_BIAS = "Bias"
#: TFLite's builtin operator names by code.
_NAMES = {v: k for k, v in vars(tflite.BuiltinOperator).items() if not k.startswith("_")}


class TfliteOperator(NamedTuple):
    """One operator of the model, in the file's (execution) order."""

    index: int
    builtin: str            # TFLite's name, e.g. CONV_2D
    vela_name: str          # Vela's, e.g. Conv2D
    name: str               # its first output tensor's name, as Vela names the layer
    macs: int               # as Vela counts them


def operator_kinds(data: bytes) -> list[tuple[str, tuple[int, ...]]]:
    """(kind, first output's shape) of every operator of the first subgraph of the TFLite
    model ``data``: a builtin's name, or a custom operator's code (``ethos-u``)."""
    out = []
    for _, g, op, code, builtin in _operators(data):
        kind = code.CustomCode().decode() if code.CustomCode() else _NAMES.get(builtin, "?")
        out.append((kind, _shape(g, op.Outputs(0)) if op.OutputsLength() else ()))
    return out


def read_operators(data: bytes) -> list[TfliteOperator]:
    """The operators of the first subgraph of the TFLite model ``data``."""
    from ethosu.vela.tflite_mapping import builtin_operator_map  # Vela: imported when used

    out = []
    for i, g, op, code, builtin in _operators(data):
        if builtin == tflite.BuiltinOperator.CUSTOM:
            custom = (code.CustomCode() or b"").decode()
            out.append(TfliteOperator(i, "CUSTOM", custom, _tensor_name(g, op.Outputs(0)), 0))
            continue
        mapped = builtin_operator_map.get(builtin)
        vela = mapped[0].name if mapped is not None else _NAMES.get(builtin, str(builtin))
        vela = vela[: -len(_BIAS)] if vela.endswith(_BIAS) else vela
        tname = _tensor_name(g, op.Outputs(0)) if op.OutputsLength() else ""
        out.append(TfliteOperator(i, _NAMES.get(builtin, str(builtin)), vela, tname,
                                  vela_macs(_NAMES.get(builtin, ""), g, op)))
    return out


def _operators(data: bytes):
    """(index, subgraph, operator, its operator code, its builtin code) of every operator of
    the first subgraph of the TFLite model ``data``, in the file's order."""
    model = tflite.Model.GetRootAsModel(data, 0)
    g = model.Subgraphs(0)
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        yield i, g, op, code, max(code.BuiltinCode(), code.DeprecatedBuiltinCode())


def _tensor_name(g, t: int) -> str:
    name = g.Tensors(t).Name() if t >= 0 else None
    return name.decode() if name else ""


def _shape(g, t: int) -> tuple[int, ...]:
    return tuple(int(d) for d in g.Tensors(t).ShapeAsNumpy()) if t >= 0 else ()


def vela_macs(builtin: str, g, op) -> int:
    """Vela's MAC count of one operator: kernel area x input depth x output elements for a
    convolution or fully connected layer, kernel area x output elements for a depthwise
    convolution, a pool and a MEAN (which Vela turns into one), one per output element for a
    QUANTIZE (a 1x1 pool to Vela), two passes over the input for an int8 SOFTMAX (its max and
    its sum), none for element-wise and data-movement operators. An LSTM counts its gates'
    matrix products, every step (input x input weights, hidden state x recurrent weights);
    Vela's count of its own LSTM adds the 1x1 pools its decomposition runs (clamps, a tanh
    and copies: 3,400 of 116,540 MACs on tflite-micro's trained_lstm_int8, Vela 5.2), which
    are not the network's."""
    ofm = _shape(g, op.Outputs(0)) if op.OutputsLength() else ()
    ofm_elems = math.prod(ofm) if ofm else 0
    if builtin == "CONV_2D":
        _, kh, kw, cin = _shape(g, op.Inputs(1))
        return kh * kw * cin * ofm_elems
    if builtin == "DEPTHWISE_CONV_2D":
        _, kh, kw, _ = _shape(g, op.Inputs(1))
        return kh * kw * ofm_elems
    if builtin == "FULLY_CONNECTED":
        cin = _shape(g, op.Inputs(1))[-1]
        return cin * ofm_elems
    if builtin in ("AVERAGE_POOL_2D", "MAX_POOL_2D"):
        opts = tflite.Pool2DOptions()
        table = op.BuiltinOptions()
        opts.Init(table.Bytes, table.Pos)
        return opts.FilterHeight() * opts.FilterWidth() * ofm_elems
    if builtin == "MEAN":
        ifm = _shape(g, op.Inputs(0))
        return max(1, math.prod(ifm) // max(1, ofm_elems)) * ofm_elems if ifm else 0
    if builtin == "SOFTMAX":
        return 2 * ofm_elems
    if builtin == "QUANTIZE":
        return ofm_elems
    if builtin == "UNIDIRECTIONAL_SEQUENCE_LSTM":
        # inputs 1-4: input-to-gate weights (cells x features), 5-8: recurrent (cells x
        # outputs), an absent gate's -1; one product of each per step of each batch
        weights = [op.Inputs(i) for i in range(1, 9) if op.Inputs(i) >= 0]
        steps = math.prod(_shape(g, op.Inputs(0))[:-1])
        return steps * sum(math.prod(_shape(g, t)) for t in weights)
    return 0
