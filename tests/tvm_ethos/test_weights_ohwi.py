"""The stream generator's weight volume (``npu_ops.weights_ohwi``) is the int16 of the exact
difference weight - zero point, in OHWI order, for every integer weight and zero-point type
(float weights truncated to int64 first): the int16 arithmetic it uses wraps as the cast of
the exact int64 difference does."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u.npu_ops import weights_ohwi

_DTYPES = st.sampled_from([np.int8, np.uint8, np.int16, np.int32, np.int64])


def _exact(op) -> np.ndarray:
    """The definition: int64 difference, then the int16 cast."""
    w = np.asarray(op.weights, np.int64)
    zp = np.asarray(op.w_zp if op.w_zp is not None else 0, np.int64).ravel()
    if op.kind == Op.FULLY_CONNECTED:
        return (w - zp[0])[:, None, None, :].astype(np.int16)
    return (w - np.broadcast_to(zp, (w.shape[3],))).transpose(3, 0, 1, 2).astype(np.int16)


@st.composite
def _ops(draw):
    kind = draw(st.sampled_from([Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED]))
    shape = draw(hnp.array_shapes(min_dims=2, max_dims=2, max_side=5)) \
        if kind == Op.FULLY_CONNECTED else draw(hnp.array_shapes(min_dims=4, max_dims=4,
                                                                  max_side=4))
    weights = draw(hnp.arrays(draw(_DTYPES), shape) | hnp.arrays(
        np.float64, shape, elements=st.floats(-(2.0 ** 40), 2.0 ** 40)))   # truncated alike
    channels = 1 if kind == Op.FULLY_CONNECTED else shape[3]
    zp = draw(st.none() | hnp.arrays(draw(_DTYPES), draw(st.sampled_from([1, channels]))))
    return SimpleNamespace(kind=kind, weights=weights, w_zp=zp, attrs={})


@given(_ops())
def test_weights_ohwi_is_the_int16_of_the_exact_difference(op):
    got = weights_ohwi(op)
    want = _exact(op)
    assert got.dtype == np.int16 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)
