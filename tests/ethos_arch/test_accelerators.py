"""The accelerator registry: its Ethos-U facts are Vela 5.2's own (Vela's architecture
description is the oracle), a bad name is one clear error, and every list of configurations in
the project is the registry's."""
import contextlib
import io

import pytest
from ethosu.vela.api import NpuAccelerator
from ethosu.vela.architecture_features import Accelerator as VelaAccelerator
from ethosu.vela.architecture_features import ArchitectureFeatures, create_default_arch
from ethosu.vela.driver_actions import build_config_word
from ethosu.vela.tensor import MemArea, TensorPurpose
from hypothesis import given
from hypothesis import strategies as st

from ethos_arch.accelerators import (
    ACCELERATORS,
    DEFAULT_ACCELERATOR,
    EthosNCore,
    EthosUCore,
    Family,
    UnknownAcceleratorError,
    WeightMemory,
    accelerator,
    by_config_id,
    ethos_n_name,
    ethos_n_tops,
    ethos_n_variants,
    ethos_u_core,
    names,
)

ETHOS_U = [a for a in ACCELERATORS if isinstance(a.core, EthosUCore)]
ETHOS_N = [a for a in ACCELERATORS if isinstance(a.core, EthosNCore)]
#: Vela's memory areas as the planner names its regions.
_REGION = {MemArea.OffChipFlash: WeightMemory.FLASH, MemArea.Dram: WeightMemory.DRAM}


def _vela_arch(name: str) -> ArchitectureFeatures:
    with contextlib.redirect_stdout(io.StringIO()):   # Vela's note on its default system
        return create_default_arch(VelaAccelerator(name))


def _hwc(block) -> tuple[int, int, int]:
    return block.height, block.width, block.depth


# ------------------------------------------------------------------ against Vela's own facts

def test_the_ethos_u_configurations_are_vela_s():
    assert names(lambda a: a.backend_id == "ethos-u") == tuple(VelaAccelerator.member_list())
    assert [a.vela_name for a in ACCELERATORS if a.backend_id == "ethos-u"] == \
        [m.name for m in VelaAccelerator]


def test_the_streamed_configurations_are_those_of_vela_s_api():
    assert [a.vela_name for a in ACCELERATORS if a.streams] == list(NpuAccelerator.__members__)
    assert tuple(a.name for a in ETHOS_U) == names(lambda a: a.streams) == \
        tuple(a.value for a in VelaAccelerator.__members__.values()
              if a in ArchitectureFeatures.accelerator_configs)


@pytest.mark.parametrize("acc", ETHOS_U, ids=lambda a: a.name)
def test_ethos_u_core_matches_vela_s_architecture(acc):
    cfg = ArchitectureFeatures.accelerator_configs[VelaAccelerator(acc.name)]
    core = acc.core
    assert (core.macs, core.cores, core.shram_banks) == (cfg.macs, cfg.cores, cfg.shram_banks)
    assert core.ofm_ublock == _hwc(cfg.ofm_ublock)
    assert core.ifm_ublock == _hwc(cfg.ifm_ublock)
    assert core.shram_granules == tuple(cfg.shram_granules)
    arch = _vela_arch(acc.name)
    assert core.output_cycles == tuple(arch.output_cycles_per_elem)
    assert core.activation_cycles == tuple(arch.activation_cycles_per_elem)
    assert core.shram_bytes == arch.shram_size_bytes == acc.buffer_bytes
    assert core.shram_lut_address == arch.shram_lut_address
    assert core.LUT_SLOT_BYTES == arch.shram_lut_slot_size
    assert acc.macs == cfg.macs and acc.cores == arch.ncores


@pytest.mark.parametrize("acc", ETHOS_U, ids=lambda a: a.name)
def test_ethos_u_default_system_is_vela_s(acc):
    arch = _vela_arch(acc.name)
    system = acc.vela_system
    assert (system.system_config, system.memory_mode) == (arch.system_config, arch.memory_mode)
    assert acc.core_clock_hz == arch.core_clock
    assert system.address_space == arch.max_address_offset
    # Shared_Sram sets no arena: Vela's is then the whole address space
    assert (system.arena_cache_size or system.address_space) == arch.arena_cache_size
    # both default systems clock their SRAM at the core clock: one AXI word per cycle
    assert system.axi_port_bytes == arch.memory_bandwidths_per_cycle[MemArea.Sram]
    assert system.weights is _REGION[arch.tensor_storage_mem_area[TensorPurpose.Weights]]


@pytest.mark.parametrize("acc", ETHOS_U, ids=lambda a: a.name)
def test_config_id_is_the_word_vela_writes_in_the_driver_payload(acc):
    word = build_config_word(_vela_arch(acc.name))
    assert acc.config_id == (word >> 28, word & 0xF)
    assert by_config_id(*acc.config_id) is acc


@given(product=st.integers(0, 15), log2_macs=st.integers(0, 15))
def test_by_config_id_knows_exactly_the_streamed_configurations(product, log2_macs):
    found = by_config_id(product, log2_macs)
    ids = {a.config_id: a for a in ACCELERATORS if a.config_id is not None}
    assert found is ids.get((product, log2_macs))


def test_ethos_n_variants_give_arm_s_published_macs_and_names():
    assert [a.macs for a in ETHOS_N] == [512, 1024, 2048, 4096]
    # 2 ops per MAC at the 1 GHz the TOP/s figures assume: 1.024 TOP/s is "1 TOPS"
    assert [round(2 * a.macs * a.core_clock_hz / 1e12) for a in ETHOS_N] == \
        [a.tops for a in ETHOS_N] == list(ethos_n_tops())
    assert [a.name for a in ETHOS_N] == [ethos_n_name(v, t) for v in ethos_n_variants()
                                         for t in ethos_n_tops()]
    assert all(a.family is Family.ETHOS_N78 and a.backend_id == "ethos-n" for a in ETHOS_N)


def test_unmodelled_configurations_are_neither_planned_nor_streamed():
    u85 = [a for a in ACCELERATORS if a.family is Family.ETHOS_U85]
    assert [a.name for a in u85] == [m for m in VelaAccelerator.member_list() if "u85" in m]
    assert not any(a.planned or a.streams or a.config_id for a in u85)
    assert all(a.macs is None and a.buffer_bytes is None for a in u85)


def test_names_are_unique_and_start_with_their_family():
    assert len(set(names())) == len(ACCELERATORS)
    assert all(a.name.startswith(a.family.value + "-") for a in ACCELERATORS)


# ------------------------------------------------------------------------------ the lookup

def test_lookup_returns_the_entry():
    assert all(accelerator(a.name) is a for a in ACCELERATORS)
    assert DEFAULT_ACCELERATOR is accelerator("ethos-u55-128")


@pytest.mark.parametrize("bad", ["ethos-u55-100", "ETHOS-U55-128", "", None, 128])
def test_lookup_of_an_unknown_name_is_one_line_naming_every_configuration(bad):
    with pytest.raises(UnknownAcceleratorError) as err:
        accelerator(bad)
    text = str(err.value)
    assert "\n" not in text and repr(bad) in text
    assert text.endswith("known: " + ", ".join(names()))


@pytest.mark.parametrize("name", ["ethos-u85-256", "ethos-n78-1tops", "nope"])
def test_ethos_u_core_refuses_what_has_none(name):
    known = ", ".join(a.name for a in ETHOS_U)
    with pytest.raises(UnknownAcceleratorError, match=f"known: {known}$"):
        ethos_u_core(name)


# ------------------------------------------------- every list in the project is the registry's

def test_the_planner_s_lists_are_the_registry_s():
    from planner.devices import CORE_CLOCK_HZ, DEVICE_NAMES, ETHOS_N78, ETHOS_U55, ETHOS_U65
    from planner.perf import ethos_n, ethos_u_npu

    planned = names(lambda a: a.planned)
    assert DEVICE_NAMES == planned == ETHOS_U55 + ETHOS_U65 + ETHOS_N78
    assert CORE_CLOCK_HZ == {a.name: a.core_clock_hz for a in ACCELERATORS if a.planned}
    assert tuple(ethos_u_npu.ACCELERATORS) == tuple(a.name for a in ETHOS_U)
    for a in ETHOS_U:
        p = ethos_u_npu.ACCELERATORS[a.name]
        assert (p.macs, p.cores, p.ofm_ublock, p.ifm_ublock, p.shram_banks, p.shram_granules,
                p.output_cycles, p.activation_cycles) == \
            (a.core.macs, a.core.cores, a.core.ofm_ublock, a.core.ifm_ublock,
             a.core.shram_banks, a.core.shram_granules, a.core.output_cycles,
             a.core.activation_cycles)
    assert tuple(ethos_n.VARIANTS) == tuple(a.name for a in ETHOS_N)
    assert [v.macs for v in ethos_n.VARIANTS.values()] == [a.macs for a in ETHOS_N]


def test_the_planner_defaults_to_the_default_accelerator():
    import inspect

    from planner import __main__ as planner_cli
    from planner.api import plan

    assert inspect.signature(plan).parameters["device"].default == DEFAULT_ACCELERATOR.name
    args = planner_cli._parser().parse_args(["plan", "model.tflite"])
    assert args.device == DEFAULT_ACCELERATOR.name


def test_the_functional_model_s_list_is_the_registry_s():
    from ethosu_stream.accelerator import ACCELERATORS as MODELLED
    from ethosu_stream.accelerator import accelerator_info

    assert MODELLED == names(lambda a: a.streams)
    for a in ETHOS_U:
        info = accelerator_info(a.name)
        assert (info.cores, info.shram_bytes, info.lut_address, info.ofm_ublock_depth) == \
            (a.cores, a.buffer_bytes, a.core.shram_lut_address, a.core.ofm_ublock[2])
    with pytest.raises(ValueError, match="Ethos-U85"):
        accelerator_info("ethos-u85-256")


def test_the_tvm_ethos_backends_and_cli_read_the_registry():
    from tvm_ethos import cli
    from tvm_ethos.backends import ethos_n as backend_n
    from tvm_ethos.backends import ethos_u as backend_u
    from tvm_ethos.backends.ethos_u.stream_base import STREAM_ACCELERATORS, lut_address

    u, n = backend_u.EthosUBackend(), backend_n.EthosNBackend()
    schema = u.options_schema()["accelerator_config"]
    assert schema.allowed == backend_u.ACCELERATOR_CONFIGS == \
        names(lambda a: a.backend_id == "ethos-u")
    assert schema.default == DEFAULT_ACCELERATOR.name == u.planner_device_name({})
    for backend in (u, n):
        assert backend.planner_device_names() == \
            names(lambda a, b=backend: a.planned and a.backend_id == b.backend_id)
    assert STREAM_ACCELERATORS == names(lambda a: a.streams)
    assert [lut_address(a.name) for a in ETHOS_U] == [a.core.shram_lut_address for a in ETHOS_U]
    n_schema = n.options_schema()
    assert n_schema["variant"].allowed == ethos_n_variants()
    assert n_schema["tops"].allowed == ethos_n_tops()
    assert [n.planner_device_name({"variant": v, "tops": t}) for v in ethos_n_variants()
            for t in ethos_n_tops()] == [a.name for a in ETHOS_N]
    assert cli.parse_plan_target("ethos-u", {}) == [DEFAULT_ACCELERATOR.name]
    assert cli.parse_plan_target("ethos-n", {"ethos-n": {"tops": "1,8"}}) == \
        ["ethos-n78-1tops", "ethos-n78-8tops"]
    with pytest.raises(cli.CliError, match="'ethos-u85-256' has no planner model; choose from "
                       + ", ".join(a.name for a in ETHOS_U)):
        cli.parse_plan_target("ethos-u -accelerator_config=ethos-u85-256", {})
