"""The memory regions a stream addresses, with bounds checks and a record of what it touched.

Region numbers are base-pointer indices: Vela puts the weights ("flash", read only) in 0,
the scratch arena (feature maps, the network's input and output included) in 1 and the fast
scratch in 2; ``SHRAM_REGION`` is the NPU's internal buffer, the target of LUT copies.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import StreamError

SHRAM_REGION = (1 << 8) | 3


@dataclass
class Access:
    """Bytes read and written in one region, and the highest address touched (exclusive)."""

    read: int = 0
    written: int = 0
    high_water: int = 0


class Memory:
    """Named byte regions. Reads and writes go through index arrays so a whole feature map
    moves in one numpy call; every access is bounds-checked and counted."""

    def __init__(self, regions: dict[int, np.ndarray | bytes | bytearray | int]):
        self.regions: dict[int, np.ndarray] = {}
        for k, v in regions.items():
            if isinstance(v, int):
                self.regions[int(k)] = np.zeros(v, np.uint8)
            else:
                self.regions[int(k)] = np.frombuffer(bytes(v), np.uint8).copy() \
                    if not isinstance(v, np.ndarray) else v.astype(np.uint8).ravel().copy()
        self.access: dict[int, Access] = {k: Access() for k in self.regions}

    def _region(self, region: int) -> np.ndarray:
        try:
            return self.regions[region]
        except KeyError:
            raise StreamError(f"region {region} is not mapped (mapped: "
                              f"{sorted(self.regions)}); give the memory a buffer for it") from None

    def region_size(self, region: int) -> int:
        return self._region(region).size

    def _check(self, region: int, addr: np.ndarray, nbytes: int, what: str) -> np.ndarray:
        mem = self._region(region)
        if addr.size == 0:
            return mem
        lo, hi = int(addr.min()), int(addr.max()) + nbytes
        if lo < 0 or hi > mem.size:
            raise StreamError(f"{what} reaches bytes [{lo}, {hi}) of region {region}, past its "
                              f"end ({mem.size} bytes)")
        acc = self.access[region]
        acc.high_water = max(acc.high_water, hi)
        return mem

    def read(
        self, region: int, addr: np.ndarray, dtype: np.dtype, what: str = "a read"
    ) -> np.ndarray:
        """Elements of ``dtype`` (little endian) starting at each byte address in ``addr``."""
        dtype = np.dtype(dtype)
        addr = np.asarray(addr, np.int64)
        mem = self._check(region, addr, dtype.itemsize, what)
        self.access[region].read += addr.size * dtype.itemsize
        idx = addr[..., None] + np.arange(dtype.itemsize)
        return mem[idx].copy().view(dtype.newbyteorder("<"))[..., 0].astype(dtype)

    def write(
        self, region: int, addr: np.ndarray, values: np.ndarray, what: str = "a write"
    ) -> None:
        values = np.asarray(values)
        addr = np.asarray(addr, np.int64)
        mem = self._check(region, addr, values.dtype.itemsize, what)
        self.access[region].written += addr.size * values.dtype.itemsize
        raw = np.ascontiguousarray(values.astype(values.dtype.newbyteorder("<"))).view(np.uint8)
        idx = addr[..., None] + np.arange(values.dtype.itemsize)
        mem[idx.ravel()] = raw.reshape(-1)

    def read_bytes(self, region: int, start: int, length: int, what: str = "a read") -> np.ndarray:
        self._check(region, np.array([start, start + length - 1]), 1, what)
        return self.read(region, np.arange(start, start + length), np.uint8, what)

    def write_bytes(self, region: int, start: int, data: np.ndarray, what: str = "a write") -> None:
        data = np.asarray(data, np.uint8)
        self.write(region, np.arange(start, start + data.size), data, what)
