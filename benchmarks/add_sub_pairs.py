"""int8 ADD/SUB on every pair of codes: how many outputs differ from TFLite Micro, before (the
NPU form with Vela 5.2's registers, which main put on the NPU for every quantization) and after
(``compute.add_sub.npu_refusal`` keeps the differing quantizations TFLite operators).

Random quantizations (input scales 2**-9..2, output scales 2**-8..4, any zero points, a
third with equal input scales), ADD and SUB. For each: pairs differing for the NPU form
(``compute.add_sub.npu``, which the tests hold equal to Vela's stream on our functional
model), whether the check refuses it, and whether any single-rounding OPA_SCALE pair
(multiplier below 2**31, shift 0..40) would rescale every code as TFLite Micro does (a search
over the intervals each code allows). The first ``e2e`` quantizations are also compiled: Vela's
stream run on the functional model and our ``.tflite`` run, each against TFLite Micro's
interpreter on a 256x256 map of all pairs.

    PYTHONPATH=. python benchmarks/add_sub_pairs.py [count] [e2e] [seed]
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

from test_tflite_add_sub_exact import OFF_BY_ONE, A, B, add_sub_model  # noqa: E402

import tvm_ethos  # noqa: E402
from ethosu_stream import rounding  # noqa: E402
from ethosu_stream.tflite_graph import run_vela_model  # noqa: E402
from tests.helpers.binary_quantization import random_binary_quantization  # noqa: E402
from tests.helpers.tflite_oracle import tflm_oracle  # noqa: E402
from tests.helpers.vela_cli import vela_compile  # noqa: E402
from tvm_ethos.compute import add_sub  # noqa: E402

CONFIG = "ethos-u55-128"
CODES = np.arange(-128, 128, dtype=np.int64)
A8, B8 = CODES[:, None], CODES[None, :]


def single_rounding_pair(x: np.ndarray, want: np.ndarray, max_shift: int = 40):
    """A (multiplier, shift) whose one rounding of ``x * multiplier / 2**shift`` is ``want``
    for every ``x``, or None: each code bounds the multiplier to an interval."""
    for s in range(max_shift, -1, -1):
        half = (1 << (s - 1)) if s else 0
        lo, hi = 0, (1 << 31) - 1
        for xv, t in zip(x.tolist(), want.tolist()):
            low, high = t * (1 << s) - half, t * (1 << s) + max(half, 1) - 1  # x*M in range
            if xv == 0:
                if not low <= 0 <= high:
                    lo, hi = 1, 0
                    break
                continue
            if xv > 0:
                lo, hi = max(lo, -((-low) // xv)), min(hi, high // xv)
            else:
                lo, hi = max(lo, -((high) // (-xv))), min(hi, (-low) // (-xv))
            if lo > hi:
                break
        if lo <= hi:
            return lo, s
    return None


def _exact_pair_exists(q) -> bool:
    regs = add_sub.vela_registers(*q)
    if regs.scaled == add_sub.Scaled.NONE:
        return True
    mine, other = (q[0], q[1]) if regs.scaled == add_sub.Scaled.FIRST else (q[1], q[0])
    x = CODES - int(mine[1])
    want = add_sub.tflite_rescaled(x, mine[0], other[0])
    found = single_rounding_pair(x, want)
    if found is not None:  # the search's answer, checked
        assert np.array_equal(rounding.scale(x, found[0], found[1], rounding.TFL), want)
    return found is not None


def _quantizations(count: int, seed: int):
    yield OFF_BY_ONE, False
    yield OFF_BY_ONE, True
    rs = np.random.RandomState(seed)
    for _ in range(count):
        yield random_binary_quantization(rs, (-8, 2)), bool(rs.rand() < 0.5)


def main(count: int = 400, e2e: int = 6, seed: int = 0) -> None:
    rows, totals = [], dict(n=0, before=0, after=0, refused=0, differing_q=0, exact_pair=0)
    for k, (q, sub) in enumerate(_quantizations(count, seed)):
        want = add_sub.tflite_micro(A8, B8, *q, subtract=sub)
        before = int(np.count_nonzero(add_sub.npu(A8, B8, *q, subtract=sub) != want))
        refused = bool(add_sub.npu_refusal(*q, subtract=sub))
        after = 0 if refused else before
        totals["n"] += 1
        totals["before"] += before
        totals["after"] += after
        totals["refused"] += refused
        totals["differing_q"] += before > 0
        if before:
            totals["exact_pair"] += _exact_pair_exists(q)
        vela = ours = placed = "-"
        if k < e2e + 2:
            model = add_sub_model(*q, sub)
            oracle = tflm_oracle(model, [A, B])[0]
            got = run_vela_model(vela_compile(model, CONFIG), [A, B], CONFIG)[0][0]
            vela = int(np.count_nonzero(got != oracle))
            cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
            ours = int(np.count_nonzero(cm.run(A, B)[0].reshape(oracle.shape) != oracle))
            placed = cm.placement[0].placed_on
        if before or k < e2e + 2:
            rows.append((q, sub, before, refused, after, vela, ours, placed))
    print(f"{'op':>3} {'input 1':>18} {'input 2':>18} {'output':>18} {'before':>7} "
          f"{'refused':>7} {'after':>6} {'vela':>5} {'ours':>5}  ours on")
    for q, sub, before, refused, after, vela, ours, placed in rows:
        cells = " ".join(f"{s:>12.6g},{z:>4}" for s, z in q)
        print(f"{'SUB' if sub else 'ADD':>3} {cells} {before:>7} {str(refused):>7} {after:>6} "
              f"{vela!s:>5} {ours!s:>5}  {placed}")
    n = totals["n"]
    print(f"\n{n} int8 ADD/SUB quantizations x 65,536 pairs: {totals['differing_q']} differ from "
          f"TFLite Micro on the NPU (before: {totals['before']} pairs in all); "
          f"{totals['refused']} refused, {totals['after']} pairs differ after; a single-rounding "
          f"OPA_SCALE equal to TFLite Micro's rescale exists for {totals['exact_pair']} of the "
          f"{totals['differing_q']}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
