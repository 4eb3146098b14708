"""What every frontier Proposal of a graph holding one stateful Part (an LSTM, an SVDF) must
show, whatever the Part."""
from __future__ import annotations

from planner.proposals import ProposalSearch
from planner.simulate import simulate


def simulated_frontier(graph, device):
    """Every frontier Proposal of ``graph`` on ``device``, each checked first: its memory is
    what the stripe-by-stripe walk measures."""
    search = ProposalSearch(graph, device)
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        assert simulate(graph, device, prop).peak_bytes == prop.memory_bytes
        yield prop


def assert_planned_alone_with_its_state(graph, device, name: str, state_bytes: int,
                                        work_bytes: int) -> None:
    """Every frontier Proposal's memory is what the stripe-by-stripe walk measures; every
    Plan holds Part ``name``'s state (``state_bytes``); the Part is a Plan of its own, the
    only one holding its working buffers (``work_bytes``)."""
    for prop in simulated_frontier(graph, device):
        for plan in prop.plans:
            held = {tc.tensor: tc.buffer_bytes for tc in plan.tensor_configs}
            assert held[f"{name}:state"] == state_bytes
            if name in plan.parts:
                assert plan.parts == (name,)
                assert held[f"{name}:work"] == work_bytes
            else:
                assert f"{name}:work" not in held
