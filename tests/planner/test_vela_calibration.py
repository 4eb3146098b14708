"""The cost model and the memory accounting against Vela 5.2.0, on the shipped small models.

Runs Vela (two compilations per model and configuration: cascading disabled, and
``--optimise Performance``) and compares every layer, matched to the planner's Parts from
``load_tflite`` by the tensor each writes. The comparison and its choices are in
``planner/vela_compare.py`` and rfcs/0001-appendix-cost-model.md ("Calibration against Vela").
The full table, MobileNetV1-224 included: ``.venv/bin/python benchmarks/vs_vela.py --layers``.
"""
from __future__ import annotations

import pytest

from planner.devices import get_device
from planner.options import PlannerOptions
from planner.perf.ethos_u import EthosUPerfModel
from planner.tflite import load_tflite
from planner.vela_compare import (
    GOAL_MEDIAN,
    GOAL_TOTAL,
    calibrate,
    calibration_table,
    layer_by_layer,
    layer_table,
    match_layers,
    run_vela_layers,
    vela_terms_peak,
)
from planner.vela_run import vela_available
from tests.helpers.models import MODELS_DIR as MODELS

#: The shipped models small enough to compile with Vela in a test, and the configurations
#: the cost model is calibrated on (benchmarks/vs_vela.py adds MobileNetV1-224).
SMALL_MODELS = ("mobilenet_v1_0.25_96", "ds_cnn_kws", "resnet8_cifar")
CONFIGS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")


pytestmark = [
    pytest.mark.skipif(not vela_available(),
                       reason="Vela (ethos-u-vela 5.2.0) is not installed: pip install '.[vela]'"),
    pytest.mark.skipif(not all((MODELS / f"{m}.tflite").exists() for m in SMALL_MODELS),
                       reason=f"shipped models not found in {MODELS} (set TVM_ETHOS_MODELS)"),
]

CASES = [(m, c) for m in SMALL_MODELS for c in CONFIGS]


@pytest.fixture(scope="module")
def calibrations(tmp_path_factory):
    work = tmp_path_factory.mktemp("vela")
    out = {}
    for model in SMALL_MODELS:
        graph = load_tflite(MODELS / f"{model}.tflite")
        for config in CONFIGS:
            out[model, config] = (graph, calibrate(str(MODELS / f"{model}.tflite"), config,
                                                   graph, work_dir=str(work)))
    print("\n" + calibration_table([c for _, c in out.values()]))
    return out


@pytest.mark.parametrize("model,config", CASES)
def test_every_part_matched_to_vela(calibrations, model, config):
    """Every Part Vela computes has its layers; the Parts Vela makes free are reshapes."""
    _, cal = calibrations[model, config]
    for r in cal.rows:
        assert (r.vela_npu > 0) == (r.kind != "reshape"), (r.part, r.kind)


@pytest.mark.parametrize("model,config", CASES)
def test_npu_cycles_meet_the_goal(calibrations, model, config):
    """Vela's NPU cycles per layer (cascading off) against ``compute_cycles`` of the whole
    output: median |error| <= 10 %, network total within 5 % (in fact: every layer within
    2 %, totals within 0.1 %)."""
    _, cal = calibrations[model, config]
    s = cal.npu
    assert s.median <= GOAL_MEDIAN and abs(s.total_error) <= GOAL_TOTAL, layer_table(cal)
    assert s.worst <= 0.02 and abs(s.total_error) <= 0.001, layer_table(cal)


@pytest.mark.parametrize("model,config", CASES)
def test_vela_performance_schedule_is_unstriped(calibrations, model, config):
    """The layer comparison needs Vela's Performance schedule to run every layer whole."""
    _, cal = calibrations[model, config]
    assert cal.striped == []


@pytest.mark.parametrize("model,config", CASES)
def test_layer_cycles(calibrations, model, config):
    """Vela's Op Cycles against the planner's charge for the layer run whole, judged on the
    Vela schedule whose dominant terms are the planner's (Performance on the U55, against the
    planner's fastest Proposal of unstriped one-Part Plans, weight prefetch included; cascading
    disabled on the U65, against ``part_cost`` with weights streamed once; see
    ``benchmarks/vs_vela.py``): median |error| <= 10 %, network total within 5 %, on every
    configuration. On ethos-u55-256 this needs the SRAM element-access term
    (``fm_access_bytes``) and, for ds_cnn_kws, the weight prefetch (next test)."""
    _, cal = calibrations[model, config]
    s = cal.layer
    assert s.median <= GOAL_MEDIAN and abs(s.total_error) <= GOAL_TOTAL, layer_table(cal)


def test_ds_cnn_pointwise_weights_are_prefetched_as_vela_does(calibrations):
    """ds_cnn_kws on ethos-u55-256 (the layer-level miss before the prefetch: median 10.73 %).
    Vela's Performance schedule copies each pointwise layer's weights into SRAM under the
    depthwise layer before it, so the layer costs its NPU cycles (3,960) and no flash read.
    The planner, streaming them, charges 4,544 (the 4,480-cycle flash read binds, plus 16 of
    issue overhead for each of the 4 operations its 64 channels run as, one per staged
    16-channel weight slice); with the prefetch it charges each of them 3,976 (the NPU's 3,960
    plus 16 of stripe overhead: one operation), and
    the first convolution, which has no predecessor to hide its read under, streams."""
    _, cal = calibrations["ds_cnn_kws", "ethos-u55-256"]
    rows = {r.part: r for r in cal.rows}
    for name in ("conv_2d_2", "conv_2d_4", "conv_2d_6", "conv_2d_8"):
        r = rows[name]
        assert r.vela_layer == 3960 and r.planner_layer == 4544, layer_table(cal)
        assert r.planner_layer_buffered == 3976, layer_table(cal)
    assert rows["conv_2d_0"].planner_layer_buffered == rows["conv_2d_0"].planner_layer
    assert cal.layer_perf.median <= 0.01, layer_table(cal)


@pytest.mark.parametrize("model,config", CASES)
def test_layer_by_layer_memory_in_vela_terms(calibrations, model, config):
    """The planner's peak without cascading, counted as Vela allocates (NHCWB16 channels
    rounded to 16, 16-byte alignment) and without the weights it holds in SRAM, is exactly
    Vela's "SRAM used" with cascading off. Vela's Performance figure adds its weight buffers:
    at most those of two consecutive operations (it prefetches the next one's). So does the
    planner's own figure: a Plan holds its Part's weights (prefetched whole, or a staging
    double buffer, only for a layer that reads its weights more than once, several OFM blocks
    in H x W: a layer reading them once needs none, as Vela allocates none for weights it does
    not buffer) and at most the next Part's, prefetched."""
    graph, cal = calibrations[model, config]
    device = get_device(config)
    lbl = layer_by_layer(graph, device)
    bare = vela_terms_peak(graph, device, lbl, weight_staging=False)
    assert bare == cal.vela_sram_no_cascade
    extra = cal.vela_sram_performance - bare
    pairs = [a + b for a, b in zip(cal.weight_buffers, cal.weight_buffers[1:])]
    assert 0 < extra <= max(pairs), (extra, cal.weight_buffers)
    from planner.plans import PlanGenerator
    from planner.stripes import StripeConfig
    own = vela_terms_peak(graph, device, lbl, align=1, brick=1)
    assert own == lbl.memory_bytes
    gen = PlanGenerator(graph, device, PlannerOptions())
    staged = [gen.weight_stage_bytes(p, StripeConfig.whole(p.output.shape))
              for p in graph.parts]
    bare_own = vela_terms_peak(graph, device, lbl, align=1, brick=1, weight_staging=False)
    topo = graph.topological_parts()
    held = [max(gen.weight_stage_bytes(p, StripeConfig.whole(p.output.shape)),
                sum(t.bytes for _, t in p.constant_inputs)) for p in topo] + [0]
    assert 0 <= own - bare_own <= max(a + b for a, b in zip(held, held[1:]))
    for p, n in zip(graph.parts, staged):
        once = device.perf.weight_fetches(p, p.output.shape) == 1
        assert (n == 0) == (once or not p.constant_inputs), p.name


MOBILENET = MODELS / "mobilenet_v1_1.0_224.tflite"


@pytest.mark.skipif(not MOBILENET.exists(), reason=f"{MOBILENET} not found")
def test_cascade_stripes_run_back_to_back_as_vela_reports_them(tmp_path):
    """Vela's Size schedule of MobileNetV1-224 on ethos-u55-128 cascades its first eight
    operations in 1- and 2-row stripes and reports each as one command over the whole OFM with
    the stripe's block: fill and drain paid once. The same stripes, each costed with the block
    Vela chooses for it (``block_policy="stripe"``) and run back to back
    (``fill_drain_cycles`` charged once), give Vela's NPU figure for every one of them."""
    run = run_vela_layers(str(MOBILENET), "ethos-u55-128", "--optimise", "Size",
                          work_dir=str(tmp_path))
    graph = load_tflite(MOBILENET)
    device = get_device("ethos-u55-128")
    model = EthosUPerfModel("ethos-u55-128", device.perf.fm_timing, device.perf.const_timing,
                            "stripe")
    parts = {p.output.name: p for p in graph.parts}
    cascaded = run.striped_ops
    assert len(cascaded) >= 8, cascaded
    checked = 0
    for (_, ofm, stripe), row in zip(cascaded, run.layers):
        part = parts[row["Name"]]
        assert part.output.shape == ofm
        n = ofm[1] // stripe[1]
        assert n * stripe[1] == ofm[1] and stripe[2:] == ofm[2:]
        fill = model.fill_drain_cycles(part, stripe)
        assert 0 < fill < model.compute_cycles(part, stripe)
        ours = n * (model.compute_cycles(part, stripe) - fill) + fill
        assert ours == int(float(row["NPU"])), (part.name, stripe, ours, row["NPU"])
        checked += 1
    assert checked == len(cascaded)
    assert match_layers(graph, run.layers)   # every row still names a Part
