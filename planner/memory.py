"""Memory regions, buffer modes and where each tensor of a Plan lives."""
from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from planner.errors import PlannerError


class BufferMode(str, Enum):
    """How an intermediate tensor of a cascade is held between stripes.

    RECOMPUTE keeps only the region the consumer needs for one of its stripes; overlapping
    regions are computed again. ROLLING keeps a ring of rows along the innermost striped axis,
    so each row is computed once at the cost of a slightly larger buffer.
    """
    RECOMPUTE = "recompute"
    ROLLING = "rolling"


@dataclass(frozen=True)
class MemoryRegion:
    """A memory the NPU reaches over one port: size, bandwidth, latency, burst length.

    Bandwidths are bytes per NPU cycle; latencies are cycles per transfer; ``burst`` is the
    burst length in bytes (transfers are rounded up to it, as in Vela's model).
    """
    name: str
    size: int
    read_bytes_per_cycle: float
    write_bytes_per_cycle: float
    read_latency: int = 0
    write_latency: int = 0
    burst: int = 1
    port: str = ""  # regions on the same port share its bandwidth; "" means its own port

    def __post_init__(self) -> None:
        if self.size < 0:
            raise PlannerError(f"memory region {self.name!r}: size must be >= 0, got {self.size}")
        if self.read_bytes_per_cycle <= 0 or self.write_bytes_per_cycle <= 0:
            raise PlannerError(f"memory region {self.name!r}: bandwidths must be positive")
        if self.burst < 1:
            raise PlannerError(f"memory region {self.name!r}: burst must be >= 1")

    @property
    def port_name(self) -> str:
        return self.port or self.name

    def _bursted(self, nbytes: int, rows: int) -> int:
        if nbytes <= 0:
            return 0
        rows = max(1, rows)
        per_row = math.ceil(nbytes / rows)
        return rows * math.ceil(per_row / self.burst) * self.burst

    def read_cycles(self, nbytes: int, rows: int = 1) -> int:
        """Cycles to read ``nbytes`` laid out as ``rows`` contiguous runs."""
        if nbytes <= 0:
            return 0
        return self.read_latency + math.ceil(self._bursted(nbytes, rows) /
                                             self.read_bytes_per_cycle)

    def write_cycles(self, nbytes: int, rows: int = 1) -> int:
        if nbytes <= 0:
            return 0
        return self.write_latency + math.ceil(self._bursted(nbytes, rows) /
                                              self.write_bytes_per_cycle)


@dataclass(frozen=True)
class TensorConfig:
    """Where one tensor of a Plan lives and how it is buffered.

    Invariants: ``buffer_shape`` has the tensor's rank and no axis larger than the tensor's.
    ``home_region`` holds the whole tensor (or nothing, for a cascade's intermediate, whose
    home is the ``copy_region`` buffer alone); ``copy_region`` is where stripes are staged for
    the NPU when it differs from home (DMA copies, double buffered when ``double_buffer``).
    ``buffer_bytes`` is what this tensor occupies in the copy (or home) region while its Plan
    runs.
    """
    tensor: str
    home_region: str
    copy_region: str
    buffer_mode: BufferMode
    buffer_shape: tuple[int, ...]
    buffer_bytes: int
    double_buffer: bool = False

    def to_json(self) -> dict:
        return {
            "tensor": self.tensor, "home_region": self.home_region,
            "copy_region": self.copy_region, "buffer_mode": self.buffer_mode.value,
            "buffer_shape": list(self.buffer_shape), "buffer_bytes": self.buffer_bytes,
            "double_buffer": self.double_buffer,
        }
