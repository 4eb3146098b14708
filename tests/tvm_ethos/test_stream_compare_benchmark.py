"""benchmarks/stream_compare.py: Vela's stream and tvm-ethos's, both run on the functional
model, for a model both can put wholly on the NPU. The figures are read from the runs, so
they must agree with what the streams are known to do."""

import numpy as np
import pytest
from graph_builder import Graph

from benchmarks.stream_compare import compare, goal_lines, stream_table

pytest.importorskip("ethosu.vela")


def _model(tmp_path):
    g = Graph(np.random.RandomState(3))
    x = g.input((1, 12, 12, 8))
    a = g.conv2d(x, 16, act="relu")
    b = g.conv2d(a, 16, kernel=(3, 3), depthwise=True)
    path = tmp_path / "conv_dw.tflite"
    path.write_bytes(g.build([g.add(b, a)]))
    return str(path)


def test_both_streams_run_exact_and_report_what_they_did(tmp_path):
    rows = compare(_model(tmp_path), "ethos-u55-128")
    assert [r.who for r in rows] == ["vela Size", "vela Performance", "tvm-ethos"]
    for r in rows:
        assert not r.reason, r.reason
        assert r.exact is True
        # three NPU operations (conv, depthwise, add) at least, each a few register commands
        assert r.operations >= 3 and r.commands > r.operations
        # the weights and bias streams are in flash; the arena holds the 12x12 feature maps
        assert r.flash_bytes > 0 and r.arena_bytes >= 12 * 12 * 8
        assert r.compile_seconds > 0
    ours = rows[2]
    # tvm-ethos keeps its constants in flash; its only DMAs are the weights its plan holds in
    # SRAM (encoded streams into the arena), as its compile-time report counts them
    import tvm_ethos

    cm = tvm_ethos.compile(_model(tmp_path), "ethos-u -accelerator_config=ethos-u55-128,llvm",
                           npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert ours.fast_bytes == 0 and ours.dma_bytes == entry["weight_dma_bytes"]
    table = stream_table(rows)
    assert table.count(" yes") == 3 and "no stream" not in table
    # the goal is judged only for MobileNetV1-224 on ethos-u55-128
    assert goal_lines(rows) == []


def test_goal_and_missing_streams_are_reported_not_hidden():
    from benchmarks.stream_compare import StreamRow

    def row(who, arena, dma, reason=""):
        if reason:
            return StreamRow("mobilenet_v1_1.0_224", "ethos-u55-128", who, reason=reason)
        return StreamRow("mobilenet_v1_1.0_224", "ethos-u55-128", who, arena, 0, 1, dma, 1, 2,
                         1.0, True)

    size = row("vela Size", 200 * 1024, 1000)
    assert goal_lines([size, row("tvm-ethos", 300 * 1024, 1000)]) == [
        "SRAM touched 300.0 KiB (goal <= 300 KiB): met",
        "DMA 1.0 KiB vs Vela Size 1.0 KiB: met"]
    over = goal_lines([size, row("tvm-ethos", 300 * 1024 + 1, 1001)])
    assert [line.endswith("NOT met") for line in over] == [True, True]
    missing = [size, row("tvm-ethos", 0, 0, reason="SOFTMAX")]
    assert goal_lines(missing) == ["goal not judged: SOFTMAX"]
    assert "no stream: SOFTMAX" in stream_table(missing)
    # a row planned within the goal's budget is the one judged
    budgeted = [size, row("tvm-ethos", 900 * 1024, 1000), row("tvm-ethos 300KiB", 250 * 1024, 1)]
    assert [line.endswith(": met") for line in goal_lines(budgeted)] == [True, True]


def test_a_budget_adds_a_stream_planned_within_it(tmp_path):
    rows = compare(_model(tmp_path), "ethos-u55-128", budget="4KiB")
    assert [r.who for r in rows] == ["vela Size", "vela Performance", "tvm-ethos",
                                     "tvm-ethos 4KiB"]
    default, tight = rows[2:]
    assert not tight.reason and tight.exact is True
    assert tight.arena_bytes <= 4 * 1024 < default.arena_bytes
    assert tight.operations > default.operations   # one operation per stripe
    # a budget the default stream already meets adds nothing
    assert len(compare(_model(tmp_path), "ethos-u55-128", budget="1MiB")) == 3
