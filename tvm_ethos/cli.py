"""``tvmc``: the command line of tvm-ethos (also ``python -m tvm_ethos``).

Subcommands live in :data:`SUBCOMMANDS`, a registry of name -> :class:`Subcommand` (help line,
``add_arguments(parser)``, ``run(args) -> exit status``); add one with :func:`register`.
This module must stay importable without TVM: a handler that needs TVM imports it inside its
``run`` function, so ``tvmc plan`` and ``tvmc --help`` never load it.

Exit status: 0 on success; 2 on bad input (missing or unreadable model, bad target string,
bad size, unknown option, a budget no schedule fits), with exactly one line on stderr.

``tvmc compile`` and ``tvmc run`` live in ``cli_compile.py`` and ``cli_run.py`` (rfcs/0004).

  tvmc plan MODEL [MODEL ...] --target ethos-u
            [--target-ethos-u-accelerator_config=ethos-u55-128[,ethos-u55-256...]]
            [--budget 300KiB | --sweep-budget 128KiB:2MiB:16] [--io-region sram|dram]
            [--output-dir DIR] [--scheduler ADDRESS] [--jobs 2] [--no-vela]
            [--planner-max_plan_size=N ...]
"""
from __future__ import annotations

import argparse
import atexit
import contextlib
import gc
import importlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Callable

from planner.budgets import BUDGET_HELP, budget_line, resolve_budget
from planner.devices import get_device
from planner.errors import PlannerError
from planner.progress import Progress
from tvm_ethos._version import __version__
from tvm_ethos.backends.base import HostBackend, NpuBackend
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.cli_paths import CliError, require_file, require_writable
from tvm_ethos.errors import TvmEthosError

PROG = "tvmc"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``tvmc plan: error: ...`` and exit status 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        message = " ".join(str(message).split())
        self.exit(2, f"{self.prog}: error: {message}\n")


@dataclass(frozen=True)
class Subcommand:
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    description: str | None = None


#: name -> Subcommand, in the order ``tvmc --help`` lists them.
SUBCOMMANDS: dict[str, Subcommand] = {}


def register(name: str, help: str, add_arguments, run, description: str | None = None):
    """Add a subcommand. ``run`` receives the parsed arguments and returns the exit status;
    it may raise TvmEthosError / PlannerError / CliError for a one-line exit-2 error."""
    if name in SUBCOMMANDS:
        raise ValueError(f"tvmc subcommand {name!r} is already registered")
    SUBCOMMANDS[name] = Subcommand(help, add_arguments, run, description)


# ---------------------------------------------------------------------------------------------
# Targets for the planner


def plan_backends() -> tuple[dict, list[str]]:
    """``({id: NpuBackend}, [host ids])``: the registered NPUs ``tvmc plan`` can plan for (those
    with planner devices) and the hosts it accepts (and ignores) in a target list, so the
    compile target string works."""
    reg = get_registry()
    npus, hosts = {}, []
    for bid in reg.ids():
        backend = reg.get(bid)
        if isinstance(backend, NpuBackend) and backend.planner_device_names():
            npus[bid] = backend
        elif isinstance(backend, HostBackend):
            hosts.append(bid)
    return npus, hosts


def _split_list(value) -> list[str]:
    items = [v.strip() for v in str(value).split(",")]
    if not all(items):
        raise CliError(f"empty item in the list {value!r}")
    return items


def parse_plan_target(target: str, cli_options: dict[str, dict[str, str]]) -> list[str]:
    """A tvmc target string (``"ethos-u"``, ``"ethos-u -accelerator_config=ethos-u65-256"``,
    ``"ethos-n,opencl"``) plus ``--target-<id>-<key>`` values -> planner device names.

    Exactly one NPU target; host targets are accepted and ignored. ``cli_options`` maps a
    target id to its ``--target-<id>-<key>`` values (comma lists sweep several configs).
    """
    entries = [e.strip() for e in str(target).split(",")]
    if not all(entries):
        raise CliError(f"bad target string {target!r}: empty target name; write e.g. "
                       "'ethos-u' or 'ethos-n,opencl'")
    plannable, hosts = plan_backends()
    npus, inline = [], {}
    for e in entries:
        name, *tokens = e.split()
        if name not in plannable and name not in hosts:
            raise CliError(f"unknown target {name!r} in {target!r}; tvmc plan plans for "
                           f"{' or '.join(plannable)} (host targets "
                           f"{', '.join(hosts)} are accepted and ignored)")
        opts = {}
        for tok in tokens:
            if not tok.startswith("-") or "=" not in tok:
                raise CliError(f"target {name!r}: cannot read option {tok!r}; write -key=value")
            key, _, val = tok.lstrip("-").partition("=")
            opts[key.replace("-", "_")] = val
        if name in plannable:
            npus.append(name)
            inline[name] = opts
        elif opts:
            raise CliError(f"target {name!r} takes no options in tvmc plan")
    if len(npus) != 1:
        raise CliError(f"target {target!r} names {len(npus) or 'no'} NPU"
                       f"{'s' if len(npus) != 1 else ''}; tvmc plan plans one of "
                       f"{', '.join(plannable)} at a time")
    npu = npus[0]
    backend = plannable[npu]
    check_option_targets([npu], cli_options, target)
    opts = {**inline[npu], **cli_options.get(npu, {})}
    allowed = backend.device_options
    for key in opts:
        if key not in allowed:
            raise CliError(f"unknown option {key!r} for target {npu!r}; allowed options: "
                           f"{', '.join(allowed)}")
    for key in allowed:
        if key in opts:
            _split_list(opts[key])   # one message for an empty item
    known = backend.planner_device_names()
    devices = []
    for shown, device in backend.sweep_device_names(opts):
        if device not in known:
            raise CliError(f"{npu} {'/'.join(allowed)} {shown!r} has no planner model; choose "
                           f"from {', '.join(known)}")
        devices.append(device)
    return devices


def check_option_targets(ids, cli_options: dict[str, dict[str, str]], target: str) -> None:
    """Every ``--target-<id>-<key>`` given must belong to a target in use (``ids``)."""
    for other, given in cli_options.items():
        if other not in ids and given:
            key = next(iter(given))
            raise CliError(f"--target-{other}-{key} is an option of target {other!r}, which "
                           f"is not in --target {target!r}")


def plan_target_options() -> dict[str, dict[str, str]]:
    """Per-target options of ``tvmc plan`` (``--target-<id>-<key>=VALUE`` or inline
    ``-key=VALUE``): each plannable NPU's ``device_options``, with its schema's help."""
    npus, _ = plan_backends()
    table = {}
    for bid, backend in npus.items():
        schema = backend.options_schema()
        table[bid] = {key: f"{schema[key].help or key} (default {schema[key].default}); a "
                           "comma list plans each" for key in backend.device_options}
    return table


def add_target_arguments(p: argparse.ArgumentParser, options=None, help: str | None = None
                         ) -> None:
    """``--target`` and one ``--target-<id>-<key>`` per target option (tvmc's conventions)."""
    p.add_argument("--target", required=True, metavar="TARGETS",
                   help=help or "comma-separated target list, e.g. 'ethos-u' or "
                        "'ethos-n,opencl'; options inline as "
                        "'ethos-u -accelerator_config=ethos-u55-256'")
    for tid, keys in (options or plan_target_options()).items():
        group = p.add_argument_group(f"target {tid}")
        for key, help_ in keys.items():
            group.add_argument(f"--target-{tid}-{key}", dest=_dest(tid, key), default=None,
                               metavar="VALUE", help=help_)


def _dest(tid: str, key: str) -> str:
    return f"target__{tid.replace('-', '_')}__{key}"


def target_options(args, options=None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for tid, keys in (options or plan_target_options()).items():
        given = {k: getattr(args, _dest(tid, k)) for k in keys
                 if getattr(args, _dest(tid, k), None) is not None}
        out[tid] = given
    return out


# ---------------------------------------------------------------------------------------------
# Planner options: --planner-<field>=VALUE for every PlannerOptions field


def add_planner_arguments(p: argparse.ArgumentParser, notes: dict | None = None) -> None:
    """The ``--planner-*`` flags, shared with ``python -m planner`` (planner.option_flags)."""
    # lazy: keeps tvmc --help fast (the planner option table loads on use)
    from planner.option_flags import add_arguments
    add_arguments(p, notes)


def planner_options(args) -> dict:
    """The ``--planner-*`` values given, read and validated (PlannerError naming the flag)."""
    # lazy: keeps tvmc --help fast (the planner option table loads on use)
    from planner.option_flags import options_from_args
    return options_from_args(args)


# ---------------------------------------------------------------------------------------------
# tvmc plan


def _plan_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("models", nargs="+", metavar="MODEL",
                   help="a .tflite model or a planner graph .json (several for a sweep)")
    add_target_arguments(p)
    budget = p.add_mutually_exclusive_group()
    budget.add_argument("--budget", default="system", metavar="SIZE", help=BUDGET_HELP)
    budget.add_argument("--sweep-budget", default=None, metavar="LO:HI:N",
                        help="plan at N budgets log-spaced from LO to HI (e.g. 128KiB:2MiB:16); "
                             "writes sweep.csv, points.csv and sweep.png to --output-dir")
    p.add_argument("--io-region", default="sram", choices=["sram", "dram"],
                   help="where the network input and output live (default sram, as Vela)")
    p.add_argument("--output-dir", default=".", metavar="DIR",
                   help="where a sweep writes its files (default: the current directory)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="run the sweep on this Dask scheduler (needs dask.distributed); "
                        "default: a local pool of processes")
    p.add_argument("--jobs", type=int, default=2, metavar="N",
                   help="processes of the local pool (default 2; 1 runs in this process)")
    p.add_argument("--no-vela", action="store_true",
                   help="do not run Vela for reference points (default: run it when "
                        "ethos-u-vela is installed)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_planner_arguments(p)


def _check_models(models: list[str]) -> None:
    for m in models:
        require_file(m, "model file")
        if not m.endswith((".tflite", ".json")):
            raise CliError(f"model file {m!r} is neither a .tflite model nor a planner graph "
                           ".json")


def _plan_run(args) -> int:
    _check_models(args.models)
    devices = parse_plan_target(args.target, target_options(args))
    options = planner_options(args)
    if args.jobs < 1:
        raise CliError(f"--jobs must be >= 1, got {args.jobs}")
    if args.sweep_budget is None:
        if args.scheduler is not None:
            raise CliError("--scheduler distributes a budget sweep; give --sweep-budget")
        budget = args.budget
        resolve_budget(budget, get_device(devices[0]))   # a bad size: one line, before any work
        several = len(args.models) * len(devices) > 1
        for model in args.models:
            for device in devices:
                try:
                    _plan_one(model, device, budget, args.io_region, options,
                              progress=not args.no_progress)
                except PlannerError as e:
                    if not several:
                        raise
                    raise PlannerError(f"{os.path.basename(model)} on {device}: {e}") from None
        return 0
    return _sweep(args, devices, options)


def _plan_one(model, device, budget, io_region, options, progress) -> None:
    # lazy: keeps tvmc --help fast (the planner search loads when tvmc plan runs)
    from planner.api import plan
    from planner.options import PlannerOptions
    from planner.report import layer_table
    with Progress(None, f"planning {os.path.basename(model)} on {device}", enabled=progress):
        t0 = time.perf_counter()
        result = plan(model, device, budget=budget, io_region=io_region,
                      options=PlannerOptions(**options))
        elapsed = time.perf_counter() - t0
    g, front = result.graph, result.frontier
    print(f"{g.name}: {len(g.parts)} parts on {device} (io in {io_region}); "
          f"{result.plan_candidates:,} plan candidates")
    if progress:   # timing varies run to run: stderr, so stdout stays byte-identical
        print(f"planned in {elapsed:.2f} s", file=sys.stderr)
    print(f"frontier: {len(front)} proposals from {front[0][0] / 1024:.1f} KiB to "
          f"{front[-1][0] / 1024:.1f} KiB; chosen #{result.chosen_index}")
    print(budget_line(result.budget, result.budget_source))
    print(layer_table(g, result.chosen))
    print()


def _sweep(args, devices, options) -> int:
    # lazy: keeps tvmc --help fast (the sweep loads when tvmc plan sweeps)
    from planner import sweep
    lo, hi, n = sweep.parse_sweep(args.sweep_budget)
    budgets = sweep.log_budgets(lo, hi, n)
    executor = args.scheduler if args.scheduler is not None else "local"
    if args.scheduler is not None and not args.scheduler.strip():
        raise CliError("--scheduler needs an address, e.g. tcp://127.0.0.1:8786")
    vela = False if args.no_vela else None
    try:
        os.makedirs(args.output_dir, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot create --output-dir {args.output_dir!r}: {e.strerror}") from None
    for f in ("sweep.csv", "points.csv", "sweep.png"):     # before the sweep, not after it
        require_writable(os.path.join(args.output_dir, f), "--output-dir's file")
    t0 = time.perf_counter()
    results = sweep.run_sweep(args.models, devices, budgets, io_region=args.io_region,
                              options=options, vela=vela, executor=executor,
                              workers=args.jobs, progress=not args.no_progress)
    elapsed = time.perf_counter() - t0
    for r in results:
        print(sweep.summary(r))
        print()
    paths = [os.path.join(args.output_dir, f) for f in ("sweep.csv", "points.csv", "sweep.png")]
    try:
        sweep.write_sweep_csv(results, paths[0])
        sweep.write_points_csv(results, paths[1])
        try:
            sweep.save_figure(results, paths[2])
        except ImportError:
            print(f"{PROG} plan: warning: {paths.pop()} not drawn: matplotlib is not "
                  "installed (pip install 'tvm-ethos[plots]')", file=sys.stderr)
    except OSError as e:
        raise CliError(f"cannot write to --output-dir {args.output_dir!r}: "
                       f"{e.strerror or e}") from None
    where = args.scheduler if args.scheduler is not None else (
        f"{args.jobs} local process{'es' if args.jobs > 1 else ''}")
    print(f"swept {len(results)} model/config pair{'s' if len(results) > 1 else ''} x "
          f"{len(budgets)} budgets in {elapsed:.1f} s on {where}; wrote "
          + ", ".join(paths))
    return 0


# ---------------------------------------------------------------------------------------------
# The command table. compile and run live in their own modules, which register themselves
# (after importing the helpers above); build_parser imports them.

#: The module that registers each subcommand when imported (none imports TVM at module level).
SUBCOMMAND_MODULES = {"compile": "tvm_ethos.cli_compile", "run": "tvm_ethos.cli_run"}

register("plan", "plan a model for an NPU with the cascading planner (no TVM needed)",
         _plan_arguments, _plan_run,
         description="Plan a model with the TVM-agnostic cascading planner: print the "
                     "per-layer plan within --budget, or sweep budgets with --sweep-budget "
                     "(CSV + PNG of the Pareto frontier, the chosen points, the naive "
                     "schedule and Vela's Size/Performance points when ethos-u-vela is "
                     "installed) over several models and accelerator configs, locally or on "
                     "a Dask cluster (--scheduler).")


# ---------------------------------------------------------------------------------------------


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """tvmc's parser. With ``command`` (a registered subcommand, or one of
    :data:`SUBCOMMAND_MODULES`) only that subcommand's parser is built, so the modules only the
    others need (and what they import) stay unloaded; without it, every subcommand's (``tvmc
    --help``, a misspelt command's list of choices)."""
    known = command in SUBCOMMANDS or command in SUBCOMMAND_MODULES
    for name, module in SUBCOMMAND_MODULES.items():
        if not known or name == command:
            importlib.import_module(module)
    ap = _Parser(prog=PROG, description="tvm-ethos: compile networks for Arm Ethos NPUs with "
                                        "TVM, and plan their memory with the cascading planner.")
    ap.add_argument("--version", action=_VersionAction)
    ap.add_argument("-v", "--verbose", action="count", default=0,
                    help="log what tvm-ethos does to stderr (-v: steps, -vv: details)")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name, sc in SUBCOMMANDS.items():
        if known and name != command:
            continue
        p = sub.add_parser(name, help=sc.help, description=sc.description or sc.help)
        p.add_argument("-v", "--verbose", dest="sub_verbose", action="count", default=0,
                       help="log what tvm-ethos does to stderr (-v: steps, -vv: details)")
        sc.add_arguments(p)
    return ap


#: the options that print a parser's help
HELP_OPTIONS = frozenset(("-h", "--help"))


def plugin_options(extra: list[str]) -> bool:
    """Whether the words the parser did not take may be a plugin backend's
    ``--target-<id>-<key>`` (the registry looks for plugins only when needed, and a parser
    has the options of the backends registered when it was built): it looks for them, and
    says whether it found any, so that a parser built again takes their options."""
    if not any(a.startswith("--target-") for a in extra):
        return False
    reg = get_registry()
    before = reg.known_ids()
    return reg.ids() != before


def named_command(argv: list[str]) -> str | None:
    """The subcommand a command line names: its first word that is not an option (tvmc's own
    options, ``-v`` and ``--version``, take no value), None when there is none."""
    return next((a for a in argv if not a.startswith("-")), None)


class _VersionAction(argparse.Action):
    """``--version``, with its line made only when asked for: it reads the installed TVM's
    metadata, which no other run of tvmc needs."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="show program's version number and exit"):
        super().__init__(option_strings=option_strings, dest=dest, default=default, nargs=0,
                         help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def version_line() -> str:
    """``tvmc --version``: tvm-ethos's version and the TVM it was installed with (read from
    the installed distribution, so TVM is not imported)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        tvm = f"apache-tvm {version('apache-tvm')}"
    except PackageNotFoundError:
        tvm = "apache-tvm not installed"
    return f"{PROG} (tvm-ethos) {__version__}, {tvm}"


#: Flags of TVM's own tvmc (gone with TVM 0.20) that tvm-ethos does not take, and what to use
#: instead; the README's table says the same.
OLD_TVMC_FLAGS = {
    "--pass-config": "tvm-ethos builds with its own TIR pipeline and takes no PassContext "
                     "options; the planner's settings are --planner-<field>, --budget, "
                     "--workspace-pools and --no-plan",
}

#: The loggers ``-v`` turns on; library code logs through ``logging.getLogger(__name__)``.
LOGGERS = ("tvm_ethos", "planner")


def configure_logging(verbosity: int) -> None:
    """``-v``: INFO, ``-vv``: DEBUG, to stderr; nothing without it (a library configures no
    handler of its own: Python's last-resort handler shows warnings and errors only). A second
    ``main()`` in one process replaces what the first set."""
    import logging

    level = logging.INFO if verbosity == 1 else logging.DEBUG
    for name in LOGGERS:
        log = logging.getLogger(name)
        for h in [h for h in log.handlers if getattr(h, "_tvmc", False)]:
            log.removeHandler(h)
        log.setLevel(level if verbosity > 0 else logging.NOTSET)
        if verbosity > 0:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("%(name)s: %(levelname)s: %(message)s"))
            handler._tvmc = True
            log.addHandler(handler)


def freeze_at_exit() -> None:
    """Leave the objects alive at exit to reference counting: the interpreter's last garbage
    collections would walk every one of them, and a compile leaves a great many (TVM's, the
    planner's), only for the process to end. Registered by :func:`main` to run at exit."""
    gc.disable()
    gc.freeze()


@contextlib.contextmanager
def collector_paused():
    """Python's cyclic garbage collector off for the block, as it was after: a compile makes
    millions of objects and leaves next to no cyclic garbage (its peak memory is the same
    without the collector), so the collections it triggers only walk the heap again and
    again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            # what the block made is all in the youngest generation: promoted to the oldest
            # (as the planner's search does), the next young collection does not walk it
            # all; a caller's frozen objects stay frozen (then nothing is promoted)
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def main(argv: list[str] | None = None) -> int:
    """Run tvmc; returns the exit status (argparse's own exits become return values)."""
    try:
        rc = _main(argv)
        sys.stdout.flush()   # here, not at exit, where a closed pipe is no longer caught
        return rc
    except BrokenPipeError:   # the reader left (`tvmc compile ... | head`): stop writing
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141   # what a shell reports for a process ended by SIGPIPE


def _parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """The command line read by the parser of the subcommand it names: (arguments, the words
    it did not take); argparse's SystemExit for --help and usage errors."""
    words = sys.argv[1:] if argv is None else argv
    if HELP_OPTIONS.intersection(words):   # the help lists the plugin targets' options too
        get_registry().ids()
    args, extra = build_parser(named_command(words)).parse_known_args(argv)
    if plugin_options(extra):
        args, extra = build_parser(named_command(words)).parse_known_args(argv)
    return args, extra


def _main(argv: list[str] | None) -> int:
    atexit.unregister(freeze_at_exit)   # once, however often main runs in one process
    atexit.register(freeze_at_exit)
    try:
        with collector_paused():   # building the parser imports the subcommand's modules
            args, extra = _parse(argv)
    except SystemExit as e:  # --help (0) or a usage error (2, one line already printed)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    if extra:   # named by the subcommand, with a hint where the option could be a target's
        hint = (f"; tvmc {args.command} --help lists the --target-<id>-<key> options"
                if any(a.startswith("--target-") for a in extra) else "")
        old = [f for f in OLD_TVMC_FLAGS if any(a.split("=")[0] == f for a in extra)]
        if old:
            hint = f"; {old[0]} is TVM's old tvmc flag: {OLD_TVMC_FLAGS[old[0]]}"
        print(f"{PROG} {args.command}: error: unrecognized arguments: {' '.join(extra)}{hint}",
              file=sys.stderr)
        return 2
    configure_logging(args.verbose + getattr(args, "sub_verbose", 0))
    try:
        return SUBCOMMANDS[args.command].run(args)
    except (PlannerError, TvmEthosError) as e:
        msg = " ".join(str(e).split()) or type(e).__name__
        print(f"{PROG} {args.command}: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
