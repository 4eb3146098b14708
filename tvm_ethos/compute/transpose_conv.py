"""TFLite's TRANSPOSE_CONV kernels beyond the int8 one, where their scaling differs from the
convolutions': the host kernel (``te_ops``) and the Ethos-U stream (``npu_ops``) take the
choice from here.

* int16 activations (TFLite Micro's 16x8 kernel): int64 accumulation and the reduced
  multiplier (``int16x8``) with or without a bias, both zero points 0 and unread.
* uint8 (LiteRT's kernel; TFLite Micro has none): one multiplier for every channel, the weights'
  zero point subtracted. Its real multiplier is the input scale times the weight scale over
  the output scale, the product taken in double where the operator has a bias and in float32
  where it has none (TFLite's ``GetQuantizedConvolutionMultipler`` with and without one), so
  the two round to different multipliers on some scales.
"""
from __future__ import annotations

import numpy as np

from ethos_arch.ops import Op


def float32_product(op) -> bool:
    """Whether TFLite's kernel for ``op`` takes its real multiplier from the float32 product
    of the input and weight scales: LiteRT's uint8 TRANSPOSE_CONV without a bias."""
    return (op.kind == Op.TRANSPOSE_CONV2D and op.in_dtypes[0] == "uint8"
            and op.bias is None)


def real_multipliers(op, in_scale: float, w_scales, out_scale: float) -> list[float]:
    """Per weight scale of ``w_scales``, the real multiplier ``in_scale * w_scale /
    out_scale`` TFLite's kernel for the convolution ``op`` quantizes (each scale a float32
    value): the product in double, in float32 where :func:`float32_product`."""
    ws = np.asarray(w_scales, np.float32).ravel()
    if float32_product(op):
        return [float(np.float32(in_scale) * s) / out_scale for s in ws]
    return [in_scale * float(s) / out_scale for s in ws]
