"""SUM, REDUCE_MAX and REDUCE_MIN over the depth on the Ethos-U: tvm-ethos's stream beside
Vela 5.2's, both on the functional model.

For each case (one int8 reduction over the depth, alone or with height and width) the model
is compiled by tvm-ethos (target ``ethos-u``, its default plan, written as a TFLite Micro
file) and by Vela (``--optimise Size``); both files run on the functional model
(``ethosu_stream``) with the same two random inputs. Printed per file: the NPU operations and
DMAs the stream ran, the flash it carries and the arena bytes it touched (emulated), and the
outputs that differ from TFLite Micro's on the source (Vela's SUM rounds once where TFLite
Micro rounds twice).

    PYTHONPATH=. python benchmarks/reduce_depth_streams.py [--accelerator ethos-u55-128]
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

import tflite_builder as tb  # noqa: E402
from operator_models import _opts  # noqa: E402

import tvm_ethos  # noqa: E402
from ethosu_stream.tflite_graph import run_vela_model  # noqa: E402
from planner.vela_run import run_vela  # noqa: E402
from tests.helpers.tflite_oracle import tflm_oracle  # noqa: E402

CODES = {"SUM": tb.BO.SUM, "REDUCE_MAX": tb.BO.REDUCE_MAX, "REDUCE_MIN": tb.BO.REDUCE_MIN}

#: (operator, input shape, axes), each kept as a 4-D output
CASES = (
    ("SUM", (1, 16, 16, 32), (3,)),
    ("REDUCE_MAX", (1, 16, 16, 32), (3,)),
    ("REDUCE_MIN", (1, 16, 16, 32), (3,)),
    ("SUM", (1, 8, 12, 64), (2, 3)),
    ("REDUCE_MAX", (1, 12, 10, 40), (1, 2, 3)),
    ("REDUCE_MIN", (1, 12, 10, 40), (1, 3)),
    ("REDUCE_MAX", (1, 300, 250, 4), (3,)),
)


def model(name: str, shape, axes) -> bytes:
    """One int8 ``name`` over ``axes``; SUM's output at a scale of its own."""
    x = tb.T(list(shape), "int8", scale=0.05, zp=3)
    out_q = (0.4, -9) if name == "SUM" else (0.05, 3)
    y = tb.T([1 if a in axes else d for a, d in enumerate(shape)], "int8", scale=out_q[0],
             zp=out_q[1])
    ax = tb.T([len(axes)], "int32", data=np.asarray(axes, np.int32))
    otype, ofn = _opts("ReducerOptions", KeepDims=True)
    return tb.serialize([x, y, ax], [(CODES[name], otype, ofn, [0, 2], [1])], [0], [1])


def _ours_file(cm) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.tflite")
        cm.export_tflite(path)
        return Path(path).read_bytes()


def _vela_file(data: bytes, config: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.tflite")
        Path(path).write_bytes(data)
        return run_vela(path, config, "--optimise", "Size").tflite


def _row(case: str, who: str, compiled: bytes, source: bytes, xs, config: str) -> str:
    differ = size = 0
    for x in xs:
        (got,), stats = run_vela_model(compiled, [x], config)
        (want,) = tflm_oracle(source, [x])
        differ += int(np.count_nonzero(got.reshape(want.shape) != want))
        size += want.size
    ops = sum(n for k, n in stats.commands.items() if k.startswith("NPU_OP_")
              and k not in ("NPU_OP_STOP", "NPU_OP_DMA_START", "NPU_OP_DMA_WAIT",
                            "NPU_OP_KERNEL_WAIT"))
    dma = stats.commands.get("NPU_OP_DMA_START", 0)
    flash = stats.high_water.get(0, 0)
    arena = stats.high_water.get(1, 0)
    return (f"{case:34} {who:10} {ops:>7} {dma:>5} {flash:>8,} {arena:>9,} "
            f"{differ:>6} of {size:,}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--accelerator", default="ethos-u55-128")
    args = ap.parse_args()
    print(f"{'case':34} {'compiler':10} {'NPU ops':>7} {'DMAs':>5} {'flash B':>8} "
          f"{'arena B':>9} outputs differing from TFLite Micro")
    for name, shape, axes in CASES:
        source = model(name, shape, axes)
        rs = np.random.RandomState(1)
        xs = [rs.randint(-128, 128, shape).astype(np.int8) for _ in range(2)]
        cm = tvm_ethos.compile(source, f"ethos-u -accelerator_config={args.accelerator}",
                               cache_dir=False)
        case = f"{name} {'x'.join(map(str, shape))} axes {','.join(map(str, axes))}"
        print(_row(case, "tvm-ethos", _ours_file(cm), source, xs, args.accelerator))
        print(_row(case, "Vela 5.2", _vela_file(source, args.accelerator), source, xs,
                   args.accelerator), flush=True)


if __name__ == "__main__":
    main()
