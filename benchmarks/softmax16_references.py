"""int16 SOFTMAX: where LiteRT's reference kernel (BUILTIN_REF) and TFLite Micro's differ, and
which each target follows. Per model (a few shapes, input scales and betas, some of the betas
no power of two), over random rows (every other input narrowed to small differences): the
rows on which LiteRT and TFLite Micro differ, and the rows on which the llvm host differs from
LiteRT, the ``ethos-u`` target's NPU stream (functional model) and the ``ethos-u,llvm``
target's NPU subgraph (emulator) from TFLite Micro. Nothing here is timed.

  python benchmarks/softmax16_references.py [--runs 20]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.append(str(REPO / "tests" / "tvm_ethos"))

import tflite_builder as tb  # noqa: E402

import tvm_ethos  # noqa: E402
from tests.helpers.tflite_oracle import oracle, tflm_oracle  # noqa: E402

#: (name, shape, input scale, beta)
MODELS = (("classifier 1x10", (1, 10), 2e-3, 1.0),
          ("keyword 1x49x12", (1, 49, 12), 5e-4, 1.0),
          ("rows 1x8x57", (1, 8, 57), 2.5117e-4, 0.5),
          ("attention 1x4x16x64", (1, 4, 16, 64), 1e-4, 0.125),
          ("beta 0.7 1x16x40", (1, 16, 40), 7.3e-4, 0.7),
          ("beta 1.557 1x64x2", (1, 64, 2), 1.1913734e-4, 1.5569414))


def _model(shape, scale, beta) -> bytes:
    return tb.softmax(None, shape=list(shape), in_q=(scale, 0), dtype="int16",
                      out_q=(1 / 32768, 0), beta=beta)


def _rows_apart(a: np.ndarray, b: np.ndarray) -> int:
    a = a.reshape(-1, a.shape[-1])
    b = b.reshape(a.shape)
    return int((a != b).any(axis=1).sum())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="random inputs per model")
    args = ap.parse_args(argv)
    print(f"{'model':<22} {'rows':>7} {'LiteRT != TFLM':>15} {'llvm != LiteRT':>15} "
          f"{'NPU != TFLM':>12} {'emulator != TFLM':>17}")
    for name, shape, scale, beta in MODELS:
        data = _model(shape, scale, beta)
        host = tvm_ethos.compile(data, "llvm", cache_dir=False)
        npu = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
        assert [p.placed_on for p in npu.placement] == ["ethos-u"], npu.placement
        emulated = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
        assert emulated.partition_summary == {"ethos-u": 1}, emulated.partition_summary
        rs = np.random.RandomState(0)
        rows = apart = host_off = npu_off = emulator_off = 0
        for k in range(args.runs):
            wide = rs.randint(-32768, 32768, shape)
            x = (wide if k % 2 == 0 else wide // rs.randint(2, 3000)).astype(np.int16)
            lite, micro = oracle(data, [x])[0], tflm_oracle(data, [x])[0]
            rows += lite.size // shape[-1]
            apart += _rows_apart(lite, micro)
            host_off += _rows_apart(host.run(x)[0].reshape(lite.shape), lite)
            npu_off += _rows_apart(npu.run(x)[0].reshape(micro.shape), micro)
            emulator_off += _rows_apart(emulated.run(x)[0].reshape(micro.shape), micro)
        print(f"{name:<22} {rows:>7} {apart:>15} {host_off:>15} {npu_off:>12} "
              f"{emulator_off:>17}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
