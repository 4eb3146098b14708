"""TFLite's PRELU (int8) through the importer: alpha one code per channel, or a map varying
along the height, width and depth of a 4-D input (as Vela 5.2 takes it), on the Ethos-U as
four operations (``ops_prelu``: each branch of TFLite's kernel rounded as it rounds, the MUL
by alpha broadcast by the NPU along its axes of 1, and their sum), the compiled file's
outputs equal to TFLite Micro's on the source; an alpha that varies along the batch stays a
TFLite operator."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches, inputs_for, tflm_oracle

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def prelu_model(shape, alpha: np.ndarray, in_q=(0.05, 3), alpha_q=(0.01, 0),
                out_q=(0.04, -2)) -> bytes:
    """One int8 PRELU of ``shape`` with the constant int8 ``alpha`` codes."""
    x = tb.T(list(shape), "int8", scale=in_q[0], zp=in_q[1])
    a = tb.T(list(alpha.shape), "int8", scale=alpha_q[0], zp=alpha_q[1],
             data=alpha.astype(np.int8))
    y = tb.T(list(shape), "int8", scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, a, y], [(tb.BO.PRELU, 0, None, [0, 1], [2])], [0], [2])


def _check(data: bytes, target: str = "ethos-u", seed: int = 0):
    """The compiled model's outputs on two random inputs, equal to TFLite Micro's."""
    return compiled_matches(data, target, seed)


_q = st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127))

#: which of (height, width, depth) alpha varies along: per channel, one for all, along the
#: width (the audit's form), height x width, the full map, and the rest
ALPHA_AXES = ((False, False, True), (False, False, False), (False, True, False),
              (True, True, False), (True, True, True), (True, False, False),
              (True, False, True), (False, True, True))


def _alpha(hwc, axes, rs) -> np.ndarray:
    """Random int8 codes varying along ``axes`` of ``hwc`` (size 1 along the others)."""
    return rs.randint(-128, 128, tuple(n if a else 1 for n, a in zip(hwc, axes)))


def _sweep(hwc, seed, in_q, out_q, alpha_q, axes, target="ethos-u", **options):
    alpha = _alpha(hwc, axes, np.random.RandomState(seed))
    data = prelu_model((1, *hwc), alpha, in_q, alpha_q, out_q)
    cm = tvm_ethos.compile(data, target, cache_dir=False, **options)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.partition_summary
    rs = np.random.RandomState(seed % 7)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        want = tflm_oracle(data, xs)[0]
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)


_hwc = st.tuples(st.integers(1, 6), st.integers(1, 6), st.integers(1, 12))
_alpha_q = st.tuples(st.floats(0.001, 0.1), st.integers(-128, 127))


@settings(max_examples=8, deadline=None)
@given(hwc=_hwc, seed=st.integers(0, 2**16), in_q=_q, out_q=_q, alpha_q=_alpha_q,
       axes=st.sampled_from(ALPHA_AXES))
def test_prelu_is_on_the_npu_exactly(hwc, seed, in_q, out_q, alpha_q, axes):
    _sweep(hwc, seed, in_q, out_q, alpha_q, axes)


@pytest.mark.parametrize("axes", ALPHA_AXES[2:5], ids=["width", "height-width", "full"])
def test_an_alpha_map_is_on_the_npu_exactly_on_both_hosts(axes):
    """One case per form the audit names, the tflite-micro host's file and the llvm host's
    package with its stream on the functional model."""
    _sweep((3, 5, 6), 11, (0.04, -20), (0.03, 15), (0.02, 9), axes)
    _sweep((3, 5, 6), 12, (0.05, 3), (0.04, -2), (0.01, 0), axes, "ethos-u,llvm",
           npu_runtime="stream")


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(hwc=_hwc, seed=st.integers(0, 2**16), in_q=_q, out_q=_q, alpha_q=_alpha_q,
       axes=st.sampled_from(ALPHA_AXES), runtime=st.sampled_from(["tir", "stream"]))
def test_every_alpha_form_is_exact_on_the_llvm_host_too(hwc, seed, in_q, out_q, alpha_q, axes,
                                                        runtime):
    _sweep(hwc, seed, in_q, out_q, alpha_q, axes, "ethos-u,llvm", npu_runtime=runtime)


def test_a_prelu_the_plan_stripes_is_each_stripes_four_operations_exactly():
    """A map larger than one stripe: every stripe's operations read and write its box of the
    whole tensors (``ops_prelu``), so the stream has several of each."""
    alpha = np.random.RandomState(5).randint(-128, 128, (16,))
    cm = _check(prelu_model((1, 24, 20, 16), alpha, (0.04, -20), (0.02, 9), (0.03, 15)))
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@pytest.mark.parametrize("ashape", [(1, 20, 1), (24, 20, 1)], ids=["width", "height-width"])
def test_a_prelu_map_the_plan_stripes_reads_each_stripes_box_of_alpha(ashape):
    """A map larger than one stripe: each stripe's MUL reads its rows and columns of alpha
    (the stream run by the functional model, several MULs and ADDs)."""
    alpha = np.random.RandomState(6).randint(-128, 128, ashape)
    data = prelu_model((1, 24, 20, 16), alpha, (0.04, -20), (0.02, 9), (0.03, 15))
    (placed,) = _check(data).placement
    assert placed.placed_on == "ethos-u", placed.why
    emu = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False, npu_runtime="stream")
    (entry,) = emu.plan_report["streams"].values()
    assert entry["commands"]["NPU_OP_ELEMENTWISE"] > 2, entry["commands"]   # striped
    xs = inputs_for(emu.inputs, np.random.RandomState(2))
    want = tflm_oracle(data, xs)[0]
    np.testing.assert_array_equal(emu.run(*xs)[0].reshape(want.shape), want)


def test_an_alpha_varying_along_the_batch_stays_a_tflite_operator_naming_the_rule():
    alpha = np.arange(2).reshape(2, 1, 1, 1) * 40 - 20 + np.zeros((2, 3, 4, 2), int)
    cm = _check(prelu_model((2, 3, 4, 2), alpha))
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "varying along the batch" in placed.why, placed.why


@pytest.mark.parametrize("alpha", [np.array([[[-100, -3, 0, 7, 60, 127]]]),
                                   np.arange(15).reshape(5, 3, 1) * 17 - 128],
                         ids=["per-channel", "height-width"])
def test_the_llvm_host_runs_it_exactly(alpha):
    _check(prelu_model((1, 5, 3, 6), alpha, (0.03, -9), (0.02, 4), (0.05, 12)), "llvm", seed=3)
