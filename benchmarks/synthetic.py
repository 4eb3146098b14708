"""Synthetic planner graphs of any size: chains and residual (branching) networks."""
from __future__ import annotations

from planner import parts
from planner.graph import GraphBuilder, PlannerGraph


def chain(n_parts: int, size: int = 32, channels: int = 16) -> PlannerGraph:
    """Alternating 3x3 depthwise / 1x1 conv pairs at a constant resolution."""
    b = GraphBuilder(f"chain{n_parts}")
    t = b.input("in", (1, size, size, channels))
    for i in range(n_parts):
        if i % 2 == 0:
            t = b.add(parts.depthwise_conv2d(f"dw{i}", t, 3, 1, padding=1, activation="relu"))
        else:
            t = b.add(parts.conv2d(f"pw{i}", t, channels, 1, activation="relu"))
    return b.build([t])


def residual(n_parts: int, size: int = 32, channels: int = 16) -> PlannerGraph:
    """Blocks of conv3x3 -> conv3x3 -> add(skip): every third Part joins two branches."""
    b = GraphBuilder(f"residual{n_parts}")
    t = b.input("in", (1, size, size, channels))
    made = 0
    while made < n_parts:
        skip = t
        t = b.add(parts.conv2d(f"a{made}", t, channels, 3, padding=1, activation="relu"))
        made += 1
        if made >= n_parts:
            break
        t = b.add(parts.conv2d(f"b{made}", t, channels, 3, padding=1))
        made += 1
        if made >= n_parts:
            break
        t = b.add(parts.elementwise(f"add{made}", t, skip, "add", activation="relu"))
        made += 1
    return b.build([t])
