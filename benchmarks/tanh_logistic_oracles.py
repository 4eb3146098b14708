"""int8 TANH and LOGISTIC: where TFLite Micro's fixed-point kernels and LiteRT's float tables
disagree, and which one Vela 5.2's stream and ours follow.

For a grid of input scales and zero points (outputs quantized as TFLite requires: TANH
(1/128, 0), LOGISTIC (1/256, -128)), each of the 256 input codes runs through TFLite Micro's
interpreter and LiteRT's BUILTIN_REF; the table prints per scale, for each zero point, the
number of codes where they differ and where our NPU table (``compute.int8_activation``)
differs from TFLite Micro. ``--vela`` also runs Vela 5.2's stream of a few such models on the
functional model (emulated) and counts its codes against both runtimes.

    PYTHONPATH=$PWD python benchmarks/tanh_logistic_oracles.py [--vela]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "tests" / "tvm_ethos"))

import numpy as np  # noqa: E402
import tflite_builder as tb  # noqa: E402

from ethos_arch.ops import Op  # noqa: E402
from ethosu_stream.tflite_graph import run_vela_model  # noqa: E402
from tests.helpers.tflite_oracle import oracle  # noqa: E402
from tests.helpers.vela_cli import vela_compile  # noqa: E402
from tvm_ethos.backends.tflite_micro.reference import TflmReference  # noqa: E402
from tvm_ethos.compute.int8_activation import OUTPUT_Q, tflm_lut  # noqa: E402

CODES = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16, 1)
KINDS = {"tanh": Op.TANH, "sigmoid": Op.SIGMOID}
SCALES = (1e-4, 1e-3, 1 / 256, 1 / 128, 1 / 64, 0.01, 0.02, 0.03125, 0.05, 0.0625, 0.1, 0.125,
          0.2, 0.25, 0.5, 1.0, 2.0, 4.0, 7.9, 8.0, 10.0, 20.0)
ZERO_POINTS = (-128, -64, 0, 3, 64, 127)
VELA_CASES = (("tanh", (1 / 256, -128)), ("sigmoid", (1 / 256, -128)), ("sigmoid", (1 / 128, 0)),
              ("sigmoid", (4.0, 0)), ("tanh", (10.0, 0)))


def _model(kind: str, in_q: tuple) -> bytes:
    return tb.activation(kind, shape=(1, 16, 16, 1), in_q=in_q, out_q=OUTPUT_Q[KINDS[kind]])


def _runtimes(model: bytes) -> tuple[np.ndarray, np.ndarray]:
    return (TflmReference(model).run([CODES])[0].ravel(), oracle(model, [CODES])[0].ravel())


def grid() -> None:
    print("codes (of 256) where TFLite Micro != LiteRT / ours != TFLite Micro, per zero point")
    print(f"{'kind':8} {'scale':>10}  " + "  ".join(f"{z:>7}" for z in ZERO_POINTS))
    totals = {k: [0, 0, 0] for k in KINDS}
    for kind, op in KINDS.items():
        for s in SCALES:
            cells = []
            for z in ZERO_POINTS:
                tflm, litert = _runtimes(_model(kind, (s, z)))
                split = int((tflm != litert).sum())
                ours = int((tflm_lut(op, (s, z)) != tflm).sum())
                totals[kind][0] += split > 0
                totals[kind][1] += ours
                totals[kind][2] += 1
                cells.append(f"{split:>3}/{ours:<3}")
            print(f"{kind:8} {s:>10.6g}  " + "  ".join(cells))
    for kind, (split, ours, n) in totals.items():
        print(f"{kind}: the runtimes differ for {split} of {n} quantizations; ours differs "
              f"from TFLite Micro on {ours} codes in all")


def vela() -> None:
    print("Vela 5.2's stream (ethos-u55-128, emulated on the functional model), codes of 256")
    print(f"{'kind':8} {'in_q':>20}  vela!=TFLM  vela!=LiteRT  TFLM!=LiteRT")
    for kind, in_q in VELA_CASES:
        model = _model(kind, in_q)
        tflm, litert = _runtimes(model)
        outs, _ = run_vela_model(vela_compile(model), [CODES], "ethos-u55-128")
        got = np.asarray(outs[0]).ravel()
        print(f"{kind:8} {str((round(in_q[0], 6), in_q[1])):>20}  {int((got != tflm).sum()):>10}"
              f"  {int((got != litert).sum()):>12}  {int((tflm != litert).sum()):>12}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vela", action="store_true", help="also count Vela 5.2's stream")
    args = ap.parse_args()
    grid()
    if args.vela:
        vela()


if __name__ == "__main__":
    main()
