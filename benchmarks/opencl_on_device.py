#!/usr/bin/env python3
"""The OpenCL fallback kernels of one model, with and without the GPU schedules, on any OpenCL
device.

Two steps, so the kernels can run where TVM cannot be installed (a GPU machine with only numpy
and PyOpenCL):

* ``dump``: compile the model for ``target="opencl"`` (needs TVM), build its kernels with
  ``stages`` (``network_build.schedule_stages_for_gpu``: one work-item per output element, the
  schedule before ``gpu_schedule``) and with each ``--tilings`` entry of
  ``gpu_schedule.schedule_for_gpu`` (``tiled-THREADSxCOLUMNSxLANES``), run them all on the local
  OpenCL device (PoCL here), check every tensor equal to ``stages``', and write the folder:
  ``program.json`` + ``constants.bin`` (the network), one ``<variant>.json`` per schedule (OpenCL
  C and launch recipes), ``variants.json`` (their names), ``tensors.npz`` (the input and every
  tensor PoCL computed).
* ``run DIR``: load the folder with nothing but numpy, PyOpenCL and ``tvm_ethos.runtime``'s
  OpenCL and program modules (no TVM), run every variant on the chosen device (``--device
  nvidia``), check every tensor equal to PoCL's, and print per kernel the median device
  milliseconds (OpenCL profiling: start to end of each kernel, summed per PrimFunc), the sum,
  and the median wall time of the whole network (enqueue to ``finish``), each with its speed-up
  over the first variant.

Run: ``.venv/bin/python benchmarks/opencl_on_device.py dump --model mobilenet_v1_1.0_224 --out
out/ocl_mbv1 --tilings 64x2x4,128x1x4`` then ``... run out/ocl_mbv1 --device nvidia``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MODELS = Path(os.environ.get("TVM_ETHOS_MODELS", REPO.parent / "shared" / "models"))


# ------------------------------------------------------------------------------ running (no tvm)
class _KernelEvents:
    """The pyopencl module with ``enqueue_nd_range_kernel`` recording every kernel's event."""

    def __init__(self, cl) -> None:
        self._cl = cl
        self.events: list = []

    def __getattr__(self, name):
        return getattr(self._cl, name)

    def enqueue_nd_range_kernel(self, *args, **kwargs):
        ev = self._cl.enqueue_nd_range_kernel(*args, **kwargs)
        self.events.append(ev)
        return ev


class Network:
    """The OpenCL steps of a program, with every tensor and constant in device memory."""

    def __init__(self, dev, spec, program) -> None:
        self.dev = dev
        self.built = dev.build(spec)
        self.steps = [s for sg in program.subgraphs if sg.device == "opencl" for s in sg.steps]
        self.tensors = program.tensors
        self.bufs = {("t", tid): dev.alloc(t.nbytes) for tid, t in program.tensors.items()}
        for i, c in enumerate(program.constants):
            buf = dev.alloc(c.nbytes)
            dev.upload(buf, np.ascontiguousarray(c), blocking=True)
            self.bufs[("c", i)] = buf

    def set_inputs(self, values: dict) -> None:
        for tid, a in values.items():
            self.dev.upload(self.bufs[("t", tid)], np.ascontiguousarray(a), blocking=True)

    def launch_all(self) -> None:
        for s in self.steps:
            args = [self.bufs[tuple(a)] for a in s.args] + [self.bufs[("t", o)] for o in s.outs]
            self.built[s.func].launch(args)

    def kernel_ms(self) -> dict:
        """Device milliseconds per step (the sum of its kernels' profiled start..end), one run."""
        rec = _KernelEvents(self.dev.cl)
        self.dev.cl = rec
        try:
            out = {}
            for s in self.steps:
                first = len(rec.events)
                args = [self.bufs[tuple(a)] for a in s.args] + [self.bufs[("t", o)] for o in s.outs]
                self.built[s.func].launch(args)
                out[s.func] = rec.events[first:]
        finally:
            self.dev.cl = rec._cl
        self.dev.finish()
        return {
            k: sum(e.profile.end - e.profile.start for e in evs) * 1e-6 for k, evs in out.items()
        }

    def read(self, tid: int) -> np.ndarray:
        t = self.tensors[tid]
        out = np.empty(t.shape, dtype=t.dtype)
        self.dev.download(out, self.bufs[("t", tid)], blocking=True)
        return out


def time_network(net: Network, seconds: float) -> tuple[float, dict]:
    """Median wall ms of the whole network (enqueue to finish) and median device ms per step."""
    for _ in range(2):
        net.launch_all()
    net.dev.finish()
    walls = []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end or len(walls) < 3:
        t0 = time.perf_counter()
        net.launch_all()
        net.dev.finish()
        walls.append(time.perf_counter() - t0)
    runs = [net.kernel_ms() for _ in range(5)]
    return statistics.median(walls) * 1e3, {
        k: statistics.median(r[k] for r in runs) for k in runs[0]
    }


def load_folder(folder: Path):
    from tvm_ethos.runtime.opencl_device import OpenCLModuleSpec
    from tvm_ethos.runtime.program import NetworkProgram

    program = NetworkProgram.from_json(
        (folder / "program.json").read_text(), (folder / "constants.bin").read_bytes()
    )
    names = json.loads((folder / "variants.json").read_text())
    specs = {v: OpenCLModuleSpec.from_json((folder / f"{v}.json").read_text()) for v in names}
    with np.load(folder / "tensors.npz") as z:
        tensors = {int(k[1:]): z[k] for k in z.files}
    return program, specs, tensors


def run_variants(
    program, specs, device: str | None, seconds: float, inputs: dict, reference: dict | None
):
    """Run every variant on ``inputs``; every tensor is compared with ``reference`` (None: with
    the first variant's). Returns (ms per step, network ms, mismatches, first variant's tensors)."""
    from tvm_ethos.runtime.opencl_device import OpenCLDevice

    dev = OpenCLDevice(device, profiling=True)
    print(f"# device: {dev.info.platform} / {dev.info.device}", flush=True)
    results, totals, mismatches, first = {}, {}, [], None
    for v, spec in specs.items():
        net = Network(dev, spec, program)
        net.set_inputs(inputs)
        net.launch_all()
        dev.finish()
        got = {tid: net.read(tid) for tid in program.tensors if tid not in program.inputs}
        ref = reference if reference is not None else first
        if ref is not None:
            mismatches += [
                f"{v}: {program.tensors[t].name}"
                for t, a in got.items()
                if not np.array_equal(a, ref[t])
            ]
        if first is None:
            first = got
        totals[v], results[v] = time_network(net, seconds)
        print(f"# {v}: {totals[v]:.3f} ms", flush=True)
    return results, totals, mismatches, first


def print_table(results: dict, totals: dict) -> None:
    """One row per kernel, one column per variant (device ms, ratio to the first variant)."""
    names = list(results)
    base = names[0]
    print("| kernel | " + " | ".join(f"{v} ms" for v in names) + " |")
    print("|---" * (len(names) + 1) + "|")

    def row(label, cells):
        print(
            f"| {label} | "
            + " | ".join(
                f"{cells[v]:.3f}" + ("" if v == base else f" ({cells[base] / cells[v]:.2f}x)")
                for v in names
            )
            + " |"
        )

    for k in results[base]:
        row(k, {v: results[v][k] for v in names})
    row("sum of kernels", {v: sum(results[v].values()) for v in names})
    row("network wall", totals)


def cmd_run(args) -> int:
    program, specs, tensors = load_folder(Path(args.folder))
    inputs = {t: tensors[t] for t in program.inputs}
    results, totals, mismatches, _ = run_variants(
        program, specs, args.device, args.seconds, inputs, tensors
    )
    print_table(results, totals)
    if mismatches:
        print(f"MISMATCH against PoCL: {', '.join(mismatches[:8])}")
        return 1
    print("every tensor of every variant equal to PoCL's")
    return 0


# ------------------------------------------------------------------------------ dumping (tvm)
def compile_captured(path: Path):
    """Compile for opencl; returns the program and the legalized module its kernels come from."""
    import tvm_ethos
    from tvm_ethos.pipeline import network_build

    captured = {}
    build = network_build.opencl_kernels

    def capture(fused, program, *rest):
        captured["fused"] = fused
        return build(fused, program, *rest)

    network_build.opencl_kernels = capture
    try:
        cm = tvm_ethos.compile(tvm_ethos.load_model(str(path)), target="opencl")
    finally:
        network_build.opencl_kernels = build
    return cm.program, captured["fused"]


def build_spec(fused, program, schedule):
    import tvm

    from tvm_ethos.host.opencl.gpu_tir_pipeline import GPU_PIPELINE_NAME
    from tvm_ethos.host.opencl.opencl_extraction import extract_opencl

    names = sorted({s.func for sg in program.subgraphs if sg.device == "opencl" for s in sg.steps})
    prims = {n: schedule(fused[n]).with_attr("global_symbol", n) for n in names}
    return extract_opencl(tvm.IRModule(prims), "opencl", tir_pipeline=GPU_PIPELINE_NAME)


def _tiling(text: str):
    from tvm_ethos.host.opencl.gpu_schedule import parse_tiling

    try:
        return parse_tiling(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def cmd_dump(args) -> int:
    from functools import partial

    from tvm_ethos.host.opencl.gpu_schedule import schedule_for_gpu
    from tvm_ethos.pipeline.network_build import schedule_stages_for_gpu

    path = MODELS / f"{args.model}.tflite"
    if not path.is_file():
        print(
            f"opencl_on_device: no model {path}; pass --model with a stem of {MODELS}/*.tflite",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    program, fused = compile_captured(path)
    specs = {"stages": build_spec(fused, program, schedule_stages_for_gpu)}
    for t in args.tilings:
        specs[f"tiled-{t.threads}x{t.columns}x{t.lanes}"] = build_spec(
            fused, program, partial(schedule_for_gpu, tiling=t)
        )
    rng = np.random.RandomState(0)
    inputs = {}
    for tid in program.inputs:
        t = program.tensors[tid]
        info = np.iinfo(t.dtype)
        inputs[tid] = rng.randint(info.min, info.max + 1, size=t.shape).astype(t.dtype)
    results, totals, mismatches, got = run_variants(
        program, specs, args.device, args.seconds, inputs, None
    )
    print_table(results, totals)
    if mismatches:
        print(f"MISMATCH between the schedules: {', '.join(mismatches[:8])}")
        return 1
    (out / "program.json").write_text(program.to_json())
    (out / "constants.bin").write_bytes(program.constants_blob())
    for v, spec in specs.items():
        (out / f"{v}.json").write_text(spec.to_json())
    (out / "variants.json").write_text(json.dumps(list(specs)))
    np.savez(out / "tensors.npz", **{f"t{k}": a for k, a in {**inputs, **got}.items()})
    print(f"wrote {out}: every schedule equal to stages on every tensor")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="compile, check both schedules equal here, write the folder")
    d.add_argument("--model", default="mobilenet_v1_1.0_224")
    d.add_argument("--out", default="out/ocl_kernels")
    d.add_argument(
        "--tilings",
        type=lambda v: [_tiling(t) for t in v.split(",")],
        default="64x2x4",
        help="GpuTilings to build besides stages, THREADSxCOLUMNSxLANES, comma-separated",
    )
    r = sub.add_parser("run", help="run a dumped folder (numpy + PyOpenCL only)")
    r.add_argument("folder")
    for p in (d, r):
        p.add_argument(
            "--device",
            default=None,
            help="OpenCL device substring (default: the first GPU, else PoCL)",
        )
        p.add_argument("--seconds", type=float, default=1.0, help="timing per variant")
    args = ap.parse_args(argv)
    return cmd_dump(args) if args.cmd == "dump" else cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
