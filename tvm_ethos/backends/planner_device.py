"""The planner Device an NPU target is planned for: the named device, the user's memory pools
applied. Shared by every :class:`~tvm_ethos.backends.base.NpuBackend`, which names the device
and its SRAM size; TVM-free, so the CLI builds devices before TVM is imported."""
from __future__ import annotations

import dataclasses
from typing import Mapping

from planner.device_model import Device
from planner.devices import get_device
from planner.errors import PlannerError
from planner.perf.ethos_u import EthosUPerfModel, PortTiming
from tvm_ethos.errors import OptionError


def planning_device(name: str, *, io_region: str = "sram", sram_size: int | None = None) -> Device:
    """The planner Device the compile path plans for: ``get_device``'s, without weights
    prefetched across Plans (planner: ``PlanGenerator.prefetch_cost``), which have no TensorIR
    form yet (a weight copy is realized in the Plan that reads it, ``schedule.py``)."""
    return dataclasses.replace(get_device(name, io_region=io_region, sram_size=sram_size),
                               weight_prefetch=False)


def planner_device_for(name: str, sram_size: int | None,
                       pools: Mapping[str, Mapping]) -> Device:
    """:func:`planning_device` ``name`` with each memory pool's fields (``{memory: {field:
    value}}``) replacing its region's; an Ethos-U device's performance model then times its
    ports from the new regions."""
    base = planning_device(name, sram_size=sram_size)
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
                               PortTiming.of(regions[base.weight_region]))
    return Device(base.name, base.family, perf, new, base.fm_region, base.weight_region,
                  base.io_region)
