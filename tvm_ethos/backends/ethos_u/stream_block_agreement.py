"""An operation runs the block height and width of the operation before it, where the
planner's performance model estimates that no slower than its own block.

Vela's register command generator writes a register only when its value changes. In a
cascade the operations alternate between layers, and each layer's own block writes the
block registers (``OFM_BLK_HEIGHT_M1``, ``OFM_BLK_WIDTH_M1``) again at every switch. Often
the block of the layer before fits as well: the choice is free where the estimated cycles do
not grow, and taking it leaves those registers as they are. The block's depth is kept (the
weights are encoded for it), and a block larger than the operation's output along an axis is
not taken (the generator's own blocks are clipped to the output).
"""
from __future__ import annotations

import math

from planner.perf.ethos_u_npu import (
    MAC_OPS,
    BlockConfig,
    EthosUAccelerator,
    NpuOp,
    estimate_elementwise,
    estimate_mac_op,
    search_settings,
)

#: why an operation runs the block it runs: the one of the operation before it, estimated no
#: slower than its own (``stream_cascade._Emitter.block_config``)
AGREED_BLOCK = "planner's estimate: the block of the operation before, no slower"


def config_with_block(acc: EthosUAccelerator, op: NpuOp,
                      block: tuple[int, int, int]) -> BlockConfig:
    """The planner's BlockConfig of ``op`` run with OFM ``block`` (height, width, depth): its
    IFM block as the block search sizes it (GetArchIFMBlockSize, rounded to the OFM
    micro-block), the traversal and accumulator width the search would give ``op``."""
    ifm = op.ifm if op.ifm2 is None or math.prod(op.ifm) >= math.prod(op.ifm2) else op.ifm2
    g = search_settings(acc, op, ifm)
    h, w, d = block
    ib_h = _ifm_extent(h, *g.h_axis[:1], *g.h_axis[2:6])
    ib_w = _ifm_extent(w, *g.w_axis[:1], *g.w_axis[2:6])
    return BlockConfig((h, w, d), (ib_h, ib_w, d if g.equal_depth else g.ifm_block_depth),
                       g.traversal, g.acc_bits)


def _ifm_extent(block: int, ublock: int, stride: int, kernel: int, rounding: int,
                upscale: int) -> int:
    extent = -(-((block - 1) * stride + kernel + rounding) // upscale)
    return -(-extent // ublock) * ublock


def estimated_cycles(perf, op: NpuOp, cfg: BlockConfig, whole: NpuOp | None) -> int:
    """``perf``'s (an EthosUPerfModel) estimate of ``op`` run with ``cfg``: the lesser of the
    estimate as a stripe of ``whole`` (the Part's whole operation) and as an operation of its
    own, as the planner's block policies judge a stripe."""
    if op.npu in MAC_OPS:
        def one(w):
            return estimate_mac_op(perf.accelerator, perf.fm_timing,
                                   perf.const_timing.read_latency, op, cfg, w).cycles
    else:
        def one(w):
            return estimate_elementwise(perf.accelerator, perf.fm_timing, op, cfg,
                                        perf.const_timing).cycles
    return min(one(whole), one(None)) if whole is not None else one(None)


def no_slower(perf, op: NpuOp, whole: NpuOp | None, own: tuple[int, int, int],
              other: tuple[int, int, int]) -> bool:
    """Whether ``op`` run with block ``other`` is estimated no slower than with ``own``."""
    acc = perf.accelerator
    return estimated_cycles(perf, op, config_with_block(acc, op, other), whole) <= \
        estimated_cycles(perf, op, config_with_block(acc, op, own), whole)


def within_output(block: tuple[int, ...], ofm: tuple[int, ...], ublock: tuple[int, ...]
                  ) -> bool:
    """Whether ``block`` is its own clipping to ``ofm`` along each axis given (rounded up to
    the micro-block): no larger than the output needs."""
    return all(b == -(-min(b, o) // u) * u for b, o, u in zip(block, ofm, ublock))
