"""An exact placement of a Proposal's arena blocks within the plan's peak, where a first fit
finds none.

The planner counts a Proposal's memory as the most bytes live at once (``planner.proposals``):
the least any layout can take. A first fit in a few orders (``stream_plan.arena_layout``)
reaches it for most Proposals, but blocks that live across several Plans can leave holes
too small for the next Plan's blocks, and then the stream would take more than the plan
says. This search places the blocks in order of their first Plan (larger and longer-lived
first), each at an offset where it touches the bottom, the top or a block live with it,
and goes back to an earlier choice when a block finds no room. It is bounded by a number of
placements (deterministic: the same blocks always give the same layout or none), after
which it gives up.

Nothing here imports TVM or Vela.
"""
from __future__ import annotations

from typing import Protocol, Sequence

#: placements tried before the search gives up (each a few microseconds per live block)
MAX_PLACEMENTS = 200_000


class Block(Protocol):
    """What the search reads of an arena block (``stream_plan.Buffer`` is one)."""

    name: str
    nbytes: int
    align: int
    first: int
    last: int


def packed_offsets(blocks: Sequence[Block], peak: int,
                   max_placements: int = MAX_PLACEMENTS) -> dict[str, int] | None:
    """An offset per block name such that blocks live in a common Plan do not overlap, every
    block lies within ``[0, peak)`` on a multiple of its ``align``; None where none was found
    within ``max_placements`` placements (or none exists)."""
    order = sorted(blocks, key=lambda b: (b.first, -(b.last - b.first), -b.nbytes, b.name))
    if any(b.nbytes > peak for b in order):
        return None
    placed: list[tuple[int, int, int, int]] = []   # (offset, bytes, first, last)
    offsets: dict[str, int] = {}
    budget = [max_placements]

    def candidates(b: Block) -> list[int]:
        live = [(o, n) for o, n, lo, hi in placed if n and not (hi < b.first or lo > b.last)]
        up = {0} | {o + n for o, n in live}
        down = {peak - b.nbytes} | {o - b.nbytes for o, _ in live}
        spots = {-(-x // b.align) * b.align for x in up} | {x // b.align * b.align
                                                            for x in down if x >= 0}
        return sorted(x for x in spots if x + b.nbytes <= peak and
                      all(x + b.nbytes <= o or o + n <= x for o, n in live))

    def place(i: int) -> bool:
        if i == len(order):
            return True
        b = order[i]
        if not b.nbytes:
            offsets[b.name] = 0
            return place(i + 1)
        for x in candidates(b):
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            placed.append((x, b.nbytes, b.first, b.last))
            offsets[b.name] = x
            if place(i + 1):
                return True
            placed.pop()
        return False

    return dict(offsets) if place(0) else None
