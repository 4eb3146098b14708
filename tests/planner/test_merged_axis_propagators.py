"""A reshape that splits an input axis into several output axes reads, along that input axis,
a mixed-radix sum of them (row ``4*h + w`` of a 20-row tensor read as 5x4): the propagator
TVM's part matcher derives from the reshape's index expressions. The planner's stripes and
windows follow one output axis per input axis, so a Part widens such a propagator
(``Propagator.one_driver_per_axis``). Brute force on numpy (tests/helpers/read_regions.py):
every stripe of every tiling, and every buffer of every plan of a cascade through the
reshape, holds what the reshape really reads."""
from __future__ import annotations

import itertools
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ethos_arch.ops import Op
from planner import parts
from planner.devices import get_device
from planner.graph import Part, PlannerGraph, Tensor
from planner.io import graph_from_json, graph_to_json
from planner.options import PlannerOptions
from planner.propagator import Propagator
from planner.proposals import ProposalSearch
from planner.simulate import simulate
from planner.stripes import StripeConfig
from planner.windows import window
from tests.helpers.read_regions import read_region

#: per input axis, the output axes it splits into (outermost first)
groups = st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=3), min_size=1, max_size=3)


def _split(groups_: list[list[int]]) -> tuple[tuple[int, ...], tuple[int, ...], Propagator]:
    """(input shape, output shape, the propagator the part matcher derives): input axis ``i``
    reads ``sum_j radix_j * o_j`` over its group's output axes ``j``."""
    in_shape = tuple(math.prod(g) for g in groups_)
    out_shape = tuple(n for g in groups_ for n in g)
    lin, const, first = [], [], 0
    for g in groups_:
        row = [0] * len(out_shape)
        for k in range(len(g)):
            row[first + k] = math.prod(g[k + 1:])
        lin.append(row)
        const.append(1 - sum(row))
        first += len(g)
    return in_shape, out_shape, Propagator.build(lin, const, [0] * len(in_shape))


def _reshape_part(x: Tensor, out_shape, prop: Propagator, name: str = "r") -> Part:
    return Part(name, Op.RESHAPE, (x,), Tensor(f"{name}:0", out_shape), (prop,))


def test_a_merged_row_is_driven_by_its_outermost_axis_over_the_whole_inner_one():
    """The issue's reshape, 20x6 read as 1x5x4x6: a stripe of rows ``h`` reads rows
    ``[4h, 4h + 4)``, one stripe of the output steps four input rows."""
    _, out_shape, prop = _split([[1, 5, 4], [6]])
    part = _reshape_part(Tensor("x", (20, 6)), out_shape, prop)
    (wide,) = part.propagators
    assert wide.drivers() == ((1, 4), (3, 1))
    stripes = StripeConfig.tiled(out_shape, (1, 1, 4, 6), (0, 1, 0, 0))
    read = stripes.propagate(wide, (20, 6))
    assert read.axis_ranges(0) == ((0, 4), (4, 8), (8, 12), (12, 16), (16, 20))


@settings(max_examples=60, deadline=None)
@given(groups_=groups, data=st.data())
def test_every_stripe_of_a_tiling_reads_within_its_planned_window(groups_, data):
    in_shape, out_shape, prop = _split(groups_)
    part = _reshape_part(Tensor("x", in_shape), out_shape, prop)
    (wide,) = part.propagators
    assert all(len([c for c in row[:-1] if c]) <= 1 for row in wide.transform[:-1])
    stripe = tuple(data.draw(st.integers(1, n)) for n in out_shape)
    order = tuple(data.draw(st.permutations(range(1, len(out_shape) + 1))))
    cfg = StripeConfig.tiled(out_shape, stripe, order)
    read = cfg.propagate(wide, in_shape)
    ranges = [cfg.axis_ranges(a) for a in range(len(out_shape))]
    for index in itertools.product(*(range(n) for n in cfg.stripes)):
        box = tuple(r[i] for r, i in zip(ranges, index))
        want = read_region(lambda a: a.reshape(out_shape), [in_shape], 0, box)
        for axis, (lo, hi) in enumerate(want):
            driver = wide.driving_axis(axis)
            k = index[driver] if driver is not None and read.stripes[axis] > 1 else 0
            got = read.axis_ranges(axis)[k]
            assert got[0] <= lo and hi <= got[1], (box, axis, got, (lo, hi))
            lin = wide.linear(axis, driver) if driver is not None else 0
            c0, c1 = box[driver] if driver is not None else (0, 1)
            w = window(c0, c1, lin, wide.const(axis), wide.offset[axis], in_shape[axis])
            assert w[0] <= lo and hi <= w[1], (box, axis, w, (lo, hi))


def _cascade(rows: list[int], units: list[int], tail: bool) -> tuple[PlannerGraph, Part]:
    """The issue's form: a FULLY_CONNECTED of ``prod(units)`` units over ``prod(rows)`` rows,
    its output split by a reshape into the axes ``rows + units``, a LUT after it (``tail``)."""
    in_shape, out_shape, prop = _split([rows, units])
    x = Tensor("x", (in_shape[0], 3))
    fc = parts.fully_connected("fc", x, in_shape[1])
    reshape = _reshape_part(fc.output, out_shape, prop)
    chain = (fc, reshape) + ((parts.unary("lut", reshape.output, "tanh"),) if tail else ())
    return PlannerGraph(chain, (x,), (chain[-1].output,)), reshape


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.tuples(st.integers(1, 2), st.integers(1, 6), st.integers(1, 6)),
       units=st.integers(1, 8), tail=st.booleans())
def test_every_plan_of_a_cascade_through_the_reshape_holds_what_it_reads(rows, units, tail):
    """Every frontier Proposal on an Ethos-U55-128 (its default options, what a compile
    plans with) of an NHWC reshape (the planner stripes those): the buffer of the reshape's
    input inside a Plan holds, along every axis, the rows one stripe of the reshape really
    reads, and no more than it (no stripe splits a folded axis); the simulator agrees."""
    g, reshape = _cascade(list(rows), [units], tail)
    device = get_device("ethos-u55-128")
    search = ProposalSearch(g, device, PlannerOptions())
    x = reshape.inputs[0]
    for k in range(len(search.frontier)):
        proposal = search.proposal(k)
        assert simulate(g, device, proposal).peak_bytes == proposal.memory_bytes
        for plan in proposal.plans:
            configs = {tc.tensor: tc for tc in plan.tensor_configs}
            if reshape.name not in plan.parts or x.name not in configs or \
                    plan.parts[0] == reshape.name:
                continue
            buffer = configs[x.name].buffer_shape
            stripes = {ps.part: ps.stripe for ps in plan.part_schedules}[reshape.name]
            ranges = [stripes.axis_ranges(a) for a in range(len(reshape.output.shape))]
            # no stripe splits an axis folded into the window: the buffer is what a
            # schedule of the exact reads holds (tvm_ethos.emulator.schedule checks it)
            assert all(ranges[a] == ((0, reshape.output.shape[a]),)
                       for a in reshape.propagators[0].whole_axes), (plan.parts, ranges)
            for index in itertools.product(*(range(n) for n in stripes.stripes)):
                box = tuple(r[i] for r, i in zip(ranges, index))
                if any(hi <= lo for lo, hi in box):
                    continue
                want = read_region(lambda a: a.reshape(reshape.output.shape), [x.shape], 0,
                                   box)
                spans = tuple(hi - lo for lo, hi in want)
                assert all(s <= b for s, b in zip(spans, buffer)), \
                    (plan.parts, plan.spec.label(), box, spans, buffer)


def test_a_reversed_merged_row_reads_the_whole_input_axis():
    """A term of negative coefficient among several is no window the planner follows."""
    prop = Propagator.build([[2, -1]], [0], [1])
    part = Part("r", Op.RESHAPE, (Tensor("x", (7,)),), Tensor("y", (3, 2)), (prop,))
    whole = Propagator.build([[0, 0]], [7], [0])
    assert part.propagators[0] == Propagator(whole.transform, whole.offset, (0, 1))
    assert part.propagators[0].apply_shape((1, 1)) == (7,)


def test_the_folded_axes_survive_a_json_round_trip():
    g, reshape = _cascade([1, 5, 4], [6], tail=True)
    assert reshape.propagators[0].whole_axes == (0, 2)
    back = graph_from_json(graph_to_json(g))
    assert back == g
    assert back.parts[1].propagators[0].whole_axes == (0, 2)
