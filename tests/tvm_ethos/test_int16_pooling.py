"""int16 MAX_POOL_2D, AVERAGE_POOL_2D, MEAN and REDUCE_MAX (over height and width) on the
Ethos-U, as Vela 5.2 takes them (benchmarks/vela_superset_audit.py): the importer reads their
integer kernels (``tflite_check._int16_pooling``), and the stream (the ``ethos-u`` file's
``ethos-u`` operator on the functional model) and the emulator (``ethos-u,llvm``) compute
TFLite Micro's int16 kernels: a pool's sum rounded half away from zero over its valid
elements, MEAN's multiplier of the sum with the element count folded in, REDUCE_MAX's largest
code (against LiteRT's reference kernel: TFLite Micro has no int16 REDUCE_MAX). The int16
reductions the integer kernels do not take stay TFLite operators naming why
(``tflite_support.int16_pooling_refusal``)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from int16_pooling_models import FORMS, LITERT_ONLY, pool, pools, reduction, reductions

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches, oracle, tflm_oracle
from tvm_ethos.frontend import operator_support

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def _on_npu(data: bytes, target: str, reference) -> None:
    cm = compiled_matches(data, target, reference=reference)
    if target == "ethos-u":
        assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement
    else:
        assert cm.partition_summary == {"ethos-u": 1}, cm.partition_summary


@pytest.mark.parametrize("form", sorted(FORMS))
def test_int16_form_is_on_the_npu_equal_to_tflite(form):
    _on_npu(FORMS[form], "ethos-u", oracle if form in LITERT_ONLY else tflm_oracle)


@pytest.mark.parametrize("form", ["mean_requantizing"])
def test_int16_form_in_a_package_is_on_the_npu_equal_to_tflite(form):
    """The ``ethos-u,llvm`` package: the NPU part on the emulator (an average pool's there in
    the tie test below, the other forms in the slow sweeps)."""
    _on_npu(FORMS[form], "ethos-u,llvm", tflm_oracle)


@pytest.mark.parametrize("data", [pool("avg", (2, 5, 5, 3), (2, 2), (1, 1), True),
                                  reduction("MEAN", (2, 5, 5, 3), out_q=(0.001, 4))],
                         ids=["avg-pool", "mean"])
def test_an_int16_form_the_npu_refuses_runs_on_the_hosts_integer_kernel(data):
    """A batch of 2, which the Ethos-U refuses: the llvm host's integer kernel, not TVM's
    float32 one, so equal to TFLite Micro still."""
    cm = compiled_matches(data, "ethos-u,llvm", reference=tflm_oracle)
    assert cm.partition_summary == {"llvm": 1}, cm.partition_summary


@pytest.mark.parametrize("dtype, q, out_q", [("int8", (0.05, 3), (0.03, -2)),
                                             ("int16", (0.002, 11), (0.0007, -40))])
def test_a_mean_over_negative_axes_is_the_mean_over_height_and_width(dtype, q, out_q):
    """Axes [-3, -2] are TFLite's [1, 2]: the NPU's MEAN (an int8 one went to the llvm host's
    float32 path, one code off TFLite Micro)."""
    data = reduction("MEAN", (1, 4, 4, 8), (-3, -2), q=q, out_q=out_q, dtype=dtype)
    cm = compiled_matches(data, "ethos-u,llvm", reference=tflm_oracle)
    assert cm.partition_summary == {"ethos-u": 1}, cm.partition_summary


def _tied_average_pool(window, channels: int, rs) -> tuple[bytes, np.ndarray]:
    """A VALID average pool of one window per channel, each channel's codes summing at or
    next to a rounding boundary of sum / area (halves where the area is even) anywhere in
    the int16 range: where rounding half away from zero and the NPU's scale could part."""
    n = window[0] * window[1]
    k = rs.randint(-32768, 32767, channels)
    off = rs.choice([n // 2, -(n // 2), n // 2 + 1, (n - 1) // 2, -((n - 1) // 2), 0], channels)
    sums = np.clip(k * n + off, -32768 * n, 32767 * n)
    x = np.zeros((1, *window, channels), np.int64)
    for c, s in enumerate(sums):
        v = np.full(n, s // n)
        v[:s - (s // n) * n] += 1
        x[0, :, :, c] = rs.permutation(v).reshape(window)
    return pool("avg", x.shape, window, (1, 1), False), x.astype(np.int16)


@pytest.mark.parametrize("window", [(2, 3)])
def test_int16_average_pool_rounds_ties_as_tflite_micro(window):
    _tied_average_pool_check(window, 128)


@pytest.mark.slow
@pytest.mark.parametrize("window", [(1, 3), (3, 3), (2, 5), (3, 4), (7, 9), (16, 16)])
def test_int16_average_pool_rounds_ties_as_tflite_micro_every_area(window):
    _tied_average_pool_check(window, 512)


def _tied_average_pool_check(window, channels: int) -> None:
    data, x = _tied_average_pool(window, channels, np.random.RandomState(sum(window)))
    want = tflm_oracle(data, [x])[0]
    for target in ("ethos-u", "ethos-u,llvm"):
        got = tvm_ethos.compile(data, target, cache_dir=False).run(x)[0]
        assert np.array_equal(got.reshape(want.shape), want), target


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(case=pools(), target=st.sampled_from(["ethos-u", "ethos-u,llvm"]))
def test_int16_pools_are_on_the_npu_equal_to_tflite_micro(case, target):
    _on_npu(case[0], target, tflm_oracle)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(case=reductions("MEAN"), target=st.sampled_from(["ethos-u", "ethos-u,llvm"]))
def test_int16_means_are_on_the_npu_equal_to_tflite_micro(case, target):
    _on_npu(case[0], target, tflm_oracle)


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(case=reductions("REDUCE_MAX"), target=st.sampled_from(["ethos-u", "ethos-u,llvm"]))
def test_int16_reduce_max_is_on_the_npu_equal_to_litert(case, target):
    _on_npu(case[0], target, oracle)


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(["MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN"]),
       axes=st.lists(st.integers(-4, 3), min_size=1, max_size=3, unique=True),
       keepdims=st.booleans())
def test_the_importer_takes_an_int16_reduction_over_height_and_width_only(name, axes, keepdims):
    """Whatever the axes: imported where they are height and width (negative ones counted
    from the end; the height or the width alone too, as the NPU takes it, and a SUM's,
    REDUCE_MAX's or REDUCE_MIN's depth with any of them), else refused naming them, never
    computed in float32."""
    (verdict,) = operator_support(reduction(name, (1, 3, 4, 5), tuple(axes), keepdims))
    norm = sorted(a % 4 for a in axes)
    over_hw = norm in ([1, 2], [1], [2]) or name != "MEAN" and \
        norm in ([3], [1, 3], [2, 3], [1, 2, 3])
    assert verdict.importable == over_hw, verdict
    if not over_hw:
        assert f"int16 {name} over axes {list(axes)}" in verdict.reason, verdict.reason


@pytest.mark.parametrize("data, why", [
    (reduction("MEAN", (1, 4, 4, 8), (3,)), "int16 MEAN over axes [3] of a 4-D tensor"),
    (reduction("REDUCE_MAX", (1, 4, 4, 8), q=(0.001, 5)), "REDUCE_MAX with zero point 5"),
    (reduction("REDUCE_MAX", (1, 4, 4, 8), out_q=(0.002, 0)),
     "input quantization (0.000244141, 0) and output (0.002, 0)"),
], ids=["mean-over-depth", "reduce-max-zero-point", "reduce-max-requantizing"])
def test_other_int16_reductions_stay_tflite_operators_naming_why(data, why):
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert why in placed.why, placed.why


@pytest.mark.parametrize("kind", ["avg", "max"])
def test_a_requantizing_int16_pool_stays_a_tflite_operator_naming_it(kind):
    """TFLite's pools require the output quantized as the input (TFLite Micro refuses the
    model too)."""
    data = pool(kind, (1, 4, 4, 8), (2, 2), (2, 2), False, out_q=(0.01, 0))
    (verdict,) = operator_support(data)
    assert not verdict.importable
    assert "with input quantization (0.000244141, 0) and output (0.01, 0)" in verdict.reason
    assert "pool kernels require them equal" in verdict.reason
