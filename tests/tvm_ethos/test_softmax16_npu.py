"""SOFTMAX of int16 codes to int16 ones on the Ethos-U (issue 28): TFLite Micro's int16 kernel
(its two interpolated tables) as the numpy statement; the operator through Relax as every NPU
operator goes (the pattern, the Ethos-U check, a planner Part holding its working memory, the
``stream_ops.SOFTMAX16`` row: ``ops_softmax16``, Vela's form with the 16-bit LUTs), equal to
TFLite Micro on the functional model (``ethos-u``) and in the emulator (``ethos-u,llvm``), also
where Vela 5.2's own stream is one code off (its reciprocal table); planned in one cascade
with the int16x8 convolution before it; read by the planner's TFLite reader as the same Part
and costed as the operations the stream runs; the forms the stream does not take stay
TFLite operators, saying why."""
from __future__ import annotations

import collections

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st
from int16x8_models import _weighted, f32
from test_part_matchers import lowered_of
from test_solitary_movement import compiled_on_the_npu

import tvm_ethos
from ethos_arch.ops import Op
from ethosu_stream.tflite_graph import run_vela_model
from planner.parts import softmax16_work_bytes
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite
from planner.work_memory import WORK_ATTR, WorkMemory
from tests.helpers.tflite_oracle import tflm_oracle
from tvm_ethos.backends.ethos_u.stream_ops import (
    SOFTMAX16,
    SOLITARY_OPS,
    STREAM_OPS,
    WHOLE_OUTPUT_OPS,
    Extent,
    emitter,
    takes_ring_operands,
)
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.compute import softmax16
from tvm_ethos.emulator.part_matchers import match_subgraph

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

Q15 = (1 / 32768, 0)


def softmax16_model(shape, scale, beta=1.0, in_zp=0, out_q=Q15) -> bytes:
    return tb.softmax(None, shape=shape, in_q=(scale, in_zp), dtype="int16", out_q=out_q,
                      beta=beta)


def _inputs(shape, seed) -> list[np.ndarray]:
    """Codes over the whole range, the same narrowed (differences the table resolves), and
    one row all equal."""
    rs = np.random.RandomState(seed)
    wide = rs.randint(-32768, 32768, shape)
    return [wide.astype(np.int16), (wide // rs.randint(2, 3000)).astype(np.int16),
            np.full(shape, -7, np.int16)]


_shapes = st.tuples(st.just(1), st.integers(1, 4), st.integers(1, 70))
_scales = st.floats(1e-5, 0.05)
_betas = st.sampled_from([1.0, 0.5, 2.0, 0.1])


@settings(max_examples=40, deadline=None)
@given(shape=_shapes, scale=_scales, beta=_betas, seed=st.integers(0, 99))
def test_the_numpy_statement_is_tflite_micros_kernel(shape, scale, beta, seed):
    data = softmax16_model(shape, scale, beta)
    for x in _inputs(shape, seed):
        want = tflm_oracle(data, [x])[0].reshape(shape)
        np.testing.assert_array_equal(softmax16.softmax_int16(x, scale, beta), want)


def _compiled(data: bytes, accelerator: str):
    """``data`` on the Ethos-U, its one stream realizing the plan at the planned peak."""
    cm, _ = compiled_on_the_npu(data, accelerator_config=accelerator)
    return cm


@settings(max_examples=5, deadline=None)
@given(shape=_shapes, scale=_scales, beta=_betas,
       accelerator=st.sampled_from(["ethos-u55-64", "ethos-u55-128", "ethos-u65-256"]))
@example(shape=(2, 3, 1, 40), scale=3e-4, beta=1.0, accelerator="ethos-u55-128")
def test_the_npu_stream_is_tflite_micros_kernel(shape, scale, beta, accelerator):
    """Also over a batch: the stream runs rows of the depth whatever the shape."""
    data = softmax16_model(shape, scale, beta)
    cm = _compiled(data, accelerator)
    for x in _inputs(shape, 1):
        want = tflm_oracle(data, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


@settings(max_examples=5, deadline=None)
@given(shape=_shapes, scale=_scales, beta=_betas,
       accelerator=st.sampled_from(["ethos-u55-64", "ethos-u55-128", "ethos-u65-256"]))
@example(shape=(1, 4, 16, 64), scale=1e-4, beta=0.125, accelerator="ethos-u55-128")
@example(shape=(2, 3, 1, 40), scale=3e-4, beta=1.0, accelerator="ethos-u65-256")
def test_on_ethos_u_llvm_the_emulator_is_tflite_micros_kernel(shape, scale, beta, accelerator):
    """The emulator lowers what the NPU computes (``te_ops.lower_softmax16`` with TFLite
    Micro's tables and multiplier), not the llvm host's LiteRT kernel. (The 4-D example's
    table index once crashed TVM's simplifier in the part matcher.)"""
    data = softmax16_model(shape, scale, beta)
    cm = tvm_ethos.compile(data, "ethos-u,llvm", accelerator_config=accelerator,
                           cache_dir=False)
    assert cm.partition_summary == {"ethos-u": 1}, cm.partition_summary
    for x in _inputs(shape, 2):
        want = tflm_oracle(data, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


def test_where_velas_reciprocal_table_is_off_the_stream_here_is_exact():
    """The row of tests/ethosu_stream/test_lut16.py on which Vela 5.2's stream is one code
    off TFLite Micro: this stream carries TFLite Micro's tables."""
    shape, scale, beta = (1, 1, 57), 2.5117e-4, 0.5
    exp, reciprocal = softmax16.tables()
    vela_reciprocal = reciprocal.copy()
    vela_reciprocal[[160, 294]] += [1, -1]
    rs = np.random.RandomState(0)
    for _ in range(2000):
        x = rs.randint(-32768, 32768, shape).astype(np.int16)
        if (softmax16.softmax_int16(x, scale, beta, exp, vela_reciprocal)
                != softmax16.softmax_int16(x, scale, beta)).any():
            break
    else:
        pytest.fail("no row reads the entries where the tables differ")
    data = softmax16_model(shape, scale, beta)
    want = tflm_oracle(data, [x])[0]
    np.testing.assert_array_equal(_compiled(data, "ethos-u55-128").run(x)[0].reshape(want.shape),
                                  want)
    emulated = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    np.testing.assert_array_equal(emulated.run(x)[0].reshape(want.shape), want)


def _add_then_softmax(shape, scale) -> bytes:
    """An int16 ADD feeding the int16 SOFTMAX."""
    a = tb.T(list(shape), "int16", scale=scale, zp=0)
    b = tb.T(list(shape), "int16", scale=scale, zp=0)
    s = tb.T(list(shape), "int16", scale=2 * scale, zp=0)
    y = tb.T(list(shape), "int16", scale=Q15[0], zp=0)

    def add_opts(bld):
        tflite.AddOptionsStart(bld)
        return tflite.AddOptionsEnd(bld)

    def softmax_opts(bld):
        tflite.SoftmaxOptionsStart(bld)
        tflite.SoftmaxOptionsAddBeta(bld, 1.0)
        return tflite.SoftmaxOptionsEnd(bld)

    return tb.serialize([a, b, s, y], [(tb.BO.ADD, tb.BOPT.AddOptions, add_opts, [0, 1], [2]),
                                       (tb.BO.SOFTMAX, tb.BOPT.SoftmaxOptions, softmax_opts,
                                        [2], [3])], [0, 1], [3])


def test_after_an_npu_add_both_run_in_one_ethos_u_operator_and_the_file_is_deterministic():
    shape = (1, 2, 3, 17)
    data = _add_then_softmax(shape, 1e-3)
    cm = tvm_ethos.compile(data, "ethos-u -accelerator_config=ethos-u55-128", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u", "ethos-u"]
    assert len({p.operator for p in cm.placement}) == 1, cm.placement
    exported = cm.tflite
    again = tvm_ethos.compile(data, "ethos-u -accelerator_config=ethos-u55-128",
                              cache_dir=False)
    assert again.tflite == exported
    rs = np.random.RandomState(5)
    for _ in range(3):
        xs = [rs.randint(-32768, 32768, shape).astype(np.int16) for _ in range(2)]
        want = tflm_oracle(data, xs)[0]
        (got,), _ = run_vela_model(exported, xs, "ethos-u55-128")
        np.testing.assert_array_equal(got.reshape(want.shape), want)
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)


def test_beside_an_npu_add_a_softmax_the_stream_refuses_stays_a_tflite_operator_saying_why():
    """65,536 rows: one more than a feature map's width; the ADD before it stays on the NPU."""
    cm = tvm_ethos.compile(_add_then_softmax((1, 2, 32768, 1), 1e-3), "ethos-u",
                           cache_dir=False)
    add, softmax = cm.placement
    assert (add.placed_on, softmax.placed_on) == ("ethos-u", "tflite-micro"), cm.placement
    assert "the Ethos-U does not take it" in softmax.why and "65536 rows" in softmax.why, \
        softmax.why


def _conv_then_softmax(seed: int, shape=(1, 8, 6, 4), cout: int = 12, beta: float = 1.0):
    """An int16x8 CONV_2D 3x3 (TFLite's 16x8 kernel) feeding an int16 SOFTMAX over its
    channels."""
    rs = np.random.RandomState(seed)
    in_scale, mid_scale = f32(rs.uniform(2e-4, 1e-3)), f32(rs.uniform(5e-4, 3e-3))
    tensors = [tb.T(list(shape), "int16", scale=in_scale, zp=0)]
    weights = _weighted(rs, "conv", shape[3], cout, 3, in_scale, 1, tensors)
    out_shape = [1, shape[1], shape[2], cout]
    tensors += [tb.T(out_shape, "int16", scale=mid_scale, zp=0),
                tb.T(out_shape, "int16", scale=Q15[0], zp=0)]

    def conv_opts(b):
        tflite.Conv2DOptionsStart(b)
        tflite.Conv2DOptionsAddPadding(b, tflite.Padding.SAME)
        tflite.Conv2DOptionsAddStrideW(b, 1)
        tflite.Conv2DOptionsAddStrideH(b, 1)
        tflite.Conv2DOptionsAddDilationWFactor(b, 1)
        tflite.Conv2DOptionsAddDilationHFactor(b, 1)
        return tflite.Conv2DOptionsEnd(b)

    def softmax_opts(b):
        tflite.SoftmaxOptionsStart(b)
        tflite.SoftmaxOptionsAddBeta(b, beta)
        return tflite.SoftmaxOptionsEnd(b)

    return tb.serialize(tensors, [
        (tb.BO.CONV_2D, tb.BOPT.Conv2DOptions, conv_opts, [0, *weights], [3]),
        (tb.BO.SOFTMAX, tb.BOPT.SoftmaxOptions, softmax_opts, [3], [4])], [0], [4])


@pytest.mark.parametrize("accelerator, cascades", [("ethos-u65-256", 1), ("ethos-u55-128", 2)])
def test_after_a_16x8_convolution_at_the_least_memory_both_are_one_cascade(accelerator,
                                                                           cascades):
    """A planner Part like every NPU operator's: at ``--budget smallest`` on an Ethos-U65 the
    SOFTMAX shares the convolution's cascade, computed whole (``Device.whole_output``), its
    working memory in that Plan, and the stream realizes the plan at the planned peak; every
    output is TFLite Micro's, on the functional model and in the emulator. On an Ethos-U55
    the network's input lives in the SRAM too, and a cascade would hold it beside the
    SOFTMAX's working memory for no fewer cycles, so two Plans are smaller."""
    data = _conv_then_softmax(3)
    cm, entry = compiled_on_the_npu(data, accelerator_config=accelerator, budget="smallest")
    rows = cm.plan_report["layers"]
    assert len(rows) == 2 and len({r["cascade"] for r in rows}) == cascades, rows
    (row,) = [r for r in rows if r["part"].endswith("softmax")]
    assert tuple(row["stripe"]) == (1, 8, 6, 12), row
    assert entry["work_bytes"] == softmax16_work_bytes(8 * 6, 12), entry
    emulated = tvm_ethos.compile(data, "ethos-u,llvm", accelerator_config=accelerator,
                                 budget="smallest", cache_dir=False)
    assert emulated.partition_summary == {"ethos-u": 2}, emulated.partition_summary
    rs = np.random.RandomState(7)
    for _ in range(3):
        x = rs.randint(-32768, 32768, (1, 8, 6, 4)).astype(np.int16)
        want = tflm_oracle(data, [x])[0]
        for got in (cm.run(x)[0], emulated.run(x)[0]):
            np.testing.assert_array_equal(got.reshape(want.shape), want)


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), h=st.integers(1, 12), w=st.integers(1, 10),
       c=st.integers(1, 6), cout=st.integers(1, 40), beta=_betas,
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]),
       budget=st.sampled_from(["smallest", "system", None]))
def test_after_a_16x8_convolution_at_any_budget_the_stream_is_the_plan_and_exact(
        seed, h, w, c, cout, beta, accelerator, budget):
    data = _conv_then_softmax(seed, (1, h, w, c), cout, beta)
    cm, entry = compiled_on_the_npu(data, accelerator_config=accelerator, budget=budget)
    (row,) = [r for r in cm.plan_report["layers"] if r["part"].endswith("softmax")]
    assert tuple(row["stripe"]) == (1, h, w, cout), row
    rs = np.random.RandomState(seed)
    x = rs.randint(-32768, 32768, (1, h, w, c)).astype(np.int16)
    want = tflm_oracle(data, [x])[0]
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


def test_the_planners_tflite_reader_reads_the_part_the_compile_path_plans():
    """``planner.tflite`` (no TVM) and the part matcher give the int16 SOFTMAX the same Part:
    kind, int16 tensors, beta, the stream's working memory, and so the same operations in the
    cost model."""
    data = _conv_then_softmax(5, beta=0.5)
    (ref,) = [p for p in load_tflite(data).parts if p.kind == Op.SOFTMAX]
    (lw,) = lowered_of(data)
    work = get_registry().get("ethos-u").planner_work
    (mine,) = [mp.part for mp in match_subgraph(lw, work=work).parts
               if mp.part.kind == Op.SOFTMAX]
    for p in (ref, mine):
        assert (p.inputs[0].dtype, p.output.dtype, p.output.shape) == \
            ("int16", "int16", (1, 8, 6, 12)), p
        assert p.attr("beta") == 0.5
        assert p.attr(WORK_ATTR) == WorkMemory(softmax16_work_bytes(8 * 6, 12))
    assert lower_part(ref, ref.output.shape) == lower_part(mine, mine.output.shape)


def test_its_stream_row_is_placed_in_plans_as_the_softmax_row_is():
    """``SOLITARY_OPS`` and ``WHOLE_OUTPUT_OPS`` are read off the rows keyed by operator, so
    the row an int16 SOFTMAX gets (``stream_ops.emitter``) must be emitted as that row is:
    whole, from whole operands, never solitary."""
    q = _Q(Op.SOFTMAX, "int16")
    assert emitter(q) is SOFTMAX16 and emitter(_Q(Op.SOFTMAX, "int8")) is STREAM_OPS[Op.SOFTMAX]
    for em in (SOFTMAX16, STREAM_OPS[Op.SOFTMAX]):
        assert em.extent is Extent.WHOLE and not takes_ring_operands(Op.SOFTMAX, em)
    assert Op.SOFTMAX in WHOLE_OUTPUT_OPS and Op.SOFTMAX not in SOLITARY_OPS


class _Q:
    """The fields ``stream_ops.emitter`` reads of a lowered operator."""

    def __init__(self, kind, dtype):
        self.kind, self.in_dtypes = kind, [dtype]


#: the stream's operation commands by the performance model's kinds of NPU operation
_COMMANDS = {"pooling": "NPU_OP_POOL", "reduce_sum": "NPU_OP_POOL",
             "elementwise": "NPU_OP_ELEMENTWISE"}


@settings(max_examples=4, deadline=None)
@given(shape=_shapes)
def test_the_cost_model_prices_the_operations_the_stream_runs(shape):
    """``planner.perf.ethos_u.lower_part`` of the Part: the stream's thirteen operations by
    kind, and one 2 KiB LUT for each of its two LUT DMAs."""
    data = softmax16_model(shape, 1e-3)
    (entry,) = _compiled(data, "ethos-u55-128").plan_report["streams"].values()
    (part,) = load_tflite(data).parts
    ops = lower_part(part, part.output.shape)
    costed = collections.Counter(_COMMANDS[op.npu] for op in ops)
    ran = {k: v for k, v in entry["commands"].items() if k in _COMMANDS.values()}
    assert ran == dict(costed) and sum(costed.values()) == 13
    luts = [op.lut_bytes for op in ops if op.lut_bytes]
    assert luts == [2048, 2048] and entry["commands"]["NPU_OP_DMA_START"] == 2
    assert entry["dma_bytes"] == {"0->259": sum(luts)}, entry["dma_bytes"]


#: (model, who refuses it, what the reason says): the Ethos-U's check, or the importer for
#: the forms TFLite's int16 kernel does not compute at all
REFUSED = [
    (softmax16_model((1, 4096), 1e-3), "the Ethos-U rejects", "a depth of 4096"),
    (softmax16_model((1, 65536, 1), 1e-3), "the Ethos-U rejects", "65536 rows"),
    (softmax16_model((1, 8), 1e-3, in_zp=3), "the importer refuses", "input zero point 3"),
    (softmax16_model((1, 8), 8.0, beta=1.0), "the importer refuses", "overflows past 15"),
    (softmax16_model((1, 0), 1e-3), "the importer refuses", "empty dimension"),
    (softmax16_model((1, 8), 1e-3, out_q=(1 / 65536, 0)), "the importer refuses",
     "requires (1/32768, 0)"),
]


@pytest.mark.parametrize("model,who,words", REFUSED,
                         ids=["depth", "rows", "input-zero-point", "overflow", "empty",
                              "output-scale"])
def test_forms_the_stream_does_not_take_stay_tflite_operators_saying_why(model, who, words):
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert who in placed.why and words in placed.why, placed.why
    assert "\n" not in placed.why

