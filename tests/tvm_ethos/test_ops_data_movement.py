"""PAD / PADV2, SPLIT / SPLIT_V, DEPTH_TO_SPACE and RESIZE_NEAREST_NEIGHBOR on int8: TVM's
importer refuses them quantized; ``tvm_ethos.tflite_converter`` imports them, each is bit exact
against LiteRT's reference kernels on every target, and each NPU constraint sends a violating
case to the host with its reason."""
import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos

TARGETS = ["ethos-u,llvm", "ethos-n,llvm", "llvm"]

#: name -> (model, where it runs for (ethos-u, ethos-n))
CASES = {
    "pad_hw": (lambda: tb.pad(), ("ethos-u", "llvm")),
    "padv2_constant": (lambda: tb.pad(constant=-7, q=(0.1, -5)), ("ethos-u", "llvm")),
    "padv2_zero_point": (
        lambda: tb.pad(constant=3, paddings=((0, 0), (0, 1), (1, 0), (2, 1))),
        ("ethos-u", "llvm"),
    ),
    "split_c": (lambda: tb.split(in_shape=(1, 3, 4, 32)), ("ethos-u", "ethos-n")),
    "split_h": (lambda: tb.split(in_shape=(1, 6, 4, 3), axis=1, num=3), ("ethos-u", "ethos-n")),
    "split_v_c": (lambda: tb.split_v(sizes=(3, 5)), ("ethos-u", "llvm")),
    "depth_to_space": (lambda: tb.depth_to_space(), ("llvm", "ethos-n")),
    "depth_to_space_b3": (
        lambda: tb.depth_to_space(in_shape=(1, 2, 3, 18), block=3),
        ("llvm", "llvm"),
    ),
    "nearest_2x": (lambda: tb.resize_nearest(), ("ethos-u", "ethos-n")),
    "nearest_half_pixel": (
        lambda: tb.resize_nearest(in_shape=(1, 3, 5, 2), size=(6, 10), half_pixel=True),
        ("ethos-u", "ethos-n"),
    ),
    "nearest_align_corners": (
        lambda: tb.resize_nearest(size=(7, 7), align_corners=True),
        ("ethos-u", "ethos-n"),
    ),
    "nearest_down": (
        lambda: tb.resize_nearest(in_shape=(1, 7, 5, 3), size=(3, 4)),
        ("llvm", "llvm"),
    ),
    "nearest_odd_up": (
        lambda: tb.resize_nearest(in_shape=(1, 3, 5, 3), size=(7, 11), half_pixel=True),
        ("llvm", "llvm"),
    ),
}


@pytest.mark.parametrize("target", TARGETS, ids=["U", "N", "host"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_bit_exact(case, target):
    build, on = CASES[case]
    model = build()
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=target)
    want = "llvm" if target == "llvm" else on[target.startswith("ethos-n")]
    placed = {op.placed_on for op in cm.partition_report.operators}
    assert placed == {want}, cm.partition_report
    assert all(
        op.via == ("kernel" if want == "llvm" else "npu") for op in cm.partition_report.operators
    )
    assert_bit_exact(cm, model, n_inputs=3, seed=11)


# ------------------------------------------------------------------ import
REFUSED_BY_TVM = {
    "PAD": tb.pad, "PADV2": lambda: tb.pad(constant=1), "SPLIT": tb.split, "SPLIT_V": tb.split_v,
    "DEPTH_TO_SPACE": tb.depth_to_space, "RESIZE_NEAREST_NEIGHBOR": tb.resize_nearest,
}


@pytest.mark.parametrize("name", sorted(REFUSED_BY_TVM))
def test_stock_importer_still_refuses(name):
    """The extension is a subclass passed to from_tflite: TVM's own converter, used by anyone
    else in the process, is unchanged (no monkey-patching)."""
    import tflite
    import tvm
    from tvm.relax.frontend.tflite import from_tflite

    data = REFUSED_BY_TVM[name]()
    tvm_ethos.load_model(data)  # ours imports it
    with pytest.raises(tvm.error.OpNotImplemented, match=f"'{name}'"):
        from_tflite(tflite.Model.GetRootAs(data, 0))


def test_import_refuses_what_would_be_wrong():
    """Cases TFLite's converter never writes and the code copy cannot reproduce: one line each."""
    from tvm_ethos.errors import UnsupportedModelError

    with pytest.raises(
        UnsupportedModelError,
        match=r"operator 0 \(RESIZE_NEAREST_NEIGHBOR\): .*both "
        "align_corners and half_pixel_centers; TensorFlow refuses",
    ):
        tvm_ethos.load_model(tb.resize_nearest(size=(7, 7), align_corners=True, half_pixel=True))
    with pytest.raises(UnsupportedModelError, match=r"DEPTH_TO_SPACE with input quantization "
                       r"\(0.05.*, 3\) and output \(0.1.*, 3\): the operator copies int8 codes"):
        tvm_ethos.load_model(tb.depth_to_space(out_q=(0.1, 3)))
    # LiteRT refuses it too (pad.cc: constant_values' zero point must be the output's)
    tensors, op = tb._pad_parts((1, 2, 2, 1), ((0, 0), (1, 0), (0, 0), (0, 0)), (0.05, 3), 9)
    tensors[3] = tb.T([1], "int8", scale=0.1, zp=0, data=np.array([9], np.int8))
    with pytest.raises(UnsupportedModelError, match=r"operator 0 \(PADV2\): PADV2 constant_values "
                       "quantized unlike its output"):
        tvm_ethos.load_model(tb.serialize(tensors, [op], [0], [2]))


# ------------------------------------------------------------------ chains
@pytest.mark.parametrize("target", TARGETS, ids=["U", "N", "host"])
def test_pad_conv_chain(target):
    """TF's export of a strided SAME convolution: PAD then a VALID CONV_2D."""
    model = tb.pad_conv(np.random.RandomState(3))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=target)
    placed = [(op.tflite_name, op.placed_on) for op in cm.partition_report.operators]
    npu = target.split(",")[0]
    pad_on = {"ethos-u": "ethos-u", "ethos-n": "llvm", "llvm": "llvm"}[npu]
    assert placed == [("PAD", pad_on), ("CONV_2D", npu)]
    assert_bit_exact(cm, model, n_inputs=3, seed=4)


@pytest.mark.parametrize("target", TARGETS, ids=["U", "N", "host"])
def test_split_feeding_two_convs(target):
    model = tb.split_convs(np.random.RandomState(5), in_shape=(1, 6, 6, 32), cout=(16, 8))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=target)
    npu = target.split(",")[0]
    assert [(op.tflite_name, op.placed_on) for op in cm.partition_report.operators] == \
        [("SPLIT", npu), ("SPLIT", npu), ("CONV_2D", npu), ("CONV_2D", npu)]
    assert_bit_exact(cm, model, n_inputs=3, seed=6)


# ------------------------------------------------------------------ partition decisions
def _reasons(model, target):
    return [op.rejections.get(target.split(",")[0], [])
            for op in tvm_ethos.partition_report(tvm_ethos.load_model(model), target).operators]


def test_pad_constraints():
    assert _reasons(
        tb.pad(in_shape=(1, 2, 3, 4), paddings=((1, 0), (1, 1), (0, 0), (0, 0))), "ethos-u,llvm"
    ) == [["batch padding (1, 0); the pad tensor can only pad height, width and depth"]]
    assert _reasons(tb.pad(in_shape=(5, 6), paddings=((1, 1), (2, 0))), "ethos-u,llvm") == [
        ["padding of a 2-D tensor; the pad tensor must have the shape [3,2] or [4,2]"]]
    # the borders are copies of the fill code, whatever the constant
    assert _reasons(tb.pad(constant=-7, q=(0.1, -5)), "ethos-u,llvm") == [[]]
    assert _reasons(tb.pad(), "ethos-n,llvm") == [["operator PAD is not supported"]]


def test_split_constraints():
    assert _reasons(tb.split_v(sizes=(3, 5)), "ethos-n,llvm") == [
        ["split of channels [0, 3); Ethos-N splits channels in multiples of 16"],
        ["split of channels [3, 8); Ethos-N splits channels in multiples of 16"]]
    assert _reasons(tb.split_v(in_shape=(1, 2, 2, 48), sizes=(16, 32)), "ethos-n,llvm") == [[], []]
    five_d = tb.split(in_shape=(1, 2, 2, 2, 4), axis=4)
    for target in ("ethos-u,llvm", "ethos-n,llvm"):
        assert all("input 0 is 5-D; at most 4-D" in r for r in _reasons(five_d, target))


def test_depth_to_space_constraints():
    assert _reasons(tb.depth_to_space(), "ethos-u,llvm") == [
        ["operator DEPTH_TO_SPACE is not supported"]
    ]
    assert _reasons(tb.depth_to_space(in_shape=(1, 2, 3, 18), block=3), "ethos-n,llvm") == [
        ["depth to space with block size 3; Ethos-N supports block size 2"]]


def test_resize_nearest_constraints():
    odd = tb.resize_nearest(in_shape=(1, 3, 5, 3), size=(7, 11))
    assert _reasons(odd, "ethos-u,llvm") == [
        [
            "resize 3x5 -> 7x11 (align_corners=False); the scale must be 1x/2x/4x/8x, "
            "equal for height and width"
        ]
    ]
    assert _reasons(odd, "ethos-n,llvm") == [["resize 3x5 -> 7x11; Ethos-N resizes to 2n or 2n-1"]]
    # nearest has no half-pixel 2x-only rule on Ethos-U (that one is RESIZE_BILINEAR's)
    assert _reasons(
        tb.resize_nearest(in_shape=(1, 2, 2, 3), size=(8, 8), half_pixel=True), "ethos-u,llvm"
    ) == [[]]
    assert _reasons(tb.resize_nearest(size=(8, 7)), "ethos-n,llvm") == [
        ["resize to 8x7; Ethos-N needs height and width both odd or both even"]]


# ------------------------------------------------------------------ planner Parts
def _parts(model, backend="ethos-u"):
    from tvm_ethos.emulator.part_matchers import match_subgraph
    from tvm_ethos.partition import partition
    from tvm_ethos.pipeline.npu_subgraphs import lower_npu_subgraphs

    mod = tvm_ethos.load_model(model)
    part = partition(mod, f"{backend},llvm")[0]
    return [[mp.part for mp in match_subgraph(lw).parts]
            for _, lw in sorted(lower_npu_subgraphs(part).items())]


def test_pad_conv_parts():
    """A PAD the convolution pads for is its padding (``pad_fold``): one conv Part reading
    the PAD's input, whose 2-row output stripe needs 4 rows of its padded window; a PAD of
    more than the convolution can pad is planner.parts.pad's Part (a shifted identity) whose
    output the conv reads: the pair cascades like any two NPU layers."""
    from test_pad_fold import pad_conv_model

    from planner import parts as pp

    ((conv,),) = _parts(tb.pad_conv(np.random.RandomState(3)))
    assert conv.kind == "conv2d" and dict(conv.attrs)["padding"] == (1, 1, 1, 1)
    assert conv.inputs[0].shape == (1, 6, 6, 4)
    assert conv.propagators[0].apply_shape((1, 2, 6, 8))[1] == 4
    pads = ((0, 0), (2, 2), (1, 1), (0, 0))
    ((pad, conv),) = _parts(pad_conv_model(np.random.RandomState(3), (1, 6, 6, 4), (2, 2, 1, 1),
                                           (3, 3), (1, 1)))
    assert (pad.kind, dict(pad.attrs)["pads"]) == ("pad", pads)
    assert pad.propagators == pp.pad("p", pad.inputs[0], pads).propagators
    assert conv.kind == "conv2d" and conv.inputs[0] is pad.output


def test_split_parts_are_slices():
    from planner import parts as pp

    # the parts are one subgraph (partition_siblings): one Part each, both reading the input
    ((s0, s1),) = _parts(tb.split(in_shape=(1, 6, 4, 3), axis=1, num=2))
    assert [(p.kind, dict(p.attrs)["begin"]) for p in (s0, s1)] == [
        ("slice", (0, 0, 0, 0)),
        ("slice", (0, 3, 0, 0)),
    ]
    assert (
        s1.propagators
        == pp.strided_slice("s", s1.inputs[0], (0, 3, 0, 0), (1, 3, 4, 3)).propagators
    )


def test_resize_nearest_part():
    from planner import parts as pp

    ((p,),) = _parts(tb.resize_nearest(in_shape=(1, 3, 5, 2), size=(6, 10)))
    assert (
        p.kind == "resize"
        and dict(p.attrs)["scale"] == (2, 2)
        and dict(p.attrs)["method"] == "nearest"
    )
    assert p.propagators == pp.resize("r", p.inputs[0], (2, 2), "nearest").propagators


def test_depth_to_space_part():
    from planner import parts as pp

    ((p,),) = _parts(tb.depth_to_space(in_shape=(1, 3, 4, 8)), backend="ethos-n")
    assert p.kind == "depth_to_space" and dict(p.attrs)["block_size"] == 2
    # rows and columns read h // 2, w // 2 (a nearest 2x upscale's window); the channel read
    # (h % 2 * 2 + w % 2) * C + c is not affine: the whole depth for any stripe
    got = p.propagators[0].apply_shape((1, 2, 2, 1))
    ref = pp.resize("r", p.inputs[0], (2, 2), "nearest").propagators[0].apply_shape((1, 2, 2, 1))
    assert tuple(got[1:3]) == tuple(ref[1:3]) and got[3] == 8


# ------------------------------------------------------------------ all shapes and modes
@settings(max_examples=12, deadline=None)
@given(ih=st.integers(1, 6), iw=st.integers(1, 6), oh=st.integers(1, 13), ow=st.integers(1, 13),
       mode=st.sampled_from([(False, False), (True, False), (False, True)]))
def test_resize_nearest_any_size(ih, iw, oh, ow, mode):
    model = tb.resize_nearest(
        in_shape=(1, ih, iw, 2), size=(oh, ow), align_corners=mode[0], half_pixel=mode[1]
    )
    assert_bit_exact(
        tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm"), model, n_inputs=1
    )


@settings(max_examples=60, deadline=None)
@given(i=st.integers(1, 40), o=st.integers(1, 40), ac=st.booleans(), hp=st.booleans())
def test_nearest_index_rule(i, o, ac, hp):
    """The integer expression of the index map equals the float32 table for every output index
    (the table itself is checked against LiteRT above)."""
    from tvm import tirx
    from tvm.sym import Analyzer

    from tvm_ethos.compute.te_ops import _index_expr, nearest_source_index

    if ac and hp:
        return
    table = nearest_source_index(o, i, ac, hp)
    v = tirx.Var("v", "int32")
    expr = _index_expr(v, table, i, o)
    got = []
    for k in range(o):
        an = Analyzer()
        an.bind(v, tirx.const(k, "int32"))
        got.append(int(an.simplify(expr)))
    assert got == table.tolist()


def test_index_select_chain():
    """A table no rational rule gives is a Select chain over its runs."""
    from tvm import tirx
    from tvm.sym import Analyzer

    from tvm_ethos.compute.te_ops import _index_expr

    table = np.array([0, 0, 1, 3, 3, 4])
    v = tirx.Var("v", "int32")
    expr = _index_expr(v, table, 5, 6)
    assert "select" in str(expr).lower()
    got = []
    for k in range(6):
        an = Analyzer()
        an.bind(v, tirx.const(k, "int32"))
        got.append(int(an.simplify(expr)))
    assert got == table.tolist()
