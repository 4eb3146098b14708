"""The backward walks' Pareto sets (``PlanGenerator._walk``) held as columns.

A walk group keeps one Pareto set of (memory, cycles) points, each with its payload (the
candidate's spec and the Parts whose weights it copies). Extending a group over one more Part
shifts every point by the same amounts under each weight placement; many extensions have one
placement worth keeping, and then memory and cycles shift as whole columns while the payloads
stay as they are (shared, not rebuilt per point); a placement that copies nothing keeps a
point's payload as it is. Culling keeps ``pareto.frontier``'s rule
exactly: a stable sort by (memory, cycles), each point kept when it is faster than every point
before it, so of identical points the first listed is kept.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

from planner.pareto import frontier


class PointSet(NamedTuple):
    """A Pareto set as parallel columns, memory ascending (cycles then strictly descending).
    ``payloads[k]`` is (spec, Parts copied) of point k. Never mutated once built: extensions
    share columns they do not change."""
    memory: list
    cycles: list
    payloads: list


def culled(points: Sequence[tuple]) -> PointSet:
    """The Pareto set of (memory, cycles, spec, Parts copied) points, as columns."""
    front = frontier(points)
    return PointSet([p[0] for p in front], [p[1] for p in front],
                    [(p[2], p[3]) for p in front])


def merged(sets: Sequence[PointSet]) -> PointSet:
    """The Pareto set of the points of ``sets`` listed one set after another."""
    if len(sets) == 1:
        return sets[0]
    return _culled_columns([m for s in sets for m in s.memory], [c for s in sets for c in s.cycles],
                           [p for s in sets for p in s.payloads])


def _culled_columns(memory: list, cycles: list, payloads: list) -> PointSet:
    """The Pareto set of the points (memory[k], cycles[k], payloads[k]) by ``frontier``'s
    rule: sorted by (memory, cycles, k), so equal points keep their listed order, each kept
    when it is faster than every point before it."""
    out_m, out_c, out_p = [], [], []
    best = math.inf
    for m, c, k in sorted(zip(memory, cycles, range(len(memory)))):
        if c < best:
            out_m.append(m)
            out_c.append(c)
            out_p.append(payloads[k])
            best = c
    return PointSet(out_m, out_c, out_p)


def extended(points: PointSet, options: list) -> PointSet:
    """The Pareto set of ``points`` after adding one Part under each of its placement
    ``options`` ((memory, cycles, Parts copied), one or two): equal to culling every
    point x option pair, listed point by point, but building the survivors only."""
    if len(options) == 2:
        # One option no worse in memory and cycles than the other: the points are strictly
        # ascending in memory and descending in cycles, so each point under the worse option
        # comes after, and no faster than, the same point under the better one, and the
        # merge below would keep exactly the better option's shift (the first option on a
        # tie, as its listing comes first).
        (dm1, dc1, _), (dm2, dc2, _) = options
        if dm1 <= dm2 and dc1 <= dc2:
            options = options[:1]
        elif dm2 <= dm1 and dc2 <= dc1:
            options = options[1:]
    if len(options) == 1:           # a shift keeps a Pareto set one
        dm, dc, extra = options[0]
        payloads = points.payloads if not extra else \
            [(spec, copied + extra) for spec, copied in points.payloads]
        return PointSet([m + dm for m in points.memory] if dm else points.memory,
                        [c + dc for c in points.cycles] if dc else points.cycles, payloads)
    if len(options) != 2:
        return culled([(m + dm, c + dc, spec, copied + extra)
                       for m, c, (spec, copied) in zip(*points)
                       for dm, dc, extra in options])
    # Both shifted copies are sorted by (memory, cycles, position in the listing): merge them
    # in that order and keep each point faster than all before it, as frontier would; once
    # one copy runs out, the rest of the other follows.
    (dm1, dc1, e1), (dm2, dc2, e2) = options
    memory, cycles, pays = points
    n = len(memory)
    if n == 0:
        return points
    out_m, out_c, out_p = [], [], []
    best = math.inf
    a = b = 0
    am, ac, bm, bc = memory[0] + dm1, cycles[0] + dc1, memory[0] + dm2, cycles[0] + dc2
    while True:
        if am < bm or (am == bm and (ac < bc or (ac == bc and a <= b))):
            if ac < best:
                out_m.append(am)
                out_c.append(ac)
                out_p.append((pays[a][0], pays[a][1] + e1) if e1 else pays[a])
                best = ac
            a += 1
            if a == n:
                break
            am, ac = memory[a] + dm1, cycles[a] + dc1
        else:
            if bc < best:
                out_m.append(bm)
                out_c.append(bc)
                out_p.append((pays[b][0], pays[b][1] + e2) if e2 else pays[b])
                best = bc
            b += 1
            if b == n:
                break
            bm, bc = memory[b] + dm2, cycles[b] + dc2
    for first, dm, dc, extra in ((a, dm1, dc1, e1), (b, dm2, dc2, e2)):
        for k in range(first, n):
            c = cycles[k] + dc
            if c < best:
                out_m.append(memory[k] + dm)
                out_c.append(c)
                out_p.append((pays[k][0], pays[k][1] + extra) if extra else pays[k])
                best = c
    return PointSet(out_m, out_c, out_p)


def staged_frontier(sets: Sequence[tuple[int, PointSet]]) -> PointSet:
    """The Pareto set of every point of ``sets`` ((staging bytes added to each of its points'
    memory, PointSet), listed set by set), by ``frontier``'s rule. Sorted as Python lists:
    the sets are short runs already in memory order, which the list sort merges faster than
    arrays are built from them and culled."""
    memory: list = []
    cycles: list = []
    payloads: list = []
    for stage, s in sets:
        memory += [m + stage for m in s.memory] if stage else s.memory
        cycles += s.cycles
        payloads += s.payloads
    return _culled_columns(memory, cycles, payloads)
