"""The planner's MEAN over the height alone, the width alone or both (``parts.mean``'s
``axes``; ``planner.tflite`` reads them): output shapes as numpy's mean gives them, output
stripes of a kept axis reading those rows alone, and the NPU operations Vela 5.2's
``convert_mean_to_depthwise_conv`` writes (depthwise convolutions of at most 64 rows and
4096 taps, ADDs of their sums, one MUL; a window of the whole height and width read as one
row where Vela reads it so, and where a kept axis of extent 1 makes it that window too)."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from tflite.BuiltinOperator import BuiltinOperator as BO

from planner import parts
from planner.graph import Tensor
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite
from tests.planner.test_tflite import ModelSpec

AXES = st.sampled_from([(1,), (2,), (1, 2)])


@settings(max_examples=60, deadline=None)
@given(shape=st.tuples(st.just(1), st.integers(1, 12), st.integers(1, 12), st.integers(1, 9)),
       axes=AXES, keep=st.booleans(), data=st.data())
def test_mean_parts_shapes_and_stripes(shape, axes, keep, data):
    m = parts.mean("m", Tensor("x", shape), keepdims=keep, axes=axes)
    assert m.output.shape == np.zeros(shape).mean(axis=axes, keepdims=keep).shape
    assert m.attr("kernel") == tuple(shape[a] if a in axes else 1 for a in (1, 2))
    prop = m.propagators[0]
    assert prop.apply_shape(m.output.shape) == shape
    kept = [a for a in (1, 2) if a not in axes]
    if not kept:
        return
    # a stripe of a kept axis reads those rows (or columns) and the whole reduced extent
    a = kept[0]
    j = a if keep else [i for i in range(4) if i not in axes].index(a)
    size = data.draw(st.integers(1, shape[a]))
    start = data.draw(st.integers(0, shape[a] - size))
    out, off = list(m.output.shape), [0] * len(m.output.shape)
    out[j], off[j] = size, start
    need = list(shape)
    need[a] = size
    assert prop.apply_shape(out) == tuple(need)
    assert prop.apply_offset(off)[a] == start


def _vela_kernels(rows: int, cols: int) -> list[tuple[int, int]]:
    """Vela 5.2's convolution kernels of a MEAN reducing ``rows`` x ``cols``: as many rows
    each as 4096 taps and 64 rows allow, the last the remainder."""
    per = min(4096 // cols, rows, 64)
    return [(min(per, rows - r), cols) for r in range(0, rows, per)]


@settings(max_examples=40, deadline=None)
@given(h=st.integers(1, 200), w=st.integers(1, 60), c=st.integers(1, 16), axes=AXES)
def test_mean_lowers_as_vela(h, w, c, axes):
    m = parts.mean("m", Tensor("x", (1, h, w, c)), axes=axes)
    ops = lower_part(m, m.output.shape)
    rows, cols = (h if 1 in axes else 1), (w if 2 in axes else 1)
    if (rows, cols) == (h, w) and h > 64 and h * w <= 4096:
        # Vela's reshape of the rows into one; where the kept axis is 1 wide the window is
        # the same bytes, read so too (as the stream does: ethos_arch.mean_window)
        rows, cols = 1, h * w
    kernels = _vela_kernels(rows, cols)
    assert [o.kernel for o in ops if o.op == "DepthwiseConv2D"] == kernels
    assert [o.op for o in ops].count("Add") == len(kernels) - 1
    assert ops[-1].op == "Mul"
    out = (1, 1 if 1 in axes else h, 1 if 2 in axes else w, c)
    assert all(o.ofm == out for o in ops if o.op != "Mul")
    # each convolution reads its kernel's rows and every kept row and column
    reads = [o.ifm for o in ops if o.op == "DepthwiseConv2D"]
    assert reads == [(1, k[0] + out[1] - 1, k[1] + out[2] - 1, c) for k in kernels]


def test_tflite_mean_over_one_axis_is_read():
    for axes, out, kernel in (([2], (1, 5, 1, 3), (1, 7)), ([-3], (1, 1, 7, 3), (5, 1))):
        spec = ModelSpec()
        x = spec.input("x", (1, 5, 7, 3))
        y = spec.tensor("y", out)
        spec.op(BO.MEAN, [x, spec.const("a", axes)], [y], ("ReducerOptions", {"KeepDims": 1}))
        spec.outputs = [y]
        (part,) = load_tflite(spec.build()).parts
        assert part.kind == "mean" and part.output.shape == out
        assert part.attr("kernel") == kernel
