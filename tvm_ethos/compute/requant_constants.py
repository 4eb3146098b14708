"""The integer constants a weighted layer's kernel requantizes with, as TFLite's kernels
derive them: the bias in the accumulator's type and the per-output-channel multipliers and
shifts of a convolution or a fully connected layer, and MEAN's multiplier with its element
count folded in. ``te_ops`` builds its TE from these, and the TVM-free ``.tflite`` path
(``tvm_ethos.tflite_direct``) hands the same arrays to the planner and the stream generator,
so both paths requantize with one rule."""
from __future__ import annotations

import numpy as np

from tvm_ethos.compute import int16x8, transpose_conv
from tvm_ethos.compute.quant import f32, quantize_multiplier, quantize_multipliers


def out_q(op) -> tuple[float, int]:
    """The output's (scale as a float32 value, zero point)."""
    return f32(op.out_q[0]), int(op.out_q[1])


def acc_dtype(op) -> str:
    """int64 for TFLite's 16x8 kernels with an int64 bias (``int16x8.wide_accumulator``),
    else int32 (an int32 bias with int16 activations too, as TFLite's kernel)."""
    return "int64" if int16x8.wide_accumulator(op.in_dtypes[0], op.bias) else "int32"


def bias_of(op, channels: int) -> np.ndarray:
    """The bias in the accumulator's type (zeros without one)."""
    dtype = np.int64 if acc_dtype(op) == "int64" else np.int32
    return op.bias.astype(dtype) if op.bias is not None else np.zeros((channels,), dtype)


def conv_multipliers(op) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) per output channel of a convolution's requantization (HWIO
    weights), as TFLite's kernel quantizes ``in_scale * w_scale / out_scale``."""
    co = op.weights.shape[3]
    in_scale = f32(op.in_q[0][0])
    out_scale, _ = out_q(op)
    w_scale = np.broadcast_to(np.asarray(op.w_scale, dtype=np.float32), (co,))
    return quantize_multipliers(transpose_conv.real_multipliers(op, in_scale, w_scale, out_scale))


def fc_multipliers(op) -> tuple[np.ndarray, np.ndarray]:
    """(multiplier, shift) per output unit of a fully connected layer's requantization
    (``(out, in)`` weights): per channel as PopulateConvolutionQuantizationParams (double
    products), per tensor as GetQuantizedConvolutionMultipler (the product in float32)."""
    nout = op.weights.shape[0]
    in_scale = f32(op.in_q[0][0])
    out_scale, _ = out_q(op)
    ws = np.asarray(op.w_scale, dtype=np.float32).ravel()
    if ws.size > 1:
        return quantize_multipliers([in_scale * float(s) / out_scale for s in ws])
    real = float(np.float32(in_scale) * np.float32(ws[0])) / out_scale
    m, s = quantize_multiplier(real)
    return np.full((nout,), m, np.int32), np.full((nout,), s, np.int32)


def mean_multiplier(in_scale: float, out_scale: float, num: int) -> tuple[int, int]:
    """(multiplier, shift) of TFLite's int8 MEAN with the element count folded in.

    TFLite's reference MEAN (``QuantizedMeanOrSum`` with the multiplier/shift that
    ``PrepareMeanOrSum`` derives from ``input_scale / output_scale``) does not divide the
    rescaled sum by ``num`` with rounding: it divides the Q31 multiplier itself,
    ``(multiplier << k) / num`` truncated, ``k = min(floor(log2 num), 32, 31 + shift)``, and
    applies a single ``MultiplyByQuantizedMultiplier(sum, multiplier', shift - k)``. The
    same path is taken whether or not the input and output quantization are equal."""
    mult, shift = quantize_multiplier(in_scale / out_scale)
    k = min(int(num).bit_length() - 1, 32, 31 + shift)
    return int((mult << k) // num), int(shift - k)
