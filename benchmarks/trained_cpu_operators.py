"""Operators left on the CPU by tvm-ethos's ``ethos-u`` .tflite and by Vela 5.2, per trained
model of ``tflite-micro/`` and accelerator, and whether the .tflite's outputs equal TFLite
Micro's on random inputs (models without state tensors; the NPU outputs are emulated).

    TVM_ETHOS_MODELS=../shared/models python benchmarks/trained_cpu_operators.py
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import tflite

import tvm_ethos
from planner.vela_run import run_vela
from tests.helpers.tflite_oracle import tflm_oracle, tflm_random_inputs

MODELS = ("hello_world_int8", "micro_speech_quantized", "person_detect", "trained_lstm_int8",
          "keyword_scrambled_8bit")
ACCELERATORS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")


def vela_cpu_operators(path: Path, accelerator: str) -> int:
    text = run_vela(str(path), accelerator).stdout
    return int(re.search(r"CPU operators = (\d+)", text).group(1))


def stateful(data: bytes) -> bool:
    g = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    return any(g.Tensors(t).IsVariable() for t in range(g.TensorsLength()))


def main() -> None:
    root = Path(os.environ.get("TVM_ETHOS_MODELS", "../shared/models")) / "tflite-micro"
    print(f"{'model':24} {'accelerator':14} {'ours':>5} {'vela':>5}  equal to TFLite Micro")
    for name in MODELS:
        path = root / f"{name}.tflite"
        data = path.read_bytes()
        for acc in ACCELERATORS:
            cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={acc}", cache_dir=False)
            ours = sum(p.placed_on != "ethos-u" for p in cm.placement)
            equal = "n/a (state tensors)"
            if not stateful(data):
                rs = np.random.RandomState(0)
                runs = [tflm_random_inputs(data, rs) for _ in range(3)]
                equal = str(all(
                    np.array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)
                    for xs in runs for ref in [tflm_oracle(data, xs)[0]]))
            print(f"{name:24} {acc:14} {ours:5d} {vela_cpu_operators(path, acc):5d}  {equal}",
                  flush=True)


if __name__ == "__main__":
    main()
