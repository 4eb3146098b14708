"""The Ethos-U block search and stripe estimates for many stripes of one Part at once.

The planner costs hundreds of stripe shapes of each Part, and with the BEST and STRIPE
block policies every one needs Vela's block search
(:func:`planner.perf.ethos_u_npu.find_block_config`). Run one stripe at a time, that search is
a few dozen numpy calls on small grids, and numpy's per-call overhead, not arithmetic, is
its cost. Operations that differ only in their OFM and
IFM height and width (the stripes of one Part) share the depth candidates, the kernel
settings and the shared-buffer fit table (``SearchSettings``), so here they are searched in
chunks of similar height and width ranges, each on one grid padded to the chunk's largest
ranges: the same float32 costs, computed by the same operations in the same order,
elementwise, so the same choices. The estimates of a convolution, depthwise or pooling
Part's stripes (``summarise_window_stripes``) are likewise the scalar formulas on arrays.
The scalar functions stay the reference (tests/planner/test_batched_block_search.py
compares the two on random operations and Parts).
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np

from planner.perf.ethos_u_npu import (
    CONV,
    DEPTHWISE,
    NHCWB16,
    OFM_BLOCK_MAX,
    POOLING,
    REDUCE_SUM,
    SUBKERNEL_MAX,
    BlockConfig,
    BlockPolicy,
    EthosUAccelerator,
    NpuOp,
    SearchSettings,
    StripeSummary,
    ao_cycles_per_element,
    block_axis,
    ceil_div,
    depth_axis,
    dpu_cycles_of,
    find_block_config,
    ofm_ublock,
    search_settings,
)

_BATCHED = (CONV, DEPTHWISE, POOLING, REDUCE_SUM)

# Members bound once: read through their Enum class, each costs a Python-level lookup, and
# these are read on every stripe summary.
_PART, _STRIPE = BlockPolicy.PART, BlockPolicy.STRIPE

_new = object.__new__


def _group_key(acc: EthosUAccelerator, op: NpuOp) -> tuple | None:
    """Everything the block search reads of ``op`` besides its OFM and IFM height, width and
    batch; None for operations searched one at a time (elementwise, two inputs)."""
    if op.npu not in _BATCHED or op.ifm2 is not None:
        return None
    conv1d = op.ofm[1] == 1 and op.kernel[0] == 1 and acc.ofm_ublock[0] == 2
    return (op.npu, op.ofm[3], op.ifm[3], op.kernel, op.stride, op.dilation, op.ifm_bits,
            op.rounding, op.upscale, op.lut_bytes, conv1d)


def find_block_configs(acc: EthosUAccelerator, ops: Sequence[NpuOp]) -> list[BlockConfig]:
    """``[find_block_config(acc, op) for op in ops]``, with the MAC operations that share a
    group key searched together. An operation no block fits is searched alone, which raises
    the reference's error."""
    out: list[BlockConfig | None] = [None] * len(ops)
    groups: dict[tuple, list[int]] = {}
    for i, op in enumerate(ops):
        key = _group_key(acc, op)
        if key is None:
            out[i] = find_block_config(acc, op)
        else:
            groups.setdefault(key, []).append(i)
    for members in groups.values():
        if len(members) == 1:
            out[members[0]] = find_block_config(acc, ops[members[0]])
            continue
        for i, cfg in zip(members, _search_group(acc, [ops[i] for i in members])):
            out[i] = cfg if cfg is not None else find_block_config(acc, ops[i])
    return out   # type: ignore[return-value]


def _search_group(acc: EthosUAccelerator, ops: list[NpuOp]) -> list[BlockConfig | None]:
    """The block search of operations with one group key (see :func:`_group_key`); None
    for one that no block fits: their shared settings worked out once, then chunks of them
    searched on padded grids (:func:`_search_chunk`)."""
    g = search_settings(acc, ops[0], ops[0].ifm)
    if not g.depths:
        return [None] * len(ops)
    ub_h, ub_w, _ = acc.ofm_ublock
    # Per candidate index along each axis, at the largest search range (a stripe's own
    # candidates are the first ones): block sizes and IFM block sizes.
    all_h, all_ib_h = block_axis(0, *g.h_axis)[:2]
    all_w, all_ib_w = block_axis(1, *g.w_axis)[:2]
    dd, full_c, weight_scale = depth_axis(g.depths, ops[0].ofm[3])
    shared = _Shared(g, all_h, all_w, all_ib_h, all_ib_w, dd, full_c, weight_scale)
    n_h = [-(-min(op.ofm[1], OFM_BLOCK_MAX[0]) // ub_h) for op in ops]
    n_w = [-(-min(op.ofm[2], OFM_BLOCK_MAX[1]) // ub_w) for op in ops]
    out: list[BlockConfig | None] = [None] * len(ops)
    for chunk in _chunks(n_h, n_w):
        for s, cfg in zip(chunk, _search_chunk(shared, [ops[s] for s in chunk],
                                               max(n_h[s] for s in chunk),
                                               max(n_w[s] for s in chunk),
                                               [n_h[s] for s in chunk], [n_w[s] for s in chunk])):
            out[s] = cfg
    return out


#: A chunk's grid is padded to its largest height and width ranges; padding is wasted work,
#: numpy calls are overhead: a chunk may pad up to this share of its cells, or up to
#: PAD_CELLS cells in all (small grids, where the calls are what costs).
PAD_SHARE = 0.3
PAD_CELLS = 2048


def _chunks(n_h: list[int], n_w: list[int]) -> list[list[int]]:
    """Operations (indexes) grouped so that each group's height and width ranges are close:
    sorted by them, then cut where padding to the group's largest would waste too much."""
    order = sorted(range(len(n_h)), key=lambda s: (n_w[s], n_h[s]))
    chunks: list[list[int]] = []
    cur: list[int] = []
    cells = top_h = top_w = 0
    for s in order:
        h, w = max(top_h, n_h[s]), max(top_w, n_w[s])
        padded = (len(cur) + 1) * h * w
        if cur and padded - cells - n_h[s] * n_w[s] > max(PAD_SHARE * padded, PAD_CELLS):
            chunks.append(cur)
            cur, cells, h, w = [], 0, n_h[s], n_w[s]
        cur.append(s)
        cells += n_h[s] * n_w[s]
        top_h, top_w = h, w
    chunks.append(cur)
    return chunks


class _Shared(NamedTuple):
    """What the operations of one group share: their settings and per-candidate arrays
    shaped to broadcast over (operation, depth, height, width), at the largest ranges."""
    settings: SearchSettings
    hh: np.ndarray          # (H, 1) OFM block heights
    ww: np.ndarray          # (1, W)
    ib_h: np.ndarray        # (H, 1) IFM block heights
    ib_w: np.ndarray        # (1, W)
    dd: np.ndarray          # (D, 1, 1) block depths
    full_c: np.ndarray      # (D, 1, 1) float32 blocks over the OFM depth
    weight_scale: np.ndarray    # (D, 1, 1) float32


def _search_chunk(shared: _Shared, ops: list[NpuOp], top_h: int, top_w: int, n_h: list[int],
                  n_w: list[int]) -> list[BlockConfig | None]:
    """The block search of ``ops`` on one (operation, depth, height, width) grid padded to
    ``top_h`` x ``top_w`` candidates, the padding costed infinite. The statements follow
    ``find_block_config``'s; float32 arithmetic is elementwise, so each candidate's cost is
    the reference's, and flat C-order indexes list each operation's candidates in Vela's
    order, padding interleaved. The grid is the bulk of the planner's costing, so each pass
    over it is made once and in place: what does not vary with the depth is worked out on
    (operation, height, width) planes first, and the late ties of small blocks are looked
    for on the small blocks' corner of the grid alone."""
    f32 = np.float32
    hh, ww = shared.hh[:top_h], shared.ww[:, :top_w]
    ib_h, ib_w = shared.ib_h[:top_h], shared.ib_w[:, :top_w]
    g, dd = shared.settings, shared.dd
    per_op = np.array([(op.ofm[1], op.ofm[2], math.prod(op.ofm), math.prod(op.ifm), nh, nw)
                       for op, nh, nw in zip(ops, n_h, n_w)], dtype=np.int64)
    oh, ow, ofm_elements, ifm_elements, _, _ = (
        per_op[:, k, None, None, None] for k in range(6))
    fit_h = np.minimum(hh, oh) if g.conv1d else hh
    full_h, full_w = -(-oh // fit_h), -(-ow // ww)
    blocks_h = oh.astype(f32) / fit_h.astype(f32)
    blocks_w = ow.astype(f32) / ww.astype(f32)
    ib_hw = ib_h * ib_w
    grid = (len(ops), dd.shape[0], top_h, top_w)
    # (operation, 1, height, width) planes, then the grid: the reference's operations in its
    # order, on the same float32 values.
    weight_fetch = (full_h * full_w * (g.weight_fetch_wh * g.ifm_c)).astype(f32)
    ifm_fetch = (ib_hw * (g.ifm_c * g.ifm_repeats)).astype(f32)
    ifm_fetch = ifm_fetch * blocks_w
    ifm_fetch *= blocks_h
    cost = np.empty(grid, f32)
    if g.equal_depth:
        np.copyto(cost, ifm_fetch)
    else:
        np.multiply(ifm_fetch, shared.full_c, out=cost)
    if g.is_dw:
        cost += weight_fetch
    else:
        cost += weight_fetch * shared.weight_scale
    cost /= ofm_elements.astype(f32)
    if g.equal_depth:
        whole = ifm_elements < ib_hw * (dd * 2)
    else:
        whole = ib_hw > ifm_elements // (2 * g.ifm_block_depth)
    np.divide(cost, f32(2.0), out=cost, where=whole)
    np.copyto(cost, np.inf, where=~g.fits[:, :top_h, :top_w])
    for s, (nh, nw) in enumerate(zip(n_h, n_w)):     # each operation's padding
        if nh < top_h:
            cost[s, :, nh:, :] = np.inf
        if nw < top_w:
            cost[s, :, :, nw:] = np.inf
    flat = cost.reshape(len(ops), -1)
    first = flat.argmin(axis=1)
    best = flat[np.arange(len(ops)), first]
    # Later ties with small blocks (<= 4x4) may win on IFM coverage (find_block_config):
    # the small blocks are the first heights and widths, a corner of the grid.
    small_h = int(np.count_nonzero(hh[:, 0] <= 4))
    small_w = int(np.count_nonzero(ww[0] <= 4))
    choice = first.tolist()
    plane = top_h * top_w
    if small_h and small_w:
        corner = cost[:, :, :small_h, :small_w] == best[:, None, None, None]
        for s in np.flatnonzero(corner.reshape(len(ops), -1).any(axis=1)).tolist():
            di, hi, wi = np.nonzero(corner[s])
            ties = [t for t in (di * plane + hi * top_w + wi).tolist() if t > first[s]]
            if not ties:
                continue
            ifm_h, ifm_w = ops[s].ifm[1], ops[s].ifm[2]
            area = f32(ifm_h * ifm_w)
            covs = []
            for t in ties:
                hi, wi = divmod(t % plane, top_w)
                covs.append(area / f32(max(min(ifm_h, int(ib_h[hi, 0])) *
                                           min(ifm_w, int(ib_w[0, wi])), 1)))
            best_cov = min(covs)
            choice[s] = [t for t, c in zip(ties, covs) if c == best_cov][-1]
    out: list[BlockConfig | None] = []
    # one (immutable) config per distinct cell chosen: many stripes choose the same block
    made: dict[int, BlockConfig] = {}
    for b, c in zip(best.tolist(), choice):
        if b == math.inf:
            out.append(None)
            continue
        cfg = made.get(c)
        if cfg is None:
            di, rest = divmod(c, plane)
            hi, wi = divmod(rest, top_w)
            d = int(dd[di, 0, 0])
            cfg = made[c] = BlockConfig((int(hh[hi, 0]), int(ww[0, wi]), d),
                                        (int(ib_h[hi, 0]), int(ib_w[0, wi]),
                                         d if g.equal_depth else g.ifm_block_depth),
                                        g.traversal, g.acc_bits)
        out.append(cfg)
    return out


# --------------------------------------------------------------------------------------------
# Stripe estimates in a batch (the cycle formulas of planner.perf.ethos_u_npu, on arrays)
# --------------------------------------------------------------------------------------------

class _Stripes(NamedTuple):
    """Per-stripe int64 arrays of one Part's stripe operations and of one block
    configuration per stripe."""
    n: np.ndarray       # OFM batch
    oh: np.ndarray
    ow: np.ndarray
    oc: np.ndarray
    ih: np.ndarray
    iw: np.ndarray
    ic: np.ndarray
    bh: np.ndarray      # OFM block
    bw: np.ndarray
    bc: np.ndarray
    ibh: np.ndarray     # IFM block
    ibw: np.ndarray
    ibc: np.ndarray


def _stripes(ops: Sequence[NpuOp], cfgs: Sequence[BlockConfig]) -> _Stripes:
    rows = np.array([op.ofm + op.ifm[1:] + cfg.ofm_block + cfg.ifm_block
                     for op, cfg in zip(ops, cfgs)], dtype=np.int64).reshape(len(ops), 13)
    return _Stripes(*rows.T)


def _transfer_bytes_many(acc: EthosUAccelerator, is_read: bool, burst: int, fmt: str,
                         bits: int, bw, bc, width, depth, elements) -> np.ndarray:
    """:func:`planner.perf.ethos_u_npu.transfer_bytes` over arrays: ``bw``, ``bc`` the block's
    width and depth, ``width`` and ``depth`` the feature map's."""
    if fmt == NHCWB16:
        z_stride = (width * bits * 16) // 8
        other = 16 * bits * bw if is_read else 16 * bits * bw * acc.cores
        burst_bits = np.where(z_stride == bc, bits * bw * bc, other)
    else:
        x_stride = (depth * bits) // 8
        if is_read:
            burst_bits = np.where(x_stride == bc, bits * bw * bc, bits * bc)
        else:
            burst_bits = np.where((bc <= 16) & (x_stride == bc), bits * bw * bc,
                                  np.minimum(min(64 * 8, 16 * bits * acc.cores), bc * bits))
    nbytes = (elements * bits) // 8
    burst_bytes = np.maximum(1, np.minimum(burst, burst_bits // 8))
    return (nbytes * burst) // burst_bytes


def _estimate_many(model, op: NpuOp, s: _Stripes, cfg: BlockConfig, whole: NpuOp | None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(cycles, fill/drain cycles) of every stripe, as
    :func:`planner.perf.ethos_u_npu.estimate_mac_op` gives them one by one: ``op`` is any
    stripe's operation (the fields they share), ``cfg`` any stripe's configuration (its
    traversal and accumulator width, shared), ``s`` the stripes' shapes and blocks. Float64
    and float32 operations in the reference's order, elementwise, so the same numbers."""
    acc, fm = model.accelerator, model.fm_timing
    f32 = np.float32
    obh, obw, obc = np.minimum(s.oh, s.bh), np.minimum(s.ow, s.bw), np.minimum(s.oc, s.bc)
    if whole is not None:
        uh, uw, uc = ofm_ublock(acc, whole)
    else:
        uh, uw, uc = acc.ofm_ublock
        if uh == 2 and op.npu == CONV and op.kernel[0] == 1:
            one_by_n = (s.oh == 1) & (s.ow % 2 == 0)
            uh, uw = np.where(one_by_n, 1, uh), np.where(one_by_n, 4, uw)
    n_h, n_w, n_c = -(-obh // uh), -(-obw // uw), -(-obc // uc)
    num_blocks = ((-(-s.oh // uh)) * (-(-s.ow // uw)) * (-(-s.oc // uc))) / (n_h * n_w * n_c)
    cap_stalls = False
    pad_h = pad_w = pad_c = False
    if whole is not None:
        _, whole_h, whole_w, whole_c = whole.ofm
        cap_stalls = whole_h > uh or whole_w > uw
        pad_h, pad_w, pad_c = whole_h > s.bh, whole_w > s.bw, whole_c > s.bc
    ao_per_elem = ao_cycles_per_element(acc, op, cfg)
    elements = np.where(pad_h, n_h * uh, obh) * np.where(pad_w, n_w * uw, obw) * \
        np.where(pad_c, n_c * uc, obc)
    ao_compute = np.ceil(ao_per_elem * elements.astype(np.float64))
    if op.npu in (CONV, DEPTHWISE) and op.has_bias:
        bias = 10.0 * obc.astype(np.float64) * model.const_timing.read_latency / 256
        ao = np.maximum(ao_compute, bias)
    else:
        ao = np.maximum(ao_compute, 0.0)
    uc_all = np.broadcast_to(uc, n_h.shape)
    # Stripes of one Part mostly fill their blocks alike: of the (IFM depth, blocks) rows,
    # few are distinct, so each distinct row's cycles are worked out once.
    mac_of: dict[tuple, int] = {}
    macs = []
    for row in zip(s.ic.tolist(), s.ibc.tolist(), uc_all.tolist(), n_h.tolist(),
                   n_w.tolist(), n_c.tolist()):
        cycles = mac_of.get(row)
        if cycles is None:
            cycles = mac_of[row] = _mac_cycles_of(acc, op, cfg, *row, cap_stalls)
        macs.append(cycles)
    mac = np.array(macs, dtype=np.float64)
    ifm_elements = np.minimum(s.n, 1) * np.minimum(s.ih, s.ibh) * np.minimum(s.iw, s.ibw) * \
        np.minimum(s.ic, s.ibc)
    tx = _transfer_bytes_many(acc, True, fm.burst, op.ifm_format, op.ifm_bits, s.ibw, s.ibc,
                              s.iw, s.ic, ifm_elements)
    ifm_blk = np.maximum(0, fm.read_latency + (tx.astype(f32) / f32(
        fm.read_bytes_per_cycle)).astype(np.int64))
    ofm_elements = np.minimum(s.n, 1) * obh * obw * obc
    tx = _transfer_bytes_many(acc, False, fm.burst, op.ofm_format, op.ofm_bits, s.bw, s.bc,
                              s.ow, s.oc, ofm_elements)
    ofm_blk = fm.write_latency + (tx.astype(f32) / f32(fm.write_bytes_per_cycle)).astype(
        np.int64)
    min_mem = np.where(num_blocks > 1, np.abs(ofm_blk - ifm_blk), 0)
    cmd = (min_mem + mac + ao) / 4
    mac_bal, ao_bal = np.maximum(mac, cmd), np.maximum(ao, cmd)
    mac_led = mac_bal > ao_bal
    steady = np.where(mac_led, mac_bal * num_blocks, ao_bal * num_blocks).astype(np.int64)
    total = np.where(mac_led, (steady + ao_bal).astype(np.int64),
                     (ao_bal * num_blocks + mac_bal).astype(np.int64))
    total += ofm_blk + ifm_blk
    return total * s.n, (total - steady) * s.n


def _mac_cycles_of(acc: EthosUAccelerator, op: NpuOp, cfg: BlockConfig, ifm_c: int,
                   ifm_block_c: int, ub_c: int, n_h: int, n_w: int, n_c: int,
                   cap_stalls: bool) -> int:
    """:func:`planner.perf.ethos_u_npu.mac_cycles_per_block` from one stripe's numbers."""
    def dpu(h: int, w: int) -> int:
        return dpu_cycles_of(acc.name == "ethos-u55-32", acc.macs, acc.cores, op.npu,
                              op.kernel, op.ifm_bits, ifm_c, ifm_block_c, cfg.acc_bits,
                              cfg.traversal, ub_c, h, w, n_c)
    cycles = dpu(n_h, n_w)
    if cap_stalls and (n_h == 1 or n_w == 1):
        cycles = min(cycles, dpu(n_h + 1, n_w), dpu(n_h, n_w + 1), dpu(n_h + 1, n_w + 1))
    return cycles


def _fm_access_many(model, op: NpuOp, s: _Stripes) -> np.ndarray:
    """:func:`planner.perf.ethos_u_npu.fm_access_bytes` of every stripe (MAC operations)."""
    acc, burst = model.accelerator, model.fm_timing.burst
    obh, obw, obc = np.minimum(s.bh, s.oh), np.minimum(s.bw, s.ow), np.minimum(s.bc, s.oc)
    q_in = 16 if op.ifm_format == NHCWB16 else 1
    q_out = 16 if op.ofm_format == NHCWB16 else 1
    blocks = (-(-s.oh // obh)) * (-(-s.ow // obw))
    if op.npu in (CONV, REDUCE_SUM):
        blocks = blocks * (-(-s.oc // obc))
    sub = ceil_div(op.kernel[0], SUBKERNEL_MAX[0]) * ceil_div(op.kernel[1],
                                                                 SUBKERNEL_MAX[1])
    read = np.minimum(s.ibh, s.ih) * np.minimum(s.ibw, s.iw) * \
        (-(-s.ic // q_in) * q_in) * sub * blocks
    written = s.oh * s.ow * (-(-s.oc // q_out) * q_out)
    return _transfer_bytes_many(acc, True, burst, op.ifm_format, op.ifm_bits, s.ibw, s.ibc,
                                s.iw, s.ic, read) + \
        _transfer_bytes_many(acc, False, burst, op.ofm_format, op.ofm_bits, s.bw, s.bc, s.ow,
                             s.oc, written)


def summarise_window_stripes(model, whole: NpuOp, whole_cfg: BlockConfig,
                             ops: Sequence[NpuOp], own: Sequence[BlockConfig] | None
                             ) -> list[StripeSummary]:
    """The stripe summaries (``EthosUPerfModel._summarise_ops``) of stripes that lower to one
    MAC operation each (``ops``, one Part's: convolution, depthwise or pooling), under the
    model's block policy: ``whole`` is the Part's whole-output operation and ``whole_cfg``
    its configuration, ``own`` the configurations of ``ops`` themselves (not needed for
    policy PART)."""
    policy = model.block_policy
    op = ops[0]
    choices = []
    if policy != _STRIPE:
        mine = _stripes(ops, [whole_cfg] * len(ops))
        choices.append((mine, *_estimate_many(model, op, mine, whole_cfg, whole)))
    if policy != _PART:
        theirs = _stripes(ops, own)
        choices.append((theirs, *_estimate_many(model, op, theirs, own[0], None)))
    s, cycles, fill = choices[0]
    if len(choices) == 2:
        # BEST: the stripe's own block where it is faster back to back (then in all);
        # the Part's on a tie (EthosUPerfModel._breakdown_of).
        _, cycles_b, fill_b = choices[1]
        b2b_a, b2b_b = cycles - fill, cycles_b - fill_b
        take_b = (b2b_b < b2b_a) | ((b2b_b == b2b_a) & (cycles_b < cycles))
        s = _Stripes(*(np.where(take_b, b, a) for a, b in zip(s, choices[1][0])))
        cycles, fill = np.where(take_b, cycles_b, cycles), np.where(take_b, fill_b, fill)
    macs = op.kernel[0] * op.kernel[1] * s.oh * s.ow * s.oc
    if op.npu not in (DEPTHWISE, POOLING):
        macs = macs * s.ic
    macs = macs * s.n
    if op.npu in (CONV, DEPTHWISE):
        fetches = np.maximum(1, (-(-s.oh // s.bh)) * (-(-s.ow // s.bw)))
    else:
        fetches = np.ones_like(s.oh)
    access = _fm_access_many(model, op, s)
    return [_summary(*row) for row in zip(cycles.tolist(), fill.tolist(), macs.tolist(),
                                          fetches.tolist(), access.tolist())]


def _summary(cycles: int, fill_drain: int, macs: int, fetches: int, access: int
             ) -> StripeSummary:
    """``StripeSummary(cycles, fill_drain, macs, fetches, access)`` without the frozen
    dataclass's checked per-field assignments (as ``ethos_u._reshaped`` builds NpuOps): a
    model summarises thousands of stripes, and its fields here are the arrays' ints."""
    summary = _new(StripeSummary)
    fields = summary.__dict__
    fields["cycles"], fields["fill_drain_cycles"], fields["macs"], fields["weight_fetches"], \
        fields["fm_access_bytes"] = cycles, fill_drain, macs, fetches, access
    return summary
