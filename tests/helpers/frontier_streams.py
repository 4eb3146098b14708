"""Every frontier Proposal of a model's Ethos-U subgraphs streamed, as if the planner had
chosen it: what each Proposal plans against what its stream touches.

A model is compiled once for ``ethos-u`` (the stream generator's arguments caught on the
way); then the planner's frontier is searched again with the compile's defaults and every
Proposal on it is given to the same generator and run dry on the functional model. Used by
``tests/tvm_ethos/test_frontier_memory.py`` and ``benchmarks/frontier_memory.py``.
"""
from __future__ import annotations

from typing import Iterator, NamedTuple
from unittest import mock

import tvm_ethos
from planner.options import PlannerOptions
from planner.proposals import ProposalSearch
from tvm_ethos.backends.ethos_u import stream_cascade
from tvm_ethos.backends.ethos_u.stream_run import stream_report


class FrontierStream(NamedTuple):
    """One frontier Proposal's stream: ``planned`` the Proposal's peak (estimated),
    ``touched`` the SRAM its stream touches (emulated) plus the reserved weight bytes above
    it that it never touches (``untouched_top_bytes``), ``schedule`` the payload's ("plan",
    or "plan, X beyond its memory" where the arena grew past the plan)."""

    subgraph: int
    index: int
    frontier: int
    planned: int
    touched: int
    schedule: str

    @property
    def realizes_plan(self) -> bool:
        """The stream executes the Proposal within exactly the memory it plans."""
        return self.schedule == "plan" and self.touched == self.planned


def frontier_streams(data: bytes, accelerator: str) -> Iterator[FrontierStream]:
    """Every frontier Proposal of every planned subgraph of the ``.tflite`` ``data`` on
    ``accelerator``, streamed (frontier order, memory ascending)."""
    caught = []
    generate = stream_cascade.generate_planned

    def catch(lw, acc, match, proposal, device=None, joined=None):
        caught.append((lw, match, proposal, device, joined))
        return generate(lw, acc, match, proposal, device, joined)

    with mock.patch.object(stream_cascade, "generate_planned", catch):
        tvm_ethos.compile(data, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    assert caught, "no subgraph was planned"
    for s, (lw, match, chosen, device, joined) in enumerate(caught):
        search = ProposalSearch(match.graph, device, PlannerOptions())
        front = search.frontier
        # the search is the compile's: its choice lies on this frontier
        assert (chosen.memory_bytes, chosen.cycles) in front
        for k in range(len(front)):
            proposal = search.proposal(k)
            payload = generate(lw, accelerator, match, proposal, device, joined)
            entry = stream_report(payload, proposal.memory_bytes)
            yield FrontierStream(s, k, len(front), proposal.memory_bytes,
                                 entry["sram_high_water_bytes"] +
                                 (entry["untouched_top_bytes"] or 0), payload.schedule)
