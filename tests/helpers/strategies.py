"""Hypothesis strategies: small random planner graphs with strides, dilations and branches."""
from hypothesis import strategies as st

from planner import parts
from planner.errors import PlannerError
from planner.graph import GraphBuilder


@st.composite
def graphs(draw, max_parts: int = 6, min_parts: int = 1):
    h = draw(st.integers(4, 20))
    w = draw(st.integers(4, 20))
    c = draw(st.integers(1, 8))
    b = GraphBuilder("random")
    t = b.input("in", (1, h, w, c))
    n = draw(st.integers(min_parts, max_parts))
    made = 0
    skip = None
    while made < n:
        kind = draw(st.sampled_from(["conv", "dw", "pool", "add", "resize", "conv"]))
        name = f"p{made}"
        try:
            if kind == "conv":
                k = draw(st.sampled_from([1, 3]))
                s = draw(st.sampled_from([1, 1, 2]))
                d = draw(st.sampled_from([1, 1, 2])) if k == 3 and s == 1 else 1
                pad = draw(st.integers(0, (d * (k - 1) + 1) // 2))
                part = parts.conv2d(name, t, draw(st.integers(1, 8)), k, s, d, padding=pad)
            elif kind == "dw":
                s = draw(st.sampled_from([1, 2]))
                part = parts.depthwise_conv2d(name, t, 3, s, padding=(1, 1, 1, 1))
            elif kind == "pool":
                part = parts.pool2d(name, t, draw(st.sampled_from(["max", "avg"])), 2, 2)
            elif kind == "add":
                if skip is None or skip.shape != t.shape or skip is t:
                    skip = t
                    continue
                part = parts.elementwise(name, t, skip, "add")
                skip = None
            else:
                if t.shape[1] * 2 > 24:
                    continue
                part = parts.resize(name, t, 2)
        except PlannerError:
            continue
        if draw(st.booleans()) and skip is None:
            skip = t
        t = b.add(part)
        made += 1
    return b.build([t])
