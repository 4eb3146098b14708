"""The accelerator registry: every Ethos NPU configuration the project knows, by name, with the
facts about it that the planner, the stream generator, the functional model and the command line
read, and the one default configuration.

Ethos-U facts follow Vela 5.2.0 (``ethos-u-vela``): the per-configuration constants of Regor's
``ethos_u55.cpp`` / ``ethos_u65.cpp`` (the same numbers as the legacy
``architecture_features.py: accelerator_configs`` and its output performance tables), and the
system Vela assumes when given none (``_set_default_sys_config`` / ``_set_default_mem_mode``,
with ``config_files/Arm/vela.ini``). Ethos-N78 facts follow the Ethos-N driver stack's support
library (``Capabilities.cpp: GetEthosN78FwHwCapabilities``, the 2-PLE-ratio variants).

A configuration the project names but has no model of (the Ethos-U85: Vela's Python API cannot
stream it) is still an entry, without a core, so that every list of names is the registry's.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable

Shape3 = tuple[int, int, int]    # (height, width, depth)


class Family(Enum):
    """An NPU product line; the value is the prefix of its configurations' names."""
    ETHOS_U55 = "ethos-u55"
    ETHOS_U65 = "ethos-u65"
    ETHOS_U85 = "ethos-u85"
    ETHOS_N78 = "ethos-n78"

    @property
    def backend_id(self) -> str:
        """The tvm-ethos target that compiles for this family."""
        return "ethos-n" if self is Family.ETHOS_N78 else "ethos-u"


class UnknownAcceleratorError(ValueError):
    """A name that is no configuration of the registry."""


@dataclass(frozen=True)
class EthosUCore:
    """What one Ethos-U configuration is made of, as Vela's performance model and scheduler
    see it.

    ``output_cycles`` are output-stage cycles per element by operation class: 0 unary 32-bit
    elementwise, 1 binary 32-bit elementwise, 2 MUL with 32-bit output, 3 MUL or 40-bit
    accumulators, 4 simple ADD/SUB, 5 advanced ADD/SUB, 6 MAXPOOL, 7 everything else.
    ``activation_cycles``: 0 LUT activations, 1 the ReLU family, 2 none. ``shram_granules``
    are in the order IFM8, IFM16, IFM8_EW, IFM16_EW, IFM32, ACC16, ACC32, ACC40.
    """
    macs: int                        # MACs per cycle per core
    cores: int
    ofm_ublock: Shape3
    ifm_ublock: Shape3
    shram_banks: int                 # 1 KiB banks of the shared buffer
    shram_granules: tuple[int, ...]
    output_cycles: tuple[float, ...]
    activation_cycles: tuple[float, ...]

    #: Bytes per SHRAM bank.
    BANK_BYTES = 1024
    #: Banks a LUT takes at the end of SHRAM (2 KiB: 8 slots of 256 bytes).
    LUT_BANKS = 2
    LUT_SLOT_BYTES = 256

    @property
    def shram_bytes(self) -> int:
        return self.shram_banks * self.BANK_BYTES

    @property
    def shram_lut_address(self) -> int:
        """Where activation LUTs go in SHRAM: its last two banks, on every configuration."""
        return (self.shram_banks - self.LUT_BANKS) * self.BANK_BYTES


@dataclass(frozen=True)
class EthosNCore:
    """What one Ethos-N78 variant is made of: MAC engines with their input/output channel
    groups, the SRAM slices (one per EMC) and the PLE lanes; 8 MAC units per output group."""
    engines: int
    igs_per_engine: int
    ogs_per_engine: int
    emcs_per_engine: int
    sram_bytes: int
    ple_lanes: int
    mac_units_per_og: int = 8

    @property
    def ifm_channels_per_cycle(self) -> int:
        return self.igs_per_engine * self.engines

    @property
    def ofm_channels_per_cycle(self) -> int:
        return self.ogs_per_engine * self.engines

    @property
    def macs(self) -> int:
        """MACs per cycle: input channels x MAC units x output channels per cycle."""
        return self.ifm_channels_per_cycle * self.mac_units_per_og * self.ofm_channels_per_cycle


class WeightMemory(Enum):
    """Where Vela's default memory mode keeps the weights; values are the planner's region
    names."""
    FLASH = "flash"
    DRAM = "dram"


@dataclass(frozen=True)
class VelaDefaultSystem:
    """The system Vela assumes around an Ethos-U when given no ``--system-config`` or
    ``--memory-mode``: the names of both, and the facts of them the project reads."""
    system_config: str
    memory_mode: str
    axi_port_bytes: int              # AXI data width, bytes per cycle
    address_bits: int                # AXI address width
    arena_cache_size: int | None     # the memory mode's SRAM; None: the whole address space
    weights: WeightMemory

    @property
    def address_space(self) -> int:
        return 1 << self.address_bits


@dataclass(frozen=True)
class Accelerator:
    """One NPU configuration. ``core`` is None where the project has no model of it (then it
    can be named as a target option but neither planned nor streamed)."""
    name: str
    family: Family
    core: EthosUCore | EthosNCore | None = None
    core_clock_hz: float | None = None    # the clock the system runs it at (cycles -> time)
    vela_system: VelaDefaultSystem | None = None
    tops: int | None = None               # Ethos-N: its variant's TOP/s, part of its name

    @property
    def backend_id(self) -> str:
        return self.family.backend_id

    @property
    def macs(self) -> int | None:
        """MACs per cycle per core (None without a model)."""
        return None if self.core is None else self.core.macs

    @property
    def cores(self) -> int | None:
        if isinstance(self.core, EthosUCore):
            return self.core.cores
        return None if self.core is None else 1

    @property
    def buffer_bytes(self) -> int | None:
        """The NPU's internal buffer: an Ethos-U's SHRAM, an Ethos-N's SRAM."""
        if isinstance(self.core, EthosUCore):
            return self.core.shram_bytes
        return None if self.core is None else self.core.sram_bytes

    @property
    def planned(self) -> bool:
        """Whether the planner has a performance model of it."""
        return self.core is not None

    @property
    def streams(self) -> bool:
        """Whether Vela's Python API (``NpuAccelerator``) can build its command streams, and so
        whether the stream generator and the functional model take it: the Ethos-U55/U65."""
        return self.family in (Family.ETHOS_U55, Family.ETHOS_U65)

    @property
    def vela_name(self) -> str | None:
        """The member name of Vela's ``Accelerator`` / ``NpuAccelerator`` (``Ethos_U55_128``)."""
        if self.backend_id != "ethos-u":
            return None
        return "Ethos_" + self.name[len("ethos-"):].replace("-", "_").upper()

    @property
    def config_id(self) -> tuple[int, int] | None:
        """(product, log2 of MACs per cycle) as a driver payload's config word says them:
        product 0 is the Ethos-U55, 1 the Ethos-U65."""
        if not self.streams or not isinstance(self.core, EthosUCore):
            return None
        product = 0 if self.family is Family.ETHOS_U55 else 1
        return product, (self.core.macs * self.core.cores).bit_length() - 1


_U55_SYSTEM = VelaDefaultSystem("Ethos_U55_High_End_Embedded", "Shared_Sram",
                                axi_port_bytes=8, address_bits=32, arena_cache_size=None,
                                weights=WeightMemory.FLASH)
_U65_SYSTEM = VelaDefaultSystem("Ethos_U65_Client_Server", "Dedicated_Sram_384KB",
                                axi_port_bytes=16, address_bits=40, arena_cache_size=393216,
                                weights=WeightMemory.DRAM)
_BIG_GRANULES = (8, 8, 8, 8, 16, 8, 16, 20)
_U256_OUTPUT = (0.625, 1.125, 0.5, 0.375, 0.5, 0.75, 0.125, 0.25)
_U256_ACTIVATION = (1.0, 0.25, 0.0)


def _ethos_u55(name: str, core: EthosUCore) -> Accelerator:
    return Accelerator(name, Family.ETHOS_U55, core, 500e6, _U55_SYSTEM)


def _ethos_u65(name: str, core: EthosUCore) -> Accelerator:
    return Accelerator(name, Family.ETHOS_U65, core, 1e9, _U65_SYSTEM)


def _ethos_n78(tops: int, core: EthosNCore) -> Accelerator:
    # clocked at the 1 GHz its TOP/s figures assume
    return Accelerator(f"ethos-n78-{tops}tops", Family.ETHOS_N78, core, 1e9, tops=tops)


#: Every configuration, in the order the lists and error messages show them.
ACCELERATORS: tuple[Accelerator, ...] = (
    # EthosUCore(macs, cores, ofm_ublock, ifm_ublock, shram_banks, shram_granules,
    #            output_cycles, activation_cycles)
    _ethos_u55("ethos-u55-32", EthosUCore(
        32, 1, (1, 1, 4), (1, 1, 8), 16, (2, 2, 2, 2, 4, 4, 4, 4),
        (2.0, 3.0, 3.0, 3.0, 4.0, 6.0, 1.0, 2.0), (1.0, 1.0, 0.0))),
    _ethos_u55("ethos-u55-64", EthosUCore(
        64, 1, (1, 1, 8), (1, 1, 8), 16, (2, 2, 2, 2, 4, 4, 4, 8),
        (1.0, 1.5, 1.5, 1.5, 2.0, 3.0, 0.5, 1.0), (1.0, 1.0, 0.0))),
    _ethos_u55("ethos-u55-128", EthosUCore(
        128, 1, (1, 2, 8), (1, 2, 8), 24, (4, 4, 4, 4, 8, 4, 8, 12),
        (0.75, 1.25, 0.75, 0.75, 1.0, 1.5, 0.25, 0.5), (1.0, 0.5, 0.0))),
    _ethos_u55("ethos-u55-256", EthosUCore(
        256, 1, (2, 2, 8), (2, 2, 8), 48, _BIG_GRANULES, _U256_OUTPUT, _U256_ACTIVATION)),
    _ethos_u65("ethos-u65-256", EthosUCore(
        256, 1, (2, 2, 8), (2, 2, 8), 48, _BIG_GRANULES, _U256_OUTPUT, _U256_ACTIVATION)),
    _ethos_u65("ethos-u65-512", EthosUCore(
        256, 2, (2, 2, 8), (2, 2, 8), 48, _BIG_GRANULES,
        (0.3125, 0.5625, 0.25, 0.1875, 0.25, 0.375, 0.0625, 0.125), (0.5, 0.125, 0.0))),
    *(Accelerator(f"ethos-u85-{macs}", Family.ETHOS_U85) for macs in (128, 256, 512, 1024, 2048)),
    # EthosNCore(engines, igs_per_engine, ogs_per_engine, emcs_per_engine, sram_bytes, ple_lanes)
    _ethos_n78(1, EthosNCore(2, 4, 4, 4, 448 * 1024, 1)),
    _ethos_n78(2, EthosNCore(4, 2, 4, 2, 768 * 1024, 1)),
    _ethos_n78(4, EthosNCore(4, 4, 4, 4, 1024 * 1024, 2)),
    _ethos_n78(8, EthosNCore(8, 2, 4, 2, 2048 * 1024, 2)),
)

_BY_NAME = {a.name: a for a in ACCELERATORS}

#: The configuration used wherever none is given.
DEFAULT_ACCELERATOR: Accelerator = _BY_NAME["ethos-u55-128"]


def names(where: Callable[[Accelerator], bool] | None = None) -> tuple[str, ...]:
    """The names of the configurations ``where`` holds for (all of them by default), in the
    registry's order."""
    return tuple(a.name for a in ACCELERATORS if where is None or where(a))


def accelerator(name: str) -> Accelerator:
    """The configuration called ``name``; an UnknownAcceleratorError naming every known one
    otherwise."""
    found = _BY_NAME.get(name) if isinstance(name, str) else None
    if found is None:
        raise UnknownAcceleratorError(f"unknown accelerator configuration {name!r}; known: "
                                      f"{', '.join(names())}")
    return found


def ethos_u_core(name: str) -> EthosUCore:
    """The core of the Ethos-U configuration called ``name``; an UnknownAcceleratorError where
    it is none, or one the project has no model of."""
    found = _BY_NAME.get(name) if isinstance(name, str) else None
    core = None if found is None else found.core
    if not isinstance(core, EthosUCore):
        raise UnknownAcceleratorError(
            f"{name!r} is no modelled Ethos-U configuration; known: "
            f"{', '.join(names(lambda a: isinstance(a.core, EthosUCore)))}")
    return core


def ethos_n_name(variant: str, tops: int | str) -> str:
    """The name of an Ethos-N configuration given as the ethos-n target's options
    (``variant="n78", tops=4`` -> ``ethos-n78-4tops``); it need not exist."""
    return f"ethos-{variant}-{tops}tops"


def ethos_n_variants() -> tuple[str, ...]:
    """The ethos-n target's ``variant`` values (``"n78"``)."""
    found = (a.family.value[len("ethos-"):] for a in ACCELERATORS
             if a.family.backend_id == "ethos-n")
    return tuple(dict.fromkeys(found))


def ethos_n_tops() -> tuple[int, ...]:
    """The ethos-n target's ``tops`` values, in increasing order."""
    return tuple(sorted({a.tops for a in ACCELERATORS if a.tops is not None}))


def by_config_id(product: int, log2_macs: int) -> Accelerator | None:
    """The Ethos-U a driver payload's config word names, or None for an unknown one."""
    return next((a for a in ACCELERATORS if a.config_id == (product, log2_macs)), None)
