"""An Ethos-U65's network inputs and outputs read and written in place in the DRAM arena, as
Vela 5.2's Dedicated_Sram mode places them: the compile path plans with them in DRAM
(``backends.planner_device.planning_device``) and the stream addresses them in region 1
while the plan's SRAM is the fast scratch (region 2); on an Ethos-U55 they stay in its SRAM
arena."""

import numpy as np
import pytest
from graph_builder import Graph
from hypothesis import given, settings
from hypothesis import strategies as st
from test_stream_cascade import LAYERS, _chain, compile_on_frontier

import tvm_ethos
from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.tflite_oracle import oracle, random_inputs, tflm_oracle, tflm_random_inputs
from tvm_ethos.backends.planner_device import network_io_region, planning_device

pytest.importorskip("ethosu.vela")

U65 = "ethos-u -accelerator_config=ethos-u65-256,llvm"


def _io_bytes(model_cm) -> int:
    return sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize
               for t in list(model_cm.inputs) + list(model_cm.outputs))


def test_the_compile_path_plans_io_where_vela_puts_it():
    for name, io in (("ethos-u55-128", "sram"), ("ethos-u55-256", "sram"),
                     ("ethos-u65-256", "dram"), ("ethos-u65-512", "dram"),
                     ("ethos-n78-1tops", "sram")):
        assert network_io_region(name) == io
        dev = planning_device(name)
        assert dev.io_region == io
        assert dev.io_read_in_place == name.startswith("ethos-u")


@given(seed=st.integers(0, 2**16), h=st.integers(8, 20), w=st.integers(3, 10),
       c=st.integers(1, 8), layers=st.lists(LAYERS, min_size=1, max_size=3),
       where=st.floats(0, 1))
@settings(max_examples=6, deadline=None)
@pytest.mark.slow
def test_u65_streams_keep_io_in_the_arena_and_are_exact(seed, h, w, c, layers, where):
    """Any small chain at any point of its frontier on an Ethos-U65: the fast scratch holds
    exactly the plan's peak, which counts no input or output; the arena holds only the
    inputs and outputs (each on 16 bytes); no operation copies them; outputs are LiteRT's."""
    model = _chain(seed, h, w, c, layers)
    cm, budget, entry = compile_on_frontier(model, U65, where)
    assert entry["sram_region"] == 2
    assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"] <= budget
    (payload,) = cm.program.payloads.values()
    arena = sum(-(-int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize // 16) * 16
                for t in payload.inputs + payload.outputs)
    assert payload.scratch_bytes == arena
    assert entry["scratch_high_water_bytes"] <= arena
    xs = random_inputs(model, np.random.RandomState(seed))
    ref = oracle(model, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)


def _conv_chain():
    g = Graph(np.random.RandomState(7))
    x = g.input((1, 24, 12, 4))
    y = g.conv2d(g.conv2d(g.conv2d(x, 8, act="relu"), 8, act="relu"), 4)
    return g.build([y])


def test_u65_sram_is_below_the_io_in_sram_plan_and_the_u55_keeps_io_in_sram():
    """The smallest plan on an Ethos-U65 keeps less in SRAM than with the network's input
    and output there (their bytes); on an Ethos-U55 the arena is the SRAM and holds them."""
    model = _conv_chain()
    u65 = tvm_ethos.compile(model, U65, npu_runtime="stream", cache_dir=False,
                            budget="smallest")
    (e65,) = u65.plan_report["streams"].values()
    u55 = tvm_ethos.compile(model, "ethos-u -accelerator_config=ethos-u55-256,llvm",
                            npu_runtime="stream", cache_dir=False, budget="smallest")
    (e55,) = u55.plan_report["streams"].values()
    assert e55["sram_region"] == 1 and e55["fast_scratch_bytes"] == 0
    assert e55["sram_high_water_bytes"] == e55["planned_peak_bytes"] >= _io_bytes(u55)
    assert e65["sram_high_water_bytes"] == e65["planned_peak_bytes"]
    assert e65["sram_high_water_bytes"] < e55["sram_high_water_bytes"]
    assert "NPU_OP_POOL" not in e65["commands"]      # no copy in or out


def test_u65_exported_tflite_reads_io_in_the_arena_exactly(tmp_path):
    """The ``.tflite`` for TFLite Micro: its ethos-u operator's streams on the functional
    model give TFLite Micro's outputs of the source."""
    model = _conv_chain()
    cm = tvm_ethos.compile(model, U65, cache_dir=False, budget="smallest")
    exported = open(cm.export_tflite(tmp_path / "m.tflite"), "rb").read()
    xs = tflm_random_inputs(model, np.random.RandomState(5))
    got, _ = run_vela_model(exported, xs, "ethos-u65-256")
    for g, want in zip(got, tflm_oracle(model, xs)):
        np.testing.assert_array_equal(np.asarray(g).reshape(want.shape), want)
