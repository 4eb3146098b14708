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

The staging double buffer gets no DMA (rfcs/0007, Part 2, "Weights"): every operation reads
its streamed weights in place from flash.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tvm_ethos.backends.ethos_u.stream_base import ALIGN, FLASH_REGION, SCRATCH_REGION


def pool_key(plan_index: int) -> str:
    """The arena name of Plan ``plan_index``'s weight block."""
    return f"weights@plan{plan_index}"


@dataclass(frozen=True)
class WeightPool:
    """A Plan's weight block: ``nbytes`` (what the planner counts for its copies and staging)
    and the Parts whose weights the Plan copies to SRAM, in Plan order."""

    nbytes: int
    copied: tuple[str, ...] = ()


class PrefetchFormError(Exception):
    """A Plan prefetches weights across Plans (the compile path plans without that)."""


def weight_pool(plan, members: set[str]) -> WeightPool:
    """The weight block of ``plan``: its TensorConfigs of constants held in SRAM (copies and
    staging), ``members`` being the names of the Plan's own output tensors."""
    if plan.spec.prefetched or plan.spec.prefetch_next:
        raise PrefetchFormError(
            "a Plan with cross-Plan weight prefetch (the compile path plans without it: "
            "PlannerOptions(weight_prefetch=False))")
    nbytes = 0
    for tc in plan.tensor_configs:
        if tc.copy_region != tc.home_region and tc.tensor not in members:
            nbytes += tc.buffer_bytes
    copied = tuple(p for p in plan.parts if p in plan.spec.weights)
    return WeightPool(nbytes, copied)


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
        base, room = offsets[pool_key(k)], pool.nbytes
        chosen = []
        for part in pool.copied:
            readers = [op for op in part_ops.get((k, part), []) if op.weights]
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
