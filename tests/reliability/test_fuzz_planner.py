"""Planner fuzzing (issue 8): random graphs, devices, options and budgets.

For every drawn case the planner either raises the documented ``PlannerError`` (only for a
budget below the smallest Proposal's memory) or returns a Proposal that

* fits the budget and is the fastest frontier point that does,
* covers every Part exactly once, its cycles the sum of its Plans',
* needs exactly the memory the stripe-by-stripe simulator measures (peak and per Plan).

The same checks run on the frontier's smallest-memory Proposal. Any other exception fails.

The examples are derandomized (the same ones every run, so ``make test`` is repeatable): 150
in the default suite, 600 in the slow one; ``PLANNER_FUZZ_RANDOM=1`` explores new ones and
``PLANNER_FUZZ_EXAMPLES`` sets how many the slow campaign draws, e.g.
``PLANNER_FUZZ_RANDOM=1 PLANNER_FUZZ_EXAMPLES=5000 pytest -m slow -k campaign
tests/reliability/test_fuzz_planner.py``.
"""
from __future__ import annotations

import collections
import dataclasses
import os

import pytest
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from planner.api import plan
from planner.errors import PlannerError
from planner.proposals import Proposal, ProposalSearch
from planner.simulate import simulate
from tests.helpers.planner_strategies import (
    BUDGETS,
    DEVICES,
    device,
    planner_graphs,
    planner_options,
)

EXAMPLES = int(os.environ.get("PLANNER_FUZZ_EXAMPLES", "600"))
#: the default suite's share: enough to draw every kind of graph, device and budget
DEFAULT_EXAMPLES = min(EXAMPLES, 150)
RANDOM = bool(os.environ.get("PLANNER_FUZZ_RANDOM"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not RANDOM, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                       HealthCheck.data_too_large])


def check_proposal(graph, dev, proposal: Proposal, budget: int | None) -> None:
    """The invariants of one returned Proposal (AssertionError naming the broken one)."""
    counts = collections.Counter(name for p in proposal.plans for name in p.parts)
    names = [p.name for p in graph.parts]
    missing = [n for n in names if counts[n] == 0]
    twice = [n for n, c in counts.items() if c > 1]
    unknown = [n for n in counts if n not in set(names)]
    assert not (missing or twice or unknown), \
        f"parts missing {missing}, in two plans {twice}, unknown {unknown}"
    if budget is not None:
        assert proposal.memory_bytes <= budget, (proposal.memory_bytes, budget)
    assert sum(p.cycles for p in proposal.plans) == proposal.cycles
    sim = simulate(graph, dev, proposal)
    assert list(sim.plan_bytes) == [p.memory_bytes for p in proposal.plans], \
        (sim.plan_bytes, [p.memory_bytes for p in proposal.plans])
    assert sim.peak_bytes == proposal.memory_bytes, (sim.peak_bytes, proposal.memory_bytes)


def _budget(spec, front) -> int | None:
    if spec is None:
        return None
    kind, x = spec
    mems = [m for m, _ in front]
    if kind == "point":
        return mems[min(int(x * len(mems)), len(mems) - 1)]
    if kind == "between":
        k = min(int(x * len(mems)), len(mems) - 1)
        hi = mems[k + 1] if k + 1 < len(mems) else mems[k] + 4096
        return (mems[k] + hi) // 2
    return {"below": mems[0] - 1, "zero": 0, "huge": 1 << 40}[kind]


# ------------------------------------------------------------------ the fuzz campaign
def _fractional_offset_chain():
    """Nearest x3 resize -> depthwise (1x4, stride 2) -> slice -> bilinear x2 resize in one
    cascade. The bilinear resize's fractional offset (-1/4) reaches the depthwise stripe as
    offset 7/4 (rows [1, 3)) and the resize stripe as 7/2 (rows [3, 6)): flooring at each
    level separately, the producer would not compute row 2, which the depthwise's row 1
    reads."""
    from planner import parts
    from planner.graph import GraphBuilder
    from planner.options import PlannerOptions
    from tests.helpers.simple_device import simple_device

    b = GraphBuilder("r")
    x = b.input("in0", (1, 4, 3, 4))
    x = b.add(parts.strided_slice("p0", x, (0, 0, 0, 0), (1, 2, 2, 1)))
    x = b.add(parts.resize("p1", x, (3, 2), "nearest"))
    x = b.add(parts.depthwise_conv2d("p2", x, (1, 4), (2, 1), (1, 1), (0, 0, 0, 0)))
    x = b.add(parts.strided_slice("p3", x, (0, 2, 0, 0), (1, 1, 1, 1)))
    b.add(parts.resize("p4", x, (2, 1), "bilinear"))
    opts = PlannerOptions(max_plan_size=8, stripe_factors=1, max_width_tiles=1,
                          multi_dimensional=False, rolling_granules=(0,),
                          weight_placements=("flash",), allow_recompute=False)
    return b.build(), simple_device(), opts


_FRACTIONAL = _fractional_offset_chain()


def _campaign(max_examples: int):
    """The fuzz campaign's cases: ``max_examples`` drawn ones and the fractional-offset chain."""
    def cases(test):
        return settings(FUZZ, max_examples=max_examples)(given(
            graph=planner_graphs(), dev_name=st.sampled_from(DEVICES),
            io=st.sampled_from(("sram", "dram")), options=planner_options(),
            budget_spec=BUDGETS, as_text=st.booleans())(example(
                graph=_FRACTIONAL[0], dev_name="simple", io="sram", options=_FRACTIONAL[2],
                budget_spec=None, as_text=False)(test)))
    return cases


@_campaign(DEFAULT_EXAMPLES)
def test_planner_fuzz(graph, dev_name, io, options, budget_spec, as_text):
    check_case(graph, dev_name, io, options, budget_spec, as_text)


@pytest.mark.slow
@_campaign(EXAMPLES)
def test_planner_fuzz_campaign(graph, dev_name, io, options, budget_spec, as_text):
    check_case(graph, dev_name, io, options, budget_spec, as_text)


def check_case(graph, dev_name, io, options, budget_spec, as_text) -> None:
    """Plan one drawn case and check what the planner returns (or raises) against the rules
    above."""
    dev = device(dev_name, io)
    event(f"parts: {len(graph.parts) // 3 * 3}-{len(graph.parts) // 3 * 3 + 2}")
    event(f"kinds: {len({p.kind for p in graph.parts})} distinct")
    search = ProposalSearch(graph, dev, options, workers=1)
    event(
        "frontier points: "
        f"{'1' if len(search.frontier) == 1 else '2-9' if len(search.frontier) < 10 else '10+'}"
    )
    front = search.frontier
    assert front, "empty frontier"
    assert all(a[0] < b[0] and a[1] > b[1] for a, b in zip(front, front[1:])), front
    check_proposal(graph, dev, search.proposal(0), None)
    assert search.proposal(0).memory_bytes == front[0][0]

    budget = _budget(budget_spec, front)
    arg = budget if budget is None or not as_text else str(budget)   # "123" parses as bytes
    try:
        result = plan(graph, dev, budget=arg, options=options)
    except PlannerError as e:
        assert budget is not None and budget < front[0][0], f"unexpected PlannerError: {e}"
        assert str(front[0][0]) in str(e) and "\n" not in str(e)
        event("budget infeasible")
        return
    assert budget is None or budget >= front[0][0]
    fits = [c for m, c in front if budget is None or m <= budget]
    assert result.chosen.cycles == min(fits)
    assert result.frontier == front
    check_proposal(graph, dev, result.chosen, budget)


# ------------------------------------------------------------------ the checker can fail
def test_check_proposal_catches_broken_proposals():
    from planner import parts
    from planner.graph import GraphBuilder
    from tests.helpers.simple_device import simple_device

    b = GraphBuilder("t")
    x = b.input("x", (1, 16, 16, 4))
    for k in range(4):
        x = b.add(parts.conv2d(f"c{k}", x, 4, 3, padding=1))
    g = b.build()
    dev = simple_device()
    search = ProposalSearch(g, dev, workers=1)
    good = search.proposal(0)
    check_proposal(g, dev, good, good.memory_bytes)
    assert len(good.plans) >= 2
    broken = [
        (Proposal(good.plans[1:], good.memory_bytes, good.cycles), "missing"),
        (Proposal(good.plans + good.plans[:1], good.memory_bytes, good.cycles), "two plans"),
        (dataclasses.replace(good, memory_bytes=good.memory_bytes - 1), None),
        (dataclasses.replace(good, cycles=good.cycles + 1), None),
    ]
    for prop, needle in broken:
        with pytest.raises(AssertionError, match=needle):
            check_proposal(g, dev, prop, None)
    with pytest.raises(AssertionError):
        check_proposal(g, dev, good, good.memory_bytes - 1)


def test_fractional_offsets_through_a_cascade_control():
    """The same graph planned Part by Part is consistent (the checker is not at fault)."""
    from dataclasses import replace
    g, dev, opts = _fractional_offset_chain()
    search = ProposalSearch(g, dev, replace(opts, max_plan_size=1), workers=1)
    for k in range(len(search.frontier)):
        check_proposal(g, dev, search.proposal(k), None)


def test_fractional_offsets_through_a_cascade():
    """A single stripe with a fractional offset starts at the floor of it, and its input
    windows are propagated from there (planner/stripes.py), so every Proposal of the chain
    computes the rows its consumers read."""
    g, dev, opts = _fractional_offset_chain()
    search = ProposalSearch(g, dev, opts, workers=1)
    for k in range(len(search.frontier)):
        check_proposal(g, dev, search.proposal(k), None)
