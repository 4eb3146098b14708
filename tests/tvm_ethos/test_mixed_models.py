"""Issue 28's NPU operators mixed: random chains and residual branches of 2 to 6 of them
(mixed_models.py), compiled for ``ethos-u`` at the default budget and at the least memory the
planner needs (cascades), run as a board runs them, output bytes equal to TFLite Micro's on
the source model (mixed_run.py); a few also as an ``ethos-u,llvm`` package. The failures the
sweep found (benchmarks/mixed_models.py) are pinned below by their shrunk models."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import HealthCheck, given, settings
from mixed_models import Dtype, Kind, Recipe, Step, build, recipes
from mixed_run import Mismatch, _cascades, _least_memory, check
from operator_models import _opts

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, random_inputs, tflm_accepts
from tvm_ethos.backends.tflite_micro.reference import TflmReference

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

_QUICK = settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
_SWEEP = settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))


@given(recipes())
@_QUICK
def test_mixed_models_equal_tflite_micro(recipe):
    check(build(recipe), runs=1)


@pytest.mark.slow
@given(recipes())
@_SWEEP
def test_mixed_models_equal_tflite_micro_sweep(recipe):
    check(build(recipe), runs=2, llvm=recipe.seed % 4 == 0)


@given(recipes(min_ops=6, max_ops=6))
@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_drawn_model_is_one_tflite_micro_runs(recipe):
    """The generator's models are valid: TFLite Micro prepares every one, and each step is
    one operator (a residual branch adds its 1x1 convolution)."""
    model = build(recipe)
    TflmReference(model)
    ops = tflite.Model.GetRootAsModel(model, 0).Subgraphs(0).OperatorsLength()
    assert len(recipe.steps) <= ops <= 2 * len(recipe.steps)


# ---------------------------------------------------------------- failures the sweep found
@pytest.mark.parametrize("kind", [Kind.MUL, Kind.SUB, Kind.CONCAT])
def test_an_operator_reading_one_tensor_twice_goes_to_the_npu(kind):
    """``x * x``, ``x - x``, ``concat(x, x)``: the operator reads the model's input twice. Its
    group's cut named that input twice among its inputs, so the export refused the group
    ("inputs ['t0', 't0'] are not the compiled model's") and it stayed on the host."""
    model = build(Recipe((1, 6, 4, 4), 3, (Step(kind, (None,), 0), Step(Kind.TANH))))
    out = check(model, llvm=kind is Kind.MUL)
    assert out.placed == {"ethos-u": 2} and not out.host_reasons, out.host_reasons


def test_a_reshape_to_its_own_shape_read_in_part_in_a_cascade_streams():
    """The importer ends a SLICE with a RESHAPE to its own shape; a stride-2 1x1 convolution
    after it reads only some of its rows and columns, so the cascade computes a box of it.
    The stream held a RESHAPE only whole: the subgraph had no command stream, and on the
    tflite-micro host went wholly to TFLite Micro."""
    model = build(Recipe((1, 18, 8, 4), 15064, (Step(Kind.SLICE, ((0, 6, 3, 0), (1, 6, 2, 2))),
                                                Step(Kind.CONV, (4, 1, 2, "SAME", "relu6")))))
    out = check(model, llvm=True)
    assert out.placed == {"ethos-u": 2} and out.cascaded
    cm = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry


# ------------------------------------------- TANH / LOGISTIC at small input scales: which oracle
def _small_scale_activation(kind: str, in_q: tuple) -> tuple[bytes, np.ndarray]:
    """One int8 TANH or LOGISTIC on every input code, its output quantized as TFLite requires."""
    codes = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16, 1)
    return tb.activation(kind, shape=(1, 16, 16, 1), in_q=in_q), codes


#: input quantizations where TFLite Micro's fixed point and LiteRT's float table round a code
#: differently: a LOGISTIC's output (1/256, -128) read by a TANH or a LOGISTIC, and 1/128
_SPLIT = [("tanh", (1 / 256, -128)), ("sigmoid", (1 / 256, -128)), ("sigmoid", (1 / 128, 0))]


@pytest.mark.parametrize(("kind", "in_q"), _SPLIT)
def test_small_scale_tanh_and_logistic_on_the_npu_equal_tflite_micro(kind, in_q):
    """The NPU's table is TFLite Micro's fixed point (rfcs/0007, the LUT section), on the
    tflite-micro host and in an ethos-u,llvm package alike, in the stream and in the "tir"
    emulator of the NPU subgraph; the llvm host's kernel keeps
    LiteRT's float table, its own reference. The oracles differ here, so each check can fail."""
    model, x = _small_scale_activation(kind, in_q)
    tflm, litert = TflmReference(model).run([x])[0], oracle(model, [x])[0]
    assert not np.array_equal(tflm, litert)
    for target, runtime in (("ethos-u", "stream"), ("ethos-u,llvm", "stream"),
                            ("ethos-u,llvm", "tir")):
        cm = tvm_ethos.compile(model, target, npu_runtime=runtime, cache_dir=False)
        assert cm.partition_summary == {"ethos-u": 1}, (target, cm.partition_summary)
        np.testing.assert_array_equal(cm.run(x)[0].reshape(x.shape), tflm,
                                      err_msg=f"{target} ({runtime})")
    host = tvm_ethos.compile(model, "llvm", cache_dir=False).run(x)[0]
    np.testing.assert_array_equal(host.reshape(x.shape), litert)


def test_a_logistic_feeding_a_tanh_equals_tflite_micro():
    """The sweep's case: a LOGISTIC whose output (1/256, -128) a TANH reads, one NPU subgraph.
    Over every input code the LOGISTIC writes -127, one step above its zero point, where the
    TANH's two oracles differ (TFLite Micro 1, LiteRT's table 0)."""
    shape = [1, 16, 16, 1]
    ts = [tb.T(shape, "int8", scale=0.05, zp=0), tb.T(shape, "int8", scale=1 / 256, zp=-128),
          tb.T(shape, "int8", scale=1 / 128, zp=0)]
    model = tb.serialize(ts, [(tb.BO.LOGISTIC, 0, None, [0], [1]),
                              (tb.BO.TANH, 0, None, [1], [2])], [0], [2])
    x = np.arange(-128, 128, dtype=np.int8).reshape(shape)
    want = TflmReference(model).run([x])[0]
    assert not np.array_equal(want, oracle(model, [x])[0])
    for target in ("ethos-u", "ethos-u,llvm"):
        cm = tvm_ethos.compile(model, target, cache_dir=False)
        assert cm.partition_summary == {"ethos-u": 2}, (target, cm.partition_summary)
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want, err_msg=target)


def test_a_tensor_read_only_through_a_pads_border_compiles_on_ethos_u_llvm():
    """The second SLICE reads only the PAD's border, so no stripe of the first SLICE's output
    is ever read: the planner sized its buffer at 0 columns and the schedule folded the
    tensor modulo 0 (ethos-u,llvm's compile failed: "Divide by zero"). Its buffer is one
    element now; the stream still refuses the subgraph (a 0-wide stripe), so the tflite-micro
    host keeps it as TFLite operators."""
    model = build(Recipe((1, 10, 6, 2), 2, (Step(Kind.SLICE, ((0, 7, 5, 0), (1, 3, 1, 1))),
                                            Step(Kind.PAD, (2, 0, 2, 2)),
                                            Step(Kind.SLICE, ((0, 0, 0, 0), (1, 3, 1, 1))))))
    check(model, llvm=True)
    cm = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.partition_summary


# ------------------------------------------------- issue 28's second sweep (recipes(wide=True))
@pytest.mark.parametrize(("in_q", "out_q"), [
    ((0.05, 130), (0.04, 128)),
    pytest.param((0.05, 128), (0.08, 120), marks=pytest.mark.slow),
    pytest.param((0.1, 100), (0.03, 10), marks=pytest.mark.slow)])
def test_a_uint8_relu6_requantizes_to_its_output_as_litert_does(in_q, out_q):
    """The sweep's case (a uint8 RELU6 -> SOFTMAX): TFLite Micro has no uint8 RELU6, LiteRT's
    kernel requantizes the clamped codes to the output's quantization. The converter read
    every RELU6 as TFLite Micro's int8 one (the input codes clamped, the output quantization
    unread), so on ``ethos-u,llvm`` and ``llvm`` up to 53 codes of 256 differed. Every code,
    a scale pair whose float32 and double quotients differ (0.05 -> 0.04) among them."""
    shape = [1, 16, 16, 1]
    model = tb.serialize([tb.T(shape, "uint8", scale=in_q[0], zp=in_q[1]),
                          tb.T(shape, "uint8", scale=out_q[0], zp=out_q[1])],
                         [(tb.BO.RELU6, 0, None, [0], [1])], [0], [1])
    x = np.arange(256, dtype=np.uint8).reshape(shape)
    want = oracle(model, [x])[0]
    for target in ("ethos-u,llvm", "llvm"):
        got = tvm_ethos.compile(model, target, cache_dir=False).run(x)[0]
        np.testing.assert_array_equal(got.reshape(shape), want, err_msg=target)


@given(recipes(wide=True))
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck))
def test_wide_mixed_models_equal_their_oracle(recipe):
    """int8, uint8 and int16 chains of every kind, against TFLite Micro (LiteRT's reference
    kernels where TFLite Micro has none, mixed_run.py)."""
    check(build(recipe), runs=1)


@pytest.mark.slow
@given(recipes(wide=True))
@_SWEEP
def test_wide_mixed_models_equal_their_oracle_sweep(recipe):
    check(build(recipe), runs=2, llvm=recipe.seed % 4 == 0)


@given(recipes(min_ops=6, max_ops=6, wide=True))
@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_wide_model_has_an_oracle(recipe):
    """Every drawn form is one a TFLite kernel defines: TFLite Micro runs the model, or
    LiteRT's reference kernels do (a uint8 chain)."""
    model = build(recipe)
    x = random_inputs(model, np.random.RandomState(0))
    assert len(oracle(model, x)) == 1
    if recipe.dtype is not Dtype.UINT8 and not any(
            s.kind is Kind.QUANTIZE and s.args[0] is Dtype.UINT8 for s in recipe.steps):
        assert tflm_accepts(model) == "ok", recipe


def test_a_fully_connected_keeping_its_dimensions_over_several_rows_compiles_on_ethos_u_llvm():
    """The wide sweep's case: an int8 FULLY_CONNECTED (keep_num_dims) of a 1x5x4x3 input.
    TVM's converter multiplied the 4-D input as it is, a part no matcher knows, so planning
    failed on ethos-u,llvm; it reads the rows as a 2-D layer reshaped back now, which on the
    NPU is a reshape splitting rows (tests/planner/test_merged_axis_propagators.py)."""
    model = build(Recipe((1, 5, 4, 3), 7, (Step(Kind.FULLY_CONNECTED, (6, "relu")),
                                           Step(Kind.TANH))))
    out = check(model, llvm=True)
    assert out.placed == {"ethos-u": 2} and not out.host_reasons, out
    tight = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False, budget=out.tight_bytes)
    assert set(tight.partition_summary) == {"ethos-u"} and _cascades(tight), tight.plan_table
    x = np.random.RandomState(1).randint(-128, 128, size=(1, 5, 4, 3)).astype(np.int8)
    np.testing.assert_array_equal(np.asarray(tight.run(x)[0]).reshape(1, 5, 4, 6),
                                  TflmReference(model).run([x])[0])


def _reshape_fc_reshape() -> bytes:
    """RESHAPE 1x5x4x3 -> 20x3, an int8 FULLY_CONNECTED to 20x6, RESHAPE to 1x5x4x6."""
    rs = np.random.RandomState(0)
    w = rs.randint(-127, 128, size=(6, 3)).astype(np.int8)
    ts = [tb.T([1, 5, 4, 3], "int8", scale=0.05, zp=3), tb.T([20, 3], "int8", scale=0.05, zp=3),
          tb.T([6, 3], "int8", scale=0.01, zp=0, data=w),
          tb.T([6], "int32", scale=0.0005, zp=0,
               data=rs.randint(-2000, 2000, 6).astype(np.int32)),
          tb.T([20, 6], "int8", scale=0.08, zp=-3), tb.T([1, 5, 4, 6], "int8", scale=0.08, zp=-3),
          tb.T([2], "int32", data=np.array([20, 3], np.int32)),
          tb.T([4], "int32", data=np.array([1, 5, 4, 6], np.int32))]
    otype, ofn = _opts("FullyConnectedOptions", FusedActivationFunction=0)
    return tb.serialize(ts, [(tb.BO.RESHAPE, 0, None, [0, 6], [1]),
                             (tb.BO.FULLY_CONNECTED, otype, ofn, [1, 2, 3], [4]),
                             (tb.BO.RESHAPE, 0, None, [4, 7], [5])], [0], [5])


def test_reshape_fully_connected_reshape_at_its_least_memory_on_ethos_u_llvm():
    """The last RESHAPE reads row ``4*h + w`` of the FULLY_CONNECTED's output: two output axes
    move one input axis. The planner followed only the first (each stripe of [1, 1, 4, 6]
    read one row of a one-row ring, 89 of 120 codes wrong at 186 B); it reads four rows now
    (``Propagator.one_driver_per_axis``), the cascade kept (tests/planner/
    test_merged_axis_propagators.py)."""
    model = _reshape_fc_reshape()
    cm = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    budget = _least_memory(cm)
    tight = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False, budget=budget)
    assert tight.partition_summary == {"ethos-u": 3} and _cascades(tight)
    want = TflmReference(model)
    for k in range(2):
        x = np.random.RandomState(k).randint(-128, 128, size=(1, 5, 4, 3)).astype(np.int8)
        got = np.asarray(tight.run(x)[0]).reshape(1, 5, 4, 6)
        if not np.array_equal(got, want.run([x])[0]):
            raise Mismatch(f"input {k}: differs from TFLite Micro")


def test_a_slice_of_a_reshaped_slice_compiles_on_ethos_u_llvm():
    """The wide sweep's case (campaign 3, an int16 chain with LEAKY_RELUs), shrunk: int8. The
    RESHAPE's flattened index is no affine map, so its Part reads its input whole and the
    planner holds that input whole; TVM's relaxation of the index read one element, and the
    TensorIR schedule allocated less than planned (MemoryMismatchError)."""
    model = build(Recipe((1, 8, 10, 1), 0, (
        Step(Kind.STRIDED_SLICE, ((0, 0, 7, 0), (1, 4, 9, 1), (1, 1, 1, 1))),
        Step(Kind.RESHAPE, ((1, 2, 4, 1),)),
        Step(Kind.STRIDED_SLICE, ((0, 0, 0, 0), (1, 1, 1, 1), (1, 1, 1, 1))))))
    check(model, llvm=True)


def test_two_minimums_each_reading_one_tensor_twice_compile_on_ethos_u_llvm():
    """The wide sweep's case (campaign 5, uint8), shrunk: int8. The two MINIMUMs' composites
    are equal and share one function; naming the second's operators (``partition_op_ids``)
    gave both of its equal dequantizes one source binding, and the compile failed."""
    model = build(Recipe((1, 6, 10, 3), 9, (Step(Kind.MINIMUM, (None,), 0),
                                            Step(Kind.MINIMUM, (None,), 1))))
    out = check(model, llvm=True)   # ethos-u,llvm too (test_partition_equal_bindings: placed)
    assert out.placed == {"ethos-u": 2} and not out.host_reasons, out.host_reasons


@pytest.mark.slow
def test_a_uint8_sum_over_the_depth_after_an_upscale_compiles_on_ethos_u_llvm():
    """The wide sweep's case (campaign 5), as drawn: the RESHAPE's Part reads its input
    whole, TVM's relaxation of its index less (MemoryMismatchError, as above)."""
    model = build(Recipe((1, 5, 7, 5), 12478, (
        Step(Kind.RESIZE_NEAREST, (2, False, False)),
        Step(Kind.CONV, (7, 1, 1, "VALID", "relu")),
        Step(Kind.RESHAPE, ((1, 14, 10, 7),)),
        Step(Kind.SUM, ((3,),)),
        Step(Kind.RESHAPE, ((1, 10, 14, 1),))), Dtype.UINT8))
    check(model)


@pytest.mark.slow
def test_a_pool_padding_past_a_strided_convolution_compiles_on_ethos_u_llvm():
    """The sweep's case (campaign 11): a SAME 2x2 pool's window reaches past the bottom and
    right of a stride-2 1x1 CONV's 2x2 output. The CONV computes its 2x2 and reads 3x3 of
    the SUB(x, x) before it, so the planner must propagate the CONV's stripe clipped to its
    tensor, not with the pool's padding row and column (3x3, which reads 4x3): else the
    schedule allocates less than planned (MemoryMismatchError; issue 28,
    ``tests/planner/test_exact_windows.py``)."""
    model = build(Recipe((1, 7, 6, 5), 758, (
        Step(Kind.DEPTHWISE, (5, 1, 2, "VALID", "relu")), Step(Kind.SUB, (None,), 1),
        Step(Kind.CONV, (12, 1, 2, "SAME", "relu")), Step(Kind.AVG_POOL, (2, 1, "SAME")))))
    check(model, llvm=True)


# -------------------------------------------- issue 28's third sweep (--wide, campaigns 2 and 6)
def _equal_at_least_memory(model: bytes, runs: int = 2) -> None:
    """Compile ``model`` as an ``ethos-u,llvm`` package at its largest subgraph's least memory
    and raise ``Mismatch`` where an output differs from TFLite Micro's."""
    budget = _least_memory(tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False))
    tight = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False, budget=budget)
    assert set(tight.partition_summary) == {"ethos-u"}, tight.partition_summary
    want = TflmReference(model)
    for k in range(runs):
        x = random_inputs(model, np.random.RandomState(k))
        got = np.asarray(tight.run(*x)[0]).reshape(want.run(x)[0].shape)
        if not np.array_equal(got, want.run(x)[0]):
            raise Mismatch(f"budget {budget} B, input {k}: differs from TFLite Micro")


@pytest.mark.slow
def test_a_concatenation_reshaped_at_its_least_memory_equals_tflite_micro_on_ethos_u_llvm():
    """Campaign 2's wrong answer (uint8 CONCATENATION -> RESHAPE -> CONV_2D -> TRANSPOSE ->
    PAD -> CONCATENATION on ethos-u,llvm at 60 B), shrunk to its first two operators, int8:
    at the least memory the two were one cascade, and TVM computed the rows the RESHAPE
    reads into the CONCATENATION's planned ring of 2 (test_schedule's
    test_a_reshape_merging_rows_in_a_cascade_reads_what_its_producer_computes, the rule)."""
    _equal_at_least_memory(build(Recipe((1, 7, 2, 2), 15, (
        Step(Kind.CONCAT, (None,), 0), Step(Kind.RESHAPE, ((1, 2, 7, 4),))))))


@pytest.mark.parametrize("recipe", [
    # campaign 6's int16 STRIDED_SLICE -> SLICE, shrunk (was planned 40 B, scheduled 32 B)
    Recipe((1, 2, 2, 8), 0, (Step(Kind.SLICE, ((0, 0, 1, 0), (1, 2, 1, 8))),
                             Step(Kind.SLICE, ((0, 0, 0, 4), (1, 1, 1, 4)))), Dtype.INT16),
    # campaign 6's uint8 RESIZE_NEAREST -> SLICE -> SLICE, shrunk, int8 (was planned 38 B,
    # scheduled 36 B); without the upscale it compiled
    Recipe((1, 2, 4, 1), 569, (Step(Kind.RESIZE_NEAREST, (2, False, False)),
                               Step(Kind.SLICE, ((0, 1, 3, 0), (1, 2, 1, 1))),
                               Step(Kind.SLICE, ((0, 1, 0, 0), (1, 1, 1, 1)))))],
    ids=["int16-slice-slice", "int8-upscale-slice-slice"])
def test_a_slice_of_a_slice_compiles_on_ethos_u_llvm(recipe):
    """A SLICE of one element (or one 4-channel pixel) of an earlier SLICE's output. The
    RESHAPE the importer ends a SLICE with is no affine map, so its Part reads its input whole
    and the planner holds that input whole; TVM relaxed the RESHAPE's index to less, and the
    TensorIR schedule allocated less NPU SRAM than planned (MemoryMismatchError), the cause
    of test_a_slice_of_a_reshaped_slice_compiles_on_ethos_u_llvm."""
    model = build(recipe)
    cm = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.partition_summary
    x = random_inputs(model, np.random.RandomState(0))
    want = TflmReference(model).run(x)[0]
    np.testing.assert_array_equal(np.asarray(cm.run(*x)[0]).reshape(want.shape), want)


@pytest.mark.slow
def test_a_uint8_leaky_relu_then_two_maximums_each_reading_one_tensor_twice():
    """Campaign 6's uint8 LEAKY_RELU -> MAXIMUM -> MAXIMUM -> MAXIMUM -> ADD -> HARD_SWISH
    ("... cannot be named in the partition report"), shrunk; LiteRT's reference kernels
    judge it (TFLite Micro has no uint8 LEAKY_RELU). The two equal MAXIMUM(x, x) composites
    share one fused function, the cause of the two MINIMUMs above."""
    out = check(build(Recipe((1, 5, 8, 2), 149, (
        Step(Kind.LEAKY_RELU, (0.2,)), Step(Kind.MAXIMUM, (None,), 1),
        Step(Kind.MAXIMUM, (None,), 2)), Dtype.UINT8)))
    assert out.placed == {"ethos-u": 3} and out.oracle == "litert", out


def test_a_mirror_pad_between_a_clamp_and_a_softmax_streams_on_the_npu():
    """The wide sweep's case (seed 991): the BLOCKDEP guard around a MIRROR_PAD's backwards
    bands measured the span of a feature map that leaves its strides to Vela's generator
    (``blockdep_guard._span``), failed, and all three operators stayed on TFLite Micro with
    an AttributeError for a reason."""
    model = build(Recipe((1, 9, 4, 3), 991, (
        Step(Kind.RELU6), Step(Kind.MIRROR_PAD, (2, 0, 1, 2, False)), Step(Kind.SOFTMAX))))
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert cm.partition_summary == {"ethos-u": 3}, cm.placement_table
    check(model, llvm=True)
