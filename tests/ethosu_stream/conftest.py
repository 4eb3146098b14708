"""Vela's own compiled models, shared by the tests that run them."""
import csv
import subprocess
import sys
from pathlib import Path

import pytest

VELA = Path(sys.executable).parent / "vela"


@pytest.fixture(scope="session")
def vela_out(tmp_path_factory, models_dir):
    """(model, config, optimise) -> (Vela .tflite bytes, summary row); each compiled once a
    session."""
    root = tmp_path_factory.mktemp("vela")
    cache = {}

    def compile_(model, config, optimise="Performance"):
        key = model, config, optimise
        if key not in cache:
            out = root / config / optimise
            subprocess.run([str(VELA), str(models_dir / f"{model}.tflite"), "--accelerator-config",
                            config, "--optimise", optimise, "--output-dir", str(out)],
                           check=True, capture_output=True)
            summary = next(out.glob(f"{model}_summary_*.csv"))
            cache[key] = ((out / f"{model}_vela.tflite").read_bytes(),
                          next(csv.DictReader(summary.open())))
        return cache[key]

    return compile_
