#!/usr/bin/env python3
"""End to end: a network with a GPU fallback in the middle (NPU -> GPU -> NPU), copy vs import.

Run: ``.venv/bin/python benchmarks/e2e_fallback.py`` (options: ``--sizes 32x32x16,128x128x32``,
``--seconds 2``, ``--device pocl``). Prints one table; ``--csv PATH`` writes it too.

The network (an int8 TFLite graph built here): ``x -> ADD(x, x) (NPU) -> max pool 3x3 stride 1
(GPU: Ethos-N pools only with stride 2) -> ADD(p, p) (NPU)`` (``--net add``, default: little
compute, so the edges weigh as much as they can), or the same with 3x3 depthwise convolutions
on the NPU (``--net dwconv``: the emulator's unscheduled loops dominate), compiled once for
``ethos-n,opencl``. Two fallback edges of H*W*C bytes each: NPU -> GPU and GPU -> NPU. The NPU
subgraphs run on the emulator (TVM-built host kernels), the GPU subgraph through PyOpenCL.

For each size the same compiled model is loaded twice - ``fallback_mode="copy"`` (MemCopy at
both edges: the NPU output copied into a device buffer, the GPU output copied back) and
``"import"`` (FallbackImport: one LCM-aligned buffer per edge, USE_HOST_PTR on the GPU side, a
wait on the GPU's event before the NPU reads) - and run for ``--seconds`` each
(after 3 warm-up inferences, the two modes interleaved in 10 rounds so background load hits
both alike; caller buffers aligned, so the caller boundary copies nothing). Columns:
inferences per second (runs / time spent in them), median and p90 latency, bytes copied and
imported per inference (from ``last_run_stats``), and the speed-up (copy median / import
median). Every output is checked equal between modes.
"""
from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "tvm_ethos"))

from tvm_ethos.runtime.allocators import aligned_copy  # noqa: E402  (no tvm)


def build_model(h: int, w: int, c: int, net: str = "add", seed: int = 0) -> bytes:
    from graph_builder import Graph

    g = Graph(np.random.RandomState(seed))
    x = g.input((1, h, w, c))
    if net == "add":  # cheap NPU work: the edges weigh more
        a = g.add(x, x)
    else:
        a = g.conv2d(x, c, depthwise=True)
    p = g.pool("max", a, size=(3, 3), stride=(1, 1), padding="SAME")
    y = g.add(p, p) if net == "add" else g.conv2d(p, c, depthwise=True)
    return g.build([y])


aligned = aligned_copy


def measure(executors: dict, xs, seconds: float, rounds: int = 10):
    """Interleave the modes (``rounds`` rounds, each mode ``seconds / rounds`` per round), so a
    change in the machine's background load hits both modes alike."""
    for ex in executors.values():
        for _ in range(3):
            ex.run(xs)
    lat = {m: [] for m in executors}
    for _ in range(rounds):
        for m, ex in executors.items():
            t_end = time.perf_counter() + seconds / rounds
            while time.perf_counter() < t_end or not lat[m]:
                t0 = time.perf_counter()
                ex.run(xs)
                lat[m].append(time.perf_counter() - t0)
    return {m: (ex.run(xs), lat[m], ex.last_run_stats) for m, ex in executors.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="32x32x16,64x64x32,128x128x32,256x256x32",
                    help="HxWxC of the fallback tensors, comma-separated")
    ap.add_argument("--seconds", type=float, default=2.0, help="measuring time per mode and size")
    ap.add_argument(
        "--device",
        default=None,
        help="OpenCL device selection (default: $TVM_ETHOS_OPENCL_DEVICE or the first)",
    )
    ap.add_argument(
        "--net",
        choices=("add", "dwconv"),
        default="add",
        help="NPU layers: an elementwise ADD (cheap) or a 3x3 depthwise conv (compute-bound)",
    )
    ap.add_argument("--csv", default=None)
    args = ap.parse_args(argv)

    import tvm_ethos
    from tvm_ethos.runtime.executor import Executor

    rows = []
    for size in args.sizes.split(","):
        h, w, c = (int(v) for v in size.lower().split("x"))
        model = build_model(h, w, c, args.net)
        t0 = time.perf_counter()
        cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-n,opencl")
        t_compile = time.perf_counter() - t0
        backends = [sg.backend for sg in cm.program.subgraphs]
        assert backends == ["ethos-n", "opencl", "ethos-n"], cm.program.summary()
        xs = [
            aligned(np.random.RandomState(1).randint(-128, 128, size=(1, h, w, c)).astype(np.int8))
        ]
        executors = {
            m: Executor(cm.program, cm.executable.mod, fallback_mode=m, opencl_device=args.device)
            for m in ("copy", "import")
        }
        try:
            measured = measure(executors, xs, args.seconds)
            dev = str(executors["copy"].device.info.device)
        finally:
            for ex in executors.values():
                ex.unload()
        results = {m: (out, lat, st, dev) for m, (out, lat, st) in measured.items()}
        assert all(np.array_equal(a, b) for a, b in zip(results["copy"][0], results["import"][0]))
        for mode in ("copy", "import"):
            _out, lat, st, dev = results[mode]
            med = statistics.median(lat)
            rows.append({
                "tensor": f"{h}x{w}x{c}", "edge_bytes": h * w * c, "mode": mode,
                "inf_per_s": len(lat) / sum(lat), "median_ms": med * 1e3,
                "p90_ms": sorted(lat)[int(0.9 * (len(lat) - 1))] * 1e3, "runs": len(lat),
                "bytes_copied": st.bytes_copied, "bytes_imported": st.bytes_imported,
                "gpu_syncs": st.gpu_syncs, "compile_s": t_compile, "device": dev,
            })
        cm.unload()
        print(f"# {h}x{w}x{c}: compiled in {t_compile:.1f} s", file=sys.stderr, flush=True)

    dev = rows[0]["device"] if rows else "?"
    print(
        f"NPU -> GPU -> NPU ({args.net}), ethos-n (emulated) + opencl ({dev}); "
        f"{args.seconds:g} s per mode, "
        "modes interleaved in 10 rounds; speed-up = copy median / import median"
    )
    print()
    print(
        "| fallback tensor | bytes per edge | mode | inferences/s | median ms | p90 ms | bytes "
        "copied / inf | bytes imported / inf | speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for i in range(0, len(rows), 2):
        cp, im = rows[i], rows[i + 1]
        for r in (cp, im):
            speed = "" if r is cp else f"{cp['median_ms'] / im['median_ms']:.2f}x"
            print(
                f"| {r['tensor']} | {r['edge_bytes']} | {r['mode']} | {r['inf_per_s']:.1f} | "
                f"{r['median_ms']:.3f} | "
                f"{r['p90_ms']:.3f} | {r['bytes_copied']} | {r['bytes_imported']} | {speed} |"
            )
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
