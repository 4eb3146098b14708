"""The audit's probes (``benchmarks/vela_superset_probes.py``) that ours now takes as Vela 5.2
does: elementwise operators of rank 1 to 3 (emitted over whole tensors) or of a constant
scalar operand (read as ones of the output's rank), an 8-bit SOFTMAX and
a PRELU of alpha constant along the height with a batch above 1 (the batch folded into the
height), int16 reshapes, splits, slices, PACK / UNPACK and nearest resizes (the codes moved),
reductions and pools past one NPU operation (pools of bands of rows; a pool of one
output row of any stride along it), the dtype sweep's uint8 / int16 forms
(test_dtype_sweep_forms.TAKEN), and SUM / REDUCE_MAX / REDUCE_MIN over the height or the
width alone or of uint8 codes, each an ``ethos-u`` operator whose outputs equal TFLite
Micro's (LiteRT's reference kernels for RELU_N1_TO_1, a uint8 PRELU, the sweep's forms
TFLite Micro lacks and the uint8 reductions)."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.vela_superset_probes import (
    BO,
    PROBES,
    SHAPE,
    _i32,
    _one,
    _t,
    binary,
    prelu,
    softmax,
    split,
    unary,
)
from tests.helpers.tflite_oracle import compiled_matches, oracle
from tests.tvm_ethos.test_dtype_sweep_forms import TAKEN as DTYPE_TAKEN
from tests.tvm_ethos.test_dtype_sweep_forms import reference as dtype_reference
from tvm_ethos.frontend.tflite_support import operator_support

pytest.importorskip("tflite_micro")

TARGET = "ethos-u -accelerator_config=ethos-u55-128"
_FLAT = ("rank 1", "rank 2", "rank 3", "rank 3 first axis 2")
_INT16_COPIES = ("RESHAPE", "SQUEEZE", "EXPAND_DIMS", "SPLIT", "SPLIT_V", "SLICE",
                 "STRIDED_SLICE", "PACK", "UNPACK", "RESIZE_NEAREST_NEIGHBOR")
_ELEMENTWISE = ("ADD", "SUB", "MUL", "MAXIMUM", "MINIMUM", "SQUARED_DIFFERENCE", "RELU",
                "RELU6", "RELU_N1_TO_1", "ABS")
#: the probes past one NPU operation (issue 28: pools of bands of rows, ``ops_reduce_split``;
#: a pool's stride along an axis of one output, ``npu_ops.pool_strides``)
_SPLIT = {("SUM", "over 100x8"), ("SUM", "over 600x4"), ("SUM", "over H, W and C, 100 rows"),
          ("REDUCE_MAX", "over 300x4"), ("REDUCE_MAX", "over 300 rows and the depth"),
          ("REDUCE_MIN", "over 300x4"), ("MEAN", "over 100 rows of the height"),
          ("MEAN", "over 70x70"), ("AVERAGE_POOL_2D", "one output row, stride 5x1"),
          ("MAX_POOL_2D", "one output row, stride 5x2")}
#: the reductions over the height or the width alone, of uint8 codes, an int16 SUM and
#: REDUCE_MIN (issue 28: ``ops_reduce.reduction_window``; uint8 the 8-bit kernels, its own
#: NOT table; int16 TFLite's kernels, ``tflite_check._int16_pooling``, REDUCE_MIN's NOT SUBs)
_REDUCE = {("SUM", "over the height alone"), ("SUM", "over the width alone"),
           ("SUM", "over 100 rows of the height alone"), ("REDUCE_MIN", "over the width alone"),
           ("SUM", "uint8"), ("REDUCE_MAX", "uint8"), ("REDUCE_MIN", "uint8 over 300x4"),
           ("SUM", "int16"), ("REDUCE_MIN", "int16")}
#: the probes this work put on the NPU
TAKEN = [p for p in PROBES if (p.name in _FLAT + ("constant scalar",)
                                and p.operator in _ELEMENTWISE)
         or (p.operator, p.name) in {("SOFTMAX", "batch 2"), ("SOFTMAX", "rank 4 batch 2"),
                                     ("PRELU", "batch 2"), ("PRELU", "rank 3 first axis 2"),
                                     ("SPLIT", "batch 2"), ("SPLIT_V", "batch 2"),
                                     ("SLICE", "batch 2"), ("STRIDED_SLICE", "batch 2"),
                                     ("SLICE", "rank 2"), ("ABS", "int16"),
                                     ("PRELU", "uint8")}
         or (p.operator, p.name) in _SPLIT | _REDUCE
         or (p.operator in _INT16_COPIES and p.name == "int16")] + DTYPE_TAKEN


def _on_the_npu(data: bytes, reference=None) -> None:
    kw = {} if reference is None else {"reference": reference}
    cm = compiled_matches(data, TARGET, runs=2, **kw)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement


@pytest.mark.parametrize("data", [
    pytest.param(lambda: binary(BO.MUL, (2, 4, 8), (4, 1)), id="mul-rank3-broadcast"),
    pytest.param(lambda: unary(BO.RELU, (8,), q_out=(0.04, -2)), id="relu-rank1"),
    pytest.param(lambda: binary(BO.SUB, b_shape=(), const_b=True), id="sub-constant-scalar"),
    pytest.param(lambda: softmax((2, 4, 4, 8)), id="softmax-batch2"),
    pytest.param(lambda: prelu((2, 4, 4, 8)), id="prelu-batch2"),
    pytest.param(lambda: split(SHAPE, 3, "int16"), id="split-int16"),
])
def test_one_form_of_each_fix_runs_on_the_npu_as_tflite_micro(data):
    _on_the_npu(data())


@pytest.mark.slow
@pytest.mark.parametrize("probe", TAKEN, ids=[f"{p.operator}-{p.name}" for p in TAKEN])
def test_every_taken_probe_runs_on_the_npu_as_its_oracle(probe):
    # TFLite Micro has no RELU_N1_TO_1, uint8 PRELU, uint8 reduction or int16 REDUCE_MIN
    # kernel (nor most of the dtype sweep's uint8 ones): LiteRT's reference kernels are their
    # oracle
    if probe in DTYPE_TAKEN:
        _on_the_npu(probe.build(), dtype_reference((probe.operator, probe.name)))
        return
    _on_the_npu(probe.build(), oracle if probe.operator == "RELU_N1_TO_1"
                or (probe.operator, probe.name) == ("PRELU", "uint8")
                or probe.name.startswith("uint8") and probe.operator in ("SUM", "REDUCE_MAX",
                                                                          "REDUCE_MIN")
                or (probe.operator, probe.name) == ("REDUCE_MIN", "int16") else None)


@pytest.mark.slow
def test_a_large_batch_of_softmax_runs_as_tflite_micro():
    _on_the_npu(softmax((2, 40, 40, 16)))


@pytest.mark.slow
def test_a_large_batch_of_prelu_runs_as_tflite_micro():
    _on_the_npu(prelu((2, 40, 40, 16)))


def test_a_prelu_batch_with_alpha_along_the_height_stays_off_the_npu_saying_why():
    # the batch folded into the height would misalign alpha's rows
    cm = compiled_matches(prelu((2, 4, 4, 8), (4, 1, 1)), TARGET, runs=1)
    (place,) = cm.placement
    assert place.placed_on != "ethos-u" and "batch size 2" in str(place.why), place


_CODES = (BO.ADD, BO.SUB, BO.MUL, BO.MAXIMUM, BO.MINIMUM, BO.SQUARED_DIFFERENCE)


@st.composite
def _flat_broadcast(draw):
    """An elementwise operator over a rank 1 to 3 output, one input broadcast along any of its
    axes (Vela: one input has the output's shape) and of any rank up to the output's."""
    out = draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    rank = draw(st.integers(1, len(out)))
    small = [d if draw(st.booleans()) else 1 for d in out[len(out) - rank:]]
    shapes = (tuple(out), tuple(small))
    first, second = shapes if draw(st.booleans()) else shapes[::-1]
    return draw(st.sampled_from(_CODES)), first, second


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(_flat_broadcast())
def test_flat_broadcast_elementwise_runs_on_the_npu_as_tflite_micro(case):
    code, a_shape, b_shape = case
    _on_the_npu(binary(code, a_shape, b_shape))



def test_an_int16_copy_quantized_unlike_its_input_stays_refused_naming_int16():
    # the codes moved are exact only between tensors quantized alike
    begin, size = _i32([0, 1, 0, 2]), _i32([1, 2, 4, 5])
    alike = _one([_t(SHAPE, "int16"), _t((1, 2, 4, 5), "int16"), begin, size], BO.SLICE, [0],
                 [1], op_inputs=[0, 2, 3])
    apart = _one([_t(SHAPE, "int16"), _t((1, 2, 4, 5), "int16", (2.0**-10, 0)), begin, size],
                 BO.SLICE, [0], [1], op_inputs=[0, 2, 3])
    assert operator_support(alike)[0].importable
    (verdict,) = operator_support(apart)
    assert not verdict.importable and "INT16" in verdict.reason, verdict
