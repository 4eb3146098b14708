"""One-operator int16 pools and reductions over height and width (TFLite's MAX_POOL_2D,
AVERAGE_POOL_2D, MEAN and REDUCE_MAX of INT16 into INT16), and the Hypothesis strategies of
their shapes, windows and quantizations, for the tests of the importer, the Ethos-U stream
and the emulator."""
from __future__ import annotations

import numpy as np
import tflite_builder as tb
from hypothesis import strategies as st
from operator_models import _opts
from tflite_builder import ACT, BO, T

#: a symmetric quantization of int16 activations, as TFLite's int16 quantizer writes them
SYMMETRIC = (2.0**-12, 0)
#: the fused activations a pool takes (tflite_builder.ACT's names)
ACTIVATIONS = tuple(ACT)


def _t(shape, q, dtype: str = "int16") -> T:
    return T(list(shape), dtype, scale=q[0], zp=q[1])


def pool_out(size: int, window: int, stride: int, same: bool) -> int:
    """TFLite's output size of a pool: ceil(size / stride) SAME, else the windows that fit."""
    return -(-size // stride) if same else (size - window) // stride + 1


def pool(kind: str, shape, window, strides, same: bool, act=None, q=SYMMETRIC,
         out_q=None, dtype: str = "int16") -> bytes:
    """One int16 (or ``dtype``) ``kind`` ("max" or "avg") pool of ``shape`` (NHWC), output
    quantized as the input unless ``out_q``."""
    n, h, w, c = shape
    out = (n, pool_out(h, window[0], strides[0], same), pool_out(w, window[1], strides[1], same),
           c)
    code = BO.MAX_POOL_2D if kind == "max" else BO.AVERAGE_POOL_2D
    return tb.serialize(
        [_t(shape, q, dtype), _t(out, q if out_q is None else out_q, dtype)],
        [(code, *_opts("Pool2DOptions", Padding=0 if same else 1, StrideH=strides[0],
                       StrideW=strides[1], FilterHeight=window[0], FilterWidth=window[1],
                       FusedActivationFunction=ACT[act]), [0], [1])], [0], [1])


def reduction(name: str, shape, axes=(1, 2), keepdims=True, q=SYMMETRIC, out_q=None,
              dtype: str = "int16") -> bytes:
    """One int16 (or ``dtype``) MEAN, SUM, REDUCE_MAX or REDUCE_MIN of ``shape`` over the
    constant ``axes``, output quantized as the input unless ``out_q``."""
    kept = {a % len(shape) for a in axes}
    out = [1 if a in kept else d for a, d in enumerate(shape)] if keepdims else \
        [d for a, d in enumerate(shape) if a not in kept]
    code = {"MEAN": BO.MEAN, "REDUCE_MAX": BO.REDUCE_MAX, "SUM": BO.SUM,
            "REDUCE_MIN": BO.REDUCE_MIN}[name]
    ax = T([len(axes)], "int32", data=np.asarray(axes, np.int32))
    return tb.serialize([_t(shape, q, dtype), _t(out, q if out_q is None else out_q, dtype), ax],
                        [(code, *_opts("ReducerOptions", KeepDims=keepdims), [0, 2], [1])],
                        [0], [1])


#: int16 quantizations: scales around TFLite's int16 ones, zero points near 0 and anywhere
quantizations = st.tuples(
    st.sampled_from([2.0**-15, 2.0**-12, 2.0**-8]) | st.floats(1e-4, 0.05),
    st.sampled_from([0, 0, 1, -3]) | st.integers(-32768, 32767))


@st.composite
def pools(draw, kinds=("max", "avg")):
    """(model, description) of an int16 pool: shape, window, strides, SAME / VALID padding,
    fused activation, quantization (the input's, as TFLite's kernels require)."""
    kind = draw(st.sampled_from(kinds))
    same = draw(st.booleans())
    h, w, c = draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 12))
    # an average pool SAME-padded takes windows up to 8x8 on the NPU; a VALID one fits
    window = (draw(st.integers(1, h if not same else 4)),
              draw(st.integers(1, w if not same else 4)))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    act = draw(st.sampled_from(ACTIVATIONS))
    q = draw(quantizations)
    model = pool(kind, (1, h, w, c), window, strides, same, act, q)
    return model, (kind, (1, h, w, c), window, strides, "SAME" if same else "VALID", act, q)


@st.composite
def reductions(draw, name: str):
    """(model, description) of an int16 MEAN (any output quantization) or REDUCE_MAX (the
    input's) over height and width, axes in either order, keepdims or not."""
    shape = (1, draw(st.integers(1, 12)), draw(st.integers(1, 12)), draw(st.integers(1, 16)))
    axes = draw(st.sampled_from([(1, 2), (2, 1), (-3, -2)]))
    keep = draw(st.booleans())
    # LiteRT's int16 REDUCE_MAX (TFLite Micro has none) takes zero point 0 only
    q = draw(quantizations) if name == "MEAN" else (draw(quantizations)[0], 0)
    out_q = draw(quantizations) if name == "MEAN" else None
    return (reduction(name, shape, axes, keep, q, out_q),
            (name, shape, axes, keep, q, out_q))


#: one small model of each form, by name
FORMS = {
    "max_pool_same_relu": pool("max", (1, 5, 6, 8), (3, 2), (2, 1), True, "relu",
                               (2.0**-10, 3)),
    "avg_pool_valid": pool("avg", (1, 6, 7, 8), (2, 3), (2, 2), False),
    "avg_pool_same": pool("avg", (1, 5, 5, 8), (3, 3), (2, 2), True, None, (0.003, -7)),
    "mean_requantizing": reduction("MEAN", (1, 6, 5, 8), q=(0.002, 11), out_q=(0.0007, -40)),
    "reduce_max": reduction("REDUCE_MAX", (1, 7, 4, 8), keepdims=False),
}
#: the forms TFLite Micro has no int16 kernel of: LiteRT's reference kernel is their oracle
LITERT_ONLY = frozenset({"reduce_max"})
