#!/usr/bin/env python3
"""End to end: a network with a GPU fallback in the middle (NPU -> GPU -> NPU), copy vs import.

Run: ``.venv/bin/python benchmarks/e2e_fallback.py`` (options: ``--sizes 32x32x16,128x128x32``,
``--seconds 2``, ``--device pocl``). Prints one table; ``--csv PATH`` writes it too.

The network (an int8 TFLite graph built here): ``x -> depthwise 3x3 (NPU) -> max pool 3x3
stride 1 (GPU: Ethos-N pools only with stride 2) -> depthwise 3x3 (NPU)``, compiled once for
``ethos-n,opencl``. Two fallback edges of H*W*C bytes each: NPU -> GPU and GPU -> NPU. The NPU
subgraphs run on the emulator (TVM-built host kernels), the GPU subgraph through PyOpenCL.

For each size the same compiled model is loaded twice - ``fallback_mode="copy"`` (MemCopy at
both edges: the NPU output copied into a device buffer, the GPU output copied back) and
``"import"`` (FallbackImport: one LCM-aligned buffer per edge, USE_HOST_PTR on the GPU side, a
wait on the GPU's event before the NPU reads) - and run back to back for ``--seconds`` each
(after 3 warm-up inferences; caller buffers aligned, so the caller boundary copies nothing).
Columns: inferences per second, median latency, bytes copied and imported per inference (from
``last_run_stats``), and the import/copy speed-up. Every output is checked equal between modes.
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


def build_model(h: int, w: int, c: int, seed: int = 0) -> bytes:
    from graph_builder import Graph

    g = Graph(np.random.RandomState(seed))
    x = g.input((1, h, w, c))
    a = g.conv2d(x, c, depthwise=True)
    p = g.pool("max", a, size=(3, 3), stride=(1, 1), padding="SAME")
    y = g.conv2d(p, c, depthwise=True)
    return g.build([y])


def aligned(x: np.ndarray, alignment: int = 4096) -> np.ndarray:
    raw = np.empty(x.nbytes + alignment, np.uint8)
    off = (-int(raw.ctypes.data)) % alignment
    out = raw[off:off + x.nbytes].view(x.dtype).reshape(x.shape)
    out[...] = x
    return out


def measure(ex, xs, seconds: float):
    for _ in range(3):
        out = ex.run(xs)
    lat = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(lat) < 5:
        t0 = time.perf_counter()
        out = ex.run(xs)
        lat.append(time.perf_counter() - t0)
    return out, lat, ex.last_run_stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="32x32x16,64x64x32,128x128x32,256x256x32",
                    help="HxWxC of the fallback tensors, comma-separated")
    ap.add_argument("--seconds", type=float, default=2.0, help="measuring time per mode and size")
    ap.add_argument("--device", default=None, help="OpenCL device selection (default: $TVM_ETHOS_OPENCL_DEVICE or the first)")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args(argv)

    import tvm_ethos
    from tvm_ethos.runtime.executor import Executor

    rows = []
    for size in args.sizes.split(","):
        h, w, c = (int(v) for v in size.lower().split("x"))
        model = build_model(h, w, c)
        t0 = time.perf_counter()
        cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-n,opencl")
        t_compile = time.perf_counter() - t0
        backends = [sg.backend for sg in cm.program.subgraphs]
        assert backends == ["ethos-n", "opencl", "ethos-n"], cm.program.summary()
        xs = [aligned(np.random.RandomState(1).randint(-128, 128, size=(1, h, w, c)).astype(np.int8))]
        results = {}
        for mode in ("copy", "import"):
            ex = Executor(cm.program, cm.executable.mod, fallback_mode=mode, opencl_device=args.device)
            try:
                out, lat, st = measure(ex, xs, args.seconds)
                results[mode] = (out, lat, st, str(ex.device.info.device))
            finally:
                ex.unload()
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
    print(f"NPU -> GPU -> NPU, ethos-n (emulated) + opencl ({dev}); median of runs over {args.seconds:g} s per mode")
    print()
    print("| fallback tensor | bytes per edge | mode | inferences/s | median ms | p90 ms | bytes copied / inf | bytes imported / inf | speed-up |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i in range(0, len(rows), 2):
        cp, im = rows[i], rows[i + 1]
        for r in (cp, im):
            speed = "" if r is cp else f"{im['inf_per_s'] / cp['inf_per_s']:.2f}x"
            print(f"| {r['tensor']} | {r['edge_bytes']} | {r['mode']} | {r['inf_per_s']:.1f} | {r['median_ms']:.3f} | "
                  f"{r['p90_ms']:.3f} | {r['bytes_copied']} | {r['bytes_imported']} | {speed} |")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0]))
            wr.writeheader()
            wr.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
