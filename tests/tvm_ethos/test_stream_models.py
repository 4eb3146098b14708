"""Every shipped model wholly through its generated command stream (``npu_runtime="stream"``)
on the functional model, bit-exact with LiteRT BUILTIN_REF on ethos-u55-128, ethos-u55-256
and ethos-u65-256, for the fastest plan, a tight budget and the smallest budget; the stream
executes the plan (stripes, rings, its arena layout), so its scratch high-water mark is the
plan's peak. Each model is compiled once per configuration and budget (module-scoped cache).

The random-weight models saturate: ds_cnn_kws's and the MobileNets' outputs, even the
MobileNets' logits and MEAN inputs, are the same for every input. So the intermediate tensors
are checked too: every box a pool or depthwise operation of the stream reads (a stripe's
window, or the whole tensor) must be a box of a tensor feeding a DEPTHWISE_CONV_2D,
AVERAGE_POOL_2D, MEAN or SOFTMAX in LiteRT, bit for bit, every such tensor must be read, and
some of them must follow the input."""

import time

import numpy as np
import pytest

import tvm_ethos
from ethosu_stream.feature_map import from_registers
from ethosu_stream.ops_common import ifm_hw, kernel, ofm_shape
from tests.helpers.models import model_path
from tvm_ethos.backends.ethos_u.stream_run import run_payload

pytest.importorskip("ethosu.vela")

CONFIGS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")
MODELS = ("ds_cnn_kws", "resnet8_cifar", "mobilenet_v1_0.25_96")


@pytest.fixture(scope="module")
def compiled():
    """``get(name, config, budget)``: budget None (the fastest plan), "tight" (a third of the
    way along the memory/cycles frontier) or "smallest" (the frontier's smallest memory)."""
    cache = {}

    def get(name, config, budget=None):
        if budget in ("tight", "smallest"):
            (sub,) = get(name, config).plan_report["subgraphs"].values()
            front = sub["frontier"]
            budget = front[len(front) // 3 if budget == "tight" else 0]["memory_bytes"]
        if (name, config, budget) not in cache:
            t0 = time.perf_counter()
            cm = tvm_ethos.compile(str(model_path(name)),
                                   f"ethos-u -accelerator_config={config},llvm",
                                   npu_runtime="stream", cache_dir=False, budget=budget)
            cache[name, config, budget] = cm, time.perf_counter() - t0
        return cache[name, config, budget][0]

    return get


#: operators whose input the stream reads whole with a pool or a depthwise convolution
WINDOWED = ("DEPTHWISE_CONV_2D", "AVERAGE_POOL_2D", "MEAN", "SOFTMAX")


def _reference(path, x):
    """LiteRT BUILTIN_REF's outputs and the tensors feeding the WINDOWED operators."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_path=str(path), experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    outs = [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]
    fed = [it.get_tensor(op["inputs"][0]).copy() for op in it._get_ops_details()
           if op["op_name"] in WINDOWED]
    return outs, fed


def _window_inputs(payload, x):
    """The stream's outputs and the int8 IFM box of every pool and depthwise convolution it
    runs (what each one reads, height x width x depth)."""
    seen = []

    def keep(cmd, state, mem):
        ifm = from_registers(state, "IFM")
        if cmd.name not in ("NPU_OP_POOL", "NPU_OP_DEPTHWISE") or ifm.dtype != np.int8:
            return
        if state.param("IFM_REGION") != state.param("OFM_REGION"):
            return   # an Ethos-U65's io copy between the arena and the fast scratch
        h, w, c = ofm_shape(state)
        ih, iw = ifm_hw(state, kernel(state), (h, w))
        seen.append(mem.read(ifm.region, ifm.grid(ih, iw, c), np.int8).reshape(ih, iw, c))

    outs, _ = run_payload(payload, [x], keep)
    return outs, seen


def _box_of(read, tensors) -> int | None:
    """The index of a tensor (NHWC or rows x depth) of which ``read`` is a box (all channels,
    or 16-channel slices), else None."""
    ih, iw, c = read.shape
    for k, t in enumerate(tensors):
        t3 = t.reshape(-1, t.shape[-1])[None] if t.ndim < 4 else t[0]
        if t3.shape[2] * t3.shape[1] * t3.shape[0] == read.size and t3.size == read.size:
            if np.array_equal(t3.ravel(), read.ravel()):
                return k
            continue
        if t3.shape[2] < c or t3.shape[0] < ih or t3.shape[1] < iw:
            continue
        # a depthwise operation whose weights are staged reads slices of 16 channels
        for c0 in range(0, t3.shape[2] - c + 1, 16):
            t3c = t3[:, :, c0:c0 + c]
            # candidate corners: where the read's first element vector sits in the tensor
            hits = np.argwhere(np.all(t3c[: t3.shape[0] - ih + 1, : t3.shape[1] - iw + 1]
                                      == read[0, 0], axis=-1))
            for y, x in hits[:64]:
                if np.array_equal(t3c[y:y + ih, x:x + iw], read):
                    return k
    return None


def _check_windows(reads, fed):
    """Every read is a box of a tensor LiteRT feeds a windowed operator; every such tensor
    is read."""
    found = set()
    for r in reads:
        k = _box_of(r, fed)
        assert k is not None, f"a {r.shape} read matches no LiteRT tensor"
        found.add(k)
    assert found == set(range(len(fed)))


#: the default suite runs each model on one configuration and each configuration once; every
#: other pair is in the slow suite
DEFAULT_PAIRS = {("mobilenet_v1_0.25_96", "ethos-u55-128"), ("ds_cnn_kws", "ethos-u55-256"),
                 ("resnet8_cifar", "ethos-u65-256")}


@pytest.mark.parametrize("name, config", [
    (n, c) if (n, c) in DEFAULT_PAIRS else pytest.param(n, c, marks=pytest.mark.slow)
    for n in MODELS for c in CONFIGS])
def test_model_runs_wholly_through_its_stream(compiled, name, config):
    cm = compiled(name, config)
    assert list(cm.partition_summary) == ["ethos-u"], cm.partition_summary
    (sym, entry), = cm.plan_report["streams"].items()
    assert entry["generated"] and entry["schedule"] == "plan", entry
    # the plan's peak: what the stream touches, and reserved weight bytes above it
    assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
        == entry["planned_peak_bytes"], entry
    payload = cm.program.payloads[sym]
    rs = np.random.RandomState(0)
    checked = []
    for _ in range(2):
        x = rs.randint(-128, 128, [int(s) for s in cm.inputs[0].shape]).astype(np.int8)
        ref, fed = _reference(model_path(name), x)
        got = cm.run(x)
        assert any(t.startswith("stream ") for t in cm.last_run_stats.trace)
        np.testing.assert_array_equal(got[0].reshape(ref[0].shape), ref[0])
        _, reads = _window_inputs(payload, x)
        _check_windows(reads, fed)
        checked.append(fed)
    assert any(not np.array_equal(a, b) for a, b in zip(*checked))  # they follow the input
    # the compile-time report comes from a dry run: a full run does what it says
    _, full = run_payload(payload, [x])
    assert run_payload(payload, [x], compute=False)[1] == full
    assert (entry["macs"], entry["scratch_high_water_bytes"], entry["commands"]) == \
        (full.macs, full.high_water[1], full.commands)
    assert entry["dma_bytes"] == {f"{s}->{d}": n for (s, d), n in full.dma_bytes.items()}


def test_resnet8_outputs_follow_the_input(compiled):
    cm = compiled("resnet8_cifar", "ethos-u55-128")
    rs = np.random.RandomState(3)
    a, b = (cm.run(rs.randint(-128, 128, (1, 32, 32, 3)).astype(np.int8))[0] for _ in range(2))
    assert not np.array_equal(a, b)


@pytest.mark.slow
def test_mobilenet_224_runs_wholly_through_its_stream(compiled):
    """Planned within 250 KiB. LiteRT's reference kernels abort on the 224x224 model in this
    build; its optimized
    kernels (no XNNPack) round MEAN unlike the reference MEAN the stream reproduces, so the
    final output is compared with them (the softmax of random weights hides that 1 LSB) and
    the tensor feeding MEAN is checked bit for bit."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    name = "mobilenet_v1_1.0_224"
    cm = compiled(name, "ethos-u55-128", "250KiB")
    (sym, entry), = cm.plan_report["streams"].items()
    assert entry["generated"] and entry["schedule"] == "plan", entry
    # issue 15's goal: at most 300 KiB of SRAM touched
    assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"] <= 300 * 1024
    x = np.random.RandomState(0).randint(-128, 128, (1, 224, 224, 3)).astype(np.int8)
    it = Interpreter(model_path=str(model_path(name)),
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                     experimental_preserve_all_tensors=True)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    want = it.get_tensor(it.get_output_details()[0]["index"])
    mean_in = it.get_tensor([op for op in it._get_ops_details()
                             if op["op_name"] == "MEAN"][-1]["inputs"][0])
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)
    seen = []

    def keep(cmd, state, mem):
        ifm = from_registers(state, "IFM")
        if cmd.name == "NPU_OP_DEPTHWISE" and ifm.dtype == np.int8:
            h, w, c = ofm_shape(state)
            ih, iw = ifm_hw(state, kernel(state), (h, w))
            seen.append(mem.read(ifm.region, ifm.grid(ih, iw, c), np.int8).ravel())

    run_payload(cm.program.payloads[sym], [x], keep)
    assert any(np.array_equal(s, mean_in.ravel()) for s in seen)


def _streams_its_plan(cm, name, seed=5):
    """The stream executes the plan (its high-water mark, with reserved weight bytes above it,
    is the plan's peak) and is bit-exact
    with BUILTIN_REF, the tensors feeding windowed operators included."""
    (sym, entry), = cm.plan_report["streams"].items()
    assert entry["generated"] and entry["schedule"] == "plan" and entry["realizes_plan"], entry
    assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
        == entry["planned_peak_bytes"], entry
    x = np.random.RandomState(seed).randint(
        -128, 128, [int(s) for s in cm.inputs[0].shape]).astype(np.int8)
    ref, fed = _reference(model_path(name), x)
    np.testing.assert_array_equal(cm.run(x)[0].reshape(ref[0].shape), ref[0])
    _, reads = _window_inputs(cm.program.payloads[sym], x)
    _check_windows(reads, fed)
    return entry


@pytest.mark.parametrize("name", [   # one model in the default suite, the others slow
    m if m == "ds_cnn_kws" else pytest.param(m, marks=pytest.mark.slow) for m in MODELS])
def test_the_smallest_budget_streams_its_plan(compiled, name):
    _streams_its_plan(compiled(name, "ethos-u55-128", "smallest"), name)


@pytest.mark.slow
@pytest.mark.parametrize("budget", ["tight", "smallest"])
@pytest.mark.parametrize("config", CONFIGS)
@pytest.mark.parametrize("name", MODELS)
def test_budgets_stream_their_plans_on_every_config(compiled, name, config, budget):
    _streams_its_plan(compiled(name, config, budget), name)


def test_a_tight_budget_streams_its_own_plan(compiled):
    """A plan that fits 20 KiB is a stream of its own: striped and cascaded, more operations,
    within 20 KiB of scratch."""
    fastest = compiled("resnet8_cifar", "ethos-u55-128")
    tight = compiled("resnet8_cifar", "ethos-u55-128", "20KiB")
    entry = _streams_its_plan(tight, "resnet8_cifar")
    (sym, fast), = fastest.plan_report["streams"].items()
    assert entry["sram_high_water_bytes"] <= 20 * 1024 < fast["sram_high_water_bytes"]
    assert sum(entry["commands"].values()) > sum(fast["commands"].values())
    assert tight.program.payloads[sym] != fastest.program.payloads[sym]


@pytest.mark.parametrize("options, modes", [
    ({"rolling_granules": (), "lockstep_rolling": False}, {"recompute"}),
    # without a prologue: no longer the compile path's default, so in the slow suite
    pytest.param({"rolling_granules": (), "lockstep_rolling": True}, {"recompute", "lockstep"},
                 marks=pytest.mark.slow),
    ({"rolling_granules": (), "lockstep_rolling": "prologue"}, {"recompute", "lockstep"}),
], ids=["recompute", "lockstep", "lockstep-prologue"])
def test_every_cascade_form_streams_its_plan(options, modes):
    """RECOMPUTE windows and lockstep rings with and without the prologue (the compile
    path's default plans use line buffers), within 30 KiB."""
    cm = tvm_ethos.compile(str(model_path("resnet8_cifar")),
                           "ethos-u -accelerator_config=ethos-u55-128,llvm", budget="30KiB",
                           planner_options=options, npu_runtime="stream", cache_dir=False)
    (sub,) = cm.plan_report["subgraphs"].values()
    assert {p["buffering"] for p in sub["plans"]} == modes
    assert any(p["stripes"] > 1 and len(p["parts"]) > 1 for p in sub["plans"])
    _streams_its_plan(cm, "resnet8_cifar")
