"""A stripe over a range of output channels: which operations compute it, and their constants.

A cascade whose next Part reads only some channels (a channel SLICE after a convolution) asks
its Part for the box ``[c0, c1)`` of the output's channels, and the planner gives that
tensor a buffer of only ``c1 - c0`` channels, holding channel ``c`` at ``c % depth`` (a ring
over channels, as ``ops_movement.channel_runs`` reads it). The stream computes the range as
one operation per piece that is contiguous in every buffer it touches: the OFM (and, for an
operator that reads channel ``c`` to write channel ``c``, each IFM) starts at the piece's
place in its buffer with the piece's depth, the weights and scales those output channels'.
"""
from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u.npu_ops import conv_scales, weights_ohwi
from tvm_ethos.backends.ethos_u.ops_movement import Copy

#: operators whose output channel ``c`` reads all the input's channels (the rest read their
#: own channel of every operand that has the output's depth)
ALL_INPUT_CHANNELS = frozenset({Op.CONV2D})
#: operators whose weights and scales are their own, one entry per output channel
OWN_WEIGHTS = frozenset({Op.CONV2D, Op.DEPTHWISE_CONV2D})


class ChannelPiece(NamedTuple):
    """Output channels ``[first, first + count)``, contiguous in every buffer touched."""

    first: int
    count: int


def channel_pieces(c0: int, c1: int, depths: list[int]) -> list[ChannelPiece]:
    """The pieces of channels ``[c0, c1)`` cut where any buffer of ``depths`` channels (each
    holding channel ``c`` at ``c % depth``) wraps; ``[]`` for an empty range."""
    out, c = [], c0
    while c < c1:
        n = min([c1 - c] + [d - c % d for d in depths])
        out.append(ChannelPiece(c, n))
        c += n
    return out


def own_constants(q, piece: ChannelPiece):
    """(the operator ``q`` with its bias of the piece's channels, OHWI weights, scales) of
    a convolution's output channels ``piece``."""
    a, b = piece.first, piece.first + piece.count
    channels = int(q.out_shape[-1])
    qs = dataclasses.replace(q, bias=None if q.bias is None else q.bias[a:b])
    return (qs, np.ascontiguousarray(weights_ohwi(q)[a:b]),
            list(conv_scales(q, channels))[a:b])


def clip_channels(cp: Copy, channels: tuple[int, int]) -> Copy | None:
    """The part of a dense copy (no step, no upscaling) that writes output channels
    ``channels``; None where it writes none of them."""
    c = cp.at[2]
    h, w, n = cp.src.shape
    a, b = max(channels[0], c), min(channels[1], c + n)
    if a >= b:
        return None
    if (a, b) == (c, c + n):
        return cp
    return dataclasses.replace(cp, src=cp.src.at(0, 0, a - c, (h, w, b - a)),
                               at=cp.at[:2] + (a,))
