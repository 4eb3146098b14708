"""The device registry: every NPU configuration the planner can target, by name.

A Device pairs a performance model with the memories of a typical system around the NPU. The
Ethos-U systems are Vela's defaults (``ethosu/config_files/Arm/vela.ini`` in Vela 5.2.0, and
``architecture_features.py: _set_default_sys_config / _set_default_mem_mode``), so that plans
are costed on the system Arm's compiler assumes when given no configuration:

* Ethos-U55: ``Ethos_U55_High_End_Embedded`` with ``Shared_Sram``: feature maps in SRAM on
  AXI0, weights in off-chip flash on AXI1, 500 MHz, 8-byte AXI ports.
* Ethos-U65: ``Ethos_U65_Client_Server`` with ``Dedicated_Sram_384KB``: a 384 KiB SRAM on AXI0
  for the working set, weights (and everything that does not fit) in DRAM on AXI1, 1 GHz,
  16-byte AXI ports.

Bandwidths are bytes per NPU cycle = AXI port width x the memory's clock scale
(``architecture_features.py: memory_bandwidths_per_cycle``); latencies and burst lengths are
the ``*_read_latency``, ``*_write_latency`` and ``*_burst_length`` entries of vela.ini.

Every device has a ``"dram"`` region so that ``io_region="dram"`` can stream the network's
input and output from DRAM; Vela's U55 system has no DRAM, so the U55 one is an assumption
(see ``_U55_DRAM``).
"""
from __future__ import annotations

from functools import lru_cache

from ethos_arch.accelerators import ACCELERATORS, Family, VelaDefaultSystem, accelerator, names
from ethos_arch.ops import Op
from planner.device_model import Device
from planner.errors import PlannerError
from planner.memory import MemoryRegion
from planner.perf.ethos_n import DMA_BYTES_PER_CYCLE, PER_STRIPE_OVERHEAD_CYCLES, EthosNPerfModel
from planner.perf.ethos_n import VARIANTS as ETHOS_N_VARIANTS
from planner.perf.ethos_u import BlockPolicy, EthosUPerfModel, PortTiming

ETHOS_U55 = names(lambda a: a.planned and a.family is Family.ETHOS_U55)
ETHOS_U65 = names(lambda a: a.planned and a.family is Family.ETHOS_U65)
ETHOS_N78 = names(lambda a: a.planned and a.family is Family.ETHOS_N78)

#: Every name :func:`get_device` accepts: the accelerator registry's planned configurations.
DEVICE_NAMES: tuple[str, ...] = names(lambda a: a.planned)

IO_REGIONS = ("sram", "dram")

#: NPU core clock per device, to turn cycles into time (the registry's: vela.ini
#: ``core_clock``; Ethos-N78 at the 1 GHz its TOP/s figures assume).
CORE_CLOCK_HZ: dict[str, float] = {a.name: a.core_clock_hz for a in ACCELERATORS if a.planned}


def _vela_system(family: Family) -> VelaDefaultSystem:
    return next(a.vela_system for a in ACCELERATORS if a.family is family and a.vela_system)


_U55_SYSTEM = _vela_system(Family.ETHOS_U55)
_U65_SYSTEM = _vela_system(Family.ETHOS_U65)
# AXI data width in bytes per cycle (architecture_features.py: axi_port_bytes_per_cycle).
_U55_AXI_BYTES = float(_U55_SYSTEM.axi_port_bytes)
_U65_AXI_BYTES = float(_U65_SYSTEM.axi_port_bytes)
# Address space limits (architecture_features.py: axi_port_address_width 32 / 40 bits); Vela's
# Shared_Sram mode sets no arena limit, so the U55 SRAM defaults to the whole address space.
_U55_ADDRESS_SPACE = _U55_SYSTEM.address_space
_U65_ADDRESS_SPACE = _U65_SYSTEM.address_space
# vela.ini Memory_Mode.Dedicated_Sram_384KB: arena_cache_size.
_U65_SRAM_BYTES = _U65_SYSTEM.arena_cache_size


def _u55_regions(sram_size: int) -> tuple[MemoryRegion, ...]:
    # vela.ini System_Config.Ethos_U55_High_End_Embedded.
    sram = MemoryRegion("sram", sram_size, _U55_AXI_BYTES * 1.0, _U55_AXI_BYTES * 1.0,
                        read_latency=32, write_latency=32, burst=32, port="axi0")
    # OffChipFlash_clock_scale=0.125, burst 128, read latency 64, write latency 0 (the flash
    # is read-only in Shared_Sram mode; the write bandwidth only keeps MemoryRegion valid).
    flash = MemoryRegion("flash", _U55_ADDRESS_SPACE, _U55_AXI_BYTES * 0.125,
                         _U55_AXI_BYTES * 0.125, read_latency=64, write_latency=0, burst=128,
                         port="axi1")
    return sram, flash, _U55_DRAM


# Assumption: a U55 system with DRAM on AXI1 (shared with the flash), using the DRAM entries
# Vela gives its 500 MHz Ethos-U65 system (vela.ini System_Config.Ethos_U65_Mid_End:
# Dram_clock_scale=0.46875, burst 128, latency 500/250) on the U55's 8-byte port.
_U55_DRAM = MemoryRegion("dram", _U55_ADDRESS_SPACE, _U55_AXI_BYTES * 0.46875,
                         _U55_AXI_BYTES * 0.46875, read_latency=500, write_latency=250,
                         burst=128, port="axi1")


def _u65_regions(sram_size: int) -> tuple[MemoryRegion, ...]:
    # vela.ini System_Config.Ethos_U65_Client_Server (Vela's default for the U65).
    sram = MemoryRegion("sram", sram_size, _U65_AXI_BYTES * 1.0, _U65_AXI_BYTES * 1.0,
                        read_latency=32, write_latency=32, burst=32, port="axi0")
    dram = MemoryRegion("dram", _U65_ADDRESS_SPACE, _U65_AXI_BYTES * 0.75,
                        _U65_AXI_BYTES * 0.75, read_latency=500, write_latency=250,
                        burst=128, port="axi1")
    return sram, dram


def _n78_regions(name: str, sram_size: int | None) -> tuple[MemoryRegion, ...]:
    v = ETHOS_N_VARIANTS[name]
    # Internal SRAM: one slice per EMC, read by the engines directly. Its bandwidth is not
    # published; 16 bytes per cycle per EMC (the DMA width) keeps it off the critical path,
    # which is how the support library treats it (it costs DRAM traffic only).
    emcs = v.engines * v.emcs_per_engine
    sram = MemoryRegion("sram", v.sram_bytes if sram_size is None else sram_size,
                        16.0 * emcs, 16.0 * emcs, read_latency=0, write_latency=0, burst=16,
                        port="sram")
    # DRAM through the DMA: 16 bytes per cycle and 100 cycles per transfer
    # (support_library EstimationUtils.cpp: CalculateMetric).
    dram = MemoryRegion("dram", 1 << 40, DMA_BYTES_PER_CYCLE, DMA_BYTES_PER_CYCLE,
                        read_latency=PER_STRIPE_OVERHEAD_CYCLES,
                        write_latency=PER_STRIPE_OVERHEAD_CYCLES, burst=16, port="axi")
    return sram, dram


def clear_caches() -> None:
    """Forget the built devices, so the next get_device builds a fresh one (with fresh
    performance model caches)."""
    _build.cache_clear()


@lru_cache(maxsize=None)
def _build(name: str, io_region: str, sram_size: int | None) -> Device:
    acc = accelerator(name)
    if acc.vela_system is not None:
        if acc.family is Family.ETHOS_U55:
            regions = _u55_regions(_U55_ADDRESS_SPACE if sram_size is None else sram_size)
        else:
            regions = _u65_regions(_U65_SRAM_BYTES if sram_size is None else sram_size)
        weights = acc.vela_system.weights.value
        by_name = {r.name: r for r in regions}
        perf = EthosUPerfModel(name, PortTiming.of(by_name["sram"]),
                               PortTiming.of(by_name[weights]), block_policy=BlockPolicy.BEST)
        # The weight stream is read by the NPU over AXI1 wherever it lives, once per OFM
        # block (Vela: "Weight buffer = 0 bytes (None)" for unbuffered operations, their
        # weights read from flash/DRAM per block and absent from "SRAM used").
        # An LSTM's stream runs every step over its whole sequences, and an SVDF's over its
        # whole state, so each is a Plan alone.
        return Device(name, "ethos-u", perf, regions, fm_region="sram", weight_region=weights,
                      io_region=io_region, weights_read_in_place=True, sliced_staging=True,
                      weight_prefetch=True, solitary=frozenset({Op.LSTM, Op.SVDF}))
    regions = _n78_regions(name, sram_size)
    return Device(name, "ethos-n", EthosNPerfModel(name), regions, fm_region="sram",
                  weight_region="dram", io_region=io_region)


def get_device(name: str, *, io_region: str = "sram", sram_size: int | None = None) -> Device:
    """The Device called ``name`` (one of :data:`DEVICE_NAMES`).

    ``io_region`` is where the network's input and output live: ``"sram"`` (the default, as
    Vela places them) or ``"dram"`` (streamed by DMA, saving SRAM). ``sram_size`` overrides the
    size of the SRAM the feature-map budget applies to (bytes). Devices are immutable and
    cached, so repeated calls share their performance models' caches.
    """
    if not isinstance(name, str) or name.lower() not in DEVICE_NAMES:
        raise PlannerError(f"unknown device {name!r}; known devices: {', '.join(DEVICE_NAMES)}")
    if io_region not in IO_REGIONS:
        raise PlannerError(f"io_region must be one of {IO_REGIONS}, got {io_region!r}")
    if sram_size is not None:
        if isinstance(sram_size, bool) or not isinstance(sram_size, int) or sram_size < 0:
            raise PlannerError(f"sram_size must be a non-negative int (bytes), got {sram_size!r}")
    return _build(name.lower(), io_region, sram_size)
