"""INT16 LEAKY_RELU and RELU6 from a .tflite, on the Ethos-U and the llvm host, equal to
TFLite Micro's int16 kernels on every input code.

LEAKY_RELU: TFLite Micro's ``QuantizeLeakyRelu<int16_t>`` with its double-precision
multipliers (``compute.leaky_relu``); the llvm host and the TIR emulator gather from that
65536-entry table, the Ethos-U runs Vela 5.2's form, two requantizations and their MAX (MIN
for alpha > 1), where that picks the kernel's branch on every code; a negative alpha, whose
branch TFLite Micro negates after rounding, is the two requantizations clamped at the zero
points and their difference (``compute.leaky_relu.negated_branches``). RELU6: TFLite Micro
clamps the codes to [zp, quantized 6] without requantizing, which the NPU's 1x1 depthwise
requantization by 1 with that clamp computes, whatever the output's quantization (it never
reads it).
"""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite
from tests.helpers.tflite_oracle import tflm_oracle
from tvm_ethos.compute import leaky_relu

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

SHAPE = [1, 64, 64, 16]
EVERY_CODE = np.arange(-32768, 32768).astype(np.int16).reshape(SHAPE)
ACCELERATORS = ["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]

scales = st.floats(1e-5, 1e-1).map(lambda v: float(np.float32(v)))
zero_points = st.one_of(st.just(0), st.integers(-1000, 1000))
#: alphas on both sides of 1 (MAX / MIN), 0, and negative ones (the difference)
alphas = st.one_of(st.sampled_from([0.0, 0.2, 1.0, 1.5]),
                   st.floats(-2, 3).map(lambda v: float(np.float32(v))))


def leaky_relu16(in_q, out_q, alpha: float) -> bytes:
    x = tb.T(SHAPE, "int16", scale=in_q[0], zp=in_q[1])
    y = tb.T(SHAPE, "int16", scale=out_q[0], zp=out_q[1])

    def opts(b):
        tflite.LeakyReluOptionsStart(b)
        tflite.LeakyReluOptionsAddAlpha(b, alpha)
        return tflite.LeakyReluOptionsEnd(b)

    return tb.serialize([x, y], [(tb.BO.LEAKY_RELU, tb.BOPT.LeakyReluOptions, opts, [0], [1])],
                        [0], [1])


def relu6_16(in_q, out_q=None) -> bytes:
    out_q = out_q or in_q
    x = tb.T(SHAPE, "int16", scale=in_q[0], zp=in_q[1])
    y = tb.T(SHAPE, "int16", scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(tb.BO.RELU6, 0, None, [0], [1])], [0], [1])


def _compile(model: bytes, target: str):
    return tvm_ethos.compile(model, target, cache_dir=False)


def _assert_every_code(cm, model: bytes) -> None:
    want = tflm_oracle(model, [EVERY_CODE])[0]
    np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].reshape(want.shape), want)


# ------------------------------------------------------------------------------ LEAKY_RELU
@settings(max_examples=40, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points), alpha=alphas)
@example(in_q=(0.3125, 5), out_q=(0.6, -4), alpha=-0.3)      # a negative alpha's tie
@example(in_q=(0.3125, 0), out_q=(0.375, 0), alpha=0.5)      # 5/12: double, not float32
def test_the_table_is_tflite_micros_int16_kernel_on_every_code(in_q, out_q, alpha):
    want = tflm_oracle(leaky_relu16(in_q, out_q, alpha), [EVERY_CODE])[0]
    np.testing.assert_array_equal(leaky_relu.tflm_lut("int16", in_q, out_q, alpha),
                                  want.ravel())


@settings(max_examples=4, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points),
       alpha=st.one_of(st.sampled_from([0.0, 0.2, 2.5, -0.3]), st.floats(-3, 3)),
       accelerator=st.sampled_from(ACCELERATORS))
@example(in_q=(0.001, 5), out_q=(0.0007, -3), alpha=0.2, accelerator="ethos-u55-128")
@example(in_q=(0.001, -7), out_q=(0.002, 3), alpha=1.7, accelerator="ethos-u65-256")
# the |alpha| branch past the lowest code, the output's zero point below 0
@example(in_q=(0.0028, -743), out_q=(2.5e-05, -943), alpha=-0.69,
         accelerator="ethos-u55-256")
def test_the_npu_runs_an_int16_leaky_relu_equal_to_tflite_micro(in_q, out_q, alpha,
                                                                 accelerator):
    model = leaky_relu16(in_q, out_q, alpha)
    cm = _compile(model, f"ethos-u -accelerator_config={accelerator}")
    (placed,) = cm.placement
    why = leaky_relu.two_branch_refusal("int16", in_q, out_q, float(np.float32(alpha)))
    assert placed.placed_on == ("tflite-micro" if why else "ethos-u"), placed.why
    _assert_every_code(cm, model)


@pytest.mark.parametrize("in_q,out_q,alpha", [
    ((0.001, 5), (0.002, -3), -0.3),
    ((0.3125, 5), (0.6, -4), -0.3),              # a tie of the |alpha| branch
    ((0.001, 0), (0.001, 0), -1.0),              # -v: the lowest code past the highest
])
def test_a_negative_alpha_runs_on_the_npu_on_both_hosts(in_q, out_q, alpha):
    """The tflite-micro host's file and the llvm host's package with its stream run by the
    functional model: TFLite Micro's kernel on every code."""
    model = leaky_relu16(in_q, out_q, alpha)
    assert leaky_relu.two_branch_refusal("int16", in_q, out_q, alpha) == ""
    cm = _compile(model, "ethos-u")
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement
    _assert_every_code(cm, model)
    emu = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False, npu_runtime="stream")
    assert set(emu.partition_summary) == {"ethos-u"}, emu.partition_summary
    _assert_every_code(emu, model)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(in_q=st.tuples(scales, st.integers(-32768, 32767)),
       out_q=st.tuples(scales, st.integers(-32768, 32767)),
       alpha=st.floats(-3, 0, exclude_max=True).map(lambda v: float(np.float32(v))))
def test_a_negative_alphas_form_is_the_kernel_on_every_code_for_any_zero_points(in_q, out_q,
                                                                                alpha):
    """The form's arithmetic (``negated_branches``) against TFLite Micro on all 65,536 codes:
    no negative alpha, scale or zero point is refused."""
    want = tflm_oracle(leaky_relu16(in_q, out_q, alpha), [EVERY_CODE])[0]
    np.testing.assert_array_equal(leaky_relu.negated_branches("int16", in_q, out_q, alpha),
                                  want.ravel())
    assert leaky_relu.two_branch_refusal("int16", in_q, out_q, alpha) == ""


@pytest.mark.parametrize("target", ["llvm", "ethos-u,llvm"])
@pytest.mark.parametrize("alpha", [0.2, -0.3])
def test_the_llvm_host_and_the_emulator_are_tflite_micros_int16_kernel(alpha, target):
    model = leaky_relu16((0.001, 5), (0.0007, -3), alpha)
    cm = _compile(model, target)
    where = "ethos-u" if target == "ethos-u,llvm" else "llvm"
    assert set(cm.partition_summary) == {where}, cm.partition_summary
    _assert_every_code(cm, model)


# ----------------------------------------------------------------------------------- RELU6
@settings(max_examples=4, deadline=None)
@given(in_q=st.tuples(scales, zero_points), accelerator=st.sampled_from(ACCELERATORS))
@example(in_q=(1 / 4096, 0), accelerator="ethos-u55-128")
@example(in_q=(1e-4, 30000), accelerator="ethos-u55-256")   # quantized 6 past the int16 range
def test_the_npu_clamps_an_int16_relu6_as_tflite_micro(in_q, accelerator):
    model = relu6_16(in_q)
    cm = _compile(model, f"ethos-u -accelerator_config={accelerator}")
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _assert_every_code(cm, model)


@pytest.mark.parametrize("target", ["llvm", "ethos-u,llvm"])
def test_the_llvm_host_and_the_emulator_clamp_an_int16_relu6(target):
    model = relu6_16((0.0003, -100))
    cm = _compile(model, target)
    assert set(cm.partition_summary) == {target.split(",")[0]}, cm.partition_summary
    _assert_every_code(cm, model)


@pytest.mark.parametrize("out_q,target", [((0.0007, 0), "ethos-u"), ((0.001, 5), "ethos-u,llvm"),
                                          ((0.001, 5), "llvm")])
def test_an_int16_relu6_quantized_unlike_its_input_clamps_the_codes(out_q, target):
    """TFLite's RELU6 clamps codes and ignores the output quantization: the converter
    quantizes it with the input's parameters, so the NPU, the emulator and the host all clamp
    the codes (no requantization) on every input code."""
    model = relu6_16((0.001, -7), out_q)
    cm = _compile(model, target)
    assert set(cm.partition_summary) == {target.split(",")[0]}, cm.partition_summary
    _assert_every_code(cm, model)


CHAIN = [1, 16, 16, 16]


def _leaky_chain() -> bytes:
    """ADD -> LEAKY_RELU -> ADD -> LEAKY_RELU, every tensor int16."""
    ts = [tb.T(CHAIN, "int16", scale=0.001, zp=0) for _ in range(6)]

    def opts(b):
        tflite.LeakyReluOptionsStart(b)
        tflite.LeakyReluOptionsAddAlpha(b, 0.2)
        return tflite.LeakyReluOptionsEnd(b)

    leaky = (tb.BO.LEAKY_RELU, tb.BOPT.LeakyReluOptions, opts)
    ops = [(tb.BO.ADD, 0, None, [0, 1], [2]), (*leaky, [2], [3]),
           (tb.BO.ADD, 0, None, [3, 1], [4]), (*leaky, [4], [5])]
    return tb.serialize(ts, ops, [0, 1], [5])


def test_a_cascade_runs_the_int16_leaky_relu_stripe_by_stripe():
    """The smallest plan on an Ethos-U65 stripes the chain row by row; each LEAKY_RELU
    stripe is its three operations over the stripe's boxes, its working memory one stripe
    (so the stream stays near the plan's peak), and the whole chain is one ethos-u operator
    equal to TFLite Micro."""
    model = _leaky_chain()
    cm = tvm_ethos.compile(model, "ethos-u -accelerator_config=ethos-u65-256",
                           budget="smallest", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"] * 4, cm.placement
    rs = np.random.RandomState(3)
    xs = [rs.randint(-32768, 32768, size=CHAIN).astype(np.int16) for _ in range(2)]
    want = tflm_oracle(model, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)
    emu = tvm_ethos.compile(model, "ethos-u -accelerator_config=ethos-u65-256,llvm",
                            budget="smallest", cache_dir=False, npu_runtime="stream")
    (entry,) = emu.plan_report["streams"].values()
    assert entry["schedule"].startswith("plan"), entry["schedule"]
    assert entry["commands"]["NPU_OP_ELEMENTWISE"] > 16, entry["commands"]   # striped
    assert entry["work_bytes"] < 16 * 16 * 2, entry["work_bytes"]            # one stripe
    np.testing.assert_array_equal(emu.run(*xs)[0].reshape(want.shape), want)


def test_the_planner_costs_an_int16_leaky_relu_as_its_three_operations():
    """An int16 LEAKY_RELU Part is the stream's two requantizing pools and their MAX (an int8
    one stays the one pool carrying a table)."""
    for dtype, kinds in (("int16", ["pooling", "pooling", "elementwise"]), ("int8", ["pooling"])):
        x = tb.T([1, 8, 8, 16], dtype, scale=0.001, zp=0)
        y = tb.T([1, 8, 8, 16], dtype, scale=0.002, zp=0)

        def opts(b):
            tflite.LeakyReluOptionsStart(b)
            tflite.LeakyReluOptionsAddAlpha(b, 0.2)
            return tflite.LeakyReluOptionsEnd(b)

        graph = load_tflite(tb.serialize(
            [x, y], [(tb.BO.LEAKY_RELU, tb.BOPT.LeakyReluOptions, opts, [0], [1])], [0], [1]))
        (part,) = graph.parts
        ops = lower_part(part, part.output.shape)
        assert [o.npu.lower() for o in ops] == kinds, ops
        assert all(o.ifm_bits == o.ofm_bits == int(dtype[3:]) for o in ops)
