"""The Ethos-U55/U65 NPU as Vela models it: accelerator constants, NPU operations, the block
configuration search and the cycle formulas of one command.

The scalar performance model (planner/perf/ethos_u.py) and the batched one
(planner/perf/ethos_u_batch.py) both build on these and on nothing of each other's. The
formulas and constants follow Vela 5.2.0 (``ethos-u-vela`` on PyPI), whose default core is the
C++ "regor" library; the legacy Python core (``ethosu/vela/npu_performance.py``,
``architecture_features.py``) has the same structure and constants. Sources are named in
comments as ``regor/<file>:<function>`` (paths below ``ethosu/regor/`` in the 5.2.0 source
distribution) or ``vela.ini`` / ``architecture_features.py``. The code is our own.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from ethos_arch.accelerators import ACCELERATORS as REGISTRY
from ethos_arch.accelerators import EthosUCore
from planner.errors import PlannerError
from planner.memory import MemoryRegion

Shape3 = tuple[int, int, int]          # (height, width, depth)
Shape4 = tuple[int, int, int, int]     # NHWC

NHWC = "NHWC"
NHCWB16 = "NHCWB16"


# --------------------------------------------------------------------------------------------
# Accelerator constants
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EthosUAccelerator:
    """Fixed properties of one Ethos-U configuration, the cycle formulas' view of its entry in
    the accelerator registry (``ethos_arch.accelerators``, which names Vela's sources).

    ``output_cycles`` are AO (output stage) cycles per element indexed by operation class:
    0 unary 32-bit elementwise, 1 binary 32-bit elementwise, 2 MUL with 32-bit output, 3 MUL or
    40-bit accumulators, 4 simple ADD/SUB, 5 advanced ADD/SUB, 6 MAXPOOL, 7 everything else.
    ``activation_cycles``: 0 LUT activations (sigmoid, tanh), 1 ReLU family, 2 none.
    """
    name: str
    macs: int                        # MACs per cycle per core
    cores: int
    ofm_ublock: Shape3               # (h, w, c) output micro-block
    ifm_ublock: Shape3
    shram_banks: int                 # 1 KiB banks of the shared buffer
    shram_granules: tuple[int, ...]  # IFM8, IFM16, IFM8_EW, IFM16_EW, IFM32, ACC16, ACC32, ACC40
    output_cycles: tuple[float, ...]
    activation_cycles: tuple[float, ...]


#: Every Ethos-U configuration with a performance model, from the accelerator registry.
ACCELERATORS: dict[str, EthosUAccelerator] = {
    a.name: EthosUAccelerator(a.name, a.core.macs, a.core.cores, a.core.ofm_ublock,
                              a.core.ifm_ublock, a.core.shram_banks, a.core.shram_granules,
                              a.core.output_cycles, a.core.activation_cycles)
    for a in REGISTRY if isinstance(a.core, EthosUCore)
}

# regor/ethos_u55.cpp: ArchEthosU55 constructor (_subkernelMax 8x8, _ofmBlockMax 32x64x128),
# FindBlockConfig (OFMSplitDepth = 16), ApplyConfig (2 reserved output banks, 1 KiB banks,
# 2 reserved end banks when there are more than 16).
SUBKERNEL_MAX = (8, 8)
OFM_BLOCK_MAX = (32, 64, 128)
_OFM_SPLIT_DEPTH = 16
_BANK_BYTES = 1024
_RESERVED_OUTPUT_BANKS = 2
# regor/ethos_u55.cpp: s_SHRAMElementBits indexes; granule indexes as in shram_granules.
_GRANULE_IFM = {8: 0, 16: 1, 32: 4}
_GRANULE_IFM_EW = {8: 2, 16: 3, 32: 4}
_GRANULE_ACC = {32: 6, 40: 7}

# The NPU operation classes of regor/ethos_u55.hpp EthosU55NpuOp.
CONV, DEPTHWISE, POOLING, REDUCE_SUM, ELEMENTWISE = "conv", "depthwise", "pooling", \
    "reduce_sum", "elementwise"
MAC_OPS = (CONV, DEPTHWISE, POOLING, REDUCE_SUM)

_RELU_FAMILY = ("relu", "relu6", "relu_n1_to_1", "relu0_to_1", "clip")
LUT_ACTIVATIONS = ("sigmoid", "tanh", "leaky_relu", "hard_swish", "rsqrt", "lut", "exp", "log",
                   "gelu")


class BlockPolicy(str, Enum):
    """Which block configuration each stripe of a Part runs with
    (planner.perf.ethos_u.EthosUPerfModel says why each exists): PART the one chosen for the
    Part's whole output, clipped to the stripe; STRIPE the one chosen for the stripe's own
    shape; BEST the cheaper of the two back to back. Members are their string values."""
    PART = "part"
    STRIPE = "stripe"
    BEST = "best"
    __str__ = str.__str__
    __format__ = str.__format__


# --------------------------------------------------------------------------------------------
# Memory timing seen by the block fetches
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PortTiming:
    """What the NPU's own block reads and writes see of one memory (vela.ini figures)."""
    read_bytes_per_cycle: float
    write_bytes_per_cycle: float
    read_latency: int
    write_latency: int
    burst: int

    @staticmethod
    def of(region: MemoryRegion) -> "PortTiming":
        return PortTiming(region.read_bytes_per_cycle, region.write_bytes_per_cycle,
                          region.read_latency, region.write_latency, region.burst)


# Vela's default Ethos-U55 system (vela.ini System_Config.Ethos_U55_High_End_Embedded): SRAM on
# an 8-byte AXI port at clock scale 1.0, burst 32, latency 32; flash at scale 0.125, latency 64.
DEFAULT_FM_TIMING = PortTiming(8.0, 8.0, 32, 32, 32)
DEFAULT_CONST_TIMING = PortTiming(1.0, 1.0, 64, 0, 128)


# --------------------------------------------------------------------------------------------
# One NPU operation, as Vela's PerformanceQuery sees it
# --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class NpuOp:
    """One hardware operation: the unit the block configuration and the cycle formulas apply
    to. A Part lowers to one or more of these (planner.perf.ethos_u.lower_part)."""
    npu: str                     # CONV, DEPTHWISE, POOLING, REDUCE_SUM, ELEMENTWISE
    op: str                      # Vela op type: "Conv2D", "MaxPool", "Add", "Mul", ...
    ifm: Shape4
    ofm: Shape4
    ifm2: Shape4 | None = None
    kernel: tuple[int, int] = (1, 1)      # (height, width)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    ifm_bits: int = 8
    ofm_bits: int = 8
    activation: str | None = None         # fused activation
    has_bias: bool = False                # reads scale and bias (convolutions)
    upscale: int = 1                      # IFM resampling (resize): 1 or 2
    rounding: int = 0
    lut_bytes: int = 0
    ifm_format: str = NHCWB16
    ifm2_format: str = NHCWB16
    ofm_format: str = NHCWB16
    ifm2_const: bool = False              # the second operand is a constant (weights memory)


@dataclass(frozen=True)
class BlockConfig:
    """The OFM/IFM block shapes (h, w, c) and traversal Vela would program for an NpuOp."""
    ofm_block: Shape3
    ifm_block: Shape3
    traversal: str        # "depth_first", "part_kernel" or "depthwise"
    acc_bits: int         # 32 or 40


@dataclass(frozen=True)
class CycleBreakdown:
    """Components of one NpuOp's estimate (for tests, debugging and
    rfcs/0001-appendix-cost-model.md)."""
    cycles: int
    macs: int
    mac_cycles_per_block: float
    ao_cycles_per_block: float
    blocks: float
    ifm_block_cycles: int
    ofm_block_cycles: int
    config: BlockConfig
    #: Cycles of ``cycles`` that a command run back to back with its neighbours hides: the
    #: first IFM block, the last OFM block and the one block by which the slower pipeline
    #: stage (MAC or output) trails the other.
    fill_drain_cycles: int = 0


@dataclass(frozen=True)
class StripeSummary:
    """What the planner asks of one stripe of one Part: the sums over its NPU operations
    (:meth:`EthosUPerfModel.breakdown`) and its weight fetches."""
    cycles: int
    fill_drain_cycles: int
    macs: int
    weight_fetches: int
    #: Bytes the NPU's own block reads and writes move through the feature-map memory port
    #: (:func:`fm_access_bytes`): IFM blocks re-read per OFM block, the OFM written once.
    fm_access_bytes: int = 0


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return ceil_div(a, b) * b


# --------------------------------------------------------------------------------------------
# Block configuration search (regor/ethos_u55.cpp: FindBlockConfig, TryBlockConfig,
# ChooseKernelMethod, GetArchIFMBlockSize, FitBlockForOFM)
# --------------------------------------------------------------------------------------------

def _part_kernel_first(ifm_depth: int, ifm_bits: int, kernel_elements: int) -> bool:
    """Part-kernel-first traversal when it uses the MAC array better than depth-first
    (regor/ethos_u55.cpp:ChooseKernelMethod)."""
    if ifm_depth <= 8:
        return True
    depth_util = ifm_depth / _round_up(ifm_depth, 32 if ifm_bits == 8 else 16)
    part_util = (ifm_depth / _round_up(ifm_depth, 8)) * (
        kernel_elements / _round_up(kernel_elements, 4 if ifm_bits == 8 else 2))
    return part_util >= depth_util


@lru_cache(maxsize=1024)
def _depth_candidates(ub_c: int, search_c: int, ofm_c: int) -> tuple[int, ...]:
    """OFM block depths tried, in Vela's order: ublock multiples, rounded to 16 while below
    the OFM depth (regor/ethos_u55.cpp:FindBlockConfig). Cached: few OFM depths recur."""
    out = []
    depth = max(ub_c, min(search_c, _OFM_SPLIT_DEPTH))
    if depth < ofm_c:
        depth = _round_up(depth, _OFM_SPLIT_DEPTH)
    while depth <= search_c:
        out.append(depth)
        depth += ub_c
        if depth < ofm_c:
            depth = _round_up(depth, _OFM_SPLIT_DEPTH)
    return tuple(out)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)   # shared through a cache
    return a


@lru_cache(maxsize=4096)
def block_axis(axis: int, ublock: int, search: int, stride: int, kernel: int, rounding: int,
                upscale: int, ofm: int, clip: bool) -> tuple[np.ndarray, ...]:
    """The block search's candidates along OFM height (``axis`` 0, shaped (n, 1)) or width
    (1, shaped (1, n)) and what depends on them alone: OFM block sizes, IFM block sizes
    (GetArchIFMBlockSize, rounded to the OFM ublock), the sizes that fit the accumulators
    (``clip``: the 256/512-MAC Conv1D case), whole blocks over the OFM, and float32 blocks
    over the OFM. Cached: the same stripe heights and widths recur across many ops."""
    shape = (-1, 1) if axis == 0 else (1, -1)
    blocks = np.arange(ublock, search + 1, ublock, dtype=np.int64).reshape(shape)
    ifm = -(-((blocks - 1) * stride + kernel + rounding) // upscale)
    ifm = -(-ifm // ublock) * ublock
    fit = np.minimum(blocks, ofm) if clip else blocks
    full = -(-ofm // fit)
    frac = np.float32(ofm) / fit.astype(np.float32)
    return tuple(_frozen(a) for a in (blocks, ifm, fit, full, frac))


@lru_cache(maxsize=1024)
def depth_axis(depths: tuple[int, ...], ofm_c: int) -> tuple[np.ndarray, ...]:
    """Block depths shaped (n, 1, 1), float32 whole blocks over the OFM depth, and float32
    (blocks over it) x depth, the weight re-fetch factor (cached like :func:`block_axis`)."""
    dd = np.asarray(depths, dtype=np.int64)[:, None, None]
    full = (-(-ofm_c // dd)).astype(np.float32)
    weight_scale = (np.float32(ofm_c) / dd.astype(np.float32)) * dd.astype(np.float32)
    return tuple(_frozen(a) for a in (dd, full, weight_scale))


@lru_cache(maxsize=8192)
def _fitting_blocks(h_axis: tuple, w_axis: tuple, depths: tuple[int, ...],
                    ifm_block_depth: int | None, ifm_bits: int, ifm_granule: int,
                    acc_granule: int, acc_start: int, ew_usage: int, acc_bits: int
                    ) -> np.ndarray:
    """Which (depth, height, width) blocks fit the shared buffer (TryBlockConfig):
    double-buffered IFM banks after the reserved output banks, then the accumulators (or the
    second IFM) below the LUT banks (``acc_start``). ``h_axis`` and ``w_axis`` are
    :func:`block_axis` arguments; ``ifm_block_depth`` None means the IFM block is as deep as
    the OFM block. Cached, and asked for with the largest search ranges (the caller slices
    the table): it depends on the stripe only through them, so every stripe shares it."""
    _, ib_h, fit_h, _, _ = block_axis(0, *h_axis)
    ww, ib_w, _, _, _ = block_axis(1, *w_axis)
    dd = np.asarray(depths, dtype=np.int64)[:, None, None]
    ib_c = dd if ifm_block_depth is None else ifm_block_depth
    ifm_bytes = ib_h * ib_w * (-(-(ib_c * (ifm_bits // 8)) // 8) * 8)
    ifm_banks = -(-ifm_bytes // _BANK_BYTES) * 2
    ifm_banks = -(-ifm_banks // ifm_granule) * ifm_granule
    ifm_end = _RESERVED_OUTPUT_BANKS + ifm_banks
    if ew_usage == 0:
        acc_bytes = fit_h * ww * (-(-dd // 8) * 8) * acc_bits // 8
        acc_banks = -(-acc_bytes // _BANK_BYTES) * 2
        acc_banks = -(-acc_banks // acc_granule) * acc_granule
        fits = ifm_end <= acc_start - acc_banks
    else:
        fits = ifm_end + (ifm_banks if ew_usage == 1 else 0) <= acc_start
    return _frozen(np.asarray(fits))


def clear_caches() -> None:
    """Forget this module's memos (block axes, fit tables, depth candidates, DPU cycles), so a
    benchmark times a cold search."""
    for fn in (block_axis, depth_axis, _fitting_blocks, _depth_candidates, dpu_cycles_of):
        fn.cache_clear()


class SearchSettings(NamedTuple):
    """What the block search reads of an operation besides its OFM and IFM height and
    width (and batch): shared by every stripe of a Part, so the batched search
    (planner/perf/ethos_u_batch.py) works them out once per group of stripes."""
    ew_usage: int               # elementwise: 0 none, 1 two IFMs, 2 a scalar second IFM
    equal_depth: bool           # the IFM block is as deep as the OFM block
    is_dw: bool
    ifm_c: int
    traversal: str
    acc_bits: int
    ifm_block_depth: int
    ifm_repeats: int            # sub-kernels of at most 8 x 8
    weight_fetch_wh: int
    conv1d: bool                # the 256/512-MAC Conv1D rule clips block heights to the OFM
    depths: tuple[int, ...]     # block depth candidates, in Vela's order
    h_axis: tuple               # block_axis arguments of the largest search range
    w_axis: tuple
    fits: np.ndarray | None     # (depth, height, width) blocks of those ranges that fit


def search_settings(acc: EthosUAccelerator, op: NpuOp, ifm: Shape4) -> SearchSettings:
    """The :class:`SearchSettings` of ``op``, ``ifm`` its larger input (``fits`` None when
    there is no depth candidate)."""
    ofm_h, ofm_c = op.ofm[1], op.ofm[3]
    ifm_c = ifm[3]
    npu = op.npu
    ew_usage = 0
    if npu == ELEMENTWISE:
        scalar = math.prod(op.ifm) == 1 or (op.ifm2 is not None and math.prod(op.ifm2) == 1)
        ew_usage = 2 if (scalar and op.ifm_bits <= 16) else 1
    is_pooling = npu in (POOLING, REDUCE_SUM)
    is_dw = npu == DEPTHWISE
    equal_depth = ew_usage != 0 or (npu == POOLING) or is_dw
    kh, kw = op.kernel
    part_kernel = npu == CONV and _part_kernel_first(ifm_c, op.ifm_bits, kh * kw)
    traversal = "depthwise" if is_dw else ("part_kernel" if part_kernel else "depth_first")
    acc_bits = 40 if (op.ifm_bits == 16 and (not is_pooling or npu == REDUCE_SUM)) else 32

    acc_granule = acc.shram_granules[_GRANULE_ACC[acc_bits]]
    ifm_bits = op.ifm_bits if op.ifm_bits in (8, 16, 32) else 8
    ifm_granule = acc.shram_granules[(_GRANULE_IFM_EW if ew_usage else _GRANULE_IFM)[ifm_bits]]
    reserved_end = 2 if acc.shram_banks > 16 else 0
    lut_banks = max(ceil_div(op.lut_bytes, _BANK_BYTES), reserved_end)
    dkh = (kh - 1) * op.dilation[0] + 1
    dkw = (kw - 1) * op.dilation[1] + 1
    ifm_repeats = ceil_div(dkw, SUBKERNEL_MAX[1]) * ceil_div(dkh, SUBKERNEL_MAX[0])
    if ifm_bits == 16:
        ifm_block_depth = _round_up(min(ifm_c, 16), 4)
    else:
        ifm_block_depth = _round_up(min(ifm_c, 16 if part_kernel else 32), acc.ifm_ublock[2])
    weight_fetch_wh = kh * kw if npu in (CONV, DEPTHWISE) else 0
    ub_h, ub_w, ub_c = acc.ofm_ublock
    depths = _depth_candidates(ub_c, _round_up(min(ofm_c, OFM_BLOCK_MAX[2]), ub_c), ofm_c)
    conv1d = ofm_h == 1 and kh == 1 and ub_h == 2
    h_axis = (ub_h, _round_up(OFM_BLOCK_MAX[0], ub_h), op.stride[0],
              min(dkh, SUBKERNEL_MAX[0]), op.rounding, op.upscale, ofm_h if conv1d else 0,
              conv1d)
    w_axis = (ub_w, _round_up(OFM_BLOCK_MAX[1], ub_w), op.stride[1],
              min(dkw, SUBKERNEL_MAX[1]), op.rounding, op.upscale, 0, False)
    # Whether a block fits depends on its own size alone, and the candidates along H and W
    # of a smaller search are the first ones of the largest: one table serves every stripe
    # height and width.
    fits = _fitting_blocks(h_axis, w_axis, depths, None if equal_depth else ifm_block_depth,
                           ifm_bits, ifm_granule, acc_granule, acc.shram_banks - lut_banks,
                           ew_usage, acc_bits) if depths else None
    return SearchSettings(ew_usage, equal_depth, is_dw, ifm_c, traversal, acc_bits,
                          ifm_block_depth, ifm_repeats, weight_fetch_wh, conv1d, depths,
                          h_axis, w_axis, fits)


def find_block_config(acc: EthosUAccelerator, op: NpuOp) -> BlockConfig:
    """The block configuration Vela chooses for ``op`` (same candidates, same float32 cost and
    the same tie-breaking), vectorised over the candidates and with the pieces that depend on
    the search ranges alone cached, for speed (tests/planner/test_block_search.py checks it
    against a scalar walk)."""
    ifm = op.ifm if op.ifm2 is None or math.prod(op.ifm) >= math.prod(op.ifm2) else op.ifm2
    _, ofm_h, ofm_w, ofm_c = op.ofm
    ifm_elements = math.prod(ifm)
    ifm_h, ifm_w, ifm_c = ifm[1], ifm[2], ifm[3]
    npu = op.npu
    g = search_settings(acc, op, ifm)
    equal_depth, is_dw, ifm_block_depth = g.equal_depth, g.is_dw, g.ifm_block_depth
    ub_h, ub_w, _ = acc.ofm_ublock
    search_h = _round_up(min(ofm_h, OFM_BLOCK_MAX[0]), ub_h)
    search_w = _round_up(min(ofm_w, OFM_BLOCK_MAX[1]), ub_w)
    # Candidates form a (depth, height, width) grid; each quantity is computed on the axes
    # it depends on and numpy broadcasts (no meshgrid or broadcast_to: this runs for every
    # distinct stripe shape the planner costs, mostly on small grids where numpy's per-call
    # overhead is the cost).
    hh, ib_h, fit_h, full_h, blocks_h = block_axis(0, ub_h, search_h, *g.h_axis[2:6], ofm_h,
                                                    g.conv1d)
    ww, ib_w, _, full_w, blocks_w = block_axis(1, ub_w, search_w, *g.w_axis[2:6], ofm_w,
                                                False)
    depths = g.depths
    if not depths:
        raise PlannerError(f"no Ethos-U block configuration fits {op}")
    dd, full_c, weight_scale = depth_axis(depths, ofm_c)
    grid = (len(depths), hh.shape[0], ww.shape[1])
    fits = g.fits[..., :grid[1], :grid[2]]
    ifm_repeats, weight_fetch_wh = g.ifm_repeats, g.weight_fetch_wh
    f32 = np.float32
    ofm_elements = math.prod(op.ofm)
    ib_hw = ib_h * ib_w
    if npu == ELEMENTWISE:
        cost = f32(ofm_elements) / (hh * ww * dd).astype(f32)
    else:
        # (Integer products are exact in any order; the float32 ones keep Vela's order.)
        weight_fetch = (full_h * full_w * (weight_fetch_wh * ifm_c)).astype(f32)
        if not is_dw:
            weight_fetch = weight_fetch * weight_scale
        ifm_fetch = (ib_hw * (ifm_c * ifm_repeats)).astype(f32)
        ifm_fetch *= blocks_w
        ifm_fetch *= blocks_h
        if not equal_depth:
            ifm_fetch = ifm_fetch * full_c
        cost = ifm_fetch + weight_fetch
        cost /= f32(ofm_elements)
    # Prefer blocks whose double-buffered IFM holds the whole IFM.
    if equal_depth:
        whole = ifm_elements < ib_hw * (dd * 2)
    else:
        whole = ib_hw > ifm_elements // (2 * ifm_block_depth)   # exact: positive integers
    cost = np.where(whole, cost / f32(2.0), cost)

    # Vela's loop order (depth outermost, then height, then width) is the grid's C order:
    # flat indices list the candidates as Vela meets them; the misfits cost infinity.
    cost = np.where(fits, cost, np.inf)
    if cost.shape != grid:
        cost = np.broadcast_to(cost, grid)
    best = cost.min()
    if best == np.inf:
        raise PlannerError(f"no Ethos-U block configuration fits {op}")
    ties = np.flatnonzero(cost == best).tolist()
    # The first minimum wins, unless later equal-cost small blocks (<= 4x4) cover the IFM at
    # least as well; the last of those with the best coverage is kept.
    # (Coverage is float32 like the cost; only ties need it, so it is computed for them.)
    plane = grid[1] * grid[2]
    later = [(t,) + divmod(t % plane, grid[2]) for t in ties[1:]]
    later = [(t, hi, wi) for t, hi, wi in later if hh[hi, 0] <= 4 and ww[0, wi] <= 4]
    choice = ties[0]
    if later:
        area = f32(ifm_h * ifm_w)
        covs = [area / f32(max(min(ifm_h, int(ib_h[hi, 0])) * min(ifm_w, int(ib_w[0, wi])), 1))
                for _, hi, wi in later]
        best_cov = min(covs)
        choice = [t for (t, _, _), c in zip(later, covs) if c == best_cov][-1]
    di, rest = divmod(choice, plane)
    hi, wi = divmod(rest, grid[2])
    h, w, d = int(hh[hi, 0]), int(ww[0, wi]), depths[di]
    ibh, ibw = int(ib_h[hi, 0]), int(ib_w[0, wi])
    ibc = d if equal_depth else ifm_block_depth
    return BlockConfig((h, w, d), (ibh, ibw, ibc), g.traversal, g.acc_bits)


# --------------------------------------------------------------------------------------------
# Cycle formulas (regor/ethos_u55_performance.cpp)
# --------------------------------------------------------------------------------------------

def transfer_bytes(acc: EthosUAccelerator, is_read: bool, burst: int, fmt: str, bits: int,
                    block: Shape3, shape: Shape4, elements: int) -> int:
    """Bytes moved for ``elements`` elements, inflated by the burst efficiency of the access
    pattern (EstimateMemoryTransfer)."""
    bh, bw, bc = block
    burst_bits = 8
    if fmt == NHCWB16:
        z_stride = (shape[2] * bits * 16) // 8
        if z_stride == bc:
            burst_bits = bits * bw * bc
        elif is_read:
            burst_bits = 16 * bits * bw
        else:
            burst_bits = 16 * bits * bw * acc.cores
    else:
        x_stride = (shape[3] * bits) // 8
        if is_read:
            burst_bits = bits * bw * bc if x_stride == bc else bits * bc
        elif bc <= 16 and x_stride == bc:
            burst_bits = bits * bw * bc
        else:
            burst_bits = min(64 * 8, 16 * bits * acc.cores, bc * bits)
    nbytes = (elements * bits) // 8
    burst_bytes = max(1, min(burst, burst_bits // 8))
    return (nbytes * burst) // burst_bytes


def fm_access_bytes(acc: EthosUAccelerator, burst: int, op: NpuOp, cfg: BlockConfig) -> int:
    """Bytes one NPU operation moves through the feature-map memory, as the hardware fetches
    them (Vela: ``npu_performance.py: measure_element_access`` and the transfer efficiency
    applied in ``estimate_full_op_performance``). A MAC operation fetches, for every OFM block
    (OFM depth blocks included, except for depthwise and pooling, whose IFM depth follows the
    OFM's), one IFM block of the full IFM depth per sub-kernel (kernels split in 8 x 8),
    channels rounded to the storage quantum (16 in NHCWB16): halos and depth blocks re-read the
    same data. An elementwise operation reads each operand once over the OFM. The OFM is
    written once. Each term is inflated by its burst efficiency (:func:`transfer_bytes`)."""
    ofm, ifm = op.ofm, op.ifm
    ob = tuple(min(b, e) for b, e in zip(cfg.ofm_block, ofm[1:]))
    q_in = 16 if op.ifm_format == NHCWB16 else 1
    q_out = 16 if op.ofm_format == NHCWB16 else 1
    if op.npu in MAC_OPS:
        blocks = ceil_div(ofm[1], ob[0]) * ceil_div(ofm[2], ob[1])
        if op.npu in (CONV, REDUCE_SUM):
            blocks *= ceil_div(ofm[3], ob[2])
        sub = ceil_div(op.kernel[0], SUBKERNEL_MAX[0]) * \
            ceil_div(op.kernel[1], SUBKERNEL_MAX[1])
        ib = tuple(min(b, e) for b, e in zip(cfg.ifm_block, ifm[1:]))
        reads = [(op.ifm_format, op.ifm_bits, ifm,
                  ib[0] * ib[1] * _round_up(ifm[3], q_in) * sub * blocks)]
    else:
        whole = ofm[1] * ofm[2] * _round_up(ofm[3], q_in)
        reads = [] if math.prod(ifm) == 1 else [(op.ifm_format, op.ifm_bits, ifm, whole)]
        if op.ifm2 is not None and math.prod(op.ifm2) > 1 and not op.ifm2_const:
            reads.append((op.ifm2_format, op.ifm_bits, op.ifm2, whole))
    total = sum(transfer_bytes(acc, True, burst, fmt, bits, cfg.ifm_block, shape, n)
                for fmt, bits, shape, n in reads)
    written = ofm[1] * ofm[2] * _round_up(ofm[3], q_out)
    return total + transfer_bytes(acc, False, burst, op.ofm_format, op.ofm_bits,
                                   cfg.ofm_block, ofm, written)


def _block_elements(shape: Shape4, block: Shape3) -> int:
    return min(shape[0], 1) * min(shape[1], block[0]) * min(shape[2], block[1]) * \
        min(shape[3], block[2])


def _ifm_block_cycles(acc: EthosUAccelerator, fm: PortTiming, op: NpuOp, cfg: BlockConfig,
                      const: PortTiming | None = None) -> int:
    """Latency plus transfer of the first IFM block(s) (MinimumIfmCycles); a constant second
    operand (``op.ifm2_const``) is read from the constants' memory."""
    worst = 0
    inputs = [(op.ifm, op.ifm_format, fm)]
    if op.ifm2 is not None:
        inputs.append((op.ifm2, op.ifm2_format, const if op.ifm2_const and const else fm))
    for shape, fmt, mem in inputs:
        tx = transfer_bytes(acc, True, mem.burst, fmt, op.ifm_bits, cfg.ifm_block, shape,
                             _block_elements(shape, cfg.ifm_block))
        worst = max(worst, mem.read_latency + int(np.float32(tx) / np.float32(
            mem.read_bytes_per_cycle)))
    return worst


def _ofm_block_cycles(acc: EthosUAccelerator, fm: PortTiming, op: NpuOp, cfg: BlockConfig) -> int:
    """Latency plus transfer of the last OFM block (MinimumOfmCycles)."""
    tx = transfer_bytes(acc, False, fm.burst, op.ofm_format, op.ofm_bits, cfg.ofm_block,
                         op.ofm, _block_elements(op.ofm, cfg.ofm_block))
    return fm.write_latency + int(np.float32(tx) / np.float32(fm.write_bytes_per_cycle))


def ao_cycles_per_element(acc: EthosUAccelerator, op: NpuOp, cfg: BlockConfig) -> float:
    """Output-stage cycles per element: the slower of the output and activation units
    (EstimateAOCyclesPerElement)."""
    if op.npu == ELEMENTWISE and op.ifm_bits == 32:
        out_idx = 1 if op.ifm2 is not None else 0
    elif op.op == "Mul" and op.ofm_bits == 32:
        out_idx = 2
    elif op.op == "Mul" or (op.npu != ELEMENTWISE and cfg.acc_bits == 40):
        out_idx = 3
    elif op.op in ("Add", "Sub"):
        out_idx = 5  # Vela always assumes the "advanced" add/sub
    elif op.op == "MaxPool":
        out_idx = 6
    else:
        out_idx = 7
    if op.activation is None:
        act_idx = 2
    elif op.activation in LUT_ACTIVATIONS:
        act_idx = 0
    elif op.activation in _RELU_FAMILY:
        act_idx = 1
    else:
        act_idx = 2
    return max(acc.output_cycles[out_idx], acc.activation_cycles[act_idx])


def ofm_ublock(acc: EthosUAccelerator, op: NpuOp) -> Shape3:
    """Micro-block; 2-high ublock configurations process 1xN convolutions as 1x4 blocks when
    the width is even (GetOfmMicroBlock)."""
    ub = acc.ofm_ublock
    if ub[0] == 2 and op.npu == CONV and op.ofm[1] == 1 and op.ofm[2] % 2 == 0 \
            and op.kernel[0] == 1:
        return (1, 4, ub[2])
    return ub


def _dpu_cycles(acc: EthosUAccelerator, op: NpuOp, cfg: BlockConfig, ub: Shape3, n_h: int,
                n_w: int, n_c: int) -> int:
    """DPU cycles for a block of ``n_h x n_w x n_c`` micro-blocks over the whole kernel and
    IFM depth (EstimateMacCyclesPerBlock)."""
    return dpu_cycles_of(acc.name == "ethos-u55-32", acc.macs, acc.cores, op.npu, op.kernel,
                          op.ifm_bits, op.ifm[3], cfg.ifm_block[2], cfg.acc_bits,
                          cfg.traversal, ub[2], n_h, n_w, n_c)


@lru_cache(maxsize=1 << 14)
def dpu_cycles_of(u55_32: bool, macs: int, cores: int, npu: str, kernel: tuple[int, int],
                   ifm_bits: int, ifm_c: int, ifm_block_depth: int, acc_bits: int,
                   traversal: str, ub_c: int, n_h: int, n_w: int, n_c: int) -> int:
    """:func:`_dpu_cycles` from the few numbers it reads: cached on them (small ints hash
    fast), as stripes of many shapes and layers share their blocks' micro-block counts."""
    ifm_block_c = min(ifm_c, ifm_block_depth)
    n_wh = n_h * n_w
    acc40 = acc_bits == 40
    cycles_wb = 32 * ub_c // 8
    sk_h, sk_w = SUBKERNEL_MAX
    kh, kw = kernel
    part_kernel = npu == CONV and traversal == "part_kernel"
    total = 0
    for x in range(0, kw, sk_w):
        for y in range(0, kh, sk_h):
            elems = min(kh - y, sk_h) * min(kw - x, sk_w)
            if npu == POOLING:
                steps = 1
                cycles = max(4, elems) * n_wh * n_c
                if not u55_32:
                    cycles *= ifm_bits // 2
            elif npu == DEPTHWISE:
                steps = ceil_div(elems, 4)
                cycles = 4 * n_wh * (ifm_bits // 8)
                cycles = max(cycles_wb, cycles) * steps * n_c
            elif (npu == CONV and not part_kernel) or npu == REDUCE_SUM:
                steps = elems
                cycles = max(cycles_wb, 4 * n_wh) * steps * n_c
            else:
                steps = ceil_div(elems, 2 if ifm_bits == 16 else 4)
                cycles = max(cycles_wb, 4 * n_wh) * steps * n_c * ceil_div(ifm_block_c, 8)
            # Pipeline stalls when a block is a single micro-block (or, on the 32-MAC
            # configuration with 40-bit accumulators, a single row or column of them).
            delay = 0
            if u55_32:
                unit = 7 if acc40 else 3
                if n_wh == 1:
                    if n_c == 1:
                        delay = unit * steps
                    elif steps > 1:
                        delay = unit * (steps - 1) * n_c
                if (n_w == 1 or n_h == 1) and n_c > 1 and acc40:
                    delay += unit * n_c
            else:
                unit = 3 if (acc40 and macs <= 128) else 2
                if n_wh == 1:
                    if n_c == 1:
                        delay = unit * steps
                    elif steps > 1:
                        delay = unit * (steps - 1) * n_c
            if part_kernel:
                delay *= ceil_div(ifm_block_c, 8)
            total += cycles + delay
    if npu in (CONV, REDUCE_SUM):
        total *= ceil_div(ifm_c, ifm_block_c)
    return total // cores


def mac_cycles_per_block(acc: EthosUAccelerator, op: NpuOp, cfg: BlockConfig, ub: Shape3,
                          cap_stalls: bool) -> int:
    """DPU cycles for one (stripe-clipped) OFM block.

    Vela adds stall cycles only when a block is a single micro-block (or, on the 32-MAC
    configuration with 40-bit accumulators, a single row or column of them), so by its formula
    a block of one micro-block can cost more than a block of two. With ``cap_stalls`` such a
    block costs at most what the next larger block costs, so that a bigger stripe never costs
    fewer cycles; blocks of two or more micro-blocks in each direction keep Vela's figure.
    """
    _, oh, ow, oc = op.ofm
    bh, bw, bc = cfg.ofm_block
    n_h, n_w, n_c = -(-min(oh, bh) // ub[0]), -(-min(ow, bw) // ub[1]), -(-min(oc, bc) // ub[2])
    cycles = _dpu_cycles(acc, op, cfg, ub, n_h, n_w, n_c)
    if cap_stalls and (n_h == 1 or n_w == 1):
        cycles = min(cycles, _dpu_cycles(acc, op, cfg, ub, n_h + 1, n_w, n_c),
                     _dpu_cycles(acc, op, cfg, ub, n_h, n_w + 1, n_c),
                     _dpu_cycles(acc, op, cfg, ub, n_h + 1, n_w + 1, n_c))
    return cycles


def estimate_mac_op(acc: EthosUAccelerator, fm: PortTiming, const_latency: int, op: NpuOp,
                     cfg: BlockConfig, whole: NpuOp | None = None) -> CycleBreakdown:
    """Cycles of a convolution, depthwise, pooling or reduce-sum run as a single command
    (EstimateMacOpCycles with OpScheduling::Single: the first IFM block and the last OFM
    block are not hidden).

    ``whole`` is the NPU operation of the Part's whole output when ``op`` is one stripe of it
    (block policy PART); ``None`` gives Vela's formula unchanged. With it, three things keep
    stripes consistent with the whole, so that cost is monotone in the stripe shape and no
    tiling is cheaper than the whole:

    * the micro-block shape is decided by the whole output (Vela's 1x4 micro-block of 1xN
      convolutions applies to all stripes of such a Part or to none);
    * when the whole output spans several micro-blocks, single-micro-block stalls are capped
      (see :func:`mac_cycles_per_block`);
    * along an axis where the whole output spans several blocks, the output stage is charged
      per micro-block for every stripe, as Vela charges the partly filled last block of the
      whole (Vela charges a stripe smaller than one block its exact element count).
    """
    # (Written out axis by axis, not as generator products: this runs twice per stripe.)
    _, oh, ow, oc = op.ofm
    bh, bw, bc = cfg.ofm_block
    ofm_block = (min(oh, bh), min(ow, bw), min(oc, bc))
    ub = ofm_ublock(acc, whole or op)
    uh, uw, uc = ub
    n_h, n_w, n_c = -(-ofm_block[0] // uh), -(-ofm_block[1] // uw), -(-ofm_block[2] // uc)
    num_blocks = (-(-oh // uh)) * (-(-ow // uw)) * (-(-oc // uc)) / (n_h * n_w * n_c)
    cap_stalls, pad_h, pad_w, pad_c = False, False, False, False
    if whole is not None:
        _, whole_h, whole_w, whole_c = whole.ofm
        cap_stalls = whole_h > uh or whole_w > uw
        pad_h, pad_w, pad_c = whole_h > bh, whole_w > bw, whole_c > bc
    ao_per_elem = ao_cycles_per_element(acc, op, cfg)
    elements = (n_h * uh if pad_h else ofm_block[0]) * (n_w * uw if pad_w else ofm_block[1]) * \
        (n_c * uc if pad_c else ofm_block[2])
    ao_compute = float(math.ceil(ao_per_elem * elements))
    bias = 0.0
    if op.npu in (CONV, DEPTHWISE) and op.has_bias:
        bias = 10.0 * ofm_block[2] * const_latency / 256
    ao = max(ao_compute, bias)
    mac = float(mac_cycles_per_block(acc, op, cfg, ub, cap_stalls))
    ifm_blk = _ifm_block_cycles(acc, fm, op, cfg)
    ofm_blk = _ofm_block_cycles(acc, fm, op, cfg)
    min_mem = abs(ofm_blk - ifm_blk) if num_blocks > 1 else 0
    cmd = (min_mem + mac + ao) / 4
    mac_bal, ao_bal = max(mac, cmd), max(ao, cmd)
    if mac_bal > ao_bal:
        steady = int(mac_bal * num_blocks)
        total = int(steady + ao_bal)
    else:
        steady, total = int(ao_bal * num_blocks), int(ao_bal * num_blocks + mac_bal)
    total += ofm_blk + ifm_blk
    macs = op.kernel[0] * op.kernel[1] * math.prod(op.ofm[1:])
    if op.npu not in (DEPTHWISE, POOLING):
        macs *= op.ifm[3]
    batch = op.ofm[0]
    return CycleBreakdown(total * batch, macs * batch, mac, ao, num_blocks, ifm_blk, ofm_blk,
                          cfg, (total - steady) * batch)


def estimate_elementwise(acc: EthosUAccelerator, fm: PortTiming, op: NpuOp,
                          cfg: BlockConfig, const: PortTiming | None = None) -> CycleBreakdown:
    """Cycles of an elementwise command: AO throughput or command issue, whichever limits
    (EstimateElementwiseCycles)."""
    shape = op.ofm
    if op.ofm_format == NHCWB16:
        shape = shape[:3] + (_round_up(shape[3], 16),)
    elements = math.prod(shape)
    ao_per_elem = ao_cycles_per_element(acc, op, cfg)
    ao = math.ceil(ao_per_elem * elements)
    ifm_blk = _ifm_block_cycles(acc, fm, op, cfg, const)
    ofm_blk = _ofm_block_cycles(acc, fm, op, cfg)
    block = float(max(ifm_blk, ofm_blk))
    cmd_per_elem = (block / math.prod(cfg.ofm_block) + ao_per_elem) / 4.0
    cmd = math.ceil(cmd_per_elem * elements)
    return CycleBreakdown(int(max(cmd, ao)), 0, 0.0, float(ao_per_elem), float(elements),
                          ifm_blk, ofm_blk, cfg)
