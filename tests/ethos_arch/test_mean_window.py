"""``ethos_arch.mean_window``: the NHWC view and kernel the Ethos-U reads a MEAN as, checked
by brute force: a stride-1 sum of the kernel over the view (what the depthwise convolution
computes) holds, in order, the sums numpy takes over the MEAN's axes."""
import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ethos_arch.mean_window import (
    MAX_KERNEL_ROWS,
    MAX_KERNEL_TAPS,
    MeanWindow,
    mean_kernel,
    mean_window,
    window_refusal,
)


def _window_sums(x: np.ndarray, window: MeanWindow) -> np.ndarray:
    """The depthwise convolution of all-one weights: each output the sum of its window."""
    v = x.reshape(window.view)
    kh, kw = window.kernel
    oh, ow, c = window.out_view
    out = np.zeros((oh, ow, c), np.int64)
    for i, j in itertools.product(range(oh), range(ow)):
        out[i, j] = v[i:i + kh, j:j + kw].sum(axis=(0, 1))
    return out


@st.composite
def _means(draw):
    rank = draw(st.integers(2, 4))
    shape = [draw(st.integers(1, 6)) for _ in range(rank)]
    if rank == 4:
        shape[0] = 1
    axes = draw(st.lists(st.integers(-rank, rank - 1), min_size=1, max_size=rank))
    return tuple(shape), tuple(axes)


@settings(max_examples=150, deadline=None)
@given(case=_means(), seed=st.integers(0, 2**16))
def test_the_window_sums_are_the_means_sums(case, seed):
    shape, axes = case
    window = mean_window(shape, axes)
    rank = len(shape)
    reduced = {a % rank for a in axes}
    # the height and width of the view padded to four axes: the two axes before the last
    takes = reduced <= {rank - 3, rank - 2}
    assert (window is not None) == takes, (shape, axes, window)
    if window is None:
        return
    x = np.random.RandomState(seed).randint(-128, 128, size=shape)
    want = x.sum(axis=tuple(sorted(reduced)), keepdims=True)
    got = _window_sums(x, window)
    assert window.count == int(np.prod([shape[a] for a in reduced]))
    np.testing.assert_array_equal(got.ravel(), want.ravel())


def test_over_64_rows_within_4096_elements_reads_one_row():
    # Vela 5.2's convert_mean_to_depthwise_conv: h > 64 and h * w <= 4096 over both axes
    assert mean_window((1, 65, 10, 3), (1, 2)) == MeanWindow((1, 650, 3), (1, 650))
    assert window_refusal(mean_window((1, 65, 10, 3), (1, 2))) is None
    # over the height alone the rows stay rows: one kernel cannot take them
    window = mean_window((1, 65, 10, 3), (1,))
    assert window == MeanWindow((65, 10, 3), (65, 1))
    assert "65x1" in window_refusal(window) and f"{MAX_KERNEL_ROWS} rows" in \
        window_refusal(window)
    big = mean_window((1, 64, 65, 1), (1, 2))
    assert f"{MAX_KERNEL_TAPS} elements" in window_refusal(big)


def test_depth_batch_and_flat_means_have_no_window():
    assert mean_kernel((1, 4, 4, 8), (3,)) is None
    assert mean_kernel((2, 4, 4, 8), (1, 2)) is None      # a batch above one
    assert mean_kernel((1, 4, 4, 8), (0, 1)) is None      # over the batch
    assert mean_kernel((8,), (0,)) is None                 # rank 1: its depth
    assert mean_kernel((1, 1, 4, 4, 8), (2, 3)) is None    # five axes
    assert mean_kernel((4, 8), (-2,)) == (1, 4)            # rank 2: the width
    assert mean_kernel((3, 4, 8), (0,)) == (3, 1)          # rank 3: the height
