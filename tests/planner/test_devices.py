"""Tests of the device registry (planner/devices.py)."""
from __future__ import annotations

import importlib.util

import pytest

from planner.device_model import Device
from planner.devices import CORE_CLOCK_HZ, DEVICE_NAMES, get_device
from planner.errors import PlannerError
from planner.perf.ethos_n import EthosNPerfModel
from planner.perf.ethos_u import EthosUPerfModel, PortTiming

U55 = ("ethos-u55-32", "ethos-u55-64", "ethos-u55-128", "ethos-u55-256")
U65 = ("ethos-u65-256", "ethos-u65-512")
N78 = ("ethos-n78-1tops", "ethos-n78-2tops", "ethos-n78-4tops", "ethos-n78-8tops")


def test_device_names():
    assert DEVICE_NAMES == U55 + U65 + N78
    assert set(CORE_CLOCK_HZ) == set(DEVICE_NAMES)


@pytest.mark.parametrize("name", DEVICE_NAMES)
def test_every_device_builds(name):
    d = get_device(name)
    assert isinstance(d, Device) and d.name == name
    assert d.perf.name == name
    assert d.fm_region == "sram" and d.io_region == "sram"
    names = {r.name for r in d.regions}
    assert {"sram", "dram"} <= names
    assert d.weight_region in names
    if name.startswith("ethos-n"):
        assert d.family == "ethos-n" and isinstance(d.perf, EthosNPerfModel)
        assert d.perf.micro_block == (8, 8, 16)
    else:
        assert d.family == "ethos-u" and isinstance(d.perf, EthosUPerfModel)
        assert d.perf.micro_block == d.perf.accelerator.ofm_ublock


def test_micro_blocks_follow_the_accelerator():
    assert [get_device(n).perf.micro_block for n in U55 + U65] == [
        (1, 1, 4), (1, 1, 8), (1, 2, 8), (2, 2, 8), (2, 2, 8), (2, 2, 8)]


def test_ethos_u55_memories_are_vela_high_end_embedded():
    """vela.ini Ethos_U55_High_End_Embedded, Shared_Sram: 8-byte AXI ports; SRAM at clock
    scale 1.0 (latency 32, burst 32), weights in off-chip flash at 0.125 (latency 64,
    burst 128) on the other port."""
    d = get_device("ethos-u55-128")
    sram, flash, dram = d.region("sram"), d.region("flash"), d.region("dram")
    assert (sram.read_bytes_per_cycle, sram.write_bytes_per_cycle) == (8.0, 8.0)
    assert (sram.read_latency, sram.write_latency, sram.burst) == (32, 32, 32)
    assert flash.read_bytes_per_cycle == 1.0
    assert (flash.read_latency, flash.burst) == (64, 128)
    assert d.weight_region == "flash"
    assert flash.port_name == dram.port_name != sram.port_name
    assert sram.size == 1 << 32  # Shared_Sram sets no arena limit
    assert d.perf.fm_timing == PortTiming.of(sram)
    assert d.perf.const_timing.read_latency == 64
    assert CORE_CLOCK_HZ["ethos-u55-128"] == 500e6


def test_ethos_u65_memories_are_vela_default():
    """Vela's U65 default: Ethos_U65_Client_Server with Dedicated_Sram_384KB: 16-byte AXI;
    a 384 KiB SRAM; weights in DRAM at clock scale 0.75 (latency 500/250, burst 128)."""
    d = get_device("ethos-u65-512")
    sram, dram = d.region("sram"), d.region("dram")
    assert sram.size == 384 * 1024
    assert sram.read_bytes_per_cycle == 16.0
    assert (dram.read_bytes_per_cycle, dram.read_latency, dram.write_latency, dram.burst) == \
        (12.0, 500, 250, 128)
    assert d.weight_region == "dram"
    assert "flash" not in {r.name for r in d.regions}
    assert d.perf.const_timing.read_latency == 500
    assert CORE_CLOCK_HZ["ethos-u65-512"] == 1e9


@pytest.mark.skipif(importlib.util.find_spec("ethosu.vela") is None,
                    reason="Vela (ethos-u-vela) is not installed: pip install '.[vela]'")
@pytest.mark.parametrize("name", ["ethos-u55-64", "ethos-u65-256"])
def test_memories_match_vela_architecture(name, capsys):
    """The same numbers as Vela's own ArchitectureFeatures for its default configuration."""
    from ethosu.vela.architecture_features import Accelerator, create_default_arch
    from ethosu.vela.tensor import BandwidthDirection, MemArea

    arch = create_default_arch(Accelerator(name))
    capsys.readouterr()  # Vela warns that it uses defaults
    d = get_device(name)
    assert CORE_CLOCK_HZ[name] == arch.core_clock
    areas = {"sram": MemArea.Sram, "flash": MemArea.OffChipFlash, "dram": MemArea.Dram}
    used = {arch.feature_map_storage_mem_area, arch.permanent_storage_mem_area,
            arch.fast_storage_mem_area}
    for region in d.regions:
        area = areas[region.name]
        if area not in used:
            continue  # e.g. the U55's DRAM, which Vela's default system lacks
        assert region.read_bytes_per_cycle == arch.memory_bandwidths_per_cycle[area]
        assert region.read_latency == arch.memory_latency[area][BandwidthDirection.Read]
        assert region.burst == arch.memory_burst_length[area]
    assert areas[d.weight_region] == arch.permanent_storage_mem_area
    if name in U65:
        assert d.region("sram").size == arch.arena_cache_size


def test_ethos_n_memories():
    sizes = [get_device(n).region("sram").size for n in N78]
    assert sizes == [448 * 1024, 768 * 1024, 1024 * 1024, 2048 * 1024]
    d = get_device("ethos-n78-2tops")
    assert d.weight_region == "dram"
    assert d.region("dram").read_bytes_per_cycle == 16.0


def test_io_region():
    d = get_device("ethos-u55-128", io_region="dram")
    assert d.io_region == "dram" and d.fm_region == "sram"
    assert get_device("ethos-n78-1tops", io_region="dram").io_region == "dram"
    with pytest.raises(PlannerError) as err:
        get_device("ethos-u55-128", io_region="flash")
    assert "'sram'" in str(err.value) and "'dram'" in str(err.value)


def test_unknown_device_lists_the_known_ones():
    with pytest.raises(PlannerError) as err:
        get_device("ethos-u55-512")
    for name in DEVICE_NAMES:
        assert name in str(err.value)
    with pytest.raises(PlannerError):
        get_device(None)  # type: ignore[arg-type]


def test_sram_size_override():
    assert get_device("ethos-u55-256", sram_size=256 * 1024).region("sram").size == 262144
    assert get_device("ethos-u65-256", sram_size=0).region("sram").size == 0
    assert get_device("ethos-n78-8tops", sram_size=1 << 20).region("sram").size == 1 << 20
    for bad in (-1, 1.5, True, "1k"):
        with pytest.raises(PlannerError, match="sram_size"):
            get_device("ethos-u55-256", sram_size=bad)


def test_devices_are_cached_and_immutable():
    assert get_device("ethos-u55-128") is get_device("ethos-u55-128")
    assert get_device("ETHOS-U55-128") is get_device("ethos-u55-128")
    assert get_device("ethos-u55-128", io_region="dram") is not get_device("ethos-u55-128")
    with pytest.raises(AttributeError):
        get_device("ethos-u55-128").name = "x"  # type: ignore[misc]
