"""The memory regions a stream addresses, with bounds checks and a record of what it touched.

Region numbers are base-pointer indices: Vela puts the weights ("flash", read only) in 0,
the scratch arena (feature maps, the network's input and output included) in 1 and the fast
scratch in 2; ``SHRAM_REGION`` is the NPU's internal buffer, the target of LUT copies.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

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
    """Named byte regions. Reads and writes go through index arrays or strided views so a
    whole feature map moves in one numpy call; every access is bounds-checked and counted.

    ``dry`` (set by ``run_stream(..., compute=False)``): the box and byte accessors check and
    count as usual but move no data (reads return ``None``), so a run records what it touches
    without computing it. Values derived from a byte range (decoded weights, scales) can be
    memoised with :meth:`memo`; a write to the range forgets them.

    ``spans`` (None unless a caller sets it to ``{}``): the [lo, hi) byte span of every
    write, by region, for a caller that must know which bytes a stream leaves intact (an
    input read again after its operator)."""

    def __init__(self, regions: dict[int, np.ndarray | bytes | bytearray | int]):
        self.regions: dict[int, np.ndarray] = {}
        for k, v in regions.items():
            if isinstance(v, int):
                self.regions[int(k)] = np.zeros(v, np.uint8)
            else:
                self.regions[int(k)] = np.frombuffer(bytes(v), np.uint8).copy() \
                    if not isinstance(v, np.ndarray) else v.astype(np.uint8).ravel().copy()
        self.access: dict[int, Access] = {k: Access() for k in self.regions}
        self.dry = False
        self.spans: dict[int, list[tuple[int, int]]] | None = None
        self._memo: dict[int, dict[tuple, tuple[int, int, object]]] = {}

    def _region(self, region: int) -> np.ndarray:
        try:
            return self.regions[region]
        except KeyError:
            raise StreamError(f"region {region} is not mapped (mapped: "
                              f"{sorted(self.regions)}); give the memory a buffer for it") from None

    def region_size(self, region: int) -> int:
        return self._region(region).size

    def _span(self, region: int, lo: int, hi: int, what: str) -> np.ndarray:
        """Checks that bytes [lo, hi) lie in the region and raises the high-water mark."""
        mem = self._region(region)
        if lo < 0 or hi > mem.size:
            raise StreamError(f"{what} reaches bytes [{lo}, {hi}) of region {region}, past its "
                              f"end ({mem.size} bytes)")
        acc = self.access[region]
        if hi > acc.high_water:
            acc.high_water = hi
        return mem

    def _check(self, region: int, addr: np.ndarray, nbytes: int, what: str) -> np.ndarray:
        if addr.size == 0:
            return self._region(region)
        return self._span(region, int(addr.min()), int(addr.max()) + nbytes, what)

    def _forget(self, region: int, lo: int, hi: int) -> None:
        """Drops memoised values derived from bytes that [lo, hi) overwrites."""
        memo = self._memo.get(region)
        if memo:
            for key in [k for k, (a, b, _) in memo.items() if a < hi and lo < b]:
                del memo[key]

    def _span_written(self, region: int, lo: int, hi: int) -> None:
        if self.spans is not None:
            self.spans.setdefault(region, []).append((lo, hi))

    def memo(self, region: int, start: int, length: int, key: tuple,
             make: Callable[[], object]) -> object:
        """``make()``, remembered under ``key`` until bytes [start, start + length) of
        ``region`` are written (the caller still reads them, for the record)."""
        memo = self._memo.setdefault(region, {})
        hit = memo.get(key)
        if hit is not None:
            return hit[2]
        value = make()
        memo[key] = (start, start + length, value)
        return value

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
        if addr.size:
            self._forget(region, int(addr.min()), int(addr.max()) + values.dtype.itemsize)
            self._span_written(region, int(addr.min()),
                               int(addr.max()) + values.dtype.itemsize)
        raw = np.ascontiguousarray(values.astype(values.dtype.newbyteorder("<"))).view(np.uint8)
        idx = addr[..., None] + np.arange(values.dtype.itemsize)
        mem[idx.ravel()] = raw.reshape(-1)

    def read_bytes(self, region: int, start: int, length: int,
                   what: str = "a read") -> np.ndarray | None:
        """``length`` bytes from ``start`` (``None`` when dry)."""
        last = start + length - 1
        mem = self._span(region, min(start, last), max(start, last) + 1, what)
        if length <= 0:
            return None if self.dry else np.zeros(0, np.uint8)
        self.access[region].read += length
        return None if self.dry else mem[start:start + length].copy()

    def write_bytes(self, region: int, start: int, data: np.ndarray | None, what: str = "a write",
                    length: int | None = None) -> None:
        """``data`` at ``start``; dry, ``data`` may be ``None`` with its ``length``."""
        n = int(length if data is None else np.asarray(data).size)
        if n == 0:
            return
        mem = self._span(region, start, start + n, what)
        self.access[region].written += n
        self._forget(region, start, start + n)
        self._span_written(region, start, start + n)
        if not self.dry:
            mem[start:start + n] = np.asarray(data, np.uint8).ravel()

    def read_box(self, fm, h: int, w: int, c: int, what: str) -> np.ndarray | None:
        """The (h, w, c) box of feature map ``fm`` from its origin as int64 (``None`` when
        dry): the same bytes, checks and counts as ``read(fm.region, fm.grid(h, w, c))``,
        gathered through one strided view per tile."""
        parts = fm.tile_views(h, w, c)
        esize = fm.dtype.itemsize
        mem = self._span(fm.region, min(p.lo for p in parts), max(p.hi for p in parts), what)
        self.access[fm.region].read += h * w * c * esize
        if self.dry:
            return None
        out = np.empty((h, w, c), np.int64)
        for p in parts:
            out[p.ys:p.ye, p.xs:p.xe] = p.view(mem, fm.dtype)
        return out

    def write_box(self, fm, values: np.ndarray | None, shape: tuple[int, int, int],
                  what: str) -> None:
        """Stores ``values`` (already in ``fm.dtype``'s range) as the ``shape`` box of ``fm``,
        as ``write(fm.region, fm.grid(*shape), values)`` does; where the box's bytes could
        overlap themselves (strides smaller than the box), through that index path."""
        h, w, c = shape
        parts = fm.tile_views(h, w, c)
        esize = fm.dtype.itemsize
        lo, hi = min(p.lo for p in parts), max(p.hi for p in parts)
        if not self.dry and not _disjoint(parts):
            self.write(fm.region, fm.grid(h, w, c), np.asarray(values).astype(fm.dtype), what)
            return
        mem = self._span(fm.region, lo, hi, what)
        self.access[fm.region].written += h * w * c * esize
        self._forget(fm.region, lo, hi)
        self._span_written(fm.region, lo, hi)
        if self.dry:
            return
        values = np.asarray(values).astype(fm.dtype, copy=False)
        for p in parts:
            p.assign(mem, fm.dtype, values[p.ys:p.ye, p.xs:p.xe])


def _disjoint(parts) -> bool:
    """Whether no two elements of the tiles share a byte."""
    if not all(p.self_disjoint for p in parts):
        return False
    spans = sorted((p.lo, p.hi) for p in parts)
    return all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))
