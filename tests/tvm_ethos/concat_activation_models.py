"""CONCATENATION with a fused activation (RELU, RELU6, RELU_N1_TO_1), for the tests and the
benchmark of it on the Ethos-U: the model (:func:`fused_concat`) and its oracle.

TFLite Micro and LiteRT both refuse such a model (their CONCATENATION kernels require no fused
activation), so the oracle is what the fused activation means in TFLite's schema: the
activation operator, quantized as the concatenation's output on both sides, run on the
output's codes (:func:`activation_oracle`) by TFLite Micro, or by LiteRT's reference kernels
where TFLite Micro has none (RELU_N1_TO_1, uint8)."""
from __future__ import annotations

import numpy as np
import tflite
import tflite_builder as tb
from tflite_builder import ACT, BO, BOPT, T

from tests.helpers.tflite_oracle import oracle, tflm_oracle

ACTIVATIONS = ("relu", "relu6", "relu_n1_to_1")
ACT_OPS = {"relu": BO.RELU, "relu6": BO.RELU6, "relu_n1_to_1": BO.RELU_N1_TO_1}


def concat_op(axis: int, act: str | None, ins: list[int], out: int) -> tuple:
    """The CONCATENATION operator of tensors ``ins`` into ``out`` (``tflite_builder``'s
    operator tuple), with the fused activation ``act`` (None: none)."""
    def opts(b):
        tflite.ConcatenationOptionsStart(b)
        tflite.ConcatenationOptionsAddAxis(b, axis)
        tflite.ConcatenationOptionsAddFusedActivationFunction(b, ACT[act])
        return tflite.ConcatenationOptionsEnd(b)

    return BO.CONCATENATION, BOPT.ConcatenationOptions, opts, ins, [out]


def fused_concat(shapes, axis: int, qs, out_q, act: str, dtype: str = "int8") -> bytes:
    """One CONCATENATION of inputs of ``shapes`` quantized ``qs`` into ``out_q``, with the
    fused activation ``act``."""
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    tensors = [T(list(s), dtype, scale=q[0], zp=q[1]) for s, q in zip(shapes, qs)]
    tensors.append(T(out, dtype, scale=out_q[0], zp=out_q[1]))
    n = len(shapes)
    return tb.serialize(tensors, [concat_op(axis, act, list(range(n)), n)], list(range(n)),
                        [n])


def activation_model(shape, q, act: str, dtype: str = "int8") -> bytes:
    """The activation alone, quantized ``q`` on both sides: what a fused one applies to the
    output's codes."""
    return tb.serialize([T(list(shape), dtype, scale=q[0], zp=q[1]),
                         T(list(shape), dtype, scale=q[0], zp=q[1])],
                        [(ACT_OPS[act], 0, None, [0], [1])], [0], [1])


def activation_oracle(codes: np.ndarray, q, act: str) -> np.ndarray:
    """TFLite's activation of the output codes ``codes`` quantized ``q``: TFLite Micro's
    kernel, or LiteRT's reference kernel where TFLite Micro has none (RELU_N1_TO_1, uint8)."""
    model = activation_model(codes.shape, q, act, str(codes.dtype))
    if act == "relu_n1_to_1" or codes.dtype == np.uint8:
        return oracle(model, [codes])[0]
    return tflm_oracle(model, [codes])[0]
