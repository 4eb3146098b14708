"""The shared propagator rules of a layer's Part (``planner.layer_propagators``) against brute
force: for any output box, the input box a propagator gives is the smallest box holding every
element the operator's arithmetic reads for that output box."""
import itertools

from hypothesis import given
from hypothesis import strategies as st

from planner import layer_propagators
from planner.propagator import Propagator


def _box(prop: Propagator, start: tuple[int, ...], extent: tuple[int, ...]):
    """(start, extent) of the input box ``prop`` gives for an output box."""
    return prop.apply_offset(start), prop.apply_shape(extent)


def _hull(points) -> tuple[tuple[int, ...], tuple[int, ...]]:
    lo = tuple(min(p[i] for p in points) for i in range(len(points[0])))
    hi = tuple(max(p[i] for p in points) for i in range(len(points[0])))
    return lo, tuple(h - x + 1 for x, h in zip(lo, hi))


_pair = st.tuples(st.integers(1, 4), st.integers(1, 4))


@given(kernel=_pair, strides=_pair, dilation=_pair,
       padding=st.tuples(*[st.integers(0, 3)] * 4), depthwise=st.booleans(),
       start=st.tuples(st.integers(0, 2), st.integers(0, 5), st.integers(0, 5), st.integers(0, 4)),
       extent=st.tuples(st.integers(1, 2), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3)),
       depth=st.integers(1, 6))
def test_a_window_reads_the_taps_of_its_outputs(kernel, strides, dilation, padding, depthwise,
                                                start, extent, depth):
    """Output (n, y, x, c) of a window reads input (n, s y - p + d i, s x - p + d j, c') for
    every tap (i, j), where c' is c (depthwise) or every input channel (convolution)."""
    channels = (1, 0) if depthwise else (0, depth)
    prop = layer_propagators.window(kernel, strides, dilation, padding, channels)
    read = []
    for n in range(start[0], start[0] + extent[0]):
        for y in range(start[1], start[1] + extent[1]):
            for x in range(start[2], start[2] + extent[2]):
                for c in range(start[3], start[3] + extent[3]):
                    for i in range(kernel[0]):
                        for j in range(kernel[1]):
                            row = strides[0] * y - padding[0] + dilation[0] * i
                            col = strides[1] * x - padding[1] + dilation[1] * j
                            for ci in ([c] if depthwise else range(depth)):
                                read.append((n, row, col, ci))
    assert _box(prop, start, extent) == _hull(read)


@given(data=st.data(), rank=st.integers(1, 4), out_rank=st.integers(1, 4))
def test_a_constant_along_the_channels_reads_the_channels_of_the_box(data, rank, out_rank):
    """Output channels [c, c + k) read the constant's slices c .. c + k - 1 along ``axis``,
    every element of its other axes."""
    shape = data.draw(st.tuples(*[st.integers(1, 5)] * rank))
    axis = data.draw(st.integers(0, rank - 1))
    start = data.draw(st.tuples(*[st.integers(0, 3)] * out_rank))
    extent = data.draw(st.tuples(*[st.integers(1, 3)] * out_rank))
    prop = layer_propagators.along_channels(shape, axis, out_rank)
    lo = tuple(start[-1] if a == axis else 0 for a in range(rank))
    size = tuple(extent[-1] if a == axis else shape[a] for a in range(rank))
    assert _box(prop, start, extent) == (lo, size)


@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4), out_rank=st.integers(1, 4),
       data=st.data())
def test_a_whole_read_is_the_whole_input_for_every_box(shape, out_rank, data):
    start = data.draw(st.tuples(*[st.integers(0, 5)] * out_rank))
    extent = data.draw(st.tuples(*[st.integers(1, 5)] * out_rank))
    prop = layer_propagators.whole(shape, out_rank)
    assert _box(prop, start, extent) == ((0,) * len(shape), tuple(shape))


@given(data=st.data(), rank=st.integers(1, 4), keepdims=st.booleans())
def test_a_reduction_reads_its_kept_indices_and_the_whole_reduced_axes(data, rank, keepdims):
    """Output element o of a reduction over ``axes`` reads input elements whose kept axes are
    o's (in order, the reduced ones left out without ``keepdims``), any index of the reduced."""
    shape = data.draw(st.tuples(*[st.integers(1, 4)] * rank))
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, rank - 1), min_size=1))))
    out_shape = [1 if a in axes else n for a, n in enumerate(shape) if keepdims or a not in axes]
    if not out_shape:
        return
    start = tuple(data.draw(st.integers(0, n - 1)) for n in out_shape)
    extent = tuple(data.draw(st.integers(1, n - s)) for s, n in zip(start, out_shape))
    kept = [a for a in range(rank) if keepdims or a not in axes]
    read = []
    for o in itertools.product(*[range(s, s + e) for s, e in zip(start, extent)]):
        at = dict(zip(kept, o))
        read += itertools.product(*[range(shape[a]) if a in axes else [at[a]]
                                    for a in range(rank)])
    prop = layer_propagators.reduction(shape, axes, keepdims)
    assert _box(prop, start, extent) == _hull(read)
