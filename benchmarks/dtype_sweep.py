"""Issue 28's dtype sweep: the int8 / uint8 / int16 forms of Vela 5.2's operators that
``vela_superset_probes.PROBES`` and ``vela_superset_audit.FORMS`` never built, each a
one-operator model re-typed from an existing probe's builder (tensors quantized alike where
TFLite requires it), audited as the audit does (Vela 5.2 ``--optimise Size`` CPU operators
beside ours on the tflite-micro host). A gap is a form Vela runs wholly on the NPU and ours
does not.

    PYTHONPATH=. python benchmarks/dtype_sweep.py [operator ...]
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.vela_superset_audit import U55, Form, audit  # noqa: E402
from benchmarks.vela_superset_probes import (  # noqa: E402
    BO,
    COPIES,
    Q_OUT,
    _dtypes,
    arg_max,
    unary,
)

#: forms no probe keeps (Vela 5.2 leaves them on the CPU or fails on them)
_UNPROBED = (
    Form("LOG", "uint8", U55, lambda: unary(BO.LOG, dtype="uint8", q_out=Q_OUT["uint8"])),
    Form("RSQRT", "uint8", U55, lambda: unary(BO.RSQRT, dtype="uint8", q_out=Q_OUT["uint8"])),
    Form("ELU", "uint8", U55, lambda: unary(BO.ELU, dtype="uint8", q_out=Q_OUT["uint8"])),
    Form("ELU", "int16", U55, lambda: unary(BO.ELU, dtype="int16")),
    Form("ARG_MAX", "int16", U55, lambda: arg_max("int16")),
)

#: every (operator, type) form the sweep audits: each code-moving operator in uint8 and
#: int16, the other probes of ``_dtypes`` and the forms no probe keeps
SWEEP: tuple[Form, ...] = (
    tuple(Form(op, d, U55, lambda b=b, d=d: b(d)) for op, b in COPIES.items()
          for d in ("uint8", "int16"))
    + tuple(Form(p.operator, p.name, U55, p.build) for p in _dtypes()
            if p.operator not in COPIES)
    + _UNPROBED)


def main(names: list[str]) -> None:
    print("| operator | form | Vela CPU ops | ours CPU ops | gap | why |")
    print("| --- | --- | --- | --- | --- | --- |")
    for form in SWEEP:
        if names and form.operator not in names:
            continue
        try:
            r = audit(form)
        except Exception as err:  # a builder TFLite's schema rejects: say so, go on
            print(f"| {form.operator} | {form.name} | - | - | | build: {err!r:.120} |")
            continue
        gap = "yes" if r.vela_cpu == 0 and r.ours_cpu != 0 else ""
        v = "-" if r.vela_cpu is None else r.vela_cpu
        o = "-" if r.ours_cpu is None else r.ours_cpu
        print(f"| {form.operator} | {form.name} | {v} | {o} | {gap} | {r.why[:160]} |",
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
