"""Which Proposal Vela's ``--optimise Size`` (the ``size`` budget) selects: the least memory
the network costs the system.

A Size user pays for the SRAM the plan takes and for the flash its command stream takes
beside the weights. The least-SRAM Proposals cascade deeply: most of their NPU operations
switch layer and rewrite that layer's registers, so they write several times the stream of
a plan that cascades less, for a few KiB of SRAM. So the rule takes, over the whole
frontier, the Proposal whose SRAM plus estimated command-stream bytes
(planner.stream_estimate) is least, then the fewest estimated weight DMA bytes
(planner.dma_estimate: of two Proposals that cost the same memory, the one that moves fewer
weight bytes per inference), then the least memory, then the fewest cycles.

The weights' own flash is the same for every Proposal of a model and left out. Since a
Proposal's sum is at least its memory, the frontier (memory ascending) is walked only up to
the best sum found so far: the choice equals the brute force over the whole frontier
(rfcs/0001, "The size budget").
"""
from __future__ import annotations

from typing import Callable, NamedTuple, Sequence

from planner.dma_estimate import dma_bytes
from planner.proposals import Proposal, ProposalSearch


class SizeObjective(NamedTuple):
    """What the ``size`` rule charges a Proposal: its memory and estimated stream bytes (the
    sum it minimises), its estimated weight DMA bytes and cycles (the tie-breaks)."""
    memory_bytes: int
    stream_bytes: int
    dma_bytes: int
    cycles: int = 0

    @property
    def total_bytes(self) -> int:
        """The sum the rule minimises: SRAM plus command-stream flash."""
        return self.memory_bytes + self.stream_bytes

    def rank(self) -> tuple[int, int, int, int]:
        """The rule's order: the sum, then weight DMA, then memory, then cycles."""
        return self.total_bytes, self.dma_bytes, self.memory_bytes, self.cycles

    def to_json(self) -> dict:
        return {"memory_bytes": self.memory_bytes, "stream_bytes": self.stream_bytes,
                "dma_bytes": self.dma_bytes, "total_bytes": self.total_bytes}

    @classmethod
    def from_json(cls, data: dict) -> SizeObjective:
        """The objective :meth:`to_json` wrote (its cycles are not kept)."""
        return cls(data["memory_bytes"], data["stream_bytes"], data["dma_bytes"])

    def line(self) -> str:
        """The report's line stating the objective and its value."""
        return (f"size objective (least of the frontier): SRAM {self.memory_bytes:,} B + "
                f"command stream {self.stream_bytes:,} B (estimated) = "
                f"{self.total_bytes:,} B; weight DMA {self.dma_bytes:,} B per inference "
                "(estimated, the tie-break)")


def size_objective(proposal: Proposal, search: ProposalSearch) -> SizeObjective:
    """What the ``size`` rule charges ``proposal``, a Proposal of ``search``."""
    return SizeObjective(proposal.memory_bytes, proposal.estimated_stream_bytes,
                         dma_bytes(proposal.plans, search.graph, search.device),
                         proposal.cycles)


def pick_size(candidates: Sequence[SizeObjective]) -> int:
    """Index in ``candidates`` (a frontier, memory ascending) of the ``size`` choice: the
    least memory plus stream bytes, then weight DMA, then memory, then cycles, then
    position."""
    if not candidates:
        raise ValueError("pick_size needs at least one candidate")
    return min(range(len(candidates)), key=lambda k: (candidates[k].rank(), k))


def walk_frontier(memories: Sequence[int], charge: Callable[[int], SizeObjective],
                  budget: int | None = None) -> tuple[int, SizeObjective]:
    """(index, objective) of the ``size`` choice on a frontier whose Proposal ``k`` takes
    ``memories[k]`` bytes (ascending) and is charged ``charge(k)``, among those within
    ``budget`` where that is given. Walks in memory order and stops where the memory alone
    exceeds the best sum so far: no later Proposal can rank before it, so only the few
    Proposals that can win are built and estimated."""
    candidates: list[SizeObjective] = []
    best = None
    for k, memory in enumerate(memories):
        if (budget is not None and memory > budget) or (best is not None and memory > best):
            break
        c = charge(k)
        candidates.append(c)
        best = c.total_bytes if best is None else min(best, c.total_bytes)
    if not candidates:
        raise ValueError("no frontier Proposal fits the budget")
    k = pick_size(candidates)
    return k, candidates[k]


def size_choice(search: ProposalSearch, budget: int | None = None
                ) -> tuple[Proposal, SizeObjective]:
    """The Proposal ``pick_size`` takes from ``search``'s frontier, among those that fit
    ``budget`` where that is given (the memory pool the plan must fit), with its objective."""
    k, objective = walk_frontier([m for m, _ in search.frontier],
                                 lambda j: size_objective(search.proposal(j), search), budget)
    return search.proposal(k), objective
