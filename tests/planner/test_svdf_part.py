"""SVDF as a planner Part (``planner.parts.svdf``): every output box reads the whole input,
the Ethos-U keeps it in a Plan of its own, its working memory counts in its Plan and its
state in every Plan (the stripe-by-stripe simulator agrees), and ``planner.tflite`` reads the
SVDFs the Ethos-U stream takes, naming the others. (The Part against the stream itself:
``tests/tvm_ethos/test_svdf_plan.py``.)"""
import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from svdf_models import SvdfCase, svdf_model, svdf_stack

from ethos_arch.ops import Op
from planner import io as planner_io
from planner import parts
from planner.devices import get_device
from planner.errors import PlannerError
from planner.graph import GraphBuilder, Tensor
from planner.proposals import ProposalSearch
from planner.stripes import StripeConfig
from planner.tflite import load_tflite
from planner.work_memory import WORK_ATTR, WorkMemory
from tests.helpers.models import model_path
from tests.helpers.stateful_plans import assert_planned_alone_with_its_state

_SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
#: batches, input size, units, rank, memory
_SIZES = st.tuples(st.integers(1, 3), st.integers(1, 40), st.integers(1, 12), st.integers(1, 3),
                   st.integers(1, 40))


@_SETTINGS
@given(sizes=_SIZES, data=st.data())
def test_every_output_box_reads_the_whole_input(sizes, data):
    b, n, u, r, m = sizes
    part = parts.svdf("svdf", Tensor("x", (b, n)), u, r, m)
    assert part.output.shape == (b, u)
    box = tuple(data.draw(st.integers(1, s)) for s in part.output.shape)
    stripes = StripeConfig.tiled(part.output.shape, box, (0, 1))
    for inp, prop in zip(part.inputs, part.propagators):
        assert stripes.propagate(prop, inp.shape).max_spans() == inp.shape, (inp.name, box)
    assert [t.shape for t in part.inputs if t.is_constant] == [(u * r, n), (u, u * r * m), (u,)]


def test_the_memory_is_the_state_and_the_streams_working_buffers():
    """Two batches of 16 filters of memory 10: a state of 2 x 16 x 10 bytes; the shift
    moves 28 rows (256 // 9) at a time through 28 x 9 = 252 bytes, over which the new
    column's 2 x 16 int16 values (64 bytes) lie. Memory 1: no shift, the column alone."""
    part = parts.svdf("svdf", Tensor("x", (2, 7)), 8, 2, 10)
    assert part.attr("state_bytes") == 320
    assert parts.svdf_shift_rows(32, 10) == 28
    assert part.attr(WORK_ATTR) == WorkMemory(fixed=252)
    one = parts.svdf("svdf", Tensor("x", (2, 7)), 8, 2, 1)
    assert parts.svdf_shift_rows(32, 1) == 0 and one.attr(WORK_ATTR) == WorkMemory(fixed=64)


@_SETTINGS
@given(sizes=_SIZES, units=st.integers(1, 40),
       device=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_an_svdf_is_a_plan_of_its_own_and_the_simulator_agrees(sizes, units, device):
    """An SVDF and a FULLY_CONNECTED on an Ethos-U: no Plan cascades the SVDF; each Plan
    holds its state, the SVDF's its working buffers too; every frontier Proposal's memory is
    what the stripe-by-stripe walk measures."""
    b, n, u, r, m = sizes
    g = GraphBuilder("svdf_fc")
    svdf = parts.svdf("svdf", g.input("x", (b, n)), u, r, m)
    g.add(parts.fully_connected("fc", g.add(svdf), units))
    graph = g.build()
    dev = get_device(device)
    assert_planned_alone_with_its_state(graph, dev, "svdf", b * u * r * m,
                                        svdf.attr(WORK_ATTR).fixed)


def test_keyword_scrambled_plans_in_one_planner_run():
    """keyword_scrambled_8bit: its seven SVDFs read as Parts, each a Plan of its own."""
    graph = load_tflite(model_path("tflite-micro/keyword_scrambled_8bit"))
    svdfs = [p for p in graph.topological_parts() if p.kind == Op.SVDF]
    assert [(p.inputs[0].shape, p.attr("units"), p.attr("memory")) for p in svdfs] == \
        [((1, 96), 64, 8)] + [((1, 16), 64, 8)] * 3 + [((1, 16), 32, 32)] + \
        [((1, 32), 32, 32)] * 2
    least = ProposalSearch(graph, get_device("ethos-u55-128")).proposal(0)
    alone = [plan.parts for plan in least.plans if any(p.startswith("svdf") for p in plan.parts)]
    assert alone == [(p.name,) for p in svdfs]


def test_svdfs_in_a_row_read_from_the_file_and_round_trip_through_json():
    graph = load_tflite(svdf_stack(SvdfCase(batches=2, units=5, rank=2, memory=4), (6, 3), 0))
    assert [p.kind for p in graph.topological_parts()] == [Op.SVDF, Op.SVDF, Op.FULLY_CONNECTED,
                                                          Op.SVDF]
    again = planner_io.loads(planner_io.dumps(graph))
    assert again.parts == graph.parts


@pytest.mark.parametrize("variant, words", [
    (dict(state_dtype="int16", state_zp=0), r"operator 0 \(SVDF\): .* 8-bit"),
    (dict(no_bias=True), r"operator 0 \(SVDF\): the bias"),
    (dict(float_input=True), "is FLOAT32; the NPU runs int8"),
])
def test_svdfs_the_stream_does_not_take_are_named(variant, words):
    data = svdf_model(dataclasses.replace(SvdfCase(), **variant))
    with pytest.raises(PlannerError, match=words) as err:
        load_tflite(data)
    assert "\n" not in str(err.value)


def test_a_part_that_is_no_matrix_is_refused():
    with pytest.raises(PlannerError, match=r"\(batches, input size\)"):
        parts.svdf("svdf", Tensor("x", (1, 2, 3)), 4, 1, 2)
