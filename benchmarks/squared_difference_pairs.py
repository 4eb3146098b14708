"""int8 SQUARED_DIFFERENCE on every pair of codes: Vela 5.2's stream and ours against TFLite Micro.

For two quantizations whose kernel wraps (``WRAPPING``) and random ones (input scales
2**-9..2, output scales 2**-14..2**4, any zero points; a third of them with equal input
scales), one model of a 256x256 map holding all 65,536 pairs of int8 codes: how many outputs
differ from TFLite Micro's interpreter for Vela's stream run on our functional model of the
Ethos-U, and for our compiled ``.tflite`` (its ``ethos-u`` operator on the same model, or
TFLite Micro where the checks refuse the quantization), with
``compute.squared_difference.npu_refusal``'s verdict. Prints one row per quantization and a
summary.

    PYTHONPATH=. python benchmarks/squared_difference_pairs.py [count] [seed]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

from test_tflite_squared_difference import A, B, squared_difference_model  # noqa: E402

import tvm_ethos  # noqa: E402
from ethosu_stream.tflite_graph import run_vela_model  # noqa: E402
from tests.helpers.binary_quantization import random_binary_quantization  # noqa: E402
from tests.helpers.tflite_oracle import tflm_oracle  # noqa: E402
from tests.helpers.vela_cli import vela_compile  # noqa: E402
from tvm_ethos.compute.squared_difference import npu_refusal  # noqa: E402

CONFIG = "ethos-u55-128"


#: quantizations whose output multiplier shifts left far enough to wrap TFLite Micro's int32
WRAPPING = [((1.0, 0), (1.0, 0), (1e-5, 0)), ((0.5, 3), (0.25, -7), (2.0 ** -18, 0))]


def _quantizations(count: int, seed: int):
    yield from WRAPPING
    rs = np.random.RandomState(seed)
    for _ in range(count):
        yield random_binary_quantization(rs, (-14, 4))


def main(count: int = 40, seed: int = 0) -> None:
    print(f"{'input 1':>20} {'input 2':>20} {'output':>20} {'vela':>6} {'ours':>6}  ours on")
    totals = {"vela": 0, "ours": 0, "refused": 0, "vela_where_taken": 0}
    for q1, q2, qo in _quantizations(count, seed):
        model = squared_difference_model(q1, q2, qo)
        want = tflm_oracle(model, [A, B])[0]
        got = run_vela_model(vela_compile(model, CONFIG), [A, B], CONFIG)[0][0]
        vela = int(np.count_nonzero(got != want))
        cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
        ours = int(np.count_nonzero(cm.run(A, B)[0].reshape(want.shape) != want))
        refused = bool(npu_refusal(q1, q2, qo))
        totals["vela"] += vela
        totals["ours"] += ours
        totals["refused"] += refused
        totals["vela_where_taken"] += 0 if refused else vela
        print(f"{q1[0]:>12.6g},{q1[1]:>4} {q2[0]:>12.6g},{q2[1]:>4} {qo[0]:>12.6g},{qo[1]:>4} "
              f"{vela:>6} {ours:>6}  {cm.placement[0].placed_on}")
    print(f"{count + len(WRAPPING)} quantizations x 65,536 pairs: {totals['refused']} refused "
          f"(the kernel's left shift wraps); differing outputs: Vela {totals['vela']} (of "
          f"them where ours takes the NPU: {totals['vela_where_taken']}), ours "
          f"{totals['ours']}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]))
