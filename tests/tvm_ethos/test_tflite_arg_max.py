"""TFLite's quantized ARG_MAX through the importer: on the Ethos-U as Vela lowers it (a code
and reversed channel packed into int16, a max pool through an int16 table, a cast to int32:
``ops_argmax``), exact with TFLite Micro, ties included (the first maximum); on the llvm host
as the integer kernel at any depth; what the NPU does not take stays a TFLite operator,
naming why."""
from __future__ import annotations

import math

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_part_matchers import lowered_of

import tvm_ethos
from ethos_arch.ops import Op
from ethosu_stream import Memory, run_stream
from ethosu_stream.accelerator import accelerator_info
from ethosu_stream.memory import SHRAM_REGION
from planner.parts import arg_max_piece_pixels, arg_max_rows_cols, arg_max_work_bytes
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite
from planner.vela_run import run_vela
from tests.helpers.read_regions import boxes, propagated_region
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.backends.ethos_u import ops_argmax
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, block_config
from tvm_ethos.backends.ethos_u.stream_base import (
    Flash,
    lut_address,
    npu_accelerator,
    vela_api,
)
from tvm_ethos.backends.ethos_u.stream_ops import Emission
from tvm_ethos.emulator.part_matchers import match_subgraph
from tvm_ethos.patterns import QOp

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def _equal(data: bytes, cm, dtype: str, reference=tflm_oracle, seed: int = 0) -> None:
    """The compiled model's outputs equal ``reference``'s on uniform inputs, inputs of two
    codes and inputs of one code (every channel tied)."""
    shape = cm.inputs[0].shape
    rs = np.random.RandomState(seed)
    info = np.iinfo(dtype)
    for x in (rs.randint(info.min, info.max + 1, shape).astype(dtype),
              tb.tied_codes(shape, dtype, rs, 2), tb.tied_codes(shape, dtype, rs, 1)):
        (got,), (want,) = cm.run(x), reference(data, [x])
        assert got.dtype == want.dtype
        assert np.array_equal(got.reshape(want.shape), want), (x.ravel()[:8], got.ravel()[:8],
                                                                want.ravel()[:8])


_shapes = st.one_of(
    st.tuples(st.just(1), st.integers(1, 9), st.integers(1, 9), st.integers(1, 127)),
    st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 127)),
    st.tuples(st.integers(1, 9), st.integers(1, 127)))


@settings(max_examples=8, deadline=None)
@given(shape=_shapes, scale=st.floats(0.002, 2.0), zp=st.integers(-128, 127))
@example(shape=(1, 1, 1, 1), scale=1.0, zp=0)   # one channel: every index 0
def test_arg_max_is_npu_operations_exact_with_tflite_micro(shape, scale, zp):
    data = tb.arg_max(shape, "int8", (scale, zp))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _equal(data, cm, "int8")


@pytest.mark.parametrize("shape,dtype,out", [((1, 4, 6, 127), "uint8", "int32"),
                                              ((1, 5, 3, 40), "int8", "int64"),
                                              ((6, 9), "uint8", "int64")])
def test_uint8_and_int64_arg_max_on_the_npu_equal_litert(shape, dtype, out):
    """TFLite Micro's kernel refuses uint8 input and int64 output at run time; LiteRT's
    reference runs them (an int64 index is an int32 pair on the NPU, the high word zero)."""
    data = tb.arg_max(shape, dtype, (0.1, 100), out)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _equal(data, cm, dtype, oracle)


@pytest.mark.parametrize("dtype,out,depth", [("int8", "int32", 200), ("int8", "int64", 9),
                                             ("uint8", "int32", 130)])
def test_the_llvm_hosts_integer_kernel_is_tflites_at_any_depth(dtype, out, depth):
    """``llvm`` runs the TE kernel (``te_ops.lower_arg_max``): any depth and int64 too."""
    data = tb.arg_max((1, 3, 5, depth), dtype, (0.05, 7), out)
    cm = tvm_ethos.compile(data, "llvm", cache_dir=False)
    assert cm.partition_summary == {"llvm": 1}
    _equal(data, cm, dtype, tflm_oracle if (dtype, out) == ("int8", "int32") else oracle)


@st.composite
def _many_pixels(draw):
    """A shape of more than 65,536 pixels (one max pool's rows): bands of whole rows, or rows
    wider than a feature map's 65,536 columns, 4-D or 3-D."""
    w = draw(st.integers(1, 140_000))
    h = draw(st.integers(ops_argmax.MAX_PIXELS // w + 1, 140_000 // w + 1))
    c = draw(st.integers(1, max(1, 2_000_000 // (h * w))))
    return draw(st.sampled_from([(1, h, w, c), (h, w, c)]))


@settings(max_examples=4, deadline=None)
@given(shape=_many_pixels(), zp=st.integers(-128, 127))
def test_arg_max_over_more_than_65536_pixels_is_npu_operations_exact_with_tflite_micro(shape,
                                                                                         zp):
    """Vela 5.2 takes these (``tests/ethosu_stream/test_vela_argmax.py``); so do we, in
    pieces the registers take (``ops_argmax.pieces``; 1x300x300x16, bands of 218 rows, and a
    row wider than the width register: the test below)."""
    data = tb.arg_max(shape, "int8", (0.05, zp))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _equal(data, cm, "int8")


def _span(most: int):
    return st.integers(0, 1000).flatmap(lambda a: st.tuples(st.just(a),
                                                            st.integers(a + 1, a + most)))


@settings(max_examples=100, deadline=None)
@given(rows=_span(300), cols=_span(3 * ops_argmax.MAX_PIXELS),
       most=st.one_of(st.just(ops_argmax.MAX_PIXELS), st.integers(1, ops_argmax.MAX_PIXELS)))
def test_pieces_cover_the_box_once_each_within_the_registers(rows, cols, most):
    """Every pixel of the box in exactly one piece (counted on the grid of the pieces'
    edges), no piece over ``most`` pixels or columns (so none over the registers), and a box
    of at most ``most`` pixels one piece (the stream as before)."""
    got = ops_argmax.pieces((rows, cols), most)
    ys = sorted({y for (y0, y1), _ in got for y in (y0, y1)} | set(rows))
    xs = sorted({x for _, (x0, x1) in got for x in (x0, x1)} | set(cols))
    count = np.zeros((len(ys) - 1, len(xs) - 1), np.int64)
    for (y0, y1), (x0, x1) in got:
        assert rows[0] <= y0 < y1 <= rows[1] and cols[0] <= x0 < x1 <= cols[1]
        assert x1 - x0 <= most
        assert (y1 - y0) * (x1 - x0) <= most
        count[ys.index(y0):ys.index(y1), xs.index(x0):xs.index(x1)] += 1
    assert (count == 1).all()
    if (rows[1] - rows[0]) * (cols[1] - cols[0]) <= most:
        assert got == [(rows, cols)]


@settings(max_examples=100, deadline=None)
@given(rows=st.integers(1, 1000), cols=st.integers(1, 3 * ops_argmax.MAX_PIXELS),
       data=st.data())
def test_the_planned_working_memory_is_the_largest_piece_every_box_fits(rows, cols, data):
    """The planner holds one piece's maps (``planner.parts.arg_max_piece_pixels``): exactly
    the whole output's largest piece (so the stream of an unstriped ARG_MAX touches all of
    it), and every piece of any stripe's box cut as the stream cuts it fits in it."""
    q = QOp(kind=Op.ARG_MAX, inputs=[], in_shapes=[(1, rows, cols, 4)], in_dtypes=["int8"],
            out_shape=(1, rows, cols), out_dtype="int32")
    most = arg_max_piece_pixels(rows, cols)
    whole = ops_argmax.pieces(((0, rows), (0, cols)), most)
    assert whole == ops_argmax.pieces(((0, rows), (0, cols)))
    assert max((y1 - y0) * (x1 - x0) for (y0, y1), (x0, x1) in whole) == most
    assert ops_argmax.argmax_work_bytes(q) == arg_max_work_bytes(most, 4)
    y0 = data.draw(st.integers(0, rows - 1))
    x0 = data.draw(st.integers(0, cols - 1))
    box = ((y0, data.draw(st.integers(y0 + 1, rows))), (x0, data.draw(st.integers(x0 + 1, cols))))
    for (y0, y1), (x0, x1) in ops_argmax.pieces(box, most):
        assert (y1 - y0) * (x1 - x0) <= most


@pytest.mark.parametrize("shape", [(1, 300, 300, 16), (1, 1, 70_000, 8)])
def test_a_lone_arg_max_holds_one_pieces_maps_within_velas_sram(shape, tmp_path):
    """Each piece reuses the working memory the previous one was packed and pooled in, so a
    lone ARG_MAX over more pixels than one operation takes holds its input, its output and
    one piece's maps (planned = touched on the functional model), at most Vela 5.2
    ``--optimise Size``'s SRAM (which frees the input once packed), and equals TFLite Micro."""
    data = tb.arg_max(shape, "int8", (0.05, 3))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (stream,) = cm.plan_report["streams"].values()
    pixels = math.prod(shape[:-1])
    piece = arg_max_piece_pixels(*arg_max_rows_cols(shape))
    assert piece < pixels
    assert stream["work_bytes"] == arg_max_work_bytes(piece, shape[-1])
    assert stream["sram_high_water_bytes"] == stream["planned_peak_bytes"] == \
        pixels * shape[-1] + 4 * pixels + stream["work_bytes"], stream
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    assert stream["sram_high_water_bytes"] <= run_vela(str(path), "ethos-u55-128", "--optimise",
                                                       "Size").sram_bytes
    _equal(data, cm, "int8")


def test_a_deeper_arg_max_stays_a_tflite_operator_naming_why():
    data = tb.arg_max((1, 2, 3, 128), "int8", (0.05, 3))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert ("ARG_MAX over a depth of 128; the NPU packs the index into 7 bits, at most 127 "
            "channels") in report, report
    _equal(data, cm, "int8")


def test_an_arg_max_along_another_axis_stays_a_tflite_operator():
    x = tb.T([1, 4, 5, 6], "int8", scale=0.05, zp=3)
    y = tb.T([1, 5, 6], "int32")
    axis = tb.T([1], "int32", data=np.asarray([1], np.int32))

    def options(b):
        tflite.ArgMaxOptionsStart(b)
        tflite.ArgMaxOptionsAddOutputType(b, tflite.TensorType.INT32)
        return tflite.ArgMaxOptionsEnd(b)

    data = tb.serialize([x, y, axis], [(tb.BO.ARG_MAX, tb.BOPT.ArgMaxOptions, options,
                                        [0, 2], [1])], [0], [1])
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "ARG_MAX along axis 1 of a 4-D tensor" in report, report
    _equal(data, cm, "int8")


@pytest.mark.parametrize("budget", ["smallest", None])
def test_arg_max_after_convolutions_is_in_the_same_planned_ethos_u_operator(budget):
    """The ARG_MAX's input another NPU operation's output in the plan's arena, its working
    memory a block the plan holds (its Part's ``work_bytes``), so the stream touches exactly
    the plan's peak (emulated = estimated)."""
    data = tb.conv_arg_max(np.random.RandomState(0))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False,
                           **({"budget": budget} if budget else {}))
    assert [p.placed_on for p in cm.placement] == ["ethos-u"] * 3
    assert len({p.operator for p in cm.placement}) == 1
    assert "arg_max" in cm.plan_table
    (stream,) = cm.plan_report["streams"].values()
    assert stream["schedule"] == "plan" and stream["realizes_plan"], stream
    assert stream["work_bytes"] == 2 * 24 * 20 * 16 + 2 * 24 * 20
    assert stream["sram_high_water_bytes"] == stream["planned_peak_bytes"], stream
    _equal(data, cm, "int8", seed=3)


def _box_on_the_functional_model(shape, dtype: str, out: str, levels: int, box) -> None:
    """``ops_argmax.argmax_ops`` over ``box`` of whole (h, w, c) tensors on the functional
    model: the box's pixels get numpy's first-maximum index, every other output word keeps
    its sentinel."""
    h, w, c = shape
    (y0, y1), (x0, x1) = box
    api = vela_api()
    rs = np.random.RandomState(h * 1000 + w * 100 + c)
    x = tb.tied_codes((h, w, c), dtype, rs, levels)
    q = QOp(kind=Op.ARG_MAX, inputs=[], in_shapes=[(1, h, w, c)], in_dtypes=[dtype],
            out_shape=(1, h, w), out_dtype=out)
    size = np.dtype(out).itemsize
    out_at = -(-x.nbytes // 16) * 16
    work = out_at + h * w * size + 16
    acc = npu_accelerator("ethos-u55-128")
    flash = Flash()
    em = Emission(flash, lut_address("ethos-u55-128"), lambda npu: block_config(npu, acc),
                  work, accelerator="ethos-u55-128")
    ops = ops_argmax.argmax_ops(q, [FmSlot(1, 0, (h, w, c), dtype, 0.05, 3)],
                                FmSlot(1, out_at, (1, h, w), out, None, 0), em, box)
    scratch = np.zeros(work + ops_argmax.argmax_work_bytes(q), np.uint8)
    scratch[:x.nbytes] = x.reshape(-1).view(np.uint8)
    scratch[out_at:out_at + h * w * size] = np.full(h * w, -7, out).view(np.uint8)
    shram = np.zeros(accelerator_info("ethos-u55-128").shram_bytes, np.uint8)
    mem = Memory({0: np.frombuffer(bytes(flash.data), np.uint8).copy(), 1: scratch,
                  SHRAM_REGION: shram})
    run_stream(api.npu_generate_register_command_stream(ops, acc), mem, "ethos-u55-128")
    got = mem.regions[1][out_at:out_at + h * w * size].view(out).reshape(h, w)
    want = np.full((h, w), -7)
    want[y0:y1, x0:x1] = np.argmax(x, axis=-1)[y0:y1, x0:x1]
    assert np.array_equal(got, want), (got, want)


@settings(max_examples=12, deadline=None)
@given(h=st.integers(1, 7), w=st.integers(1, 7), c=st.integers(1, 127),
       dtype=st.sampled_from(["int8", "uint8"]), out=st.sampled_from(["int32", "int64"]),
       levels=st.sampled_from([1, 2, 256]), data=st.data())
def test_every_stripe_box_writes_its_own_indices_and_nothing_else(h, w, c, dtype, out, levels,
                                                                 data):
    """One planner box of whole tensors (the stripes of a plan that stripes it)."""
    y0 = data.draw(st.integers(0, h - 1))
    y1 = data.draw(st.integers(y0 + 1, h))
    x0 = data.draw(st.integers(0, w - 1))
    x1 = data.draw(st.integers(x0 + 1, w))
    _box_on_the_functional_model((h, w, c), dtype, out, levels, ((y0, y1), (x0, x1)))


@settings(max_examples=4, deadline=None)
@given(h=st.integers(1, 3), w=st.integers(88_000, 140_000), c=st.integers(1, 3),
       out=st.sampled_from(["int32", "int64"]), data=st.data())
def test_a_box_over_more_than_65536_pixels_writes_its_own_indices_in_pieces(h, w, c, out,
                                                                            data):
    """A box the registers do not take (more than 65,536 pixels, or a row wider than
    65,536): its pieces, each packed, pooled and cast in turn, write the box and nothing
    else."""
    y0 = data.draw(st.integers(0, h - 1))
    y1 = data.draw(st.integers(y0 + 1, h))
    x0 = data.draw(st.integers(0, w // 4))
    x1 = data.draw(st.integers(x0 + ops_argmax.MAX_PIXELS // (y1 - y0) + 1, w))
    _box_on_the_functional_model((h, w, c), "int8", out, 2, ((y0, y1), (x0, x1)))


@settings(max_examples=6, deadline=None)
@given(shape=_shapes, out=st.sampled_from(["int32", "int64"]))
def test_both_readers_give_one_arg_max_part_reading_whole_depth_pixel_by_pixel(shape, out):
    """The compile path's part matcher (from the TE reads) and the TVM-free TFLite reader
    give one ARG_MAX Part: every output box reads its own pixels' whole depth and nothing
    else, its output the indices' type, costed as Vela's operations (a second cast for the
    high words of int64)."""
    data = tb.arg_max(shape, "int8", (0.05, 3), out)
    graphs = [match_subgraph(lw).graph for lw in lowered_of(data)] + [load_tflite(data)]
    assert len(graphs) == 2
    for graph in graphs:
        (part,) = graph.parts
        assert part.kind == Op.ARG_MAX and part.output.dtype == out
        assert part.output.shape == tuple(shape[:-1])
        for box in boxes(part.output.shape, np.random.RandomState(len(shape)), 8):
            got = propagated_region(part.propagators[0], box, tuple(shape))
            assert got == tuple(box) + ((0, shape[-1]),), (box, got)
        ops = lower_part(part, part.output.shape)
        assert [op.op for op in ops] == ["DepthwiseConv2D", "MaxPool"] + \
            ["DepthwiseConv2D"] * (np.dtype(out).itemsize // 4)
        assert ops[1].kernel == (1, shape[-1]) and ops[1].lut_bytes == 2048
