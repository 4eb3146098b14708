"""int16 MAX_POOL_2D, AVERAGE_POOL_2D and MEAN as planner Parts (TVM-free): ``planner.tflite``
reads each as the Part of the same int8 operator over int16 tensors (same kind, window,
activation and propagators), which the Ethos-U cost model prices as 16-bit feature maps."""
from hypothesis import given, settings
from hypothesis import strategies as st
from int16_pooling_models import pool, pools, reduction

from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite


def _structure(part):
    return (part.kind, part.attrs, part.propagators, [t.shape for t in part.inputs],
            part.output.shape)


def _only_part(model: bytes):
    (part,) = load_tflite(model).parts
    return part


@settings(max_examples=20, deadline=None)
@given(case=pools())
def test_an_int16_pool_is_the_int8_part_over_16_bit_tensors(case):
    model, (kind, shape, window, strides, padding, act, q) = case
    p16 = _only_part(model)
    p8 = _only_part(pool(kind, shape, window, strides, padding == "SAME", act, (q[0], 0),
                         dtype="int8"))
    assert [t.dtype for t in (*p16.inputs, p16.output)] == ["int16", "int16"]
    assert _structure(p16) == _structure(p8)
    ops = lower_part(p16, p16.output.shape)
    assert ops and all(o.ifm_bits == o.ofm_bits == 16 for o in ops), ops


@settings(max_examples=10, deadline=None)
@given(h=st.integers(1, 70), w=st.integers(1, 70), c=st.integers(1, 16),
       keepdims=st.booleans())
def test_an_int16_mean_is_the_int8_part_over_16_bit_tensors(h, w, c, keepdims):
    p16 = _only_part(reduction("MEAN", (1, h, w, c), keepdims=keepdims))
    p8 = _only_part(reduction("MEAN", (1, h, w, c), keepdims=keepdims, q=(0.05, 3),
                              dtype="int8"))
    assert [t.dtype for t in (*p16.inputs, p16.output)] == ["int16", "int16"]
    assert _structure(p16) == _structure(p8)
    ops = lower_part(p16, p16.output.shape)
    assert ops[0].ifm_bits == 16 and ops[-1].ofm_bits == 16, ops
