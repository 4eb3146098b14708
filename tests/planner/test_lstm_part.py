"""UNIDIRECTIONAL_SEQUENCE_LSTM as a planner Part (``planner.parts.lstm``): every output box
reads the whole sequence, the Ethos-U keeps it in a Plan of its own, its working memory
counts in its Plan and its states in every Plan (the stripe-by-stripe simulator agrees), and
a model with one plans in one planner run with its neighbours."""
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lstm_models import LstmCase, lstm_model, lstm_then_fully_connected

from ethos_arch.ops import Op
from planner import io as planner_io
from planner import parts
from planner.devices import get_device
from planner.errors import PlannerError
from planner.graph import GraphBuilder, Tensor
from planner.proposals import ProposalSearch
from planner.simulate import simulate
from planner.stripes import StripeConfig
from planner.tflite import load_tflite
from planner.work_memory import WORK_ATTR, WorkMemory
from tests.helpers.models import model_path
from tests.helpers.stateful_plans import assert_planned_alone_with_its_state, simulated_frontier

_SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
_SIZES = st.tuples(st.integers(1, 3), st.integers(1, 6), st.integers(1, 40), st.integers(1, 24),
                   st.booleans())


def _up(n: int) -> int:
    return -(-n // 16) * 16


@_SETTINGS
@given(sizes=_SIZES, data=st.data())
def test_every_output_box_reads_the_whole_sequence(sizes, data):
    b, t, f, n, time_major = sizes
    x = Tensor("x", (t, b, f) if time_major else (b, t, f))
    part = parts.lstm("lstm", x, n, time_major=time_major)
    assert part.output.shape == (x.shape[0], x.shape[1], n)
    box = tuple(data.draw(st.integers(1, s)) for s in part.output.shape)
    stripes = StripeConfig.tiled(part.output.shape, box, (0, 1, 2))
    for inp, prop in zip(part.inputs, part.propagators):
        read = stripes.propagate(prop, inp.shape)
        assert read.max_spans() == inp.shape, (inp.name, box)
    assert part.attr("batches") == b and part.attr("steps") == t


def test_the_working_memory_is_the_streams_layout():
    """Two batches of 20 cells: hidden state 40 B (48 aligned) then the cell state's 80 B;
    five int16 rows of 20 cells (40 B, 48 aligned) of gates and scratch, up to the last
    row's last byte."""
    part = parts.lstm("lstm", Tensor("x", (2, 7, 9)), 20)
    assert part.attr("state_bytes") == 48 + 80
    assert part.attr(WORK_ATTR) == WorkMemory(fixed=4 * 48 + 40)


@_SETTINGS
@given(sizes=_SIZES, units=st.integers(1, 40))
def test_an_lstm_is_a_plan_of_its_own_and_the_simulator_agrees(sizes, units):
    """An LSTM, a RESHAPE to rows and a FULLY_CONNECTED on an Ethos-U: no Plan cascades the
    LSTM; each Plan holds the LSTM's states, the LSTM's Plan its gate buffers too; every
    frontier Proposal's memory is what the stripe-by-stripe walk measures."""
    b, t, f, n, time_major = sizes
    g = GraphBuilder("lstm_fc")
    x = g.input("x", (t, b, f) if time_major else (b, t, f))
    lstm = parts.lstm("lstm", x, n, time_major=time_major)
    y = g.add(lstm)
    rows = g.add(parts.reshape("rows", y, (b * t, n)))
    g.add(parts.fully_connected("fc", rows, units))
    graph = g.build()
    device = get_device("ethos-u55-128")
    assert_planned_alone_with_its_state(graph, device, "lstm", lstm.attr("state_bytes"),
                                        lstm.attr(WORK_ATTR).fixed)


@_SETTINGS
@given(sizes=_SIZES, units=st.integers(1, 40))
def test_the_states_live_with_the_network_s_inputs_where_the_sram_is_apart(sizes, units):
    """An Ethos-U65 with the network's inputs and outputs in DRAM (TFLite Micro's arena; its
    SRAM, the fast scratch, is a cache that keeps nothing between invocations): every Plan
    holds the LSTM's states there, not in the SRAM its memory counts, the gate buffers in
    the SRAM; the stripe-by-stripe walk agrees."""
    b, t, f, n, time_major = sizes
    g = GraphBuilder("lstm_fc")
    x = g.input("x", (t, b, f) if time_major else (b, t, f))
    lstm = parts.lstm("lstm", x, n, time_major=time_major)
    rows = g.add(parts.reshape("rows", g.add(lstm), (b * t, n)))
    g.add(parts.fully_connected("fc", rows, units))
    graph = g.build()
    device = get_device("ethos-u65-256", io_region="dram")
    for prop in simulated_frontier(graph, device):
        for plan in prop.plans:
            homes = {tc.tensor: tc.home_region for tc in plan.tensor_configs}
            assert homes["lstm:state"] == "dram"
            if "lstm" in plan.parts:
                assert homes["lstm:work"] == "sram"


def test_a_graph_without_an_lstm_holds_no_more():
    g = GraphBuilder("fc")
    x = g.input("x", (4, 16))
    g.add(parts.fully_connected("fc", x, 8))
    graph = g.build()
    prop = ProposalSearch(graph, get_device("ethos-u55-128")).proposal(0)
    assert not any(tc.tensor.endswith((":work", ":state"))
                   for plan in prop.plans for tc in plan.tensor_configs)
    assert prop.memory_bytes == simulate(graph, get_device("ethos-u55-128"), prop).peak_bytes


@pytest.mark.parametrize("device", ["ethos-u55-128", "ethos-u65-256"])
def test_the_trained_lstm_plans_with_its_neighbours_in_one_run(device):
    """trained_lstm_int8 (LSTM, RESHAPE, FULLY_CONNECTED, SOFTMAX) in one planner run: the
    LSTM a Plan of its own, the rest one cascade; the least memory (network input and
    output in the SRAM) is the LSTM's Plan: its sequences (28x28 in, 28x20 out), its gate
    buffers and its states, the bytes its stream's arena reaches."""
    graph = load_tflite(model_path("tflite-micro/trained_lstm_int8"))
    kinds = [p.kind for p in graph.topological_parts()]
    assert kinds == [Op.LSTM, Op.RESHAPE, Op.FULLY_CONNECTED, Op.SOFTMAX]
    dev = get_device(device)
    search = ProposalSearch(graph, dev)
    least = search.proposal(0)
    assert [len(plan.parts) for plan in least.plans] == [1, 3]
    assert least.memory_bytes == simulate(graph, dev, least).peak_bytes
    assert least.memory_bytes == 28 * 28 + 28 * 20 + 4 * _up(2 * 20) + 2 * 20 + _up(20) + \
        2 * 20


def test_a_time_major_lstm_reads_its_steps_and_batches():
    graph = load_tflite(lstm_model(LstmCase(batches=2, steps=5, features=3, cells=4,
                                            time_major=True)))
    (part,) = graph.parts
    assert part.kind == Op.LSTM and part.attr("time_major")
    assert (part.attr("steps"), part.attr("batches")) == (5, 2)
    assert part.output.shape == (5, 2, 4)


def test_the_lstm_and_its_consumer_read_from_the_file():
    graph = load_tflite(lstm_then_fully_connected(LstmCase(steps=4, cells=6), 8))
    assert [p.kind for p in graph.topological_parts()] == [Op.LSTM, Op.RESHAPE,
                                                          Op.FULLY_CONNECTED]


@pytest.mark.parametrize("variant, words", [
    (dict(projection=True), "a projection layer"),
    (dict(cifg=True), "input gate's weights"),
])
def test_lstms_the_planner_does_not_plan_are_named(variant, words):
    data = lstm_model(dataclasses.replace(LstmCase(), **variant))
    with pytest.raises(PlannerError, match=words) as err:
        load_tflite(data)
    assert "UNIDIRECTIONAL_SEQUENCE_LSTM" in str(err.value) and "\n" not in str(err.value)


def test_a_part_that_is_no_sequence_is_refused():
    with pytest.raises(PlannerError, match=r"\(batch, time, features\) sequence"):
        parts.lstm("lstm", Tensor("x", (1, 28)), 20)


def test_a_graph_with_an_lstm_round_trips_through_json():
    graph = load_tflite(lstm_then_fully_connected(LstmCase(batches=2, steps=3, cells=5,
                                                           time_major=True), 4))
    again = planner_io.loads(planner_io.dumps(graph))
    assert again.parts == graph.parts and again.parts[0].kind == Op.LSTM
