"""A placement of a Proposal's arena blocks within the plan's peak, where a first fit finds
none.

The planner counts a Proposal's memory as the most bytes live at once (``planner.proposals``):
the least any layout can take. A first fit in a few orders (``stream_plan.arena_layout``)
reaches it for most Proposals, but blocks that live across several Plans can leave holes
too small for the next Plan's blocks, and then the stream would take more than the plan
says. Two bounded backtracking searches follow, each stopping after ``max_work`` block
comparisons (deterministic: the same blocks always give the same layout or none):

* by lifetime: the blocks in order of their first Plan (longer-lived and larger first),
  each where it touches the bottom, the top or a block live with it; quick where the
  trouble is the order of long-lived blocks;
* by offset: any unplaced block next, at the bottom or on a block live with it, offsets
  never decreasing. Every placement can be pushed down until each block rests on the
  bottom or on a block below it (at its alignment), so this search, unbounded, finds a
  placement wherever one exists; it gives up on a branch as soon as the bytes still to
  place exceed the room left above the current offset in some Plan.
"""
from __future__ import annotations

from typing import Protocol, Sequence

#: block comparisons each search makes (an offset against the blocks live with it, the room
#: left in each Plan) before it gives up: what bounds a compile's time on a Proposal no
#: layout fits
MAX_WORK = 10_000_000

_Placed = tuple[int, int, int, int]   # (offset, bytes, first Plan, last Plan)


class Block(Protocol):
    """What the search reads of an arena block (``stream_plan.Buffer`` is one)."""

    name: str
    nbytes: int
    align: int
    first: int
    last: int


def packed_offsets(blocks: Sequence[Block], peak: int,
                   max_work: int = MAX_WORK) -> dict[str, int] | None:
    """An offset per block name such that blocks live in a common Plan do not overlap and
    every block lies within ``[0, peak)`` on a multiple of its ``align``; None where neither
    search found one within ``max_work`` block comparisons (or none exists)."""
    sized = [b for b in blocks if b.nbytes]
    plans = {k for b in sized for k in range(b.first, b.last + 1)}
    if any(sum(b.nbytes for b in sized if b.first <= k <= b.last) > peak for k in plans):
        return None   # more bytes live in one Plan than the peak: no search can fit them
    found = _by_lifetime(sized, peak, max_work)
    if found is None:
        found = _by_offset(sized, peak, max_work)
    if found is None:
        return None
    return {b.name: found.get(b.name, 0) for b in blocks}


def _live(placed: list[_Placed], b: Block) -> list[tuple[int, int]]:
    return [(o, n) for o, n, lo, hi in placed if not (hi < b.first or lo > b.last)]


def _free(x: int, b: Block, live: list[tuple[int, int]], peak: int) -> bool:
    return x >= 0 and x % b.align == 0 and x + b.nbytes <= peak and \
        all(x + b.nbytes <= o or o + n <= x for o, n in live)


def _up(x: int, align: int) -> int:
    return -(-x // align) * align


def _by_lifetime(blocks: list[Block], peak: int, max_work: int) -> dict[str, int] | None:
    order = sorted(blocks, key=lambda b: (b.first, -(b.last - b.first), -b.nbytes, b.name))
    placed: list[_Placed] = []
    offsets: dict[str, int] = {}
    budget = [max_work]

    def place(i: int) -> bool:
        if i == len(order):
            return True
        b = order[i]
        live = _live(placed, b)
        spots = {_up(x, b.align) for x in [0] + [o + n for o, n in live]} | \
            {x // b.align * b.align for x in [peak - b.nbytes] + [o - b.nbytes for o, _ in live]}
        budget[0] -= len(spots) * (1 + len(live))
        if budget[0] < 0:
            return False
        for x in sorted(x for x in spots if _free(x, b, live, peak)):
            placed.append((x, b.nbytes, b.first, b.last))
            offsets[b.name] = x
            if place(i + 1):
                return True
            placed.pop()
        return False

    return dict(offsets) if place(0) else None


def _by_offset(blocks: list[Block], peak: int, max_work: int) -> dict[str, int] | None:
    blocks = sorted(blocks, key=lambda b: b.name)
    plans = sorted({k for b in blocks for k in range(b.first, b.last + 1)})
    placed: list[_Placed] = []
    offsets: dict[str, int] = {}
    unplaced = dict.fromkeys(range(len(blocks)))   # ordered: deterministic
    budget = [max_work]

    def room(x: int) -> bool:
        """Every Plan has room above ``x`` for its blocks not yet placed."""
        for k in plans:
            need = sum(blocks[i].nbytes for i in unplaced if blocks[i].first <= k <= blocks[i].last)
            if need and need > peak - x - sum(max(0, o + n - max(o, x))
                                              for o, n, lo, hi in placed if lo <= k <= hi):
                return False
        return True

    def place(after: tuple[int, int]) -> bool:
        if not unplaced:
            return True
        budget[0] -= (len(plans) + len(unplaced)) * (len(unplaced) + len(placed))
        if budget[0] < 0 or not room(after[0]):
            return False
        spots = set()
        for i in unplaced:
            b = blocks[i]
            live = _live(placed, b)
            for x in {_up(y, b.align) for y in [0] + [o + n for o, n in live]}:
                if (x, i) > after and _free(x, b, live, peak):
                    spots.add((x, i))
        for x, i in sorted(spots):
            b = blocks[i]
            placed.append((x, b.nbytes, b.first, b.last))
            offsets[b.name] = x
            del unplaced[i]
            if place((x, i)):
                return True
            unplaced[i] = None
            placed.pop()
        return False

    return dict(offsets) if place((-1, -1)) else None
