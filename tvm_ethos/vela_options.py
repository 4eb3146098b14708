"""Vela's command-line vocabulary on ``tvmc compile``: its options, with Vela's meanings, mapped
onto tvm-ethos's (target options, ``budget``, ``memory_pools``) and Vela's system description.

A system configuration and memory mode are read with Vela's own parser
(``ethosu.vela.architecture_features.ArchitectureFeatures``, the ``vela.ini`` format), so a
user's existing ``--config`` files mean here what they mean to Vela: the memory mode's
``arena_cache_size`` becomes the size of the planner's SRAM (the arena the plan must fit), and
the bandwidths, latencies and burst lengths of the memories holding the feature maps and the
weights become the planner's memory timings. ``--optimise Size`` asks for the plan of least
SRAM plus estimated command-stream bytes (the ``size`` budget),
``Performance`` (Vela's default) for the fastest within that SRAM.

Importing this module imports neither TVM nor Vela; :func:`read_system` imports Vela.
"""
from __future__ import annotations

import argparse
import configparser
import contextlib
import importlib.util
import io
import os
from dataclasses import dataclass

from ethos_arch.accelerators import ACCELERATORS, DEFAULT_ACCELERATOR
from planner.budgets import SIZE
from tvm_ethos.cli import CliError

#: ``--optimise`` values, as Vela spells them.
OPTIMISE = ("Size", "Performance")
#: Vela's sentinel for "the default for this accelerator" (``ArchitectureFeatures.DEFAULT_CONFIG``).
_DEFAULT = "internal-default"
#: The suffix of the files ``--output-dir`` names: Vela writes ``<model>_vela.tflite``.
OUTPUT_SUFFIX = "_tvm_ethos"
#: Vela's memory areas in its reports' order (``MemArea.all()`` less SHRAM), identifier names.
MEMORIES = ("sram", "dram", "on_chip_flash", "off_chip_flash")
#: The planner's memory holding the weights, per accelerator family (the registry's default
#: system, as ``planner.devices`` builds it).
_WEIGHT_REGION = {a.family.value: a.vela_system.weights.value for a in ACCELERATORS
                  if a.vela_system is not None}


@dataclass(frozen=True)
class VelaSystem:
    """An accelerator in one of Vela's system configurations and memory modes, as Vela reads
    them: what the reports print and what the planner's memories are set from."""

    accelerator: str
    system_config: str
    memory_mode: str
    core_clock: float                  # Hz
    arena_cache_size: int              # bytes: the SRAM the plan must fit
    bandwidth: tuple[tuple[str, float], ...]   # memory -> bytes per second (Vela's design peak)
    bytes_per_cycle: tuple[tuple[str, float], ...]
    weights_area: str                  # Vela's display names, e.g. "Off-chip Flash"
    feature_map_area: str
    pools: tuple[tuple[str, tuple[tuple[str, float], ...]], ...]   # planner memory pools

    def memory_pools(self) -> dict:
        """``compile``'s ``memory_pools``: the planner's SRAM and weight memory as this system's."""
        return {name: dict(fields) for name, fields in self.pools}


def config_path(config: str) -> str:
    """A ``--config`` value as Vela resolves it: ``Vendor/file.ini`` names a file shipped in
    Vela's ``config_files`` folder, anything else is a path; it must be a readable ``.ini``."""
    from ethosu.vela.architecture_features import CONFIG_FILES_PATH

    if os.path.splitext(config)[1] != ".ini":
        raise CliError(f"--config {config!r}: Vela's configuration files end in .ini")
    norm = os.path.normpath(config)
    parts = norm.split(os.path.sep)
    shipped = (len(parts) == 2 and not config.startswith((".", os.path.sep, "~")))
    path = os.path.join(CONFIG_FILES_PATH, norm) if shipped else os.path.expanduser(norm)
    if not os.access(path, os.R_OK) or os.path.isdir(path):
        raise CliError(f"--config {config!r}: {path!r} is not a readable file; give a path, "
                       f"or Vendor/name.ini for a file in Vela's {CONFIG_FILES_PATH}")
    return path


def _sections(paths: list[str], kind: str) -> list[str]:
    cp = configparser.ConfigParser()
    cp.read(paths)
    return sorted(s.split(".", 1)[1] for s in cp.sections() if s.startswith(kind + "."))


def read_system(accelerator: str, system_config: str | None = None,
                memory_mode: str | None = None, config_files: list[str] | tuple = (),
                arena_cache_size: int | None = None) -> VelaSystem:
    """The system as Vela reads it: its defaults for ``accelerator`` where a name is not given
    (``Ethos_U55_High_End_Embedded`` / ``Shared_Sram``, ``Ethos_U65_Client_Server`` /
    ``Dedicated_Sram_384KB``), ``config_files`` (resolved paths) read as a group, or Vela's
    own ``Arm/vela.ini`` without them. A name no file defines is a CliError listing those
    that are. Vela's defaults throughout are Vela's default architecture, which Vela builds
    once per process (``create_default_arch``) and its register generator uses too."""
    from ethosu.vela.architecture_features import (
        CONFIG_FILES_PATH,
        Accelerator,
        ArchitectureFeatures,
        create_default_arch,
    )
    from ethosu.vela.errors import VelaError
    from ethosu.vela.tensor import MemArea, TensorPurpose

    if accelerator not in Accelerator.member_list():
        raise CliError(f"--accelerator-config {accelerator!r}: Vela knows "
                       f"{', '.join(Accelerator.member_list())}")
    files = list(config_files) or [os.path.join(CONFIG_FILES_PATH, "Arm", "vela.ini")]
    defaults = (not config_files and system_config is None and memory_mode is None
                and arena_cache_size is None)
    quiet = io.StringIO()   # Vela prints "Warning: No system configuration specified" to stdout
    try:
        with contextlib.redirect_stdout(quiet):
            arch = create_default_arch(Accelerator(accelerator)) if defaults else \
                ArchitectureFeatures(
                    vela_config_files=list(config_files) or None,
                    system_config=system_config or _DEFAULT,
                    memory_mode=memory_mode or _DEFAULT, accelerator_config=accelerator,
                    max_blockdep=ArchitectureFeatures.MAX_BLOCKDEP, verbose_config=False,
                    arena_cache_size=arena_cache_size)
    except VelaError as err:
        raise CliError(_vela_message(err, files, system_config, memory_mode)) from None
    except (ValueError, KeyError, configparser.Error) as err:   # a value Vela cannot read
        raise CliError(f"Vela cannot read the system {system_config or 'default'} / "
                       f"{memory_mode or 'default'} in {', '.join(files)}: "
                       f"{type(err).__name__}: {err}") from None
    areas = [MemArea.Sram, MemArea.Dram, MemArea.OnChipFlash, MemArea.OffChipFlash]
    bw = tuple((a.identifier_name(), float(arch.memory_bandwidths_per_second[a])) for a in areas)
    bpc = tuple((a.identifier_name(), float(arch.memory_bandwidths_per_cycle[a])) for a in areas)
    weights = arch.tensor_storage_mem_area[TensorPurpose.Weights]
    fms = arch.tensor_storage_mem_area[TensorPurpose.FeatureMap]
    family = accelerator[: len("ethos-u55")]
    pools = ()
    if family in _WEIGHT_REGION:
        pools = (("sram", _timing(arch, arch.fast_storage_mem_area, int(arch.arena_cache_size))),
                 (_WEIGHT_REGION[family], _timing(arch, weights, None)))
    return VelaSystem(accelerator, str(arch.system_config), str(arch.memory_mode),
                      float(arch.core_clock), int(arch.arena_cache_size), bw, bpc,
                      weights.display_name(), fms.display_name(), pools)


def _timing(arch, area, size: int | None) -> tuple[tuple[str, float], ...]:
    """A planner memory pool with the timing Vela gives ``area``."""
    fields = [("read_bw", float(arch.memory_bandwidths_per_cycle[area])),
              ("write_bw", float(arch.memory_bandwidths_per_cycle[area])),
              ("read_latency", int(arch.memory_latency[area][0])),
              ("write_latency", int(arch.memory_latency[area][1])),
              ("burst", int(arch.memory_burst_length[area]))]
    return tuple(([("size", size)] if size is not None else []) + fields)


def _vela_message(err, files, system_config, memory_mode) -> str:
    text = " ".join(str(getattr(err, "data", err)).split())
    listing = []
    if system_config and system_config not in _sections(files, "System_Config"):
        listing.append(f"--system-config {system_config!r} is not defined; the files define "
                       f"{', '.join(_sections(files, 'System_Config'))}")
    if memory_mode and memory_mode not in _sections(files, "Memory_Mode"):
        listing.append(f"--memory-mode {memory_mode!r} is not defined; the files define "
                       f"{', '.join(_sections(files, 'Memory_Mode'))}")
    return "; ".join(listing) if listing else f"Vela refuses the system: {text}"


# ----------------------------------------------------------------------------- the command line


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Vela's options, with Vela's names and meanings (the README's table maps every one)."""
    g = p.add_argument_group("Vela's options (as 'vela' takes them)")
    g.add_argument("--accelerator-config", default=None, metavar="CONFIG",
                   help="the Ethos-U, e.g. ethos-u55-128 or ethos-u65-256 (the ethos-u "
                        f"target's accelerator_config; default {DEFAULT_ACCELERATOR.name})")
    g.add_argument("--optimise", default=None, choices=OPTIMISE,
                   help="Size: the plan with the least SRAM plus estimated command-stream "
                        "bytes (--budget size); Performance (the default): the "
                        "fastest plan within the system's SRAM (the memory mode's "
                        "arena_cache_size, or --arena-cache-size)")
    g.add_argument("--system-config", default=None, metavar="NAME",
                   help="a [System_Config.NAME] of Vela's vela.ini or --config (default: "
                        "Vela's for the accelerator)")
    g.add_argument("--memory-mode", default=None, metavar="NAME",
                   help="a [Memory_Mode.NAME] of Vela's vela.ini or --config (default: Vela's "
                        "for the accelerator)")
    g.add_argument("--config", action="append", default=None, metavar="FILE.ini",
                   help="a Vela configuration file (read by Vela's parser; repeat for more)")
    g.add_argument("--arena-cache-size", default=None, metavar="BYTES",
                   help="the SRAM arena in bytes, overriding the memory mode's")
    g.add_argument("--output-dir", default=None, metavar="DIR",
                   help="write the output as Vela names it (DIR/MODEL_tvm_ethos.tflite, or "
                        ".tar for a package) and the summary CSV "
                        "DIR/MODEL_summary_SYSTEM.csv")
    g.add_argument("--verbose-performance", action="store_true",
                   help="print the per-layer table and write DIR/MODEL_per-layer.csv")
    g.add_argument("--verbose-allocation", action="store_true",
                   help="print each cascade's buffer bytes, the stream's scratch high water "
                        "and the arena they add up to")


@dataclass(frozen=True)
class VelaChoices:
    """What Vela's flags decided: the accelerator, the plan's budget, the planner's memories,
    and the system the reports describe (None without an ethos-u target)."""

    accelerator: str | None
    budget: str | None
    memory_pools: dict | None
    system: VelaSystem | None


def uses_system(args) -> bool:
    """Whether a flag describing Vela's system (not only the accelerator) was given."""
    return any(v is not None for v in (args.system_config, args.memory_mode, args.config,
                                       args.arena_cache_size))


def arena_size(value: str | None) -> int | None:
    """``--arena-cache-size``: bytes, as Vela takes it."""
    if value is None:
        return None
    try:
        n = int(value, 0)
    except ValueError:
        raise CliError(f"--arena-cache-size {value!r}: give a number of bytes, as Vela takes "
                       "it (e.g. 393216)") from None
    if n <= 0:
        raise CliError(f"--arena-cache-size must be > 0 bytes, got {value}")
    return n


def accelerator_option(args, cli_options: dict, target: str) -> None:
    """``--accelerator-config`` into the ethos-u target's options (``cli_options``, the
    ``--target-<id>-<key>`` values), refusing a second, different value."""
    acc = args.accelerator_config
    if acc is None:
        return
    ids = [e.strip().split()[0] for e in str(target).split(",") if e.strip()]
    if "ethos-u" not in ids:
        raise CliError(f"--accelerator-config {acc} configures an ethos-u target; --target "
                       f"{target!r} has none: use e.g. --target ethos-u,llvm")
    given = cli_options.setdefault("ethos-u", {}).get("accelerator_config")
    inline = [t.split("=", 1)[1] for e in str(target).split(",") for t in e.split()[1:]
              if t.lstrip("-").replace("-", "_").startswith("accelerator_config=")]
    for other in [given] + inline:
        if other is not None and other != acc:
            raise CliError(f"--accelerator-config {acc} and the target's accelerator_config "
                           f"{other} differ; give one")
    cli_options["ethos-u"]["accelerator_config"] = acc


def choices(args, targets) -> VelaChoices:
    """Vela's flags against the resolved target list (after :func:`accelerator_option`)."""
    if args.optimise is not None and args.budget is not None:
        raise CliError(f"--optimise {args.optimise} and --budget {args.budget} both choose "
                       "the plan; give one")
    budget = SIZE if args.optimise == "Size" else None   # any planned NPU's
    spec = next((t for t in targets.targets if t.backend_id == "ethos-u"), None)
    if spec is None:
        if uses_system(args):
            raise CliError(f"--system-config, --memory-mode, --config and --arena-cache-size "
                           f"describe an Ethos-U system; --target {targets} has no ethos-u: "
                           "use e.g. --target ethos-u,llvm")
        return VelaChoices(None, budget, None, None)
    acc = str(spec.options.get("accelerator_config", DEFAULT_ACCELERATOR.name))
    if uses_system(args) and args.workspace_pools:
        raise CliError("--workspace-pools and Vela's system options (--system-config, "
                       "--memory-mode, --config, --arena-cache-size) both set the memories; "
                       "give one")
    if not vela_installed():
        if uses_system(args):
            raise CliError("--system-config, --memory-mode, --config and --arena-cache-size "
                           "are read with Vela's parser: pip install 'tvm-ethos[vela]'")
        return VelaChoices(acc, budget, None, None)   # no Vela: no Vela reports either
    files = [config_path(c) for c in args.config or ()]
    system = None
    if acc.startswith(tuple(_WEIGHT_REGION)) or uses_system(args):
        system = read_system(acc, args.system_config, args.memory_mode, files,
                             arena_size(args.arena_cache_size))
    pools = system.memory_pools() if system is not None and uses_system(args) else None
    if pools == {}:
        raise CliError(f"accelerator {acc}: the planner has no model of it, so Vela's system "
                       "options cannot be honoured")
    return VelaChoices(acc, budget, pools, system)


def vela_installed() -> bool:
    """Whether Vela (the ``vela`` extra) can be imported, without importing it."""
    try:
        return importlib.util.find_spec("ethosu.vela") is not None
    except ModuleNotFoundError:
        return False


def output_name(model: str, output_dir: str, extension: str) -> str:
    """The file ``--output-dir`` writes, named as Vela names it, with tvm-ethos's suffix."""
    stem = os.path.splitext(os.path.basename(model))[0]
    return os.path.join(output_dir, f"{stem}{OUTPUT_SUFFIX}{extension}")
