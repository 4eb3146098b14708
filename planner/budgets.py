"""The memory budget a plan is chosen within: a size, none, or by default the device's SRAM.

Vela plans within the arena of the system configuration and memory mode it is given, or of its
defaults per accelerator; the planner does the same when no budget is given
(``budget="system"``), and ``budget=None`` (``--budget none``) asks for the fastest Proposal
whatever its memory. Every answer comes with the words that say where the figure came from,
for the reports.

Vela 5.2.0 facts (``ethosu/vela/architecture_features.py`` and
``ethosu/config_files/Arm/vela.ini``):

* with no ``--system-config`` / ``--memory-mode``, Vela takes ``Ethos_U55_High_End_Embedded`` with
  ``Shared_Sram`` for an Ethos-U55, and ``Ethos_U65_Client_Server`` with
  ``Dedicated_Sram_384KB`` for an Ethos-U65 (``_set_default_sys_config``,
  ``_set_default_mem_mode``);
* ``[Memory_Mode.Dedicated_Sram_384KB]`` sets ``arena_cache_size=393216``;
  ``[Memory_Mode.Shared_Sram]`` sets none, so the arena is limited only by
  ``max_address_offset = 1 << axi_port_address_width`` (32 bits on the U55: 4 GiB).

The planner's devices carry those sizes as their SRAM (``planner.devices``), so the default
budget is the size of the device's feature-map region, memory pools included.
"""
from __future__ import annotations

from ethos_arch.accelerators import ACCELERATORS, VelaDefaultSystem
from planner.device_model import Device
from planner.devices import DEVICE_NAMES, get_device
from planner.errors import PlannerError
from planner.sizes import parse_size

#: The budget value meaning "the SRAM of the device's system configuration".
SYSTEM = "system"
#: The budget value meaning "no budget: the fastest Proposal".
NONE = "none"
#: The budget value meaning "the Proposal with the least memory".
SMALLEST = "smallest"
#: Where a ``smallest`` budget came from, in the reports' words.
SMALLEST_SOURCE = ("smallest: the least memory, or up to 1/8 more where that moves fewer weight "
                   "and command-stream bytes")
#: The budget value of Vela's ``--optimise Size``: the least memory the network costs the
#: system (planner.size_choice).
SIZE = "size"
#: Where a ``size`` budget came from, in the reports' words.
SIZE_SOURCE = "size: the least SRAM plus command-stream bytes (Vela's --optimise Size)"


def _system_words(system: VelaDefaultSystem) -> str:
    arena = (f"vela.ini arena_cache_size={system.arena_cache_size}"
             if system.arena_cache_size is not None else
             f"vela.ini sets no arena_cache_size: the {system.address_bits}-bit address space")
    return (f"Vela's default {system.system_config}, memory mode {system.memory_mode} "
            f"({arena})")


#: The system Vela assumes per accelerator family, as the reports name it.
VELA_DEFAULT_SYSTEMS = {a.family.value: _system_words(a.vela_system) for a in ACCELERATORS
                        if a.vela_system is not None}


def system_name(device: Device) -> str:
    """Which system's SRAM the default budget is, in words."""
    for prefix, words in VELA_DEFAULT_SYSTEMS.items():
        if device.name.startswith(prefix):
            return words
    return device.name


def resolve_budget(budget, device: Device) -> tuple[int | None, str]:
    """``budget`` (a size, ``"system"``, ``None`` or ``"none"``) -> (bytes or None, where it
    came from). A size is read by :func:`parse_size`; a bad one is a PlannerError."""
    word = budget.strip().lower() if isinstance(budget, str) else None
    if budget is None or word == NONE:
        return None, "none: the fastest Proposal"
    if word == SMALLEST:
        return None, SMALLEST_SOURCE
    if word == SIZE:
        return None, SIZE_SOURCE
    if word == SYSTEM:
        size = device.region(device.fm_region).size
        default = _default_size(device)
        if default is not None and size != default:
            return size, f"the {device.fm_region} size given for this target"
        return size, f"the SRAM of {system_name(device)}"
    try:
        return parse_size(budget, "budget"), "given"
    except PlannerError as err:
        raise PlannerError(f"{err}; or {SYSTEM!r} (the default: the device's SRAM), {NONE!r} "
                           f"(the fastest), {SMALLEST!r} (the least memory) or {SIZE!r} (the "
                           "least memory plus command-stream bytes)") from None


def _default_size(device: Device) -> int | None:
    if device.name not in DEVICE_NAMES:
        return None
    base = get_device(device.name)
    return base.region(base.fm_region).size


#: The help line of every ``--budget`` option (python -m planner, tvmc plan, tvmc compile).
BUDGET_HELP = ("memory budget: a size such as 300KiB or 1MiB; 'system' (the default) the SRAM of "
               "the accelerator's system configuration, as Vela plans; 'none' the fastest plan "
               "whatever its memory; 'smallest' the least memory, or up to 1/8 more where that "
               "moves fewer weight and command-stream bytes; 'size' (Vela's --optimise Size) "
               "the least SRAM plus estimated command-stream bytes (rfcs/0001)")


def budget_line(budget: int | None, whence: str) -> str:
    """The report's line saying which budget a plan was chosen within, and why."""
    if whence in (SMALLEST_SOURCE, SIZE_SOURCE):
        return f"budget: {whence}"
    if budget is None:
        return "budget: none (the fastest Proposal)"
    return f"budget: {budget:,} B" + ("" if whence == "given" else f", {whence}")
