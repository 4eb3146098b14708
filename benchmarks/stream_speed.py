"""How fast the functional Ethos-U model (``ethosu_stream``) runs command streams: ours from
``tvm_ethos.compile`` (``npu_runtime="stream"``) and, with ``--vela``, Vela's own.

Columns (seconds of wall time; the CPU seconds of this process beside them, which shared cores
disturb less):

* ``compile``: ``tvm_ethos.compile``, which runs the stream once for the memory check;
* ``check``: that run alone (``stream_run.stream_report``), timed after the runs (where the
  checkout remembers decoded streams, this one is then decoded already): a dry run where the
  checkout has one (``run_stream(..., compute=False)``), else a full run on zero inputs;
* ``first run`` / ``run``: ``cm.run`` on a random input, the first after the compile (it
  measures the weight orders and decodes the weights) and the fastest of ``--repeat`` more;
* for Vela's streams: one full run of its ``ethos-u`` operator, then the fastest of the
  repeats, and a dry run where the checkout has one.

The timed code is whatever ``PYTHONPATH`` puts first, so one command can compare two
checkouts back to back::

    for d in /tmp/base $PWD; do PYTHONPATH=$d .venv/bin/python benchmarks/stream_speed.py; done
"""
from __future__ import annotations

import argparse
import inspect
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

MODELS = Path(os.environ.get("TVM_ETHOS_MODELS",
                             Path(__file__).resolve().parents[1].parent / "shared" / "models"))
#: (model, accelerator, budget): budget None is the fastest plan
CASES = (("mobilenet_v1_1.0_224", "ethos-u55-128", "300KiB"),
         ("mobilenet_v1_1.0_224", "ethos-u55-128", None),
         ("ds_cnn_kws", "ethos-u55-128", None))


def _timed(f):
    t, c = time.perf_counter(), time.process_time()
    out = f()
    return out, time.perf_counter() - t, time.process_time() - c


def _fmt(wall_cpu) -> str:
    return "-" if wall_cpu is None else f"{wall_cpu[0]:.2f} ({wall_cpu[1]:.2f})"


def _has_dry_run() -> bool:
    from ethosu_stream import run_stream

    return "compute" in inspect.signature(run_stream).parameters


def ours(model: str, config: str, budget: str | None, repeat: int) -> dict:
    import tvm_ethos
    from tvm_ethos.backends.ethos_u import stream_run

    cm, *compile_t = _timed(lambda: tvm_ethos.compile(
        str(MODELS / f"{model}.tflite"), f"ethos-u -accelerator_config={config},llvm",
        npu_runtime="stream", cache_dir=False, budget=budget))
    (sym, entry), = cm.plan_report["streams"].items()
    payload = cm.program.payloads[sym]
    x = np.random.RandomState(0).randint(
        -128, 128, [int(s) for s in cm.inputs[0].shape]).astype(np.int8)
    _, *first = _timed(lambda: cm.run(x))
    runs = [_timed(lambda: cm.run(x))[1:] for _ in range(repeat)]
    _, *check = _timed(lambda: stream_run.stream_report(payload, None))
    ops = sum(n for k, n in entry["commands"].items() if k.startswith("NPU_OP_")) - 1
    return {"stream": f"tvm-ethos {model} {config} {budget or 'fastest'}", "ops": ops,
            "compile": compile_t, "check": check, "first": first, "run": min(runs)}


def vela(model: str, config: str, optimise: str, repeat: int) -> dict:
    from ethosu_stream.tflite_custom_op import read_ethos_u_ops

    with tempfile.TemporaryDirectory() as out:
        subprocess.run([str(Path(sys.executable).parent / "vela"), str(MODELS / f"{model}.tflite"),
                        "--accelerator-config", config, "--optimise", optimise,
                        "--output-dir", out], check=True, capture_output=True)
        op = read_ethos_u_ops((Path(out) / f"{model}_vela.tflite").read_bytes())[0]
    x = np.random.RandomState(0).randint(-128, 128, op.inputs[0].shape).astype(np.int8)
    (_, stats), *first = _timed(lambda: op.run([x], config))
    runs = [_timed(lambda: op.run([x], config))[1:] for _ in range(repeat)]
    check = _timed(lambda: op.run([x], config, compute=False))[1:] if _has_dry_run() else None
    ops = sum(n for k, n in stats.commands.items() if k.startswith("NPU_OP_")) - 1
    return {"stream": f"Vela {optimise} {model} {config}", "ops": ops, "compile": None,
            "check": check, "first": first, "run": min(runs)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=2, help="steady runs (the fastest counts)")
    ap.add_argument("--vela", action="store_true",
                    help="also Vela's mobilenet_v1_1.0_224 streams (Performance, Size)")
    ap.add_argument("--only", help="only cases whose model name contains this")
    args = ap.parse_args(argv)
    rows = [ours(m, c, b, args.repeat) for m, c, b in CASES if not args.only or args.only in m]
    if args.vela:
        rows += [vela("mobilenet_v1_1.0_224", "ethos-u55-128", o, args.repeat)
                 for o in ("Performance", "Size")]
    import ethosu_stream

    print(f"ethosu_stream from {Path(ethosu_stream.__file__).parent.parent}; "
          f"dry run: {'yes' if _has_dry_run() else 'no (a full run)'}; "
          "seconds wall (CPU) on this machine")
    head = ("stream", "NPU ops", "compile", "check", "first run", "run")
    width = max(len(r["stream"]) for r in rows)
    print(f"{head[0]:<{width}} | " + " | ".join(f"{h:>13}" for h in head[1:]))
    for r in rows:
        cells = [str(r["ops"])] + [_fmt(r[k]) for k in ("compile", "check", "first", "run")]
        print(f"{r['stream']:<{width}} | " + " | ".join(f"{c:>13}" for c in cells))


if __name__ == "__main__":
    main()
