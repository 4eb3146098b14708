"""``tvmc compile``: a model file -> a compiled package (``-o module.tar``) and its plan report.

  tvmc compile MODEL --target ethos-n,opencl [--target-ethos-n-variant=n78 ...]
               [-o module.tar | -o out.tflite] [--output-format package|tflite]
               [--budget 300KiB|system|none]
               [--workspace-pools sram:300KiB:read_bw=8] [--planner-<field>=VALUE ...]
               [--no-plan] [--fallback-mode auto|import|copy]
               [--planner-report plan.json] [--quiet] [--no-progress]
               [Vela's: --accelerator-config --optimise --system-config --memory-mode
                --config --arena-cache-size --output-dir --verbose-performance
                --verbose-allocation]

The per-target options (``--target-<id>-<key>``) are generated from the registered backends'
option schemas, so a third-party backend's options appear here too. Everything is validated
before TVM is imported; TVM is imported inside :func:`run` only (``cli.py``'s rule).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import tvm_ethos
from planner.budgets import BUDGET_HELP
from planner.progress import Progress
from tvm_ethos import vela_options
from tvm_ethos.backends.base import HostBackend, HostOutput
from tvm_ethos.backends.registry import get_backend, get_registry
from tvm_ethos.cli import (
    CliError,
    add_planner_arguments,
    add_target_arguments,
    check_option_targets,
    collector_paused,
    planner_options,
    register,
    require_file,
    require_writable,
    target_options,
)
from tvm_ethos.cli_paths import require_distinct, write_failed
from tvm_ethos.reports import vela_summary
from tvm_ethos.runtime.options import FALLBACK_MODES
from tvm_ethos.targets import parse_targets

HELP = "compile a model for NPUs with a GPU/CPU fallback into one package file"
DESCRIPTION = (
    "Compile MODEL (.tflite, .onnx) for a priority-ordered --target list: each operator goes "
    "to the first target that takes it, the last target (llvm or opencl) takes the rest. NPU "
    "subgraphs are planned by the cascading planner within --budget / --workspace-pools and "
    "built for the NPU emulator. Writes one package (-o; a tar file when the name ends in "
    ".tar, as tvmc's were) that 'tvmc run' and tvm_ethos.load() read, prints the partition "
    "summary and the per-layer plan (cycles are the planner's estimates), and writes the plan "
    "report as JSON with --planner-report.")


OUTPUT_FORMATS = ("package", "tflite")


def target_option_table() -> dict[str, dict[str, str]]:
    """``{backend id: {option: help}}`` from the registered backends' option schemas (the
    plugins' once looked for: ``tvm_ethos.cli`` does when the command line may give their
    options)."""
    reg = get_registry()
    table = {}
    for bid in sorted(reg.known_ids()):
        table[bid] = {key: _option_help(spec)
                      for key, spec in reg.get(bid).options_schema().items()}
    return table


def _option_help(spec) -> str:
    parts = [spec.help] if spec.help else []
    if spec.allowed is not None:
        parts.append("one of " + ", ".join(map(str, spec.allowed)))
    parts.append(f"default {spec.default!r}")
    return "; ".join(parts).replace("%", "%%")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", metavar="MODEL", help="the model file (.tflite, .onnx)")
    add_target_arguments(
        p, target_option_table(),
        help="priority-ordered, comma-separated target list ending with a host target, e.g. "
             "'ethos-n,opencl' or 'ethos-u,llvm'; options inline as "
             "'ethos-u -accelerator_config=ethos-u65-256,llvm' or with the "
             "--target-<id>-<key> flags below (a flag wins over the inline value)")
    p.add_argument("-o", "--output", default=None, metavar="FILE",
                   help="the file to write; its extension sets the format: .tflite a TFLite "
                        "Micro file, .tar a tar package, any other name a zip package "
                        "(default module.tar, module.tflite with --output-format tflite)")
    p.add_argument("--output-format", default=None, choices=OUTPUT_FORMATS,
                   help="package: the tvm-ethos package 'tvmc run' reads; tflite: "
                        "a TFLite Micro .tflite whose Ethos-U subgraphs are 'ethos-u' custom "
                        "operators in Vela's layout (needs an ethos-u target and a .tflite "
                        "MODEL); default: -o's extension; one contradicting -o is an error")
    p.add_argument("--budget", default=None, metavar="SIZE",
                   help=f"limit on every NPU subgraph's peak SRAM; {BUDGET_HELP}; an "
                        "impossible budget is an error")
    p.add_argument("--workspace-pools", action="append", default=None, metavar="POOLS",
                   help="NPU memories as name:size[:key=value...], e.g. "
                        "'sram:300KiB:read_bw=8:write_bw=8:burst=32'; several separated by "
                        "commas or given again; keys: size, read_bw, write_bw, read_latency, "
                        "write_latency, burst (bandwidths in bytes per cycle)")
    p.add_argument("--no-plan", action="store_true",
                   help="do not run the cascading planner (unscheduled NPU kernels)")
    p.add_argument("--fallback-mode", default=None, choices=FALLBACK_MODES,
                   help="how tensors cross between backends at run time (saved in the "
                        "package; default auto)")
    p.add_argument("--planner-report", default=None, metavar="FILE.json",
                   help="write the plan report (peak_memory_bytes, cycles, layers, "
                        "subgraphs) as JSON")
    p.add_argument("-q", "--quiet", action="store_true",
                   help="print one line, not the partition summary and per-layer plan")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_planner_arguments(p, compile_notes())
    vela_options.add_arguments(p)


def compile_notes() -> dict[str, str]:
    """What ``tvmc compile`` takes of the planner options it does not realize in full."""
    # lazy: keeps tvmc --help fast (option table, compile driver load on use)
    from planner.option_flags import show
    from tvm_ethos.pipeline.planning import REALIZED_PLANNER_OPTIONS

    return {name: "tvmc compile takes " + " or ".join(show(v) for v in values)
            for name, (values, _) in REALIZED_PLANNER_OPTIONS.items()}


def resolve_targets(target: str, cli_options: dict[str, dict[str, str]]):
    """The target string plus ``--target-<id>-<key>`` values -> a validated TargetList."""
    targets = parse_targets(target)        # TargetError / OptionError: unknown name, bad option
    check_option_targets(targets.ids, cli_options, target)
    for spec in targets.targets:
        spec.options.update(cli_options.get(spec.backend_id, {}))
    return parse_targets(targets)          # validates and converts the flags' values


def host_output(targets) -> HostOutput:
    """What the compile for ``targets`` produces: its host backend's ``host_output``."""
    host = get_backend(targets.ids[-1])
    return host.host_output() if isinstance(host, HostBackend) else HostOutput.PACKAGE


def check_tflite_output(model: str, targets) -> None:
    """``--output-format tflite`` needs what the exporter writes: an Ethos-U command stream
    and the source .tflite's tensors (checked before anything is compiled)."""
    if "ethos-u" not in targets.ids:
        raise CliError(f"--output-format tflite writes Ethos-U command streams; --target "
                       f"{targets} has no ethos-u: use e.g. --target ethos-u")
    if not model.lower().endswith(".tflite"):
        raise CliError(f"--output-format tflite rewrites a .tflite model; {model} is not one")


#: TVM's switch for loading its device backends (CUDA, OpenCL, Vulkan, ...) and out-of-tree
#: extensions at ``import tvm``
TVM_BACKEND_AUTOLOAD = "TVM_DEVICE_BACKEND_AUTOLOAD"


def skip_tvm_device_backends(targets) -> bool:
    """For the tflite-micro host (TVM compiles only the Ethos-U groups, builds no device
    code): ``import tvm`` loads none of its device backends. Only where TVM is not imported
    yet and the user has not set :data:`TVM_BACKEND_AUTOLOAD`; True where it now is off."""
    if host_output(targets) is not HostOutput.TFLITE or "tvm" in sys.modules or \
            TVM_BACKEND_AUTOLOAD in os.environ:
        return False
    os.environ[TVM_BACKEND_AUTOLOAD] = "0"
    return True


#: The output format each file extension means (any other extension: a zip package).
EXTENSION_FORMATS = {".tflite": "tflite", ".tar": "package", ".zip": "package"}


def output_file(args, targets) -> tuple[str, str]:
    """(path, format): the format follows ``-o``'s extension, ``--output-format`` may only
    agree with it; without ``-o`` the name follows the format (``module.tar``,
    ``module.tflite``, or Vela's ``DIR/MODEL_tvm_ethos.tflite`` with ``--output-dir``, where
    an ethos-u target and a .tflite model default to the TFLite Micro file, as Vela writes)."""
    fmt = args.output_format
    if args.output is not None:
        ext = os.path.splitext(args.output)[1].lower()
        named = EXTENSION_FORMATS.get(ext)
        if fmt is None:
            return args.output, named or "package"
        if named is not None and named != fmt or named is None and fmt == "tflite":
            kind = {"tflite": "a TFLite Micro file", "package": "a package"}
            raise CliError(f"--output-format {fmt} contradicts -o {args.output} (a {ext or 'bare'}"
                           f" name is {kind[named or 'package']}): drop --output-format, or "
                           f"name the output {'.tflite' if fmt == 'tflite' else '.tar'}")
        return args.output, fmt
    if fmt is None:
        fmt = ("tflite" if host_output(targets) is HostOutput.TFLITE or (
            args.output_dir is not None and "ethos-u" in targets.ids
            and args.model.lower().endswith(".tflite")) else "package")
    ext = ".tflite" if fmt == "tflite" else ".tar"
    if args.output_dir is not None:
        return vela_options.output_name(args.model, args.output_dir, ext), fmt
    return "module" + ext, fmt


def prepare_output_dir(path: str | None) -> None:
    """``--output-dir``: created when missing, as Vela does (one line when it cannot be)."""
    if path is None:
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot create --output-dir {path!r}: {e.strerror or e}") from None


def workspace_pools(values: list[str] | None) -> list[str] | None:
    """``--workspace-pools`` values (repeated and/or comma-separated) -> pool strings."""
    if not values:
        return None
    pools = [p.strip() for v in values for p in v.split(",")]
    if not all(pools):
        raise CliError(f"--workspace-pools: empty pool in {','.join(values)!r}; write "
                       "name:size[:key=value...], e.g. sram:300KiB")
    return pools


def run(args) -> int:
    with collector_paused():   # from the start: the checks before the compile load modules
        return _run(args)


def _run(args) -> int:
    require_file(args.model, "model file")
    if args.planner_report is not None:
        require_writable(args.planner_report, "--planner-report")
    cli_options = target_options(args, target_option_table())
    vela_options.accelerator_option(args, cli_options, args.target)
    targets = resolve_targets(args.target, cli_options)
    vela = vela_options.choices(args, targets)
    args.output, args.output_format = output_file(args, targets)
    output = "the .tflite (-o)" if args.output_format == "tflite" else "the package (-o)"
    require_distinct({"model file": args.model, output: args.output,
                      "--planner-report": args.planner_report})
    if args.output_format == "tflite":
        check_tflite_output(args.model, targets)
    elif host_output(targets) is HostOutput.TFLITE:
        raise CliError(f"--target {args.target} runs on the {targets.host.backend_id} host, "
                       "whose output is a "
                       "TFLite Micro .tflite, not a package: name the output .tflite, or "
                       "name a host for a package (e.g. --target ethos-u,llvm)")
    prepare_output_dir(args.output_dir)
    require_writable(args.output, output)
    options = {"planner_options": planner_options(args),
               "memory_pools": vela.memory_pools or workspace_pools(args.workspace_pools)}
    if args.budget is not None:
        options["budget"] = args.budget
    elif vela.budget is not None:
        options["budget"] = vela.budget
    if args.no_plan:
        options["plan"] = False
    if args.fallback_mode is not None:
        options["fallback_mode"] = args.fallback_mode

    skip_tvm_device_backends(targets)
    # lazy: keeps tvmc --help fast (the compile stages load on use)
    from tvm_ethos import stages

    name = os.path.basename(args.model)
    t0 = time.perf_counter()
    with Progress(None, f"compiling {name}", enabled=not args.no_progress, unit="step") as bar, \
            stages.listening(lambda stage, _seconds: bar.update(1, stage)):
        # the tflite-micro host partitions the .tflite itself: TVM imports only its NPU groups
        mod = (args.model if host_output(targets) is HostOutput.TFLITE
               else tvm_ethos.load_model(args.model))
        bar.update(1, "imported")
        cm = tvm_ethos.compile(mod, target=targets, **options)
        bar.update(1, "compiled")
        try:
            if args.output_format == "tflite":
                cm.export_tflite(args.output, model=args.model)
            else:
                cm.save(args.output)
        except OSError as e:       # checked writable above; the disk may still fill up
            raise write_failed(args.output, output, e) from None
        bar.update(1, "saved")
    if not args.no_progress:   # timing varies run to run: stderr, so stdout stays identical
        print(f"compiled in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    if args.planner_report is not None:
        try:
            with open(args.planner_report, "w") as f:
                json.dump(cm.plan_report, f, indent=1, sort_keys=True)
                f.write("\n")
        except OSError as e:
            raise write_failed(args.planner_report, "--planner-report", e) from None
    wrote = f"wrote {args.output}" + (f" and {args.planner_report}" if args.planner_report
                                      else "")
    if args.quiet:
        print(wrote)
        if vela.system is not None and args.model.lower().endswith(".tflite"):
            vela_reports(args, cm, vela.system, quiet=True)
        return 0
    print(f"{name} compiled for {cm.targets}")
    print("partition: " + ", ".join(f"{t} {n} operator{'s' if n != 1 else ''}"
                                    for t, n in cm.partition_summary.items()))
    print()
    rep = cm.plan_report or {}
    print("no NPU subgraph: nothing to plan" if rep.get("planned") and not rep.get("subgraphs")
          else cm.plan_table)
    print()
    print(wrote)
    if vela.system is not None and args.model.lower().endswith(".tflite"):
        vela_reports(args, cm, vela.system)
    return 0


def vela_reports(args, cm, system, quiet: bool = False) -> None:
    """Vela's summary (printed; ``--output-dir``: its CSV), ``--verbose-performance``'s
    per-layer table and CSV, ``--verbose-allocation``'s buffers, for the Ethos-U part
    (``quiet``: the files only, and the line naming them; none asked for: nothing to do)."""
    if quiet and args.output_dir is None and not args.verbose_performance:
        return
    with open(args.model, "rb") as f:
        source = f.read()
    network = os.path.splitext(os.path.basename(args.model))[0]
    summary, rows = vela_summary.summarize(cm, network, source, system)
    folder = args.output_dir if args.output_dir is not None else (
        os.path.dirname(args.output) or ".")
    files = []
    say = (lambda *a, **k: None) if quiet else print
    say()
    say(summary.text(), end="")
    if args.output_dir is not None:
        files.append((vela_summary.summary_path(folder, network, system), [summary.csv_row()],
                      None))
    if args.verbose_performance:
        layer_rows = vela_summary.per_layer_rows(rows, summary)
        say()
        say(vela_summary.per_layer_text(layer_rows))
        files.append((vela_summary.per_layer_path(folder, network), layer_rows,
                      vela_summary.PER_LAYER_COLUMNS))
    written = []
    for path, table, columns in files:
        try:
            vela_summary.write_csv(path, table, columns)
        except OSError as e:
            raise CliError(f"cannot write {path!r}: {e.strerror or e}") from None
        written.append(path)
    if args.verbose_allocation:
        say()
        say(vela_summary.allocation_text(cm))
    if written:
        print("wrote " + " and ".join(written))


register("compile", HELP, add_arguments, run, description=DESCRIPTION)
