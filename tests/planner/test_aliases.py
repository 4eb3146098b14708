"""A RESHAPE planned alone shares its input's bytes: the planner counts them once, and its
count agrees with the stripe-by-stripe simulator for every Proposal of the frontier."""
import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import parts
from planner.aliases import (
    IN_PLACE_INT16_OPS,
    IN_PLACE_OPS,
    alias_roots,
    aliased_outputs,
    in_place,
    may_alias,
)
from planner.graph import GraphBuilder
from planner.options import PlannerOptions
from planner.proposals import ProposalSearch
from planner.simulate import simulate
from tests.helpers.simple_device import simple_device


def _conv_flatten_fc(h: int, w: int, c: int, units: int, chain: bool):
    """in -> conv2d -> reshape to rows (twice when ``chain``) -> fully_connected."""
    b = GraphBuilder("flatten")
    x = b.add(parts.conv2d("conv", b.input("in", (1, h, w, 3)), c, 3, padding=1))
    if chain:
        x = b.add(parts.reshape("flat0", x, (1, h * w, c)))
    x = b.add(parts.reshape("flat", x, (1, h * w * c)))
    b.add(parts.fully_connected("fc", x, units))
    return b.build()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 12), st.integers(1, 12), st.integers(1, 16), st.integers(1, 8),
       st.booleans(), st.sampled_from(["sram", "dram"]))
def test_a_reshape_planned_alone_counts_its_bytes_once(h, w, c, units, chain, io):
    g = _conv_flatten_fc(h, w, c, units, chain)
    device = simple_device(io_region=io)
    search = ProposalSearch(g, device, PlannerOptions(stripe_factors=4))
    conv_bytes = g.tensor("conv:0").bytes
    reshapes = {"flat0", "flat"} if chain else {"flat"}
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        sim = simulate(g, device, prop)
        assert list(sim.plan_bytes) == [p.memory_bytes for p in prop.plans]
        assert sim.peak_bytes == prop.memory_bytes
        for i, plan in enumerate(prop.plans):
            if len(plan.parts) == 1 and plan.parts[0] in reshapes:
                # the conv's output and the reshape's are one buffer, the input is dead
                assert sim.live_bytes[i] == conv_bytes, (plan.parts, sim.live_bytes)


def test_micro_speech_flatten_is_planned_alone_at_the_conv_output_bytes():
    """micro_speech's shape (25x20x8 rows into a 4-unit FC): the reshapes cost no bytes, so
    the frontier plans them alone and no Plan holds the conv's 4,000 B twice."""
    for chain in (False, True):
        g = _conv_flatten_fc(25, 20, 8, 4, chain)
        device = simple_device()
        search = ProposalSearch(g, device, PlannerOptions(stripe_factors=4))
        for k in range(len(search.frontier)):
            prop = search.proposal(k)
            live = simulate(g, device, prop).live_bytes
            alone = [i for i, p in enumerate(prop.plans) if p.parts[0].startswith("flat")]
            assert alone and all(len(prop.plans[i].parts) == 1 for i in alone)
            assert [live[i] for i in alone] == [4000] * len(alone)
            assert max(live) < 2 * 4000


def test_a_reshape_that_writes_a_network_output_is_not_an_alias():
    b = GraphBuilder("out")
    x = b.add(parts.conv2d("conv", b.input("in", (1, 4, 4, 3)), 8, 1))
    y = b.add(parts.reshape("flat", x, (1, 128)))
    g = b.build(outputs=[y])
    assert not may_alias(g.parts[1], g)
    assert alias_roots(g) == {}
    assert aliased_outputs(g, [["conv"], ["flat"]]) == {}


def test_chained_reshapes_alias_the_first_real_tensor():
    g = _conv_flatten_fc(3, 4, 5, 2, chain=True)
    assert alias_roots(g) == {"flat0:0": "conv:0", "flat:0": "conv:0"}
    # only a reshape that is a Plan of its own aliases in the stream
    assert aliased_outputs(g, [["conv"], ["flat0"], ["flat", "fc"]]) == {"flat0:0": "conv:0"}
    assert aliased_outputs(g, [["conv", "flat0"], ["flat"], ["fc"]]) == {"flat:0": "flat0:0"}


# --------------------------------------------- an activation written over its input (in place)
def _activations(h: int, w: int, c: int, ops: list[str], lead_conv: bool, dtype: str = "int8"):
    """in -> (conv ->) one activation after another: the last one's output the network's."""
    b = GraphBuilder("act")
    x = b.input("in", (1, h, w, c), dtype)
    layers = [lambda t: parts.conv2d("conv", t, c, 3, padding=1)] if lead_conv else []
    layers += [lambda t, k=k, op=op: parts.unary(f"a{k}", t, op) for k, op in enumerate(ops)]
    for layer in layers:    # every output of the input's type, as the importer gives it
        part = layer(x)
        x = b.add(dataclasses.replace(part, output=dataclasses.replace(part.output, dtype=dtype)))
    return b.build(outputs=[x])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 12), st.integers(1, 12), st.integers(1, 16),
       st.lists(st.sampled_from(sorted(IN_PLACE_OPS)), min_size=1, max_size=3),
       st.booleans(), st.sampled_from(["sram", "dram"]), st.booleans())
def test_an_activation_in_place_counts_its_bytes_once_as_the_simulator_does(h, w, c, ops,
                                                                          lead_conv, io, wide):
    """Each activation may take its input's bytes (Vela lets an elementwise OFM take its
    IFM's live range) where the input and output are both the network's or both not: every
    Proposal's memory is what the stripe-by-stripe simulator measures, and the least memory
    holds the tensor once (a lone activation: the network input's bytes alone); ``wide``:
    int16 maps, through the operators whose int16 form is one operation."""
    dtype = "int16" if wide else "int8"
    if wide:
        ops = [sorted(IN_PLACE_INT16_OPS)[len(op) % len(IN_PLACE_INT16_OPS)] for op in ops]
    g = _activations(h, w, c, ops, lead_conv, dtype)
    device = simple_device(io_region=io)
    search = ProposalSearch(g, device, PlannerOptions(stripe_factors=4))
    fm = h * w * c * (2 if wide else 1)
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        sim = simulate(g, device, prop)
        assert list(sim.plan_bytes) == [p.memory_bytes for p in prop.plans]
        assert sim.peak_bytes == prop.memory_bytes
    acts = g.parts[1:] if lead_conv else g.parts
    assert [in_place(p, g) for p in acts] == [
        (k == 0 and not lead_conv) == (k == len(ops) - 1) for k in range(len(ops))]
    if len(ops) == 1 and not lead_conv and io == "sram":
        least = min(search.proposal(k).memory_bytes for k in range(len(search.frontier)))
        assert least == fm


def test_what_is_not_in_place():
    """A second reader of the input, an int16 activation whose int16 form is not one
    operation (HARD_SWISH; LEAKY_RELU: two branches and working memory), and an input of the
    network whose output is not the network's; an int8 LEAKY_RELU (one table), an int16
    EXP / LOG (one 16-bit table) and an int16 LOGISTIC / TANH (one pool carrying the output
    unit's own activation) are in place."""
    b = GraphBuilder("two_readers")
    x = b.input("in", (1, 4, 4, 8))
    y = b.add(parts.unary("sig", x, "sigmoid"))
    g = b.build(outputs=[b.add(parts.elementwise("add", x, y))])
    assert not in_place(g.parts[0], g)
    assert not in_place(_activations(4, 4, 8, ["hard_swish"], False, "int16").parts[0],
                        _activations(4, 4, 8, ["hard_swish"], False, "int16"))
    lr = _activations(4, 4, 8, ["leaky_relu"], False, "int16")
    assert not in_place(lr.parts[0], lr)
    for op, dtype in [("leaky_relu", "int8"), ("exp", "int16"), ("log", "int16"),
                      ("sigmoid", "int16"), ("tanh", "int16")]:
        g = _activations(4, 4, 8, [op], False, dtype)
        assert in_place(g.parts[0], g), (op, dtype)
    g = _activations(4, 4, 8, ["relu6", "relu6"], False)
    assert [in_place(p, g) for p in g.parts] == [False, False]
    assert in_place(_activations(4, 4, 8, ["relu6"], False).parts[0],
                    _activations(4, 4, 8, ["relu6"], False))
