"""Where a MEAN's reduced axes fall on the Ethos-U: the NHWC view it reads and its kernel.

The NPU runs a MEAN as one depthwise convolution with all-one weights (Vela 5.2's
``convert_mean_to_depthwise_conv``). Its input is seen as a 4-D NHWC tensor padded with ones
on the left, as Vela's ``full_shape(4, ...)`` does, so the axes of a rank-3 tensor are
height, width, depth and those of a rank-2 tensor width, depth. A MEAN whose reduced axes
are the height, the width or both of that view is that convolution with a kernel of the
reduced extents (the kept axis is swept with stride 1). A window of the whole height and
width (both reduced, or a kept axis of extent 1) with more than 64 rows but at most 4096
elements reads the same bytes as one row of ``h * w`` columns (Vela's reshape), which one
kernel takes. This module imports nothing of the project: the planner,
the backend check and the stream generator all read it.
"""
from __future__ import annotations

from typing import NamedTuple, Sequence

#: one depthwise kernel's most rows and most taps (the NPU's, as Vela splits beyond them)
MAX_KERNEL_ROWS = 64
MAX_KERNEL_TAPS = 4096


class MeanWindow(NamedTuple):
    """A MEAN as one NPU depthwise convolution (and a SUM, REDUCE_MAX or REDUCE_MIN over the
    height or the width as one window, ``ops_reduce``): ``view`` the (height, width, depth) the
    NPU reads its input as, ``kernel`` (rows, columns) the window it sums; the output is
    ``out_view`` (a reduced axis becomes 1, a kept one is swept)."""

    view: tuple[int, int, int]
    kernel: tuple[int, int]

    @property
    def out_view(self) -> tuple[int, int, int]:
        (h, w, c), (kh, kw) = self.view, self.kernel
        return h - kh + 1, w - kw + 1, c

    @property
    def count(self) -> int:
        """The elements each output averages."""
        return self.kernel[0] * self.kernel[1]


def normalized_axes(axes: Sequence[int], rank: int) -> tuple[int, ...]:
    """The distinct axes, negative ones counted from the end, in order."""
    return tuple(sorted({int(a) % rank for a in axes})) if rank else ()


def mean_kernel(shape: Sequence[int], axes: Sequence[int]) -> tuple[int, int] | None:
    """The (rows, columns) a MEAN of a tensor of ``shape`` over ``axes`` reduces of its NHWC
    view: the reduced extents, 1 for a kept axis (None unless the reduced axes are the
    height, the width or both: over the depth or the batch, more than four axes or a batch
    above one)."""
    shape = tuple(int(s) for s in shape)
    rank = len(shape)
    if not 2 <= rank <= 4 or not axes:
        return None
    full = (1,) * (4 - rank) + shape
    reduced = {a + 4 - rank for a in normalized_axes(axes, rank)}
    if full[0] != 1 or not reduced or not reduced <= {1, 2}:
        return None
    return (full[1] if 1 in reduced else 1, full[2] if 2 in reduced else 1)


def mean_window(shape: Sequence[int], axes: Sequence[int]) -> MeanWindow | None:
    """The window of a MEAN of a tensor of ``shape`` over ``axes`` (None where
    :func:`mean_kernel` is): a window of the whole height and width of more than 64 rows
    within 4096 elements is read as one row."""
    kernel = mean_kernel(shape, axes)
    if kernel is None:
        return None
    h, w, c = ((1,) * (4 - len(shape)) + tuple(int(s) for s in shape))[1:]
    if kernel == (h, w) and h > MAX_KERNEL_ROWS and h * w <= MAX_KERNEL_TAPS:
        return MeanWindow((1, h * w, c), (1, h * w))
    return MeanWindow((h, w, c), kernel)


def window_refusal(window: MeanWindow) -> str | None:
    """Why one depthwise kernel cannot take ``window`` (None where it can)."""
    kh, kw = window.kernel
    if kh > MAX_KERNEL_ROWS or kh * kw > MAX_KERNEL_TAPS:
        return (f"a {kh}x{kw} mean; one NPU kernel takes at most {MAX_KERNEL_ROWS} rows and "
                f"{MAX_KERNEL_TAPS} elements")
    return None
