"""No hangs on absurd extents (issue 25, item 5): the planner's work is bounded by the model's
size, and absurd shapes are refused up front with the limit named.

The issue's cases (a 504-byte AVERAGE_POOL_2D model on 1x2^30x1x1 and four planner JSON
graphs: a huge input, a huge padding, a huge kernel, a huge opaque output) each ran for
minutes; they run here through ``tvmc plan`` in a subprocess, whose timeout turns a hang
back into a failure instead of a stuck test run.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

from planner import parts as P
from planner.devices import get_device
from planner.errors import PlannerError
from planner.graph import PlannerGraph, Tensor
from planner.io import graph_from_json, graph_to_json
from planner.limits import MAX_AXIS, MAX_TENSOR_BYTES, check_graph, check_tensor
from planner.options import PlannerOptions
from planner.plans import MAX_STRIPES_PER_AXIS, PlanGenerator, _distinct_sizes
from planner.proposals import ProposalSearch
from planner.tflite import load_tflite

ROOT = Path(__file__).resolve().parents[2]
HUGE = 1 << 30
#: A subprocess that outlives this is hung (a correct run takes a few seconds).
HANG_S = 120


def _brute_sizes(extent: int, granule: int, factors: int) -> list[int]:
    """The stripe sizes by the definition: every stripe count 1 .. min(extent, the cap), one
    by one, aligned, deduplicated, thinned evenly."""
    sizes = sorted({min(extent, -(-(-(-extent // n)) // granule) * granule)
                    for n in range(1, min(extent, MAX_STRIPES_PER_AXIS) + 1)})
    if len(sizes) <= factors:
        return sizes
    if factors == 1:
        return [sizes[-1]]
    return sorted({sizes[round(k * (len(sizes) - 1) / (factors - 1))] for k in range(factors)})


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.integers(1, 4000), st.integers(1, 16), st.integers(1, 64))
def test_distinct_sizes_equal_the_one_by_one_definition(extent, granule, factors):
    assert _distinct_sizes(extent, granule, factors) == _brute_sizes(extent, granule, factors)


@pytest.mark.parametrize("extent", [HUGE, HUGE + 7, (1 << 31) - 1, 10**12])
def test_distinct_sizes_of_huge_axes_stay_within_the_stripe_cap(extent):
    sizes = _distinct_sizes(extent, 4, 10)
    assert sizes[-1] == extent                       # the whole axis is always a candidate
    assert len(sizes) == 10
    assert all(-(-extent // s) <= MAX_STRIPES_PER_AXIS for s in sizes)
    assert min(sizes) == -(-(-(-extent // MAX_STRIPES_PER_AXIS)) // 4) * 4


def test_a_graph_built_in_code_with_a_huge_axis_plans_within_the_cap():
    """The limits are the readers'; the search itself must not walk 2^30 rows either."""
    x = Tensor("x", (1, HUGE, 1, 1))
    g = PlannerGraph((P.pool2d("p", x, "avg", pool_size=(1, 1), strides=(1, 1)),), (x,), ())
    device = get_device("ethos-u55-128")
    gen = PlanGenerator(g, device, PlannerOptions())
    heights = {c.stripes[1] for c in gen.sink_configs(g.parts[0].output)}
    assert max(heights) == MAX_STRIPES_PER_AXIS and min(heights) == 1
    search = ProposalSearch(g, device)
    assert search.frontier


def _tvmc(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tvm_ethos", *argv, "--no-progress"],
                          capture_output=True, text=True, timeout=HANG_S, cwd=ROOT)


def _one_line(r: subprocess.CompletedProcess, *words: str) -> str:
    assert r.returncode == 2, r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


def test_the_504_byte_pool_model_is_refused_at_once(tmp_path):
    data = tb.pool(np.random.RandomState(0), in_shape=(1, HUGE, 1, 1), size=(1, 1),
                   stride=(1, 1))
    assert len(data) == 504
    path = tmp_path / "pool.tflite"
    path.write_bytes(data)
    _one_line(_tvmc("plan", str(path), "--target", "ethos-u"), "[1, 1073741824, 1, 1]",
              f"{MAX_AXIS:,}")


ISSUE_GRAPHS = {
    "huge input shape": ({"inputs": [{"name": "x", "shape": [1, HUGE, 8, 8]}],
                          "parts": [{"op": "conv2d", "name": "c", "input": "x",
                                     "out_channels": 8, "kernel": 3, "padding": "same"}]},
                         "'x'"),
    "huge padding": ({"inputs": [{"name": "x", "shape": [1, 8, 8, 8]}],
                      "parts": [{"op": "pad", "name": "p", "input": "x",
                                 "pads": [[0, 0], [HUGE, HUGE], [0, 0], [0, 0]]},
                                {"op": "conv2d", "name": "c", "input": "p", "out_channels": 8,
                                 "kernel": 3}]},
                     "'p:0'"),
    "huge kernel": ({"inputs": [{"name": "x", "shape": [1, 8, 8, 8]}],
                     "parts": [{"op": "max_pool", "name": "m", "input": "x", "pool_size": HUGE,
                                "strides": 1, "padding": "same"}]},
                    "kernel"),
    "huge opaque output": ({"inputs": [{"name": "x", "shape": [1, 8, 8, 8]}],
                            "parts": [{"op": "opaque", "name": "o", "input": "x",
                                       "kind": "custom", "out_shape": [1, HUGE, 1, 1]},
                                      {"op": "avg_pool", "name": "a", "input": "o",
                                       "pool_size": 1}]},
                           "'o:0'"),
}


@pytest.mark.parametrize("case", sorted(ISSUE_GRAPHS))
def test_the_issues_planner_graphs_are_refused_naming_the_limit(case):
    doc, names = ISSUE_GRAPHS[case]
    with pytest.raises(PlannerError) as e:
        graph_from_json(doc)
    msg = str(e.value)
    assert "\n" not in msg and names in msg and f"the limit is {MAX_AXIS:,}" in msg, msg


def test_the_issues_planner_graphs_through_tvmc_plan(tmp_path):
    for case, (doc, names) in sorted(ISSUE_GRAPHS.items()):
        path = tmp_path / f"{case.replace(' ', '_')}.json"
        path.write_text(json.dumps(doc))
        _one_line(_tvmc("plan", str(path), "--target", "ethos-u"), names, f"{MAX_AXIS:,}")


def test_a_huge_conv_kernel_is_refused_by_its_weights():
    doc = {"inputs": [{"name": "x", "shape": [1, 8, 8, 8]}],
           "parts": [{"op": "conv2d", "name": "c", "input": "x", "out_channels": 8,
                      "kernel": HUGE, "padding": "same"}]}
    with pytest.raises(PlannerError, match=r"'c:weights'.*the limit is 65,536 per axis"):
        graph_from_json(doc)


@pytest.mark.parametrize("shape,dtype,ok", [
    ((1, MAX_AXIS, 1, 1), "int8", True),
    ((1, MAX_AXIS + 1, 1, 1), "int8", False),
    ((MAX_AXIS, MAX_AXIS // 2), "int8", True),              # exactly 2 GiB
    ((MAX_AXIS, MAX_AXIS // 2), "int16", False),            # 4 GiB
    ((MAX_AXIS, MAX_AXIS // 2 + 1), "int8", False),
])
def test_tensor_limits_at_their_boundaries(shape, dtype, ok):
    t = Tensor("t", shape, dtype)
    if ok:
        check_tensor(t, "here")
        return
    with pytest.raises(PlannerError) as e:
        check_tensor(t, "here")
    msg = str(e.value)
    limit = f"{MAX_AXIS:,} per axis" if max(shape) > MAX_AXIS else f"{MAX_TENSOR_BYTES:,}"
    assert msg.startswith("here: tensor 't'") and limit in msg, msg


def test_window_attributes_at_their_boundary():
    x = Tensor("x", (1, 8, 8, 8))
    for size, ok in ((MAX_AXIS, True), (MAX_AXIS + 1, False)):
        half = MAX_AXIS // 2       # padding that keeps the output height positive
        g = PlannerGraph((P.pool2d("m", x, "max", pool_size=(size, 1), strides=(1, 1),
                                   padding=(half, 0, half, 0)),), (x,), ())
        if ok:
            check_graph(g)
        else:
            with pytest.raises(PlannerError, match=r"'m' \(pool\): kernel .* 65,537; the "
                                                   r"limit is 65,536"):
                check_graph(g)


def test_the_largest_accepted_tflite_axis_plans(tmp_path):
    """The legitimate side of the limit: a 1x65536x1x1 pool is read and planned."""
    data = tb.pool(np.random.RandomState(0), in_shape=(1, MAX_AXIS, 1, 1), size=(1, 1),
                   stride=(1, 1))
    g = load_tflite(data)
    assert g.inputs[0].shape == (1, MAX_AXIS, 1, 1)
    assert ProposalSearch(g, get_device("ethos-u55-128")).frontier
    too_big = tb.pool(np.random.RandomState(0), in_shape=(1, MAX_AXIS + 1, 1, 1), size=(1, 1),
                      stride=(1, 1))
    with pytest.raises(PlannerError, match=r"\(index 0\) has shape \[1, 65537, 1, 1\]"):
        load_tflite(too_big)


def test_an_absurd_propagator_in_the_full_form_is_refused():
    """A full-form graph whose transform asks for a 2^20-row window (the planner corpus of
    benchmarks/reliability.py found it: a lockstep prologue of a million steps)."""
    data = tb.conv2d(np.random.RandomState(0))
    doc = graph_to_json(load_tflite(data))
    graph_from_json(doc)                                   # the seed itself is accepted
    prop = doc["parts"][0]["propagators"][0]
    prop["transform"][1][-1] = 1 << 20
    with pytest.raises(PlannerError, match=r"propagator 0 has an entry 1048576; the limit is "
                                           r"65,536"):
        graph_from_json(doc)
    prop["transform"][1][-1] = MAX_AXIS
    graph_from_json(doc)


@pytest.mark.parametrize("kernel,words", [
    (["1/0", 3], "must hold positive integers, not '1/0'"),     # the planner corpus' case
    ([0, 3], "must hold positive integers, not 0"),
    ([1.5, 3], "must hold positive integers, not 1.5"),
    ([True, 3], "must hold positive integers, not True"),
    ([MAX_AXIS + 1, 3], "has a value of 65,537; the limit is 65,536"),
])
def test_full_form_window_attributes_are_numbers_in_range(kernel, words):
    """The performance models read these attributes: a string there was a TypeError deep in
    the Ethos-U model, a zero a division by zero."""
    doc = graph_to_json(load_tflite(tb.conv2d(np.random.RandomState(0))))
    doc["parts"][0]["attrs"]["kernel"] = kernel
    with pytest.raises(PlannerError) as e:
        graph_from_json(doc)
    assert words in str(e.value) and "kernel" in str(e.value), str(e.value)


def test_full_form_window_attributes_have_their_count():
    doc = graph_to_json(load_tflite(tb.conv2d(np.random.RandomState(0))))
    doc["parts"][0]["attrs"]["dilation"] = []                   # the planner corpus' case
    with pytest.raises(PlannerError, match=r"dilation \[\] must be 2 numbers"):
        graph_from_json(doc)


def test_a_propagator_row_moves_with_its_output_axes_forwards():
    """A negative coefficient: the search assumes none, and the simulator found the Plan
    reading rows no stripe produced."""
    doc = graph_to_json(load_tflite(tb.conv2d(np.random.RandomState(0))))
    doc["parts"][0]["propagators"][0]["transform"][3][2] = -7
    with pytest.raises(PlannerError, match=r"propagator 0, transform row 3 .*at most one "
                                           "output axis, forwards"):
        graph_from_json(doc)


def test_an_input_axis_moved_by_two_output_axes_reads_the_second_whole():
    """An input axis moved by two output axes (a RESHAPE merging rows) is driven by the one of
    the larger coefficient; the other is counted over its whole extent and recorded, so no
    stripe reads rows its producer did not compute (``Propagator.one_driver_per_axis``)."""
    doc = graph_to_json(load_tflite(tb.conv2d(np.random.RandomState(0))))
    rows = doc["parts"][0]["propagators"][0]["transform"]
    rows[2][1] = 5
    folded = graph_from_json(doc).parts[0].propagators[0]
    assert folded.whole_axes == (2,)
    assert folded.transform[2][1] == 5 and folded.transform[2][2] == 0
    assert folded.transform[2][-1] > rows[2][-1], folded.transform   # the whole width


def test_a_propagator_window_reads_at_least_one_row():
    """A window constant of -1 on a stride-1 axis (one output row reading no input row): the
    simulator found such a Plan reading rows no stripe produced."""
    doc = graph_to_json(load_tflite(tb.conv2d(np.random.RandomState(0))))
    doc["parts"][0]["propagators"][0]["transform"][1][-1] = -1
    with pytest.raises(PlannerError, match=r"transform row 1 .*at least one input row"):
        graph_from_json(doc)
    doc["parts"][0]["propagators"][0]["transform"][1][-1] = 0      # one row per row: fine
    graph_from_json(doc)
