"""``npu_runtime="stream"``: an Ethos-U subgraph runs as its generated command stream on the
functional model, bit-exact with TFLite's reference kernels; one the generator cannot express
keeps the emulator, and the plan report says why."""

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ops import CASES

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, random_inputs
from tvm_ethos.errors import OptionError

pytest.importorskip("ethosu.vela")


def _check(model, cm, runs=2):
    rs = np.random.RandomState(1)
    outs = []
    for _ in range(runs):
        xs = random_inputs(model, rs)
        got = cm.run(*xs)[0]
        ref = oracle(model, xs)[0]
        np.testing.assert_array_equal(got.reshape(ref.shape), ref)
        outs.append(ref)
    assert not np.array_equal(outs[0], outs[1])  # the output follows the input


@pytest.mark.parametrize(
    "make",
    [
        lambda rs: tb.conv2d(rs, stride=(2, 2), act="relu"),
        lambda rs: tb.conv2d(rs, depthwise=True, act="relu6"),
        lambda rs: tb.binary(rs, "add", b_shape=(1, 1, 1, 8)),
        lambda rs: tb.binary(rs, "mul"),
        lambda rs: tb.pool(rs, "max"),
    ],
    ids=["conv", "depthwise", "add-broadcast", "mul", "maxpool"],
)
def test_stream_runtime_bit_exact_with_tflite(make, tmp_path):
    model = make(np.random.RandomState(0))
    cm = tvm_ethos.compile(
        model,
        "ethos-u -accelerator_config=ethos-u55-256,llvm",
        npu_runtime="stream",
        cache_dir=False,
    )
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"]
    assert {"NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_ELEMENTWISE", "NPU_OP_POOL"} & set(
        entry["commands"]
    )
    # one operator, one whole-tensor Plan: the stream touches exactly the planned peak
    assert entry["realizes_plan"]
    assert entry["scratch_high_water_bytes"] == entry["planned_peak_bytes"]
    _check(model, cm)
    assert any(t.startswith("stream ") for t in cm.last_run_stats.trace)
    # saved and loaded, the stream goes with the model
    loaded = tvm_ethos.load(cm.save(tmp_path / "m.zip"))
    assert loaded.program.payloads == cm.program.payloads
    _check(model, loaded)


def test_the_stream_is_the_default_and_tir_keeps_the_emulator():
    model = tb.conv2d(np.random.RandomState(0))
    cm = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    _check(model, cm)
    assert any(t.startswith("stream ") for t in cm.last_run_stats.trace)
    cm = tvm_ethos.compile(model, "ethos-u,llvm", npu_runtime="tir", cache_dir=False)
    _check(model, cm)
    assert not any(t.startswith("stream ") for t in cm.last_run_stats.trace)


def test_the_plan_table_prints_what_the_stream_did():
    """The printed report carries the stream's figures from the JSON report, beside the plan."""
    import re

    cm = tvm_ethos.compile(tb.conv2d(np.random.RandomState(0)), "ethos-u,llvm", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    ops = sum(v for k, v in entry["commands"].items()
              if k in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL", "NPU_OP_ELEMENTWISE"))
    line = next(t for t in cm.plan_table.splitlines() if "command stream" in t)
    assert f"{entry['command_stream_bytes']:,} B, {ops:,} NPU operations (conv " in line
    assert f"flash {entry['flash_bytes']:,} B" in line
    found = re.search(r"scratch touched ([0-9,]+) B = the plan's peak; DMA none; ([0-9,]+) MACs",
                      cm.plan_table)
    assert found and int(found[1].replace(",", "")) == entry["planned_peak_bytes"]
    assert int(found[2].replace(",", "")) == entry["macs"] > 0
    blocks = next(t for t in cm.plan_table.splitlines() if "block configs: " in t)
    assert all(f"{why} {n:,}" in blocks for why, n in entry["block_configs"].items())


def _add_both_broadcast():
    """A model the NPU has no stream for: its elementwise operations broadcast the second
    operand only."""
    return tb.binary(np.random.RandomState(0), a_shape=(1, 1, 4, 8), b_shape=(1, 4, 1, 8))


def test_unsupported_operator_keeps_the_emulator_and_says_why():
    model = _add_both_broadcast()
    cm = tvm_ethos.compile(model, "ethos-u,llvm", npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert not entry["generated"] and "ADD" in entry["reason"]
    assert not cm.program.payloads
    assert "command stream: none, the subgraph runs on the emulator: " in cm.plan_table


def test_bad_npu_runtime_is_one_clear_error():
    with pytest.raises(OptionError, match="npu_runtime.*stream"):
        tvm_ethos.compile(
            tb.conv2d(np.random.RandomState(0)), "ethos-u,llvm", npu_runtime="vela", cache_dir=False
        )


def test_stream_memory_must_equal_the_plan():
    from tvm_ethos.emulator.schedule import MemoryMismatchError
    from tvm_ethos.pipeline.streams import check_stream_memory

    entry = {"realizes_plan": True, "scratch_high_water_bytes": 784, "planned_peak_bytes": 776}
    with pytest.raises(MemoryMismatchError, match="784 B.*776 B"):
        check_stream_memory("sg0", entry)
    # no claim: a layer-by-layer stream of a cascaded plan, or SOFTMAX beyond the plan's memory
    check_stream_memory("sg0", dict(entry, realizes_plan=False))
    check_stream_memory("sg0", dict(entry, scratch_high_water_bytes=776))
    # reserved weight bytes the stream never touches, at the arena's top, are said, not hidden
    check_stream_memory("sg0", dict(entry, scratch_high_water_bytes=770, untouched_top_bytes=6))
    with pytest.raises(MemoryMismatchError, match="770 B.*below 8 B of reserved"):
        check_stream_memory("sg0", dict(entry, scratch_high_water_bytes=770,
                                        untouched_top_bytes=8))


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_operator_case_streams(case):
    """Each of test_ops.py's single-operator models has a stream (RESIZE_BILINEAR's 2x too,
    ``ops_resize``), exact."""
    import zlib

    model = CASES[case](np.random.RandomState(zlib.crc32(case.encode())))
    cm = tvm_ethos.compile(model, "ethos-u,llvm", npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    rs = np.random.RandomState(2)
    for _ in range(2):
        xs = random_inputs(model, rs)
        ref = oracle(model, xs)[0]
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)
    assert any(t.startswith("stream ") for t in cm.last_run_stats.trace)


@given(
    kind=st.sampled_from(["conv", "depthwise", "avg", "max"]),
    h=st.integers(3, 9),
    w=st.integers(3, 9),
    c=st.integers(2, 12),
    k=st.integers(1, 3),
    s=st.integers(1, 2),
    same=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=12, deadline=None)
def test_window_operators_stream_bit_exact_for_any_geometry(kind, h, w, c, k, s, same, seed):
    rs = np.random.RandomState(seed)
    padding = "SAME" if same else "VALID"
    if kind in ("conv", "depthwise"):
        model = tb.conv2d(
            rs,
            in_shape=(1, h, w, c),
            cout=int(rs.randint(1, 17)),
            kernel=(k, k),
            stride=(s, s),
            padding=padding,
            depthwise=kind == "depthwise",
        )
    else:
        model = tb.pool(
            rs, kind, in_shape=(1, h, w, c), size=(k, k), stride=(s, s), padding=padding
        )
    cm = tvm_ethos.compile(model, "ethos-u,llvm", npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    if entry["realizes_plan"]:
        assert entry["scratch_high_water_bytes"] == entry["planned_peak_bytes"]
    xs = random_inputs(model, rs)
    ref = oracle(model, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)


def _residual_block():
    from graph_builder import Graph

    g = Graph(np.random.RandomState(5))
    x = g.input((1, 12, 12, 8))
    a = g.conv2d(x, 16, act="relu")
    b = g.conv2d(a, 16, kernel=(3, 3), depthwise=True)
    c = g.conv2d(b, 8, kernel=(1, 1))
    y = g.add(c, x, act="relu")
    return g.build([g.pool("avg", g.pool("max", y), size=(6, 6), stride=(6, 6))])


@pytest.mark.parametrize("budget", [None, "system", "3KiB"], ids=["fastest", "system", "tight"])
def test_multi_operator_subgraph_streams_at_every_budget(budget):
    model = _residual_block()
    cm = tvm_ethos.compile(
        model,
        "ethos-u -accelerator_config=ethos-u65-256,llvm",
        budget=budget,
        npu_runtime="stream",
        cache_dir=False,
    )
    (entry,) = cm.plan_report["streams"].values()
    # one ADD per stripe of its Plan
    assert entry["generated"] and entry["commands"]["NPU_OP_ELEMENTWISE"] >= 1
    assert entry["realizes_plan"] and entry["schedule"] == "plan"
    if entry["realizes_plan"]:
        # the plan's SRAM is the Ethos-U65's fast scratch; the arena holds only the io
        assert entry["sram_region"] == 2
        assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"]
    _check(model, cm)


def test_a_stream_vela_or_the_npu_cannot_make_keeps_the_emulator(monkeypatch):
    from tvm_ethos.backends.ethos_u import stream_cascade, stream_gen

    # an ADD broadcasting both operands: the NPU broadcasts the second one only
    both = tb.binary(np.random.RandomState(0), a_shape=(1, 1, 4, 8), b_shape=(1, 4, 1, 8))
    cm = tvm_ethos.compile(both, "ethos-u,llvm", npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert not entry["generated"] and "both operands broadcast" in entry["reason"]
    _check(both, cm)

    def refuse(*_args):
        raise AssertionError("a check inside Vela")

    monkeypatch.setattr(stream_gen, "generate", refuse)
    monkeypatch.setattr(stream_cascade, "generate_planned", refuse)
    model = tb.conv2d(np.random.RandomState(0))
    cm = tvm_ethos.compile(model, "ethos-u,llvm", npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert not entry["generated"] and "Vela's API refused" in entry["reason"]
    assert not cm.program.payloads
    _check(model, cm)
