"""The planner Device an NPU target is planned for: the named device, the user's memory pools
applied. Shared by every :class:`~tvm_ethos.backends.base.NpuBackend`, which names the device
and its SRAM size; TVM-free, so the CLI builds devices before TVM is imported."""
from __future__ import annotations

import dataclasses
from typing import AbstractSet, Mapping

from ethos_arch.ops import Op
from planner.device_model import Device
from planner.devices import ETHOS_U65, get_device
from planner.errors import PlannerError
from planner.perf.ethos_u import EthosUPerfModel, PortTiming
from tvm_ethos.errors import OptionError


def network_io_region(name: str) -> str:
    """Where the network's inputs and outputs live on device ``name``, as Vela 5.2 places them
    by default: an Ethos-U65's Dedicated_Sram mode puts TFLite Micro's arena, and so every
    input and output, in DRAM (its SRAM is the fast scratch cache); elsewhere the arena is
    the SRAM."""
    return "dram" if name in ETHOS_U65 else "sram"


def planning_device(name: str, *, io_region: str | None = None,
                    sram_size: int | None = None,
                    solitary: AbstractSet[Op] = frozenset(),
                    whole_output: AbstractSet[Op] = frozenset()) -> Device:
    """The planner Device the compile path plans for: ``get_device``'s, network inputs and
    outputs in ``io_region`` (default :func:`network_io_region`) and, on an Ethos-U, read and
    written there in place, as its command stream does; without weights prefetched across
    Plans (planner: ``PlanGenerator.prefetch_cost``), which have no TensorIR form yet (a
    weight copy is realized in the Plan that reads it, ``schedule.py``). ``solitary``: the
    operators the NPU's code generator runs only in Plans of their own
    (``NpuBackend.planner_solitary_ops``); ``whole_output``: those it computes only whole
    (``NpuBackend.planner_whole_output_ops``)."""
    io = network_io_region(name) if io_region is None else io_region
    device = get_device(name, io_region=io, sram_size=sram_size)
    return dataclasses.replace(device, weight_prefetch=False,
                               io_read_in_place=device.family == "ethos-u",
                               solitary=frozenset(solitary),
                               whole_output=frozenset(whole_output))


def planner_device_for(name: str, sram_size: int | None, pools: Mapping[str, Mapping],
                       solitary: AbstractSet[Op] = frozenset(),
                       whole_output: AbstractSet[Op] = frozenset()) -> Device:
    """:func:`planning_device` ``name`` (``solitary``, ``whole_output`` as there) with each
    memory pool's fields (``{memory: {field: value}}``) replacing its region's; an Ethos-U
    device's performance model then times its ports from the new regions."""
    base = planning_device(name, sram_size=sram_size, solitary=solitary,
                           whole_output=whole_output)
    if not pools:
        return base
    regions = {r.name: r for r in base.regions}
    for pname, fields in pools.items():
        if pname not in regions:
            raise OptionError(f"memory_pools: {name} has no memory {pname!r}; its memories are "
                              f"{', '.join(regions)} (feature maps in {base.fm_region}, weights "
                              f"in {base.weight_region})")
        try:
            regions[pname] = dataclasses.replace(regions[pname], **fields)
        except PlannerError as err:
            raise OptionError(f"memory_pools: {err}") from None
    new = tuple(regions[r.name] for r in base.regions)
    perf = base.perf
    if isinstance(perf, EthosUPerfModel):
        perf = EthosUPerfModel(name, PortTiming.of(regions[base.fm_region]),
                               PortTiming.of(regions[base.weight_region]),
                               block_policy=perf.block_policy)
    # every other field (weights read in place, the solitary operators, ...) is the base's
    return dataclasses.replace(base, perf=perf, regions=new)
