"""Random int8 quantizations of a two-input elementwise operator (ADD, SUB,
SQUARED_DIFFERENCE), for the benchmarks that count, per quantization, the outputs that
differ from TFLite Micro over every pair of codes."""
from __future__ import annotations

import numpy as np

Quantization = tuple[float, int]
"""(scale, zero point) of one tensor."""


def random_binary_quantization(rs: np.random.RandomState, out_exponents: tuple[float, float]
                               ) -> tuple[Quantization, Quantization, Quantization]:
    """(input 1, input 2, output) quantizations drawn from ``rs``: input scales 2**-9..2 (a
    third of the time the same for both, the case a rescale treats apart), an output scale
    2**``out_exponents``, any zero points; scales rounded to float32 as a .tflite holds them."""
    s1, s2 = (float(np.float32(2.0 ** rs.uniform(-9, 1))) for _ in range(2))
    if rs.rand() < 1 / 3:
        s2 = s1
    z1, z2, zo = (int(v) for v in rs.randint(-128, 128, 3))
    return (s1, z1), (s2, z2), (float(np.float32(2.0 ** rs.uniform(*out_exponents))), zo)
