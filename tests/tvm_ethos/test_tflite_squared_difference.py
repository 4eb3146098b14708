"""TFLite's int8 SQUARED_DIFFERENCE: ``compute.squared_difference`` against TFLite Micro on every
pair of codes (65,536 per quantization); Vela 5.2's NPU form of it (several elementwise
operations with explicit rescales) run on our functional model of the Ethos-U against TFLite
Micro; and ours (``ops_squared_difference``: the same steps as seven operations) compiled and
run against TFLite Micro. Both NPU forms are exact wherever the kernel's int32 left shift does
not wrap; where it does, the operator stays a TFLite operator."""
from __future__ import annotations

import re

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from benchmarks.vela_superset_probes import PROBES
from ethosu_stream.tflite_graph import run_vela_model
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite
from tests.helpers.tflite_oracle import compiled_matches, oracle, tflm_accepts, tflm_oracle
from tests.helpers.vela_cli import VELA, vela_compile
from tvm_ethos.compute import squared_difference as sqd

pytest.importorskip("tflite_micro")


#: every pair of int8 codes: ``A[0, i, j, 0] = i - 128``, ``B[0, i, j, 0] = j - 128``
A = np.repeat(np.arange(-128, 128), 256).reshape(1, 256, 256, 1).astype(np.int8)
B = np.tile(np.arange(-128, 128), 256).reshape(1, 256, 256, 1).astype(np.int8)


def squared_difference_model(in1_q, in2_q, out_q, a_shape=(1, 256, 256, 1),
                             b_shape=(1, 256, 256, 1), dtype="int8") -> bytes:
    """One SQUARED_DIFFERENCE of ``dtype`` inputs shaped ``a_shape`` and ``b_shape``
    (broadcast)."""
    out_shape = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    tensors = [tb.T(list(a_shape), dtype, scale=in1_q[0], zp=in1_q[1]),
               tb.T(list(b_shape), dtype, scale=in2_q[0], zp=in2_q[1]),
               tb.T(out_shape, dtype, scale=out_q[0], zp=out_q[1])]
    return tb.serialize(tensors, [(tb.BO.SQUARED_DIFFERENCE, 0, None, [0, 1], [2])], [0, 1], [2])


def _scale(draw_exp):
    return st.floats(draw_exp[0], draw_exp[1]).map(lambda e: float(np.float32(2.0 ** e)))


_zp = st.integers(-128, 127)
_in_q = st.tuples(_scale((-9, 1)), _zp)
_out_q = st.tuples(_scale((-14, 4)), _zp)


@settings(max_examples=12, deadline=None)
@given(in1_q=_in_q, in2_q=_in_q, out_q=_out_q, same_scale=st.booleans())
@example(in1_q=(1.0, 0), in2_q=(0.5, 3), out_q=(2.0**-16, 0), same_scale=False)  # wraps
def test_the_numpy_kernel_is_tflite_micro_on_every_pair(in1_q, in2_q, out_q, same_scale):
    if same_scale:
        in2_q = (in1_q[0], in2_q[1])
    want = tflm_oracle(squared_difference_model(in1_q, in2_q, out_q), [A, B])[0]
    assert np.array_equal(sqd.tflite_micro(A, B, in1_q, in2_q, out_q), want)


@pytest.mark.slow
@pytest.mark.skipif(not VELA.exists(), reason="Vela 5.2 (the 'vela' extra) is not installed")
@settings(max_examples=6, deadline=None)
@given(in1_q=_in_q, in2_q=_in_q, out_q=_out_q, same_scale=st.booleans())
@example(in1_q=(1.0, 0), in2_q=(0.5, 3), out_q=(2.0**-16, 0), same_scale=False)  # wraps
def test_velas_stream_on_the_functional_model_is_tflite_micro_where_no_shift_wraps(
        in1_q, in2_q, out_q, same_scale):
    """Vela's form on every pair of codes: equal to TFLite Micro where ``npu_refusal`` finds
    nothing, equal to ``compute.squared_difference.npu`` everywhere."""
    if same_scale:
        in2_q = (in1_q[0], in2_q[1])
    model = squared_difference_model(in1_q, in2_q, out_q)
    got = run_vela_model(vela_compile(model), [A, B], "ethos-u55-128")[0][0]
    assert np.array_equal(got, sqd.npu(A, B, in1_q, in2_q, out_q))
    if not sqd.npu_refusal(in1_q, in2_q, out_q):
        assert np.array_equal(got, tflm_oracle(model, [A, B])[0])


@pytest.mark.skipif(not VELA.exists(), reason="Vela 5.2 (the 'vela' extra) is not installed")
def test_velas_broadcast_stream_is_tflite_micro():
    rs = np.random.RandomState(0)
    model = squared_difference_model((0.07, -3), (0.3, 11), (0.9, -120), (1, 6, 5, 16),
                                     (1, 1, 1, 16))
    xs = [rs.randint(-128, 128, (1, 6, 5, 16)).astype(np.int8),
          rs.randint(-128, 128, (1, 1, 1, 16)).astype(np.int8)]
    got = run_vela_model(vela_compile(model), xs, "ethos-u55-128")[0][0]
    assert np.array_equal(got, tflm_oracle(model, xs)[0])


@pytest.mark.skipif(not VELA.exists(), reason="Vela 5.2 (the 'vela' extra) is not installed")
def test_velas_stream_with_both_operands_broadcast_is_tflite_micro():
    """Vela expands one operand (an ADD of it to a zero constant of the output's shape)."""
    rs = np.random.RandomState(1)
    a, b = (1, 6, 1, 16), (1, 1, 5, 1)
    model = squared_difference_model((0.07, -3), (0.3, 11), (0.9, -120), a, b)
    xs = [rs.randint(-128, 128, a).astype(np.int8), rs.randint(-128, 128, b).astype(np.int8)]
    got = run_vela_model(vela_compile(model), xs, "ethos-u55-128")[0][0]
    assert np.array_equal(got, tflm_oracle(model, xs)[0])


def test_a_wrapping_left_shift_is_the_one_difference_and_is_named():
    """An output multiplier above one: TFLite Micro's ``x * (1 << left_shift)`` wraps in 32
    bits, so codes (-128, 0) at unit input scales give -128 there and 127 on the NPU."""
    q1, q2, qo = (1.0, 0), (1.0, 0), (1e-5, 0)
    want = tflm_oracle(squared_difference_model(q1, q2, qo), [A, B])[0]
    assert want[0, 0, 128, 0] == -128
    assert sqd.npu(A, B, q1, q2, qo)[0, 0, 128, 0] == 127
    why = sqd.npu_refusal(q1, q2, qo)
    assert "wraps" in why and "(-128, 0) give -128 there and 127 on the NPU" in why, why
    assert sqd.npu_refusal((1.0, 0), (1.0, 0), (4.0 / 2**14, 0)) == ""


# ----------------------------------------------------------------- ours: ops_squared_difference
_small_q = st.tuples(_scale((-8, 0)), _zp)


@settings(max_examples=6, deadline=None)
@given(hwc=st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 12)),
       broadcast=st.sampled_from([None, "first", "second"]), in1_q=_small_q, in2_q=_small_q,
       out_q=st.tuples(_scale((-6, 2)), _zp), seed=st.integers(0, 2**16))
def test_it_is_on_the_npu_exactly(hwc, broadcast, in1_q, in2_q, out_q, seed):
    """Seven operations (``ops_squared_difference``), outputs equal to TFLite Micro's;
    either operand may be the broadcast one (1x1xC)."""
    full, small = (1, *hwc), (1, 1, 1, hwc[2])
    shapes = {None: (full, full), "first": (small, full), "second": (full, small)}[broadcast]
    cm = compiled_matches(squared_difference_model(in1_q, in2_q, out_q, *shapes), seed=seed)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@st.composite
def _both_broadcast(draw):
    """Two 4-D shapes neither of which is their broadcast's (each broadcast along some axis
    the other is not)."""
    out = draw(st.tuples(st.integers(2, 6), st.integers(2, 6), st.integers(2, 12)))
    a, b = ([d if m else 1 for d, m in zip(out, draw(st.lists(st.booleans(), min_size=3,
                                                                max_size=3)))]
            for _ in range(2))
    full = list(np.broadcast_shapes(tuple(a), tuple(b)))
    assume(a != full and b != full)
    return (1, *a), (1, *b)


@settings(max_examples=6, deadline=None)
@given(shapes=_both_broadcast(), in1_q=_small_q, in2_q=_small_q,
       out_q=st.tuples(_scale((-6, 2)), _zp), seed=st.integers(0, 2**16))
@example(shapes=((1, 6, 1, 16), (1, 1, 5, 16)), in1_q=(0.07, -3), in2_q=(0.3, 11),
         out_q=(0.9, -120), seed=0)
def test_both_operands_broadcast_on_the_npu_exactly(shapes, in1_q, in2_q, out_q, seed):
    """Vela 5.2 takes it (``test_velas_stream_with_both_operands_broadcast_is_tflite_micro``);
    ours expands the first operand, widened, to the output's shape (an ADD to zeros) before
    the SUB broadcasts the second."""
    cm = compiled_matches(squared_difference_model(in1_q, in2_q, out_q, *shapes), seed=seed)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_every_pair_of_codes_on_the_npu_is_tflite_micro():
    q = ((0.0371, -17), (0.0093, 44), (0.011, -128))
    data = squared_difference_model(*q, (1, 256, 256, 1), (1, 256, 256, 1))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    assert np.array_equal(cm.run(A, B)[0].reshape(A.shape), tflm_oracle(data, [A, B])[0])


CHAIN = [1, 16, 16, 16]


def _chain() -> bytes:
    """Three SQUARED_DIFFERENCEs in a row, every tensor int8 of CHAIN's shape (the second
    operand of each the network's second input)."""
    qs = [(0.05, 3), (0.03, -4), (0.2, -100), (0.15, 7), (0.5, -90)]
    ts = [tb.T(CHAIN, "int8", scale=s, zp=z) for s, z in qs]
    ops = [(tb.BO.SQUARED_DIFFERENCE, 0, None, [i, 1], [o]) for i, o in ((0, 2), (2, 3), (3, 4))]
    return tb.serialize(ts, ops, [0, 1], [4])


def test_a_cascade_runs_it_stripe_by_stripe():
    """The smallest plan on an Ethos-U65 stripes the chain; each SQUARED_DIFFERENCE stripe is
    its seven operations over the stripe's boxes, its working memory one stripe, held in the
    plan (``stream_ops.planned_work``: the stream touches the planned peak), and the whole
    chain is one ethos-u operator equal to TFLite Micro."""
    model = _chain()
    target = "ethos-u -accelerator_config=ethos-u65-256"
    cm = compiled_matches(model, target)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"] * 3, cm.placement
    emu = tvm_ethos.compile(model, target + ",llvm", budget="smallest", cache_dir=False,
                            npu_runtime="stream")
    (entry,) = emu.plan_report["streams"].values()
    assert entry["schedule"] == "plan" and entry["realizes_plan"], entry
    assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
        == entry["planned_peak_bytes"], entry
    assert entry["commands"]["NPU_OP_POOL"] > 2 * 3, entry["commands"]      # striped
    assert entry["work_bytes"] < 2 * 4 * 16 * 16 * 16, entry["work_bytes"]  # one stripe
    rs = np.random.RandomState(3)
    xs = [rs.randint(-128, 128, size=CHAIN).astype(np.int8) for _ in range(2)]
    np.testing.assert_array_equal(emu.run(*xs)[0].reshape(CHAIN), tflm_oracle(model, xs)[0])


@pytest.mark.parametrize("a,b", [((1, 16, 1, 16), (1, 1, 16, 16)),    # both broadcast
                                 ((1, 1, 16, 16), (1, 16, 16, 16))])  # columns, held whole
def test_a_stripe_reads_a_broadcast_operand_over_its_own_rows_or_columns(a, b):
    """Two SQUARED_DIFFERENCEs in a row, the second's operand broadcast along the columns;
    the smallest plan on an Ethos-U65 stripes both by rows and columns, and each stripe reads
    an operand held whole along its own rows or columns (``_stripe_of``): the stream touches
    the planned peak and equals TFLite Micro."""
    shapes = [a, b, (1, 16, 16, 16), (1, 16, 1, 16), (1, 16, 16, 16)]
    qs = [(0.05, 3), (0.03, -4), (0.2, -100), (0.04, 7), (0.5, -90)]
    ts = [tb.T(list(sh), "int8", scale=s, zp=z) for sh, (s, z) in zip(shapes, qs)]
    ops = [(tb.BO.SQUARED_DIFFERENCE, 0, None, [0, 1], [2]),
           (tb.BO.SQUARED_DIFFERENCE, 0, None, [2, 3], [4])]
    model = tb.serialize(ts, ops, [0, 1, 3], [4])
    emu = tvm_ethos.compile(model, "ethos-u -accelerator_config=ethos-u65-256,llvm",
                            budget="smallest", cache_dir=False, npu_runtime="stream")
    (entry,) = emu.plan_report["streams"].values()
    assert entry["schedule"] == "plan" and entry["realizes_plan"], entry
    assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
        == entry["planned_peak_bytes"], entry
    assert entry["commands"]["NPU_OP_POOL"] > 2 * 4, entry["commands"]      # striped
    rs = np.random.RandomState(5)
    xs = [rs.randint(-128, 128, size=shapes[i]).astype(np.int8) for i in (0, 1, 3)]
    want = tflm_oracle(model, xs)[0]
    np.testing.assert_array_equal(emu.run(*xs)[0].reshape(want.shape), want)


def test_a_wrapping_quantization_stays_a_tflite_operator_naming_the_pair():

    data = squared_difference_model((1.0, 0), (1.0, 0), (1e-5, 0), (1, 4, 4, 8), (1, 4, 4, 8))
    cm = compiled_matches(data)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "TFLite Micro's 32-bit shift wraps: codes (-128, 0) give -128" in report, report


def test_the_llvm_host_runs_it_exactly():
    compiled_matches(squared_difference_model((0.07, -3), (0.3, 11), (0.9, -120), (1, 6, 5, 16),
                                              (1, 1, 1, 16)), "llvm", seed=3)


@pytest.mark.parametrize("q", [((0.0371, -17), (0.0093, 44), (0.011, -128)),
                               ((0.5, 3), (0.25, -7), (2.0 ** -18, 0))])   # wraps
def test_the_llvm_host_is_tflite_micro_on_every_pair(q):
    """Where the kernel's left shift wraps too: the Ethos-U refuses that quantization, so
    the llvm host runs it, wrapping as TFLite Micro does."""
    data = squared_difference_model(*q)
    cm = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    assert cm.partition_summary == ({"llvm": 1} if sqd.npu_refusal(*q) else {"ethos-u": 1})
    want = tflm_oracle(data, [A, B])[0]
    assert np.array_equal(cm.run(A, B)[0].reshape(want.shape), want)


@pytest.mark.parametrize("b_shape", [(1, 8, 8, 16), (1, 1, 1, 16)])
def test_the_planner_costs_it_as_its_seven_operations(b_shape):
    """A SQUARED_DIFFERENCE Part is the stream's two widening pools, the two MULs by the
    input multipliers, the SUB (the broadcast operand its second), the square and the output
    MUL into 8 bits."""
    graph = load_tflite(squared_difference_model((0.05, 3), (0.03, -4), (0.2, -100),
                                                 (1, 8, 8, 16), b_shape))
    (part,) = graph.parts
    ops = lower_part(part, part.output.shape)
    assert [(o.npu.lower(), o.op) for o in ops] == [
        ("pooling", "AvgPool"), ("elementwise", "Mul"), ("pooling", "AvgPool"),
        ("elementwise", "Mul"), ("elementwise", "Sub"), ("elementwise", "Mul"),
        ("elementwise", "Mul")], ops
    assert ops[4].ifm2 == b_shape and ops[-1].ofm_bits == 8
    assert all(o.ofm_bits == 32 for o in ops[:-1])


def test_the_planner_costs_both_broadcast_with_the_expanding_add():
    """Both inputs broadcast: the first, widened and scaled, expanded to the output's shape
    by an ADD (its second operand the first input's shape), then the SUB broadcasts the
    second."""
    graph = load_tflite(squared_difference_model((0.05, 3), (0.03, -4), (0.2, -100),
                                                 (1, 8, 1, 16), (1, 1, 8, 16)))
    (part,) = graph.parts
    ops = lower_part(part, part.output.shape)
    assert [o.op for o in ops] == ["AvgPool", "Mul", "Add", "AvgPool", "Mul", "Sub", "Mul",
                                   "Mul"], ops
    assert ops[2].ifm2 == (1, 8, 1, 16) and ops[2].ofm == (1, 8, 8, 16)
    assert ops[5].ifm2 == (1, 1, 8, 16)


# ------------------------------------------------------------------------------------- int16
#: TFLite Micro's int16 kernel takes zero points 0 only
_q16 = st.tuples(_scale((-16, -4)), st.just(0))
_EXTREMES = np.array([-32768, -32767, -1, 0, 1, 32766, 32767], np.int16)


def _int16_inputs(shape, rs) -> np.ndarray:
    """Uniform int16 codes, the extremes first (every pair of them where both operands hold
    them along different axes)."""
    x = rs.randint(-32768, 32768, size=shape).astype(np.int16)
    flat = x.reshape(-1)
    flat[:min(len(flat), len(_EXTREMES))] = _EXTREMES[:len(flat)]
    return x


def _int16_matches(data: bytes, target: str, seed: int):
    """``data`` compiled for ``target``, its outputs on extreme and random codes equal to
    TFLite Micro's; the compiled model back for placement checks."""
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = [_int16_inputs(s.shape, rs) for s in cm.inputs]
        want = tflm_oracle(data, xs)[0]
        assert np.array_equal(cm.run(*xs)[0].reshape(want.shape), want)
    return cm


@settings(max_examples=10, deadline=None)
@given(in1_q=_q16, in2_q=_q16, out_q=st.tuples(_scale((-30, -2)), st.just(0)),
       seed=st.integers(0, 2**16))
@example(in1_q=(1.0, 0), in2_q=(1.0, 0), out_q=(1e-3, 0), seed=0)   # wraps
def test_the_int16_numpy_kernel_is_tflite_micro(in1_q, in2_q, out_q, seed):
    """Every pair of the extremes (and random codes) against TFLite Micro's int16 kernel."""
    rs = np.random.RandomState(seed)
    a = np.concatenate([np.repeat(_EXTREMES, len(_EXTREMES)),
                        rs.randint(-32768, 32768, 4047)]).astype(np.int16).reshape(1, 64, 64, 1)
    b = np.concatenate([np.tile(_EXTREMES, len(_EXTREMES)),
                        rs.randint(-32768, 32768, 4047)]).astype(np.int16).reshape(1, 64, 64, 1)
    data = squared_difference_model(in1_q, in2_q, out_q, a.shape, b.shape, "int16")
    want = tflm_oracle(data, [a, b])[0]
    assert np.array_equal(sqd.tflite_micro(a, b, in1_q, in2_q, out_q, dtype="int16"), want)


@settings(max_examples=10, deadline=None)
@given(in1_q=_q16, in2_q=_q16, out_q=st.tuples(_scale((-30, 0)), st.just(0)))
@example(in1_q=(1.0, 0), in2_q=(1.0, 0), out_q=(1e-3, 0))
@example(in1_q=(2.0 ** -15, 0), in2_q=(2.0 ** -15, 0), out_q=(2.0 ** -28, 0))
def test_the_int16_refusal_is_where_the_left_shift_wraps(in1_q, in2_q, out_q):
    """Brute force over every difference of scaled codes two int16 inputs reach (all of them:
    each operand's scaled codes form a set, and the differences are that sets' difference):
    ``npu_refusal`` is empty exactly when no square, shifted left, leaves int32 (where none
    does, TFLite Micro's kernel and the NPU's 64-bit steps are the same arithmetic)."""
    codes = np.arange(-32768, 32768, dtype=np.int64)
    sc = sqd.scales(in1_q, in2_q, out_q, "int16")
    x1 = np.unique(sqd._scaled(codes, in1_q, sc.input1, "int16"))
    x2 = np.unique(sqd._scaled(codes, in2_q, sc.input2, "int16"))
    wraps = False
    for u in (x1.min(), x1.max()):   # the square is largest at an end of either set
        d = np.abs(u - x2)
        wraps |= bool(((d * d) << max(sc.output.shift, 0)).max() >= 1 << 31)
    why = sqd.npu_refusal(in1_q, in2_q, out_q, dtype="int16")
    assert (why != "") == wraps, why
    if not wraps:
        a, b = codes[:, None][::97], codes[None, :][:, ::89]
        assert np.array_equal(sqd.tflite_micro(a, b, in1_q, in2_q, out_q, dtype="int16"),
                              sqd.npu(a, b, in1_q, in2_q, out_q, dtype="int16"))


@settings(max_examples=5, deadline=None)
@given(hwc=st.tuples(st.integers(1, 5), st.integers(1, 5), st.integers(1, 12)),
       broadcast=st.sampled_from([None, "first", "second", "both"]), in1_q=_q16,
       in2_q=_q16, out_q=st.tuples(_scale((-26, -2)), st.just(0)),
       target=st.sampled_from(["ethos-u", "ethos-u,llvm"]), seed=st.integers(0, 2**16))
@example(hwc=(4, 4, 8), broadcast="second", in1_q=(3e-4, 0), in2_q=(1e-4, 0),
         out_q=(2e-3, 0), target="ethos-u", seed=0)   # the audit's "int16 broadcast 1x1x1x8"
@example(hwc=(4, 4, 8), broadcast=None, in1_q=(2.0 ** -15, 0), in2_q=(2.0 ** -12, 0),
         out_q=(2.0 ** -20, 0), target="ethos-u,llvm", seed=1)
def test_int16_is_on_the_npu_exactly(hwc, broadcast, in1_q, in2_q, out_q, target, seed):
    """The seven operations on int16 codes (eight where both operands broadcast), equal to
    TFLite Micro's int16 kernel on the extremes and random codes."""
    assume(not sqd.npu_refusal(in1_q, in2_q, out_q, dtype="int16"))
    (h, w, c) = hwc
    full = (1, h, w, c)
    shapes = {None: (full, full), "first": ((1, 1, 1, c), full),
              "second": (full, (1, 1, 1, c)), "both": ((1, h, 1, c), (1, 1, w, c))}[broadcast]
    cm = _int16_matches(squared_difference_model(in1_q, in2_q, out_q, *shapes, dtype="int16"),
                        target, seed)
    assert cm.partition_summary == {"ethos-u": 1}


def test_int16_the_llvm_host_is_tflite_micro_wrapping_as_it_does():
    """A wrapping quantization stays a TFLite operator on the Ethos-U, naming the codes; the
    llvm host runs it, and TFLite Micro's kernel, exactly (its wrap included)."""
    data = squared_difference_model((1.0, 0), (1.0, 0), (1e-3, 0), (1, 4, 4, 8), (1, 4, 4, 8),
                                    "int16")
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "32-bit shift wraps: codes (-32768, 32767)" in report, report
    assert _int16_matches(data, "ethos-u,llvm", 2).partition_summary == {"llvm": 1}
    _int16_matches(squared_difference_model((3e-4, 0), (1e-4, 0), (2e-3, 0), (1, 3, 5, 8),
                                            (1, 1, 1, 8), "int16"), "llvm", 3)


def test_int16_with_a_zero_point_is_refused_naming_it():
    """TFLite Micro's int16 kernel requires zero points 0: the importer names the tensor (the
    tflite-micro host keeps the operator, as TFLite Micro's prepare then refuses it)."""
    data = squared_difference_model((3e-4, 5), (1e-4, 0), (2e-3, 0), (1, 4, 4, 8),
                                    (1, 4, 4, 8), "int16")
    why = "int16 SQUARED_DIFFERENCE with zero points other than 0 ('t0' 5)"
    with pytest.raises(tvm_ethos.UnsupportedModelError, match=re.escape(why)):
        tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    (placed,) = tvm_ethos.compile(data, "ethos-u", cache_dir=False).placement
    assert placed.placed_on == "tflite-micro" and why in placed.why, placed.why


@pytest.mark.parametrize("name", ["int16", "int16 broadcast 1x1x1x8"])
def test_the_audits_int16_probes_run_on_the_npu_as_tflite_micro(name):
    """The forms ``benchmarks/vela_superset_audit.py`` found Vela 5.2 taking and ours not."""
    (probe,) = [p for p in PROBES if (p.operator, p.name) == ("SQUARED_DIFFERENCE", name)]
    cm = _int16_matches(probe.build(), "ethos-u -accelerator_config=ethos-u55-128", 0)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement


# ------------------------------------------------------------------------------------- uint8
def test_uint8_is_refused_as_no_kernel_defines_it():
    """Neither TFLite Micro's SQUARED_DIFFERENCE nor LiteRT's takes uint8 (both oracles refuse
    the model), so no result exists to be exact against: the importer refuses it naming both
    kernels' types, and the tflite-micro host keeps it a TFLite operator saying why."""
    data = squared_difference_model((0.05, 128), (0.03, 120), (0.09, 125), (1, 4, 4, 8),
                                    (1, 4, 4, 8), "uint8")
    codes = np.arange(128, dtype=np.uint8).reshape(1, 4, 4, 8)
    with pytest.raises(RuntimeError, match="SquaredDifference only supports"):
        oracle(data, [codes, codes[..., ::-1].copy()])
    assert tflm_accepts(data) != "ok"
    why = ("a uint8 SQUARED_DIFFERENCE is defined by no kernel: TFLite Micro's takes float32, "
           "int32, int8 and int16, LiteRT's float32, int32 and int8 (quantize it to int8)")
    with pytest.raises(tvm_ethos.UnsupportedModelError, match=re.escape(why)) as err:
        tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    assert "\n" not in str(err.value)
    (placed,) = tvm_ethos.compile(data, "ethos-u", cache_dir=False).placement
    assert placed.placed_on == "tflite-micro" and why in placed.why, placed.why
