"""The planner's BATCH_MATMUL Part (``planner.parts.batch_matmul``, read from a .tflite by
``planner.tflite``): for any output box, the input box its propagators give is exactly the box
of the elements TFLite's kernel reads for it (brute force over the box's output elements)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import _opts

from ethos_arch.ops import Op
from planner import parts
from planner.errors import PlannerError
from planner.graph import Tensor
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite


@st.composite
def cases(draw):
    """(a shape, b shape, adj_x, adj_y, output box (start, size) per output axis)."""
    dims = draw(st.lists(st.integers(1, 3), max_size=2))
    a_batch = [d if draw(st.booleans()) else 1 for d in dims]
    b_batch = [d if draw(st.booleans()) else 1 for d in dims]
    if draw(st.booleans()):
        a_batch = a_batch[draw(st.integers(0, len(a_batch))):]
    m, k, n = (draw(st.integers(1, 5)) for _ in range(3))
    adj_x, adj_y = draw(st.booleans()), draw(st.booleans())
    a = tuple(a_batch) + ((k, m) if adj_x else (m, k))
    b = tuple(b_batch) + ((n, k) if adj_y else (k, n))
    out = tuple(max(x, y) for x, y in zip([1] * (len(dims) - len(a_batch)) + a_batch,
                                          b_batch)) + (m, n)
    box = []
    for size in out:
        start = draw(st.integers(0, size - 1))
        box.append((start, draw(st.integers(1, size - start))))
    return a, b, adj_x, adj_y, tuple(box)


def _reads(shape, batch_out, idx, row, transposed, rows_are_reduced):
    """The elements of an operand of ``shape`` that output element ``idx`` reads: its batch
    (broadcast), its row or column ``row``, every element of the reduced axis."""
    nb = len(shape) - 2
    batch = tuple(0 if s == 1 else i for s, i in
                  zip(shape[:nb], idx[len(batch_out) - nb:len(batch_out)]))
    k = shape[-2] if rows_are_reduced != transposed else shape[-1]
    for r in range(k):
        pair = (r, row) if rows_are_reduced != transposed else (row, r)
        yield batch + pair


def _bounds(points) -> tuple[tuple[int, int], ...]:
    arr = np.array(list(points))
    return tuple((int(lo), int(hi - lo + 1)) for lo, hi in zip(arr.min(0), arr.max(0)))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_the_propagated_box_is_the_box_the_kernel_reads(case):
    a_shape, b_shape, adj_x, adj_y, box = case
    part = parts.batch_matmul("bmm", Tensor("a", a_shape), Tensor("b", b_shape), adj_x, adj_y)
    out = part.output.shape
    nb = len(out) - 2
    elements = list(itertools.product(*[range(s, s + n) for s, n in box]))
    want_a = _bounds(p for idx in elements for p in
                     _reads(a_shape, out[:nb], idx, idx[-2], adj_x, False))
    want_b = _bounds(p for idx in elements for p in
                     _reads(b_shape, out[:nb], idx, idx[-1], adj_y, True))
    starts, sizes = [s for s, _ in box], [n for _, n in box]
    for prop, want in zip(part.propagators, (want_a, want_b)):
        got = tuple(zip(prop.apply_offset(starts), prop.apply_shape(sizes)))
        assert got == want


def test_the_tflite_reader_gives_the_part():
    otype, ofn = _opts("BatchMatMulOptions", AdjX=True, AdjY=False)
    tensors = [tb.T([2, 7, 5], "int8", scale=0.05, zp=3),
               tb.T([1, 7, 6], "int8", scale=0.03, zp=-4),
               tb.T([2, 5, 6], "int8", scale=0.2, zp=1)]
    g = load_tflite(tb.serialize(tensors, [(tb.BO.BATCH_MATMUL, otype, ofn, [0, 1], [2])],
                                 [0, 1], [2]))
    (part,) = g.parts
    want = parts.batch_matmul("x", Tensor("a", (2, 7, 5)), Tensor("b", (1, 7, 6)), True, False)
    assert part.kind == Op.BATCH_MATMUL and part.output.shape == (2, 5, 6)
    assert part.propagators == want.propagators
    assert part.attr("adj_x") is True and part.attr("adj_y") is False


@pytest.mark.parametrize("constant", [0, 1])
def test_the_tflite_reader_takes_a_constant_operand(constant):
    """A constant operand is the Part's constant input (read from flash, as the TVM path's
    stream reads it); two constants are one planner error naming them."""
    shapes = ([2, 3, 4], [4, 5])
    codes = np.arange(np.prod(shapes[constant]), dtype=np.int8).reshape(shapes[constant])
    data = [codes if k == constant else None for k in (0, 1)]
    tensors = [tb.T(shapes[0], "int8", scale=0.05, zp=3, data=data[0]),
               tb.T(shapes[1], "int8", scale=0.03, zp=-4, data=data[1]),
               tb.T([2, 3, 5], "int8", scale=0.2, zp=1)]
    otype, ofn = _opts("BatchMatMulOptions", AdjX=False, AdjY=False)
    ops = [(tb.BO.BATCH_MATMUL, otype, ofn, [0, 1], [2])]
    g = load_tflite(tb.serialize(tensors, ops, [1 - constant], [2]))
    (part,) = g.parts
    assert [t.is_constant for t in part.inputs] == [k == constant for k in (0, 1)]
    assert part.inputs[constant].shape == tuple(shapes[constant])
    want = parts.batch_matmul("x", Tensor("a", (2, 3, 4)), Tensor("b", (4, 5)))
    assert part.propagators == want.propagators
    tensors[1 - constant].data = np.zeros(shapes[1 - constant], np.int8)
    with pytest.raises(PlannerError, match="both operands are constants"):
        load_tflite(tb.serialize(tensors, ops, [], [2]))


@pytest.mark.parametrize("a,b,adj_y,copied,b_const", [
    ((3, 24, 32), (32, 24), False, [(1, 32, 24, 1)], False),
    ((24, 32), (3, 32, 24), False, [(1, 72, 32, 1), (1, 96, 24, 1)], False),
    ((2, 1, 6, 8), (1, 3, 5, 8), True, [(1, 36, 8, 1), (1, 30, 8, 1)], False),
    ((2, 6, 8), (2, 5, 8), True, [], False),
    ((2, 6, 8), (5, 8), True, [], True),
], ids=["b_one_transposed", "a_spread", "both_spread", "none", "b_constant_in_flash"])
def test_the_estimate_copies_what_is_laid_out_anew(a, b, adj_y, copied, b_const):
    """The estimated operations: one copy per operand laid out anew (transposed, or spread to
    every output batch: a broadcast ``a``, a broadcast ``b`` of more than one batch), then a
    MUL and a REDUCE_SUM per output column over all batches, the MUL reading a constant
    ``b`` left in place as a constant."""
    part = parts.batch_matmul("bmm", Tensor("a", a), Tensor("b", b, is_constant=b_const),
                              adj_y=adj_y)
    ops = lower_part(part, part.output.shape)
    n = part.output.shape[-1]
    assert [op.ofm for op in ops[:len(copied)]] == copied
    assert [op.op for op in ops[len(copied):]] == ["Mul", "ReduceSum"] * n
    assert all(op.ifm2_const == b_const for op in ops if op.op == "Mul")


def test_mismatched_operands_are_one_planner_error():
    with pytest.raises(PlannerError, match="reducing 4 elements of .* against 5"):
        parts.batch_matmul("bmm", Tensor("a", (3, 4)), Tensor("b", (5, 2)))
