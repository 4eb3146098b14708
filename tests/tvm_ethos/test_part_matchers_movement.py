"""The LUT, requantization and data-movement operators as planner Parts on both paths to a
PlannerGraph: the compile path's part matchers (propagators derived from the TE reads) and the
TVM-free TFLite reader (``planner.tflite``). For one-operator models with any shape and
parameters, every output box maps, through the Parts between the output and the input, to
exactly the input region the operator reads (brute force on numpy), and the Part kinds are
those the Ethos-U cost model prices (no opaque Part)."""

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from test_part_matchers import lowered_of
from test_stream_movement import (
    concat,
    expand_dims_model,
    slice_model,
    squeeze_model,
    strided_slice_model,
)

from planner.tflite import load_tflite
from tests.helpers.read_regions import boxes, propagated_region, read_region
from tvm_ethos.emulator.part_matchers import match_subgraph

#: Part kinds the Ethos-U performance model has a lowering for (planner.perf.ethos_u)
COSTED = {"unary", "pad", "concatenate", "slice", "reshape"}


def _chain_region(graph, out_name: str, in_name: str, box):
    """The region of ``in_name`` that ``box`` of ``out_name`` reads, propagated Part by Part
    back along the chain between them (each Part reading one activation)."""
    producers = {p.output.name: p for p in graph.parts}
    name = out_name
    while name != in_name:
        part = producers[name]
        (k,) = [i for i, t in enumerate(part.inputs) if not t.is_constant]
        box = propagated_region(part.propagators[k], box, part.inputs[k].shape)
        if box is None:
            return None
        name = part.inputs[k].name
    return box


def _graphs(model: bytes):
    """(reader, PlannerGraph) of every NPU subgraph of the compile path, then the TFLite
    reader's graph of the whole model."""
    out = [("part matchers", match_subgraph(lw).graph) for lw in lowered_of(model)]
    out.append(("planner.tflite", load_tflite(model)))
    return out


def _check(model: bytes, reference, n_outputs: int = 1, seed: int = 0):
    """Every graph's outputs: each is the output of ``reference(x)`` (a list of
    ``n_outputs`` when several) of its shape whose whole reads what the graph's whole output
    reads, and every box of it reads exactly what the reference reads of the model's one
    input."""
    for reader, graph in _graphs(model):
        assert {p.kind for p in graph.parts} <= COSTED, (reader, [p.kind for p in graph.parts])
        (x,) = graph.inputs
        refs = [(lambda a, j=j: reference(a)[j]) for j in range(n_outputs)] \
            if n_outputs > 1 else [reference]
        shapes = [np.asarray(r(np.zeros(x.shape))).shape for r in refs]
        for t in graph.outputs:
            whole = tuple((0, n) for n in t.shape)
            reads = _chain_region(graph, t.name, x.name, whole)
            j = next((j for j, s in enumerate(shapes) if s == t.shape and
                      read_region(refs[j], [x.shape], 0, whole) == reads), None)
            assert j is not None, (reader, t.name, t.shape, reads, shapes)
            # a RESHAPE (SQUEEZE, EXPAND_DIMS, the shape a SLICE leaves) is exact on whole
            # tensors, which is all the stream runs it on; a stripe of it may read more (the
            # TFLite reader's reads the whole input, a flattening index is not affine)
            reshaped = any(p.kind == "reshape" for p in graph.parts)
            rs = np.random.RandomState(seed)
            for box in boxes(t.shape, rs, 10):
                want = read_region(refs[j], [x.shape], 0, box)
                got = _chain_region(graph, t.name, x.name, box)
                if reshaped and box != whole:
                    assert all(g0 <= w0 and w1 <= g1 for (g0, g1), (w0, w1) in zip(got, want))
                    continue
                assert got == want, (reader, t.name, box, got, want)


dims = st.integers(1, 6)
nhwc = st.tuples(st.just(1), dims, dims, st.integers(1, 8))


@settings(max_examples=4, deadline=None)
@given(shape=nhwc, kind=st.sampled_from(["sigmoid", "tanh", "leaky_relu"]))
def test_lut_activations(shape, kind):
    _check(tb.activation(kind, shape=shape), lambda x: x)


@settings(max_examples=3, deadline=None)
@given(shape=nhwc, zq=st.integers(-20, 20))
def test_quantize(shape, zq):
    x = tb.T(list(shape), "int8", scale=0.05, zp=3)
    y = tb.T(list(shape), "int8", scale=0.02, zp=zq)
    _check(tb.build([x, y], [0], [1], tb.BO.QUANTIZE), lambda a: a)


@settings(max_examples=4, deadline=None)
@given(shape=nhwc, data=st.data())
def test_pad(shape, data):
    pads = tuple((0, 0) if a == 0 else data.draw(st.tuples(st.integers(0, 2), st.integers(0, 2)))
                 for a in range(4))
    _check(tb.pad(in_shape=shape, paddings=pads),
           lambda a: np.pad(a, pads, constant_values=-1))


@settings(max_examples=4, deadline=None)
@given(shape=nhwc, axis=st.integers(1, 3), data=st.data())
def test_split_and_split_v(shape, axis, data):
    n = data.draw(st.integers(2, 3))
    sizes = [data.draw(st.integers(1, 3)) for _ in range(n)]
    whole = list(shape)
    whole[axis] = sum(sizes)
    if data.draw(st.booleans()):
        model = tb.split_v(in_shape=tuple(whole), axis=axis, sizes=tuple(sizes))
    else:
        whole[axis] = sizes[0] * n
        sizes = [sizes[0]] * n
        model = tb.split(in_shape=tuple(whole), axis=axis, num=n)
    cuts = np.cumsum(sizes)[:-1]
    _check(model, lambda a: np.split(a, cuts, axis=axis), n_outputs=n)


@settings(max_examples=4, deadline=None)
@given(shapes=st.lists(nhwc, min_size=2, max_size=3), axis=st.integers(1, 3))
def test_concatenation(shapes, axis):
    shapes = [tuple(s[a] if a == axis else shapes[0][a] for a in range(4)) for s in shapes]
    model = concat(shapes, axis)
    for reader, graph in _graphs(model):
        assert {p.kind for p in graph.parts} <= COSTED
        (part,) = graph.parts
        order = [t.name for t in graph.inputs]    # the model's input order
        for i, t in enumerate(part.inputs):       # the Part's own order (first read)
            k = order.index(t.name)
            for box in boxes(part.output.shape, np.random.RandomState(k), 10):
                # input k tagged, the others -1 (read_region's convention)
                want = read_region(lambda *a: np.concatenate(a, axis=axis), shapes, k, box)
                got = propagated_region(part.propagators[i], box, t.shape)
                assert got == want, (reader, k, box, got, want)


@settings(max_examples=4, deadline=None)
@given(shape=nhwc, data=st.data())
def test_slice_and_strided_slice(shape, data):
    begin = [data.draw(st.integers(0, n - 1)) for n in shape]
    size = [data.draw(st.integers(1, n - b)) for b, n in zip(begin, shape)]
    box = tuple(slice(b, b + s) for b, s in zip(begin, size))
    if data.draw(st.booleans()):
        _check(slice_model(shape, begin, size), lambda a: a[box])
        return
    shrink = sum(1 << a for a in range(1, 4) if size[a] == 1 and data.draw(st.booleans()))
    end = [b + s for b, s in zip(begin, size)]
    keep = [a for a in range(4) if not shrink >> a & 1]
    _check(strided_slice_model(shape, begin, end, shrink=shrink),
           lambda a: a[box].reshape([a[box].shape[i] for i in keep]))


@settings(max_examples=4, deadline=None)
@given(shape=nhwc, strides=st.tuples(st.integers(1, 3), st.integers(1, 3)), data=st.data())
def test_strided_slice_with_strides_over_height_and_width(shape, strides, data):
    steps = (1, *strides, 1)
    begin = [data.draw(st.integers(0, n - 1)) for n in shape]
    end = [data.draw(st.integers(b + 1, n)) for b, n in zip(begin, shape)]
    box = tuple(slice(b, e, k) for b, e, k in zip(begin, end, steps))
    _check(strided_slice_model(shape, begin, end, strides=list(steps)), lambda a: a[box])


@pytest.mark.parametrize("model,reference", [
    (squeeze_model((1, 1, 6, 5), 1), lambda a: a.reshape(1, 6, 5)),
    (squeeze_model((1, 4, 1, 3), 2), lambda a: a.reshape(1, 4, 3)),
    (expand_dims_model((1, 6, 5), 1), lambda a: a.reshape(1, 1, 6, 5)),
    (expand_dims_model((1, 6, 5), 3), lambda a: a.reshape(1, 6, 5, 1)),
])
def test_squeeze_and_expand_dims(model, reference):
    _check(model, reference)
