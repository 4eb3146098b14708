"""The multiplier of a standalone RELU-family operator's requantization, as the kernel that
defines it forms it.

TFLite Micro's RELU (``CalculateReluOpData``) divides the two float32 scales in double;
LiteRT's ``ReluPrepare``, which RELU_0_TO_1 and RELU_N1_TO_1 run (TFLite Micro has no kernel
for either), divides them in float32 and widens the quotient. The two multipliers differ in
their low bits, which moves a code where the requantized value is a rounding tie in one and
not the other (0.05 -> 0.04: 0.05f / 0.04f is 1.25 exactly in float32, not in double). Plain
Python, no TVM.
"""
from __future__ import annotations

import numpy as np

from tvm_ethos.compute.quant import f32, quantize_multiplier

#: how ``patterns.read_qop`` names the clamps of RELU_0_TO_1 and RELU_N1_TO_1 (LiteRT's
#: kernels, whose multiplier is the float32 quotient)
LITERT_CLIPS = frozenset({"clip(0,1)", "clip(-1,1)"})


def relu_multiplier(in_scale: float, out_scale: float,
                    float_activation: str | None) -> tuple[int, int]:
    """TFLite's (Q31 multiplier, shift) of ``in_scale / out_scale`` for a standalone
    requantizing RELU-family operator whose clamp ``read_qop`` names ``float_activation``."""
    if float_activation in LITERT_CLIPS:
        return quantize_multiplier(float(np.float32(in_scale) / np.float32(out_scale)))
    return quantize_multiplier(f32(in_scale) / f32(out_scale))
