"""SPLIT, SPLIT_V, SLICE and STRIDED_SLICE on the NPU in a TFLite Micro ``.tflite`` (issue 28):
a SPLIT's parts are one ``ethos-u`` operator with several outputs, as in Vela's files; a slice
of some channels cascades in the planned stream; a STRIDED_SLICE with strides over height or
width is a strided read; a batch above 1 is folded into rows, and a slice of rank 2 or 3
cascades as a 4-D one. Every output is TFLite Micro's, bit for bit, over shapes, axes and
quantization (Hypothesis); what stays a TFLite operator says why."""

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_part_matchers import lowered_of
from test_stream_movement import strided_slice_model

import tvm_ethos
from ethos_arch.ops import Op
from planner.graph import part_operator
from tests.helpers.tflite_oracle import tflm_oracle, tflm_random_inputs
from tvm_ethos.backends.ethos_u.ops_movement import channel_runs
from tvm_ethos.backends.ethos_u.stream_ops import PLANNER_SOLITARY, SOLITARY_OPS
from tvm_ethos.emulator.part_matchers import match_subgraph
from tvm_ethos.reports.tflite_ops import operator_kinds

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

ACCELERATORS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
quantization = st.tuples(st.sampled_from([0.004, 0.05, 0.37]), st.integers(-128, 127))


def _i32(values) -> tb.T:
    return tb.T([len(values)], "int32", data=np.array(values, np.int32))


def slice_(in_shape, begin, size, q=(0.05, 3)) -> bytes:
    """SLICE of ``size`` elements from ``begin``."""
    x, y = (tb.T(list(s), "int8", scale=q[0], zp=q[1]) for s in (in_shape, size))
    return tb.serialize([x, _i32(begin), _i32(size), y],
                        [(tb.BO.SLICE, 0, None, [0, 1, 2], [3])], [0], [3])


def conv_strided_slice_conv(rs, in_shape=(1, 12, 10, 8), strides=(2, 2)) -> bytes:
    """CONV_2D, STRIDED_SLICE every ``strides`` rows and columns, CONV_2D: a strided read
    between two NPU operations, which the plan may cascade."""
    x = tb._qact(rs, list(in_shape))
    w, bias, y = tb._conv_tensors(rs, x, 8)
    _, h, wd, c = y.shape
    sliced = [1, -(-h // strides[0]), -(-wd // strides[1]), c]
    s = tb.T(sliced, "int8", scale=float(y.scale[0]), zp=int(y.zp[0]))
    w2, bias2, y2 = tb._conv_tensors(rs, s, 8)

    def opts(b):
        tflite.StridedSliceOptionsStart(b)
        return tflite.StridedSliceOptionsEnd(b)

    cut = (tb.BO.STRIDED_SLICE, tb.BOPT.StridedSliceOptions, opts, [3, 4, 5, 6], [7])
    tensors = [x, w, bias, y, _i32([0, 0, 0, 0]), _i32([1, h, wd, c]),
               _i32([1, strides[0], strides[1], 1]), s, w2, bias2, y2]
    return tb.serialize(tensors, [tb._conv_op([0, 1, 2], [3]), cut, tb._conv_op([7, 8, 9], [10])],
                        [0], [10])


def _ethos_u_operators(data: bytes) -> list[tuple[int, int]]:
    """(inputs, outputs) of each operator of the written file, which must all be ethos-u."""
    m = tflite.Model.GetRootAsModel(data, 0)
    g = m.Subgraphs(0)
    out = []
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        assert m.OperatorCodes(op.OpcodeIndex()).CustomCode() == b"ethos-u"
        out.append((op.InputsLength(), op.OutputsLength()))
    return out


def _exact_with_tflite_micro(model: bytes, cm, seed=0) -> None:
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = tflm_random_inputs(model, rs)
        want = tflm_oracle(model, xs)
        got = cm.run(*xs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g).reshape(w.shape), w)


def _on_the_npu(model: bytes, accelerator: str):
    """The model compiled for ``ethos-u`` (the tflite-micro host): every operator on the
    NPU, outputs TFLite Micro's."""
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}",
                           cache_dir=False)
    assert all(p.placed_on == "ethos-u" for p in cm.placement), cm.placement
    _exact_with_tflite_micro(model, cm)
    return cm


def _streamed(model: bytes, accelerator: str, **kw):
    """The model for ``ethos-u,llvm`` through its planned (or layer-by-layer) streams on the
    functional model: every subgraph streamed, outputs TFLite Micro's."""
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator},llvm",
                           npu_runtime="stream", cache_dir=False, **kw)
    streams = cm.plan_report["streams"]
    assert streams and all(e["generated"] for e in streams.values()), streams
    _exact_with_tflite_micro(model, cm)
    assert any(t.startswith("stream ") for t in cm.last_run_stats.trace)
    return cm


# --------------------------------------------------------------------- SPLIT / SPLIT_V
@settings(max_examples=4, deadline=None)
@given(shape=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 9)),
       axis=st.integers(1, 3), parts=st.integers(2, 3), uneven=st.booleans(),
       q=quantization, accelerator=st.sampled_from(ACCELERATORS))
def test_split_is_one_ethos_u_operator_with_an_output_per_part(shape, axis, parts, uneven, q,
                                                                accelerator):
    whole = [1, *shape]
    whole[axis] *= parts
    if uneven and whole[axis] > parts:   # SPLIT_V: parts of different sizes
        sizes = [1] * (parts - 1) + [whole[axis] - parts + 1]
        model = tb.split_v(in_shape=tuple(whole), axis=axis, sizes=tuple(sizes), q=q)
    else:
        model = tb.split(in_shape=tuple(whole), axis=axis, num=parts, q=q)
    cm = _on_the_npu(model, accelerator)
    # Vela's layout: command stream, flash, arena, fast scratch, the IFM; one OFM per part
    assert _ethos_u_operators(cm.tflite) == [(5, parts)]


def test_split_feeding_convolutions_is_one_ethos_u_operator():
    """A SPLIT whose parts feed their own convolutions: the parts and the convolutions are
    one NPU subgraph, its input held once."""
    model = tb.split_convs(np.random.RandomState(4))
    for accelerator in ("ethos-u55-128", "ethos-u65-256"):
        cm = _on_the_npu(model, accelerator)
        assert _ethos_u_operators(cm.tflite) == [(5, 2)]
    again = tvm_ethos.compile(model, "ethos-u -accelerator_config=ethos-u65-256",
                              cache_dir=False)
    assert again.tflite == cm.tflite   # the same bytes


def test_sibling_subgraphs_that_do_not_split_a_tensor_stay_apart():
    """Only the parts of a SPLIT merge: two convolutions reading the network's input stay
    two subgraphs (the merge changes nothing else)."""
    rs = np.random.RandomState(2)
    x = tb._qact(rs, [1, 6, 6, 8])
    w, b, y = tb._conv_tensors(rs, x, 4)
    w2, b2, y2 = tb._conv_tensors(rs, x, 6)
    model = tb.serialize([x, w, b, y, w2, b2, y2],
                         [tb._conv_op([0, 1, 2], [3]), tb._conv_op([0, 4, 5], [6])], [0], [3, 6])
    cm = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    assert cm.partition_summary == {"ethos-u": 2}


# --------------------------------------------------------------------- SLICE
@settings(max_examples=6, deadline=None)
@given(hw=st.tuples(st.integers(2, 6), st.integers(1, 6)), c=st.integers(3, 12),
       data=st.data(), q=quantization, accelerator=st.sampled_from(ACCELERATORS))
def test_slice_of_rows_and_channels_streams_as_planned(hw, c, data, q, accelerator):
    """A SLICE over height and depth is two cascaded copies; the planner computes only the
    channels the second one reads of the first's output, and the stream copies them."""
    h, w = hw
    y0 = data.draw(st.integers(0, h - 1))
    c0 = data.draw(st.integers(1, c - 1))
    size = [1, data.draw(st.integers(1, h - y0)), w, data.draw(st.integers(1, c - c0))]
    model = slice_((1, h, w, c), (0, y0, 0, c0), size, q=q)
    _streamed(model, accelerator)
    _on_the_npu(model, accelerator)


@settings(max_examples=300, deadline=None)
@given(src_c=st.integers(0, 40), dst_c=st.integers(0, 40), n=st.integers(1, 12),
       src_extra=st.integers(0, 6), dst_extra=st.integers(0, 6))
def test_channel_runs_copy_each_channel_once_to_its_folded_place(src_c, dst_c, n, src_extra,
                                                                  dst_extra):
    """Brute force: the pieces move channel ``src_c + k`` (held at ``% src_depth``) to
    ``dst_c + k`` (at ``% dst_depth``) for every k, once, each piece inside both buffers."""
    src_depth, dst_depth = n + src_extra, n + dst_extra
    moved = []
    for s, d, k in channel_runs(src_c, dst_c, n, src_depth, dst_depth):
        assert k >= 1 and s + k <= src_depth and d + k <= dst_depth
        moved += list(zip(range(s, s + k), range(d, d + k)))
    assert moved == [((src_c + k) % src_depth, (dst_c + k) % dst_depth) for k in range(n)]


# --------------------------------------------------------------------- STRIDED_SLICE
@settings(max_examples=6, deadline=None)
@given(shape=st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 6)),
       strides=st.tuples(st.integers(1, 4), st.integers(1, 4)), data=st.data(),
       q=quantization, accelerator=st.sampled_from(ACCELERATORS))
def test_strided_slice_over_height_and_width_is_a_strided_read(shape, strides, data, q,
                                                               accelerator):
    h, w, c = shape
    begin, end = [0], [1]
    for d in (h, w):
        b = data.draw(st.integers(0, d - 1))
        begin.append(b)
        end.append(data.draw(st.integers(b + 1, d)))
    c0 = data.draw(st.integers(0, c - 1))
    begin.append(c0)
    end.append(data.draw(st.integers(c0 + 1, c)))
    model = strided_slice_model((1, h, w, c), begin, end, [1, *strides, 1], q=q)
    assert [k for k, _ in operator_kinds(model)] == ["STRIDED_SLICE"]
    _on_the_npu(model, accelerator)
    _streamed(model, accelerator)


@settings(max_examples=2, deadline=None)
@given(hw=st.tuples(st.integers(12, 24), st.integers(8, 20)),
       strides=st.sampled_from([(2, 1), (1, 2), (2, 2), (3, 2), (2, 3)]),
       accelerator=st.sampled_from(ACCELERATORS), seed=st.integers(0, 99))
@example(hw=(24, 20), strides=(3, 2), accelerator="ethos-u55-128", seed=1)  # reads cut twice
def test_strided_slice_between_convolutions_cascades_in_one_ethos_u_operator(
        hw, strides, accelerator, seed):
    """The plan cascades the slice between the convolutions, its input a ring of the first
    convolution's rows: a strided read that would cross the ring's end is cut there
    (``stream_ops._unwrapped``)."""
    model = conv_strided_slice_conv(np.random.RandomState(seed), (1, *hw, 8), strides)
    cm = _on_the_npu(model, accelerator)
    assert _ethos_u_operators(cm.tflite) == [(5, 1)]
    _streamed(model, accelerator)


def test_strided_slice_over_depth_stays_a_tflite_operator_and_says_why():
    """The NPU reads depth densely: a stride over channels stays a TFLite operator (TFLite
    Micro runs it); the partition says why (for a host that compiles it, the host runs it)."""
    model = strided_slice_model((1, 3, 4, 8), [0, 0, 0, 0], [1, 3, 4, 8], [1, 1, 1, 2])
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    _exact_with_tflite_micro(model, cm)
    host = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    (sliced,) = [op for op in host.partition_report.operators if op.rejections.get("ethos-u")]
    assert sliced.placed_on != "ethos-u"
    assert any("the NPU strides over height or width only" in r
               for r in sliced.rejections["ethos-u"]), sliced.rejections
    _exact_with_tflite_micro(model, host)


# --------------------------------------------------------------------- a batch; rank 2 and 3
def _planned_as_touched(cm) -> None:
    """Every stream realizes its plan: it touches the SRAM the planner estimated."""
    for entry in cm.plan_report["streams"].values():
        assert entry["schedule"] == "plan" and entry["realizes_plan"], entry
        assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
            == entry["planned_peak_bytes"], entry


def _on_both_hosts(model: bytes, accelerator: str) -> None:
    """On the NPU for ``ethos-u`` and, planned, for ``ethos-u,llvm``: TFLite Micro's outputs."""
    _on_the_npu(model, accelerator)
    _planned_as_touched(_streamed(model, accelerator))


@st.composite
def _batch_slices(draw, batch=st.integers(2, 3)):
    """A STRIDED_SLICE of an N x H x W x C tensor: any box, strides over height and width
    (the NPU's; a stride over the batch or depth stays on the CPU, as in Vela)."""
    shape = (draw(batch), *draw(st.tuples(st.integers(1, 5), st.integers(1, 5),
                                          st.integers(1, 8))))
    begin, end, strides = [], [], []
    for k, d in enumerate(shape):
        b = draw(st.integers(0, d - 1))
        begin.append(b)
        end.append(draw(st.integers(b + 1, d)))
        strides.append(draw(st.integers(1, 3)) if k in (1, 2) else 1)
    return shape, begin, end, strides


def _batch_split(axis: int, shape, parts: int, uneven: bool, q) -> bytes:
    """SPLIT (or, ``uneven``, SPLIT_V) of ``shape`` times ``parts`` along ``axis``."""
    whole = list(shape)
    whole[axis] *= parts
    if uneven and whole[axis] > parts:
        sizes = [1] * (parts - 1) + [whole[axis] - parts + 1]
        return tb.split_v(in_shape=tuple(whole), axis=axis, sizes=tuple(sizes), q=q)
    return tb.split(in_shape=tuple(whole), axis=axis, num=parts, q=q)


def _check_batch_slice(sliced, q, accelerator) -> None:
    shape, begin, end, strides = sliced
    _on_both_hosts(strided_slice_model(shape, begin, end, strides, q=q), accelerator)


def _check_flat_slice(shape, data, q, accelerator) -> None:
    begin = [data.draw(st.integers(0, d - 1)) for d in shape]
    size = [data.draw(st.integers(1, d - b)) for d, b in zip(shape, begin)]
    _on_both_hosts(slice_(shape, begin, size, q=q), accelerator)


@settings(max_examples=1, deadline=None)
@given(sliced=_batch_slices(batch=st.just(2)), q=quantization,
       accelerator=st.sampled_from(ACCELERATORS))
@example(sliced=((2, 4, 4, 8), [0, 0, 1, 0], [2, 4, 4, 8], [1, 2, 1, 1]), q=(0.05, 3),
         accelerator="ethos-u55-128")   # the audit's probe: height every other row
def test_a_slice_of_a_batch_of_2_runs_on_the_npu_as_planned(sliced, q, accelerator):
    """A batch folded into rows: the batch a run of rows, the height a copy per batch
    index, width and depth one read of every row; cascaded slices of several axes."""
    _check_batch_slice(sliced, q, accelerator)


@settings(max_examples=1, deadline=None)
@given(axis=st.integers(0, 3), parts=st.integers(2, 3), uneven=st.booleans(), q=quantization,
       accelerator=st.sampled_from(ACCELERATORS))
def test_a_split_of_a_batch_of_2_is_one_ethos_u_operator(axis, parts, uneven, q, accelerator):
    model = _batch_split(axis, (2, 2, 3, 4) if axis else (1, 2, 3, 4), parts, uneven, q)
    _on_both_hosts(model, accelerator)
    assert _ethos_u_operators(tvm_ethos.compile(model, "ethos-u", cache_dir=False).tflite) \
        == [(5, parts)]


def test_a_slice_of_rank_2_runs_on_the_npu_as_planned():
    """The audit's probe: two cascaded copies, the first's output a ring of channels."""
    _on_both_hosts(slice_((4, 8), [1, 2], [2, 5]), "ethos-u55-128")


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(sliced=_batch_slices(), q=quantization, accelerator=st.sampled_from(ACCELERATORS))
def test_slices_of_a_batch_sweep(sliced, q, accelerator):
    _check_batch_slice(sliced, q, accelerator)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(axis=st.integers(0, 3), batch=st.integers(2, 3), parts=st.integers(2, 3),
       uneven=st.booleans(), q=quantization, accelerator=st.sampled_from(ACCELERATORS))
def test_splits_of_a_batch_sweep(axis, batch, parts, uneven, q, accelerator):
    shape = (batch if axis else 1, 2, 3, 4)
    _on_both_hosts(_batch_split(axis, shape, parts, uneven, q), accelerator)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(shape=st.one_of(st.tuples(st.integers(1, 6), st.integers(1, 9)),
                       st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 8))),
       data=st.data(), q=quantization, accelerator=st.sampled_from(ACCELERATORS))
def test_slices_of_rank_2_and_3_sweep(shape, data, q, accelerator):
    _check_flat_slice(shape, data, q, accelerator)


def test_a_stride_over_the_batch_stays_a_tflite_operator_and_says_why():
    """The NPU strides over height or width: every other batch index stays on the CPU, the
    placement naming the axis."""
    model = strided_slice_model((3, 2, 2, 4), [0, 0, 0, 0], [3, 2, 2, 4], [2, 1, 1, 1])
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "stride 2 along axis 0" in str(placed.why), placed
    _exact_with_tflite_micro(model, cm)


@pytest.mark.slow
@pytest.mark.parametrize("model", [
    pytest.param(lambda: strided_slice_model((3, 24, 40, 24), [1, 0, 0, 0], [3, 24, 40, 24]),
                 id="batch-of-3"),
    pytest.param(lambda: strided_slice_model((2, 48, 40, 16), [0, 1, 0, 0], [2, 47, 40, 16],
                                             [1, 2, 1, 1]), id="height-stride-2"),
    pytest.param(lambda: strided_slice_model((2, 48, 40, 16), [0, 0, 3, 0], [2, 48, 40, 16],
                                             [1, 1, 3, 1]), id="width-stride-3"),
    pytest.param(lambda: slice_((2, 40, 48, 16), [0, 5, 3, 4], [2, 30, 40, 9]),
                 id="three-axes"),
    pytest.param(lambda: slice_((64, 200), [3, 10], [50, 150]), id="rank-2"),
])
@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_striped_slices_of_a_batch_run_on_the_npu_as_planned(model, accelerator):
    """Larger slices: on the Ethos-U55 the plan stripes those of one axis of a batch (6 to 12
    stripes), each slice of a batch a Plan of its own (``SOLITARY_OPS``), its copies clipped
    to each stripe's rows in every batch."""
    _on_both_hosts(model(), accelerator)


@pytest.mark.slow
def test_cascade_prone_slices_of_a_batch_equal_tflite_micro_wherever_they_run():
    """Two strided slices of a batch, which the plan once cascaded through a ring of rows
    (one batch's rows over another's): each is a Plan of its own, every host exact."""
    model = strided_slice_model((2, 48, 40, 16), [0, 1, 3, 2], [2, 47, 40, 14], [1, 2, 3, 1])
    for target in ("ethos-u", "ethos-u,llvm"):
        _exact_with_tflite_micro(model, tvm_ethos.compile(model, target, cache_dir=False))
    _exact_with_tflite_micro(model, tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False,
                                                      npu_runtime="stream"))


@pytest.mark.parametrize("batch, kinds", [(1, {Op.SLICE, Op.RESHAPE}),
                                          (2, {Op.SPLIT, Op.RESHAPE})])
def test_only_a_slice_of_a_batch_names_split_which_the_planner_keeps_out_of_cascades(batch,
                                                                                     kinds):
    """The Part of a slice of a batch above 1 names SPLIT, in the planner's solitary set
    (a slice of one batch stays a SLICE Part, cascaded); the importer's identity RESHAPE
    after it is a RESHAPE Part (never a striped elementwise one)."""
    model = strided_slice_model((batch, 6, 4, 8), [0, 0, 1, 0], [batch, 6, 4, 8], [1, 2, 1, 1])
    parts = [p for lw in lowered_of(model) for p in match_subgraph(lw).graph.parts]
    assert {part_operator(p) for p in parts} == kinds
    assert Op.SPLIT in PLANNER_SOLITARY and Op.SPLIT not in SOLITARY_OPS
