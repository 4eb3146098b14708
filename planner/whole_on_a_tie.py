"""A graph of one weightless Part runs it whole where its stripes would save no memory.

A Plan of one Part holds its inputs and output whole however it stripes them (between
Plans every feature map is whole), and a Part without constant inputs moves no weights by
DMA either way. Striping such a Part then buys no SRAM and no DMA and costs one NPU
operation (and its register writes) per stripe; what the cost model credits it with is the
fill and drain of the whole operation's larger blocks, which it pays once over back-to-back
stripes (``planner.perf.ethos_u``). Vela runs a lone elementwise operation, a LUT
activation or a copy, as one operation. So, where the graph is that one Part (a
one-operator model), a striped candidate that takes at least the memory of the whole
output's least candidate is dropped: on that tie of SRAM and DMA the Plan goes to the
fewest operations (a shorter stream, less to compile), whatever the budget. A striped
candidate that takes less memory (a Part whose working memory follows its stripe) stays.

In a larger graph the rule is not applied: there the fastest budget's search answers a
slower Plan of one Part by choosing other Plans (a cascade holding a buffer), which can
cost more memory and still more cycles than the striped Plan did.
"""
from __future__ import annotations

from typing import Sequence

from planner.graph import Part
from planner.point_sets import PointSet
from planner.stripes import StripeConfig


def whole_on_a_tie(sink: Part, groups: Sequence[tuple[StripeConfig, int, PointSet]]
                   ) -> list[tuple[int, PointSet]]:
    """The (staging bytes, points) of each of ``groups`` ((sink's compute stripe, staging
    bytes, Pareto set) of the candidates of the Plan of ``sink`` alone) with the striped
    candidates of a weightless ``sink`` that take no less memory than the least of its
    whole-output candidates left out; every group as it is otherwise."""
    sets = [(stage, points) for _, stage, points in groups]
    if sink.constant_inputs:
        return sets
    whole = [stage + m for stripe, stage, points in groups if stripe.total_stripes == 1
             for m in points.memory]
    if not whole:
        return sets
    least = min(whole)
    out = []
    for stripe, stage, points in groups:
        if stripe.total_stripes == 1:
            out.append((stage, points))
            continue
        keep = [k for k, m in enumerate(points.memory) if stage + m < least]
        if len(keep) == len(points.memory):
            out.append((stage, points))
        elif keep:
            out.append((stage, PointSet([points.memory[k] for k in keep],
                                        [points.cycles[k] for k in keep],
                                        [points.payloads[k] for k in keep])))
    return out
