"""An int16 SOFTMAX as a planner Part (``planner.parts.softmax``, TVM-free): int16 in and out,
every output row reading its whole input row, the Ethos-U stream's working memory on the Part
(``softmax16_work_bytes``), counted by the Plan that holds it (the stripe-by-stripe simulator
agrees), read so from a TFLite file by ``planner.tflite`` and kept by the JSON round trip;
an 8-bit SOFTMAX is the Part it was."""
import dataclasses

import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

from ethos_arch.ops import Op
from planner import io as planner_io
from planner import parts
from planner.devices import get_device
from planner.graph import GraphBuilder, Tensor
from planner.proposals import ProposalSearch
from planner.simulate import simulate
from planner.tflite import load_tflite
from planner.work_memory import WORK_ATTR, WorkMemory, work_tensor

_SHAPES = st.lists(st.integers(1, 24), min_size=1, max_size=4).map(tuple)


def _up(n: int) -> int:
    return -(-n // 16) * 16


def test_the_working_memory_is_the_streams_layout():
    """3 rows of 17: the int32 differences (204 B, 208 aligned), the int16 maxima (6 B, 16),
    three int32 row maps (12 B, 16 each) and the int16 reciprocals up to their last byte."""
    assert parts.softmax16_work_bytes(3, 17) == 208 + 16 + 3 * 16 + 6


@given(shape=_SHAPES, beta=st.sampled_from([1.0, 0.5, 2.0]))
def test_an_int16_softmax_holds_its_working_memory_and_an_8_bit_one_is_unchanged(shape, beta):
    x16 = Tensor("x", shape, "int16")
    part = parts.softmax("sm", x16, beta)
    rows, depth = x16.elements // shape[-1], shape[-1]
    assert part.kind == Op.SOFTMAX and part.output == Tensor("sm:0", shape, "int16")
    assert part.attr("beta") == beta
    assert part.attr(WORK_ATTR) == WorkMemory(
        _up(4 * rows * depth) + _up(2 * rows) + 3 * _up(4 * rows) + 2 * rows)
    for dtype in ("int8", "uint8"):
        x = Tensor("x", shape, dtype)
        assert parts.softmax("sm", x, beta) == parts.opaque("sm", Op.SOFTMAX, x, shape,
                                                            beta=beta)


_SETTINGS = settings(max_examples=20, deadline=None)


@_SETTINGS
@given(h=st.integers(1, 12), w=st.integers(1, 12), c=st.integers(1, 8),
       cout=st.integers(1, 40),
       device_name=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_its_plan_counts_the_working_memory_and_the_simulator_agrees(h, w, c, cout,
                                                                   device_name):
    """A convolution, then the int16 SOFTMAX computed whole (``Device.whole_output``): every
    frontier Proposal's memory is what the stripe-by-stripe walk measures, and the Plan
    holding the SOFTMAX holds its working memory."""
    g = GraphBuilder("conv_softmax16")
    x = g.input("x", (1, h, w, c), "int16")
    conv = parts.conv2d("conv", x, cout, kernel=(3, 3), padding=(1, 1, 1, 1))
    conv = dataclasses.replace(conv, output=dataclasses.replace(conv.output, dtype="int16"))
    sm = parts.softmax("sm", g.add(conv), 1.0)
    g.add(sm)
    graph = g.build()
    device = dataclasses.replace(get_device(device_name), whole_output=frozenset({Op.SOFTMAX}))
    search = ProposalSearch(graph, device)
    work = sm.attr(WORK_ATTR).fixed
    for k in range(len(search.frontier)):
        prop = search.proposal(k)
        assert simulate(graph, device, prop).peak_bytes == prop.memory_bytes
        (plan,) = [p for p in prop.plans if "sm" in p.parts]
        held = {tc.tensor: tc.buffer_bytes for tc in plan.tensor_configs}
        assert held[work_tensor("sm")] == work


def test_the_tflite_reader_reads_an_int16_softmax_as_that_part_and_json_keeps_it():
    data = tb.softmax(None, shape=(1, 5, 33), in_q=(1e-3, 0), dtype="int16",
                      out_q=(1 / 32768, 0), beta=0.5)
    graph = load_tflite(data)
    (part,) = graph.parts
    assert part.kind == Op.SOFTMAX and part.attr("beta") == 0.5
    assert (part.inputs[0].dtype, part.output.dtype, part.output.shape) == \
        ("int16", "int16", (1, 5, 33))
    assert part.attr(WORK_ATTR) == WorkMemory(parts.softmax16_work_bytes(5, 33))
    again = planner_io.loads(planner_io.dumps(graph))
    assert again == graph and type(again.parts[0].attr(WORK_ATTR)) is WorkMemory
