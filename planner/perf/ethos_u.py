"""Performance model of the Arm Ethos-U55 and Ethos-U65 NPUs, after Vela's.

The planner ranks cascading options by their cycle counts, so the model must agree with the
numbers Arm's own compiler uses to make the same decisions. It follows the estimator of Vela
5.2.0 (``ethos-u-vela`` on PyPI), whose default compilation core is the C++ "regor" library;
the legacy Python core (``ethosu/vela/npu_performance.py``, ``architecture_features.py``) has
the same structure and constants. Sources are named in comments as
``regor/<file>:<function>`` (paths below ``ethosu/regor/`` in the 5.2.0 source distribution)
or ``vela.ini`` / ``architecture_features.py``. The code is our own; the formulas and
constants are Vela's. Known differences are listed in ``rfcs/0001-appendix-cost-model.md``.

Structure of the estimate, per NPU operation (one stripe):

1. A *block configuration* is chosen (``regor/ethos_u55.cpp: FindBlockConfig``): the OFM
   block that fits the shared buffer (SHRAM) and minimises the weight and IFM re-fetches per
   output element: once per Part, for its whole output, each stripe running it clipped
   (``block_policy="part"``), or for each stripe as Vela does (``"stripe"``), or the cheaper
   of the two per stripe (``"best"``, what the devices use). Small or odd stripes fill their
   blocks and micro-blocks partly; a stripe run back to back with others does not pay the
   per-command fill and drain (``fill_drain_cycles``), which the planner charges once per
   Part.
2. MAC-based operations (convolution, depthwise, pooling, reduce-sum) cost
   ``max(MAC cycles, cmd) * blocks + tail`` where the MAC cycles per block come from the
   micro-block (ublock) count and the kernel steps, the output stage (AO) costs a per-element
   figure per accelerator, and the first IFM block / last OFM block transfers are paid once per
   stripe (``regor/ethos_u55_performance.cpp:EstimateMacOpCycles``).
3. Elementwise operations cost ``max(AO cycles, command-issue limit)`` over the OFM elements
   (``EstimateElementwiseCycles``).

Part kinds that Vela lowers to several NPU operations (MEAN, PAD, CONCATENATION, resize) are
lowered here the same way and their costs summed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple, Sequence

import numpy as np

from planner.errors import PlannerError
from planner.graph import Part
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
    """Fixed properties of one Ethos-U configuration.

    Source: regor/ethos_u55.cpp ``s_EthosU55Configs`` / ``s_EthosU55PerfInfo`` and
    regor/ethos_u65.cpp ``s_EthosU65Configs`` / ``s_EthosU65PerfInfo`` (identical numbers in
    the legacy ``architecture_features.py: accelerator_configs, _generate_output_perf_tables``).

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

    @property
    def total_macs(self) -> int:
        return self.macs * self.cores


_U55_256_PERF = ((0.625, 1.125, 0.5, 0.375, 0.5, 0.75, 0.125, 0.25), (1.0, 0.25, 0.0))
_BIG_GRANULES = (8, 8, 8, 8, 16, 8, 16, 20)

ACCELERATORS: dict[str, EthosUAccelerator] = {
    "ethos-u55-32": EthosUAccelerator(
        "ethos-u55-32", 32, 1, (1, 1, 4), (1, 1, 8), 16, (2, 2, 2, 2, 4, 4, 4, 4),
        (2.0, 3.0, 3.0, 3.0, 4.0, 6.0, 1.0, 2.0), (1.0, 1.0, 0.0)),
    "ethos-u55-64": EthosUAccelerator(
        "ethos-u55-64", 64, 1, (1, 1, 8), (1, 1, 8), 16, (2, 2, 2, 2, 4, 4, 4, 8),
        (1.0, 1.5, 1.5, 1.5, 2.0, 3.0, 0.5, 1.0), (1.0, 1.0, 0.0)),
    "ethos-u55-128": EthosUAccelerator(
        "ethos-u55-128", 128, 1, (1, 2, 8), (1, 2, 8), 24, (4, 4, 4, 4, 8, 4, 8, 12),
        (0.75, 1.25, 0.75, 0.75, 1.0, 1.5, 0.25, 0.5), (1.0, 0.5, 0.0)),
    "ethos-u55-256": EthosUAccelerator(
        "ethos-u55-256", 256, 1, (2, 2, 8), (2, 2, 8), 48, _BIG_GRANULES, *_U55_256_PERF),
    "ethos-u65-256": EthosUAccelerator(
        "ethos-u65-256", 256, 1, (2, 2, 8), (2, 2, 8), 48, _BIG_GRANULES, *_U55_256_PERF),
    "ethos-u65-512": EthosUAccelerator(
        "ethos-u65-512", 256, 2, (2, 2, 8), (2, 2, 8), 48, _BIG_GRANULES,
        (0.3125, 0.5625, 0.25, 0.1875, 0.25, 0.375, 0.0625, 0.125), (0.5, 0.125, 0.0)),
}

# regor/ethos_u55.cpp: ArchEthosU55 constructor (_subkernelMax 8x8, _ofmBlockMax 32x64x128),
# FindBlockConfig (OFMSplitDepth = 16), ApplyConfig (2 reserved output banks, 1 KiB banks,
# 2 reserved end banks when there are more than 16).
_SUBKERNEL_MAX = (8, 8)
_OFM_BLOCK_MAX = (32, 64, 128)
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
_MAC_OPS = (CONV, DEPTHWISE, POOLING, REDUCE_SUM)

_RELU_FAMILY = ("relu", "relu6", "relu_n1_to_1", "relu0_to_1", "clip")
_LUT_ACTIVATIONS = ("sigmoid", "tanh", "leaky_relu", "hard_swish", "lut", "exp", "log")


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
    to. A Part lowers to one or more of these (see :func:`lower_part`)."""
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
    """Components of one NpuOp's estimate (for tests, debugging and the design note)."""
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


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


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
def _block_axis(axis: int, ublock: int, search: int, stride: int, kernel: int, rounding: int,
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
def _depth_axis(depths: tuple[int, ...], ofm_c: int) -> tuple[np.ndarray, ...]:
    """Block depths shaped (n, 1, 1), float32 whole blocks over the OFM depth, and float32
    (blocks over it) x depth, the weight re-fetch factor (cached like :func:`_block_axis`)."""
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
    :func:`_block_axis` arguments; ``ifm_block_depth`` None means the IFM block is as deep as
    the OFM block. Cached, and asked for with the largest search ranges (the caller slices
    the table): it depends on the stripe only through them, so every stripe shares it."""
    _, ib_h, fit_h, _, _ = _block_axis(0, *h_axis)
    ww, ib_w, _, _, _ = _block_axis(1, *w_axis)
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
    h_axis: tuple               # _block_axis arguments of the largest search range
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
    lut_banks = max(_ceil_div(op.lut_bytes, _BANK_BYTES), reserved_end)
    dkh = (kh - 1) * op.dilation[0] + 1
    dkw = (kw - 1) * op.dilation[1] + 1
    ifm_repeats = _ceil_div(dkw, _SUBKERNEL_MAX[1]) * _ceil_div(dkh, _SUBKERNEL_MAX[0])
    if ifm_bits == 16:
        ifm_block_depth = _round_up(min(ifm_c, 16), 4)
    else:
        ifm_block_depth = _round_up(min(ifm_c, 16 if part_kernel else 32), acc.ifm_ublock[2])
    weight_fetch_wh = kh * kw if npu in (CONV, DEPTHWISE) else 0
    ub_h, ub_w, ub_c = acc.ofm_ublock
    depths = _depth_candidates(ub_c, _round_up(min(ofm_c, _OFM_BLOCK_MAX[2]), ub_c), ofm_c)
    conv1d = ofm_h == 1 and kh == 1 and ub_h == 2
    h_axis = (ub_h, _round_up(_OFM_BLOCK_MAX[0], ub_h), op.stride[0],
              min(dkh, _SUBKERNEL_MAX[0]), op.rounding, op.upscale, ofm_h if conv1d else 0,
              conv1d)
    w_axis = (ub_w, _round_up(_OFM_BLOCK_MAX[1], ub_w), op.stride[1],
              min(dkw, _SUBKERNEL_MAX[1]), op.rounding, op.upscale, 0, False)
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
    search_h = _round_up(min(ofm_h, _OFM_BLOCK_MAX[0]), ub_h)
    search_w = _round_up(min(ofm_w, _OFM_BLOCK_MAX[1]), ub_w)
    # Candidates form a (depth, height, width) grid; each quantity is computed on the axes
    # it depends on and numpy broadcasts (no meshgrid or broadcast_to: this runs for every
    # distinct stripe shape the planner costs, mostly on small grids where numpy's per-call
    # overhead is the cost).
    hh, ib_h, fit_h, full_h, blocks_h = _block_axis(0, ub_h, search_h, *g.h_axis[2:6], ofm_h,
                                                    g.conv1d)
    ww, ib_w, _, full_w, blocks_w = _block_axis(1, ub_w, search_w, *g.w_axis[2:6], ofm_w,
                                                False)
    depths = g.depths
    if not depths:
        raise PlannerError(f"no Ethos-U block configuration fits {op}")
    dd, full_c, weight_scale = _depth_axis(depths, ofm_c)
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

def _transfer_bytes(acc: EthosUAccelerator, is_read: bool, burst: int, fmt: str, bits: int,
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
    written once. Each term is inflated by its burst efficiency (:func:`_transfer_bytes`)."""
    ofm, ifm = op.ofm, op.ifm
    ob = tuple(min(b, e) for b, e in zip(cfg.ofm_block, ofm[1:]))
    q_in = 16 if op.ifm_format == NHCWB16 else 1
    q_out = 16 if op.ofm_format == NHCWB16 else 1
    if op.npu in _MAC_OPS:
        blocks = _ceil_div(ofm[1], ob[0]) * _ceil_div(ofm[2], ob[1])
        if op.npu in (CONV, REDUCE_SUM):
            blocks *= _ceil_div(ofm[3], ob[2])
        sub = _ceil_div(op.kernel[0], _SUBKERNEL_MAX[0]) * \
            _ceil_div(op.kernel[1], _SUBKERNEL_MAX[1])
        ib = tuple(min(b, e) for b, e in zip(cfg.ifm_block, ifm[1:]))
        reads = [(op.ifm_format, op.ifm_bits, ifm,
                  ib[0] * ib[1] * _round_up(ifm[3], q_in) * sub * blocks)]
    else:
        whole = ofm[1] * ofm[2] * _round_up(ofm[3], q_in)
        reads = [] if math.prod(ifm) == 1 else [(op.ifm_format, op.ifm_bits, ifm, whole)]
        if op.ifm2 is not None and math.prod(op.ifm2) > 1 and not op.ifm2_const:
            reads.append((op.ifm2_format, op.ifm_bits, op.ifm2, whole))
    total = sum(_transfer_bytes(acc, True, burst, fmt, bits, cfg.ifm_block, shape, n)
                for fmt, bits, shape, n in reads)
    written = ofm[1] * ofm[2] * _round_up(ofm[3], q_out)
    return total + _transfer_bytes(acc, False, burst, op.ofm_format, op.ofm_bits,
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
        tx = _transfer_bytes(acc, True, mem.burst, fmt, op.ifm_bits, cfg.ifm_block, shape,
                             _block_elements(shape, cfg.ifm_block))
        worst = max(worst, mem.read_latency + int(np.float32(tx) / np.float32(
            mem.read_bytes_per_cycle)))
    return worst


def _ofm_block_cycles(acc: EthosUAccelerator, fm: PortTiming, op: NpuOp, cfg: BlockConfig) -> int:
    """Latency plus transfer of the last OFM block (MinimumOfmCycles)."""
    tx = _transfer_bytes(acc, False, fm.burst, op.ofm_format, op.ofm_bits, cfg.ofm_block,
                         op.ofm, _block_elements(op.ofm, cfg.ofm_block))
    return fm.write_latency + int(np.float32(tx) / np.float32(fm.write_bytes_per_cycle))


def _ao_cycles_per_element(acc: EthosUAccelerator, op: NpuOp, cfg: BlockConfig) -> float:
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
    elif op.activation in _LUT_ACTIVATIONS:
        act_idx = 0
    elif op.activation in _RELU_FAMILY:
        act_idx = 1
    else:
        act_idx = 2
    return max(acc.output_cycles[out_idx], acc.activation_cycles[act_idx])


def _ofm_ublock(acc: EthosUAccelerator, op: NpuOp) -> Shape3:
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
    return _dpu_cycles_of(acc.name == "ethos-u55-32", acc.macs, acc.cores, op.npu, op.kernel,
                          op.ifm_bits, op.ifm[3], cfg.ifm_block[2], cfg.acc_bits,
                          cfg.traversal, ub[2], n_h, n_w, n_c)


@lru_cache(maxsize=1 << 14)
def _dpu_cycles_of(u55_32: bool, macs: int, cores: int, npu: str, kernel: tuple[int, int],
                   ifm_bits: int, ifm_c: int, ifm_block_depth: int, acc_bits: int,
                   traversal: str, ub_c: int, n_h: int, n_w: int, n_c: int) -> int:
    """:func:`_dpu_cycles` from the few numbers it reads: cached on them (small ints hash
    fast), as stripes of many shapes and layers share their blocks' micro-block counts."""
    ifm_block_c = min(ifm_c, ifm_block_depth)
    n_wh = n_h * n_w
    acc40 = acc_bits == 40
    cycles_wb = 32 * ub_c // 8
    sk_h, sk_w = _SUBKERNEL_MAX
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
                steps = _ceil_div(elems, 4)
                cycles = 4 * n_wh * (ifm_bits // 8)
                cycles = max(cycles_wb, cycles) * steps * n_c
            elif (npu == CONV and not part_kernel) or npu == REDUCE_SUM:
                steps = elems
                cycles = max(cycles_wb, 4 * n_wh) * steps * n_c
            else:
                steps = _ceil_div(elems, 2 if ifm_bits == 16 else 4)
                cycles = max(cycles_wb, 4 * n_wh) * steps * n_c * _ceil_div(ifm_block_c, 8)
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
                delay *= _ceil_div(ifm_block_c, 8)
            total += cycles + delay
    if npu in (CONV, REDUCE_SUM):
        total *= _ceil_div(ifm_c, ifm_block_c)
    return total // cores


def _mac_cycles_per_block(acc: EthosUAccelerator, op: NpuOp, cfg: BlockConfig, ub: Shape3,
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


def _estimate_mac_op(acc: EthosUAccelerator, fm: PortTiming, const_latency: int, op: NpuOp,
                     cfg: BlockConfig, whole: NpuOp | None = None) -> CycleBreakdown:
    """Cycles of a convolution, depthwise, pooling or reduce-sum run as a single command
    (EstimateMacOpCycles with OpScheduling::Single: the first IFM block and the last OFM
    block are not hidden).

    ``whole`` is the NPU operation of the Part's whole output when ``op`` is one stripe of it
    (block policy "part"); ``None`` gives Vela's formula unchanged. With it, three things keep
    stripes consistent with the whole, so that cost is monotone in the stripe shape and no
    tiling is cheaper than the whole:

    * the micro-block shape is decided by the whole output (Vela's 1x4 micro-block of 1xN
      convolutions applies to all stripes of such a Part or to none);
    * when the whole output spans several micro-blocks, single-micro-block stalls are capped
      (see :func:`_mac_cycles_per_block`);
    * along an axis where the whole output spans several blocks, the output stage is charged
      per micro-block for every stripe, as Vela charges the partly filled last block of the
      whole (Vela charges a stripe smaller than one block its exact element count).
    """
    # (Written out axis by axis, not as generator products: this runs twice per stripe.)
    _, oh, ow, oc = op.ofm
    bh, bw, bc = cfg.ofm_block
    ofm_block = (min(oh, bh), min(ow, bw), min(oc, bc))
    ub = _ofm_ublock(acc, whole or op)
    uh, uw, uc = ub
    n_h, n_w, n_c = -(-ofm_block[0] // uh), -(-ofm_block[1] // uw), -(-ofm_block[2] // uc)
    num_blocks = (-(-oh // uh)) * (-(-ow // uw)) * (-(-oc // uc)) / (n_h * n_w * n_c)
    cap_stalls, pad_h, pad_w, pad_c = False, False, False, False
    if whole is not None:
        _, whole_h, whole_w, whole_c = whole.ofm
        cap_stalls = whole_h > uh or whole_w > uw
        pad_h, pad_w, pad_c = whole_h > bh, whole_w > bw, whole_c > bc
    ao_per_elem = _ao_cycles_per_element(acc, op, cfg)
    elements = (n_h * uh if pad_h else ofm_block[0]) * (n_w * uw if pad_w else ofm_block[1]) * \
        (n_c * uc if pad_c else ofm_block[2])
    ao_compute = float(math.ceil(ao_per_elem * elements))
    bias = 0.0
    if op.npu in (CONV, DEPTHWISE) and op.has_bias:
        bias = 10.0 * ofm_block[2] * const_latency / 256
    ao = max(ao_compute, bias)
    mac = float(_mac_cycles_per_block(acc, op, cfg, ub, cap_stalls))
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


def _estimate_elementwise(acc: EthosUAccelerator, fm: PortTiming, op: NpuOp,
                          cfg: BlockConfig, const: PortTiming | None = None) -> CycleBreakdown:
    """Cycles of an elementwise command: AO throughput or command issue, whichever limits
    (EstimateElementwiseCycles)."""
    shape = op.ofm
    if op.ofm_format == NHCWB16:
        shape = shape[:3] + (_round_up(shape[3], 16),)
    elements = math.prod(shape)
    ao_per_elem = _ao_cycles_per_element(acc, op, cfg)
    ao = math.ceil(ao_per_elem * elements)
    ifm_blk = _ifm_block_cycles(acc, fm, op, cfg, const)
    ofm_blk = _ofm_block_cycles(acc, fm, op, cfg)
    block = float(max(ifm_blk, ofm_blk))
    cmd_per_elem = (block / math.prod(cfg.ofm_block) + ao_per_elem) / 4.0
    cmd = math.ceil(cmd_per_elem * elements)
    return CycleBreakdown(int(max(cmd, ao)), 0, 0.0, float(ao_per_elem), float(elements),
                          ifm_blk, ofm_blk, cfg)


# --------------------------------------------------------------------------------------------
# Lowering Parts to NPU operations
# --------------------------------------------------------------------------------------------

def _bits(t) -> int:
    return t.itemsize * 8


def _to4(shape: Sequence[int]) -> Shape4:
    """Any-rank shape as NHWC, folding leading axes into N as Vela's reshapes do."""
    shape = tuple(int(s) for s in shape)
    if len(shape) >= 4:
        return (math.prod(shape[:-3]),) + shape[-3:]
    return (1,) * (4 - len(shape)) + shape


def _input_region(part: Part, index: int, out_shape: Sequence[int]) -> tuple[int, ...]:
    """The input extent one output stripe needs, clipped to the input tensor.

    The whole output reads the whole input, as Vela's unstriped operations do ("IFM Stripe"
    = the IFM in ``--verbose-schedule``) even where the window skips rows or columns (a 1x1
    stride-2 convolution of a 16x16 map needs 15x15 of it): the IFM shape enters the block
    search, so the two differ (resnet8's 1x1 shortcuts: 2688 vs 3000 cycles on U55-128).
    """
    full = part.inputs[index].shape
    if tuple(out_shape) == part.output.shape:
        return tuple(full)
    need = part.propagators[index].apply_shape(out_shape)
    # (``type is int`` first: most extents are ints, and Fraction() of one is slow.)
    return tuple(max(1, min(n if type(n) is int else int(math.ceil(Fraction(n))), f))
                 for n, f in zip(need, full))


def _window_strides(part: Part) -> tuple[int, int]:
    """Strides as Vela runs them. Where a stride changes nothing computed Vela sets it to 1
    (legacy core ``tflite_graph_optimiser.py``: ``fixup_pool_strides`` for a pooling whose
    kernel and stride both equal the IFM's H and W, a global pooling written as
    AVERAGE_POOL_2D; ``fixup_strided_conv`` for a convolution along an axis where the OFM is
    1 wide). Regor does the same (``Kernel: size=5,25 stride=1,1`` for ds_cnn's 25x5 pool in
    ``--verbose-schedule``). The stride changes the IFM block, hence the block search and the
    first-block fill (ds_cnn's pool: 5476 cycles on U55-256, 5194 with stride 25x5)."""
    sh, sw = tuple(part.attr("strides", (1, 1)))
    kh, kw = tuple(part.attr("kernel", (1, 1)))
    if part.kind == "pool":
        _, ih, iw, _ = part.inputs[0].shape
        if kh == sh == ih and kw == sw == iw:
            return (1, 1)
    elif part.kind == "conv2d":
        _, oh, ow, _ = part.output.shape
        return (1 if oh == 1 else sh, 1 if ow == 1 else sw)
    return (sh, sw)


def _format(part: Part, key: str) -> str:
    fmt = part.attr(key, NHCWB16)
    if fmt not in (NHWC, NHCWB16):
        raise PlannerError(f"part {part.name!r}: {key} must be {NHWC!r} or {NHCWB16!r}")
    return fmt


def _copy_op(ifm: Shape4, ofm: Shape4, bits: int, fmt_in: str, fmt_out: str,
             activation: str | None = None, op: str = "MemoryCopy", lut: int = 0) -> NpuOp:
    """A 1x1 AvgPool no-op: how the Ethos-U55 copies, rescales and applies standalone
    activations (regor/ethos_u55.cpp:UseAvgPoolNop, GetHWOp)."""
    return NpuOp(POOLING, op, ifm, ofm, ifm_bits=bits, ofm_bits=bits, activation=activation,
                 lut_bytes=lut, ifm_format=fmt_in, ofm_format=fmt_out)


def _mean_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """MEAN over H and W as Vela lowers it (regor/tflite_graph_optimiser.cpp:ConvertMeanOps):
    depthwise convolutions with an H x W kernel (at most 64 rows and 4096 taps each) writing
    32-bit sums, ADDs to combine them, and a 32-bit MUL to scale."""
    x = part.inputs[0]
    n, h, w, c = x.shape
    oc = out_shape[-1]
    n_out = out_shape[0]
    if h > 64 and h * w <= 4096:
        h, w = 1, h * w
    rows = min(4096 // w, h, 64) if w <= 4096 else 1
    count = _ceil_div(h, rows)
    fmt = _format(part, "ifm_format")
    ops = []
    for i in range(count):
        kh = rows if (i < count - 1 or h % rows == 0) else h % rows
        ops.append(NpuOp(DEPTHWISE, "DepthwiseConv2D", (n_out, kh, w, oc), (n_out, 1, 1, oc),
                         kernel=(kh, w), ifm_bits=_bits(x), ofm_bits=32, has_bias=True,
                         ifm_format=fmt))
        if i > 0:
            acc = (n_out, 1, 1, oc)
            ops.append(NpuOp(ELEMENTWISE, "Add", acc, acc, acc, ifm_bits=32, ofm_bits=32))
    acc = (n_out, 1, 1, oc)
    ops.append(NpuOp(ELEMENTWISE, "Mul", acc, acc, (1, 1, 1, 1), ifm_bits=32,
                     ofm_bits=_bits(part.output), ofm_format=_format(part, "ofm_format")))
    return ops


def _softmax_ops(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """int8 SOFTMAX along the last axis as Vela lowers it (regor/softmax.cpp: GetGraph8bit):
    a max over the channels; SUB with an exp LUT and a shift over the whole tensor; a sum
    over the channels; 20 passes of 32-bit arithmetic on one value per row (a reciprocal by
    Newton-Raphson); then a broadcast, a multiply and a shift over the whole tensor. Vela keeps
    these tensors in NHWC (the input follows a reshape), the per-row values in NHCWB16."""
    n, h, w, c = _to4(out_shape)
    rows = n * h * w
    full = (1, h * n, w, c)
    row = (1, h * n, w, 1)
    one = (1, 1, 1, 1)
    bits = _bits(part.inputs[0])
    ops = [NpuOp(POOLING, "MaxPool", (1, rows, c, 1), (1, rows, 1, 1), kernel=(1, c),
                 ifm_bits=bits, ofm_bits=bits),
           NpuOp(ELEMENTWISE, "Sub", full, full, row, ifm_bits=bits, ofm_bits=32,
                 activation="lut", lut_bytes=1024, ifm_format=NHWC),
           NpuOp(ELEMENTWISE, "Asr", full, full, one, ifm_bits=32, ofm_bits=32,
                 ofm_format=NHWC, ifm2_const=True, ifm2_format=NHWC),
           NpuOp(REDUCE_SUM, "ReduceSum", full, row, ifm_bits=32, ofm_bits=32,
                 ifm_format=NHWC),
           NpuOp(ELEMENTWISE, "CLZ", row, row, ifm_bits=32, ofm_bits=32)]
    # (operation, has a 32-bit constant operand, which is read from the weights' memory)
    per_row = [("Sub", True), ("Sub", True), ("SHL", False), ("Mul", True), ("Add", True)] + \
        [("Mul", False), ("Sub", True), ("Mul", False), ("Mul", True), ("Add", False)] * 3
    ops += [NpuOp(ELEMENTWISE, op, row, row, row, ifm_bits=32, ofm_bits=32, ifm2_const=const,
                  ifm2_format=NHWC if const else NHCWB16) for op, const in per_row]
    ops += [NpuOp(ELEMENTWISE, "Mul", full, full, row, ifm_bits=32, ofm_bits=32,
                  ifm_format=NHWC),
            NpuOp(ELEMENTWISE, "Add", full, full, one, ifm_bits=32, ofm_bits=32,
                  ifm2_const=True, ifm2_format=NHWC),
            NpuOp(ELEMENTWISE, "Asr", full, full, row, ifm_bits=32, ofm_bits=_bits(part.output),
                  ofm_format=_format(part, "ofm_format"))]
    return ops


_ELEMENTWISE_OPS = {"add": "Add", "sub": "Sub", "mul": "Mul", "maximum": "Maximum",
                    "minimum": "Minimum"}
# Unary ops the Ethos-U55 runs on its elementwise unit (regor s_ElementwiseMap).
_UNARY_ELEMENTWISE = {"abs": "Abs", "clz": "CLZ", "not": "Not", "neg": "Sub",
                      "shl": "SHL", "shr": "SHR", "asr": "Asr"}


_WINDOW_KINDS = ("conv2d", "depthwise_conv2d", "pool")


@lru_cache(maxsize=1 << 12)
def _window_op(part: Part) -> tuple[str, str, dict, int]:
    """What every stripe's NpuOp of a convolution, depthwise or pooling Part shares: the NPU
    class, Vela's op name, the fields besides the IFM and OFM shapes, and the group count.
    Cached per Part: the planner lowers hundreds of stripe shapes of each."""
    fields = dict(kernel=tuple(part.attr("kernel", (1, 1))), stride=_window_strides(part),
                  ifm_bits=_bits(part.inputs[0]), ofm_bits=_bits(part.output),
                  activation=part.attr("activation"), ifm_format=_format(part, "ifm_format"),
                  ofm_format=_format(part, "ofm_format"))
    if part.kind == "pool":
        name = "MaxPool" if part.attr("pool_type") == "max" else "AvgPool"
        return POOLING, name, fields, 1
    fields.update(dilation=tuple(part.attr("dilation", (1, 1))), has_bias=True)
    if part.kind == "depthwise_conv2d":
        return DEPTHWISE, "DepthwiseConv2D", fields, 1
    return CONV, "Conv2D", fields, int(part.attr("groups", 1))


def lower_part(part: Part, out_shape: Sequence[int]) -> list[NpuOp]:
    """The NPU operations Vela would emit to compute one output stripe of ``part``.

    Optional Part attrs ``ifm_format``, ``ifm2_format`` and ``ofm_format`` ("NHWC" or
    "NHCWB16", default "NHCWB16") say how feature maps are laid out: Vela keeps network inputs
    and outputs in NHWC and intermediates in NHCWB16, which changes burst efficiency.
    """
    out_shape = tuple(int(s) for s in out_shape)
    if len(out_shape) != len(part.output.shape):
        raise PlannerError(f"part {part.name!r}: stripe {out_shape} does not have the rank of "
                           f"its output {part.output.shape}")
    if any(s < 1 for s in out_shape):
        raise PlannerError(f"part {part.name!r}: stripe {out_shape} has an empty axis")
    kind = part.kind
    if kind in _WINDOW_KINDS:
        npu, name, fields, groups = _window_op(part)
        ifm = _to4(_input_region(part, 0, out_shape))
        ofm = _to4(out_shape)
        if groups > 1:
            # Vela has no grouped convolution; it is costed as one convolution per group.
            ifm_g = ifm[:3] + (max(1, ifm[3] // groups),)
            ofm_g = ofm[:3] + (max(1, _ceil_div(ofm[3], groups)),)
            return [NpuOp(npu, name, ifm_g, ofm_g, **fields)] * min(groups, ofm[3])
        return [NpuOp(npu, name, ifm, ofm, **fields)]
    out_bits = _bits(part.output)
    fin, fout = _format(part, "ifm_format"), _format(part, "ofm_format")
    act = part.attr("activation")

    if kind == "fully_connected":
        # A 1x1 convolution over (1, 1, batch, features) (regor GetHWOp: FullyConnected ->
        # Convolution).
        x = part.inputs[0]
        batch, units = out_shape
        k = x.shape[1]
        return [NpuOp(CONV, "FullyConnected", (1, 1, batch, k), (1, 1, batch, units),
                      ifm_bits=_bits(x), ofm_bits=out_bits, activation=act, has_bias=True,
                      ifm_format=fin, ofm_format=fout)]

    if kind == "mean":
        return _mean_ops(part, out_shape)

    if kind == "elementwise":
        a, b = part.inputs
        ra = _to4(_input_region(part, 0, out_shape))
        rb = _to4(_input_region(part, 1, out_shape))
        op = _ELEMENTWISE_OPS.get(part.attr("op", "add"), "Add")
        return [NpuOp(ELEMENTWISE, op, ra, _to4(out_shape), rb, ifm_bits=_bits(a),
                      ofm_bits=out_bits, activation=act, ifm_format=fin,
                      ifm2_format=_format(part, "ifm2_format"), ofm_format=fout)]

    if kind == "unary":
        x = part.inputs[0]
        shape = _to4(out_shape)
        opname = str(part.attr("op", "relu"))
        if opname in _UNARY_ELEMENTWISE:
            return [NpuOp(ELEMENTWISE, _UNARY_ELEMENTWISE[opname], shape, shape,
                          ifm_bits=_bits(x), ofm_bits=out_bits, ifm_format=fin,
                          ofm_format=fout)]
        lut = (256 if _bits(x) == 8 else 2048) if opname in _LUT_ACTIVATIONS else 0
        # Standalone activations, LUT lookups and requantisation: AvgPool no-ops.
        return [_copy_op(shape, shape, _bits(x), fin, fout, op=opname, lut=lut)]

    if kind == "concatenate":
        ops = []
        for i, t in enumerate(part.inputs):
            region = _to4(_input_region(part, i, out_shape))
            ops.append(_copy_op(region, region, _bits(t), fin, fout))
        return ops

    if kind == "slice":
        shape = _to4(out_shape)
        return [_copy_op(shape, shape, out_bits, fin, fout)]

    if kind == "pad":
        # regor/graphir_optimiser.cpp:RewritePad: one fill per padded side (spanning the whole
        # output on the other axes), then a copy of the IFM into the middle.
        pads = part.attr("pads", ())
        ops = []
        for axis, (before, after) in enumerate(pads):
            for amount in (before, after):
                if amount:
                    region = list(out_shape)
                    region[axis] = min(amount, out_shape[axis])
                    r4 = _to4(region)
                    ops.append(_copy_op(r4, r4, out_bits, fin, fout))
        inner = _to4(_input_region(part, 0, out_shape))
        ops.append(_copy_op(inner, inner, out_bits, fin, fout))
        return ops

    if kind == "resize":
        # Vela upscales by two per step with IFM resampling on an AvgPool (nearest: 1x1
        # kernel; bilinear: 2x2) (regor UpscaleAndRounding); larger factors take log2 steps.
        x = part.inputs[0]
        sh, sw = part.attr("scale", (2, 2))
        bilinear = part.attr("method", "nearest") == "bilinear"
        ofm = _to4(out_shape)
        steps = max(1, math.ceil(math.log2(max(sh, sw, 2))))
        ops = []
        for s in range(steps):
            div = 2 ** (steps - 1 - s)
            o = (ofm[0], max(1, _ceil_div(ofm[1], div)), max(1, _ceil_div(ofm[2], div)), ofm[3])
            i = (o[0], max(1, _ceil_div(o[1], 2)), max(1, _ceil_div(o[2], 2)), o[3])
            ops.append(NpuOp(POOLING, "AvgPool", i, o, kernel=(2, 2) if bilinear else (1, 1),
                             ifm_bits=_bits(x), ofm_bits=out_bits, upscale=2,
                             rounding=0 if bilinear else 1, ifm_format=fin, ofm_format=fout))
        return ops

    if kind == "softmax":
        return _softmax_ops(part, out_shape)

    if kind in ("reshape", "transpose", "depth_to_space"):
        return []  # handled by EthosUPerfModel (free, or memory bound)

    raise PlannerError(f"the Ethos-U performance model has no rule for part kind {kind!r} "
                       f"(part {part.name!r})")


# --------------------------------------------------------------------------------------------
# The PerfModel
# --------------------------------------------------------------------------------------------

class EthosUPerfModel:
    """``PerfModel`` for one Ethos-U55/U65 configuration and system memory timing.

    ``fm_timing`` is the memory feature maps are read from and written to (the planner keeps
    them in SRAM); ``const_timing`` the memory scales and biases are read from (its read
    latency bounds the output stage, as in Vela).

    ``block_policy`` says which block configuration a stripe runs with:

    * ``"part"`` (default): the one Vela chooses for the Part's whole output, clipped to the
      stripe. A whole layer costs exactly what Vela estimates, and the estimate is monotone in
      the stripe shape: Vela's block search optimises memory fetches, not cycles, so letting
      every stripe shape pick its own block makes some taller stripes cheaper than shorter
      ones, which a planner would exploit (see the design note).
    * ``"stripe"``: the block Vela would choose for the stripe shape, as Vela itself costs the
      stripes of its cascades. Same numbers for whole layers; not monotone.
    * ``"best"`` (what ``planner.devices`` uses): per stripe, the cheaper of the two, judged
      on the cycles a stripe pays back to back. Every command programs its own block, so
      either is what the NPU can run; never more than ``"part"`` back to back (a stripe
      alone, its fill and drain paid, can cost a little more), same whole-layer figures.
    """

    #: Cycles to issue one more stripe. Vela charges none beyond the fill and drain already in
    #: compute_cycles; we charge the register commands that re-point the feature maps and
    #: start the operation, one cycle each (an estimate, see the design note).
    COMMANDS_PER_FEATURE_MAP = 6
    COMMANDS_PER_STRIPE = 4
    BLOCK_POLICIES = ("part", "stripe", "best")

    def __init__(self, accelerator: str, fm_timing: PortTiming = DEFAULT_FM_TIMING,
                 const_timing: PortTiming = DEFAULT_CONST_TIMING,
                 block_policy: str = "part") -> None:
        if accelerator not in ACCELERATORS:
            raise PlannerError(f"unknown Ethos-U configuration {accelerator!r}; known: "
                               f"{sorted(ACCELERATORS)}")
        if block_policy not in self.BLOCK_POLICIES:
            raise PlannerError(f"block_policy must be one of {self.BLOCK_POLICIES}, got "
                               f"{block_policy!r}")
        self.accelerator = ACCELERATORS[accelerator]
        self.name = accelerator
        self.micro_block: tuple[int, int, int] = self.accelerator.ofm_ublock
        self.fm_timing = fm_timing
        self.const_timing = const_timing
        self.block_policy = block_policy
        self._config = lru_cache(maxsize=1 << 16)(self._config_uncached)
        self._estimate = lru_cache(maxsize=1 << 18)(self._estimate_uncached)
        self._part_ops = lru_cache(maxsize=1 << 14)(self._part_ops_uncached)
        # Stripe summaries keyed by (lowering signature, stripe shape): the planner asks for
        # the cycles, fill/drain and weight fetches of the same stripe of the same layer, and
        # of identical layers under other names (MobileNet's five 512-channel blocks), many
        # times; one lowering answers all of them.
        self._signatures: dict[Part, int] = {}
        self._signature_ids: dict[tuple, int] = {}
        self._summaries: dict[tuple[int, tuple[int, ...]], StripeSummary] = {}
        self._by_part: dict[tuple[Part, tuple[int, ...]], StripeSummary] = {}

    def __repr__(self) -> str:
        return f"EthosUPerfModel({self.name!r}, block_policy={self.block_policy!r})"

    def _config_uncached(self, op: NpuOp) -> BlockConfig:
        return find_block_config(self.accelerator, op)

    def block_config(self, op: NpuOp) -> BlockConfig:
        """The block configuration Vela chooses for one NPU operation."""
        return self._config(op)

    def _estimate_uncached(self, op: NpuOp, cfg: BlockConfig,
                           whole: NpuOp | None) -> CycleBreakdown:
        if op.npu in _MAC_OPS:
            return _estimate_mac_op(self.accelerator, self.fm_timing,
                                    self.const_timing.read_latency, op, cfg, whole)
        return _estimate_elementwise(self.accelerator, self.fm_timing, op, cfg,
                                     self.const_timing)

    def estimate_op(self, op: NpuOp, config: BlockConfig | None = None) -> CycleBreakdown:
        """Vela's estimate for one NPU operation run as a single command, with ``config``
        (default: the block configuration Vela would choose for it)."""
        return self._estimate(op, config if config is not None else self._config(op), None)

    def _part_ops_uncached(self, part: Part) -> tuple[NpuOp, ...]:
        return tuple(lower_part(part, part.output.shape))

    def breakdown(self, part: Part, out_shape: Sequence[int]) -> list[CycleBreakdown]:
        """Per-NPU-operation estimates of one stripe (what compute_cycles sums)."""
        return self._breakdown_of(part, lower_part(part, out_shape))

    def _breakdown_of(self, part: Part, ops: Sequence[NpuOp],
                      own: Sequence[BlockConfig] | None = None) -> list[CycleBreakdown]:
        """``own``: the block configurations Vela chooses for ``ops`` themselves, when
        known (:meth:`summarise_stripes` searches them in a batch)."""
        if own is None and self.block_policy != "part":
            own = [self._config(op) for op in ops]
        if self.block_policy == "stripe":
            return [self._estimate(op, cfg, None) for op, cfg in zip(ops, own)]
        whole = self._part_ops(part)
        # (The estimates of stripes skip the estimate cache: stripe_summary already asks for
        # each stripe once, and hashing the NpuOps for the key would cost more.)
        estimate = self._estimate_uncached
        mine = [estimate(op, self._config(w), w) for op, w in zip(ops, whole)]
        if self.block_policy == "part":
            return mine
        # "best": each stripe runs the cheaper of the Part's block (clipped) and the block
        # Vela chooses for the stripe itself, judged back to back (fill and drain aside); the
        # Part's on a tie.
        out = []
        for op, a, cfg in zip(ops, mine, own):
            b = estimate(op, cfg, None)
            back_to_back_a, back_to_back_b = a.cycles - a.fill_drain_cycles, \
                b.cycles - b.fill_drain_cycles
            out.append(b if (back_to_back_b, b.cycles) < (back_to_back_a, a.cycles) else a)
        return out

    def compute_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """NPU cycles of one output stripe of ``out_shape``, as Vela estimates a command of
        that shape (first-block fill and last-block drain included), excluding DMA of weights
        and feature maps."""
        if part.kind == "reshape":
            return 0  # Vela turns reshapes into aliases of the same memory
        if part.kind in ("transpose", "depth_to_space"):
            return self._transpose_cycles(part, tuple(int(s) for s in out_shape))
        return self.stripe_summary(part, out_shape).cycles

    def fill_drain_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """Cycles of ``compute_cycles(part, out_shape)`` that a stripe run back to back with
        the commands before and after it does not pay: each NPU command's first IFM block,
        last OFM block and the one block by which its slower pipeline stage (MAC or output)
        trails the other. Vela's estimator charges
        them only to the first and last of a run of back-to-back commands (regor
        ``OpScheduling::First/BackToBack/Last``), and reports a cascaded operation as one
        command over its whole OFM: they are paid once per operation, not per stripe.
        (regor's BackToBack keeps the one-block MAC lead of an output-bound command; its
        reported cascade figures do not, and those are what this follows.)"""
        if part.kind in ("reshape", "transpose", "depth_to_space"):
            return 0
        return self.stripe_summary(part, out_shape).fill_drain_cycles

    def weight_fetches(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """How many times one stripe reads the Part's weights from their memory: the NPU
        fetches a block's weights for every OFM block in H x W (Vela: ``weightsRefetch``;
        unbuffered weights cost encoded bytes x OFM blocks of flash reads)."""
        if not part.constant_inputs:
            return 1
        return self.stripe_summary(part, out_shape).weight_fetches

    def stripe_summary(self, part: Part, out_shape: Sequence[int]) -> StripeSummary:
        """Cycles, fill/drain, MACs and weight fetches of one stripe, from one lowering,
        shared by every Part that lowers the same way (see :meth:`_lowering_signature`)."""
        # Asked for four or five times per stripe (cycles, fill/drain, fetches, traffic): the
        # first lookup is by the Part and the shape as given, no conversion, no signature.
        try:
            return self._by_part[part, out_shape]
        except (KeyError, TypeError):
            pass
        shape = tuple(int(s) for s in out_shape)
        key = (self._lowering_signature(part), shape)
        hit = self._summaries.get(key)
        if hit is None:
            hit = self._summaries[key] = self._summarise(part, shape)
        self._by_part[part, shape] = hit
        return hit

    def _lowering_signature(self, part: Part) -> int:
        """A small int naming everything :func:`lower_part` reads of a Part (not its name),
        so that identical layers share stripe summaries."""
        sig = self._signatures.get(part)
        if sig is None:
            full = (part.kind, part.attrs,
                    tuple((t.shape, t.dtype, t.is_constant) for t in part.inputs),
                    part.output.shape, part.output.dtype, part.propagators)
            sig = self._signature_ids.setdefault(full, len(self._signature_ids))
            self._signatures[part] = sig
        return sig

    #: Part kinds without stripe summaries (compute_cycles and the rest answer directly).
    _UNSUMMARISED = ("reshape", "transpose", "depth_to_space")

    def summarise_stripes(self, part: Part, shapes) -> None:
        """Summarise the stripe shapes of ``part`` in ``shapes`` not summarised yet, their
        block searches in one batch (:func:`planner.perf.ethos_u_batch.find_block_configs`,
        the same configurations as one search per stripe), so that later
        :meth:`stripe_summary` calls find them. The planner's costing workers call it with
        every shape a batch of requests needs: the block search is most of a summary's work
        and, run a stripe at a time, mostly numpy's per-call overhead."""
        if part.kind in self._UNSUMMARISED:
            return
        sig = self._lowering_signature(part)
        summaries = self._summaries
        todo = sorted({shape for shape in (tuple(int(x) for x in s) for s in shapes)
                       if 0 not in shape and (sig, shape) not in summaries})
        if not todo:
            return
        lowered = [lower_part(part, shape) for shape in todo]
        flat = [op for ops in lowered for op in ops]
        own = None if self.block_policy == "part" else \
            _batched.find_block_configs(self.accelerator, flat)
        if len(flat) == len(todo) and part.kind in _WINDOW_KINDS and \
                len({(c.traversal, c.acc_bits) for c in own or ()}) <= 1:
            # One MAC operation per stripe (convolution, depthwise, pooling): all the
            # stripes' estimates on arrays at once.
            whole = self._part_ops(part)[0]
            for shape, summary in zip(todo, _batched.summarise_window_stripes(
                    self, whole, self._config(whole), flat, own)):
                summaries[sig, shape] = summary
            return
        configs = iter(own or ())
        for shape, ops in zip(todo, lowered):
            mine = None if own is None else [next(configs) for _ in ops]
            summaries[sig, shape] = self._summarise_ops(part, ops, mine)

    def _summarise(self, part: Part, out_shape: tuple[int, ...]) -> StripeSummary:
        return self._summarise_ops(part, lower_part(part, out_shape), None)

    def _summarise_ops(self, part: Part, ops: list[NpuOp],
                       own: list[BlockConfig] | None) -> StripeSummary:
        parts = self._breakdown_of(part, ops, own)
        fetches = 1
        cycles = fill_drain = macs = access = 0
        acc, burst = self.accelerator, self.fm_timing.burst
        for op, b in zip(ops, parts):
            if op.npu in (CONV, DEPTHWISE):
                bh, bw = b.config.ofm_block[:2]
                fetches = max(fetches, _ceil_div(op.ofm[1], bh) * _ceil_div(op.ofm[2], bw))
            cycles += b.cycles
            fill_drain += b.fill_drain_cycles
            macs += b.macs
            access += fm_access_bytes(acc, burst, op, b.config)
        return StripeSummary(int(cycles), int(fill_drain), int(macs), fetches, int(access))

    def fm_access_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """Cycles the feature-map memory port is busy with one stripe's IFM block fetches and
        OFM writes (:func:`fm_access_bytes`), weights aside. Transposes and reshapes: 0 (their
        traffic is their compute cycles, or none)."""
        if part.kind in ("reshape", "transpose", "depth_to_space"):
            return 0
        nbytes = self.stripe_summary(part, out_shape).fm_access_bytes
        return math.ceil(nbytes / self.fm_timing.read_bytes_per_cycle)

    def _transpose_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        """Transposes (and depth-to-space, a transpose of blocks) are costed by their memory
        traffic, the slower of reading and writing (regor/ethos_u55_performance.cpp:
        MeasureCycleCost, Compound branch)."""
        nbytes = math.prod(out_shape) * part.output.itemsize
        fm = self.fm_timing
        read = int(nbytes / fm.read_bytes_per_cycle) + fm.read_latency
        write = int(nbytes / fm.write_bytes_per_cycle) + fm.write_latency
        return max(read, write)

    def stripe_overhead_cycles(self, part: Part) -> int:
        """Fixed cost of issuing one more stripe: the register writes that re-point the
        feature maps and start the operation (an estimate; Vela models none)."""
        if part.kind == "reshape":
            return 0
        fms = 1 + len(part.activation_inputs)
        return self.COMMANDS_PER_STRIPE + self.COMMANDS_PER_FEATURE_MAP * fms

    def macs(self, part: Part, out_shape: Sequence[int]) -> int:
        """Multiply-accumulates of one stripe, as Vela counts them."""
        if part.kind in ("reshape", "transpose", "depth_to_space"):
            return 0
        return self.stripe_summary(part, out_shape).macs


# The batched block search and stripe estimates build on the definitions above (imported here,
# not lazily: a forked costing worker would import it again).
from planner.perf import ethos_u_batch as _batched  # noqa: E402
