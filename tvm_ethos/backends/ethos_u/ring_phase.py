"""Where a ring starts: the slot its row 0 (column 0) goes to.

A ring of ``extent`` rows holds row ``r`` of its tensor in a slot ``r`` modulo ``extent``
apart from every other row it holds at once, so any rotation of the slots holds the same
rows: row ``r`` in slot ``(r + phase) % extent`` overwrites exactly what ``r % extent``
does. What the rotation changes is which boxes wrap the ring's end. A box that wraps is a
feature map in two (or four) tiles, whose second base and tile sizes the stream writes; a
box inside the ring writes only its first base, and in a cascade, where a ring's writer and
readers alternate with other layers, those tile registers are written again at nearly every
operation. The phase that leaves the fewest boxes wrapping is taken, per ring and axis.
"""
from __future__ import annotations

from collections.abc import Iterable


def wraps(extent: int, phase: int, span: tuple[int, int]) -> bool:
    """Whether the rows ``[span[0], span[1])`` cross the end of a ring of ``extent`` rows whose
    row 0 sits in slot ``phase``."""
    lo, hi = span
    return (lo + phase) % extent + (hi - lo) > extent


def best_phase(extent: int, spans: Iterable[tuple[int, int]]) -> int:
    """The phase in ``[0, extent)`` under which the fewest of ``spans`` (row ranges of the
    boxes read and written in the ring) wrap; the least such phase, so a ring no rotation
    helps keeps phase 0."""
    spans = list(spans)
    if extent <= 1 or not spans:
        return 0
    return min(range(extent), key=lambda p: (sum(wraps(extent, p, s) for s in spans), p))
