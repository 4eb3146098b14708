"""The operator forms issue 28's last steps put on the Ethos-U, beside Vela 5.2.

One model per form (TRANSPOSE_CONV's 2x1 / 1x2 strides and kernels below the stride,
SYMMETRIC MIRROR_PAD, UNPACK behind a dimension above 1, EXPAND_DIMS to 5-D; MIRROR_PAD of
the depth and of several axes, UNPACK of the last axis of a batch or a reshape, a 5-D
RESHAPE that regroups elements, a 5-D PACK; MIRROR_PAD of a batch and of a 5-D tensor; int16
EXP and LOG; 6-D RESHAPEs that regroup elements and a 6-D PACK, beside DEPTH_TO_SPACE, which
TVM writes through 6-D and which stays on the CPU; ARG_MAX over 90,000 pixels; lone int8 and
int16 LOGISTIC and TANH; 7-D and 8-D RESHAPE, EXPAND_DIMS and SQUEEZE, and a model's own
RESHAPE -> TRANSPOSE -> RESHAPE through 6-D; int16 MAX_POOL_2D, AVERAGE_POOL_2D, MEAN and
REDUCE_MAX), compiled for an Ethos-U55-128: the operators
each leaves on the CPU, the NPU operations each runs (Vela: its passes after fusing; ours: the
stream's kernel operations, not its DMAs) and the SRAM each uses (Vela ``--optimise Size``'s
"Total SRAM used"; ours: the emulated high-water mark of the functional model). Prints one
table.

    PYTHONPATH=. python benchmarks/operator_forms.py [form ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

import tflite  # noqa: E402
import tflite_builder as tb  # noqa: E402
from int16_pooling_models import pool, reduction  # noqa: E402
from test_partition_rejected_matches import chain_model  # noqa: E402
from test_tflite_exp_log16 import model as float_table16_model  # noqa: E402
from test_tflite_expand_dims import expand_dims_model, reshape_model, squeeze_model  # noqa: E402
from test_tflite_mirror_pad import mirror_pad_model  # noqa: E402
from test_tflite_pack import pack_model, reshape_unpack_model, unpack_model  # noqa: E402

from benchmarks.movement_ops import ours, vela  # noqa: E402
from ethos_arch.ops import Op  # noqa: E402

_SYM = tflite.MirrorPadMode.SYMMETRIC

#: form -> its one-operator model
FORMS = {
    "tconv_2x1_row": lambda: tb.transpose_conv((1, 1, 16, 8), 8, (1, 3), (1, 2), "SAME"),
    "tconv_1x2_column": lambda: tb.transpose_conv((1, 16, 1, 8), 8, (3, 1), (2, 1), "SAME"),
    "tconv_k1_s2_same": lambda: tb.transpose_conv((1, 8, 8, 8), 8, (1, 1), (2, 2), "SAME"),
    "tconv_k1_s2_valid": lambda: tb.transpose_conv((1, 8, 8, 8), 8, (1, 1), (2, 2), "VALID"),
    "mirror_symmetric": lambda: mirror_pad_model((1, 8, 8, 8), [(0, 0), (2, 1), (1, 3), (0, 0)],
                                                 mode=_SYM),
    "unpack_axis1_3d": lambda: unpack_model((4, 3, 8), 1),
    "unpack_axis2_batch2": lambda: unpack_model((2, 4, 3, 8), 2),
    "unpack_last_axis": lambda: unpack_model((1, 4, 6, 3), 3),
    "expand_dims_5d": lambda: expand_dims_model((1, 8, 8, 8), 2),
    "mirror_depth": lambda: mirror_pad_model((1, 8, 8, 8), [(0, 0), (0, 0), (0, 0), (2, 1)]),
    "mirror_hwc_symmetric": lambda: mirror_pad_model(
        (1, 8, 8, 8), [(0, 0), (2, 1), (1, 3), (1, 2)], mode=_SYM),
    "mirror_3d": lambda: mirror_pad_model((8, 8, 8), [(1, 2), (0, 0), (3, 1)]),
    "unpack_last_batch2": lambda: unpack_model((2, 4, 6, 3), 3),
    "unpack_last_reshaped": lambda: reshape_unpack_model((1, 72), (4, 6, 3), 2),
    "reshape_5d_regroup": lambda: reshape_model((1, 8, 8, 8), (1, 4, 2, 8, 8)),
    "pack_5d": lambda: pack_model((1, 8, 8, 8), 3, 2),
    "mirror_batch": lambda: mirror_pad_model((3, 8, 8, 8), [(2, 1), (0, 0), (0, 0), (0, 0)]),
    "mirror_batch_hwc_sym": lambda: mirror_pad_model(
        (2, 8, 8, 8), [(1, 2), (2, 1), (1, 3), (1, 2)], mode=_SYM),
    "mirror_5d": lambda: mirror_pad_model(
        (2, 3, 8, 8, 8), [(1, 1), (2, 0), (1, 2), (0, 0), (0, 0)]),
    "reshape_4d_to_6d": lambda: reshape_model((1, 8, 8, 8), (1, 2, 4, 2, 4, 8)),
    "reshape_6d_to_4d": lambda: reshape_model((1, 2, 4, 2, 4, 8), (1, 8, 8, 8)),
    "pack_6d": lambda: pack_model((1, 2, 4, 8, 8), 3, 3),
    "depth_to_space": lambda: tb.depth_to_space((1, 8, 8, 8), 2),
    "reshape_4d_to_7d": lambda: reshape_model((1, 8, 8, 8), (1, 2, 4, 2, 4, 2, 4)),
    "reshape_8d_to_4d": lambda: reshape_model((1, 2, 4, 2, 4, 2, 2, 2), (1, 8, 8, 8)),
    "expand_dims_7d_to_8d": lambda: expand_dims_model((1, 2, 4, 2, 4, 2, 4), 3),
    "squeeze_8d_to_7d": lambda: squeeze_model((1, 2, 4, 1, 2, 4, 2, 4), (3,)),
    "own_chain_6d": lambda: chain_model((1, 8, 8, 8), (1, 2, 4, 2, 4, 8), (0, 3, 2, 1, 4, 5),
                                        (1, 8, 8, 8)),
    "exp_int16": lambda: float_table16_model(Op.EXP, (2e-4, 0), (3e-3, 0), (1, 8, 8, 8)),
    "log_int16": lambda: float_table16_model(Op.LOG, (1e-3, 0), (2e-4, 0), (1, 8, 8, 8)),
    "arg_max_300x300x16": lambda: tb.arg_max((1, 300, 300, 16), "int8", (0.05, 3)),
    "logistic_int8": lambda: tb.activation("sigmoid", (1, 32, 32, 16)),
    "tanh_int8": lambda: tb.activation("tanh", (1, 32, 32, 16)),
    "logistic_int16": lambda: tb.activation("sigmoid", (1, 8, 8, 8), (2.0**-12, 0),
                                            (2.0**-15, 0), dtype="int16"),
    "tanh_int16": lambda: tb.activation("tanh", (1, 8, 8, 8), (2.0**-12, 0), (2.0**-15, 0),
                                        dtype="int16"),
    "max_pool_int16": lambda: pool("max", (1, 16, 16, 8), (3, 3), (2, 2), True),
    "avg_pool_int16": lambda: pool("avg", (1, 16, 16, 8), (3, 3), (2, 2), False),
    "mean_int16": lambda: reduction("MEAN", (1, 16, 16, 8), out_q=(2.0**-11, 0)),
    "reduce_max_int16": lambda: reduction("REDUCE_MAX", (1, 16, 16, 8)),
}
CONFIG = "ethos-u55-128"


def main(names: list[str]) -> None:
    print(f"{'form':20} {'CPU ops':>12} {'NPU ops':>12} {'SRAM B':>16} streamed")
    print(f"{'':20} {'vela / ours':>12} {'vela / ours':>12} {'vela / ours':>16}")
    for name in names or FORMS:
        model = FORMS[name]()
        v, o = vela(model, CONFIG), ours(model, CONFIG)
        if "error" in v:
            print(f"{name:20} vela: {v['error']}; ours: {o}")
            continue
        print(f"{name:20} {v['cpu']:>5} / {o['cpu']:<4} {v['npu_ops']:>5} / {o['npu_ops']:<4} "
              f"{v['sram']:>7} / {o['sram']:<7} {o['streamed']}")


if __name__ == "__main__":
    main(sys.argv[1:])
