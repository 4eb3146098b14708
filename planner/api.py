"""One call from a model (file or graph) to a planning result, used by the CLI and tvm_ethos."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from typing import Mapping

from ethos_arch.accelerators import DEFAULT_ACCELERATOR
from planner.budgets import SIZE_SOURCE, SMALLEST_SOURCE, resolve_budget
from planner.device_model import Device
from planner.devices import IO_REGIONS, get_device
from planner.errors import PlannerError
from planner.graph import PlannerGraph
from planner.io import load_graph as load_json
from planner.options import PlannerOptions
from planner.proposals import Proposal, ProposalSearch
from planner.size_choice import size_choice
from planner.sizes import parse_size as parse_size  # re-exported: the planner's public API
from planner.smallest_choice import smallest_proposal
from planner.tflite import load_tflite


def load_graph(source: str | PlannerGraph) -> PlannerGraph:
    """A PlannerGraph from a .tflite file, a .json planner graph, or a graph as is."""
    if isinstance(source, PlannerGraph):
        return source
    if not isinstance(source, (str, os.PathLike)):
        raise PlannerError(f"source must be a .tflite / .json path or a PlannerGraph, got "
                           f"{type(source).__name__}")
    path = os.fspath(source)
    if not os.path.exists(path):
        raise PlannerError(f"model file {path!r} does not exist")
    if path.endswith(".json"):
        return load_json(path)
    return load_tflite(path)


@dataclass(frozen=True)
class PlanResult:
    graph: PlannerGraph
    device: Device
    options: PlannerOptions
    budget: int | None
    budget_source: str
    frontier: list[tuple[int, int]]
    chosen: Proposal
    chosen_index: int
    plan_candidates: int

    def to_json(self) -> dict:
        return {
            "graph": self.graph.name, "device": self.device.name,
            "io_region": self.device.io_region, "budget_bytes": self.budget,
            "budget_source": self.budget_source,
            "options": {k: (list(v) if isinstance(v, tuple) else v)
                        for k, v in asdict(self.options).items()},
            "peak_memory_bytes": self.chosen.memory_bytes, "cycles": self.chosen.cycles,
            "estimated_stream_bytes": self.chosen.estimated_stream_bytes,
            "plans": [p.to_json() for p in self.chosen.plans],
            "frontier": [{"memory_bytes": m, "cycles": c} for m, c in self.frontier],
            "plan_candidates": self.plan_candidates,
        }


def plan(source: str | PlannerGraph, device: str | Device = DEFAULT_ACCELERATOR.name, *,
         budget: int | str | None = "system", io_region: str | None = None,
         options: PlannerOptions | Mapping | None = None) -> PlanResult:
    """Plan a model: the whole frontier and the fastest Proposal within ``budget``.

    ``budget``: a size (bytes, ``"300KiB"``); ``"system"`` (the default) the SRAM of the
    device's system configuration, as Vela plans (planner.budgets); ``None`` or ``"none"``
    the fastest Proposal whatever its memory.

    ``io_region`` (``"sram"`` by default) applies to a device given by name; a Device object
    carries its own. ``options`` may be a PlannerOptions or a dict of its fields. Every
    argument is checked before any work: a bad one is a PlannerError naming it.
    """
    if io_region is not None and io_region not in IO_REGIONS:
        raise PlannerError(f"io_region must be one of {IO_REGIONS}, got {io_region!r}")
    if isinstance(device, str):
        device = get_device(device, io_region=io_region or "sram")
    elif not isinstance(device, Device):
        raise PlannerError(f"device must be a device name or a planner Device, got "
                           f"{type(device).__name__}")
    elif io_region is not None and io_region != device.io_region:
        raise PlannerError(f"io_region={io_region!r} conflicts with the Device passed, whose "
                           f"io_region is {device.io_region!r}; pass the device by name or "
                           "leave io_region out")
    if options is None:
        options = PlannerOptions()
    elif isinstance(options, Mapping):
        options = PlannerOptions.from_mapping(options)
    elif not isinstance(options, PlannerOptions):
        raise PlannerError(f"options must be a PlannerOptions or a dict of its fields, got "
                           f"{type(options).__name__}")
    budget_bytes, whence = resolve_budget(budget, device)
    graph = load_graph(source)
    search = ProposalSearch(graph, device, options)
    chosen = select(search, budget_bytes, whence)
    front = search.frontier
    index = front.index((chosen.memory_bytes, chosen.cycles))
    return PlanResult(graph, device, options, budget_bytes, whence, front, chosen, index,
                      search.plan_candidates)


def select(search: ProposalSearch, budget: int | None, whence: str) -> Proposal:
    """``search.select(budget)``; where the budget was not given, the error says whose it is.
    A ``smallest`` budget (``whence``) selects ``smallest_proposal``, a ``size`` budget
    ``size_choice``'s; either must fit ``budget`` where that is given (the size of a memory
    pool)."""
    if whence in (SMALLEST_SOURCE, SIZE_SOURCE):
        smallest = search.frontier[0][0]
        if budget is not None and smallest > budget:
            raise PlannerError(f"the smallest plan needs {smallest} bytes, more than the "
                               f"{budget} bytes of the memory it must fit")
        if whence == SIZE_SOURCE:
            return size_choice(search, budget)[0]
        return smallest_proposal(search, budget)
    try:
        return search.select(budget)
    except PlannerError as err:
        if whence == "given" or budget is None:
            raise
        raise PlannerError(f"{err} (the budget is {whence}; give a budget to set another)"
                           ) from None
