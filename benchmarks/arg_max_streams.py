"""ARG_MAX on the Ethos-U: tvm-ethos's stream beside Vela 5.2's, both on the functional model.

For each case (one ARG_MAX, and two convolutions before one), the model is compiled by
tvm-ethos (target ``ethos-u``, its default plan, written as a TFLite Micro file) and by Vela
(``--optimise Size``); both files run on the functional model (``ethosu_stream``) with the same
random input. Printed per file: the NPU operations and DMAs the streams ran, the flash they
carry, the arena bytes they touched (emulated) and whether the outputs equal TFLite's (TFLite
Micro for int8 -> int32; LiteRT's reference kernels for int64, which TFLite Micro refuses).

    PYTHONPATH=. python benchmarks/arg_max_streams.py [--accelerator ethos-u55-128]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

import tflite  # noqa: E402
import tflite_builder as tb  # noqa: E402

import tvm_ethos  # noqa: E402
from ethosu_stream.tflite_graph import run_vela_model  # noqa: E402
from planner.vela_run import run_vela  # noqa: E402
from tests.helpers.tflite_oracle import oracle, tflm_oracle  # noqa: E402

CASES = {
    "argmax 1x16x16x10": lambda: tb.arg_max((1, 16, 16, 10)),
    "argmax 1x8x8x127": lambda: tb.arg_max((1, 8, 8, 127)),
    "argmax 1x32x32x21 int64": lambda: tb.arg_max((1, 32, 32, 21), out="int64"),
    "conv conv argmax 24x20x16": lambda: tb.conv_arg_max(np.random.RandomState(0)),
}


def _ours_file(cm) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.tflite")
        cm.export_tflite(path)
        return Path(path).read_bytes()


def _vela_file(model: bytes, config: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.tflite")
        Path(path).write_bytes(model)
        return run_vela(path, config, "--optimise", "Size").tflite


def _row(name: str, who: str, data: bytes, model: bytes, x: np.ndarray, config: str) -> str:
    (got,), stats = run_vela_model(data, [x], config)
    reference = tflm_oracle if "int64" not in name else oracle
    (want,) = reference(model, [x])
    ops = sum(n for k, n in stats.commands.items() if k.startswith("NPU_OP_")
              and k not in ("NPU_OP_STOP", "NPU_OP_DMA_START", "NPU_OP_DMA_WAIT"))
    dma = stats.commands.get("NPU_OP_DMA_START", 0)
    flash = stats.high_water.get(0, 0)
    arena = stats.high_water.get(1, 0)
    equal = np.array_equal(got.reshape(want.shape), want)
    return (f"{name:28} {who:10} {ops:>7} {dma:>5} {flash:>9,} {arena:>10,} "
            f"{'yes' if equal else 'NO'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accelerator", default="ethos-u55-128")
    args = ap.parse_args()
    print(f"{'case':28} {'compiler':10} {'NPU ops':>7} {'DMAs':>5} {'flash B':>9} "
          f"{'arena B':>10} = TFLite")
    for name, build in CASES.items():
        model = build()
        rs = np.random.RandomState(1)
        shape = [int(d) for d in tflite.Model.GetRootAs(model, 0).Subgraphs(0).Tensors(0)
                 .ShapeAsNumpy()]
        x = rs.randint(-128, 128, shape).astype(np.int8)
        cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={args.accelerator}",
                               cache_dir=False)
        print(_row(name, "tvm-ethos", _ours_file(cm), model, x, args.accelerator))
        print(_row(name, "Vela 5.2", _vela_file(model, args.accelerator), model, x,
                   args.accelerator))


if __name__ == "__main__":
    main()
