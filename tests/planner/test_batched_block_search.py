"""The batched block search and stripe summaries give the one-at-a-time answers.

``find_block_configs`` searches the stripes of one Part together on padded grids, and
``EthosUPerfModel.summarise_stripes`` uses it to summarise many stripes at once, the stripes
of a convolution, depthwise or pooling Part estimated on arrays
(``summarise_window_stripes``). Both are
speed devices only: the references are ``find_block_config`` one operation at a time (itself
checked against a scalar walk of Vela's candidates in test_block_search.py) and a fresh
model asked for one stripe at a time.
"""
from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner import parts
from planner.devices import DEVICE_NAMES
from planner.errors import PlannerError
from planner.graph import Tensor
from planner.perf import ethos_u_batch
from planner.perf.ethos_u import (
    ACCELERATORS,
    ELEMENTWISE,
    NHCWB16,
    NHWC,
    EthosUPerfModel,
    NpuOp,
    find_block_config,
    lower_part,
    lower_stripes,
)
from planner.perf.ethos_u_batch import find_block_configs
from planner.plans import clear_caches
from tests.helpers.perf_strategies import PROPS, nhwc_parts, npu_ops, perf, sub_shape, with_attrs

ETHOS_U = [d for d in DEVICE_NAMES if d.startswith("ethos-u")]


def _reference(acc, op: NpuOp):
    """The one-at-a-time configuration, or the error it raises (as a string)."""
    try:
        return find_block_config(acc, op)
    except PlannerError as e:
        return str(e)


@st.composite
def stripe_groups(draw):
    """Operations that differ only in OFM and IFM height, width (the stripes of one Part,
    the group the batch searches together) plus a few unrelated ones."""
    base = draw(npu_ops())
    ops = [base]
    for _ in range(draw(st.integers(1, 12))):
        oh, ow = draw(st.integers(1, 40)), draw(st.integers(1, 80))
        ih, iw = draw(st.integers(1, 90)), draw(st.integers(1, 170))
        ops.append(dataclasses.replace(base, ofm=(1, oh, ow, base.ofm[3]),
                                       ifm=(base.ifm[0], ih, iw, base.ifm[3])))
    ops += draw(st.lists(npu_ops(), max_size=3))
    return draw(st.permutations(ops))


@PROPS
@given(ops=stripe_groups(), accelerator=st.sampled_from(sorted(ACCELERATORS)),
       pad=st.sampled_from([(0.0, 0), (0.6, 2048), (10.0, 1 << 20)]))
def test_batched_block_search_matches_one_search_per_operation(ops, accelerator, pad):
    """Same configurations as find_block_config for every operation, whatever the chunking
    (none, the default, everything in one padded grid), elementwise operations and
    operations no block fits included (those raise the reference's error)."""
    acc = ACCELERATORS[accelerator]
    clear_caches()
    expected = [_reference(acc, op) for op in ops]
    errors = [e for e in expected if isinstance(e, str)]
    saved = ethos_u_batch.PAD_SHARE, ethos_u_batch.PAD_CELLS
    ethos_u_batch.PAD_SHARE, ethos_u_batch.PAD_CELLS = pad
    try:
        got = find_block_configs(acc, ops)
    except PlannerError as e:
        assert str(e) in errors
    else:
        assert not errors and got == expected
    finally:
        ethos_u_batch.PAD_SHARE, ethos_u_batch.PAD_CELLS = saved


def test_batch_groups_only_single_input_mac_operations():
    """Elementwise operations have a second input and other buffer rules: never grouped."""
    acc = ACCELERATORS["ethos-u55-128"]
    ew = NpuOp(ELEMENTWISE, "Add", (1, 8, 8, 16), (1, 8, 8, 16), (1, 8, 8, 16))
    assert ethos_u_batch._group_key(acc, ew) is None
    assert find_block_configs(acc, [ew, ew]) == [find_block_config(acc, ew)] * 2


@PROPS
@given(part=nhwc_parts(), device=st.sampled_from(ETHOS_U),
       policy=st.sampled_from(EthosUPerfModel.BLOCK_POLICIES), data=st.data())
def test_summarised_stripes_equal_one_stripe_at_a_time(part, device, policy, data):
    """Summaries made in a batch are the ones a fresh model makes a stripe at a time, for
    every block policy, with shapes repeated and given as lists."""
    model = perf(device)
    shapes = [tuple(sub_shape(data.draw, part.output.shape))
              for _ in range(data.draw(st.integers(1, 8)))]
    batched = EthosUPerfModel(model.name, model.fm_timing, model.const_timing, policy)
    batched.summarise_stripes(part, shapes + [list(s) for s in shapes])
    for shape in shapes:
        fresh = EthosUPerfModel(model.name, model.fm_timing, model.const_timing, policy)
        assert batched.stripe_summary(part, shape) == fresh.stripe_summary(part, shape)
        assert batched.compute_cycles(part, shape) == fresh.compute_cycles(part, shape)


@PROPS
@given(h=st.integers(1, 6), w=st.integers(1, 40), c=st.sampled_from([3, 16, 40]),
       oc=st.sampled_from([8, 24, 64]), kw=st.sampled_from([1, 3]),
       accelerator=st.sampled_from(["ethos-u55-256", "ethos-u65-512", "ethos-u55-128"]),
       policy=st.sampled_from(EthosUPerfModel.BLOCK_POLICIES),
       fmt=st.sampled_from([NHWC, NHCWB16]), data=st.data())
def test_summarised_one_row_convolutions_equal_one_stripe_at_a_time(h, w, c, oc, kw,
                                                                    accelerator, policy,
                                                                    fmt, data):
    """The 1 x N micro-block of the 2-high configurations (a stripe one row high, a kernel
    one row high, an even width) and NHWC layouts, which random Parts rarely meet."""
    part = parts.conv2d("p", Tensor("x", (1, h, w, c)), oc, kernel=(1, kw), strides=1,
                        padding=(0, 0, 0, kw - 1))
    part = with_attrs(part, ifm_format=fmt, ofm_format=data.draw(st.sampled_from([NHWC,
                                                                                 NHCWB16])))
    shapes = {(1, 1, data.draw(st.integers(1, w)), data.draw(st.integers(1, oc)))
              for _ in range(6)} | {(1, data.draw(st.integers(1, h)), w, oc)}
    batched = EthosUPerfModel(accelerator, block_policy=policy)
    batched.summarise_stripes(part, shapes)
    for shape in shapes:
        fresh = EthosUPerfModel(accelerator, block_policy=policy)
        assert batched.stripe_summary(part, shape) == fresh.stripe_summary(part, shape)


@st.composite
def window_parts(draw):
    """Convolutions, depthwise convolutions and pools past ``nhwc_parts``' settings: groups,
    dilations (past 2: a spread kernel), pools wider than the NPU's stride, unequal
    paddings."""
    h, w = draw(st.integers(1, 20)), draw(st.integers(1, 40))
    c = draw(st.sampled_from([2, 4, 8]))
    x = Tensor("x", (1, h, w, c))
    pad = tuple(draw(st.integers(0, 2)) for _ in range(4))
    kind = draw(st.sampled_from(["conv2d", "depthwise_conv2d", "pool"]))
    try:
        if kind == "conv2d":
            return parts.conv2d("p", x, draw(st.sampled_from([2, 4, 8])),
                                kernel=draw(st.sampled_from([1, 3])),
                                strides=draw(st.sampled_from([1, 2])),
                                dilation=draw(st.sampled_from([1, 2, 3])), padding=pad,
                                groups=draw(st.sampled_from([1, 2])))
        if kind == "depthwise_conv2d":
            return parts.depthwise_conv2d("p", x, kernel=3, dilation=draw(st.sampled_from(
                [1, 2, 3])), padding=pad)
        k = draw(st.sampled_from([(2, 2), (1, 5), (3, 6)]))
        return parts.pool2d("p", x, "avg", pool_size=k, strides=k, padding=(0, 0, 0, 0))
    except PlannerError:
        return parts.pool2d("p", x, "max", pool_size=1, strides=1)


@PROPS
@given(part=st.one_of(nhwc_parts(), window_parts()), data=st.data())
def test_lowered_stripes_equal_one_stripe_at_a_time(part, data):
    """``lower_stripes`` lowers a batch of stripe shapes (the whole output's among them) to
    the operations ``lower_part`` gives each, whatever the Part."""
    shapes = [tuple(sub_shape(data.draw, part.output.shape))
              for _ in range(data.draw(st.integers(0, 6)))]
    shapes.insert(data.draw(st.integers(0, len(shapes))), part.output.shape)
    assert lower_stripes(part, shapes) == [lower_part(part, s) for s in shapes]


def test_lowering_a_bad_stripe_in_a_batch_names_it():
    """A stripe with an empty axis is refused as ``lower_part`` refuses it."""
    part = parts.conv2d("p", Tensor("x", (1, 8, 8, 4)), 4, kernel=3, padding=(1, 1, 1, 1))
    with pytest.raises(PlannerError, match="empty axis"):
        lower_stripes(part, [(1, 2, 8, 4), (1, 0, 8, 4)])
