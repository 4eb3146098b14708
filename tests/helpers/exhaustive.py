"""The brute-force oracle of the Proposal DP: every segmentation of a small graph's
topological order (and every chain of cross-Plan prefetch flags), each interval's Plans from
PlanGenerator, the live tensors counted independently of planner/proposals.py."""
from __future__ import annotations

import itertools

from planner.options import PlannerOptions
from planner.pareto import frontier
from planner.plans import PlanGenerator

SMALL = PlannerOptions(stripe_factors=3, max_width_tiles=2, rolling_granules=(1, 0),
                       weight_placements=("flash", "sram"), rolling_mixed=True,
                       weight_prefetch=True)


def live_bytes(graph, device, segments):
    """Independent live-set count for a segmentation of the topological order."""
    topo = graph.topological_parts()
    where = {}
    for k, (i, j) in enumerate(segments):
        for p in topo[i:j + 1]:
            where[p.output.name] = k
    outs = {t.name for t in graph.outputs}
    ins = {t.name for t in graph.inputs}

    def fm(n: str) -> bool:
        home = device.io_region if n in outs or n in ins else device.fm_region
        return home == device.fm_region

    result = []
    for k, (i, j) in enumerate(segments):
        total = 0
        for t in graph.tensors:
            if t.is_constant or not fm(t.name):
                continue
            made = where.get(t.name, -1)
            if t.name in ins:
                made = -1
            readers = [where[q.output.name] for q in graph.consumers(t)]
            if made == k:
                if t.name == topo[j].output.name:
                    total += t.bytes          # the plan's own output
                continue                      # an intermediate: a plan buffer
            last = len(segments) if t.name in outs else max(readers, default=made)
            if made < k <= last:
                total += t.bytes
        result.append(total)
    return result


def exhaustive(graph, device, options):
    """Every segmentation and, along it, every chain of cross-Plan prefetch flags (none unless
    the device prefetches): a Plan that prefetches the next Part's weights is followed by a
    Plan whose Part uses them; the first Plan has nothing prefetched, the last prefetches
    nothing."""
    gen = PlanGenerator(graph, device, options)
    n = len(gen.topo)
    cands = {}
    for j in range(n):
        for start, mem, cyc, _ in gen.generate(j):
            cands.setdefault((start, j, False, False), []).append((mem, cyc))
        for pre, nxt, mem, cyc, _ in gen.prefetch_variants(j):
            cands.setdefault((j, j, pre, nxt), []).append((mem, cyc))
    culled = {k: [(m, c) for m, c, _ in frontier([(m, c, None) for m, c in v])]
              for k, v in cands.items()}
    points = []
    for cuts in itertools.product([0, 1], repeat=n - 1):
        bounds = [0] + [k + 1 for k, c in enumerate(cuts) if c] + [n]
        segs = [(bounds[k], bounds[k + 1] - 1) for k in range(len(bounds) - 1)]
        live = live_bytes(graph, device, segs)
        for bits in itertools.product([False, True], repeat=len(segs) - 1):
            flags = (False,) + bits + (False,)
            keys = [(s, e, flags[k], flags[k + 1]) for k, (s, e) in enumerate(segs)]
            if any(key not in cands for key in keys):
                continue
            # Within one interval (and flag pair) every candidate meets the same live tensors
            # and combination is monotone (max / sum), so a candidate dominated there is
            # dominated in every Proposal: culling per interval keeps this search exhaustive.
            for choice in itertools.product(*(culled[key] for key in keys)):
                mem = max(m + lv for (m, _), lv in zip(choice, live))
                points.append((mem, sum(c for _, c in choice), None))
    return [(m, c) for m, c, _ in frontier(points)]
