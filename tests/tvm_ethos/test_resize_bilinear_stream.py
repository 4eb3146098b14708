"""RESIZE_BILINEAR by 2, 4 or 8 on the Ethos-U (``ops_resize``: average pools over the input
enlarged by repetition, Vela's lowering): exact against TFLite Micro for any shape,
quantization, align_corners and half-pixel centres Vela takes, planned (per stripe) or layer
by layer."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from ethos_arch.ops import Op
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle
from tvm_ethos.backends.ethos_u import ops_resize

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def _compile_and_check(data: bytes, plan: bool):
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, plan=plan)
    rs = np.random.RandomState(0)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(np.asarray(got).reshape(want.shape), want)
    return cm


@settings(max_examples=16, deadline=None)
@given(h=st.integers(1, 5), w=st.integers(1, 5), c=st.integers(1, 6),
       factor=st.sampled_from([2, 4, 8]), align_corners=st.booleans(), half_pixel=st.booleans(),
       keep=st.sampled_from([None, 0, 1]), scale=st.floats(0.001, 1.0),
       zp=st.integers(-128, 127), plan=st.booleans())
def test_a_bilinear_upscale_by_2_4_or_8_streams_exactly(h, w, c, factor, align_corners,
                                                        half_pixel, keep, scale, zp, plan):
    """Any shape, quantization and mode Vela takes: 2x/4x/8x (of n - 1 with align_corners),
    half-pixel centres at 2x, an axis of one element kept (``keep``)."""
    if align_corners and half_pixel:
        half_pixel = False  # TFLite refuses both at once
    dims = [h, w]
    size = [(n - 1) * factor + 1 if align_corners else n * factor for n in dims]
    if keep is not None:
        dims[keep] = size[keep] = 1
    data = tb.resize_bilinear(in_shape=(1, *dims, c), size=tuple(size),
                              align_corners=align_corners, half_pixel=half_pixel, q=(scale, zp))
    cm = _compile_and_check(data, plan)
    (placed,) = cm.placement
    # what Vela takes: half-pixel centres only at 2x on both axes (or a 1x1 input, a copy);
    # the others stay TFLite operators
    vela = tuple(dims) == (1, 1) or not half_pixel or (keep is None and factor == 2)
    assert (placed.placed_on == "ethos-u") == vela, (dims, size, placed.why)


@pytest.mark.parametrize("factor", [2, 4, 8])
def test_the_stream_is_the_enlargements_then_one_pool(factor):
    """Layer by layer: log2(factor) 2x copies into working memory of every enlargement's
    size, then the average pool."""
    data = tb.resize_bilinear(in_shape=(1, 3, 2, 4), size=(3 * factor, 2 * factor))
    cm = _compile_and_check(data, plan=False)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["commands"]["NPU_OP_POOL"] == int(np.log2(factor)) + 1, entry["commands"]
    assert entry["work_bytes"] == sum(24 * 4 ** k for k in range(1, int(np.log2(factor)) + 1))


def test_only_factors_of_two_four_and_eight_are_box_averages():
    class Q:
        kind = Op.RESIZE_BILINEAR
        attrs = {"align_corners": False, "half_pixel_centers": False}
        in_shapes = [(1, 3, 4, 2)]
        out_shape = (1, 12, 16, 2)

    assert ops_resize.bilinear_factor(Q) == 4
    Q.out_shape = (1, 9, 12, 2)       # 3x
    assert ops_resize.bilinear_factor(Q) is None
    Q.out_shape = (1, 6, 16, 2)       # 2x and 4x
    assert ops_resize.bilinear_factor(Q) is None
    Q.attrs = {"align_corners": False, "half_pixel_centers": True}
    Q.out_shape = (1, 6, 8, 2)        # half-pixel 2x: 4x enlarged, 4x4 windows of stride 2
    assert ops_resize.recipe(Q) == ops_resize.Recipe(4, 4, 2, 1)
    Q.out_shape = (1, 12, 16, 2)      # half-pixel 4x
    assert ops_resize.recipe(Q) is None
    Q.in_shapes, Q.out_shape = [(1, 1, 1, 2)], (1, 4, 4, 2)   # a broadcast: ops_movement's
    assert ops_resize.bilinear_factor(Q) is None
