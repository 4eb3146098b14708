"""TFLite's EXPAND_DIMS to 5-D (and any RESHAPE that only adds or drops dimensions of 1): the
same bytes read with another shape, which Vela 5.2 takes at any rank; on the Ethos-U as an
alias, alone or as the output of an ethos-u operator, the compiled file's outputs equal to
TFLite Micro's on the source. A RESHAPE to, from or within 5-D or 6-D that regroups elements
is an alias too, while TVM's DEPTH_TO_SPACE, which reshapes through 6-D, stays where it was;
so is one to, from or within 7-D or 8-D (TFLite's most axes). A model's own RESHAPE ->
TRANSPOSE -> RESHAPE through 6-D, which reads in Relax as DEPTH_TO_SPACE, is told from it by
the source's graph and goes to the NPU."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from operator_models import _opts
from test_partition_rejected_matches import chain_model
from test_solitary_movement import compiled_on_the_npu
from test_tflite_pack import pack_model
from tvm import relax

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches, inputs_for, oracle, tflm_oracle
from tvm_ethos.partition import CHAIN_RESHAPE, partition
from tvm_ethos.partition_chains import chain_verdict
from tvm_ethos.patterns import six_d_chain_reshapes
from tvm_ethos.tflite_source import SOURCE_ATTR

pytest.importorskip("tflite_micro")


def expand_dims_model(in_shape, axis: int, q=(0.05, 3)) -> bytes:
    """One int8 EXPAND_DIMS of ``in_shape`` at ``axis`` (of the output)."""
    out = list(in_shape[:axis]) + [1] + list(in_shape[axis:])
    x, y = (tb.T(list(s), "int8", scale=q[0], zp=q[1]) for s in (in_shape, out))
    ax = tb.T([1], "int32", data=np.array([axis], np.int32))
    return tb.serialize([x, ax, y], [(tb.BO.EXPAND_DIMS, 0, None, [0, 1], [2])], [0], [2])


def conv_expand_dims_model(rs, in_shape=(1, 5, 4, 3), axis: int = 0) -> bytes:
    """CONV_2D, then EXPAND_DIMS of its 4-D output to 5-D: the model's output."""
    x = tb.T(list(in_shape), "int8", scale=0.05, zp=3)
    w, bias, y = tb._conv_tensors(rs, x, 6)
    out = list(y.shape[:axis]) + [1] + list(y.shape[axis:])
    z = tb.T(out, "int8", scale=y.scale, zp=y.zp)
    ax = tb.T([1], "int32", data=np.array([axis], np.int32))
    return tb.serialize([x, w, bias, y, ax, z],
                        [tb._conv_op([0, 1, 2], [3]),
                         (tb.BO.EXPAND_DIMS, 0, None, [3, 4], [5])], [0], [5])


def reshape_model(in_shape, out_shape, q=(0.05, 3)) -> bytes:
    """One int8 RESHAPE of ``in_shape`` to ``out_shape`` (its new shape a constant)."""
    x, y = (tb.T(list(s), "int8", scale=q[0], zp=q[1]) for s in (in_shape, out_shape))
    shape = tb.T([len(out_shape)], "int32", data=np.asarray(out_shape, np.int32))
    return tb.serialize([x, shape, y], [(tb.BO.RESHAPE, 0, None, [0, 1], [2])], [0], [2])


@settings(max_examples=8, deadline=None)
@given(dims=st.lists(st.integers(1, 6), min_size=3, max_size=3), axis=st.integers(0, 4),
       q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_expand_dims_to_5d_is_on_the_npu_exactly(dims, axis, q):
    cm = compiled_matches(expand_dims_model([1] + dims, axis, q), "ethos-u")
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@pytest.mark.parametrize("axis", [0, 2, 4])
def test_a_convolutions_5d_expanded_output_is_one_ethos_u_operator_exactly(axis):
    data = conv_expand_dims_model(np.random.RandomState(axis), axis=axis)
    cm = compiled_matches(data, "ethos-u", seed=axis)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, \
        [(p.placed_on, p.why) for p in cm.placement]
    want = [1, 5, 4, 6]
    want.insert(axis, 1)
    assert [int(d) for d in cm.outputs[0].shape] == want


@pytest.mark.parametrize("data", [expand_dims_model((1, 3, 4, 5), 3),
                                  reshape_model((1, 3, 4, 6), (1, 3, 2, 2, 6))],
                         ids=["expand_dims", "regroup"])
def test_the_ethos_u_llvm_target_runs_it_on_the_npu_exactly(data):
    cm = compiled_matches(data, "ethos-u,llvm", seed=1)
    assert cm.partition_summary == {"ethos-u": 1}


@st.composite
def _regrouped(draw):
    """A 5-D shape and another of the same elements that is no mere adding or dropping of
    dimensions of 1: its reverse (5-D), or two of its neighbouring axes merged (4-D, of any
    batch)."""
    out = draw(st.lists(st.integers(1, 4), min_size=5, max_size=5))
    if draw(st.booleans()):
        k = draw(st.integers(0, 3))
        src = out[:k] + [out[k] * out[k + 1]] + out[k + 2:]
    else:
        src = out[::-1]
    assume([d for d in src if d != 1] != [d for d in out if d != 1])
    return src, out


@settings(max_examples=8, deadline=None)
@given(case=_regrouped(), q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_a_5d_reshape_that_regroups_elements_is_on_the_npu_exactly(case, q):
    """Vela 5.2's RESHAPE has no rank limit: the same bytes read with another shape."""
    src, out = case
    (placed,) = compiled_matches(reshape_model(src, out, q), "ethos-u").placement
    assert placed.placed_on == "ethos-u", placed.why


def test_a_convolutions_5d_regrouped_output_is_planned_as_it_touches_memory():
    """CONV_2D, then a RESHAPE of its output to 5-D splitting the width, at the least memory:
    one ethos-u operator, the stream realizing the plan and touching the planned peak."""
    x = tb.T([1, 6, 4, 3], "int8", scale=0.05, zp=3)
    w, bias, y = tb._conv_tensors(np.random.RandomState(7), x, 6)
    z = tb.T([1, 6, 2, 2, 6], "int8", scale=y.scale, zp=y.zp)
    shape = tb.T([5], "int32", data=np.array([1, 6, 2, 2, 6], np.int32))
    data = tb.serialize([x, w, bias, y, shape, z],
                        [tb._conv_op([0, 1, 2], [3]), (tb.BO.RESHAPE, 0, None, [3, 4], [5])],
                        [0], [5])
    cm, _ = compiled_on_the_npu(data, budget="smallest")
    rs = np.random.RandomState(8)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)


@st.composite
def _regrouped_6d(draw):
    """A 6-D shape and another of the same elements that is no mere adding or dropping of
    dimensions of 1, in either order: its reverse (6-D), two of its neighbouring axes merged
    (5-D), or its middle four merged in pairs (4-D, as DEPTH_TO_SPACE's chain reshapes)."""
    six = draw(st.lists(st.integers(1, 3), min_size=6, max_size=6))
    form = draw(st.sampled_from(["reverse", "merge", "pairs"]))
    if form == "reverse":
        other = six[::-1]
    elif form == "merge":
        k = draw(st.integers(0, 4))
        other = six[:k] + [six[k] * six[k + 1]] + six[k + 2:]
    else:
        other = [six[0], six[1] * six[2], six[3] * six[4], six[5]]
    assume([d for d in other if d != 1] != [d for d in six if d != 1])
    return (six, other) if draw(st.booleans()) else (other, six)


@settings(max_examples=10, deadline=None)
@given(case=_regrouped_6d(), q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_a_6d_reshape_that_regroups_elements_is_on_the_npu_exactly(case, q):
    """Vela 5.2 takes a 6-D RESHAPE (CPU operators = 0); a model's own is no importer's
    DEPTH_TO_SPACE chain, so the Ethos-U takes it as the alias it is."""
    src, out = case
    (placed,) = compiled_matches(reshape_model(src, out, q), "ethos-u").placement
    assert placed.placed_on == "ethos-u", placed.why


def test_a_convolutions_6d_regrouped_output_is_planned_as_it_touches_memory():
    """CONV_2D, then a RESHAPE of its output to 6-D splitting the height and the width, at
    the least memory: one ethos-u operator, the stream realizing the plan and touching the
    planned peak, its output equal to TFLite Micro's."""
    x = tb.T([1, 6, 4, 3], "int8", scale=0.05, zp=3)
    w, bias, y = tb._conv_tensors(np.random.RandomState(9), x, 6)
    six = [1, 3, 2, 2, 2, 6]
    z = tb.T(six, "int8", scale=y.scale, zp=y.zp)
    shape = tb.T([6], "int32", data=np.array(six, np.int32))
    data = tb.serialize([x, w, bias, y, shape, z],
                        [tb._conv_op([0, 1, 2], [3]), (tb.BO.RESHAPE, 0, None, [3, 4], [5])],
                        [0], [5])
    cm, _ = compiled_on_the_npu(data, budget="smallest")
    rs = np.random.RandomState(10)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)


def space_to_depth_model(in_shape=(1, 4, 6, 3), block=2) -> bytes:
    """One int8 SPACE_TO_DEPTH of ``in_shape`` by ``block``."""
    n, h, w, c = in_shape
    x = tb.T(list(in_shape), "int8", scale=0.05, zp=3)
    y = tb.T([n, h // block, w // block, c * block * block], "int8", scale=0.05, zp=3)

    def opts(b):
        tflite.SpaceToDepthOptionsStart(b)
        tflite.SpaceToDepthOptionsAddBlockSize(b, block)
        return tflite.SpaceToDepthOptionsEnd(b)

    return tb.build([x, y], [0], [1], tb.BO.SPACE_TO_DEPTH, tb.BOPT.SpaceToDepthOptions, opts)


def conv_depth_to_space_model(rs) -> bytes:
    """CONV_2D, then DEPTH_TO_SPACE (block 2) of its output: the model's output."""
    x = tb.T([1, 3, 4, 3], "int8", scale=0.05, zp=3)
    w, bias, y = tb._conv_tensors(rs, x, 8)
    z = tb.T([1, 6, 8, 2], "int8", scale=y.scale, zp=y.zp)

    def opts(b):
        tflite.DepthToSpaceOptionsStart(b)
        tflite.DepthToSpaceOptionsAddBlockSize(b, 2)
        return tflite.DepthToSpaceOptionsEnd(b)

    d2s = (tb.BO.DEPTH_TO_SPACE, tb.BOPT.DepthToSpaceOptions, opts, [3], [4])
    return tb.serialize([x, w, bias, y, z], [tb._conv_op([0, 1, 2], [3]), d2s], [0], [4])


def test_depth_to_space_stays_on_the_host_exactly_beside_6d_reshapes_on_the_npu():
    """TVM's DEPTH_TO_SPACE reshapes through 6-D: its chain's reshapes are left to the chain
    (``patterns.six_d_chain_reshapes``), so DEPTH_TO_SPACE stays whole on the host, after a
    convolution on the NPU, on both hosts, exactly."""
    data = conv_depth_to_space_model(np.random.RandomState(11))
    cm = compiled_matches(data, "ethos-u", seed=3)
    assert [(p.kind, p.placed_on) for p in cm.placement] == [
        ("CONV_2D", "ethos-u"), ("DEPTH_TO_SPACE", "tflite-micro")], cm.placement
    cm = compiled_matches(data, "ethos-u,llvm", seed=4)
    assert cm.partition_summary == {"ethos-u": 1, "llvm": 1}, cm.partition_summary
    report = tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm")
    assert [(op.tflite_name, op.placed_on) for op in report.operators] == [
        ("CONV_2D", "ethos-u"), ("DEPTH_TO_SPACE", "llvm")], str(report)


def test_only_a_chain_through_6d_is_held_for_its_chain():
    """``six_d_chain_reshapes`` names both reshapes of TVM's DEPTH_TO_SPACE chain, and no
    lone 6-D reshape nor the reshapes of a chain through 5-D (which the Ethos-U takes)."""
    def held(data):
        return six_d_chain_reshapes(tvm_ethos.load_model(data)["main"])

    assert len(held(tb.depth_to_space())) == 2
    assert held(reshape_model((1, 4, 4, 8), (1, 2, 2, 2, 2, 8))) == frozenset()
    assert held(chain_model((1, 4, 4, 8), (1, 4, 2, 2, 8), (0, 2, 1, 3, 4),
                            (1, 4, 4, 8))) == frozenset()


@st.composite
def _own_chains(draw):
    """A model's own RESHAPE -> TRANSPOSE -> RESHAPE through 6-D: a 4-D shape split into six
    axes, any permutation of them, and the result read as 4-D again (its middle four merged in
    pairs), DEPTH_TO_SPACE's form too."""
    six = draw(st.lists(st.integers(1, 3), min_size=6, max_size=6))
    perm = (draw(st.permutations(range(6))) if draw(st.booleans())
            else [0, 1, 3, 2, 4, 5])

    def four(s):
        return (s[0], s[1] * s[2], s[3] * s[4], s[5])

    return four(six), tuple(six), tuple(perm), four([six[k] for k in perm])


@settings(max_examples=8, deadline=None)
@given(case=_own_chains())
def test_a_models_own_6d_chain_is_on_the_npu_planned_as_it_touches_memory_and_exact(case):
    """Vela 5.2 takes a model's own RESHAPE -> TRANSPOSE -> RESHAPE through 6-D (CPU operators
    = 0). The source's graph says the chain is its own operators, no DEPTH_TO_SPACE
    (``partition_chains``), so both paths take all three on the NPU, at the least memory the
    stream realizing the plan and touching the planned peak, exact against LiteRT's reference
    kernels (TFLite Micro's TRANSPOSE takes at most 5-D)."""
    data = chain_model(*case)
    compiled_on_the_npu(data, budget="smallest")
    compiled_matches(data, "ethos-u", reference=oracle, seed=5)
    cm = compiled_matches(data, "ethos-u,llvm", reference=oracle, seed=6)
    assert cm.partition_summary == {"ethos-u": 3}, cm.partition_report


def d2s_beside_chain_model(mid, perm) -> bytes:
    """Two outputs of one (1, 2, 2, 8) input: its DEPTH_TO_SPACE (block 2), and a RESHAPE to
    ``mid`` -> TRANSPOSE by ``perm`` -> RESHAPE to (1, 4, 4, 2)."""
    q = (0.05, 3)
    tensors = [tb.T([1, 2, 2, 8], "int8", scale=q[0], zp=q[1]),
               tb.T([1, 4, 4, 2], "int8", scale=q[0], zp=q[1])]

    def opts(b):
        tflite.DepthToSpaceOptionsStart(b)
        tflite.DepthToSpaceOptionsAddBlockSize(b, 2)
        return tflite.DepthToSpaceOptionsEnd(b)

    ops = [(tb.BO.DEPTH_TO_SPACE, tb.BOPT.DepthToSpaceOptions, opts, [0], [1])]
    src = 0
    for kind, new, shape in ((tb.BO.RESHAPE, mid, mid),
                             (tb.BO.TRANSPOSE, perm, [mid[k] for k in perm]),
                             (tb.BO.RESHAPE, (1, 4, 4, 2), (1, 4, 4, 2))):
        tensors += [tb.T([len(new)], "int32", data=np.asarray(new, np.int32)),
                    tb.T(list(shape), "int8", scale=q[0], zp=q[1])]
        ops.append((kind, 0, None, [src, len(tensors) - 2], [len(tensors) - 1]))
        src = len(tensors) - 1
    return tb.serialize(tensors, ops, [0], [1, src])


@pytest.mark.parametrize("mid, perm, own", [
    ((1, 2, 2, 2, 2, 2), (0, 2, 1, 3, 4, 5), True),
    ((1, 2, 2, 2, 2, 2), (0, 1, 3, 2, 4, 5), False)],
    ids=["another_form", "the_depth_to_spaces_form"])
def test_a_models_own_chain_beside_a_depth_to_space_is_told_from_it_by_its_form(mid, perm, own):
    """The source names a DEPTH_TO_SPACE and a chain of the model's own, of one input. In
    Relax, where their chains differ in form (here by the permutation alone, so both first
    reshape the input alike: two equal bindings, one fused and one not, each named after
    itself, ``partition_op_ids``), the model's own goes to the NPU and DEPTH_TO_SPACE stays
    on the host; where they share a form, Relax has two chains of it and
    the source one of the model's own, which of the two is not known, so both are read as
    DEPTH_TO_SPACE on the host, as before. The .tflite path cuts the chain apart from the
    DEPTH_TO_SPACE that the Ethos-U refuses (``tflite_micro.compile``), so its cut's source
    tells, and the chain goes to the NPU either way. Exact on both paths against LiteRT's
    reference kernels."""
    data = d2s_beside_chain_model(mid, perm)
    cm = compiled_matches(data, "ethos-u", reference=oracle, seed=7)
    assert [(p.kind, p.placed_on) for p in cm.placement] == [
        ("DEPTH_TO_SPACE", "tflite-micro"), ("RESHAPE", "ethos-u"), ("TRANSPOSE", "ethos-u"),
        ("RESHAPE", "ethos-u")], cm.placement
    cm = compiled_matches(data, "ethos-u,llvm", reference=oracle, seed=8)
    placed = {(op.tflite_name, op.placed_on) for op in cm.partition_report.operators}
    assert placed == ({("DEPTH_TO_SPACE", "llvm"), ("RESHAPE", "ethos-u"),
                       ("TRANSPOSE", "ethos-u")} if own else
                      {("DEPTH_TO_SPACE", "llvm")}), str(cm.partition_report)


def test_a_chain_without_its_source_stays_whole_as_before():
    """A module whose .tflite is not at hand (read back in another process, or from ONNX)
    cannot tell a model's chain through 6-D from DEPTH_TO_SPACE: its reshapes are refused for
    the chain and its transpose is no TRANSPOSE of its own, so the whole chain stays on the
    host, exact against LiteRT's reference kernels."""
    data = chain_model((1, 4, 4, 8), (1, 2, 2, 2, 2, 8), (0, 2, 1, 3, 4, 5), (1, 4, 4, 8))
    mod = tvm_ethos.load_model(data).without_attr(SOURCE_ATTR)
    verdict = chain_verdict(relax.transform.ConvertToDataflow()(mod))
    assert len(verdict.held) == 2 and not verdict.own, verdict
    _, report = partition(mod, "ethos-u,llvm")
    assert [op.placed_on for op in report.operators] == ["llvm"] * 3, str(report)
    for op in report.operators:
        if op.tflite_name == "RESHAPE":
            assert op.rejections["ethos-u"] == [CHAIN_RESHAPE], op
    cm = tvm_ethos.compile(mod, "ethos-u,llvm", cache_dir=False)
    xs = inputs_for(cm.inputs, np.random.RandomState(9))
    (got,), (want,) = cm.run(*xs), oracle(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)


def test_space_to_depth_stays_a_tflite_operator_as_before():
    """TVM's importer does not convert a quantized SPACE_TO_DEPTH (another chain through 6-D):
    it stays TFLite's, named so."""
    cm = tvm_ethos.compile(space_to_depth_model(), "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro" and "importer" in placed.why, placed


def squeeze_model(in_shape, axes, q=(0.05, 3)) -> bytes:
    """One int8 SQUEEZE of ``axes`` (each of length 1) of ``in_shape``."""
    out = [d for k, d in enumerate(in_shape) if k not in axes]
    x, y = (tb.T(list(s), "int8", scale=q[0], zp=q[1]) for s in (in_shape, out))
    otype, ofn = _opts("SqueezeOptions", SqueezeDims=list(axes))
    return tb.serialize([x, y], [(tb.BO.SQUEEZE, otype, ofn, [0], [1])], [0], [1])


@pytest.mark.parametrize("data", [squeeze_model((1, 2, 1, 3, 4, 5), (2,)),
                                  expand_dims_model((1, 2, 3, 4, 5), 2)],
                         ids=["squeeze_6d_to_5d", "expand_dims_5d_to_6d"])
def test_a_6d_squeeze_or_expand_dims_is_on_the_npu_exactly(data):
    """Vela 5.2 takes both (CPU operators = 0); the SQUEEZE's 6-D input stayed a TFLite
    operator while the Ethos-U took at most 5-D."""
    (placed,) = compiled_matches(data, "ethos-u").placement
    assert placed.placed_on == "ethos-u", placed.why


@st.composite
def _seven_or_eight_d(draw):
    """A RESHAPE, EXPAND_DIMS or SQUEEZE of which one side is 7-D or 8-D: a 7-D or 8-D shape
    reversed, two of its neighbouring axes merged, or an axis of 1 added or dropped, in
    either order where TFLite has that operator (SQUEEZE drops, EXPAND_DIMS adds)."""
    shape = draw(st.lists(st.integers(1, 3), min_size=7, max_size=8))
    form = draw(st.sampled_from(["reverse", "merge", "expand_dims", "squeeze"]))
    if form == "reverse":
        return reshape_model(shape, shape[::-1])
    if form == "merge":
        k = draw(st.integers(0, len(shape) - 2))
        other = shape[:k] + [shape[k] * shape[k + 1]] + shape[k + 2:]
        return reshape_model(*((shape, other) if draw(st.booleans()) else (other, shape)))
    if form == "expand_dims":   # into 8-D from 7-D, into 7-D from 6-D
        return expand_dims_model(shape[:-1], draw(st.integers(0, len(shape) - 1)))
    axis = draw(st.integers(0, len(shape) - 1))
    return squeeze_model(shape[:axis] + [1] + shape[axis + 1:], (axis,))


@settings(max_examples=10, deadline=None)
@given(data=_seven_or_eight_d())
def test_a_7d_or_8d_reshape_is_on_the_npu_exactly(data):
    """Vela 5.2 takes RESHAPE 4->7, 7->4, 4->8, 8->4 and 8->7, EXPAND_DIMS 6->7 and 7->8,
    SQUEEZE 7->6 and 8->7 (CPU operators = 0); the stream's tensors hold up to eight axes
    (``npu_ops.shape3``), TFLite's limit, and a reshape is an alias of its bytes: on the
    Ethos-U, its output equal to TFLite Micro's."""
    (placed,) = compiled_matches(data, "ethos-u").placement
    assert placed.placed_on == "ethos-u", placed.why


def test_the_ethos_u_llvm_target_runs_an_8d_reshape_on_the_npu_exactly():
    """TVM's importer takes an 8-D RESHAPE, so the Relax path puts it on the NPU too."""
    cm = compiled_matches(reshape_model((1, 4, 4, 8), (1, 2, 2, 2, 2, 2, 2, 2)),
                          "ethos-u,llvm", seed=2)
    assert cm.partition_summary == {"ethos-u": 1}


@pytest.mark.parametrize("rank", [7, 8])
def test_a_convolutions_7d_or_8d_regrouped_output_is_planned_as_it_touches_memory(rank):
    """CONV_2D, then a RESHAPE of its output splitting its height, width and depth into 7 or
    8 axes, at the least memory: one ethos-u operator, the stream realizing the plan and
    touching the planned peak, its output equal to TFLite Micro's."""
    x = tb.T([1, 4, 4, 3], "int8", scale=0.05, zp=3)
    w, bias, y = tb._conv_tensors(np.random.RandomState(rank), x, 8)
    many = [1, 2, 2, 2, 2, 2, 4] if rank == 7 else [1, 2, 2, 2, 2, 2, 2, 2]
    z = tb.T(many, "int8", scale=y.scale, zp=y.zp)
    shape = tb.T([rank], "int32", data=np.array(many, np.int32))
    data = tb.serialize([x, w, bias, y, shape, z],
                        [tb._conv_op([0, 1, 2], [3]), (tb.BO.RESHAPE, 0, None, [3, 4], [5])],
                        [0], [5])
    cm, _ = compiled_on_the_npu(data, budget="smallest")
    rs = np.random.RandomState(rank + 10)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)
    assert [int(d) for d in cm.outputs[0].shape] == many


@settings(max_examples=6, deadline=None)
@given(dims=st.lists(st.integers(1, 4), min_size=4, max_size=4), n=st.integers(2, 3),
       axis=st.integers(0, 5), q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)))
def test_a_pack_into_6d_is_on_the_npu_exactly(dims, n, axis, q):
    """The converter packs into more than four axes as rows, one 4-D CONCATENATION and a
    reshape to the output: into 6-D, a 6-D regroup the Ethos-U now takes, so the whole PACK
    is on the NPU, as Vela 5.2 takes it (CPU operators = 0)."""
    (placed,) = compiled_matches(pack_model([1] + dims, n, axis, q), "ethos-u").placement
    assert placed.placed_on == "ethos-u", placed.why
