"""TFLite's int8 BATCH_MATMUL through the importer: the llvm host's integer kernel
(``te_ops.lower_batch_matmul``) equal to TFLite Micro's over shapes, broadcast batches,
quantization and both adj flags."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import _opts

from tests.helpers.tflite_oracle import compiled_matches

pytest.importorskip("tflite_micro")


def bmm_model(a_shape, b_shape, adj_x=False, adj_y=False, a_q=(0.05, 3), b_q=(0.03, -4),
              out_q=(0.2, 1)) -> bytes:
    """One int8 BATCH_MATMUL of operands ``a_shape`` and ``b_shape`` (as stored: an operand
    with its adj flag set holds its matrix transposed), the output as TFLite's shape rule
    gives it."""
    a = np.zeros(a_shape)
    b = np.zeros(b_shape)
    out = np.matmul(a.swapaxes(-1, -2) if adj_x else a, b.swapaxes(-1, -2) if adj_y else b)
    tensors = [tb.T(list(a_shape), "int8", scale=a_q[0], zp=a_q[1]),
               tb.T(list(b_shape), "int8", scale=b_q[0], zp=b_q[1]),
               tb.T(list(out.shape), "int8", scale=out_q[0], zp=out_q[1])]
    otype, ofn = _opts("BatchMatMulOptions", AdjX=adj_x, AdjY=adj_y)
    return tb.serialize(tensors, [(tb.BO.BATCH_MATMUL, otype, ofn, [0, 1], [2])], [0, 1], [2])


def operand_shapes(batch_a, batch_b, m: int, k: int, n: int, adj_x: bool, adj_y: bool):
    """(a_shape, b_shape) of an ``m x k`` by ``k x n`` product with batch dimensions
    ``batch_a`` and ``batch_b``, each stored transposed where its adj flag says."""
    return (tuple(batch_a) + ((k, m) if adj_x else (m, k)),
            tuple(batch_b) + ((n, k) if adj_y else (k, n)))


_q = st.tuples(st.floats(0.002, 0.2), st.integers(-128, 127))
_out_q = st.tuples(st.floats(0.05, 4.0), st.integers(-128, 127))


@st.composite
def broadcast_batches(draw):
    """Two batch shapes TFLite broadcasts: per dimension equal, or one of them 1; ranks may
    differ (the shorter aligned right)."""
    dims = draw(st.lists(st.integers(1, 3), max_size=2))
    a, b = [], []
    for d in dims:
        side = draw(st.sampled_from(("both", "a1", "b1")))
        a.append(1 if side == "a1" else d)
        b.append(1 if side == "b1" else d)
    drop = draw(st.integers(0, len(dims)))
    return (a[drop:], b) if draw(st.booleans()) else (a, b[drop:])


@settings(max_examples=10, deadline=None)
@given(batches=broadcast_batches(), mkn=st.tuples(*[st.integers(1, 9)] * 3),
       adj=st.tuples(st.booleans(), st.booleans()), a_q=_q, b_q=_q, out_q=_out_q,
       seed=st.integers(0, 99))
def test_the_llvm_hosts_integer_kernel_is_tflite_micros(batches, mkn, adj, a_q, b_q, out_q,
                                                       seed):
    a_shape, b_shape = operand_shapes(*batches, *mkn, *adj)
    cm = compiled_matches(bmm_model(a_shape, b_shape, *adj, a_q, b_q, out_q), "llvm", seed)
    assert set(cm.partition_summary) == {"llvm"}
