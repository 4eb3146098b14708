"""The Ethos-U block search and the perf model's caches give the answers of the plain model.

``find_block_config`` is vectorised and caches pieces of its work by the stripe's search
ranges; ``EthosUPerfModel`` shares one stripe summary between Parts that lower alike. Both
are speed devices only, so they are checked against oracles that have neither:

* a scalar walk over Vela's candidates in Vela's loop order (depth, then height, then
  width), with the same float32 cost and tie-break (regor/ethos_u55.cpp:FindBlockConfig);
* a fresh model per Part, whose caches cannot have been filled by another Part.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from planner.devices import DEVICE_NAMES
from planner.perf.ethos_u import (
    ACCELERATORS,
    CONV,
    DEPTHWISE,
    ELEMENTWISE,
    NHWC,
    POOLING,
    REDUCE_SUM,
    EthosUPerfModel,
    NpuOp,
    find_block_config,
)
from planner.plans import clear_caches
from tests.helpers.perf_strategies import PROPS, nhwc_parts, npu_ops, perf, sub_shape, with_attrs

f32 = np.float32


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def oracle_block(acc, op: NpuOp) -> tuple:
    """(OFM block, IFM block) by trying every candidate in turn, as Vela's loop does."""
    ifm = op.ifm if op.ifm2 is None or math.prod(op.ifm) >= math.prod(op.ifm2) else op.ifm2
    _, oh, ow, oc = op.ofm
    ih, iw, ic = ifm[1:]
    ew = 0
    if op.npu == ELEMENTWISE:
        scalar = math.prod(op.ifm) == 1 or (op.ifm2 is not None and math.prod(op.ifm2) == 1)
        ew = 2 if scalar and op.ifm_bits <= 16 else 1
    dw = op.npu == DEPTHWISE
    equal_depth = ew != 0 or op.npu == POOLING or dw
    kh, kw = op.kernel
    kernel_first = False
    if op.npu == CONV:
        if ic <= 8:
            kernel_first = True
        else:
            depth_util = ic / (_ceil(ic, 32 if op.ifm_bits == 8 else 16) *
                               (32 if op.ifm_bits == 8 else 16))
            k = 4 if op.ifm_bits == 8 else 2
            kernel_first = (ic / (_ceil(ic, 8) * 8)) * (kh * kw / (_ceil(kh * kw, k) * k)) \
                >= depth_util
    pooling = op.npu in (POOLING, REDUCE_SUM)
    acc_bits = 40 if op.ifm_bits == 16 and (not pooling or op.npu == REDUCE_SUM) else 32
    bits = op.ifm_bits if op.ifm_bits in (8, 16, 32) else 8
    g_ifm = acc.shram_granules[({8: 2, 16: 3, 32: 4} if ew else {8: 0, 16: 1, 32: 4})[bits]]
    g_acc = acc.shram_granules[{32: 6, 40: 7}[acc_bits]]
    top = acc.shram_banks - max(_ceil(op.lut_bytes, 1024), 2 if acc.shram_banks > 16 else 0)
    dkh, dkw = (kh - 1) * op.dilation[0] + 1, (kw - 1) * op.dilation[1] + 1
    repeats = _ceil(dkw, 8) * _ceil(dkh, 8)
    if bits == 16:
        ifm_depth = _ceil(min(ic, 16), 4) * 4
    else:
        ifm_depth = _ceil(min(ic, 16 if kernel_first else 32), acc.ifm_ublock[2]) * \
            acc.ifm_ublock[2]
    wf = kh * kw if op.npu in (CONV, DEPTHWISE) else 0
    uh, uw, uc = acc.ofm_ublock
    sh = _ceil(min(oh, 32), uh) * uh
    sw = _ceil(min(ow, 64), uw) * uw
    sc = _ceil(min(oc, 128), uc) * uc
    depths, d = [], max(uc, min(sc, 16))
    d = _ceil(d, 16) * 16 if d < oc else d
    while d <= sc:
        depths.append(d)
        d += uc
        d = _ceil(d, 16) * 16 if d < oc else d
    tried = []   # (cost, coverage, small, blocks) of the blocks that fit, in Vela's order
    for d in depths:
        for h in range(uh, sh + 1, uh):
            for w in range(uw, sw + 1, uw):
                ibh = _ceil(_ceil((h - 1) * op.stride[0] + min(dkh, 8) + op.rounding,
                                  op.upscale), uh) * uh
                ibw = _ceil(_ceil((w - 1) * op.stride[1] + min(dkw, 8) + op.rounding,
                                  op.upscale), uw) * uw
                ibc = d if equal_depth else ifm_depth
                fh = min(h, oh) if (oh == 1 and kh == 1 and uh == 2) else h
                banks = _ceil(_ceil(ibh * ibw * _ceil(ibc * bits // 8, 8) * 8, 1024) * 2,
                              g_ifm) * g_ifm
                if ew == 0:
                    acc_banks = _ceil(_ceil(fh * w * _ceil(d, 8) * 8 * acc_bits // 8, 1024) * 2,
                                      g_acc) * g_acc
                    if 2 + banks > top - acc_banks:
                        continue
                elif 2 + banks + (banks if ew == 1 else 0) > top:
                    continue
                if op.npu == ELEMENTWISE:
                    cost = f32(math.prod(op.ofm)) / f32(h * w * d)
                else:
                    weights = f32(wf * ic * _ceil(oh, fh) * _ceil(ow, w))
                    if not dw:
                        weights = weights * (f32(oc) / f32(d) * f32(d))
                    fetch = f32(ibh * ibw * ic * repeats) * (f32(ow) / f32(w)) * \
                        (f32(oh) / f32(fh))
                    if not equal_depth:
                        fetch = fetch * f32(_ceil(oc, d))
                    cost = (fetch + weights) / f32(math.prod(op.ofm))
                if math.prod(ifm) < ibh * ibw * ibc * 2:
                    cost = f32(cost / f32(2.0))
                cov = f32(ih * iw) / f32(max(min(ih, ibh) * min(iw, ibw), 1))
                tried.append((cost, cov, h <= 4 and w <= 4, ((h, w, d), (ibh, ibw, ibc))))
    # The first cheapest wins, unless cheapest small blocks (<= 4x4) follow it: then the last
    # of those with the best coverage among them.
    cheapest = min(t[0] for t in tried)
    ties = [t for t in tried if t[0] == cheapest]
    later = [t for t in ties[1:] if t[2]]
    if not later:
        return ties[0][3]
    best_cov = min(t[1] for t in later)
    return [t for t in later if t[1] == best_cov][-1][3]


@PROPS
@given(op=npu_ops(), accelerator=st.sampled_from(sorted(ACCELERATORS)), cold=st.booleans())
def test_block_search_matches_a_scalar_walk_of_vela_candidates(op, accelerator, cold):
    acc = ACCELERATORS[accelerator]
    if cold:
        clear_caches()   # the per-axis and fit caches must not change the answer either way
    got = find_block_config(acc, op)
    assert (got.ofm_block, got.ifm_block) == oracle_block(acc, op)


@PROPS
@given(first=nhwc_parts(), other=nhwc_parts(),
       how=st.sampled_from(["other", "renamed", "activation", "layout"]),
       device=st.sampled_from([d for d in DEVICE_NAMES if d.startswith("ethos-u")]),
       data=st.data())
def test_stripe_summaries_shared_only_between_parts_that_lower_alike(first, other, how,
                                                                     device, data):
    """A model that costed one Part answers for another exactly what a fresh model does:
    for an unrelated Part, the same Part under another name, or the same Part with another
    fused activation or output layout (Parts that share shapes but not costs)."""
    second = {"other": other,
              "renamed": dataclasses.replace(first, name="other"),
              "activation": with_attrs(first, activation=data.draw(
                  st.sampled_from([None, "relu", "sigmoid"]))),
              "layout": with_attrs(first, ofm_format=NHWC)}[how]
    model = perf(device)
    assert isinstance(model, EthosUPerfModel)
    stripe = sub_shape(data.draw, first.output.shape)
    b = stripe if how != "other" else sub_shape(data.draw, second.output.shape)
    model.compute_cycles(first, stripe)
    fresh = EthosUPerfModel(model.name, model.fm_timing, model.const_timing,
                            model.block_policy)
    for ask in ("compute_cycles", "fill_drain_cycles", "weight_fetches", "macs"):
        assert getattr(model, ask)(second, b) == getattr(fresh, ask)(second, b), ask
    assert model.compute_cycles(first, stripe) == fresh.compute_cycles(first, stripe)


@PROPS
@given(part=nhwc_parts(), device=st.sampled_from([d for d in DEVICE_NAMES
                                                  if d.startswith("ethos-u")]),
       order=st.permutations(["ints", "list", "numpy"]), data=st.data())
def test_stripe_summary_is_the_same_whatever_the_shape_is_written_as(part, device, order,
                                                                       data):
    """The summaries are looked up by the shape as given first (no conversion): a list, a
    tuple of numpy integers or of ints, in any order, get what a fresh model answers."""
    model = perf(device)
    stripe = tuple(sub_shape(data.draw, part.output.shape))
    fresh = EthosUPerfModel(model.name, model.fm_timing, model.const_timing,
                            model.block_policy).stripe_summary(part, stripe)
    written = {"ints": stripe, "list": list(stripe),
               "numpy": tuple(np.int64(s) for s in stripe)}
    for how in order:
        assert model.stripe_summary(part, written[how]) == fresh, how
