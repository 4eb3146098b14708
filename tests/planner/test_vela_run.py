"""planner.vela_run: one way to run Vela and read its CSVs, and one clear error when it fails."""
from __future__ import annotations

from pathlib import Path

import pytest

from planner.errors import PlannerError
from planner.vela_run import VelaError, run_vela, vela_available, vela_point

needs_vela = pytest.mark.skipif(not vela_available(),
                                reason="Vela (ethos-u-vela 5.2.0) is not installed")


def test_unknown_optimise_strategy_is_named():
    with pytest.raises(PlannerError, match="--optimise must be one of .*'Fast'"):
        vela_point("any.tflite", "ethos-u55-128", "Fast")


@needs_vela
def test_a_failed_run_names_the_model_and_vela_s_last_line(tmp_path):
    missing = str(tmp_path / "absent.tflite")
    with pytest.raises(VelaError, match=r"vela absent\.tflite ethos-u55-128 .*exit 1: .*absent"):
        run_vela(missing, "ethos-u55-128", "--optimise", "Size")
    point = vela_point(missing, "ethos-u55-128", "Size")
    assert set(point) == {"error"} and "absent.tflite" in point["error"]


@needs_vela
def test_summary_and_per_layer_report_read_from_one_run(models_dir: Path):
    model = models_dir / "mobilenet_v1_0.25_96.tflite"
    if not model.exists():
        pytest.skip(f"{model} not found")
    run = run_vela(str(model), "ethos-u55-128", "--optimise", "Size", "--verbose-performance")
    point = vela_point(str(model), "ethos-u55-128", "Size")
    assert (point["sram_bytes"], point["cycles"]) == (run.sram_bytes, run.cycles)
    assert run.sram_bytes % 16 == 0 and run.cycles > 0
    # every operator with cycles is a row; the network's cycles are at least any one layer's
    assert run.layers and all(float(r["Op Cycles"]) <= run.cycles for r in run.layers)
    plain = run_vela(str(model), "ethos-u55-128", "--optimise", "Size")
    assert plain.layers == [] and plain.cycles == run.cycles
    # the .tflite Vela wrote comes back (a TFLite flatbuffer: identifier at bytes 4..8)
    assert run.tflite[4:8] == b"TFL3" and plain.tflite == run.tflite
