"""Issue 28's requantizing forms: how often each candidate NPU rounding is the defining
kernel's result on every code, over random quantizations.

CONCATENATION (``compute.concat_requant``): LiteRT's float32 scaling against the NPU's rescale
rounded once half up (NATURAL, the form the stream emits) and rounded twice (TFL, TFLite's
``MultiplyByQuantizedMultiplier``), on every int8 / uint8 code. RELU_N1_TO_1
(``compute.relu_requant``): LiteRT's BUILTIN_REF kernel against the requantization with the
multiplier from the float32 quotient of the scales and from the double one, on every int8
code. A quantization counts as exact when every code agrees.

    PYTHONPATH=. python benchmarks/requant_exactness.py [--pairs 2000] [--relu-pairs 300]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

import tflite_builder as tb  # noqa: E402

from tests.helpers.tflite_oracle import oracle  # noqa: E402
from tvm_ethos.compute import concat_requant  # noqa: E402
from tvm_ethos.compute.quant import (  # noqa: E402
    dtype_range,
    f32,
    mbqm_np,
    quantize_multiplier,
    quantize_value,
)

#: scale draws: uniform in [0.001, 1), and two-decimal values 0.01 .. 0.5 (hand-set scales,
#: whose quotients are often short binary fractions: rounding ties)
DRAWS = ("uniform", "two-decimal")


def _quantization(rs, dtype: str, draw: str) -> tuple[float, int]:
    lo, hi = dtype_range(dtype)
    scale = rs.uniform(0.001, 1.0) if draw == "uniform" else rs.randint(1, 51) / 100
    return float(np.float32(scale)), int(rs.randint(lo, hi + 1))


def _double_rounding(dtype: str, in_q, out_q) -> np.ndarray:
    lo, hi = dtype_range(dtype)
    m, shift = quantize_multiplier(f32(in_q[0]) / f32(out_q[0]))
    codes = np.arange(lo, hi + 1, dtype=np.int64)
    return np.clip(mbqm_np(codes - in_q[1], m, shift) + out_q[1], lo, hi)


def concat_rates(pairs: int, seed: int = 0) -> list[tuple[str, str, int, int, int]]:
    """(type, scale draw, pairs, exact with NATURAL, exact with TFL double rounding)."""
    rows = []
    for dtype in concat_requant.TYPES:
        for draw in DRAWS:
            rs = np.random.RandomState(seed)
            natural = double = 0
            for _ in range(pairs):
                in_q, out_q = _quantization(rs, dtype, draw), _quantization(rs, dtype, draw)
                want = concat_requant.litert_codes(dtype, in_q, out_q)
                natural += concat_requant.refusal(dtype, [in_q], out_q) == ""
                double += bool(np.array_equal(_double_rounding(dtype, in_q, out_q), want))
            rows.append((dtype, draw, pairs, natural, double))
    return rows


def _relu_n1_to_1(in_q, out_q) -> bytes:
    shape = [1, 4, 8, 8]
    return tb.serialize([tb.T(shape, "int8", scale=in_q[0], zp=in_q[1]),
                         tb.T(shape, "int8", scale=out_q[0], zp=out_q[1])],
                        [(tb.BO.RELU_N1_TO_1, 0, None, [0], [1])], [0], [1])


def relu_rates(pairs: int, draw: str, seed: int = 0) -> tuple[int, int, int]:
    """(pairs, exact with the float32 quotient, exact with the double one)."""
    rs = np.random.RandomState(seed)
    codes = np.arange(-128, 128, dtype=np.int64)
    exact = {"float32": 0, "double": 0}
    for _ in range(pairs):
        in_q, out_q = _quantization(rs, "int8", draw), _quantization(rs, "int8", draw)
        (want,) = oracle(_relu_n1_to_1(in_q, out_q), [codes.astype(np.int8).reshape(1, 4, 8, 8)])
        lo = max(-128, quantize_value(-1.0, *out_q))
        hi = min(127, quantize_value(1.0, *out_q))
        for name, ratio in (("float32", float(np.float32(in_q[0]) / np.float32(out_q[0]))),
                            ("double", f32(in_q[0]) / f32(out_q[0]))):
            m, shift = quantize_multiplier(ratio)
            got = np.clip(mbqm_np(codes - in_q[1], m, shift) + out_q[1], lo, hi)
            exact[name] += bool(np.array_equal(got, want.ravel()))
    return pairs, exact["float32"], exact["double"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2000)
    ap.add_argument("--relu-pairs", type=int, default=300)
    args = ap.parse_args()
    print("| CONCATENATION | scales | quantization pairs | exact, NATURAL (the stream's) | "
          "exact, TFL |")
    print("| --- | --- | --- | --- | --- |")
    for dtype, draw, n, natural, double in concat_rates(args.pairs):
        print(f"| {dtype} | {draw} | {n} | {natural} | {double} |")
    print()
    print("| RELU_N1_TO_1 int8 vs LiteRT | scales | quantization pairs | exact, float32 quotient "
          "| exact, double |")
    print("| --- | --- | --- | --- | --- |")
    for draw in DRAWS:
        n, f, d = relu_rates(args.relu_pairs, draw)
        print(f"| BUILTIN_REF | {draw} | {n} | {f} | {d} |")


if __name__ == "__main__":
    main()
