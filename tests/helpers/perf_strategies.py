"""Hypothesis settings and strategies for the performance model tests: random NHWC Parts,
stripes of them, and random Ethos-U NPU operations."""
from __future__ import annotations

import dataclasses
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from planner import parts
from planner.devices import get_device
from planner.graph import Part, Tensor
from planner.perf.base import PerfModel
from planner.perf.ethos_u_npu import CONV, DEPTHWISE, ELEMENTWISE, POOLING, REDUCE_SUM, NpuOp

# Deterministic by default so CI never flakes; PERF_EXAMPLES=5000 PERF_RANDOM=1 explores.
PROPS = settings(max_examples=int(os.environ.get("PERF_EXAMPLES", 40)), deadline=None,
                 derandomize=not os.environ.get("PERF_RANDOM"),
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                        HealthCheck.filter_too_much])


def perf(name: str) -> PerfModel:
    return get_device(name).perf


def with_attrs(part: Part, **attrs) -> Part:
    return dataclasses.replace(part, attrs=dict(part.attrs, **attrs))


@st.composite
def nhwc_parts(draw, kinds=("conv2d", "depthwise_conv2d", "pool", "elementwise", "unary",
                            "mean", "resize", "pad", "slice", "concatenate")):
    """A Part of one of ``kinds`` on a random NHWC input."""
    kind = draw(st.sampled_from(kinds))
    h, w = draw(st.integers(1, 24)), draw(st.integers(1, 24))
    c = draw(st.sampled_from([1, 3, 8, 16, 24, 32, 48, 64, 100]))
    x = Tensor("x", (1, h, w, c))
    k = draw(st.sampled_from([1, 3, 5]))
    s = draw(st.sampled_from([1, 2]))
    act = draw(st.sampled_from([None, "relu", "relu6", "sigmoid"]))
    pad = parts.same_padding(h, k, s) + parts.same_padding(w, k, s)
    pad = (pad[0], pad[2], pad[1], pad[3])
    if kind == "conv2d":
        oc = draw(st.sampled_from([1, 8, 16, 32, 40, 64, 128]))
        return parts.conv2d("p", x, oc, kernel=k, strides=s, padding=pad, activation=act)
    if kind == "depthwise_conv2d":
        return parts.depthwise_conv2d("p", x, kernel=k, strides=s, padding=pad, activation=act)
    if kind == "pool":
        return parts.pool2d("p", x, draw(st.sampled_from(["max", "avg"])), pool_size=k,
                            strides=s, padding=pad)
    if kind == "elementwise":
        other = Tensor("y", draw(st.sampled_from([(1, h, w, c), (1, 1, 1, c), (1, 1, 1, 1)])))
        return parts.elementwise("p", x, other, draw(st.sampled_from(
            ["add", "sub", "mul", "maximum", "minimum"])), activation=act)
    if kind == "unary":
        return parts.unary("p", x, draw(st.sampled_from(["relu", "sigmoid", "abs", "requant"])))
    if kind == "mean":
        return parts.mean("p", x)
    if kind == "resize":
        return parts.resize("p", x, draw(st.sampled_from([2, 4])),
                            draw(st.sampled_from(["nearest", "bilinear"])))
    if kind == "pad":
        return parts.pad("p", x, [(0, 0), (1, 1), (draw(st.integers(0, 2)), 1), (0, 0)])
    if kind == "slice":
        return parts.strided_slice("p", x, (0, 0, 0, 0), (1, h, max(1, w // 2), c))
    return parts.concatenate("p", [x, Tensor("y", (1, h, w, 16))], axis=-1)


def sub_shape(draw, full):
    return tuple(draw(st.integers(1, n)) for n in full)


def parts_and_stripes(**kw) -> st.SearchStrategy:
    """(Part, stripe shape) pairs: an ``nhwc_parts(**kw)`` Part and a stripe of its output
    (a strategy, unlike ``sub_shape``, so that tests can give ``@example`` cases)."""
    return nhwc_parts(**kw).flatmap(lambda p: st.tuples(
        st.just(p), st.tuples(*(st.integers(1, n) for n in p.output.shape))))


@st.composite
def npu_ops(draw):
    npu = draw(st.sampled_from([CONV, DEPTHWISE, POOLING, REDUCE_SUM, ELEMENTWISE]))
    oh, ow = draw(st.integers(1, 40)), draw(st.integers(1, 80))
    oc = draw(st.sampled_from([1, 3, 8, 16, 24, 40, 64, 128, 200, 512]))
    ih, iw = draw(st.integers(1, 90)), draw(st.integers(1, 170))
    ic = oc if npu in (DEPTHWISE, POOLING, ELEMENTWISE) else \
        draw(st.sampled_from([1, 3, 8, 16, 32, 100, 256]))
    ifm2 = None
    if npu == ELEMENTWISE:
        ifm2 = draw(st.sampled_from([(1, ih, iw, ic), (1, 1, 1, 1), (1, oh, ow, oc)]))
    mac = npu != ELEMENTWISE
    return NpuOp(npu, "Op", (1, ih, iw, ic), (1, oh, ow, oc), ifm2,
                 kernel=(draw(st.integers(1, 9)), draw(st.integers(1, 9))) if mac else (1, 1),
                 stride=(draw(st.integers(1, 3)), draw(st.integers(1, 3))) if mac else (1, 1),
                 dilation=(draw(st.integers(1, 2)), draw(st.integers(1, 2))),
                 ifm_bits=draw(st.sampled_from([8, 16, 32] if not mac else [8, 16])),
                 upscale=draw(st.sampled_from([1, 2])), rounding=draw(st.sampled_from([0, 1])),
                 lut_bytes=draw(st.sampled_from([0, 256, 2048])))
