"""One SVDF as a TFLite flatbuffer, quantized as the TFLite converter quantizes one (int8
input, weights_feature and output, int32 bias at state x weights_time scale, the state a
variable tensor of weights_time's type), with the variants the Ethos-U stream refuses one
keyword away.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import tflite
import tflite_builder as tb
from hypothesis import strategies as st
from tflite_builder import BO, BOPT, T

NONE, RELU = 0, 1


@dataclass(frozen=True)
class SvdfCase:
    """The SVDF's sizes and quantization (scales as TFLite Micro's two effective scales, so
    that a case names how far its requantizations reach); the last fields make a
    variant."""

    batches: int = 1
    input_size: int = 6
    units: int = 4
    rank: int = 1
    memory: int = 3
    input_q: tuple = (0.05, -7)
    state_zp: int = 5
    output_zp: int = -3
    state_scale: float = 0.1
    #: input x weights_feature / state and state x weights_time / output
    feature_scale: float = 0.004
    time_scale: float = 0.02
    bias_range: int = 2000
    activation: int = RELU
    seed: int = 0
    state_dtype: str = "int8"
    no_bias: bool = False
    float_input: bool = False


def svdf_cases(input_size: int, units: int, memory: int,
               state_dtype: str = "int8") -> st.SearchStrategy[SvdfCase]:
    """Any SVDF of up to ``input_size`` inputs, ``units`` units of rank 1 to 3 and
    ``memory`` steps: batches, zero points, both requantizations from a small fraction of
    the codes to past the state's and the output's range."""
    return st.builds(
        SvdfCase,
        batches=st.integers(1, 2), input_size=st.integers(1, input_size),
        units=st.integers(1, units), rank=st.integers(1, 3), memory=st.integers(1, memory),
        input_q=st.tuples(st.floats(0.002, 0.1), st.integers(-128, 127)),
        state_zp=st.integers(-128, 127) if state_dtype == "int8" else st.just(0),
        output_zp=st.integers(-128, 127), state_scale=st.floats(0.01, 1.0),
        feature_scale=st.floats(1e-4, 0.9), time_scale=st.floats(1e-4, 0.9),
        bias_range=st.integers(0, 100000), activation=st.sampled_from([NONE, RELU]),
        seed=st.integers(0, 2 ** 16), state_dtype=st.just(state_dtype))


def svdf_model(case: SvdfCase = SvdfCase()) -> bytes:
    """The flatbuffer of ``case``: tensor 0 the input (the only graph input: the state is
    the operator's), the last tensor the output."""
    tensors: list[T] = []
    op, out = _svdf(case, tensors, None)
    return tb.serialize(tensors, [op], [0], [out])


def svdf_stack(first: SvdfCase, units: tuple[int, ...], fully_connected_after: int = -1
               ) -> bytes:
    """SVDFs in a row, the first ``first``, each next one of ``units[k]`` units reading the
    one before (``first``'s other settings, its own seed); after SVDF
    ``fully_connected_after`` a FULLY_CONNECTED of as many outputs as inputs (an NPU group
    between two SVDFs)."""
    tensors: list[T] = []
    ops = []
    op, out = _svdf(first, tensors, None)
    ops.append(op)
    for k, n in enumerate(units):
        if k == fully_connected_after + 1 and fully_connected_after >= 0:
            fc, out = _fully_connected(tensors, out, first.seed + 100)
            ops.append(fc)
        x = tensors[out]
        case = dataclasses.replace(first, input_size=x.shape[1], units=n,
                                   input_q=(float(x.scale[0]), int(x.zp[0])),
                                   seed=first.seed + k + 1)
        op, out = _svdf(case, tensors, out)
        ops.append(op)
    return tb.serialize(tensors, ops, [0], [out])


def _add(tensors: list[T], tensor: T) -> int:
    tensors.append(tensor)
    return len(tensors) - 1


def _svdf(case: SvdfCase, tensors: list[T], x: int | None) -> tuple[tuple, int]:
    """``case``'s tensors appended to ``tensors`` (its input a new tensor, or ``x``): the
    operator tuple (``tflite_builder.serialize``'s) and its output tensor."""
    rs = np.random.RandomState(case.seed)
    b, n, m = case.batches, case.input_size, case.memory
    f = case.units * case.rank
    s_in, zp_in = case.input_q
    s_state = case.state_scale
    # the weights' scales that give the case's effective scales (float32, as TFLite stores)
    s_wf = float(np.float32(case.feature_scale * s_state / s_in))
    s_out = 0.05
    s_wt = float(np.float32(case.time_scale * s_out / s_state))
    wide = case.state_dtype == "int16"
    if x is None:
        x = _add(tensors, T([b, n], "float32") if case.float_input
                 else T([b, n], "int8", scale=s_in, zp=zp_in))
    ins = [x,
           _add(tensors, T([f, n], "int8", scale=s_wf, zp=0,
                           data=rs.randint(-127, 128, size=(f, n)))),
           _add(tensors, T([f, m], case.state_dtype, scale=s_wt, zp=0,
                           data=rs.randint(-32767 if wide else -127, 32768 if wide else 128,
                                           size=(f, m)))),
           _add(tensors, T([case.units], "int32",
                           scale=float(np.float32(s_state) * np.float32(s_wt)), zp=0,
                           data=rs.randint(-case.bias_range, case.bias_range + 1,
                                           size=case.units))),
           _add(tensors, T([b, m * f], case.state_dtype, scale=s_state, zp=case.state_zp,
                           variable=True))]
    if case.no_bias:
        ins[3] = -1
    out = _add(tensors, T([b, case.units], "int8", scale=s_out, zp=case.output_zp))

    def options(bld):
        tflite.SVDFOptionsStart(bld)
        tflite.SVDFOptionsAddRank(bld, case.rank)
        tflite.SVDFOptionsAddFusedActivationFunction(bld, case.activation)
        return tflite.SVDFOptionsEnd(bld)

    return (BO.SVDF, BOPT.SVDFOptions, options, ins, [out]), out


def _fully_connected(tensors: list[T], x: int, seed: int) -> tuple[tuple, int]:
    """A FULLY_CONNECTED of tensor ``x`` (batches, n) to n outputs."""
    rs = np.random.RandomState(seed)
    src = tensors[x]
    b, n = src.shape
    w = _add(tensors, T([n, n], "int8", scale=0.01, zp=0,
                        data=rs.randint(-127, 128, size=(n, n))))
    bias = _add(tensors, T([n], "int32", scale=float(np.float32(src.scale[0] * 0.01)), zp=0,
                           data=rs.randint(-500, 500, size=n)))
    out = _add(tensors, T([b, n], "int8", scale=0.08, zp=3))

    def options(bld):
        tflite.FullyConnectedOptionsStart(bld)
        tflite.FullyConnectedOptionsAddFusedActivationFunction(bld, 0)
        return tflite.FullyConnectedOptionsEnd(bld)

    return (BO.FULLY_CONNECTED, BOPT.FullyConnectedOptions, options, [x, w, bias], [out]), out
