"""Which weight slices of a staged Part the DMA loads into the Plan's staging double buffer:
the rule the stream follows (``tvm_ethos.backends.ethos_u.stream_weights.Stager``) and the
planner's estimates count (``planner.dma_estimate``, ``planner.stream_estimate``).

A staged Part runs each of its operations (one per stripe) as slices of :data:`SLICE_CHANNELS`
output channels, each its own NPU operation reading its weight slice from one
half of the buffer. The halves keep the slices last loaded into them for the whole Plan, and
a slice a half still holds is read there with no DMA. Every other operation runs its slices
backwards, so it begins with the two slices the operation before ended with: an operation
after the first loads every slice but those two. A Part of one or two slices loads them once
per Plan; one of ``S`` slices loads ``S`` in its first operation and ``S - 2`` in each after.
Walking three or more slices forwards every time would hold nothing a later operation reads
first, and reload all ``S``.
"""
from __future__ import annotations

from ethos_arch.ops import Op

#: Output channels per slice: the NPU consumes weights in OFM-depth slices (Vela's block
#: depths are multiples of 16).
SLICE_CHANNELS = 16
#: Part kinds whose staged weights the stream splits into output-channel slices (the
#: convolutions); any other staged Part reads its weights whole.
STAGEABLE_KINDS = (Op.CONV2D, Op.DEPTHWISE_CONV2D)


def slice_count(channels: int) -> int:
    """Slices (operations) a staged Part's stripe of ``channels`` output channels runs as."""
    return -(-channels // SLICE_CHANNELS)


def slice_order(slices: int, operation: int) -> range:
    """The order in which operation ``operation`` (0 for the Part's first in its Plan) of a
    staged Part runs its ``slices`` slices: forwards, then backwards, alternately."""
    return range(slices) if operation % 2 == 0 else range(slices - 1, -1, -1)


def slice_loads(slices: int, operations: int) -> int:
    """Slices the DMA loads for a staged Part of ``slices`` slices running ``operations``
    operations in its Plan (each slice loaded counts once, whatever it carries)."""
    if slices < 0 or operations < 0:
        raise ValueError(f"slices ({slices}) and operations ({operations}) of a staged Part "
                         "must be counts (0 or more)")
    if not slices or not operations:
        return 0
    return slices + (operations - 1) * max(slices - 2, 0)


def slice_load_counts(slices: int, operations: int) -> tuple[int, ...]:
    """How many times the DMA loads each of a staged Part's ``slices`` slices (in channel
    order) over its ``operations`` operations: every slice in the first; in each backwards
    one all but the last two, in each forwards one after the first all but the first two."""
    total = slice_loads(slices, operations)   # checks the counts
    if not total:
        return (0,) * slices
    if slices <= 2:
        return (1,) * slices
    backwards, forwards = operations // 2, (operations - 1) // 2
    return tuple(1 + backwards * (k < slices - 2) + forwards * (k >= 2) for k in range(slices))


def channel_loads(channels: int, slice_channels: int, operations: int) -> int:
    """Output channels' weights the DMA loads, summed over every slice loaded, for a staged
    Part of ``channels`` output channels cut into slices of ``slice_channels`` (the last
    one holding the rest) running ``operations`` operations."""
    if slice_channels < 1:
        raise ValueError(f"slice_channels must be 1 or more, not {slice_channels}")
    slices = -(-channels // slice_channels)
    counts = slice_load_counts(slices, operations)
    return sum(n * min(slice_channels, channels - k * slice_channels)
               for k, n in enumerate(counts))
