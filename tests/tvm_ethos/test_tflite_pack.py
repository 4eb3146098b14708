"""TFLite's PACK and UNPACK through the importer: PACK as its inputs' codes reshaped and
concatenated (into 5-D: read as rows, concatenated in 4-D and read with the output's shape),
UNPACK as one slice per output (of the axis merged with the next, or after a TRANSPOSE
bringing the last axis first, when a dimension above 1 is before it; the last axis of a 4-D
batch or of a reshape one channel deep), both on the Ethos-U as copies (CONCATENATION's and
SPLIT's), the compiled file's outputs equal to TFLite Micro's on
the source."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from graph_builder import Graph
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from operator_models import _opts
from test_solitary_movement import compiled_on_the_npu

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches, inputs_for, tflm_oracle

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def _t(shape, q):
    return tb.T(list(shape), "int8", scale=q[0], zp=q[1])


def pack_model(shape, n: int, axis: int, q=(0.05, 3), out_q=None) -> bytes:
    """``n`` int8 inputs of ``shape`` packed along ``axis`` of the output."""
    out = list(shape)
    out.insert(axis % (len(shape) + 1), n)
    tensors = [_t(shape, q) for _ in range(n)] + [_t(out, out_q or q)]
    otype, ofn = _opts("PackOptions", ValuesCount=n, Axis=axis)
    return tb.serialize(tensors, [(tb.BO.PACK, otype, ofn, list(range(n)), [n])],
                        list(range(n)), [n])


def unpack_model(shape, axis: int, q=(0.05, 3)) -> bytes:
    """One int8 input of ``shape`` unpacked along ``axis``."""
    n = shape[axis]
    out = [d for i, d in enumerate(shape) if i != axis % len(shape)]
    tensors = [_t(shape, q)] + [_t(out, q) for _ in range(n)]
    otype, ofn = _opts("UnpackOptions", Num=n, Axis=axis)
    return tb.serialize(tensors, [(tb.BO.UNPACK, otype, ofn, [0], list(range(1, n + 1)))],
                        [0], list(range(1, n + 1)))


def _check(data: bytes, target: str = "ethos-u", seed: int = 0):
    """The compiled model's outputs on two random inputs, equal to TFLite Micro's."""
    return compiled_matches(data, target, seed)


_q = st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127))


@settings(max_examples=8, deadline=None)
@given(dims=st.lists(st.integers(1, 6), min_size=1, max_size=3), n=st.integers(2, 4),
       axis=st.integers(0, 3), q=_q)
def test_pack_into_a_batch_1_feature_map_is_on_the_npu_exactly(dims, n, axis, q):
    shape = [1] + dims[1:] if len(dims) == 3 else dims   # a 4-D output keeps batch 1
    axis = axis % (len(shape) + 1)
    assume(not (len(shape) == 3 and axis == 0))
    cm = _check(pack_model(shape, n, axis, q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@settings(max_examples=8, deadline=None)
@given(dims=st.lists(st.integers(1, 6), min_size=1, max_size=3), n=st.integers(2, 4),
       lead=st.integers(0, 2), q=_q)
def test_unpack_after_unit_dimensions_is_on_the_npu_exactly(dims, n, lead, q):
    shape = ([1] * lead + [n] + dims)[:4]
    assume(not (len(shape) == 4 and shape[0] > 1))   # below: a batch of several
    cm = _check(unpack_model(shape, lead, q))
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, cm.placement


def test_unpack_of_a_4d_batch_is_one_ethos_u_operator_exactly():
    """A batch of several unpacked along the batch: the SPLIT slices of one input are merged
    into one multi-output NPU subgraph (``partition_siblings``), which the tflite-micro export
    writes as one ethos-u operator with an output per slice."""
    cm = _check(unpack_model((2, 2, 1, 3), 0))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@settings(max_examples=8, deadline=None)
@given(dims=st.lists(st.integers(1, 5), min_size=3, max_size=3), n=st.integers(2, 4),
       axis=st.integers(0, 4), q=_q)
def test_pack_into_five_dimensions_is_on_the_npu_exactly(dims, n, axis, q):
    """As Vela 5.2 takes it: the inputs read as rows (the axes before and from the pack axis
    merged), one 4-D CONCATENATION, the result read with the 5-D shape (aliases)."""
    cm = _check(pack_model([1] + dims, n, axis, q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_a_5d_pack_of_two_convolutions_is_planned_as_it_touches_memory():
    """Two CONV_2Ds of one input packed into 5-D at the least memory: all on the NPU, the
    stream realizing the plan and touching the planned peak, equal to TFLite Micro's."""
    g = Graph(np.random.RandomState(4))
    x = g.input((1, 12, 10, 4))
    a, b = g.conv2d(x, 6), g.conv2d(x, 6)
    g.tensors[b] = _like_tensor(g.tensors[a])
    y = g._add(_like_tensor(g.tensors[a], [1, 12, 2, 10, 6]))
    otype, ofn = _opts("PackOptions", ValuesCount=2, Axis=2)
    g.ops.append((tb.BO.PACK, otype, ofn, [a, b], [y]))
    data = g.build([y])
    cm, _ = compiled_on_the_npu(data, budget="smallest")
    rs = np.random.RandomState(5)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)


def _like_tensor(t, shape=None):
    """An int8 tensor quantized as ``t`` (PACK copies codes), of ``shape`` (default t's)."""
    return tb.T(list(shape or t.shape), "int8", scale=t.scale[0], zp=int(t.zp[0]))


@st.composite
def _behind(draw):
    """A shape of 2 to 4 dimensions and an axis of at least 2 with a dimension above 1 before
    it (a 4-D input unpacked along its last axis keeps a batch of 1)."""
    shape = draw(st.lists(st.integers(1, 5), min_size=2, max_size=4))
    axis = draw(st.integers(1, len(shape) - 1))
    shape[axis] = draw(st.integers(2, 4))
    lead = int(len(shape) == 4 and axis == 3)   # the batch of 1
    if lead:
        shape[0] = 1
    shape[draw(st.integers(lead, axis - 1))] = draw(st.integers(2, 4))
    return shape, axis


@settings(max_examples=10, deadline=None)
@given(case=_behind(), q=_q)
def test_unpack_behind_a_dimension_above_1_is_on_the_npu_exactly(case, q):
    """The axis merged with the next (each output one slice of it), or the last axis brought
    first by a TRANSPOSE, then UNPACK's slices."""
    shape, axis = case
    cm = _check(unpack_model(shape, axis, q))
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, cm.placement


def reshape_unpack_model(in_shape, shape, axis: int, q=(0.05, 3)) -> bytes:
    """RESHAPE of ``in_shape`` to ``shape``, then UNPACK along ``axis``."""
    n = shape[axis]
    out = [d for i, d in enumerate(shape) if i != axis]
    new = tb.T([len(shape)], "int32", data=np.asarray(shape, np.int32))
    tensors = [_t(in_shape, q), new, _t(shape, q)] + [_t(out, q) for _ in range(n)]
    otype, ofn = _opts("UnpackOptions", Num=n, Axis=axis)
    return tb.serialize(tensors, [(tb.BO.RESHAPE, 0, None, [0, 1], [2]),
                                  (tb.BO.UNPACK, otype, ofn, [2], list(range(3, 3 + n)))],
                        [0], list(range(3, 3 + n)))


def test_unpack_of_a_reshaped_tensor_is_on_the_npu_exactly():
    cm = _check(reshape_unpack_model((1, 6, 4), (2, 3, 4), 1))
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, cm.placement


@st.composite
def _last_of_batch_or_reshape(draw):
    """An UNPACK of the last axis no TRANSPOSE can bring first: of a 4-D input of a batch
    above 1, or of a RESHAPE's output (a permutation of a reshape reads as DEPTH_TO_SPACE)."""
    shape = draw(st.lists(st.integers(1, 4), min_size=2, max_size=4))
    shape[-1] = draw(st.integers(2, 4))
    if draw(st.booleans()):
        shape = [draw(st.integers(2, 3))] + shape[-3:]
        while len(shape) < 4:
            shape.insert(1, draw(st.integers(1, 3)))
        return unpack_model(shape, 3)
    shape[draw(st.integers(0, len(shape) - 2))] = draw(st.integers(2, 4))
    return reshape_unpack_model((1, int(np.prod(shape))), shape, len(shape) - 1)


@settings(max_examples=8, deadline=None)
@given(data=_last_of_batch_or_reshape(), q=_q)
def test_unpack_of_the_last_axis_of_a_batch_or_a_reshape_is_on_the_npu_exactly(data, q):
    """As Vela 5.2 takes them: one slice one channel deep per output (the axes before the
    last two folded into the rows by a reshape), each read with the output's shape."""
    cm = _check(data)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, cm.placement


def test_unpack_of_a_reshaped_convolution_s_channels_is_planned_as_it_touches_memory():
    """CONV_2D, a RESHAPE of its output to a batch of 2, an UNPACK of its channels, at the
    least memory: all on the NPU, the stream realizing the plan and touching the planned
    peak, every output equal to TFLite Micro's."""
    g = Graph(np.random.RandomState(6))
    x = g.input((1, 4, 6, 3))
    y = g.conv2d(x, 5)
    t = g.tensors[y]
    z = g._add(tb.T([2, 2, 6, 5], "int8", scale=t.scale[0], zp=int(t.zp[0])))
    new = g._add(tb.T([4], "int32", data=np.asarray([2, 2, 6, 5], np.int32)))
    g.ops.append((tb.BO.RESHAPE, 0, None, [y, new], [z]))
    outs = [g._add(tb.T([2, 2, 6], "int8", scale=t.scale[0], zp=int(t.zp[0])))
            for _ in range(5)]
    otype, ofn = _opts("UnpackOptions", Num=5, Axis=3)
    g.ops.append((tb.BO.UNPACK, otype, ofn, [z], outs))
    data = g.build(outs)
    cm, _ = compiled_on_the_npu(data, budget="smallest")
    rs = np.random.RandomState(7)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        got, want = cm.run(*xs), tflm_oracle(data, xs)
        assert len(got) == len(want) == 5
        for a, b in zip(got, want):
            assert np.array_equal(a.reshape(b.shape), b)


@pytest.mark.parametrize("data", [unpack_model((2, 3, 4, 5), 3),
                                  reshape_unpack_model((1, 72), (24, 3), 1),
                                  pack_model((1, 3, 2, 5), 2, 2)],
                         ids=["unpack_last_of_batch", "unpack_last_of_reshape_2d", "pack_5d"])
def test_the_ethos_u_llvm_target_runs_the_new_forms_on_the_npu_exactly(data):
    """The emulator's schedule of each Plan agrees with the planner (a single-stripe Plan
    whose sink's first axis is above 1, as the channel slices' reshapes to 3-D and 1-D
    outputs are, computes its producers whole, as planned)."""
    cm = _check(data, "ethos-u,llvm", seed=2)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.partition_summary


def test_a_pack_that_requantizes_is_refused_by_the_importer_in_one_line():
    data = pack_model((1, 4, 8), 2, 1, q=(0.05, 3), out_q=(0.1, 3))
    with pytest.raises(tvm_ethos.errors.TvmEthosError, match="PACK with input quantization"):
        tvm_ethos.load_model(data)


@pytest.mark.parametrize("data", [pack_model((1, 3, 5), 3, 1), pack_model((1, 3, 2, 5), 2, 3),
                                  unpack_model((1, 3, 2, 5), 1), unpack_model((2, 3, 2, 5), 2),
                                  unpack_model((1, 3, 2, 5), 3), unpack_model((2, 3, 2, 5), 3)],
                         ids=["pack", "pack_5d", "unpack", "unpack_behind", "unpack_last",
                              "unpack_last_of_batch"])
def test_the_llvm_host_runs_them_exactly(data):
    _check(data, "llvm", seed=1)
