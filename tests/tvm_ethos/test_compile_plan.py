"""The planner in the compile path: budgets, memory pools, planner options, the plan report,
bit-exact outputs under the chosen schedules, and errors that stop compilation."""
import time

import pytest
from conftest import assert_bit_exact, model_path

import tvm_ethos
from tvm_ethos.pipeline import planning as cascade

#: these tests check the TensorIR emulator of the plan (streams: test_stream_models.py)
EMULATOR = {"npu_runtime": "tir"}
U55 = "ethos-u,llvm"


def smallest_budget(name, target=U55, **kw):
    """The smallest memory any schedule needs: what an impossible budget reports."""
    with pytest.raises(tvm_ethos.MemoryBudgetError) as info:
        tvm_ethos.compile(tvm_ethos.load_model(model_path(name)), target=target, budget=1, **kw)
    assert info.value.budget == 1 and info.value.minimum > 1
    return info.value.minimum


def check_report(cm, budget=None):
    rep = cm.plan_report
    assert rep["planned"] is True
    subs = [s for s in rep["subgraphs"].values() if s.get("planned")]
    assert subs
    for sub in subs:
        assert sub["planned_bytes"] == sub["scheduled_bytes"], sub
        assert sub["planned_peak_bytes"] == sub["scheduled_peak_bytes"] == sub["peak_memory_bytes"]
        assert all(p["planned_bytes"] == p["scheduled_bytes"] for p in sub["plans"])
        if budget is not None:
            assert sub["peak_memory_bytes"] <= budget
    assert rep["peak_memory_bytes"] == max(s["peak_memory_bytes"] for s in subs)
    assert rep["cycles"] == sum(s["cycles"] for s in subs)
    npu_ops = sum(v for k, v in cm.partition_summary.items() if k.startswith("ethos"))
    assert len(rep["layers"]) == npu_ops  # one row per Part = per NPU operator here
    for row in rep["layers"]:
        assert {"cascade", "part", "operator", "stripe", "stripes", "buffer", "region", "bytes",
                "cycles", "subgraph"} <= set(row)
    return rep


def test_smallest_budget_is_bit_exact_and_reported(tmp_path):
    name = "resnet8_cifar"
    budget = smallest_budget(name)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model_path(name)), target=U55, budget=budget,
                           **EMULATOR)
    rep = check_report(cm, budget)
    assert rep["peak_memory_bytes"] == budget
    assert any(r["stripes"] > 1 for r in rep["layers"]), "the smallest schedule cascades"
    # line-buffer cascades by default (rfcs/0005 section 4), recompute where none rolls
    (sub,) = rep["subgraphs"].values()
    assert {"rolling(g=1)", "recompute"} <= {p["buffering"] for p in sub["plans"]}
    assert any(r["buffer"] == "rolling" for r in rep["layers"])
    assert_bit_exact(cm, model_path(name), n_inputs=2)
    table = cm.plan_table
    assert "l0_conv2d" in table and "recompute" in table and f"{budget:,} B" in table
    # saved and loaded with the model
    again = tvm_ethos.load(cm.save(tmp_path / "r8.tvmethos"))
    assert again.plan_report == rep
    assert again.plan_table == table


def test_impossible_budget_stops_compilation():
    t0 = time.time()
    with pytest.raises(tvm_ethos.MemoryBudgetError) as info:
        tvm_ethos.compile(tvm_ethos.load_model(model_path("ds_cnn_kws")), target=U55,
                          budget="10KiB")
    err = info.value
    assert isinstance(err, tvm_ethos.TvmEthosError)
    assert "10240 bytes" in str(err) and f"{err.minimum} bytes" in str(err)
    assert err.minimum > 10240 and err.subgraph == "tvm_ethos_ethos_u_sg0"
    assert time.time() - t0 < 60  # stopped at planning, before any build


def test_sram_pool_size_is_a_budget():
    with pytest.raises(tvm_ethos.MemoryBudgetError, match="budget of 12000 bytes"):
        tvm_ethos.compile(tvm_ethos.load_model(model_path("ds_cnn_kws")), target=U55,
                          memory_pools=["sram:12000:read_bw=8:write_bw=8"])


@pytest.mark.parametrize("kwargs,match", [
    (dict(budget="300 parsecs"), "option 'budget'"),
    (dict(budget=-5), "option 'budget'"),
    (dict(budget=True), "not a memory size"),
    (dict(memory_pools="sram"), "name:size"),
    (dict(memory_pools="sram:1MiB:speed=9"), "unknown key 'speed'"),
    (dict(memory_pools="sram:1MiB:burst=0"), "burst"),
    (dict(memory_pools="sram:1MiB:read_bw=-1"), "read_bw"),
    (dict(memory_pools=["sram:1MiB", "sram:2MiB"]), "given twice"),
    (dict(memory_pools="sram2:1MiB"), "has no memory 'sram2'.*sram"),
    (dict(planner_options={"rolling_granules": (0,)}), "rolling_granules=\\(0,\\).*line-buffer"),
    (dict(planner_options={"rolling_granules": 1}), "rolling_granules=1"),
    (dict(planner_options={"rolling_mixed": True}), "rolling_mixed=True is a planner study"),
    (dict(planner_options={"weight_prefetch": True}), "weight_prefetch=True .*crosses Plans"),
    (dict(planner_options={"max_plan_size": 0}), "max_plan_size"),
    (dict(planner_options={"stripe_factorz": 3}), "unknown planner option 'stripe_factorz'"),
    (dict(planner_options=[1]), "planner_options"),
    (dict(plan="yes"), "option 'plan'"),
    (dict(plan=False, budget="1MiB"), "need plan=True"),
])
def test_options_are_validated_up_front(kwargs, match):
    t0 = time.time()
    with pytest.raises(tvm_ethos.OptionError, match=match):
        tvm_ethos.compile(tvm_ethos.load_model(model_path("ds_cnn_kws")), target=U55, **kwargs)
    assert time.time() - t0 < 10  # before partitioning and building


def test_budget_on_an_accelerator_without_a_model_is_refused():
    with pytest.raises(tvm_ethos.OptionError, match="no model of this accelerator"):
        tvm_ethos.compile(tvm_ethos.load_model(model_path("ds_cnn_kws")),
                          target="ethos-u -accelerator_config=ethos-u85-256,llvm", budget="1MiB")


def test_memory_pools_map_to_planner_regions():
    from planner.devices import get_device
    from planner.options import PlannerOptions
    from planner.proposals import ProposalSearch
    from planner.tflite import load_tflite

    tl = tvm_ethos.parse_targets("ethos-u -accelerator_config=ethos-u55-64,llvm")
    opts = cascade.planning_options({"memory_pools": [
        "sram:200KiB:read_bw=4:write_bw=4:read_latency=10:write_latency=12:burst=64",
        {"name": "flash", "size": "4MiB", "read_bandwidth": 0.5}]})
    (spec,) = tl.accelerators
    dev = cascade.make_device(spec, opts)
    base = get_device("ethos-u55-64")
    sram, flash = dev.region("sram"), dev.region("flash")
    assert (sram.size, sram.read_bytes_per_cycle, sram.write_bytes_per_cycle, sram.read_latency,
            sram.write_latency, sram.burst) == (200 * 1024, 4.0, 4.0, 10, 12, 64)
    assert (flash.size, flash.read_bytes_per_cycle) == (4 << 20, 0.5)
    assert flash.burst == base.region("flash").burst  # unspecified fields keep the default
    assert dev.perf.fm_timing != base.perf.fm_timing  # the cost model sees the new memories
    g = load_tflite(model_path("ds_cnn_kws"))
    o = PlannerOptions(rolling_granules=())
    slow = ProposalSearch(g, dev, o).select(None).cycles
    fast = ProposalSearch(g, base, o).select(None).cycles
    assert slow > fast
    assert cascade.budget_for(opts, dev) == (200 * 1024, "the sram size given for this target")
    assert (
        cascade.budget_for(
            cascade.planning_options({"budget": "100KiB", "memory_pools": "sram:200KiB"}), dev
        )[0]
        == 102400
    )


def test_devices_follow_the_target_options():
    tl = tvm_ethos.parse_targets("ethos-n -tops=4,ethos-u -accelerator_config=ethos-u65-256,llvm")
    opts = cascade.planning_options({})
    devs = cascade.check_devices(tl, opts)
    assert devs["ethos-n"].name == "ethos-n78-4tops"
    assert devs["ethos-u"].name == "ethos-u65-256"
    assert opts.planner.rolling_granules == (1,)      # line-buffer cascades
    assert opts.planner.rolling_mixed is False
    assert opts.planner.lockstep_rolling == "prologue"  # the compile path's default
    none = cascade.planning_options({"planner_options": {"rolling_granules": ()}})
    assert none.planner.rolling_granules == ()
    off = cascade.planning_options({"planner_options": {"lockstep_rolling": False}})
    assert off.planner.lockstep_rolling is False
    tl = tvm_ethos.parse_targets("ethos-n -sram_size=65536,llvm")
    assert cascade.check_devices(tl, opts)["ethos-n"].region("sram").size == 65536


def test_plan_false_compiles_unscheduled():
    cm = tvm_ethos.compile(tvm_ethos.load_model(model_path("ds_cnn_kws")), target=U55, plan=False,
                           **EMULATOR)
    assert cm.plan_report["planned"] is False and not cm.plan_report["layers"]
    assert "off" in cm.plan_table
    assert_bit_exact(cm, model_path("ds_cnn_kws"), n_inputs=1)


# ----------------------------------------------------------------------------- every model
MODELS = ["ds_cnn_kws", "resnet8_cifar", "mobilenet_v1_0.25_96"]


@pytest.mark.slow
@pytest.mark.parametrize("target", ["ethos-u,llvm", "ethos-n,llvm"])
@pytest.mark.parametrize("name", MODELS)
def test_every_model_bit_exact_at_generous_tight_and_smallest_budgets(name, target):
    path = model_path(name)
    mod = tvm_ethos.load_model(path)
    generous = tvm_ethos.compile(mod, target=target, **EMULATOR)  # no budget: the fastest one
    rep = check_report(generous)
    assert_bit_exact(generous, path, n_inputs=2)
    (sym, sub), = [(k, v) for k, v in rep["subgraphs"].items() if v.get("planned")][:1]
    front = sub["frontier"]
    smallest = front[0]["memory_bytes"]
    tight = front[len(front) // 2]["memory_bytes"]
    for budget in (tight, smallest):
        cm = tvm_ethos.compile(mod, target=target, budget=budget, **EMULATOR)
        check_report(cm, budget)
        assert_bit_exact(cm, path, n_inputs=2)


@pytest.mark.slow
def test_mobilenet_224_within_300_kib_bit_exact():
    path = model_path("mobilenet_v1_1.0_224")
    cm = tvm_ethos.compile(tvm_ethos.load_model(path), target=U55, budget="300KiB",
                           planner_options={"max_width_tiles": 16}, **EMULATOR)
    rep = check_report(cm, 300 * 1024)
    assert rep["peak_memory_bytes"] <= 300 * 1024
    # the reference kernels abort on this model in this ai-edge-litert build (rfcs/0002)
    assert_bit_exact(cm, path, n_inputs=1, reference=False)
