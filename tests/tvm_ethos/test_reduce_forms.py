"""Issue 28's reductions that Vela 5.2 runs on the NPU beyond the int8 ones over height and
width: SUM, REDUCE_MAX and REDUCE_MIN over the height or the width alone (one window of the
reduced extent swept along the kept axis, ``ops_reduce``; past one kernel bands of rows,
``ops_reduce_split``); of uint8 codes over height and width, the depth or both (the NPU
subtracts a uint8 zero point as an int8 one, a uint8 max pool compares codes as the int8 one
does, and ``255 - v`` is the uint8 bitwise NOT that reverses their order); an int16 SUM over
the height, the width, both or the depth with any of them (TFLite Micro's int16 kernel);
an int16 REDUCE_MAX over the height, the width or the depth with any of them; an int16
REDUCE_MIN over the height, the width, both or the depth with any of them (its NOT ``-1 - v``
an elementwise SUB from a constant -1, as Vela's). Each equals the oracle (TFLite Micro;
LiteRT's reference kernels for uint8 and the int16 REDUCE_MAX / REDUCE_MIN, which TFLite
Micro lacks) on ``ethos-u`` (every operator on the NPU), on the stream of ``ethos-u,llvm`` and
on the ``llvm`` host's integer kernel, on random inputs and the extremes (every code the
least, the greatest, alternating)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from ethos_arch.ops import Op
from planner.parts import reduce_over_depth_work_bytes
from planner.perf.ethos_u import lower_part
from planner.perf.ethos_u_npu import ELEMENTWISE, POOLING
from planner.tflite import load_tflite
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tests.tvm_ethos.test_reduce_split import _exact, check_both_targets, reduce_model
from tvm_ethos.backends.ethos_u.ops_reduce import not_table

pytest.importorskip("ethosu.vela")


def _exact_everywhere(model: bytes, seed: int = 0, reference=oracle) -> dict:
    """Exact on ``ethos-u``, the stream of ``ethos-u,llvm`` and the ``llvm`` host."""
    entry = check_both_targets(model, seed, reference)
    _exact(tvm_ethos.compile(model, "llvm", cache_dir=False), model, seed, reference)
    return entry


@pytest.mark.parametrize("dtype,least", [("int8", -128), ("uint8", 0)])
def test_the_not_table_reverses_the_codes_of_its_type(dtype, least):
    table = not_table(dtype)
    codes = np.arange(least, least + 256)
    # entry i is code least + i's NOT: a code of the type, the order reversed, an involution
    assert sorted(table) == list(codes)
    assert list(table) == list(codes[::-1])
    assert all(table[table[i] - least] == codes[i] for i in range(256))


def test_the_not_table_of_int16_is_refused_naming_the_types_it_holds():
    with pytest.raises(tvm_ethos.errors.TvmEthosError, match="int16 codes.*int8 or uint8"):
        not_table("int16")


#: one in the default suite (the NOT table and the single-window pool), more slow
FORMS = {
    "min-uint8-8x8-hw": ("REDUCE_MIN", (1, 8, 8, 4), (1, 2), True),
}
MORE_FORMS = {
    "max-uint8-over-depth-and-height": ("REDUCE_MAX", (1, 8, 8, 4), (1, 3), False),
    "sum-uint8-8x8-hw": ("SUM", (1, 8, 8, 4), (1, 2), True),
    "max-uint8-8x8-hw": ("REDUCE_MAX", (1, 8, 8, 4), (1, 2), False),
    "min-uint8-over-depth": ("REDUCE_MIN", (1, 8, 8, 4), (3,), True),
    "min-uint8-whole": ("REDUCE_MIN", (1, 8, 8, 4), (1, 2, 3), False),
    "max-uint8-300x4-bands": ("REDUCE_MAX", (1, 300, 4, 4), (1, 2), True),
    "min-uint8-300x4-bands": ("REDUCE_MIN", (1, 300, 4, 4), (1, 2), True),
    "min-uint8-300-rows-and-depth": ("REDUCE_MIN", (1, 300, 3, 2), (1, 3), False),
    "sum-uint8-over-depth": ("SUM", (1, 8, 8, 4), (3,), False),
    "sum-uint8-whole": ("SUM", (1, 8, 8, 4), (1, 2, 3), True),
    "sum-uint8-300x4-bands": ("SUM", (1, 300, 4, 4), (1, 2), True),
    "sum-uint8-300-rows-and-depth": ("SUM", (1, 300, 3, 5), (1, 3), False),
}


def _uint8_form(kind, shape, axes, keep, seed=0):
    q = (0.05, 130)
    model = reduce_model(kind, shape, axes, keep, "uint8", q, (2.0, 120) if kind == "SUM" else q)
    return _exact_everywhere(model, seed)


@pytest.mark.parametrize("case", sorted(FORMS))
def test_uint8_reductions_equal_litert(case):
    _uint8_form(*FORMS[case])


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(MORE_FORMS))
def test_more_uint8_reductions_equal_litert(case):
    _uint8_form(*MORE_FORMS[case])


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(["SUM", "REDUCE_MAX", "REDUCE_MIN"]), h=st.integers(1, 300),
       w=st.integers(1, 9), c=st.integers(1, 6),
       axes=st.sampled_from([(1, 2), (3,), (1, 3), (2, 3), (1, 2, 3)]), keep=st.booleans(),
       scale=st.floats(0.002, 0.5), zp=st.integers(0, 255), sum_scale=st.floats(0.5, 50),
       sum_zp=st.integers(0, 255), seed=st.integers(0, 2**16))
def test_uint8_reductions_of_any_shape_and_quantization_equal_litert(
        kind, h, w, c, axes, keep, scale, zp, sum_scale, sum_zp, seed):
    out_q = (sum_scale, sum_zp) if kind == "SUM" else (scale, zp)
    model = reduce_model(kind, (1, h, w, c), axes, keep, "uint8", (scale, zp), out_q)
    _exact_everywhere(model, seed)


# --- over the height or the width alone
#: SUM's output scale: a sum needs a wider one
_SUM_Q = {"int8": (2.0, -2), "uint8": (2.0, 120)}
_IN_Q = {"int8": (0.05, 3), "uint8": (0.05, 130)}


def _one_axis(kind, shape, axis, keep, dtype, seed=0, in_q=None, out_q=None):
    in_q = in_q or _IN_Q[dtype]
    out_q = in_q if kind != "SUM" else (out_q or _SUM_Q[dtype])
    model = reduce_model(kind, shape, (axis,), keep, dtype, in_q, out_q)
    return _exact_everywhere(model, seed, tflm_oracle if dtype == "int8" else oracle)


#: one kernel over one axis: SUM's convolution and the max pool (REDUCE_MIN is between
#: the NOT tables), more slow
ONE_AXIS = {
    "sum-height": ("SUM", (1, 8, 8, 4), 1, True, "int8"),
    "max-width": ("REDUCE_MAX", (1, 8, 8, 4), 2, False, "int8"),
}
MORE_ONE_AXIS = {
    "min-height": ("REDUCE_MIN", (1, 8, 8, 4), 1, False, "int8"),
    "sum-width": ("SUM", (1, 8, 8, 4), 2, False, "int8"),
    "max-height": ("REDUCE_MAX", (1, 8, 8, 4), 1, True, "int8"),
    "min-width": ("REDUCE_MIN", (1, 8, 8, 4), 2, True, "int8"),
    "sum-height-100-rows": ("SUM", (1, 100, 8, 4), 1, True, "int8"),
    "max-height-300-rows": ("REDUCE_MAX", (1, 300, 4, 4), 1, True, "int8"),
    "min-height-300-rows": ("REDUCE_MIN", (1, 300, 4, 4), 1, False, "int8"),
    "sum-width-uint8": ("SUM", (1, 5, 8, 3), 2, True, "uint8"),
    "min-height-uint8": ("REDUCE_MIN", (1, 5, 8, 3), 1, True, "uint8"),
}


@pytest.mark.parametrize("case", sorted(ONE_AXIS))
def test_reductions_over_one_axis_equal_tflite_micro(case):
    _one_axis(*ONE_AXIS[case])


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(MORE_ONE_AXIS))
def test_more_reductions_over_one_axis_equal_tflite_micro(case):
    _one_axis(*MORE_ONE_AXIS[case])


@st.composite
def _quantizations(draw, kind, dtype):
    info = np.iinfo(dtype)
    in_q = (draw(st.floats(0.002, 0.5)), draw(st.integers(int(info.min), int(info.max))))
    out_q = (draw(st.floats(0.5, 50)), draw(st.integers(int(info.min), int(info.max))))
    return in_q, out_q


@pytest.mark.slow
@settings(max_examples=15, deadline=None)
@given(data=st.data(), kind=st.sampled_from(["SUM", "REDUCE_MAX", "REDUCE_MIN"]),
       dtype=st.sampled_from(["int8", "uint8"]), axis=st.sampled_from([1, 2]),
       h=st.integers(1, 300), w=st.integers(1, 12), c=st.integers(1, 6), keep=st.booleans(),
       seed=st.integers(0, 2**16))
def test_reductions_over_one_axis_of_any_shape_and_quantization_equal_tflite_micro(
        data, kind, dtype, axis, h, w, c, keep, seed):
    in_q, out_q = data.draw(_quantizations(kind, dtype))
    _one_axis(kind, (1, h, w, c), axis, keep, dtype, seed, in_q, out_q)


# --- int16 SUM over the height, the width or both (TFLite Micro's int16 kernel; LiteRT's
# int16 SUM computes another result, so TFLite Micro is the oracle)
def _int16_sum(shape, axes, keep, in_q=(2.0**-12, 0), out_q=(2.0**-9, 0), seed=0):
    model = reduce_model("SUM", shape, axes, keep, "int16", in_q, out_q)
    return _exact_everywhere(model, seed, tflm_oracle)


def test_an_int16_sum_over_the_width_equals_tflite_micro():
    _int16_sum((1, 8, 8, 4), (2,), True)


@pytest.mark.slow
def test_an_int16_sum_over_height_and_width_equals_tflite_micro():
    _int16_sum((1, 8, 8, 4), (1, 2), False)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(h=st.integers(1, 300), w=st.integers(1, 12), c=st.integers(1, 6),
       axes=st.sampled_from([(1, 2), (1,), (2,)]), keep=st.booleans(),
       in_q=st.tuples(st.floats(1e-4, 0.05), st.integers(-32768, 32767)),
       out_q=st.tuples(st.floats(1e-3, 2.0), st.integers(-32768, 32767)),
       seed=st.integers(0, 2**16))
def test_int16_sums_of_any_shape_and_quantization_equal_tflite_micro(
        h, w, c, axes, keep, in_q, out_q, seed):
    _int16_sum((1, h, w, c), axes, keep, in_q, out_q, seed)


# --- int16 SUM over the depth with any of H and W: one convolution (past one kernel the
# pools of bands, ops_reduce_split), as TFLite Micro's int16 kernel rescales sum(x - zp)
INT16_SUMS_OVER_DEPTH = {
    "depth": ((1, 8, 8, 4), (3,), True),
    "whole": ((1, 8, 8, 4), (1, 2, 3), False),
    "depth-and-height-zero-points": ((1, 5, 7, 3), (1, 3), False, (0.003, -77), (0.7, 1234)),
    "300-rows-and-depth": ((1, 300, 3, 5), (1, 3), False),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(INT16_SUMS_OVER_DEPTH))
def test_int16_sums_over_the_depth_equal_tflite_micro(case):
    _int16_sum(*INT16_SUMS_OVER_DEPTH[case])


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(h=st.integers(1, 300), w=st.integers(1, 9), c=st.integers(1, 12),
       axes=st.sampled_from([(3,), (1, 3), (2, 3), (1, 2, 3)]), keep=st.booleans(),
       in_q=st.tuples(st.floats(1e-4, 0.05), st.integers(-32768, 32767)),
       out_q=st.tuples(st.floats(1e-3, 2.0), st.integers(-32768, 32767)),
       seed=st.integers(0, 2**16))
def test_int16_sums_over_the_depth_of_any_shape_and_quantization_equal_tflite_micro(
        h, w, c, axes, keep, in_q, out_q, seed):
    _int16_sum((1, h, w, c), axes, keep, in_q, out_q, seed)


@pytest.mark.parametrize("shape, axes", [((1, 4, 4, 3000), (1, 2, 3)),
                                         ((1, 300, 100, 2), (1, 2, 3))],
                         ids=["one-convolution", "bands"])
def test_an_int16_sum_whose_sum_may_leave_32_bits_stays_a_tflite_operator_naming_it(
        shape, axes):
    """TFLite Micro adds int16 codes in int32: past 32768 of them the NPU's sum differs."""
    model = reduce_model("SUM", shape, axes, True, "int16", (2.0**-12, 0), (2.0**-9, 0))
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "whose sum may leave 32 bits" in placed.why and "32768" in placed.why, placed.why


# --- int16 REDUCE_MAX over the height, the width or the depth alone (LiteRT's int16 kernel,
# zero point 0 and the output quantized as the input: TFLite Micro has none)
@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(h=st.integers(1, 300), w=st.integers(1, 12), c=st.integers(1, 6),
       axes=st.sampled_from([(1,), (2,), (3,)]), keep=st.booleans(),
       scale=st.floats(1e-4, 0.05), seed=st.integers(0, 2**16))
def test_int16_reduce_max_over_one_axis_equals_litert(h, w, c, axes, keep, scale, seed):
    q = (scale, 0)
    model = reduce_model("REDUCE_MAX", (1, h, w, c), axes, keep, "int16", q, q)
    _exact_everywhere(model, seed, oracle)


# --- int16 REDUCE_MAX / REDUCE_MIN over the depth with the height, the width or both (the
# per-pixel maxima in int16 working memory; REDUCE_MIN between SUBs from -1)
def _int16_over_depth(kind, shape, axes, keep, scale=2.0**-12, seed=0) -> dict:
    q = (scale, 0)
    model = reduce_model(kind, shape, axes, keep, "int16", q, q)
    return _exact_everywhere(model, seed, oracle)


def test_an_int16_reduce_min_over_the_depth_and_height_equals_litert():
    entry = _int16_over_depth("REDUCE_MIN", (1, 8, 8, 4), (1, 3), True)
    assert "NPU_OP_ELEMENTWISE" in entry["commands"], entry["commands"]


@pytest.mark.parametrize("axes", [(1, 3)])
def test_the_estimate_of_an_int16_reduce_min_over_the_depth_prices_the_streams_operations(
        axes):
    """No NOT table of int16 codes: the stream NOTs by SUBs from -1 around its max pools
    (``ops_reduce.negated``), and the planner's estimate prices those SUBs, no table lookup."""
    q = (2.0**-12, 0)
    model = reduce_model("REDUCE_MIN", (1, 6, 5, 11), axes, True, "int16", q, q)
    commands = check_both_targets(model, 0, oracle)["commands"]
    pools = 1 + (1 in axes)
    assert commands.get("NPU_OP_ELEMENTWISE") == 2 and commands.get("NPU_OP_POOL") == pools
    assert "NPU_OP_DMA_START" not in commands, commands
    (part,) = load_tflite(model).parts
    ops = lower_part(part, part.output.shape)
    assert [(o.npu, o.op) for o in ops] == [(ELEMENTWISE, "Sub")] + \
        [(POOLING, "MaxPool")] * pools + [(ELEMENTWISE, "Sub")], ops
    assert all(o.lut_bytes == 0 and o.ifm_bits == o.ofm_bits == 16 for o in ops), ops
    assert ops[0].ifm2_const and ops[-1].ifm2_const


#: past one pool (bands of rows), and every axis with the depth
INT16_OVER_DEPTH = {
    "max-depth-and-height": ("REDUCE_MAX", (1, 8, 8, 4), (1, 3), True),
    "max-depth-and-width": ("REDUCE_MAX", (1, 8, 8, 4), (2, 3), False),
    "max-whole-300-rows": ("REDUCE_MAX", (1, 300, 4, 4), (1, 2, 3), True),
    "min-depth": ("REDUCE_MIN", (1, 5, 7, 3), (3,), False),
    "min-whole": ("REDUCE_MIN", (1, 8, 8, 4), (1, 2, 3), False),
    "min-300-rows-and-depth": ("REDUCE_MIN", (1, 300, 3, 5), (1, 3), False),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(INT16_OVER_DEPTH))
def test_more_int16_reductions_over_the_depth_equal_litert(case):
    _int16_over_depth(*INT16_OVER_DEPTH[case])


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(kind=st.sampled_from(["REDUCE_MAX", "REDUCE_MIN"]), h=st.integers(1, 300),
       w=st.integers(1, 9), c=st.integers(1, 6),
       axes=st.sampled_from([(3,), (1, 3), (2, 3), (1, 2, 3)]), keep=st.booleans(),
       scale=st.floats(1e-4, 0.05), seed=st.integers(0, 2**16))
def test_int16_reduce_max_and_min_over_the_depth_of_any_shape_equal_litert(
        kind, h, w, c, axes, keep, scale, seed):
    _int16_over_depth(kind, (1, h, w, c), axes, keep, scale, seed)


def test_int16_working_memory_over_the_depth_counts_two_bytes_a_code():
    """The per-pixel maxima, the bands' maxima and the NOT are int16 codes; an int16
    REDUCE_MIN holds its last pool's result too. 8-bit codes keep one byte each."""
    assert reduce_over_depth_work_bytes(Op.REDUCE_MAX, (1, 8, 8, 4), (1, 3)) == 64
    assert reduce_over_depth_work_bytes(Op.REDUCE_MAX, (1, 8, 8, 4), (1, 3), "int16") == 128
    # NOT 8*8*4*2 = 512, maxima 128, the result 8 codes (aligned after 640)
    assert reduce_over_depth_work_bytes(Op.REDUCE_MIN, (1, 8, 8, 4), (1, 3), "int16") == \
        512 + 128 + 16
    assert reduce_over_depth_work_bytes(Op.REDUCE_MIN, (1, 8, 8, 4), (1, 3), "uint8") == \
        256 + 64
    # 300 rows: two bands of rows after the 16-byte aligned per-pixel maxima
    assert reduce_over_depth_work_bytes(Op.REDUCE_MAX, (1, 300, 4, 4), (1, 2, 3),
                                        "int16") == 2400 + 2 * 2


# --- int16 REDUCE_MIN over the height, the width or both: NOT by SUBs from -1 around the
# max pool, or past one pool its bands (LiteRT's int16 kernel: zero point 0, the output
# quantized as the input)
def test_an_int16_reduce_min_equals_litert():
    q = (2.0**-12, 0)
    model = reduce_model("REDUCE_MIN", (1, 8, 8, 4), (1, 2), False, "int16", q, q)
    entry = _exact_everywhere(model, 0, oracle)
    assert "NPU_OP_ELEMENTWISE" in entry["commands"], entry["commands"]


@pytest.mark.slow
def test_an_int16_reduce_min_past_one_pool_equals_litert():
    """Bands of rows (``ops_reduce_split``) between the SUBs from -1."""
    q = (2.0**-12, 0)
    model = reduce_model("REDUCE_MIN", (1, 600, 3, 5), (1,), True, "int16", q, q)
    _exact_everywhere(model, 0, oracle)


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(h=st.integers(1, 700), w=st.integers(1, 12), c=st.integers(1, 6),
       axes=st.sampled_from([(1, 2), (1,), (2,)]), keep=st.booleans(),
       scale=st.floats(1e-4, 0.05), seed=st.integers(0, 2**16))
def test_int16_reduce_min_of_any_shape_equals_litert(h, w, c, axes, keep, scale, seed):
    q = (scale, 0)
    model = reduce_model("REDUCE_MIN", (1, h, w, c), axes, keep, "int16", q, q)
    _exact_everywhere(model, seed, oracle)
