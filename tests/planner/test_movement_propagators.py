"""The Parts of the LUT / unary and data-movement operators (planner.parts: unary, pad,
concatenate, strided_slice, reshape) map every output stripe to exactly the input region the
reference operator reads: brute force on numpy (tests/helpers/read_regions.py), for any
shape and parameters."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import parts
from planner.graph import Tensor
from planner.perf.ethos_u import lower_part
from tests.helpers.read_regions import boxes, propagated_region, read_region

shapes = st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple)
BOXES = 12


def _exact(part, reference, k=0, seed=0):
    """Every box of the output (random ones and the whole) reads, through propagator ``k``,
    exactly what ``reference`` reads of input ``k``."""
    in_shapes = [t.shape for t in part.inputs]
    for box in boxes(part.output.shape, np.random.RandomState(seed), BOXES):
        want = read_region(reference, in_shapes, k, box)
        got = propagated_region(part.propagators[k], box, in_shapes[k])
        assert got == want, (part.name, box, got, want)


@settings(max_examples=20, deadline=None)
@given(shape=shapes, op=st.sampled_from(["sigmoid", "tanh", "leaky_relu", "quantize",
                                         "requantize", "hard_swish"]), seed=st.integers(0, 99))
def test_unary_lut_and_requantize_read_their_own_elements(shape, op, seed):
    part = parts.unary("u", Tensor("x", shape), op)
    _exact(part, lambda x: x, seed=seed)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data(), seed=st.integers(0, 99))
def test_pad_reads_the_shifted_window_inside_the_input(shape, data, seed):
    pads = [tuple(data.draw(st.tuples(st.integers(0, 3), st.integers(0, 3))))
            for _ in shape]
    part = parts.pad("p", Tensor("x", shape), pads)
    _exact(part, lambda x: np.pad(x, pads, constant_values=-1), seed=seed)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data(), seed=st.integers(0, 99))
def test_concatenate_reads_each_input_at_its_offset(shape, data, seed):
    axis = data.draw(st.integers(0, len(shape) - 1))
    sizes = data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    xs = []
    for i, n in enumerate(sizes):
        s = list(shape)
        s[axis] = n
        xs.append(Tensor(f"x{i}", tuple(s)))
    part = parts.concatenate("c", xs, axis=axis)
    for k in range(len(xs)):
        _exact(part, lambda *a: np.concatenate(a, axis=axis), k=k, seed=seed)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data(), seed=st.integers(0, 99))
def test_slice_reads_its_offset_box(shape, data, seed):
    """SLICE, unit-stride STRIDED_SLICE, and each output of SPLIT / SPLIT_V
    (planner.tflite lowers them all to ``strided_slice``)."""
    begin = [data.draw(st.integers(0, n - 1)) for n in shape]
    size = [data.draw(st.integers(1, n - b)) for b, n in zip(begin, shape)]
    part = parts.strided_slice("s", Tensor("x", shape), begin, size)
    _exact(part, lambda x: x[tuple(slice(b, b + s) for b, s in zip(begin, size))], seed=seed)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data(), seed=st.integers(0, 99))
def test_strided_slice_reads_every_stride_th_element_of_its_box(shape, data, seed):
    """STRIDED_SLICE with strides: an output stripe reads from its first element's input to
    its last's, ``stride`` apart."""
    strides = [data.draw(st.integers(1, 4)) for _ in shape]
    begin = [data.draw(st.integers(0, n - 1)) for n in shape]
    size = [data.draw(st.integers(1, (n - 1 - b) // k + 1))
            for b, k, n in zip(begin, strides, shape)]
    part = parts.strided_slice("s", Tensor("x", shape), begin, size, strides=strides)
    _exact(part, lambda x: x[tuple(slice(b, b + k * (s - 1) + 1, k)
                                   for b, s, k in zip(begin, size, strides))], seed=seed)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data(), seed=st.integers(0, 99))
def test_reshape_reads_the_whole_input(shape, data, seed):
    """RESHAPE, SQUEEZE and EXPAND_DIMS: the same bytes under another shape. The Part reads
    the whole input for any stripe (the stream copies whole tensors only): exact for the
    whole output, a superset of what a smaller stripe reads."""
    new = list(shape)
    if data.draw(st.booleans()):
        new.insert(data.draw(st.integers(0, len(new))), 1)       # expand dims
    ones = [i for i, n in enumerate(new) if n == 1]
    if ones and data.draw(st.booleans()) and len(new) > 1:
        del new[data.draw(st.sampled_from(ones))]                 # squeeze
    if data.draw(st.booleans()):
        new = [math.prod(new)]                                    # flatten
    x = Tensor("x", shape)
    part = parts.reshape("r", x, new)

    def ref(a):
        return a.reshape(new)

    whole = tuple((0, n) for n in part.output.shape)
    assert propagated_region(part.propagators[0], whole, shape) == \
        read_region(ref, [shape], 0, whole)
    for box in boxes(part.output.shape, np.random.RandomState(seed), BOXES):
        want = read_region(ref, [shape], 0, box)
        got = propagated_region(part.propagators[0], box, shape)
        assert all(g0 <= w0 and w1 <= g1 for (g0, g1), (w0, w1) in zip(got, want))


def test_lut_stripes_cost_the_table_lookup_and_movement_stripes_one_copy_per_box():
    """The Ethos-U lowering the cost model prices each stripe with (as Vela lowers them): a
    LUT activation is one 1x1 pool carrying its 256-entry table, a requantization the same
    pool without one, a slice one copy of its box, a concatenation one copy per input of
    the box each reads."""
    x = Tensor("x", (1, 8, 8, 16))
    (lut,) = lower_part(parts.unary("sig", x, "sigmoid"), (1, 4, 8, 16))
    assert (lut.npu, lut.kernel, lut.lut_bytes, lut.ofm) == ("pooling", (1, 1), 256,
                                                             (1, 4, 8, 16))
    (req,) = lower_part(parts.unary("q", x, "quantize"), (1, 2, 8, 16))
    assert (req.npu, req.lut_bytes, req.ofm) == ("pooling", 0, (1, 2, 8, 16))
    (cut,) = lower_part(parts.strided_slice("s", x, (0, 2, 0, 4), (1, 6, 8, 8)), (1, 3, 8, 8))
    assert cut.ofm == (1, 3, 8, 8)
    cat = parts.concatenate("c", [x, Tensor("y", (1, 8, 8, 8))], axis=3)
    assert [o.ofm for o in lower_part(cat, (1, 2, 8, 24))] == [(1, 2, 8, 16), (1, 2, 8, 8)]
