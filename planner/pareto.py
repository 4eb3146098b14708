"""Pareto frontiers of (memory, cycles) points, exact and in O(n log n).

Both objectives are minimised. Ties are broken by the payload's position in the input, so the
same input always gives the same frontier.

``frontier`` and ``combine`` work on lists of tuples; ``frontier_order`` and
``combine_segments`` are the same rules on int64 arrays, for the Proposal DP, which combines
hundreds of frontiers per Part: there one numpy pass per Part replaces a Python loop over every
memory threshold (rfcs/0001). Callers keep values within ``INT64_SAFE`` so that no sum of two
overflows.
"""
from __future__ import annotations

from operator import itemgetter
from typing import Any, Sequence

import numpy as np

INT64_SAFE = 2 ** 62    # |value| below this: a sum of two still fits in int64


def frontier(points: Sequence[tuple]) -> list[tuple]:
    """Non-dominated (memory, cycles, payload...) points, sorted by memory ascending (cycles
    then strictly descending).

    A point is kept when no other point has memory <= and cycles <= with one strictly less;
    of identical (memory, cycles) points the first given is kept.
    """
    out = []
    best = None
    for pt in sorted(points, key=_MEMORY_CYCLES):    # stable: equal points keep input order
        if best is None or pt[1] < best:
            out.append(pt)
            best = pt[1]
    return out


_MEMORY_CYCLES = itemgetter(0, 1)


def combine(a: Sequence[tuple[int, int, Any]], b: Sequence[tuple[int, int, Any]]
            ) -> list[tuple[int, int, tuple[int, int]]]:
    """Frontier of {(max(ma, mb), ca + cb)} over a x b, both given as frontiers.

    For any memory bound m the best pair takes the fastest point of each side that fits m,
    so walking the merged memory values once gives every frontier candidate: O(|a| + |b|).
    Payloads of the result are (index in a, index in b).
    """
    if not a or not b:
        return []
    thresholds = sorted({p[0] for p in a} | {p[0] for p in b})
    ia = ib = -1
    out = []
    for m in thresholds:
        while ia + 1 < len(a) and a[ia + 1][0] <= m:
            ia += 1
        while ib + 1 < len(b) and b[ib + 1][0] <= m:
            ib += 1
        if ia < 0 or ib < 0:
            continue
        out.append((max(a[ia][0], b[ib][0]), a[ia][1] + b[ib][1], (ia, ib)))
    return frontier(out)


def thin(points: Sequence[tuple[int, int, Any]], keep: int) -> list[tuple[int, int, Any]]:
    """At most ``keep`` points of a frontier, evenly spaced, both ends kept (lossy: opt-in)."""
    if keep is None or len(points) <= keep:
        return list(points)
    idx = sorted({round(k * (len(points) - 1) / (keep - 1)) for k in range(keep)})
    return [points[k] for k in idx]


#: From this many points ``frontier_order`` sorts on one combined key where it fits in int64;
#: below, the extra reductions cost more than the second sort saves.
ONE_KEY_MIN = 256


def frontier_order(memory: np.ndarray, cycles: np.ndarray) -> np.ndarray:
    """Indices of ``frontier``'s survivors among the points (memory[k], cycles[k]), in its
    output order: a stable sort by (memory, cycles), each point kept when it is faster than
    every point before it (so of identical points the first given is kept)."""
    if len(memory) == 0:
        return np.zeros(0, np.int64)
    order = None
    if len(memory) >= ONE_KEY_MIN:
        # One int64 key per point, memory major: one stable sort instead of lexsort's two.
        low_m, low_c = int(memory.min()), int(cycles.min())
        span_c = int(cycles.max()) - low_c + 1
        if (int(memory.max()) - low_m + 1) * span_c < INT64_SAFE:
            order = np.argsort((memory - low_m) * span_c + (cycles - low_c), kind="stable")
    if order is None:
        order = np.lexsort((cycles, memory))    # stable: equal points keep input order
    ordered = cycles[order]
    keep = np.empty(len(order), bool)
    keep[0] = True
    np.less(ordered[1:], np.minimum.accumulate(ordered)[:-1], out=keep[1:])
    return order[keep]


def combine_segments(a_memory: np.ndarray, a_cycles: np.ndarray, a_lengths: Sequence[int],
                     b_memory: np.ndarray, b_cycles: np.ndarray, b_lengths: Sequence[int]
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``combine`` of many pairs at once, before its final cull: segment s pairs the next
    a_lengths[s] points of a with the next b_lengths[s] points of b (each segment sorted by
    memory, as a frontier is).

    Returns (memory, cycles, segment, ia, ib), where ia and ib index the whole arrays: one
    candidate per memory threshold of each segment at which both sides have a point that
    fits, in segment then memory order, exactly the points ``combine`` culls, in its order.
    Culling the candidates of all segments together (``frontier_order``) keeps what culling
    each segment first and then all survivors would: a point dropped within its segment is
    dropped by the same point in the whole. Segments are kept apart by offsetting memories
    (a key per point) so that one merge and two binary searches serve them all."""
    nseg = len(a_lengths)
    a_len = np.asarray(a_lengths, np.int64)
    b_len = np.asarray(b_lengths, np.int64)
    empty = np.zeros(0, np.int64)
    if nseg == 0 or len(a_memory) == 0 or len(b_memory) == 0:
        return empty, empty, empty, empty, empty
    low = min(int(a_memory.min()), int(b_memory.min()))
    span = max(int(a_memory.max()), int(b_memory.max())) - low + 1
    if span * nseg >= INT64_SAFE:
        raise OverflowError("segment keys would not fit in int64")
    offsets = np.arange(nseg, dtype=np.int64) * span - low
    a_key = a_memory + np.repeat(offsets, a_len)
    b_key = b_memory + np.repeat(offsets, b_len)
    # both key arrays are sorted: a stable sort of the two end to end is a merge of two runs
    keys = np.concatenate((a_key, b_key))
    keys.sort(kind="stable")
    thresholds = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]
    ia = np.searchsorted(a_key, thresholds, "right") - 1
    ib = np.searchsorted(b_key, thresholds, "right") - 1
    segment = thresholds // span
    a_first = np.cumsum(a_len) - a_len
    b_first = np.cumsum(b_len) - b_len
    fits = (ia >= a_first[segment]) & (ib >= b_first[segment])
    ia, ib, segment = ia[fits], ib[fits], segment[fits]
    return (np.maximum(a_memory[ia], b_memory[ib]), a_cycles[ia] + b_cycles[ib],
            segment, ia, ib)
