"""A backend's whole contract is one class: every registered backend implements it, a new NPU
written in this file alone is partitioned, planned, run and offered on the command line, and
the README names exactly the methods to write."""
from __future__ import annotations

import dataclasses
import itertools
import os

import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact

import tvm_ethos
from ethos_arch.ops import Op
from planner.device_model import Device
from planner.devices import DEVICE_NAMES, ETHOS_U55
from tvm_ethos.backends import registry as R
from tvm_ethos.backends.base import (
    Capabilities,
    EmulatorLowering,
    HostBackend,
    HostOutput,
    LayerSupport,
    NpuBackend,
    OptionSpec,
)
from tvm_ethos.backends.npu_common import (
    NPU_CAPABILITIES,
    NpuCodegen,
    common_npu_checks,
    no_stream_lines,
)
from tvm_ethos.cli import main, parse_plan_target
from tvm_ethos.errors import OptionError

TOY = "toy-npu"
README = os.path.join(os.path.dirname(__file__), "..", "..", "..", "README.md")


class ToyNpu(NpuBackend):
    """A third NPU: convolutions only, planned as an Ethos-U55 of the chosen size, no stream."""

    backend_id = TOY
    device_options = ("config",)

    def options_schema(self):
        return {"config": OptionSpec("ethos-u55-128", allowed=ETHOS_U55, help="toy NPU size")}

    def layer_support(self):
        return LayerSupport({Op.CONV2D: lambda q, o: [], Op.DEPTHWISE_CONV2D: lambda q, o: []},
                            common=lambda q, o: common_npu_checks(q, o))

    def codegen_factory(self):
        return NpuCodegen(TOY)

    def capabilities(self):
        return NPU_CAPABILITIES

    def planner_device_name(self, options):
        return str(options.get("config", "ethos-u55-128"))

    def planner_sram_size(self, options):
        return None

    def planner_device_names(self):
        return ETHOS_U55

    def emulator_lowering(self):
        return EmulatorLowering()

    def command_stream(self, lowered, options, planned=None):
        return None

    def stream_report(self, payload, planned_peak):
        raise AssertionError("a backend without streams is never asked for a stream report")

    def stream_report_lines(self, entry):
        return no_stream_lines(entry)


@pytest.fixture
def toy_registry(monkeypatch):
    monkeypatch.delenv(R.PATH_ENV, raising=False)
    R.reset_registry()
    assert R.get_registry().register(TOY, ToyNpu)
    yield R.get_registry()
    R.reset_registry()


def _builtin_backends():
    reg = R.get_registry()
    return [reg.get(b) for b in R.BUILTIN_ENTRY_POINTS]


@pytest.mark.parametrize("bid", sorted(R.BUILTIN_ENTRY_POINTS))
def test_every_builtin_backend_implements_its_whole_contract(bid):
    backend = R.get_registry().get(bid)
    assert isinstance(backend, (NpuBackend, HostBackend)), type(backend).__mro__
    assert not type(backend).__abstractmethods__
    schema = backend.options_schema()
    assert all(isinstance(spec, OptionSpec) for spec in schema.values())
    assert isinstance(backend.layer_support(), LayerSupport)
    assert isinstance(backend.capabilities(), Capabilities)
    if isinstance(backend, HostBackend):
        assert backend.capabilities().is_host
        assert isinstance(backend.host_output(), HostOutput)
        assert (backend.codegen_factory() is None) == (backend.host_output() is HostOutput.TFLITE)
        return
    assert backend.capabilities().is_npu and not backend.capabilities().is_host
    assert set(backend.device_options) <= set(schema)
    assert set(backend.planner_device_names()) <= set(DEVICE_NAMES)
    assert isinstance(backend.emulator_lowering(), EmulatorLowering)
    assert backend.codegen_factory().name == bid
    defaults = {k: spec.default for k, spec in schema.items()}
    device = backend.planner_device(defaults)
    assert isinstance(device, Device) and device.name == backend.planner_device_name(defaults)
    assert backend.stream_report_lines({"generated": False, "reason": "why"}) == [
        "   command stream: none, the subgraph runs on the emulator: why"]


def test_planner_device_for_every_allowed_option_combination():
    """Brute force over every NPU's device options: a device exactly where the planner models
    the name the options give, and one named so."""
    seen = 0
    for backend in _builtin_backends():
        if not isinstance(backend, NpuBackend):
            continue
        schema = backend.options_schema()
        keys = backend.device_options
        for combo in itertools.product(*(schema[k].allowed for k in keys)):
            options = dict(zip(keys, combo))
            name = backend.planner_device_name(options)
            device = backend.planner_device(options)
            if name in backend.planner_device_names():
                assert device is not None and device.name == name
                assert not device.weight_prefetch    # the compile path's device
                seen += 1
            else:
                assert device is None, (backend, options)
    assert seen == len(DEVICE_NAMES)   # every planner device is some NPU's


def test_planner_device_applies_pools_and_names_a_bad_one():
    backend = R.get_registry().get("ethos-u")
    dev = backend.planner_device({"accelerator_config": "ethos-u55-64"},
                                 {"sram": {"size": 123456}})
    assert {r.name: r.size for r in dev.regions}["sram"] == 123456
    # a pool replaces its region's fields and nothing else of the device or its perf model
    plain = backend.planner_device({"accelerator_config": "ethos-u55-64"})
    same = dataclasses.replace(dev, regions=plain.regions, perf=plain.perf)
    assert same == plain and dev.perf.block_policy == plain.perf.block_policy
    assert dev.weights_read_in_place and dev.io_read_in_place
    with pytest.raises(OptionError, match="has no memory 'tcm'; its memories are sram"):
        backend.planner_device({"accelerator_config": "ethos-u55-64"}, {"tcm": {"size": 1}})
    n = R.get_registry().get("ethos-n")
    small = n.planner_device({"variant": "n78", "tops": 4, "sram_size": 65536})
    assert small.name == "ethos-n78-4tops"
    assert {r.name: r.size for r in small.regions}["sram"] == 65536


@pytest.mark.parametrize("missing", sorted(NpuBackend.__abstractmethods__))
def test_an_npu_missing_one_method_cannot_be_made(missing):
    partial = type("Partial", (NpuBackend,),
                   {k: v for k, v in vars(ToyNpu).items() if k != missing})
    with pytest.raises(TypeError, match=missing):
        partial()


def test_readme_lists_every_method_of_both_contracts():
    text = open(README).read()
    section = text[text.index("## Adding an NPU backend"):]
    section = section[:section.index("\n## ", 3)]
    for name in NpuBackend.__abstractmethods__ | HostBackend.__abstractmethods__:
        assert f"`{name}`" in section, name


def test_a_third_npu_in_one_class_is_partitioned_planned_and_run(toy_registry):
    """The toy NPU touches no file outside its class: it takes the convolution, the planner
    plans it on the Ethos-U55 device it names, exactly as it plans the same subgraph for
    ethos-u, and the emulator's result is TFLite's."""
    rs = np.random.RandomState(3)
    model = tb.conv2d(rs)
    mod = tvm_ethos.load_model(model)
    cm = tvm_ethos.compile(mod, target=f"{TOY} -config=ethos-u55-64,llvm")
    assert cm.partition_summary == {TOY: 1}
    [sub] = cm.plan_report["subgraphs"].values()
    assert sub["backend"] == TOY and sub["planned"] and sub["device"] == "ethos-u55-64"
    assert "streams" not in cm.plan_report
    assert "on ethos-u55-64" in cm.plan_table
    assert_bit_exact(cm, model, n_inputs=2)
    ref = tvm_ethos.compile(mod, target="ethos-u -accelerator_config=ethos-u55-64,llvm")
    [ref_sub] = ref.plan_report["subgraphs"].values()
    for key in ("cycles", "peak_memory_bytes", "plans"):
        assert sub[key] == ref_sub[key], key


def test_toy_options_are_checked_and_on_the_command_line(toy_registry, capsys):
    with pytest.raises(OptionError, match="option 'config' of target 'toy-npu'"):
        tvm_ethos.parse_targets(f"{TOY} -config=ethos-u65-256,llvm")
    assert parse_plan_target(f"{TOY},llvm", {TOY: {"config": "ethos-u55-32,ethos-u55-256"}}) \
        == ["ethos-u55-32", "ethos-u55-256"]
    for sub in ("compile", "plan"):
        assert main([sub, "--help"]) == 0
        out = capsys.readouterr().out
        assert "--target-toy-npu-config" in out and "toy NPU size" in out, sub
