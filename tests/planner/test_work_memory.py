"""planner.work_memory: one form of a Part's working memory (fixed, per stripe element, per
stripe position), costed by the Plan that holds the Part, listed as its ``<part>:work``
buffer and counted by the simulator, which refuses a Plan that lists another figure."""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import parts
from planner.devices import get_device
from planner.graph import GraphBuilder, Part
from planner.proposals import ProposalSearch
from planner.simulate import SimulationError, simulate
from planner.work_memory import WORK_ATTR, WorkMemory, stripe_work_bytes, work_tensor

works = st.builds(WorkMemory, st.integers(0, 300), st.integers(0, 6), st.integers(1, 32),
                  st.integers(0, 40))


@given(work=works, shape=st.lists(st.integers(1, 5), min_size=1, max_size=4))
def test_a_stripe_holds_its_elements_and_positions_bytes(work, shape):
    """Counted one element and one position at a time, rounded up to the alignment."""
    n = work.fixed
    for index in np.ndindex(*shape):
        n += work.per_element
        if index[-1] == 0:      # the first element of a position (its depth whole)
            n += work.per_position
    assert work.for_stripe(shape) == -(-n // work.align) * work.align
    assert work.for_stripe(shape) % work.align == 0


def _worked(p: Part, work: WorkMemory) -> Part:
    return dataclasses.replace(p, attrs=p.attrs + ((WORK_ATTR, work),))


def _graph(h: int, w: int, c: int, first: WorkMemory, second: WorkMemory):
    b = GraphBuilder("worked")
    x = b.input("x", (1, h, w, c))
    y = b.add(parts.conv2d("c1", x, c, kernel=3, padding=1))
    y = b.add(_worked(parts.unary("u", y, "relu"), first))
    y = b.add(parts.conv2d("c2", y, c, kernel=3, padding=1))
    b.add(_worked(parts.unary("v", y, "relu"), second))
    return b.build()


@settings(max_examples=12, deadline=None)
@given(h=st.integers(2, 12), w=st.integers(2, 8), c=st.sampled_from([1, 3, 8, 16]),
       first=works, second=works)
def test_every_plan_lists_the_working_memory_of_its_parts_and_the_simulator_agrees(
        h, w, c, first, second):
    graph = _graph(h, w, c, first, second)
    device = get_device("ethos-u55-128")
    search = ProposalSearch(graph, device, workers=1)
    by_name = {p.name: p for p in graph.parts}
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        assert simulate(graph, device, prop).peak_bytes == prop.memory_bytes
        for plan in prop.plans:
            held = {tc.tensor: tc.buffer_bytes for tc in plan.tensor_configs}
            for ps in plan.part_schedules:
                want = stripe_work_bytes(by_name[ps.part], ps.stripe.shape)
                assert held.get(work_tensor(ps.part), 0) == want, (ps.part, held)


def test_a_plan_that_lists_other_working_memory_is_refused_naming_the_part():
    work = WorkMemory(fixed=40, per_element=2)
    graph = _graph(8, 6, 8, work, WorkMemory())
    device = get_device("ethos-u55-128")
    prop = ProposalSearch(graph, device, workers=1).proposal(0)
    (k, plan), = [(k, p) for k, p in enumerate(prop.plans) if "u" in p.parts]
    kept = tuple(tc for tc in plan.tensor_configs if tc.tensor != work_tensor("u"))
    assert len(kept) == len(plan.tensor_configs) - 1
    plans = list(prop.plans)
    plans[k] = dataclasses.replace(plan, tensor_configs=kept)
    stripe = next(ps.stripe.shape for ps in plan.part_schedules if ps.part == "u")
    want = 40 + 2 * math.prod(stripe)
    with pytest.raises(SimulationError, match=rf"lists 0 B of working memory for 'u', which "
                                              rf"needs {want} B"):
        simulate(graph, device, dataclasses.replace(prop, plans=tuple(plans)))
