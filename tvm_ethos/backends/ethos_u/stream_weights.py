"""Weights a Plan holds in SRAM, as the stream realizes them: DMAs of encoded weight streams
from flash into the Plan's weight block.

The planner counts, per Plan, raw bytes for each constant it copies to SRAM (a Part running
several stripes whose weights are read from SRAM, ``PlanSpec.weights``) and for its weight
staging double buffer. The NPU reads weights encoded (``npu_encode_weights``: a stream of
compressed 16-byte-padded chunks) and a bias/scale stream of 10 bytes per channel, not the
raw int8 weights and int32 biases the planner counts; encoded weights are a little larger
than raw ones (a header per stream, padded input depths), bias streams 2.5 times larger. So
the stream does not keep one buffer per constant: the Plan's weight TensorConfigs are one
block of their summed bytes (:func:`weight_pool`; the Plan's memory is unchanged), and
:func:`copy_weights` fills it, before the Plan's first operation, with the encoded weight
streams of its copied Parts (in Plan order) and then, while room is left, their bias/scale
streams; the Part's operations then read those from the scratch region. A stream that does
not fit stays in flash and is read in place there (the Ethos-U weight decoder reads any
region), and the report says how many bytes were left in flash.

The staging double buffer of a Plan's staged Part is filled slice by slice (:class:`Stager`,
rfcs/0007 Part 2, "Weights"): each slice's DMA into the next half, unless a half still
holds it.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ethos_arch.ops import Op
from planner.staged_slices import SLICE_CHANNELS, slice_order
from tvm_ethos.backends.ethos_u.npu_ops import attach_constants, conv_scales, weights_ohwi
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    FLASH_REGION,
    SCRATCH_REGION,
    vela_api,
)


def pool_key(plan_index: int) -> str:
    """The arena name of Plan ``plan_index``'s weight block."""
    return f"weights@plan{plan_index}"


@dataclass(frozen=True)
class WeightPool:
    """A Plan's weight block: ``nbytes`` (what the planner counts for its copies and staging),
    the Parts whose weights the Plan copies to SRAM, in Plan order, and the Part whose
    weights stream through its staging double buffer (``staging_bytes`` of the block, at its
    top), if any."""

    nbytes: int
    copied: tuple[str, ...] = ()
    staged: str | None = None
    staging_bytes: int = 0

    @property
    def copy_room(self) -> int:
        """Bytes at the block's bottom for the copies (the staging buffer keeps its own)."""
        return self.nbytes - (self.staging_bytes if self.staged else 0)

    def halves(self, base: int) -> tuple[tuple[int, int], int]:
        """The arena offsets of the staging buffer's two halves and their bytes, 16-aligned
        (the NPU reads weight streams from 16-byte boundaries), for the block at ``base``."""
        start = base + _aligned(self.copy_room)
        half = (base + self.nbytes - start) // 2 // ALIGN * ALIGN
        return (start, start + half), half


class PrefetchFormError(Exception):
    """A Plan prefetches weights across Plans (the compile path plans without that)."""


def weight_pool(plan, members: set[str], owner: dict | None = None,
                stageable: set | None = None) -> WeightPool:
    """The weight block of ``plan``: its TensorConfigs of constants held in SRAM (copies and
    staging), ``members`` being the names of the Plan's own output tensors. ``owner``: the
    Part reading each constant; the staging buffer's Part is staged when it is in
    ``stageable`` (a convolution) and not copied."""
    if plan.spec.prefetched or plan.spec.prefetch_next:
        raise PrefetchFormError(
            "a Plan with cross-Plan weight prefetch (the compile path plans without it: "
            "PlannerOptions(weight_prefetch=False))")
    nbytes = staging = 0
    staged = None
    for tc in plan.tensor_configs:
        if tc.copy_region != tc.home_region and tc.tensor not in members:
            nbytes += tc.buffer_bytes
            if tc.double_buffer:
                staging += tc.buffer_bytes
                staged = (owner or {}).get(tc.tensor, staged)
    copied = tuple(p for p in plan.parts if p in plan.spec.weights)
    if staged in copied or staged not in (stageable or ()):
        staged = None
    return WeightPool(nbytes, copied, staged, staging)


@dataclass
class CopyReport:
    """What the weight DMAs moved: bytes into SRAM, encoded bytes of copied Parts that stayed
    in flash (no room left in the block), operations of copied Parts reading flash (their
    block depth is not the one whose stream was copied)."""

    dma_bytes: int = 0
    left_in_flash: int = 0
    flash_readers: int = 0    # operations of copied Parts still reading flash
    pool_used: dict = field(default_factory=dict)  # Plan -> bytes of its block filled
    copies: list = field(default_factory=list)    # (plan, part, "weights"/"biases", bytes)


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def copy_weights(api, ops: list, plan_starts: dict, part_ops: dict, pools: dict,
                 offsets: dict) -> tuple[list, CopyReport]:
    """``ops`` with, before each Plan's first operation, the DMAs that fill its weight block,
    and the copied Parts' operations reading their streams there.

    ``plan_starts``: Plan index -> index in ``ops`` of its first operation; ``part_ops``:
    (Plan, Part) -> the operations that Part runs (all read flash, encoded per block depth);
    ``pools``: Plan index -> :class:`WeightPool`; ``offsets``: the arena layout. A Part whose
    operations use several block depths copies the stream most of them read; the others
    keep reading flash."""
    report = CopyReport()
    dmas: dict[int, list] = {}
    for k, pool in sorted(pools.items()):
        if not pool.copied:
            continue
        base, room = offsets[pool_key(k)], pool.copy_room
        chosen = []
        for part in pool.copied:
            readers = [op for op in part_ops.get((k, part), []) if getattr(op, "weights", None)]
            if not readers:
                continue
            streams: dict = {}
            for op in readers:
                streams.setdefault((op.weights[0].address, op.weights[0].length,
                                    op.biases[0].address, op.biases[0].length), []).append(op)
            key, users = max(streams.items(), key=lambda kv: (len(kv[1]), kv[0]))
            report.flash_readers += len(readers) - len(users)
            chosen.append((part, key, users))
        used = 0
        placed = []
        for what in ("weights", "biases"):
            for part, key, users in chosen:
                src, length = (key[0], key[1]) if what == "weights" else (key[2], key[3])
                if what == "biases" and not any(p[0] == part and p[1] == "weights"
                                                for p in placed):
                    report.left_in_flash += length
                    continue
                if used + _aligned(length) > room:
                    report.left_in_flash += length
                    continue
                dst = base + used
                used += _aligned(length)
                placed.append((part, what))
                dmas.setdefault(k, []).append(api.NpuDmaOperation(
                    api.NpuAddressRange(FLASH_REGION, src, length),
                    api.NpuAddressRange(SCRATCH_REGION, dst, length)))
                report.dma_bytes += length
                report.copies.append((k, part, what, length))
                report.pool_used[k] = used
                sram = api.NpuAddressRange(SCRATCH_REGION, dst, length)
                for op in users:
                    setattr(op, what, [sram])
    out = []
    starts = {i: k for k, i in plan_starts.items()}
    for i, op in enumerate(ops):
        if i in starts:
            out.extend(dmas.get(starts[i], []))
        out.append(op)
    return out, report


def channel_slice(fm, c0: int, n: int):
    """The feature map of channels [c0, c0 + n) of ``fm`` (NHWC: the same rows and columns,
    every tile moved by ``c0`` elements, the full tensor's strides). A shallow copy: a feature
    map's fields are replaced, never changed in place."""
    api = vela_api()
    out = copy.copy(fm)
    h, w, c = fm.shape.height, fm.shape.width, fm.shape.depth
    if out.strides is None:
        e = {api.NpuDataType.INT16: 2, api.NpuDataType.INT32: 4}.get(fm.data_type, 1)
        out.strides = api.NpuShape3D(w * c * e, c * e, e)
    e = out.strides.depth
    out.shape = api.NpuShape3D(h, w, n)
    t = out.tiles
    # a tile the box does not reach keeps its base (never read; left constant, it is not
    # written again at every slice)
    reached = (True, w > t.width_0, h > t.height_0, w > t.width_0 and h > t.height_1)
    out.tiles = api.NpuTileBox(t.height_0, t.height_1, t.width_0,
                               [a + c0 * e if r else a for a, r in zip(t.addresses, reached)])
    return out


class Stager:
    """The staged Parts' operations, one per slice of ``SLICE_CHANNELS`` output channels, each
    after the DMA of its encoded weight slice (and its bias/scale slice, where both fit) into
    the next half of its Plan's staging buffer. A slice a half still holds from an earlier
    stripe is read there with no DMA: the halves keep their slices for the whole Plan, so its
    stripes share one weight setting instead of re-loading the same bytes. Every other
    stripe runs its slices in reverse order, so it begins with the two slices the stripe
    before ended with (a Part of one or two slices loads them once per Plan). A slice whose
    encoded weights exceed a half is read in place from flash."""

    def __init__(self, api, flash, acc, halves: dict):
        """``halves``: layer step -> (Plan, (offset A, offset B), bytes of a half)."""
        self.api, self.flash, self.acc, self.halves = api, flash, acc, halves
        self.turn: dict = {}
        self.encoded: dict = {}
        self.constants: dict = {}   # layer step -> (OHWI weights, scales): every stripe's
        self.dma_bytes = 0
        self.left_in_flash = 0
        self.touched: list = []     # (arena offset, bytes) of every DMA into a half
        #: Plan -> the slice (flash address and length of its weights and biases) each half
        #: of its staging buffer holds; only the stager writes the halves while its Plan runs
        self.held: dict = {}
        self.stripes: dict = {}     # layer step -> stripes emitted so far

    def slices(self, npu, q, step: int, channels: int, block_config) -> list:
        """DMAs and operations computing ``npu`` (its block config not chosen yet) slice by
        slice; ``block_config(op, key)`` picks one, cached by ``key``."""
        api = self.api
        plan, (half_a, half_b), half = self.halves[step]
        depthwise = q.kind == Op.DEPTHWISE_CONV2D
        if step not in self.constants:
            self.constants[step] = (weights_ohwi(q), conv_scales(q, channels))
        ohwi, scales = self.constants[step]
        out = []
        starts = range(0, channels, SLICE_CHANNELS)
        # every other stripe walks the slices backwards: it begins with the two slices the
        # halves still hold from the stripe before (the rule the planner's estimates count)
        stripe = self.stripes.get(step, 0)
        self.stripes[step] = stripe + 1
        for c0 in (starts[k] for k in slice_order(len(starts), stripe)):
            n = min(SLICE_CHANNELS, channels - c0)
            op = _shallow(npu)
            op.ofm = channel_slice(npu.ofm, c0, n)
            if depthwise:
                op.ifm = channel_slice(npu.ifm, c0, n)
            op.block_config = block_config(op, ("slice", step, c0, n, op.ifm.shape.height,
                                                op.ifm.shape.width, op.ofm.shape.height,
                                                op.ofm.shape.width, op.padding.top,
                                                op.padding.left, op.padding.bottom,
                                                op.padding.right))
            ck = (step, c0, n, op.block_config.depth)
            if ck not in self.encoded:
                qs = dataclasses.replace(q, bias=None if q.bias is None else q.bias[c0:c0 + n])
                attach_constants(op, qs, n, self.acc, self.flash,
                                 np.ascontiguousarray(ohwi[c0:c0 + n]), scales[c0:c0 + n])
                self.encoded[ck] = (op.weights, op.biases)
            (w,), (b,) = self.encoded[ck]
            op.weights, op.biases = [w], [b]
            if w.length <= half:
                slice_key = (w.address, w.length, b.address, b.length)
                held = self.held.setdefault(plan, [None, None])
                if slice_key in held:      # a half still holds this slice: read it there
                    turn = held.index(slice_key)
                    dma = False
                else:
                    turn, dma = self.turn.get(plan, 0), True
                    held[turn] = slice_key
                self.turn[plan] = 1 - turn
                dst = (half_a, half_b)[turn]
                moved = [("weights", w, dst)]
                if _aligned(w.length) + b.length <= half:
                    moved.append(("biases", b, dst + _aligned(w.length)))
                else:
                    self.left_in_flash += b.length
                for what, src, at in moved:
                    sram = api.NpuAddressRange(SCRATCH_REGION, at, src.length)
                    setattr(op, what, [sram])
                    if dma:
                        out.append(api.NpuDmaOperation(src, sram))
                        self.dma_bytes += src.length
                        self.touched.append((at, src.length))
            else:
                self.left_in_flash += w.length + b.length
            out.append(op)
        return out


def _shallow(npu):
    op = copy.copy(npu)
    op.weights, op.biases, op.block_config = [], [], None
    return op
