"""Issue 28's sweep of the reductions: SUM, MEAN, REDUCE_MAX and REDUCE_MIN over every
combination of the height, width and depth of a small NHWC input (and one past 256 rows per
operator), int8 / uint8 / int16, keep_dims true and false, Vela 5.2 ``--optimise Size``
(ethos-u55-128) beside ours (``vela_superset_audit.audit``): the CPU operators of each side
and ours' reason where it keeps one that Vela does not.

    PYTHONPATH=. python benchmarks/reduce_sweep.py [--gaps] [OPERATOR ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

from operator_models import _i32, _one, _opts  # noqa: E402

from benchmarks.vela_superset_audit import U55, Form, audit  # noqa: E402
from benchmarks.vela_superset_probes import BO, Q_IN, _t  # noqa: E402

OPERATORS = {"SUM": BO.SUM, "MEAN": BO.MEAN, "REDUCE_MAX": BO.REDUCE_MAX,
             "REDUCE_MIN": BO.REDUCE_MIN}
DTYPES = ("int8", "uint8", "int16")
AXES = {"H": (1,), "W": (2,), "C": (3,), "HW": (1, 2), "HC": (1, 3), "WC": (2, 3),
        "HWC": (1, 2, 3)}
SMALL = (1, 8, 8, 4)
TALL = (1, 300, 4, 4)
#: SUM's output scale: wider than the input's, as a sum needs
SUM_OUT = {"int8": (2.0, -2), "uint8": (2.0, 128), "int16": (2.0**-6, 0)}


def model(operator: str, shape, axes, dtype: str, keep: bool) -> bytes:
    """One ``operator`` over ``axes`` of ``shape`` (MEAN / REDUCE_MAX / REDUCE_MIN quantized
    as their input, SUM into :data:`SUM_OUT`)."""
    out = [1 if i in axes else d for i, d in enumerate(shape)] if keep else [
        d for i, d in enumerate(shape) if i not in axes]
    q_out = SUM_OUT[dtype] if operator == "SUM" else Q_IN[dtype]
    tensors = [_t(shape, dtype), _t(out, dtype, q_out), _i32(list(axes))]
    return _one(tensors, OPERATORS[operator], [0], [1],
                _opts("ReducerOptions", KeepDims=keep), op_inputs=[0, 2])


def forms(operators) -> list[Form]:
    """The swept forms of ``operators``."""
    out = []
    for op in operators:
        for dtype in DTYPES:
            for name, axes in AXES.items():
                for keep in (True, False):
                    out.append(Form(op, f"{dtype} {name} keep={keep} 1x8x8x4", U55,
                                    lambda o=op, a=axes, d=dtype, k=keep:
                                    model(o, SMALL, a, d, k)))
        for dtype in DTYPES:
            out.append(Form(op, f"{dtype} HW keep=True 1x300x4x4", U55,
                            lambda o=op, d=dtype: model(o, TALL, (1, 2), d, True)))
    return out


def main(args: list[str]) -> None:
    gaps_only = "--gaps" in args
    operators = [a for a in args if a in OPERATORS] or list(OPERATORS)
    print("| operator | form | Vela CPU ops | ours CPU ops | gap | ours' reason |")
    print("| --- | --- | --- | --- | --- | --- |")
    for form in forms(operators):
        r = audit(form)
        gap = r.vela_cpu is not None and (r.ours_cpu is None or r.ours_cpu > r.vela_cpu)
        if gaps_only and not gap:
            continue
        ours = "-" if r.ours_cpu is None else r.ours_cpu
        vela = "-" if r.vela_cpu is None else r.vela_cpu
        print(f"| {form.operator} | {form.name} | {vela} | {ours} | {'yes' if gap else ''} | "
              f"{r.why[:160]} |", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
