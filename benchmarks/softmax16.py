"""int16 SOFTMAX on the Ethos-U: our planned stream (``ops_softmax16``) beside Vela 5.2's
(``--optimise Size``), both run on the functional model: NPU operations (DMAs included, waits
not), DMA bytes, the arena each stream touches (emulated), and the outputs that differ from
TFLite Micro's over random inputs (every other input narrowed to small differences). Nothing
here is timed.

  python benchmarks/softmax16.py [--runs 20]
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
from ethosu_stream.tflite_graph import run_vela_model  # noqa: E402
from tests.helpers.tflite_oracle import tflm_oracle  # noqa: E402
from tests.helpers.vela_cli import vela_compile  # noqa: E402

#: (name, shape, input scale, beta)
MODELS = (("classifier 1x10", (1, 10), 2e-3, 1.0),
          ("keyword 1x49x12", (1, 49, 12), 5e-4, 1.0),
          ("attention 1x4x64x64", (1, 4, 64, 64), 1e-4, 0.125),
          ("map 1x32x32x16", (1, 32, 32, 16), 3e-4, 2.0))
ACCELERATORS = ("ethos-u55-128", "ethos-u65-256")
#: commands that are no operation of their own
_WAITS = ("NPU_OP_STOP", "NPU_OP_DMA_WAIT", "NPU_OP_KERNEL_WAIT")


def _model(shape, scale, beta) -> bytes:
    return tb.softmax(None, shape=shape, in_q=(scale, 0), dtype="int16",
                      out_q=(1 / 32768, 0), beta=beta)


def _measure(data: bytes, source: bytes, shape, accelerator: str, runs: int) -> dict:
    rs = np.random.RandomState(0)
    differ = total = 0
    stats = None
    for k in range(runs):
        x = rs.randint(-32768, 32768, shape)
        if k % 2:
            x = x // rs.randint(2, 3000)
        x = x.astype(np.int16)
        (got,), stats = run_vela_model(data, [x], accelerator)
        want = tflm_oracle(source, [x])[0]
        differ += int(np.count_nonzero(got.reshape(want.shape) != want))
        total += want.size
    ops = sum(n for k, n in stats.commands.items() if k.startswith("NPU_OP_") and k not in _WAITS)
    return {"ops": ops, "dma": sum(stats.dma_bytes.values()),
            "arena": sum(stats.high_water.get(r, 0) for r in (1, 2)),
            "differ": f"{differ}/{total}"}


def run(runs: int) -> list[dict]:
    rows = []
    for name, shape, scale, beta in MODELS:
        source = _model(shape, scale, beta)
        for acc in ACCELERATORS:
            cm = tvm_ethos.compile(source, f"ethos-u -accelerator_config={acc}",
                                   cache_dir=False)
            ours = _measure(cm.tflite, source, shape, acc, runs)
            data = vela_compile(source, acc, options=("--optimise", "Size"))
            vela = _measure(data, source, shape, acc, runs)
            rows.append({"model": name, "accelerator": acc,
                         **{f"ours_{k}": v for k, v in ours.items()},
                         **{f"vela_{k}": v for k, v in vela.items()}})
    return rows


def table(rows: list[dict]) -> str:
    head = tuple(rows[0])
    widths = [max(len(h), *(len(str(r[h])) for r in rows)) for h in head]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
    lines += ["  ".join(str(r[h]).ljust(w) for h, w in zip(head, widths)) for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20, help="random inputs per model (default 20)")
    args = ap.parse_args(argv)
    print("both streams emulated on the functional model; differ: outputs unlike TFLite "
          "Micro's / outputs compared; arena: scratch + fast scratch bytes touched")
    print(table(run(args.runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
