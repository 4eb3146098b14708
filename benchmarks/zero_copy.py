#!/usr/bin/env python3
"""Copy vs import at one fallback edge: handoff time and bytes moved, 16 KiB to 64 MiB.

Run: ``.venv/bin/python benchmarks/zero_copy.py --out out/zero_copy`` (table on stdout,
``zero_copy.csv`` and ``zero_copy.png`` in the output folder). Needs only pyopencl and numpy
(matplotlib for the plot, skipped if absent) - never ``tvm`` - so it runs on any machine with an
OpenCL driver: PoCL here, an NVIDIA card (``--device nvidia``), a Mali board.

The edge: an NPU subgraph (here: the host, which is where tvm-ethos emulates the NPU) and an
OpenCL subgraph exchange one tensor of N bytes. Two directions:

* ``to-device`` (NPU -> GPU): the host produced the tensor; an OpenCL kernel consumes it.
* ``to-host``   (GPU -> NPU): an OpenCL kernel produced the tensor; the host consumes it.

**Handoff** = the work the runtime does at the edge between "the producer has finished" and
"the consumer may read the tensor", timed on the host's wall clock (``perf_counter_ns``),
median over many runs, producer and consumer themselves not included:

* ``copy``: the tensor lives in the producer's memory and is copied into the consumer's:
  ``enqueue_copy`` (host -> device buffer, or device buffer -> host) plus waiting for it to
  complete. Bytes copied: N.
* ``import/map``: the tensor lives in one host buffer (aligned to the device's base-address
  alignment) wrapped once, at load time, with ``CL_MEM_USE_HOST_PTR``. The portable OpenCL
  rule for such a buffer is map before host access and unmap after, so the handoff is the map
  plus the unmap (with completion) that bracket the host side's access. Both are counted, though
  in ``to-device`` the map happens before the producer starts: a conservative figure. Bytes
  copied by the runtime: 0. Whether the *driver* copies behind the map is probed, because an
  equal map address proves nothing (the spec makes the map return the host pointer): after the
  device has used the buffer, the host rewrites it without a map and a kernel reads it. If the
  kernel sees the new bytes the device works on our memory ("shared" = 1, bytes moved 0);
  if it reads stale bytes the driver keeps a device-side mirror and copies at map/unmap
  ("shared" = 0, bytes moved reported as N). PoCL: shared. NVIDIA H100: a mirror.
* ``import/event``: the same buffer, when the device works on our memory itself (a CPU device
  with unified memory whose map returned our address: PoCL here). Then the only sync is waiting
  for the producer's completion event (Arm NN's ClFallbackImportWorkload does a queue sync and
  nothing else); for ``to-device`` there is nothing to wait on at all, since the host producer
  is done when it returns. Bytes copied: 0. This is the rule tvm-ethos's runtime picks on such
  devices (``host_sync="auto"`` in ``tvm_ethos.runtime.opencl_device``); on others it uses map.

``runtime`` = the rule the runtime's auto mode applies on this device (event or map).
``+kernel`` columns time handoff plus one consumer kernel (``to-device`` only) to show what the
handoff alone hides: on a discrete GPU a kernel reading imported host memory crosses the bus.

Goal (issue 5): at 4 MiB, ``to-device``, the runtime's import handoff at least 10x faster than the
copy, with 0 bytes copied. The script prints PASS/FAIL for it and for the strict map rule.
"""
from __future__ import annotations

import argparse
import csv
import ctypes.util
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

SIZES = [16 << 10, 256 << 10, 4 << 20, 64 << 20]
DEVICE_ENV_VAR = "TVM_ETHOS_OPENCL_DEVICE"

KERNEL = """
__kernel void consume(__global const uint4* restrict src, __global uint4* restrict dst) {
    size_t i = get_global_id(0);
    dst[i] = src[i] + (uint4)(1u);
}
__kernel void produce(__global uint4* restrict dst, uint seed) {
    size_t i = get_global_id(0);
    dst[i] = (uint4)(seed) + (uint4)((uint)i);
}
"""


def _register_nvidia_icd() -> None:
    """Make NVIDIA's OpenCL platform visible when its driver is installed but not registered.

    On the NVIDIA machines measured, ``libnvidia-opencl.so.1`` exists but no ICD file names it;
    an ICD file in a folder given by ``OCL_ICD_VENDORS`` (read by the ICD loader) fixes that.
    Must run before pyopencl is imported.
    """
    if os.environ.get("OCL_ICD_VENDORS") or os.path.exists("/etc/OpenCL/vendors/nvidia.icd"):
        return
    found = ctypes.util.find_library("nvidia-opencl")
    candidates = [
        "/usr/lib/x86_64-linux-gnu/libnvidia-opencl.so.1",
        "/usr/lib64/libnvidia-opencl.so.1",
        "/usr/local/nvidia/lib64/libnvidia-opencl.so.1",
        "/usr/local/nvidia/lib/libnvidia-opencl.so.1",
    ]
    lib = found or next((c for c in candidates if os.path.exists(c)), None)
    if lib is None:
        return
    vendors = tempfile.mkdtemp(prefix="ocl-vendors-")
    Path(vendors, "nvidia.icd").write_text(lib + "\n")
    os.environ["OCL_ICD_VENDORS"] = vendors


@dataclass
class Row:
    size: int
    direction: str
    path: str
    median_us: float
    p10_us: float
    p90_us: float
    runs: int
    bytes_copied: int  # by the runtime (enqueue_copy)
    bytes_moved: int  # by the runtime or, behind a map/unmap, by the driver (probed)
    same_address: bool
    shared: bool
    correct: bool


def aligned_empty(nbytes: int, alignment: int) -> np.ndarray:
    """Host memory whose address is a multiple of ``alignment`` (the runtime's rule)."""
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    off = (-raw.ctypes.data) % alignment
    return raw[off : off + nbytes]


def select_device(cl, spec: str | None):
    """Same selection as tvm_ethos.runtime.opencl_device.select_device (kept local: no tvm)."""
    pairs = [(p, d) for p in cl.get_platforms() for d in p.get_devices()]
    if not pairs:
        sys.exit("no OpenCL device found")
    spec = spec or os.environ.get(DEVICE_ENV_VAR)
    if spec:
        want = spec.lower()
        if ":" in want:
            pw, dw = want.split(":", 1)
            hits = [(p, d) for p, d in pairs if pw in p.name.lower() and dw in d.name.lower()]
        else:
            hits = [(p, d) for p, d in pairs if want in f"{p.name} / {d.name}".lower()]
        if not hits:
            sys.exit(
                f"no device matches {spec!r}: "
                + "; ".join(f"{p.name} / {d.name}" for p, d in pairs)
            )
        return hits[0][1]
    gpus = [d for _p, d in pairs if d.type & cl.device_type.GPU]
    return gpus[0] if gpus else pairs[0][1]


def timed(fn, runs: int, warmup: int = 3) -> list[float]:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter_ns()
        fn()
        out.append((time.perf_counter_ns() - t0) / 1e3)
    return out


def runs_for(size: int, base: int) -> int:
    return max(10, base if size <= 256 << 10 else base // 4 if size <= 4 << 20 else base // 20)


def bench(cl, device, sizes: list[int], base_runs: int) -> tuple[list[Row], dict]:
    ctx = cl.Context([device])
    q = cl.CommandQueue(ctx)
    prg = cl.Program(ctx, KERNEL).build()
    consume = cl.Kernel(prg, "consume")
    produce = cl.Kernel(prg, "produce")
    mf = cl.mem_flags
    align = max(int(device.mem_base_addr_align) // 8, 4096)
    try:
        unified = bool(device.host_unified_memory)
    except cl.Error:
        unified = False
    is_cpu = bool(device.type & cl.device_type.CPU)
    rows: list[Row] = []
    rules: dict[int, str] = {}

    def add(size, direction, path, times, copied, ok):
        moved = copied if path.startswith("copy") or shared else size
        rows.append(Row(size, direction, path, statistics.median(times),
                        float(np.percentile(times, 10)), float(np.percentile(times, 90)),
                        len(times), copied, moved, same_address, shared, ok))

    for n in sizes:
        runs = runs_for(n, base_runs)
        words = n // 16
        host = aligned_empty(n, align)
        host_out = aligned_empty(n, align)
        dev_in = cl.Buffer(ctx, mf.READ_WRITE, n)
        dev_out = cl.Buffer(ctx, mf.READ_WRITE, n)
        # Wrapped once, as the runtime does at load time.
        imported = cl.Buffer(ctx, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=host)
        m, _ = cl.enqueue_map_buffer(
            q, imported, cl.map_flags.READ, 0, (n,), np.uint8, is_blocking=True
        )
        same_address = int(m.ctypes.data) == int(host.ctypes.data)
        m.base.release(q).wait()
        del m
        # Probe: does a kernel read our memory, or a driver-side mirror of it? (See docstring.)
        host.view(np.uint32)[:] = 1
        consume.set_args(imported, dev_out)
        cl.enqueue_nd_range_kernel(q, consume, (words,), None).wait()
        host.view(np.uint32)[:] = 5  # behind the driver's back: no map, no copy
        cl.enqueue_nd_range_kernel(q, consume, (words,), None).wait()
        cl.enqueue_copy(q, host_out, dev_out, is_blocking=True)
        shared = bool((host_out.view(np.uint32) == 6).all())
        # The rule of tvm_ethos.runtime.opencl_device (host_sync="auto").
        rule = "event" if (same_address and is_cpu and unified) else "map"
        rules[n] = rule
        expect = (
            (np.arange(words, dtype=np.uint32)[:, None] + np.uint32(8)).repeat(4, 1).reshape(-1)
        )

        def check_out() -> bool:
            cl.enqueue_copy(q, host_out, dev_out, is_blocking=True)
            return bool(np.array_equal(host_out.view(np.uint32), expect))

        def host_produce(dst: np.ndarray) -> None:  # the "NPU" output: word i of lane k = i + 7
            dst.view(np.uint32).reshape(-1, 4)[:] = (np.arange(words, dtype=np.uint32) + 7)[:, None]

        # ---- to-device: copy ----
        host_produce(host)
        def h2d_copy():
            cl.enqueue_copy(q, dev_in, host, is_blocking=False).wait()
        t = timed(h2d_copy, runs)
        consume.set_args(dev_in, dev_out)
        cl.enqueue_nd_range_kernel(q, consume, (words,), None).wait()
        add(n, "to-device", "copy", t, n, check_out())
        def h2d_copy_k():
            ev = cl.enqueue_copy(q, dev_in, host, is_blocking=False)
            cl.enqueue_nd_range_kernel(q, consume, (words,), None, wait_for=[ev]).wait()
        add(n, "to-device", "copy+kernel", timed(h2d_copy_k, runs), n, True)

        # ---- to-device: import/map (producer writes inside the map window) ----
        consume.set_args(imported, dev_out)
        maps: list[float] = []
        def h2d_map():
            t0 = time.perf_counter_ns()
            mm, _ = cl.enqueue_map_buffer(q, imported, cl.map_flags.WRITE_INVALIDATE_REGION, 0,
                                          (n,), np.uint8, is_blocking=True)
            t1 = time.perf_counter_ns()
            host_produce(mm)  # the producer: not timed
            t2 = time.perf_counter_ns()
            mm.base.release(q).wait()
            t3 = time.perf_counter_ns()
            maps.append(((t1 - t0) + (t3 - t2)) / 1e3)
        for _ in range(3):
            h2d_map()
        maps.clear()
        for _ in range(runs):
            h2d_map()
        host[:] = 0
        h2d_map()
        cl.enqueue_nd_range_kernel(q, consume, (words,), None).wait()
        add(n, "to-device", "import/map", maps[:runs], 0, check_out())

        # ---- to-device: import/event (host writes straight into the wrapped memory) ----
        # The host producer is complete when it returns; the one sync left is the reuse hazard:
        # the previous inference's consumer must be done with the buffer before it is
        # rewritten, i.e. a wait on that kernel's event (complete by now, as in a pipeline).
        last = cl.enqueue_nd_range_kernel(q, consume, (words,), None)
        last.wait()
        host[:] = 0
        host_produce(host)
        def h2d_event():
            last.wait()
        t = timed(h2d_event, runs)
        cl.enqueue_nd_range_kernel(q, consume, (words,), None).wait()
        ok = check_out() if rule == "event" else False
        add(n, "to-device", "import/event", t, 0, ok)
        def h2d_import_k():
            cl.enqueue_nd_range_kernel(q, consume, (words,), None).wait()
        add(n, "to-device", "import+kernel", timed(h2d_import_k, runs), 0, True)

        # ---- to-host: a kernel produced the tensor; the host reads it ----
        produce.set_args(dev_in, np.uint32(7))
        cl.enqueue_nd_range_kernel(q, produce, (words,), None).wait()
        host_out[:] = 0
        def d2h_copy():
            cl.enqueue_copy(q, host_out, dev_in, is_blocking=False).wait()
        t = timed(d2h_copy, runs)
        ok = bool(np.array_equal(host_out.view(np.uint32), expect - np.uint32(1)))
        add(n, "to-host", "copy", t, n, ok)

        produce.set_args(imported, np.uint32(7))
        host[:] = 0
        ev = cl.enqueue_nd_range_kernel(q, produce, (words,), None)
        ev.wait()
        seen: list[bool] = []
        def d2h_map():
            mm, _ = cl.enqueue_map_buffer(q, imported, cl.map_flags.READ, 0, (n,), np.uint8,
                                          is_blocking=True)
            if not seen:
                seen.append(bool(np.array_equal(mm.view(np.uint32), expect - np.uint32(1))))
            mm.base.release(q).wait()
        t = timed(d2h_map, runs)
        add(n, "to-host", "import/map", t, 0, seen[0])

        def d2h_event():
            ev.wait()
        t = timed(d2h_event, runs)
        ok = (
            bool(np.array_equal(host.view(np.uint32), expect - np.uint32(1)))
            if rule == "event"
            else False
        )
        add(n, "to-host", "import/event", t, 0, ok)
        for b in (dev_in, dev_out, imported):
            b.release()
    info = {
        "platform": device.platform.name.strip(),
        "device": device.name.strip(),
        "unified_memory": unified,
        "cpu": is_cpu,
        "base_align": int(device.mem_base_addr_align) // 8,
        "rules": rules,
    }
    return rows, info


def human(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def report(rows: list[Row], info: dict, out: Path) -> int:
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "zero_copy.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["size_bytes", "direction", "path", "median_us", "p10_us", "p90_us", "runs",
                    "bytes_copied", "bytes_moved", "same_address", "shared", "correct",
                    "runtime_rule", "device"])
        for r in rows:
            w.writerow([r.size, r.direction, r.path, f"{r.median_us:.2f}", f"{r.p10_us:.2f}",
                        f"{r.p90_us:.2f}", r.runs, r.bytes_copied, r.bytes_moved,
                        int(r.same_address), int(r.shared), int(r.correct),
                        info["rules"][r.size], f"{info['platform']} / {info['device']}"])
    get = {(r.size, r.direction, r.path): r for r in rows}
    sizes = sorted({r.size for r in rows})
    first = rows[0]
    print(
        f"device: {info['platform']} / {info['device']}  unified memory: {info['unified_memory']}  "
        f"CPU device: {info['cpu']}  base alignment: {info['base_align']} B"
    )
    mirror = "" if first.shared else " -> the driver mirrors it and copies at map/unmap"
    print(
        f"USE_HOST_PTR: map returns our address: {bool(first.same_address)}; "
        f"kernel reads our memory (probe): {bool(first.shared)}{mirror}"
    )
    print(
        "handoff medians in microseconds; moved = bytes copied per handoff, by the runtime or "
        "(probed) by the driver; rule = the sync rule tvm-ethos uses here\n"
    )
    for direction in ("to-device", "to-host"):
        print(f"{direction}:")
        hdr = (
            f"{'size':>8} | {'copy':>9} {'moved':>9} | {'imp/map':>9} {'imp/event':>9} "
            f"{'moved':>9} | "
            f"{'rule':>5} {'copy/rule':>9} {'copy/map':>8}"
        )
        if direction == "to-device":
            hdr += f" | {'copy+k':>9} {'import+k':>9}"
        print(hdr)
        for n in sizes:
            c = get[(n, direction, "copy")]
            im = get[(n, direction, "import/map")]
            ie = get[(n, direction, "import/event")]
            rule = info["rules"][n]
            rt = ie if rule == "event" else im
            line = (
                f"{human(n):>8} | {c.median_us:9.1f} {c.bytes_moved:9d} | {im.median_us:9.1f} "
                f"{ie.median_us:9.2f} {rt.bytes_moved:9d} | {rule:>5} "
                f"{c.median_us / max(rt.median_us, 1e-3):8.1f}x {c.median_us / im.median_us:7.1f}x"
            )
            if direction == "to-device":
                line += (f" | {get[(n, direction, 'copy+kernel')].median_us:9.1f} "
                         f"{get[(n, direction, 'import+kernel')].median_us:9.1f}")
            print(line)
        print()
    bad = [
        r
        for r in rows
        if not r.correct and not (r.path == "import/event" and info["rules"][r.size] != "event")
    ]
    if bad:
        print("WRONG RESULTS:", ", ".join(f"{human(r.size)} {r.direction} {r.path}" for r in bad))
    n = 4 << 20
    status = 0
    if n in sizes:
        c = get[(n, "to-device", "copy")]
        rule = info["rules"][n]
        rt = get[(n, "to-device", "import/event" if rule == "event" else "import/map")]
        im = get[(n, "to-device", "import/map")]
        ratio = c.median_us / max(rt.median_us, 1e-3)
        ok = ratio >= 10 and rt.bytes_moved == 0 and rt.correct
        print(f"goal @ 4 MiB to-device, runtime rule ({rule}): copy {c.median_us:.1f} us vs import "
              f"{rt.median_us:.2f} us = {ratio:.1f}x, {rt.bytes_moved} B moved -> "
              f"{'PASS' if ok else 'FAIL'}")
        r2 = c.median_us / im.median_us
        ok2 = r2 >= 10 and im.bytes_moved == 0
        print(f"          strict map/unmap rule: {im.median_us:.1f} us = {r2:.1f}x, "
              f"{im.bytes_moved} B moved -> {'PASS' if ok2 else 'FAIL'}")
        status = 0 if ok else 1
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
        for ax, direction in zip(axes, ("to-device", "to-host")):
            for path, style in (("copy", "o-"), ("import/map", "s-"), ("import/event", "^-")):
                ys = [max(get[(s, direction, path)].median_us, 0.05) for s in sizes]
                ax.plot([s / 1024 for s in sizes], ys, style, label=path)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("tensor size (KiB)")
            ax.set_title(f"{direction} handoff")
            ax.grid(True, which="both", alpha=0.3)
        axes[0].set_ylabel("median handoff (µs)")
        axes[0].legend()
        fig.suptitle(f"copy vs import, {info['device']} ({info['platform']})", fontsize=10)
        fig.tight_layout()
        fig.savefig(out / "zero_copy.png", dpi=110)
        print(f"wrote {out / 'zero_copy.csv'} and {out / 'zero_copy.png'}")
    except ImportError:
        print(f"wrote {out / 'zero_copy.csv'} (matplotlib missing: no plot)")
    return status


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/zero_copy", help="output folder for CSV and PNG")
    ap.add_argument(
        "--device",
        default=None,
        help=f"platform/device name substring (default: ${DEVICE_ENV_VAR}, else a GPU, "
        "else the first)",
    )
    ap.add_argument(
        "--sizes", default=None, help="comma-separated byte sizes (default 16K,256K,4M,64M)"
    )
    ap.add_argument(
        "--runs", type=int, default=400, help="runs at <=256 KiB (fewer for larger sizes)"
    )
    ap.add_argument("--strict", action="store_true", help="exit 1 when the 4 MiB goal is missed")
    args = ap.parse_args(argv)
    _register_nvidia_icd()
    import pyopencl as cl

    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else SIZES
    if any(s % 16 for s in sizes):
        sys.exit("sizes must be multiples of 16 bytes")
    device = select_device(cl, args.device)
    rows, info = bench(cl, device, sizes, args.runs)
    status = report(rows, info, Path(args.out))
    return status if args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
