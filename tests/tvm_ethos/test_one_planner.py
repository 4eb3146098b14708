"""One planner: ``python -m planner``, ``tvmc plan``, the sweep (and so the notebook, which
calls it) and ``tvmc compile`` plan with the same defaults, so they report the same smallest
memory and, the four planner front ends, the same chosen point for the same budget, on every
shipped model. Settings the compile path cannot realize are options, refused by compile."""
import contextlib
import io
import json
import re

import pytest
from conftest import model_path

import tvm_ethos
from planner.api import plan
from planner.options import PlannerOptions
from tvm_ethos.pipeline import planning as cascade
from tvm_ethos.pipeline.report import format_table

MODELS = ["ds_cnn_kws", "resnet8_cifar", "mobilenet_v1_0.25_96",
          pytest.param("mobilenet_v1_1.0_224", marks=pytest.mark.slow)]
DEVICE = "ethos-u55-128"


def _main(main, argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    assert rc == 0, err.getvalue()
    return out.getvalue()


def planner_cli(path, budget):
    from planner.__main__ import main
    d = json.loads(_main(main, ["plan", str(path), "--device", DEVICE, "--budget", budget,
                                "--json"]))
    front = [(p["memory_bytes"], p["cycles"]) for p in d["frontier"]]
    return front, (d["peak_memory_bytes"], d["cycles"])


def tvmc_plan(path, budget):
    from tvm_ethos.cli import main
    out = _main(main, ["plan", str(path), "--target", "ethos-u", "--budget", budget,
                       "--no-progress"])
    smallest = float(re.search(r"proposals from ([0-9.]+) KiB", out).group(1))
    peak, cycles = re.search(r"total: \d+ cascades, peak [0-9.]+ KiB \(([0-9,]+) B\), "
                             r"([0-9,]+) cycles", out).groups()
    return smallest, (int(peak.replace(",", "")), int(cycles.replace(",", "")))


def sweep_point(path, budget_bytes):
    from planner.sweep import frontier_task
    res = frontier_task(str(path), DEVICE, "sram", [budget_bytes])
    (row,) = res["rows"]
    return [tuple(p) for p in res["frontier"]], (row["peak_bytes"], row["cycles"])


@pytest.mark.parametrize("name", MODELS)
def test_planner_front_ends_agree(name):
    path = model_path(name)
    default = plan(path, DEVICE)
    front = default.frontier
    mid = front[len(front) // 2][0]
    chosen = plan(path, DEVICE, budget=mid).chosen
    point = (chosen.memory_bytes, chosen.cycles)
    assert point == front[len(front) // 2]
    assert planner_cli(path, str(mid)) == (front, point)
    smallest, tvmc_point = tvmc_plan(path, str(mid))
    assert tvmc_point == point and smallest == round(front[0][0] / 1024, 1)
    assert sweep_point(path, mid) == (front, point)
    # no budget: the SRAM of Vela's default system (the U55's is its whole address space)
    assert default.budget == 1 << 32 and (default.chosen.memory_bytes,
                                          default.chosen.cycles) == front[-1]
    assert planner_cli(path, "system")[1] == tvmc_plan(path, "system")[1] == front[-1]


@pytest.mark.parametrize("name", MODELS)
def test_compile_finds_the_planners_smallest_memory(name):
    path = model_path(name)
    smallest = plan(path, DEVICE).frontier[0][0]
    with pytest.raises(tvm_ethos.MemoryBudgetError) as info:
        tvm_ethos.compile(tvm_ethos.load_model(path), target="ethos-u,llvm", budget=1)
    assert info.value.minimum == smallest


def test_defaults_are_what_compile_realizes():
    """Every PlannerOptions default passes compile's check, and compile's options are the
    planner's defaults (nothing fixed behind the user's back)."""
    opts = cascade.planning_options({})
    assert opts.planner == PlannerOptions()
    for name, (realized, _) in cascade.REALIZED_PLANNER_OPTIONS.items():
        assert getattr(PlannerOptions(), name) in realized


@pytest.mark.parametrize("flag,value", [("rolling_mixed", "true"), ("rolling_granules", "1,0"),
                                        ("weight_prefetch", "true")])
def test_compile_refuses_study_settings_in_one_line(flag, value, tmp_path, capsys):
    from tvm_ethos.cli import main
    rc = main(["compile", str(model_path("ds_cnn_kws")), "--target", "ethos-u,llvm",
               "-o", str(tmp_path / "m.tar"), f"--planner-{flag}={value}", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and flag in err[0] and "planner study" in err[0], err
    # the same value is a planner study option: tvmc plan takes it
    assert _main(main, ["plan", str(model_path("ds_cnn_kws")), "--target", "ethos-u",
                        f"--planner-{flag}={value}", "--no-progress"])


def test_compile_help_shows_no_default_it_refuses():
    from tvm_ethos.cli import build_parser
    sub = build_parser()._subparsers._group_actions[0].choices["compile"]
    text = " ".join(sub.format_help().split())
    for name, (realized, _) in cascade.REALIZED_PLANNER_OPTIONS.items():
        from planner.option_flags import show
        shown = re.search(rf"--planner-{name} VALUE .*?default ([^;]+);", text).group(1)
        assert shown in [show(v) for v in realized], (name, shown)


def test_both_clis_have_the_same_planner_flags_with_help():
    import argparse

    from planner.__main__ import _parser
    from tvm_ethos.cli import build_parser

    def flags(parser):
        return {a.option_strings[0]: a.help for a in parser._actions
                if a.option_strings and a.option_strings[0].startswith("--planner-")}
    planner_plan = _parser()._subparsers._group_actions[0].choices["plan"]
    tvmc_plan_ = build_parser()._subparsers._group_actions[0].choices["plan"]
    ours, theirs = flags(planner_plan), flags(tvmc_plan_)
    fields = {f"--planner-{f}" for f in PlannerOptions.__dataclass_fields__}
    assert set(ours) == set(theirs) == fields
    assert ours == theirs and all(h and "default" in h for h in ours.values())
    assert isinstance(planner_plan, argparse.ArgumentParser)


@pytest.mark.parametrize("budget,expected", [("none", None), ("system", 393216),
                                             ("100KiB", 102400)])
def test_default_budget_is_the_systems_sram(budget, expected):
    """Ethos-U65: Vela's default memory mode Dedicated_Sram_384KB (arena_cache_size=393216)."""
    r = plan(model_path("ds_cnn_kws"), "ethos-u65-256", budget=budget)
    assert r.budget == expected
    assert ("Dedicated_Sram_384KB" in r.budget_source) == (budget == "system")
    default = cascade.budget_for(cascade.planning_options({} if budget == "system" else
                                                       {"budget": budget}), r.device)
    assert default[0] == expected


def test_default_budget_too_small_says_whose_it_is():
    from planner.devices import get_device
    from planner.errors import PlannerError
    dev = get_device("ethos-u65-256", sram_size=4096)
    with pytest.raises(PlannerError, match=r"the sram size given for this target; give a "
                                           r"budget"):
        plan(model_path("ds_cnn_kws"), dev)


def test_plan_and_compile_tables_share_columns_units_and_budget_line():
    from planner.report import TABLE_HEAD
    from tvm_ethos.cli import main
    path = model_path("ds_cnn_kws")
    cm = tvm_ethos.compile(tvm_ethos.load_model(path), target="ethos-u,llvm", budget=None)
    planned = _main(main, ["plan", str(path), "--target", "ethos-u", "--budget", "none",
                           "--no-progress"])
    for text in (cm.plan_table, planned):
        assert TABLE_HEAD in text and "budget: none (the fastest Proposal)" in text
        assert re.search(r"peak [0-9.]+ KiB \([0-9,]+ B\), [0-9,]+ cycles \(estimated\)", text)
    (sub,) = cm.plan_report["subgraphs"].values()
    assert sub["budget_bytes"] is None and sub["budget_source"].startswith("none")


def test_a_host_only_compile_is_not_planned_not_zero_cycles():
    cm = tvm_ethos.compile(tvm_ethos.load_model(model_path("ds_cnn_kws")), target="llvm")
    assert cm.plan_report["cycles"] is None and cm.plan_report["peak_memory_bytes"] is None
    assert "not planned" in cm.plan_table and "0 NPU cycles" not in cm.plan_table


def test_unmodelled_subgraph_prints_not_planned():
    rep = {"planned": True, "layers": [], "peak_memory_bytes": None, "cycles": None,
           "subgraphs": {"sg0": {"planned": False, "backend": "plug",
                                 "reason": "the planner has no model of plug"}}}
    text = format_table(rep)
    assert "sg0 on plug: not planned (the planner has no model of plug)" in text
    assert "cycles" not in text.replace("not planned", "")
