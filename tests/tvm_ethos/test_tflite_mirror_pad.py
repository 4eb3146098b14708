"""TFLite's MIRROR_PAD through the importer: ``nn.pad`` on the codes in reflect mode
(REFLECT) or symmetric mode (SYMMETRIC, the edge repeated), on the Ethos-U (any axis of a
tensor of up to five) as mirrored bands (test_mirror_bands.py) or, in a planner's stripe, copies
of input rows, columns and channels (a batch or a 5-D tensor's outer index folded into the
rows, each mirrored index a copy of its whole inner block), the compiled file's outputs equal
to TFLite Micro's on the source; a 6-D SYMMETRIC one stays a TFLite operator."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import _opts
from test_solitary_movement import _i32, _like, chain, compiled_on_the_npu

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches, inputs_for, tflm_oracle
from tvm_ethos.backends.ethos_u.ops_movement import folded_runs

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def mirror_pad_model(shape, pads, mode=tflite.MirrorPadMode.REFLECT, q=(0.05, 3)) -> bytes:
    """One int8 MIRROR_PAD of ``shape`` by the constant ``pads`` ((before, after) per axis)."""
    out = [d + a + b for d, (a, b) in zip(shape, pads)]
    x = tb.T(list(shape), "int8", scale=q[0], zp=q[1])
    p = tb.T([len(shape), 2], "int32", data=np.asarray(pads, np.int32))
    y = tb.T(out, "int8", scale=q[0], zp=q[1])
    otype, ofn = _opts("MirrorPadOptions", Mode=mode)
    return tb.serialize([x, y, p], [(tb.BO.MIRROR_PAD, otype, ofn, [0, 2], [1])], [0], [1])


def _check(data: bytes, target: str = "ethos-u", seed: int = 0):
    """The compiled model's outputs on two random inputs, equal to TFLite Micro's."""
    return compiled_matches(data, target, seed)


@st.composite
def _padded(draw, edge: int = 1):
    """A shape of 1 to 5 axes and paddings of every axis, each at most the dimension less
    ``edge`` (REFLECT: 1, SYMMETRIC: 0); a batch or outer index of up to 3."""
    rank = draw(st.integers(1, 5))
    shape = [draw(st.integers(1, 3 if k < rank - 3 else 6)) for k in range(rank)]
    pad = lambda n: (draw(st.integers(0, n - edge)), draw(st.integers(0, n - edge)))  # noqa: E731
    return tuple(shape), [pad(n) for n in shape]


_q = st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127))


@settings(max_examples=8, deadline=None)
@given(case=_padded(), q=_q)
def test_reflect_padding_of_any_axis_is_on_the_npu_exactly(case, q):
    """Every padded band one copy written backwards (the depth, the batch, 5-D tensors and
    tensors of fewer axes too, as Vela 5.2 takes them)."""
    shape, pads = case
    cm = _check(mirror_pad_model(shape, pads, q=q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@settings(max_examples=8, deadline=None)
@given(case=_padded(edge=0), q=_q)
def test_symmetric_padding_of_any_axis_is_on_the_npu_exactly(case, q):
    """SYMMETRIC repeats the edge, so it pads up to the whole dimension (REFLECT one less);
    the batch too: the patterns take it, so TVM's legalization never reads it."""
    shape, pads = case
    cm = _check(mirror_pad_model(shape, pads, mode=tflite.MirrorPadMode.SYMMETRIC, q=q))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@pytest.mark.parametrize("mode, pads", [
    (tflite.MirrorPadMode.REFLECT, [(0, 0), (1, 2), (2, 1), (3, 4)]),
    (tflite.MirrorPadMode.SYMMETRIC, [(0, 0), (3, 1), (0, 4), (5, 2)]),
], ids=["reflect", "symmetric"])
def test_depth_padding_between_convolutions_is_planned_as_it_touches_memory(mode, pads):
    """CONV_2D -> MIRROR_PAD of height, width and depth -> CONV_2D at the least memory: all
    on the NPU, the stream realizing the plan and touching the planned peak, equal to TFLite
    Micro's."""
    def middle(g, x):
        y = _like(g, x, [n + a + b for n, (a, b) in zip(g.shape(x), pads)])

        def opts(b):
            tflite.MirrorPadOptionsStart(b)
            tflite.MirrorPadOptionsAddMode(b, mode)
            return tflite.MirrorPadOptionsEnd(b)

        g.ops.append((tb.BO.MIRROR_PAD, tb.BOPT.MirrorPadOptions, opts, [x, _i32(g, pads)],
                      [y]))
        return y

    data = chain(middle, seed=3, shape=(1, 12, 10, 8), c=6)
    cm, _ = compiled_on_the_npu(data, budget="smallest")
    rs = np.random.RandomState(2)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)


@settings(max_examples=40, deadline=None)
@given(dims=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data(),
       symmetric=st.booleans())
def test_folded_row_runs_mirror_every_outer_axis_as_numpy_does(dims, data, symmetric):
    """The rows of the axes folded into the height (a batch, a 5-D tensor's outer axes, the
    height), mirrored run by run, are numpy's padding of their indices; a mirrored outer
    index over unpadded inner axes is one run of its whole inner block."""
    edge = 0 if symmetric else 1
    pads = [(data.draw(st.integers(0, n - edge)), data.draw(st.integers(0, n - edge)))
            for n in dims]
    want = np.pad(np.arange(int(np.prod(dims))).reshape(dims), pads,
                  mode="symmetric" if symmetric else "reflect").ravel()
    got = np.full(want.shape, -1)
    runs = folded_runs(dims, pads, edge)
    for out, src, n in runs:
        assert (got[out:out + n] == -1).all(), "two runs write one row"
        got[out:out + n] = np.arange(src, src + n)
    assert np.array_equal(got, want)
    if len(dims) > 1 and all(p == (0, 0) for p in pads[1:]):
        assert len(runs) == sum(pads[0]) + 1


@pytest.mark.parametrize("mode, shape, pads", [
    (tflite.MirrorPadMode.REFLECT, (3, 2, 4, 2), [(2, 1), (0, 0), (0, 0), (0, 0)]),
    (tflite.MirrorPadMode.SYMMETRIC, (2, 6, 5, 3), [(1, 2), (2, 3), (1, 0), (0, 1)]),
    (tflite.MirrorPadMode.REFLECT, (2, 3, 5, 4, 3), [(1, 1), (2, 0), (1, 3), (0, 2), (1, 1)]),
], ids=["reflect_batch", "symmetric_batch_hwc", "reflect_5d"])
def test_batch_and_outer_padding_is_planned_as_it_touches_memory(mode, shape, pads):
    """A MIRROR_PAD of a batch or a 5-D tensor's outer axes at the least memory: its copies
    over the whole output, one Plan of one stripe (the planner runs it alone, where stripes
    would save no memory: ``planner.whole_on_a_tie``); on the NPU, the stream realizing the
    plan and touching the planned peak, equal to TFLite Micro's."""
    data = mirror_pad_model(shape, pads, mode=mode)
    cm, _ = compiled_on_the_npu(data, budget="smallest")
    (sub,) = cm.plan_report["subgraphs"].values()
    assert [p["stripes"] for p in sub["plans"]] == [1], sub["plans"]
    rs = np.random.RandomState(4)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)


def test_six_axes_symmetric_padding_stays_a_tflite_operator_naming_the_rule():
    """TVM's legalization reads the converter's symmetric mode as constant padding, so only
    the forms the integer kernels take (at most 5 axes) are converted; the tflite-micro host
    keeps the rest, a host target cannot run it."""
    data = mirror_pad_model((1, 2, 2, 3, 2, 2), [(0, 0), (1, 0), (0, 0), (1, 1), (0, 0), (0, 0)],
                            mode=tflite.MirrorPadMode.SYMMETRIC)
    cm = _check(data)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "at most 5 axes" in placed.why, placed.why
    with pytest.raises(tvm_ethos.errors.TvmEthosError, match="operator 0 .MIRROR_PAD. cannot"):
        tvm_ethos.load_model(data)


@pytest.mark.parametrize("mode, shape, pads", [
    (tflite.MirrorPadMode.REFLECT, (1, 4, 5, 3), [(0, 0), (3, 1), (2, 4), (0, 0)]),
    (tflite.MirrorPadMode.SYMMETRIC, (1, 4, 5, 3), [(0, 0), (4, 1), (2, 5), (0, 0)]),
    (tflite.MirrorPadMode.SYMMETRIC, (1, 4, 5, 3), [(0, 0), (1, 1), (0, 2), (3, 2)]),
    (tflite.MirrorPadMode.SYMMETRIC, (4, 5), [(2, 4), (5, 1)]),
    (tflite.MirrorPadMode.SYMMETRIC, (2, 3, 4, 2), [(2, 1), (1, 0), (0, 0), (1, 2)]),
], ids=["reflect", "symmetric", "symmetric_depth", "symmetric_2d", "symmetric_batch"])
def test_the_llvm_host_runs_it_exactly(mode, shape, pads):
    cm = _check(mirror_pad_model(shape, pads, mode=mode), "llvm", seed=1)
    assert cm.partition_summary == {"llvm": 1}


def test_the_ethos_u_llvm_target_runs_depth_padding_on_the_npu_exactly():
    data = mirror_pad_model((1, 4, 5, 3), [(0, 0), (1, 2), (0, 0), (2, 1)],
                            mode=tflite.MirrorPadMode.SYMMETRIC)
    cm = _check(data, "ethos-u,llvm", seed=2)
    assert cm.partition_summary == {"ethos-u": 1}


@pytest.mark.parametrize("mode, shape, pads", [
    (tflite.MirrorPadMode.REFLECT, (3, 4, 2, 3), [(2, 1), (1, 0), (0, 0), (1, 1)]),
    (tflite.MirrorPadMode.SYMMETRIC, (2, 2, 3, 2, 2), [(1, 2), (2, 0), (0, 1), (1, 0), (0, 2)]),
], ids=["reflect_batch", "symmetric_5d"])
def test_the_ethos_u_llvm_target_runs_batch_padding_on_the_npu_exactly(mode, shape, pads):
    cm = _check(mirror_pad_model(shape, pads, mode=mode), "ethos-u,llvm", seed=3)
    assert cm.partition_summary == {"ethos-u": 1}
