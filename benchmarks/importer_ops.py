"""The operators issue 28's importer work put on the Ethos-U, beside Vela 5.2.

For each one-operator model of rfcs/0010's table (``tests/tvm_ethos/operator_models.py``) of
REDUCE_MAX, REDUCE_MIN, SUM, PACK, UNPACK, MIRROR_PAD, PRELU, ELU, REVERSE_V2, TILE and
SQUARED_DIFFERENCE, compiled for an Ethos-U55-128: the operators each leaves on the CPU, the
NPU operations each runs (Vela: its passes after fusing; ours: the stream's NPU_OP_*
commands) and the SRAM each uses (Vela ``--optimise Size``'s "Total SRAM used"; ours: the
emulated high-water mark of the functional model). Prints one table.

    PYTHONPATH=. python benchmarks/importer_ops.py [model ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

import operator_models  # noqa: E402

from benchmarks.movement_ops import ours, vela  # noqa: E402

MODELS = ("reduce_max", "reduce_min", "reduce_sum", "pack", "unpack", "mirror_pad", "prelu",
          "elu", "reverse_v2", "tile", "squared_difference")
CONFIG = "ethos-u55-128"


def main(names: list[str]) -> None:
    print(f"{'model':14} {'CPU ops':>12} {'NPU ops':>12} {'SRAM B':>16} streamed")
    print(f"{'':14} {'vela / ours':>12} {'vela / ours':>12} {'vela / ours':>16}")
    for name in names or MODELS:
        model = operator_models.MODELS[name]()
        v, o = vela(model, CONFIG), ours(model, CONFIG)
        if "error" in v:
            print(f"{name:14} vela: {v['error']}; ours: {o}")
            continue
        print(f"{name:14} {v['cpu']:>5} / {o['cpu']:<4} {v['npu_ops']:>5} / {o['npu_ops']:<4} "
              f"{v['sram']:>7} / {o['sram']:<7} {o['streamed']}")


if __name__ == "__main__":
    main(sys.argv[1:])
