"""Part matchers: TE graphs of NPU subgraphs -> PlannerGraph, propagators derived from the TE
index expressions, checked against the planner's hand-written constructors (planner.parts)."""

import dataclasses

import numpy as np
import pytest
import tflite_builder as tb
from conftest import model_path
from tvm import s_tir, tirx

import tvm_ethos
from planner import parts as P
from planner.graph import Tensor
from planner.stripes import StripeConfig
from tvm_ethos.emulator.part_matchers import match_subgraph
from tvm_ethos.partition import partition
from tvm_ethos.pipeline.npu_subgraphs import lower_npu_subgraphs
from tvm_ethos.targets import parse_targets


def lowered_of(model, target="ethos-u,llvm"):
    mod = tvm_ethos.load_model(model)
    pmod, _ = partition(mod, parse_targets(target, {}))
    subs = lower_npu_subgraphs(pmod)
    assert subs, "nothing went to the NPU"
    return list(subs.values())


def windows(prop, out_shape, in_shape):
    """Every window the propagator gives for a set of stripe configs (semantic comparison)."""
    out = []
    h = out_shape[1] if len(out_shape) == 4 else 1
    heights = sorted({1, 2, 3, max(1, h // 2), h})
    for th in heights:
        shape = (out_shape[0], th) + tuple(out_shape[2:]) if len(out_shape) == 4 else out_shape
        sc = StripeConfig.tiled(out_shape, shape, (0, 1, 0, 0)[: len(out_shape)])
        w = sc.propagate(prop, in_shape)
        out.append(tuple(w.axis_ranges(a) for a in range(len(in_shape))))
    return out


def only_part(model):
    (lw,) = lowered_of(model)
    m = match_subgraph(lw)
    assert len(m.parts) == 1, [p.part.name for p in m.parts]
    return m.parts[0]


CONV_CASES = {
    "conv_same": dict(in_shape=(1, 8, 8, 4), cout=6, kernel=(3, 3)),
    "conv_valid_s2": dict(in_shape=(1, 9, 9, 3), stride=(2, 2), padding="VALID"),
    "conv_same_s2": dict(in_shape=(1, 10, 7, 5), stride=(2, 2)),
    "conv_dilated": dict(in_shape=(1, 10, 10, 3), dilation=(2, 2)),
    "conv_5x3": dict(kernel=(5, 3)),
    "depthwise": dict(depthwise=True),
    "depthwise_s2_mult3": dict(in_shape=(1, 8, 8, 1), depthwise=True, multiplier=3, stride=(2, 2)),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
def test_conv_propagators_match_planner_parts(case):
    rs = np.random.RandomState(3)
    mp = only_part(tb.conv2d(rs, **CONV_CASES[case]))
    part = mp.part
    x = part.inputs[0]
    assert mp.affine(0), "a convolution's input access is affine"
    win = mp.window
    if part.kind == "depthwise_conv2d":
        ref = P.depthwise_conv2d("ref", Tensor(x.name, x.shape), kernel=win["kernel"],
                                 strides=win["strides"], dilation=win["dilation"],
                                 padding=win["padding"],
                                 depth_multiplier=part.attr("depth_multiplier"))
    else:
        assert part.kind == "conv2d"
        ref = P.conv2d("ref", Tensor(x.name, x.shape), out_channels=part.output.shape[3],
                       kernel=win["kernel"], strides=win["strides"], dilation=win["dilation"],
                       padding=win["padding"])
    # the geometry the matcher read from TE agrees with the TFLite operator
    q = mp.layer
    assert tuple(win["strides"]) == tuple(q.attrs["strides"])
    assert tuple(win["dilation"]) == tuple(q.attrs["dilation"])
    assert tuple(win["padding"][:2]) == tuple(q.attrs["padding"][:2])
    assert ref.output.shape == part.output.shape
    # same propagator for the activation (windows and the matrix, up to extent-1 axes)
    assert part.propagators[0] == ref.propagators[0]
    # constants in the planner's layout: weights (O, KH, KW, I) or (1, KH, KW, C), bias (O,)
    assert part.inputs[1].shape == ref.inputs[1].shape
    assert part.inputs[2].shape == ref.inputs[2].shape
    for k in (1, 2):
        assert windows(part.propagators[k], part.output.shape, part.inputs[k].shape) == \
            windows(ref.propagators[k], ref.output.shape, ref.inputs[k].shape)


@pytest.mark.parametrize("kind,kw", [
    ("avg", dict()),
    ("avg", dict(in_shape=(1, 7, 7, 4), size=(3, 3), stride=(1, 1), padding="SAME")),
    ("max", dict(in_shape=(1, 7, 7, 4), size=(3, 3), stride=(2, 2), padding="SAME")),
])
def test_pool_propagators_match_planner_parts(kind, kw):
    mp = only_part(tb.pool(np.random.RandomState(5), kind, **kw))
    part = mp.part
    assert part.kind == "pool" and part.attr("pool_type") == kind
    x = part.inputs[0]
    ref = P.pool2d("ref", Tensor(x.name, x.shape), pool_type=kind, pool_size=part.attr("kernel"),
                   strides=part.attr("strides"), padding=part.attr("padding"))
    assert ref.output.shape == part.output.shape
    assert part.propagators[0] == ref.propagators[0]


def test_mean_and_elementwise_match_planner_parts():
    mp = only_part(tb.mean(np.random.RandomState(2)))
    x = mp.part.inputs[0]
    ref = P.mean("ref", Tensor(x.name, x.shape), keepdims=len(mp.part.output.shape) == 4)
    assert mp.part.kind == "mean"
    assert windows(mp.part.propagators[0], mp.part.output.shape, x.shape) == \
        windows(ref.propagators[0], ref.output.shape, x.shape)
    for a_shape, b_shape in [((1, 4, 4, 8), (1, 4, 4, 8)), ((1, 4, 4, 8), (1, 1, 1, 8))]:
        mp = only_part(tb.binary(np.random.RandomState(4), "add", a_shape=a_shape, b_shape=b_shape))
        a, b = mp.part.inputs
        ref = P.elementwise("ref", Tensor(a.name, a.shape), Tensor(b.name, b.shape), op="add")
        assert mp.part.kind == "elementwise" and mp.part.attr("op") == "add"
        for k in (0, 1):
            assert windows(mp.part.propagators[k], mp.part.output.shape, mp.part.inputs[k].shape) \
                == windows(ref.propagators[k], ref.output.shape, ref.inputs[k].shape)


def test_fully_connected_is_a_whole_input_read():
    mp = only_part(tb.fully_connected(np.random.RandomState(1), k=32, n=10))
    part = mp.part
    x = part.inputs[0]
    if len(x.shape) == 2:
        ref = P.fully_connected("ref", Tensor(x.name, x.shape), units=part.output.shape[-1])
        assert part.kind == "fully_connected"
        assert windows(part.propagators[0], part.output.shape, x.shape) == \
            windows(ref.propagators[0], ref.output.shape, x.shape)
    # whatever the rank, one output row reads the whole input row
    whole = part.propagators[0].apply_shape(part.output.shape)
    assert tuple(whole) == x.shape


def test_opaque_only_where_not_affine():
    """MobileNet's RESHAPE (1,1,1,2)->(1,2) folds to an affine read; everything is affine."""
    (lw,) = lowered_of(model_path("mobilenet_v1_0.25_96"))
    m = match_subgraph(lw)
    kinds = [mp.part.kind for mp in m.parts]
    assert kinds.count("conv2d") == 15 and kinds.count("depthwise_conv2d") == 13
    assert kinds[-4:] == ["mean", "conv2d", "reshape", "softmax"]  # SOFTMAX on Ethos-U (issue 3)
    for mp in m.parts:
        # SOFTMAX reads its input inside the exp-table gather: not affine, so whole-extent,
        # which is planner.tflite's opaque softmax dependence
        assert all(mp.affine(k) for k in range(len(mp.part.inputs))) == (
            mp.part.kind != "softmax"
        ), mp.part.name
    # the graph is exactly the TE graph: one Part per feature-map ComputeOp, in block order
    assert [mp.root.op.name for mp in m.parts] == [t.op.name for t in lw.tensors.values()]
    assert m.graph.inputs[0].shape == (1, 96, 96, 3)


def test_non_affine_reads_fall_back_to_whole_extent():
    """An index with floormod (a real reshape) is not affine: that axis reads whole; floordiv
    by a constant is kept as a fractional linear term (the planner's fractional strides)."""
    from fractions import Fraction

    from tvm import te, tirx

    from tvm_ethos.emulator.part_matchers import AccessMap, stage_reads, to_affine

    x = te.placeholder((4, 6), "int8", name="x")
    y = te.compute((6, 4), lambda i, j: x[tirx.floordiv(i * 4 + j, 6), tirx.floormod(i * 4 + j, 6)],
                   name="y")
    (t, idx, aff), = stage_reads(y.op)
    assert t.op.name == "x"
    assert (
        aff[0] is not None
        and aff[0].get("i") == Fraction(2, 3)
        and aff[0].get("j") == Fraction(1, 6)
    )
    assert aff[1] is None
    prop = AccessMap(aff, {}).propagator(["i", "j"], (4, 6))
    assert prop.apply_shape((1, 1)) == (1, 6)      # one element; the floormod axis whole
    assert prop.apply_shape((6, 4)) == (Fraction(29, 6), 6)  # (4*5 + 3)/6 + 1 >= the 4 real rows
    assert to_affine(tirx.floordiv(tirx.Var("v", "int32") * 2 + 3, 4)).coef == (
        ("v", Fraction(1, 2)),
    )
    assert to_affine(tirx.floormod(tirx.Var("v", "int32"), 4)) is None


@pytest.mark.parametrize("name", ["ds_cnn_kws", "resnet8_cifar"])
def test_models_match_the_planner_tflite_graph(name):
    """The TE-derived graph plans like the planner's own TFLite converter: same Part kinds,
    output shapes and activation propagators (windows) for every NPU operator."""
    from planner.tflite import load_tflite

    path = model_path(name)
    (lw,) = lowered_of(path)
    m = match_subgraph(lw)
    ref = load_tflite(path)
    ref_parts = [p for p in ref.parts if p.kind != "reshape"]
    mine = [mp.part for mp in m.parts]
    by_shape = {}
    for p in ref_parts:
        by_shape.setdefault(p.output.shape, []).append(p)
    assert len(mine) == len(ref_parts)
    for p in mine:
        cands = [q for q in by_shape.get(p.output.shape, []) if q.kind == p.kind]
        if not cands and p.kind == "conv2d" and p.output.shape[1:3] == (1, 1):
            # FULLY_CONNECTED on an NHWC map: a 1x1 convolution here, as Vela runs it
            cands = [q for q in ref_parts if q.kind == "fully_connected"
                     and q.output.elements == p.output.elements]
        if not cands and p.kind == "softmax":
            # SOFTMAX on the NPU (issue 3): the planner keeps TFLite's 2-D rows, the matcher
            # Vela's 4-D layout of the same elements
            cands = [q for q in ref_parts if q.kind == "softmax"
                     and q.output.elements == p.output.elements]
        assert cands, f"{p.name} {p.kind} {p.output.shape} has no counterpart"
        if p.kind in ("conv2d", "depthwise_conv2d", "pool") and len(p.inputs[0].shape) == 4 \
                and p.output.shape[1] > 1:
            assert any(windows(p.propagators[0], p.output.shape, p.inputs[0].shape) ==
                       windows(q.propagators[0], q.output.shape, q.inputs[0].shape)
                       for q in cands), p.name


def _block_names(func) -> list[str]:
    """The blocks directly under a PrimFunc's root, in program order."""
    body = func.body
    if isinstance(body, s_tir.SBlockRealize):
        body = body.block.body
    names = []
    for st in list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]:
        while st is not None and not isinstance(st, s_tir.SBlockRealize):
            st = getattr(st, "body", None)
        if st is not None:
            names.append(st.block.name_hint)
    return names


@pytest.mark.parametrize("name", ["ds_cnn_kws", "resnet8_cifar"])
def test_parts_follow_the_primfuncs_block_order_without_reading_it(name):
    """Parts are ordered as the scheduled TIR runs them: the PrimFunc's block order, which
    match_subgraph reads from the TE graph, so a subgraph lowered without its PrimFunc (a
    ``.tflite`` compile schedules none) gives the same graph."""
    (lw,) = lowered_of(str(model_path(name)))
    m = match_subgraph(lw)
    roots = [mp.root.op.name for mp in m.parts]
    assert len(roots) > 10
    assert roots == [b for b in _block_names(lw.primfunc) if b in set(roots)]
    bare = match_subgraph(dataclasses.replace(lw, primfunc=None))
    assert [mp.part for mp in bare.parts] == [mp.part for mp in m.parts]
    assert bare.graph.inputs == m.graph.inputs and bare.graph.outputs == m.graph.outputs
