"""When a backward walk group can stop: its every future Plan is beaten by a Proposal found.

The walk of a sink ``j`` (``PlanGenerator._walk``) yields each group's Pareto set at each
start, start descending, and the DP pairs each interval's frontier with the prefix frontier
before it (``proposals.ProposalSearch``). With one process the DP of every earlier sink is
done when ``j`` is walked, so the Proposals the walk has already made for the prefix ending
at ``j`` bound the ones it may still make. ``SinkBound`` keeps them as a staircase and says
when a group's descendants can never reach the DP's frontier at ``j`` (the argument, and why
the frontier and every choice stay the same: rfcs/0001, "Bounded walks").
"""
from __future__ import annotations

import math
from bisect import bisect_right
from typing import Sequence

import numpy as np

from planner.errors import PlannerError
from planner.pareto import INT64_SAFE, frontier_order
from planner.point_sets import PointSet

#: Groups of fewer points are not trimmed point by point: the arrays cost more than the
#: points would.
TRIM_MIN = 16


class SinkBound:
    """The bound of one sink's walk.

    ``prefix_memory[s]`` / ``prefix_cycles[s]``: the DP frontier of the prefix ending before
    ``s`` as int64 columns (memory ascending), for every ``s`` from ``lowest`` (the first
    start the walk may reach) to the sink; ``live[s]``: the boundary bytes the DP adds to a
    Plan starting at ``s``; ``floors[i]``: no extension over the Part at ``i`` costs fewer
    cycles (``PlanCosting.least_cycles``; the walk checks it, ``check``). ``found`` records
    what the walk yielded at a start; ``ends`` answers for a group's future."""

    def __init__(self, lowest: int, sink: int, prefix_memory: Sequence[np.ndarray],
                 prefix_cycles: Sequence[np.ndarray], live: Sequence[int],
                 floors: Sequence[int]) -> None:
        self._prefix_memory = prefix_memory
        self._prefix_cycles = prefix_cycles
        self._live = live
        self._lowest = lowest
        self._floors = floors
        # For a group at start s, its descendants start at s' in [lowest, s - 1]: the least
        # boundary bytes there, and the least of (fastest prefix at s' + the floors of the
        # Parts s' .. s - 1), as running minima from ``lowest``.
        self._least_live: dict[int, float] = {}
        self._least_cycles: dict[int, float] = {}
        live_min = cycles_min = math.inf
        for s in range(lowest, sink + 1):
            self._least_live[s + 1] = live_min = min(live_min, live[s])
            if len(prefix_cycles[s]):
                cycles_min = min(cycles_min, int(prefix_cycles[s][-1]))
            cycles_min += floors[s]
            self._least_cycles[s + 1] = cycles_min
        self._stair_memory: list[int] = []
        self._stair_cycles: list[int] = []
        self._arrays: tuple | None = None
        self._pending: list[tuple] = []
        self._on = True

    def found(self, start: int, memory: Sequence[int], cycles: Sequence[int]) -> None:
        """Record the interval frontier yielded at ``start`` (memory without the boundary
        bytes, ascending): each point paired with the fastest prefix that fits its memory is
        a candidate of the DP at this sink. Kept aside until the walk next asks (``ends``,
        ``trimmed``): the last start of a walk asks nothing."""
        self._pending.append((start, memory, cycles))

    def _merge(self) -> None:
        """Add the pending frontiers' candidates to the staircase. Values past int64's safe
        range switch the bound off for the rest of the walk (stopping nothing is always
        safe)."""
        pending, self._pending = self._pending, []
        for start, memory, cycles in pending:
            self._add(start, memory, cycles)

    def _add(self, start: int, memory: Sequence[int], cycles: Sequence[int]) -> None:
        if not self._on or not len(memory):
            return
        a_memory, a_cycles = self._prefix_memory[start], self._prefix_cycles[start]
        if not len(a_memory):
            return
        b_memory = np.array(memory)
        b_cycles = np.array(cycles)
        if b_memory.dtype != np.int64 or b_cycles.dtype != np.int64 or \
                int(b_memory.max()) >= INT64_SAFE // 2 or int(b_cycles.max()) >= INT64_SAFE // 2:
            self._on = False
            return
        b_memory += self._live[start]
        fits = np.searchsorted(a_memory, b_memory, "right") - 1
        ok = fits >= 0
        memory_all = np.concatenate((np.array(self._stair_memory, np.int64), b_memory[ok]))
        cycles_all = np.concatenate((np.array(self._stair_cycles, np.int64),
                                     a_cycles[fits[ok]] + b_cycles[ok]))
        keep = frontier_order(memory_all, cycles_all)
        self._stair_memory = memory_all[keep].tolist()
        self._stair_cycles = cycles_all[keep].tolist()
        self._arrays = None

    def ends(self, start: int, memory: int, cycles: int) -> bool:
        """Whether no Plan the group at ``start`` may still extend to can enter the DP's
        frontier: ``memory`` (with its weight staging) and ``cycles`` are the least of any of
        its points, and a found candidate is no larger than the least any descendant's
        Proposal can need and strictly faster than the fastest it can run."""
        if self._pending:
            self._merge()
        if not self._on or start <= self._lowest:
            return False
        least_memory = memory + self._least_live[start]
        k = bisect_right(self._stair_memory, least_memory) - 1
        return k >= 0 and self._stair_cycles[k] < cycles + self._least_cycles[start]

    def trimmed(self, start: int, stage: int, points: PointSet) -> PointSet:
        """``points`` (a group's Pareto set at ``start``, ``stage`` its weight staging bytes)
        without the points whose every descendant ``ends`` would stop: the same test, point
        by point, on arrays (the group's other points and their futures are untouched). An
        empty set: the whole group can stop."""
        if self._pending:
            self._merge()
        if not self._on or start <= self._lowest or len(points.memory) < TRIM_MIN or \
                not self._stair_memory:
            return points
        memory, cycles = np.array(points.memory), np.array(points.cycles)
        floor = self._least_cycles[start]
        if memory.dtype != np.int64 or cycles.dtype != np.int64 or \
                int(memory[-1]) + stage + self._least_live[start] >= INT64_SAFE // 4 or \
                int(cycles[0]) >= INT64_SAFE // 4 or \
                (floor != math.inf and floor >= INT64_SAFE // 4):
            return points
        stair_memory, stair_cycles = self._stair_array()
        fits = np.searchsorted(stair_memory, memory + (stage + self._least_live[start]),
                               "right") - 1
        beaten = fits >= 0
        if floor != math.inf:       # else no descendant has a prefix: every fit beats it
            beaten &= stair_cycles[np.maximum(fits, 0)] < cycles + floor
        if not beaten.any():
            return points
        keep = np.flatnonzero(~beaten).tolist()
        return PointSet([points.memory[k] for k in keep], [points.cycles[k] for k in keep],
                        [points.payloads[k] for k in keep])

    def _stair_array(self) -> tuple[np.ndarray, np.ndarray]:
        if self._arrays is None:
            self._arrays = (np.array(self._stair_memory, np.int64),
                            np.array(self._stair_cycles, np.int64))
        return self._arrays

    def check(self, i: int, options: Sequence[tuple]) -> None:
        """PlannerError unless an extension over the Part at ``i`` with these placement
        ``options`` ((memory, cycles, Parts copied)) adds no negative memory and no fewer
        cycles than its floor: what ``ends`` assumes of every extension."""
        for memory, cycles, _ in options:
            if memory < 0 or cycles < self._floors[i]:
                raise PlannerError(
                    f"internal: an extension over the Part at {i} adds {memory} bytes and "
                    f"{cycles} cycles, below what the bounded walk assumes (0 bytes, "
                    f"{self._floors[i]} cycles); ProposalSearch(prune=False) walks unbounded")
