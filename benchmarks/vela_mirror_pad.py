"""MIRROR_PAD as each Vela release compiles it, run on the functional model.

For each form (one int8 MIRROR_PAD padding some axes, REFLECT or SYMMETRIC) and each Vela
(5.2 and its legacy Python core; 3.11 and 4.5 where their venvs are there), the table says
where Vela put the operator (NPU, CPU, or that the compile failed), how many NPU operations
its stream ran, and whether the file's output on the functional model (``ethosu_stream``;
TFLite Micro for what Vela left on the CPU) equals TFLite Micro's on the source. Which forms
Vela gets wrong is the finding of rfcs/0010's paragraph under the operator table.

    PYTHONPATH=. python benchmarks/vela_mirror_pad.py [--vela-venvs build/vela-venvs]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

import tflite  # noqa: E402
import tflite_builder as tb  # noqa: E402
from operator_models import _opts  # noqa: E402

from ethosu_stream import StreamError  # noqa: E402
from ethosu_stream.run import operation_count  # noqa: E402
from ethosu_stream.tflite_graph import TfliteGraph  # noqa: E402
from tests.helpers.tflite_oracle import tflm_oracle  # noqa: E402
from tests.helpers.vela_cli import vela_compile  # noqa: E402

R, S = tflite.MirrorPadMode.REFLECT, tflite.MirrorPadMode.SYMMETRIC
CONFIG = "ethos-u55-128"
#: name -> (shape, pads, mode)
FORMS = {
    "W reflect": ((1, 3, 4, 2), [(0, 0), (0, 0), (1, 1), (0, 0)], R),
    "H reflect": ((1, 3, 4, 2), [(0, 0), (1, 1), (0, 0), (0, 0)], R),
    "HW reflect": ((1, 3, 4, 2), [(0, 0), (1, 2), (2, 1), (0, 0)], R),
    "HW symmetric": ((1, 3, 4, 2), [(0, 0), (1, 2), (2, 1), (0, 0)], S),
    "HW reflect, 2 batches": ((2, 5, 6, 19), [(0, 0), (3, 4), (5, 2), (0, 0)], R),
    "C reflect": ((1, 3, 4, 5), [(0, 0), (0, 0), (0, 0), (2, 1)], R),
    "C symmetric": ((1, 3, 4, 5), [(0, 0), (0, 0), (0, 0), (2, 1)], S),
    "N reflect": ((3, 2, 2, 2), [(1, 1), (0, 0), (0, 0), (0, 0)], R),
    "2-D reflect, both axes": ((4, 5), [(1, 1), (2, 1)], R),
    "2-D reflect, first axis": ((4, 5), [(1, 2), (0, 0)], R),
    "3-D reflect, all axes": ((3, 4, 5), [(1, 1), (1, 2), (2, 1)], R),
    "3-D reflect, first two": ((3, 4, 5), [(1, 1), (1, 2), (0, 0)], R),
    "5-D reflect": ((2, 2, 3, 3, 2), [(1, 0), (0, 1), (1, 1), (1, 0), (0, 1)], R),
}


def mirror_pad(shape, pads, mode) -> bytes:
    out = [d + a + b for d, (a, b) in zip(shape, pads)]
    x = tb.T(list(shape), "int8", scale=0.05, zp=3)
    p = tb.T([len(shape), 2], "int32", data=np.asarray(pads, np.int32))
    y = tb.T(out, "int8", scale=0.05, zp=3)
    otype, ofn = _opts("MirrorPadOptions", Mode=mode)
    return tb.serialize([x, y, p], [(tb.BO.MIRROR_PAD, otype, ofn, [0, 2], [1])], [0], [1])


def velas(venvs: Path) -> dict[str, tuple[Path | None, tuple[str, ...]]]:
    """Column name -> (Vela executable, None for 5.2; extra options)."""
    out: dict[str, tuple[Path | None, tuple[str, ...]]] = {}
    for version in ("3.11.0", "4.5.0"):
        for name in (version, f"v{version}"):
            exe = venvs / name / "bin" / "vela"
            if exe.exists():
                out[version] = (exe, ())
                break
    out["5.2"] = (None, ())
    out["5.2 legacy core"] = (None, ("--debug-force-legacy-core",))
    return out


def cell(model: bytes, x: np.ndarray, want: np.ndarray, exe, options) -> str:
    try:
        data = vela_compile(model, CONFIG, vela=exe, options=options)
    except subprocess.CalledProcessError:
        return "compile fails"
    graph = TfliteGraph(data, CONFIG)
    where = "CPU" if graph.cpu_operators else "NPU"
    try:
        (got,), stats = graph.run([x])
    except StreamError as exc:
        return f"{where}: StreamError ({exc})"
    ops = f" {operation_count(stats.commands)} ops" if where == "NPU" else ""
    diff = np.count_nonzero(got.reshape(want.shape) != want)
    return f"{where}{ops} " + ("= TFLM" if diff == 0 else f"{diff}/{want.size} differ")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vela-venvs", type=Path, default=Path(os.environ.get(
        "TVM_ETHOS_VELA_VENVS", REPO / "build" / "vela-venvs")),
        help="folder of older Vela venvs (3.11.0/, 4.5.0/); missing ones are left out")
    args = ap.parse_args(argv)
    columns = velas(args.vela_venvs)
    print(f"MIRROR_PAD on {CONFIG}: where each Vela puts it, its stream's NPU operations, and "
          "its output (functional model) against TFLite Micro's")
    print(" | ".join(["form", *columns]))
    for name, (shape, pads, mode) in FORMS.items():
        model = mirror_pad(shape, pads, mode)
        x = np.random.RandomState(0).randint(-128, 128, shape).astype(np.int8)
        (want,) = tflm_oracle(model, [x])
        row = [cell(model, x, want, exe, options) for exe, options in columns.values()]
        print(" | ".join([name, *row]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
