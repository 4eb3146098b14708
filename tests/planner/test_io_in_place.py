"""Network inputs and outputs read and written in place (``Device.io_read_in_place``): how the
compile path plans an Ethos-U65, whose TFLite Micro arena (and so every input and output) is
in DRAM (Vela 5.2's Dedicated_Sram mode)."""
import dataclasses

from hypothesis import HealthCheck, given, settings

from planner import parts
from planner.devices import get_device
from planner.graph import GraphBuilder
from planner.options import PlannerOptions
from planner.proposals import ProposalSearch
from planner.simulate import simulate
from tests.helpers.planner_strategies import planner_graphs

OPTIONS = PlannerOptions(stripe_factors=4)


def in_place(name: str = "ethos-u65-256"):
    return dataclasses.replace(get_device(name, io_region="dram"), io_read_in_place=True)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(planner_graphs(max_parts=6, max_hw=16, max_c=8))
def test_in_place_io_is_never_staged_and_plans_simulate_as_planned(g):
    """Every Proposal keeps the inputs and outputs in DRAM (no staging buffer in SRAM), its
    memory is what the stripe-by-stripe simulator measures, and the least memory is at most
    the least with the inputs and outputs in SRAM, less those tensors' bytes can only help."""
    device = in_place()
    io = {t.name for t in g.inputs} | {t.name for t in g.outputs}
    search = ProposalSearch(g, device, OPTIONS)
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        for plan in prop.plans:
            for tc in plan.tensor_configs:
                if tc.tensor in io:
                    assert tc.home_region == tc.copy_region == "dram", tc
        sim = simulate(g, device, prop)
        assert sim.peak_bytes == prop.memory_bytes
        assert list(sim.plan_bytes) == [p.memory_bytes for p in prop.plans]
    in_sram = ProposalSearch(g, get_device("ethos-u65-256"), OPTIONS)
    assert search.frontier[0][0] <= in_sram.frontier[0][0]


def _one_conv():
    b = GraphBuilder("one")
    x = b.input("x", (1, 16, 16, 8))
    b.add(parts.conv2d("c", x, 8, kernel=3, padding=1))
    return b.build()


def test_a_lone_layer_reading_and_writing_dram_needs_no_sram():
    """One convolution between the network's input and output: nothing of it stays in SRAM
    (the staged form needs rings for both), and its cycles are bound by the DRAM port."""
    g = _one_conv()
    dev = in_place()
    smallest = ProposalSearch(g, dev, OPTIONS).frontier[0]
    staged = ProposalSearch(g, get_device("ethos-u65-256", io_region="dram"), OPTIONS)
    assert smallest[0] == 0
    assert staged.frontier[0][0] > 0
    # the same layer with its input and output in SRAM runs no slower: SRAM's port is faster
    fast = ProposalSearch(g, get_device("ethos-u65-256"), OPTIONS)
    assert fast.frontier[-1][1] <= ProposalSearch(g, dev, OPTIONS).frontier[-1][1]


def test_reading_in_place_changes_nothing_where_io_lives_in_the_feature_map_region():
    g = _one_conv()
    plain = ProposalSearch(g, get_device("ethos-u55-128"), OPTIONS).frontier
    flagged = dataclasses.replace(get_device("ethos-u55-128"), io_read_in_place=True)
    assert ProposalSearch(g, flagged, OPTIONS).frontier == plain
