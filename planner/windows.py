"""Exact per-axis window arithmetic shared by the plan generator and the simulator.

A window is the half-open range of input rows one stripe of a Part's output reads along one
axis. For an output range ``[c0, c1)`` and the propagator row (linear ``L``, constant ``k``,
offset ``o``) the window starts at ``floor(L*c0 + o)`` and is ``ceil(L*(c1-c0) + k)`` long,
then clipped to the tensor. Both the planner's closed forms and the simulator's walk use this
one definition, so they can only disagree through a real bug.
"""
from __future__ import annotations

import math

from planner.propagator import Number


def window(c0: int, c1: int, lin: Number, const: Number, off: Number, extent: int
           ) -> tuple[int, int]:
    """Rows of the input that output rows [c0, c1) read, clipped to [0, extent)."""
    if lin == 0:
        start = math.floor(off)
        length = math.ceil(const)
    else:
        start = math.floor(lin * c0 + off)
        length = math.ceil(lin * (c1 - c0) + const)
    lo, hi = max(start, 0), min(start + max(length, 1), extent)
    return lo, max(lo, hi)


def chunk_end(x: int, lo: int, hi: int, h: int) -> int:
    """Where a producer computing chunks of ``h`` rows from ``lo`` stops to cover row x-1."""
    if x <= lo:
        return lo
    return min(hi, lo + -(-(x - lo) // h) * h)


def ring_rows(windows: tuple[tuple[int, int], ...], h: int, extent: int | None = None
              ) -> tuple[int, int, int]:
    """Rows a rolling buffer needs when one consumer reads ``windows`` in order and the
    producer computes on demand in chunks of ``h`` rows.

    Returns (ring rows, lo, hi): the producer computes rows [lo, hi) in chunks from ``lo``;
    its last chunk is cut only by the tensor's ``extent`` (default ``hi``), so it may run past
    ``hi``. At each consumer step the buffer holds the rows from the window's start up to the
    producer's frontier, which the chunk grid may push past the window's end.
    """
    ws = [w for w in windows if w[1] > w[0]]
    if not ws:
        return 0, 0, 0
    lo = min(w[0] for w in ws)
    hi = max(w[1] for w in ws)
    end = hi if extent is None else extent
    ring, frontier = 0, lo
    for a, b in ws:
        frontier = max(frontier, chunk_end(b, lo, end, h))
        ring = max(ring, frontier - a)
    return ring, lo, hi
