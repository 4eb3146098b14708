"""The propagators of a TFLite layer's Part, one rule each: how a box of the layer's output
maps onto each input it reads. ``planner.parts`` builds ``planner.tflite``'s Parts with them
and the TVM-free compile path (``tvm_ethos.tflite_direct``) builds a lowered group's Parts
with them, so the two cannot drift apart.

A window of kernel ``k``, stride ``s``, dilation ``d`` and leading padding ``p`` read by an
output stripe of ``n`` starting at ``o`` covers input ``[s o - p, s o - p + s (n - 1) +
d (k - 1) + 1)``: linear ``s``, constant ``d (k - 1) + 1 - s``, offset ``-p``.
"""
from __future__ import annotations

from typing import Sequence

from planner.propagator import Number, Propagator


def window(kernel: tuple[int, int], strides: tuple[int, int], dilation: tuple[int, int],
           padding: Sequence[int], channels: tuple[Number, Number]) -> Propagator:
    """NHWC output -> NHWC input of a convolution or pool window: the batch one to one, H
    and W through the window, the depth as ``channels`` (linear, constant) of the output's
    depth (a convolution reads every input channel, a depthwise one its own);
    ``padding`` is (top, left, bottom, right)."""
    lin = [[1, 0, 0, 0], [0, strides[0], 0, 0], [0, 0, strides[1], 0], [0, 0, 0, channels[0]]]
    const = [0, dilation[0] * (kernel[0] - 1) + 1 - strides[0],
             dilation[1] * (kernel[1] - 1) + 1 - strides[1], channels[1]]
    return Propagator.build(lin, const, [0, -padding[0], -padding[1], 0])


def along_channels(shape: Sequence[int], axis: int, out_rank: int) -> Propagator:
    """A constant of ``shape`` (weights, a bias) whose ``axis`` follows the output's last
    axis, its channels, and whose other axes are read whole: an output box of some channels
    reads those channels' weights."""
    lin = [[0] * (out_rank - 1) + [int(i == axis)] for i in range(len(shape))]
    return Propagator.build(lin, [0 if i == axis else n for i, n in enumerate(shape)],
                            [0] * len(shape))


def whole(in_shape: Sequence[int], out_rank: int) -> Propagator:
    """Every box of an output of ``out_rank`` axes reads the whole input of ``in_shape``."""
    return Propagator.build([[0] * out_rank for _ in in_shape], list(in_shape),
                            [0] * len(in_shape))


def reduction(in_shape: Sequence[int], axes: Sequence[int], keepdims: bool) -> Propagator:
    """A reduction over ``axes`` (MEAN, SUM, REDUCE_MAX, REDUCE_MIN): each output element
    reads the whole of the reduced axes and its own index of the kept ones, which an output
    without ``keepdims`` lists without the reduced axes between them."""
    rank = len(in_shape)
    kept = [a for a in range(rank) if keepdims or a not in axes]
    lin = [[int(a == b and a not in axes) for b in kept] for a in range(rank)]
    return Propagator.build(lin, [n if a in axes else 0 for a, n in enumerate(in_shape)],
                            [0] * rank)
