"""Which Proposal a ``smallest`` budget (Vela's ``--optimise Size``) selects.

The least-memory Proposal alone can be a poor choice: the frontier is dense near its low
end, and its last few hundred bytes are often saved either by streaming a convolution's
weights through the staging double buffer once per stripe of a deep cascade instead of
copying them once, which multiplies the weights' DMA by the stripe count, or by a deeper
cascade whose operations alternate between layers, each rewriting most of its layer's
registers, which multiplies the command stream's bytes. So the rule looks at every
frontier Proposal within ``SMALLEST_SLACK`` of the least memory and takes the one that
costs the least flash traffic and flash: the bytes its weights move by DMA
(planner.dma_estimate) plus the bytes of its command stream (planner.stream_estimate), then
the least memory, then the fewest cycles. The slack bounds what the choice may cost in
SRAM; within it those bytes, not the cycles, decide, as DMA is what a memory-bound system
pays per inference and the stream is flash the user pays for beside the weights (rfcs/0001,
"The smallest budget").
"""
from __future__ import annotations

from fractions import Fraction
from typing import NamedTuple, Sequence

from planner.dma_estimate import dma_bytes
from planner.proposals import Proposal, ProposalSearch

#: How far above the least memory of the frontier a ``smallest`` choice may go, as a share
#: of that least memory.
SMALLEST_SLACK = Fraction(1, 8)


class SmallestCandidate(NamedTuple):
    """One frontier Proposal as the rule sees it: its memory, cycles, estimated weight DMA and
    estimated command-stream bytes."""
    memory_bytes: int
    cycles: int
    dma_bytes: int
    stream_bytes: int = 0

    @property
    def flash_bytes(self) -> int:
        """What the rule ranks by: weight bytes moved by DMA plus command-stream bytes."""
        return self.dma_bytes + self.stream_bytes


def memory_limit(least_memory: int) -> int:
    """The most memory a ``smallest`` choice may take, the frontier's least being
    ``least_memory`` (rounded down: exact integers, the same on every machine)."""
    return least_memory + int(least_memory * SMALLEST_SLACK)


def pick_smallest(candidates: Sequence[SmallestCandidate]) -> int:
    """Index in ``candidates`` (a frontier, memory ascending) of the ``smallest`` choice:
    within ``memory_limit`` of the first, the least DMA plus stream bytes, then memory, then
    cycles."""
    if not candidates:
        raise ValueError("pick_smallest needs at least one candidate")
    limit = memory_limit(candidates[0].memory_bytes)
    window = [k for k, c in enumerate(candidates) if c.memory_bytes <= limit]
    return min(window, key=lambda k: (candidates[k].flash_bytes, candidates[k].memory_bytes,
                                      candidates[k].cycles, k))


def smallest_proposal(search: ProposalSearch, budget: int | None = None) -> Proposal:
    """The Proposal ``pick_smallest`` takes from ``search``'s frontier, among those that fit
    ``budget`` where that is given (the memory pool the plan must fit)."""
    front = search.frontier
    limit = memory_limit(front[0][0])
    if budget is not None:
        limit = min(limit, budget)
    proposals = [search.proposal(k) for k, (memory, _) in enumerate(front) if memory <= limit]
    candidates = [SmallestCandidate(p.memory_bytes, p.cycles,
                                    dma_bytes(p.plans, search.graph, search.device),
                                    p.estimated_stream_bytes)
                  for p in proposals]
    return proposals[pick_smallest(candidates)]
