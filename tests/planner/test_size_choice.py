"""The ``size`` budget's choice (Vela's ``--optimise Size``, planner.size_choice): the least
SRAM plus estimated command-stream bytes (then the least estimated weight DMA), against a
brute force over synthetic Pareto frontiers and over a real model's whole frontier."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.api import plan, select
from planner.budgets import SIZE_SOURCE, SMALLEST_SOURCE, budget_line, resolve_budget
from planner.devices import get_device
from planner.errors import PlannerError
from planner.proposals import ProposalSearch
from planner.size_choice import SizeObjective, pick_size, size_objective, walk_frontier
from tests.helpers.models import model_path


@st.composite
def frontiers(draw):
    """A Pareto frontier: memory strictly ascending, cycles strictly descending, any stream
    and DMA bytes (small ranges too, so that sums tie)."""
    n = draw(st.integers(1, 30))
    top = draw(st.sampled_from([64, 1 << 20]))
    memory = sorted(draw(st.sets(st.integers(1, top), min_size=n, max_size=n)))
    cycles = sorted(draw(st.sets(st.integers(1, 1 << 30), min_size=n, max_size=n)),
                    reverse=True)
    stream = draw(st.lists(st.integers(0, top), min_size=n, max_size=n))
    dma = draw(st.lists(st.integers(0, top), min_size=n, max_size=n))
    return [SizeObjective(m, s, d, c) for m, s, d, c in zip(memory, stream, dma, cycles)]


def key(c):
    return c.memory_bytes + c.stream_bytes, c.dma_bytes, c.memory_bytes, c.cycles


def brute_force(front, budget=None):
    """The least (SRAM + stream, DMA, memory, cycles) of every candidate within the
    budget."""
    return min(key(c) for c in front if budget is None or c.memory_bytes <= budget)


@given(frontiers())
def test_the_choice_minimises_sram_plus_stream_then_dma(front):
    """Brute force: no candidate has a smaller SRAM plus stream, nor the same with less
    weight DMA, nor those with less memory, nor all three with fewer cycles."""
    chosen = front[pick_size(front)]
    assert key(chosen) == brute_force(front)
    assert chosen.total_bytes == chosen.memory_bytes + chosen.stream_bytes


@given(frontiers(), st.data())
def test_the_walk_that_stops_early_chooses_what_the_brute_force_chooses(front, data):
    """``walk_frontier`` charges only the Proposals whose memory is at most the best sum so
    far, and within a budget; its choice is still the brute force's over every candidate
    that fits, and it never charges one past the budget."""
    budget = data.draw(st.none() | st.integers(front[0].memory_bytes,
                                                front[-1].memory_bytes))
    charged = []

    def charge(k):
        charged.append(k)
        return front[k]

    k, objective = walk_frontier([c.memory_bytes for c in front], charge, budget)
    assert objective == front[k]
    assert key(objective) == brute_force(front, budget)
    assert charged == sorted(charged) and charged[0] == 0
    assert all(budget is None or front[j].memory_bytes <= budget for j in charged)


@given(frontiers())
def test_with_no_stream_the_least_memory_is_chosen(front):
    """Where the stream costs nothing and the DMA is the same everywhere, the objective is the
    SRAM alone: the least memory, Vela's own Size choice."""
    free = [c._replace(stream_bytes=0, dma_bytes=front[0].dma_bytes) for c in front]
    assert pick_size(free) == 0


@given(frontiers())
def test_of_equal_sram_plus_stream_the_least_dma_is_chosen(front):
    """Where every candidate costs the same SRAM plus stream, the weight DMA decides."""
    top = front[-1].memory_bytes
    same = [c._replace(stream_bytes=top - c.memory_bytes) for c in front]
    chosen = same[pick_size(same)]
    assert chosen.dma_bytes == min(c.dma_bytes for c in same)


def test_nothing_to_choose_from_is_an_error():
    with pytest.raises(ValueError, match="at least one candidate"):
        pick_size([])
    with pytest.raises(ValueError, match="fits the budget"):
        walk_frontier([100, 200], lambda k: SizeObjective(100 * (k + 1), 0, 0), budget=50)


def test_the_objective_round_trips_and_states_each_term():
    o = SizeObjective(32_768, 6_734, 45_312, 252_164)
    assert SizeObjective.from_json(o.to_json()) == o._replace(cycles=0)
    assert o.to_json()["total_bytes"] == 39_502
    line = o.line()
    for words in ("SRAM 32,768 B", "command stream 6,734 B (estimated) = 39,502 B",
                  "weight DMA 45,312 B", "tie-break"):
        assert words in line


def test_the_size_budget_is_its_own_word():
    device = get_device("ethos-u55-128")
    assert resolve_budget("size", device) == (None, SIZE_SOURCE)
    assert resolve_budget(" Size ", device) == (None, SIZE_SOURCE)
    assert resolve_budget("smallest", device) == (None, SMALLEST_SOURCE)
    assert budget_line(None, SIZE_SOURCE) == f"budget: {SIZE_SOURCE}"
    with pytest.raises(PlannerError, match="'size'"):
        resolve_budget("sizes", device)


def test_resnet8_size_choice_is_the_least_of_its_whole_frontier():
    """ResNet-8 on ethos-u55-128: the ``size`` budget's Proposal ranks first of every
    frontier Proposal (all rebuilt and estimated), and has a smaller estimated stream than
    the ``smallest`` budget's, which cascades deeper, for more SRAM."""
    result = plan(str(model_path("resnet8_cifar")), "ethos-u55-128", budget="size")
    assert result.budget_source == SIZE_SOURCE
    search = ProposalSearch(result.graph, result.device, result.options)
    every = [size_objective(search.proposal(k), search) for k in range(len(search.frontier))]
    chosen = size_objective(result.chosen, search)
    assert chosen.rank() == min(c.rank() for c in every)
    smallest = plan(str(model_path("resnet8_cifar")), "ethos-u55-128", budget="smallest")
    assert result.chosen.estimated_stream_bytes < smallest.chosen.estimated_stream_bytes
    assert chosen.total_bytes < size_objective(smallest.chosen, search).total_bytes
    assert result.chosen.memory_bytes > smallest.chosen.memory_bytes


def test_a_size_plan_must_fit_the_memory_it_is_given():
    """Within a pool smaller than the least memory: the same error as ``smallest``."""
    graph = plan(str(model_path("resnet8_cifar")), "ethos-u55-128", budget="size").graph
    search = ProposalSearch(graph, get_device("ethos-u55-128"))
    least = search.frontier[0][0]
    with pytest.raises(PlannerError, match=f"the smallest plan needs {least} bytes"):
        select(search, least - 1, SIZE_SOURCE)
    assert select(search, least, SIZE_SOURCE).memory_bytes == least
