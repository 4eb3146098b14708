"""One call from a model (file or graph) to a planning result, used by the CLI and tvm_ethos."""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass

from planner.device import Device
from planner.errors import PlannerError
from planner.graph import PlannerGraph
from planner.options import PlannerOptions
from planner.proposals import Proposal, ProposalSearch

_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000 ** 2, "kib": 1024, "mib": 1024 ** 2,
          "k": 1024, "m": 1024 ** 2, "gib": 1024 ** 3, "gb": 1000 ** 3}


def parse_size(text: str | int) -> int:
    """'300KiB', '1.5MiB', '250kB', '4096' -> bytes (KiB = 1024, kB = 1000)."""
    if isinstance(text, int):
        if text < 0:
            raise PlannerError(f"a memory size must be >= 0, got {text}")
        return text
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    if not m or m.group(2).lower() not in _UNITS:
        raise PlannerError(f"cannot read memory size {text!r}; write e.g. 300KiB, 1MiB, "
                           "250kB or a number of bytes")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def load_graph(source: str | PlannerGraph) -> PlannerGraph:
    """A PlannerGraph from a .tflite file, a .json planner graph, or a graph as is."""
    if isinstance(source, PlannerGraph):
        return source
    path = str(source)
    if not os.path.exists(path):
        raise PlannerError(f"model file {path!r} does not exist")
    if path.endswith(".json"):
        from planner.io import load_graph as load_json
        return load_json(path)
    from planner.tflite import load_tflite
    return load_tflite(path)


@dataclass(frozen=True)
class PlanResult:
    graph: PlannerGraph
    device: Device
    options: PlannerOptions
    budget: int | None
    frontier: list[tuple[int, int]]
    chosen: Proposal
    chosen_index: int
    plan_candidates: int

    def to_json(self) -> dict:
        return {
            "graph": self.graph.name, "device": self.device.name,
            "io_region": self.device.io_region, "budget_bytes": self.budget,
            "options": {k: (list(v) if isinstance(v, tuple) else v)
                        for k, v in asdict(self.options).items()},
            "peak_memory_bytes": self.chosen.memory_bytes, "cycles": self.chosen.cycles,
            "plans": [p.to_json() for p in self.chosen.plans],
            "frontier": [{"memory_bytes": m, "cycles": c} for m, c in self.frontier],
            "plan_candidates": self.plan_candidates,
        }


def plan(source: str | PlannerGraph, device: str | Device = "ethos-u55-128", *,
         budget: int | str | None = None, io_region: str = "sram",
         options: PlannerOptions | None = None) -> PlanResult:
    """Plan a model: the whole frontier and the fastest Proposal within ``budget``."""
    graph = load_graph(source)
    if isinstance(device, str):
        from planner.devices import get_device
        device = get_device(device, io_region=io_region)
    options = options or PlannerOptions()
    budget_bytes = None if budget is None else parse_size(budget)
    search = ProposalSearch(graph, device, options)
    chosen = search.select(budget_bytes)
    front = search.frontier
    index = front.index((chosen.memory_bytes, chosen.cycles))
    return PlanResult(graph, device, options, budget_bytes, front, chosen, index,
                      search.plan_candidates)
