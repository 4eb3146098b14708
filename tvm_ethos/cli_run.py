"""``tvmc run``: one package written by ``tvmc compile`` (or ``CompiledModel.save``), run on
inputs from a file or filled in, with the top classes, timings and outputs on request.

  tvmc run PACKAGE [--inputs in.npz] [--fill-mode random|zeros|ones] [--seed 0]
           [--print-top N] [--print-time] [--repeat N] [--outputs out.npz]
           [--print-edges] [--fallback-mode auto|import|copy] [--npu-runtime stream|tir]

  tvmc run MODEL.tflite [--accelerator-config ethos-u55-128] [the same input/print options]

There is no NPU here: NPU subgraphs run on the emulator, and the output says so. A ``.tflite``
with ``ethos-u`` operators (ours or Vela's) runs through ``tvm_ethos/tflite_run.py``.
"""
from __future__ import annotations

import argparse
import os
import time
import zipfile

import numpy as np

import tvm_ethos
from planner.progress import Progress
from tvm_ethos import tflite_run
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.cli import CliError, register, require_file, require_writable
from tvm_ethos.cli_paths import check_int_range, require_distinct, write_failed
from tvm_ethos.runtime.options import FALLBACK_MODES, NPU_RUNTIMES

HELP = "run a compiled package on inputs (NPU subgraphs on models of the NPU)"
DESCRIPTION = (
    "Load PACKAGE (written by 'tvmc compile'), run one inference on --inputs (a .npz whose "
    "arrays are named after the model's inputs, or unnamed in their order, as numpy.savez "
    "writes them) or on filled-in inputs (--fill-mode), and print the outputs, the --print-top "
    "classes and --print-time timings. There is no NPU here: an Ethos-U subgraph's command "
    "stream runs on the functional Ethos-U model (--npu-runtime stream, the default), other "
    "NPU subgraphs (and every one with --npu-runtime tir) on the emulator (TensorIR built for "
    "this host); both bit-exact with TFLite's reference kernels. Their time is the model's, "
    "their cycles the planner's estimates. PACKAGE may also be a .tflite with ethos-u "
    "operators (written by tvmc compile or by Vela): its streams run on the functional model "
    "and its other operators through the TFLite interpreter.")
FILL_MODES = ("random", "zeros", "ones")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("package", metavar="PACKAGE",
                   help="a package written by tvmc compile, or a .tflite with ethos-u "
                        "operators (tvmc compile's or Vela's)")
    p.add_argument("--inputs", default=None, metavar="FILE.npz",
                   help="input arrays: named after the model's inputs, or positional "
                        "(numpy.savez(path, x0, x1)); a .npy for a one-input model")
    p.add_argument("--fill-mode", default=None, choices=FILL_MODES,
                   help="fill the inputs not in --inputs (all of them without --inputs; "
                        "default random, full range of the input's type)")
    p.add_argument("--seed", type=int, default=0, help="seed of --fill-mode random (default 0)")
    p.add_argument("--print-top", type=int, default=None, metavar="N",
                   help="print the N highest-scoring classes (index, raw score) of each output")
    p.add_argument("--print-time", action="store_true",
                   help="print the mean / min / max wall time of --repeat runs after one "
                        "warm-up run (the NPU models' time on this host, not an NPU's)")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="timed runs for --print-time (default 1)")
    p.add_argument("--outputs", default=None, metavar="FILE.npz",
                   help="write the outputs as output_0, output_1, ... to this .npz")
    p.add_argument("--print-edges", action="store_true",
                   help="print how tensors cross between backends (zero-copy edge report)")
    p.add_argument("--fallback-mode", default=None, choices=FALLBACK_MODES,
                   help="override the package's fallback mode")
    p.add_argument("--npu-runtime", default=None, choices=NPU_RUNTIMES,
                   help="stream: Ethos-U command streams on the functional model (the "
                        "package's default); tir: every NPU subgraph on the TensorIR emulator")
    p.add_argument("--accelerator-config", default=None, metavar="CONFIG",
                   help="for a .tflite: the Ethos-U running it, e.g. ethos-u55-128 (default: "
                        "the one its command stream names)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def read_inputs(path: str | None, specs, fill_mode: str | None, seed: int) -> list[np.ndarray]:
    """The model's inputs, in order, from ``path`` (named or positional arrays) and/or filled.

    ``specs`` are the model's inputs (``name``, ``shape``, ``dtype``). Inputs missing from the
    file are filled only when ``fill_mode`` is given; without a file every input is filled
    (``random`` by default). Shapes and dtypes must match exactly: nothing is cast."""
    given = {} if path is None else _load_arrays(path)
    names = [s.name for s in specs]
    where = f"--inputs {path!r}"
    if any(k in names for k in given):                     # by name
        unknown = [k for k in given if k not in names]
        if unknown:
            raise CliError(f"{where}: array {unknown[0]!r} is not an input of the model; its "
                           f"inputs are {_listing(specs)}")
        by_name = given
    elif given:                                           # positional: arr_0, arr_1, ...
        positional = [f"arr_{i}" for i in range(len(given))]
        if list(given) != positional or len(given) > len(specs):
            raise CliError(f"{where} has arrays {', '.join(map(repr, given))}; name them "
                           f"after the model's inputs {_listing(specs)} or save them "
                           "unnamed, in order, with numpy.savez(path, x0, ...)")
        by_name = {s.name: given[k] for s, k in zip(specs, positional)}
    else:
        by_name = {}
    if path is not None and fill_mode is None:
        missing = [s for s in specs if s.name not in by_name]
        if missing:
            raise CliError(f"{where} has no array for input {missing[0].name!r} "
                           f"({_describe(missing[0])}); add it, or pass --fill-mode to fill it")
    rs = np.random.RandomState(seed)
    out = []
    for s in specs:
        x = by_name.get(s.name)
        if x is None:
            out.append(fill(s.shape, s.dtype, fill_mode or "random", rs))
            continue
        if tuple(x.shape) != tuple(s.shape) or str(x.dtype) != s.dtype:
            raise CliError(f"{where}: input {s.name!r} is {_describe_array(x)}, the model "
                           f"takes {_describe(s)}")
        out.append(np.ascontiguousarray(x))
    return out


def _load_arrays(path: str) -> dict[str, np.ndarray]:
    require_file(path, "--inputs file")
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise CliError(f"--inputs {path!r} is not a NumPy .npz or .npy file ({err}); write "
                       "one with numpy.savez") from None
    if isinstance(loaded, np.ndarray):
        return {"arr_0": loaded}
    try:
        with loaded:
            return {k: loaded[k] for k in loaded.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise CliError(f"--inputs {path!r}: cannot read its arrays ({err})") from None


def fill(shape, dtype, mode: str, rs: np.random.RandomState) -> np.ndarray:
    """An input of this shape and dtype: zeros, ones, or random over the type's range."""
    dtype, shape = np.dtype(dtype), tuple(shape)
    if mode == "zeros":
        return np.zeros(shape, dtype)
    if mode == "ones":
        return np.ones(shape, dtype)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return rs.randint(info.min, int(info.max) + 1, size=shape).astype(dtype)
    return rs.standard_normal(shape).astype(dtype)


def _describe(spec) -> str:
    return f"{'x'.join(map(str, spec.shape))} {spec.dtype}"


def _describe_array(x: np.ndarray) -> str:
    return f"{'x'.join(map(str, x.shape)) or 'a scalar'} {x.dtype}"


def _listing(specs) -> str:
    return ", ".join(f"{s.name!r} ({_describe(s)})" for s in specs)


def top_classes(output: np.ndarray, n: int) -> list[tuple[int, int | float]]:
    """The ``n`` highest scores of ``output`` (flattened) as (index, score), highest first,
    the lower index first among equal scores."""
    flat = np.asarray(output).reshape(-1)
    order = np.argsort(-flat.astype(np.float64), kind="stable")[:n]
    return [(int(i), flat[i].item()) for i in order]


def run(args) -> int:
    require_file(args.package, "package")  # missing, a folder, a FIFO or a device: one line
    # damaged or altered bytes are refused by tvm_ethos.load as one ModelLoadError line before
    # its library is loaded
    if args.print_top is not None and args.print_top < 1:
        raise CliError(f"--print-top must be >= 1, got {args.print_top}")
    if args.repeat < 1:
        raise CliError(f"--repeat must be >= 1, got {args.repeat}")
    check_int_range(args.seed, "--seed", 0, 2**32 - 1)     # numpy's RandomState seeds
    if args.inputs is not None:
        require_file(args.inputs, "--inputs file")
    if args.outputs is not None:
        require_writable(args.outputs, "--outputs")
        require_distinct({"package": args.package, "--inputs file": args.inputs,
                          "--outputs": args.outputs})
    if tflite_run.is_tflite(args.package):
        return run_tflite(args)
    if args.accelerator_config is not None:
        raise CliError("--accelerator-config chooses the Ethos-U of a .tflite; a package "
                       "keeps the one it was compiled for")
    runtime = {} if args.fallback_mode is None else {"fallback_mode": args.fallback_mode}
    if args.npu_runtime is not None:
        runtime["npu_runtime"] = args.npu_runtime
    with Progress(None, f"loading {os.path.basename(args.package)}", enabled=not args.no_progress):
        cm = tvm_ethos.load(args.package, **runtime)
    xs = read_inputs(args.inputs, cm.inputs, args.fill_mode, args.seed)
    with Progress(None, "running", enabled=not args.no_progress):
        outputs = cm.run(*xs)   # printed: the timed runs go on from its states (an LSTM's)
        times = []
        if args.print_time:
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                cm.run(*xs)
                times.append(time.perf_counter() - t0)
    print(emulation_note(cm))
    if args.print_edges:
        print(cm.edge_report)
    print_outputs(args, outputs, times)
    cm.unload()
    return 0


def run_tflite(args) -> int:
    """``tvmc run MODEL.tflite``: the file's ethos-u operators emulated, the rest on the
    host; inputs and printing as for a package."""
    for flag, value in (("--fallback-mode", args.fallback_mode),
                        ("--npu-runtime", args.npu_runtime), ("--print-edges", args.print_edges)):
        if value:
            raise CliError(f"{flag} applies to a package; {args.package} is a .tflite (its "
                           "NPU part runs as its command stream, the rest on the host)")
    with open(args.package, "rb") as f:
        data = f.read()
    model = tflite_run.prepare(data, args.package, args.accelerator_config)
    xs = read_inputs(args.inputs, model.inputs, args.fill_mode, args.seed)
    times = []
    with Progress(None, "running", enabled=not args.no_progress):
        result = tflite_run.run(model, xs)
        if args.print_time:
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                result = tflite_run.run(model, xs)
                times.append(time.perf_counter() - t0)
    print(tflite_run.note(result))
    print_outputs(args, result.outputs, times)
    return 0


def print_outputs(args, outputs, times) -> None:
    """The outputs (or their top classes), the timings and the --outputs file."""
    for i, out in enumerate(outputs):
        print(f"output {i}: {_describe_array(out)}")
        if args.print_top is not None:
            for rank, (idx, score) in enumerate(top_classes(out, args.print_top), 1):
                print(f"  top {rank}: class {idx:>5}  score {score}")
        elif out.size <= 32:
            print("  " + np.array2string(out.reshape(-1), separator=" "))
    if times:
        ms = np.array(times) * 1e3
        print(f"time (ms, {len(ms)} run{'s' if len(ms) > 1 else ''} after a warm-up, this "
              f"host): mean {ms.mean():.2f}  min {ms.min():.2f}  max {ms.max():.2f}")
    if args.outputs is not None:
        try:
            np.savez(args.outputs, **{f"output_{i}": o for i, o in enumerate(outputs)})
        except OSError as e:
            raise write_failed(args.outputs, "--outputs", e) from None
        print(f"wrote {args.outputs}")


def emulation_note(cm) -> str:
    """One line saying which subgraphs were emulated, with the planner's cycle estimate."""
    reg = get_registry()
    npus = [t for t in cm.partition_summary
            if reg.is_registered(t) and reg.get(t).capabilities().is_npu]
    if not npus:
        return f"ran on {cm.targets} (no NPU subgraph)"
    rep = cm.plan_report or {}
    cycles = (f"; {rep['cycles']:,} NPU cycles estimated by the planner"
              if rep.get("cycles") is not None else "; not planned")
    streams = ([] if cm.runtime_options.get("npu_runtime", "stream") != "stream" or
               cm.program is None else sorted(cm.program.payloads))
    how = (f"{len(streams)} ran as Ethos-U command streams on the functional model, the rest "
           "on the TensorIR emulator" if streams else "ran on the TensorIR emulator")
    return (f"NPU subgraphs ({', '.join(npus)}) were emulated on this host: {how} (bit-exact "
            f"with TFLite's reference kernels; no NPU here){cycles}")


register("run", HELP, add_arguments, run, description=DESCRIPTION)
