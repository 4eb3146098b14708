"""A small, transparent cost model for planner tests (not a device model: the real ones live
in planner/perf). Cycles follow MACs and elements so that tests can reason about them."""
from __future__ import annotations

import math

from planner.device_model import Device
from planner.graph import Part
from planner.memory import MemoryRegion
from planner.perf.base import PerfModel


class SimplePerf(PerfModel):
    name = "simple"

    def __init__(self, macs_per_cycle: int = 128, micro_block=(1, 1, 1), overhead: int = 32):
        self.macs_per_cycle = macs_per_cycle
        self.micro_block = micro_block
        self.overhead = overhead

    def compute_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        elems = math.prod(out_shape)
        kernel = part.attr("kernel") or (1, 1)
        if part.kind == "conv2d":
            icg = part.inputs[1].shape[3]
            macs = elems * kernel[0] * kernel[1] * icg
        elif part.kind in ("depthwise_conv2d", "pool"):
            macs = elems * kernel[0] * kernel[1]
        elif part.kind == "fully_connected":
            macs = elems * part.inputs[0].shape[1]
        else:
            macs = elems
        return math.ceil(macs / self.macs_per_cycle) + math.ceil(elems / 8)

    def stripe_overhead_cycles(self, part: Part) -> int:
        return self.overhead

    def fill_drain_cycles(self, part: Part, out_shape: tuple[int, ...]) -> int:
        return 0

    def weight_fetches(self, part: Part, out_shape: tuple[int, ...]) -> int:
        return 1


def simple_device(io_region: str = "sram", **perf_kw) -> Device:
    regions = (
        MemoryRegion("sram", 1 << 30, 8, 8, 32, 32, 32),
        MemoryRegion("flash", 1 << 30, 1, 1, 64, 64, 128),
        MemoryRegion("dram", 1 << 30, 4, 4, 100, 100, 64),
    )
    return Device("simple", "test", SimplePerf(**perf_kw), regions, io_region=io_region)
