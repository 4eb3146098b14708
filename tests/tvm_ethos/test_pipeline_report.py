"""The pipeline's typed stage results (tvm_ethos/pipeline/report.py) and the JSON they make at
the edge: the shape ``CompiledModel.plan_report``, the package's meta.json and the CLI read."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.emulator.schedule import ScheduledSubgraph
from tvm_ethos.pipeline.report import (
    PlannedAllocation,
    PlanReport,
    StreamReport,
    SubgraphPlan,
    UnplannedSubgraph,
    format_table,
    jsonable,
)

_KEYS = ["planned", "options", "subgraphs", "layers", "peak_memory_bytes", "cycles", "devices"]
_SIZES = st.integers(0, 1 << 20)
_FIGURES = st.dictionaries(st.sampled_from(["schedule", "macs", "flash_bytes", "commands"]),
                           st.one_of(_SIZES, st.text(max_size=5), st.just((1, 2))), max_size=4)


def _scheduled(peak: int) -> ScheduledSubgraph:
    plan = {"parts": ("conv_0",), "stripes": 1, "weights": [], "planned_bytes": 0,
            "scheduled_bytes": 0}
    return ScheduledSubgraph("sg0", None, {"sram": peak}, {"sram": peak}, peak, peak, [plan])


def _allocated(peak: int) -> PlannedAllocation:
    """What a stream-only compile reports (no TIR scheduled)."""
    plan = {"parts": ("conv_0",), "stripes": 1, "weights": [], "planned_bytes": 0}
    return PlannedAllocation({"sram": peak}, peak, (plan,))


@st.composite
def _reports(draw) -> PlanReport:
    subgraphs, layers, peak, cycles = {}, [], None, None
    for i in range(draw(st.integers(0, 3))):
        sym = f"tvmgen_default_ethos_u_main_{i}"
        if draw(st.booleans()):
            subgraphs[sym] = UnplannedSubgraph("ethos-n", "the planner has no model of ethos-n")
            continue
        front = tuple(sorted(draw(st.lists(st.tuples(_SIZES, _SIZES), min_size=1, max_size=3))))
        mem, cyc = front[-1]
        subgraphs[sym] = SubgraphPlan("ethos-u", "ethos-u55-128", draw(st.none() | _SIZES),
                                      "the system's SRAM", mem, cyc, front,
                                      draw(st.sampled_from([_scheduled, _allocated]))(mem))
        layers.append(jsonable({"part": "conv_0", "cascade": i, "subgraph": sym,
                                "ratio": draw(st.fractions(min_value=0, max_value=4)),
                                "stripe": (1, 2, 2, 8)}))
        peak, cycles = max(peak or 0, mem), (cycles or 0) + cyc
    streams = {sym: (StreamReport(True, draw(_FIGURES), draw(st.booleans())) if draw(st.booleans())
                     else StreamReport.refused("no NPU operation for it"))
               for sym in subgraphs if draw(st.booleans())}
    return PlanReport(True, {"plan": True, "budget": "system"}, subgraphs, tuple(layers), peak,
                      cycles, {"ethos-u": "ethos-u55-128"}, streams)


@settings(max_examples=60, deadline=None)
@given(_reports())
def test_a_plan_report_is_json_that_saving_and_loading_leave_unchanged(report):
    out = report.to_json()
    assert list(out) == _KEYS + (["streams"] if report.streams else [])
    assert json.loads(json.dumps(out, sort_keys=True))["subgraphs"] == out["subgraphs"]
    assert json.loads(json.dumps(out["layers"])) == out["layers"]
    for sym, sub in report.subgraphs.items():
        got = out["subgraphs"][sym]
        assert got["planned"] == isinstance(sub, SubgraphPlan)
        if isinstance(sub, SubgraphPlan):
            assert (got["smallest_memory_bytes"], got["fastest_cycles"]) == (
                sub.frontier[0][0], sub.frontier[-1][1])
            assert got["frontier"] == [{"memory_bytes": m, "cycles": c} for m, c in sub.frontier]
            scheduled = isinstance(sub.scheduled, ScheduledSubgraph)
            assert got["plans"] == [{"parts": ["conv_0"], "stripes": 1, "weights": [],
                                     "planned_bytes": 0,
                                     **({"scheduled_bytes": 0} if scheduled else {})}]
            assert ("scheduled_bytes" in got) == ("scheduled_peak_bytes" in got) == scheduled
            assert got["planned_peak_bytes"] == sub.peak_memory_bytes
    for sym, stream in report.streams.items():
        got = out["streams"][sym]
        if stream.generated:   # the backend's figures as given, then whether it is the plan
            assert list(got) == [*stream.figures, "realizes_plan"]
            assert got == {**stream.figures, "realizes_plan": stream.realizes_plan}
        else:
            assert got == {"generated": False, "reason": stream.reason}


@given(st.fractions(min_value=-9, max_value=9))
def test_fractions_become_integers_or_n_over_d(x):
    got = jsonable({1: [x, (x,)]})
    want = int(x) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    assert got == {"1": [want, [want]]}


def test_an_unplanned_network_says_so_in_its_table():
    report = PlanReport(True, {}, {"sg0": UnplannedSubgraph("ethos-n", "no model")})
    text = format_table(report.to_json())
    assert "sg0 on ethos-n: not planned (no model)" in text
    assert "network: not planned" in text
    assert format_table(PlanReport(False, {}).to_json()).startswith("planner: off")


def test_the_table_says_scheduled_bytes_only_where_tir_was_scheduled():
    """A stream-only compile schedules no TIR: its table gives the plan's bytes alone."""
    for made, scheduled in ((_scheduled, True), (_allocated, False)):
        sub = SubgraphPlan("ethos-u", "ethos-u55-128", None, "the system's SRAM", 4096, 7,
                           ((4096, 7),), made(4096))
        text = format_table(PlanReport(True, {}, {"sg0": sub}, (), 4096, 7).to_json())
        line = next(ln for ln in text.splitlines() if "allocated per scope" in ln)
        assert "planned sram 4,096 B" in line
        assert ("; scheduled sram 4,096 B (scheduled TIR peak 4,096 B)" in line) == scheduled
        assert line.endswith("B)" if scheduled else "planned sram 4,096 B")
