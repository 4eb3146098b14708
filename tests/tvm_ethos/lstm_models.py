"""One UNIDIRECTIONAL_SEQUENCE_LSTM as a TFLite flatbuffer, int8 activations and an int16
cell state as the TFLite converter quantizes one (symmetric per-tensor int8 weights, int32
biases at input x weight scale, the states as variable tensors), with the variants the
Ethos-U stream refuses one keyword away.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import tflite
import tflite_builder as tb
from hypothesis import strategies as st
from tflite_builder import BO, BOPT, T

TANH, RELU = 4, 1


#: The variants the Ethos-U's LSTM check refuses on every target, with words of its reason.
REFUSED = [
    (dict(peephole=True), "peephole"),
    (dict(projection=True), "projection"),
    (dict(layer_norm=True), "layer normalization"),
    (dict(cifg=True), "no input gate"),
    (dict(per_channel=True), "per channel"),
    (dict(cell_power=-4), "cell state scale"),
]

@dataclass(frozen=True)
class LstmCase:
    """The LSTM's sizes and quantization; the last fields make a variant."""

    batches: int = 1
    steps: int = 3
    features: int = 5
    cells: int = 4
    input_q: tuple = (0.02, -3)
    hidden_q: tuple = (0.008, 2)
    cell_power: int = -11
    cell_clip: float = 0.0
    weight_scale: float = 0.01
    bias_range: int = 4000
    seed: int = 0
    time_major: bool = False
    activation: int = TANH
    peephole: bool = False
    projection: bool = False
    layer_norm: bool = False
    cifg: bool = False
    per_channel: bool = False
    float_input: bool = False


def lstm_cases(features: int, cells: int) -> st.SearchStrategy[LstmCase]:
    """Any LSTM the Ethos-U takes, of up to ``features`` input features and ``cells`` cells:
    batch- or time-major, any quantization, cell scale and clip."""
    return st.builds(
        LstmCase,
        batches=st.integers(1, 2), steps=st.integers(1, 4), features=st.integers(1, features),
        cells=st.integers(1, cells),
        input_q=st.tuples(st.floats(0.002, 0.1), st.integers(-128, 127)),
        hidden_q=st.tuples(st.floats(0.002, 0.05), st.integers(-20, 20)),
        cell_power=st.integers(-18, -5),
        cell_clip=st.sampled_from([0.0, 0.0001, 1.0, 3.5, 10.0, 1e6]),
        weight_scale=st.floats(0.002, 0.05), bias_range=st.integers(0, 40000),
        seed=st.integers(0, 2 ** 16), time_major=st.booleans())


def lstm_model(case: LstmCase = LstmCase()) -> bytes:
    """The flatbuffer of ``case``: tensor 0 the input, the last tensor the output."""
    tensors, op = _lstm(case, np.random.RandomState(case.seed))
    return tb.serialize(tensors, [op], [op[3][0]], op[4])


def lstm_then_fully_connected(case: LstmCase, outputs: int) -> bytes:
    """``case``'s LSTM, then a RESHAPE to rows and a FULLY_CONNECTED of ``outputs`` units."""
    rs = np.random.RandomState(case.seed)
    tensors, op = _lstm(case, rs)
    (seq,), s_h = op[4], case.hidden_q[0]
    rows = case.batches * case.steps
    r = len(tensors)
    tensors += [T([2], "int32", data=[rows, case.cells]),
                T([rows, case.cells], "int8", scale=s_h, zp=case.hidden_q[1])]

    def reshape_options(bld):
        tflite.ReshapeOptionsStartNewShapeVector(bld, 2)
        bld.PrependInt32(case.cells)
        bld.PrependInt32(rows)
        shape = bld.EndVector()
        tflite.ReshapeOptionsStart(bld)
        tflite.ReshapeOptionsAddNewShape(bld, shape)
        return tflite.ReshapeOptionsEnd(bld)

    reshape = (BO.RESHAPE, BOPT.ReshapeOptions, reshape_options, [seq, r], [r + 1])
    w = len(tensors)
    tensors += [T([outputs, case.cells], "int8", scale=0.01, zp=0,
                  data=rs.randint(-127, 128, size=(outputs, case.cells))),
                T([outputs], "int32", scale=s_h * 0.01, zp=0,
                  data=rs.randint(-500, 500, size=outputs)),
                T([rows, outputs], "int8", scale=0.05, zp=1)]
    def options(bld):
        tflite.FullyConnectedOptionsStart(bld)
        return tflite.FullyConnectedOptionsEnd(bld)

    fc = (BO.FULLY_CONNECTED, BOPT.FullyConnectedOptions, options, [r + 1, w, w + 1], [w + 2])
    return tb.serialize(tensors, [op, reshape, fc], [op[3][0]], [w + 2])


def fully_connected_then_lstm(case: LstmCase, inputs: int) -> bytes:
    """A FULLY_CONNECTED of ``inputs`` values a row into the LSTM's features, a RESHAPE
    of its rows into ``case``'s sequence, then ``case``'s LSTM."""
    rs = np.random.RandomState(case.seed)
    tensors, op = _lstm(case, rs)
    seq = op[3][0]
    shape = tensors[seq].shape
    rows = case.batches * case.steps
    s_x = 0.03
    x = len(tensors)
    tensors += [T([rows, inputs], "int8", scale=s_x, zp=-2),
                T([case.features, inputs], "int8", scale=0.01, zp=0,
                  data=rs.randint(-127, 128, size=(case.features, inputs))),
                T([case.features], "int32", scale=s_x * 0.01, zp=0,
                  data=rs.randint(-500, 500, size=case.features)),
                T([rows, case.features], "int8", scale=case.input_q[0], zp=case.input_q[1]),
                T([len(shape)], "int32", data=list(shape))]

    def fc_options(bld):
        tflite.FullyConnectedOptionsStart(bld)
        return tflite.FullyConnectedOptionsEnd(bld)

    def reshape_options(bld):
        tflite.ReshapeOptionsStartNewShapeVector(bld, len(shape))
        for d in reversed(shape):
            bld.PrependInt32(d)
        new_shape = bld.EndVector()
        tflite.ReshapeOptionsStart(bld)
        tflite.ReshapeOptionsAddNewShape(bld, new_shape)
        return tflite.ReshapeOptionsEnd(bld)

    fc = (BO.FULLY_CONNECTED, BOPT.FullyConnectedOptions, fc_options, [x, x + 1, x + 2],
          [x + 3])
    reshape = (BO.RESHAPE, BOPT.ReshapeOptions, reshape_options, [x + 3, x + 4], [seq])
    return tb.serialize(tensors, [fc, reshape, op], [x], op[4])


def stacked_lstms(first: LstmCase, cells: int) -> bytes:
    """Two LSTMs, the second (``cells`` cells) reading the first's output sequence."""
    rs = np.random.RandomState(first.seed)
    tensors, op1 = _lstm(first, rs)
    second = LstmCase(batches=first.batches, steps=first.steps, features=first.cells,
                      cells=cells, input_q=first.hidden_q, hidden_q=(0.01, -1),
                      seed=first.seed + 1)
    more, op2 = _lstm(second, rs)
    shift = len(tensors)
    ins = [t + shift if t >= 0 else -1 for t in op2[3]]
    ins[0] = op1[4][0]
    tensors += more[1:]                   # its own input is the first's output
    ins = [t - 1 if t > shift else t for t in ins]
    (out,) = op2[4]
    out = out + shift - 1
    op2 = op2[:3] + (ins, [out])
    return tb.serialize(tensors, [op1, op2], [op1[3][0]], [out])


def _lstm(case: LstmCase, rs) -> tuple[list[T], tuple]:
    """The tensors and the operator tuple (``tflite_builder.serialize``'s) of ``case``."""
    b, t, f, c = case.batches, case.steps, case.features, case.cells
    s_in, zp_in = case.input_q
    s_h, zp_h = case.hidden_q
    tensors: list[T] = []

    def add(tensor: T) -> int:
        tensors.append(tensor)
        return len(tensors) - 1

    ins = [-1] * 24
    in_shape = [t, b, f] if case.time_major else [b, t, f]
    ins[0] = add(T(in_shape, "float32") if case.float_input
                 else T(in_shape, "int8", scale=s_in, zp=zp_in))
    w_scales = {}
    for pos, cols in [(k, f) for k in (1, 2, 3, 4)] + [(k, c) for k in (5, 6, 7, 8)]:
        if case.cifg and pos in (1, 5):
            continue
        ws = case.weight_scale * rs.uniform(0.5, 1.5)
        scale = [ws * rs.uniform(0.5, 1.5) for _ in range(c)] if case.per_channel else ws
        w_scales[pos] = ws
        ins[pos] = add(T([c, cols], "int8", scale=scale, zp=[0] * c if case.per_channel else 0,
                         data=rs.randint(-127, 128, size=(c, cols))))
    if case.peephole:
        for pos in (9, 10, 11):
            ins[pos] = add(T([c], "int16", scale=0.001, zp=0,
                             data=rs.randint(-300, 300, size=c)))
    for pos, w in zip((12, 13, 14, 15), (1, 2, 3, 4)):
        if case.cifg and pos == 12:
            continue
        ins[pos] = add(T([c], "int32", scale=s_in * w_scales[w], zp=0,
                         data=rs.randint(-case.bias_range, case.bias_range + 1, size=c)))
    if case.projection:
        ins[16] = add(T([c, c], "int8", scale=0.01, zp=0, data=rs.randint(-127, 128, (c, c))))
    ins[18] = add(T([b, c], "int8", scale=s_h, zp=zp_h, variable=True))
    ins[19] = add(T([b, c], "int16", scale=2.0 ** case.cell_power, zp=0, variable=True))
    if case.layer_norm:
        for pos in (20, 21, 22, 23):
            ins[pos] = add(T([c], "int16", scale=0.0001, zp=0,
                             data=rs.randint(1000, 30000, size=c)))
    out_shape = [t, b, c] if case.time_major else [b, t, c]
    out = add(T(out_shape, "int8", scale=s_h, zp=zp_h))

    def options(bld):
        tflite.UnidirectionalSequenceLSTMOptionsStart(bld)
        tflite.UnidirectionalSequenceLSTMOptionsAddFusedActivationFunction(bld, case.activation)
        tflite.UnidirectionalSequenceLSTMOptionsAddCellClip(bld, case.cell_clip)
        tflite.UnidirectionalSequenceLSTMOptionsAddProjClip(bld, 0.0)
        tflite.UnidirectionalSequenceLSTMOptionsAddTimeMajor(bld, case.time_major)
        return tflite.UnidirectionalSequenceLSTMOptionsEnd(bld)

    return tensors, (BO.UNIDIRECTIONAL_SEQUENCE_LSTM, BOPT.UnidirectionalSequenceLSTMOptions,
                     options, ins, [out])
