"""Memory allocators for tensors shared between backends (Arm NN's fallback memory allocators).

Why: at a fallback edge the producer and the consumer both work on one buffer instead of
copying, so the buffer must satisfy both sides - base-address alignment and size padding - and
be of a kind both can import: plain host memory (:class:`MallocAllocator`), a memfd that another
process or driver can map (:class:`MemfdAllocator`), or a dma-buf, the only kind Arm's Ethos-N
driver imports (:class:`DmaBufAllocator`).

Every allocation is tracked by its allocator: ``live()`` says how many blocks and bytes are
still owned, so tests can prove a network's unload leaves nothing behind. ``free()`` is
idempotent. Memory is exposed as numpy views; a view keeps its memory mapped (Python's buffer
protocol pins it), so freeing only ends *our* ownership and can never leave a dangling view.
The allocator counts the block as freed at once; the pages go when the last view goes.

Allocation is expensive (a memfd's first touch costs in proportion to its size; figures in
rfcs/0003 section 3, measured by benchmarks/zero_copy.py): allocate when a network is loaded,
never per inference.
"""
from __future__ import annotations

import enum
import fcntl
import math
import mmap
import os
import struct
import threading
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

from tvm_ethos.errors import TvmEthosError

#: TVM's own tensor alignment (``from_dlpack`` requires 64 B): a safe default for host memory.
DEFAULT_ALIGNMENT = 64
PAGE_SIZE = mmap.PAGESIZE

# dma-heap / udmabuf / dma-buf ioctls (linux/dma-heap.h, linux/udmabuf.h, linux/dma-buf.h).
DMA_HEAP_IOCTL_ALLOC = 0xC0184800  # _IOWR('H', 0, struct dma_heap_allocation_data)
DMA_HEAP_ALLOC_FMT = "=QIIQ"  # len, fd (out), fd_flags, heap_flags
UDMABUF_CREATE = 0x40187542  # _IOW('u', 0x42, struct udmabuf_create)
UDMABUF_CREATE_FMT = "=IIQQ"  # memfd, flags, offset, size
UDMABUF_FLAGS_CLOEXEC = 0x01
DMA_BUF_IOCTL_SYNC = 0x40086200  # _IOW('b', 0, struct dma_buf_sync)
DMA_BUF_SYNC_FMT = "=Q"
DMA_BUF_SYNC_READ = 1 << 0
DMA_BUF_SYNC_WRITE = 2 << 0
DMA_BUF_SYNC_RW = DMA_BUF_SYNC_READ | DMA_BUF_SYNC_WRITE
DMA_BUF_SYNC_START = 0 << 2
DMA_BUF_SYNC_END = 1 << 2

DEFAULT_DMA_HEAP = "/dev/dma_heap/system"
DEFAULT_UDMABUF = "/dev/udmabuf"


class MemorySource(enum.Enum):
    """Kinds of memory a backend can import or export (Arm NN's MemorySource)."""

    MALLOC = "malloc"  # process-private host memory
    MEMFD = "memfd"  # host memory behind a file descriptor: mappable twice, passable to processes
    DMABUF = "dmabuf"  # a dma-buf fd: what device drivers (Ethos-N, Mali) import


class AllocationError(TvmEthosError, RuntimeError):
    """An allocation request is invalid or the memory cannot be obtained."""


class DmaBufUnavailableError(AllocationError):
    """Neither dma-buf device node is usable on this machine; the message says which and why."""

    def __init__(self, message: str, missing: tuple[str, ...]) -> None:
        super().__init__(message)
        self.missing = missing


def is_power_of_two(n: int) -> bool:
    return n > 0 and (n & (n - 1)) == 0


def is_aligned(address: int, alignment: int) -> bool:
    return alignment > 0 and address % alignment == 0


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def aligned_empty(shape, dtype=np.uint8, alignment: int = 4096) -> np.ndarray:
    """Host array whose first byte sits at a multiple of ``alignment``: what a zero-copy import
    needs from memory the caller allocated (numpy gives no alignment guarantee beyond 16 B)."""
    dt = np.dtype(dtype)
    dims = (shape,) if isinstance(shape, (int, np.integer)) else shape
    n = math.prod(int(d) for d in dims) * dt.itemsize
    raw = np.empty(n + alignment, dtype=np.uint8)
    off = (-int(raw.ctypes.data)) % alignment
    return raw[off : off + n].view(dt).reshape(shape)


def aligned_copy(x: np.ndarray, alignment: int = 4096) -> np.ndarray:
    """``x`` copied into an ``aligned_empty`` array."""
    out = aligned_empty(x.shape, x.dtype, alignment)
    out[...] = x
    return out


def lcm(*values: int) -> int:
    """Least common multiple (1 for no values): the alignment both sides of an edge accept."""
    out = 1
    for v in values:
        if v <= 0:
            raise ValueError(f"alignments and size multiples must be positive, got {v}")
        out = math.lcm(out, v)
    return out


@dataclass(frozen=True)
class LiveStats:
    """What an allocator still owns."""

    count: int
    nbytes: int


class Allocation:
    """One block: requested and padded size, alignment, address, numpy views, optional fd.

    ``nbytes`` is what was asked for; ``padded_nbytes`` (a multiple of ``pad_to``) is what both
    sides may touch - Ethos-N reads some inputs in 1024 B units, past the tensor's end.
    """

    def __init__(
        self, allocator: "Allocator", mem: np.ndarray, nbytes: int, padded_nbytes: int,
        alignment: int, fd: int | None = None, release: Callable[[], None] | None = None,
    ) -> None:
        self.allocator = allocator
        self.source = allocator.source
        self.nbytes = nbytes
        self.padded_nbytes = padded_nbytes
        self.alignment = alignment
        self._mem: np.ndarray | None = mem
        self._fd = fd
        self._release = release
        self.address = int(mem.ctypes.data)

    @property
    def freed(self) -> bool:
        return self._mem is None

    @property
    def fd(self) -> int | None:
        """The fd behind the memory (memfd or dma-buf), valid until :meth:`free`."""
        if self.freed:
            raise AllocationError("allocation already freed")
        return self._fd

    def view(
        self, dtype: Any = np.uint8, shape: tuple[int, ...] | None = None, *, padded: bool = False
    ) -> np.ndarray:
        """A numpy view of the first ``nbytes`` (or ``padded_nbytes``) bytes; no copy."""
        if self._mem is None:
            raise AllocationError("allocation already freed")
        n = self.padded_nbytes if padded else self.nbytes
        raw = self._mem[:n]
        dt = np.dtype(dtype)
        if n % dt.itemsize:
            raise ValueError(f"{n} B is not a whole number of {dt} elements")
        arr = raw.view(dt)
        return arr if shape is None else arr.reshape(shape)

    def begin_cpu_access(self, *, read: bool = True, write: bool = True) -> None:
        """Before the CPU touches the memory (dma-buf: DMA_BUF_IOCTL_SYNC START)."""
        self.allocator._sync(self, start=True, read=read, write=write)

    def end_cpu_access(self, *, read: bool = True, write: bool = True) -> None:
        """After the CPU touched the memory (dma-buf: DMA_BUF_IOCTL_SYNC END)."""
        self.allocator._sync(self, start=False, read=read, write=write)

    @contextmanager
    def cpu_access(self, *, read: bool = True, write: bool = True) -> Iterator[np.ndarray]:
        """``with alloc.cpu_access(write=True) as raw:`` - the sync bracket around CPU access."""
        self.begin_cpu_access(read=read, write=write)
        try:
            yield self.view(padded=True)
        finally:
            self.end_cpu_access(read=read, write=write)

    def free(self) -> None:
        """Give the block back; a second call does nothing."""
        self.allocator.free(self)

    def __repr__(self) -> str:
        state = "freed" if self.freed else f"0x{self.address:x}"
        return (
            f"Allocation({self.source.value}, {self.nbytes} B -> {self.padded_nbytes} B, "
            f"align {self.alignment}, {state})"
        )


class Allocator(ABC):
    """Base: validation, padding, tracking; subclasses only obtain and release memory."""

    source: MemorySource
    #: Largest alignment this allocator can honour (None: any power of two).
    max_alignment: int | None = None

    def __init__(self) -> None:
        self._live: dict[int, Allocation] = {}
        self._lock = threading.Lock()
        self.allocations = 0  # total made
        self.frees = 0
        self.peak_nbytes = 0

    def allocate(
        self, nbytes: int, alignment: int = DEFAULT_ALIGNMENT, pad_to: int = 1
    ) -> Allocation:
        """A block of at least ``nbytes``, rounded up to a multiple of ``pad_to``, whose address
        is a multiple of ``alignment`` (a power of two)."""
        if nbytes < 0:
            raise AllocationError(f"negative size {nbytes}")
        if not is_power_of_two(alignment):
            raise AllocationError(f"alignment must be a power of two, got {alignment}")
        if pad_to <= 0:
            raise AllocationError(f"pad_to must be positive, got {pad_to}")
        if self.max_alignment is not None and alignment > self.max_alignment:
            raise AllocationError(
                f"{type(self).__name__} cannot align to {alignment} B: its memory is mapped by "
                f"the kernel at page granularity ({self.max_alignment} B); "
                "use MallocAllocator for larger alignments"
            )
        padded = round_up(nbytes, pad_to)
        alloc = self._obtain(nbytes, padded, alignment)
        if not is_aligned(alloc.address, alignment):  # pragma: no cover - a broken subclass
            self._drop(alloc)
            raise AllocationError(f"{type(self).__name__} returned a misaligned block")
        with self._lock:
            self._live[id(alloc)] = alloc
            self.allocations += 1
            self.peak_nbytes = max(self.peak_nbytes, self._live_nbytes())
        return alloc

    @abstractmethod
    def _obtain(self, nbytes: int, padded: int, alignment: int) -> Allocation:
        """Get the memory; must return an Allocation whose address honours ``alignment``."""

    def _sync(self, alloc: Allocation, *, start: bool, read: bool, write: bool) -> None:
        """CPU-access bracket; nothing to do for coherent host memory."""
        if alloc.freed:
            raise AllocationError("allocation already freed")

    def free(self, alloc: Allocation) -> None:
        if alloc.allocator is not self:
            raise AllocationError("allocation belongs to another allocator")
        with self._lock:
            if self._live.pop(id(alloc), None) is None:
                return  # already freed: idempotent
            self.frees += 1
        self._drop(alloc)

    @staticmethod
    def _drop(alloc: Allocation) -> None:
        release, alloc._release = alloc._release, None
        alloc._mem = None
        if release is not None:
            release()

    def free_all(self) -> int:
        """Free every live block; returns how many."""
        with self._lock:
            live = list(self._live.values())
        for a in live:
            self.free(a)
        return len(live)

    def live(self) -> LiveStats:
        """Blocks not yet freed and their padded bytes: (0, 0) proves nothing leaked."""
        with self._lock:
            return LiveStats(len(self._live), self._live_nbytes())

    def _live_nbytes(self) -> int:
        return sum(a.padded_nbytes for a in self._live.values())


class MallocAllocator(Allocator):
    """Aligned process-private host memory (numpy over-allocation, any power-of-two alignment).

    Over-allocating and offsetting is portable and keeps views safe after free (the array
    keeps the memory), which ``posix_memalign`` through ctypes would not.
    """

    source = MemorySource.MALLOC

    def _obtain(self, nbytes: int, padded: int, alignment: int) -> Allocation:
        raw = np.empty(max(padded, 1) + alignment - 1, dtype=np.uint8)
        offset = (-int(raw.ctypes.data)) % alignment
        mem = raw[offset : offset + max(padded, 1)]
        return Allocation(self, mem, nbytes, padded, alignment)


def _map_fd(fd: int, length: int) -> tuple[mmap.mmap, np.ndarray]:
    mm = mmap.mmap(fd, length, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return mm, np.frombuffer(mm, dtype=np.uint8)


def _unmapper(mm: mmap.mmap, fds: tuple[int, ...]) -> Callable[[], None]:
    """Close our fds now; unmap now unless numpy views still pin the mapping (then they do)."""

    def release() -> None:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            mm.close()
        except BufferError:
            pass  # exported views alive: the mapping goes with the last of them

    return release


def map_shared_fd(fd: int, nbytes: int) -> np.ndarray:
    """Map a memfd / dma-buf fd received from elsewhere (e.g. ``socket.recv_fds``) as bytes."""
    _mm, arr = _map_fd(fd, round_up(max(nbytes, 1), PAGE_SIZE))
    return arr[:nbytes]


class MemfdAllocator(Allocator):
    """Host memory behind a sealed memfd: the stand-in for dma-buf that works everywhere.

    Two mappings of the fd share physical pages, and the fd can be sent to another process
    (``socket.send_fds``) - the properties a dma-buf gives between a CPU and a device. The size
    is sealed (no shrink, no grow) so a peer can never make our mapping fault. Alignment is
    the page size at most: the kernel places mappings.
    """

    source = MemorySource.MEMFD
    max_alignment = PAGE_SIZE

    def __init__(self, name: str = "tvm-ethos") -> None:
        super().__init__()
        self.name = name

    def _obtain(self, nbytes: int, padded: int, alignment: int) -> Allocation:
        length = round_up(max(padded, 1), PAGE_SIZE)
        fd = os.memfd_create(self.name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, length)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW)
            mm, mem = _map_fd(fd, length)
        except BaseException:
            os.close(fd)
            raise
        return Allocation(self, mem, nbytes, padded, alignment, fd=fd, release=_unmapper(mm, (fd,)))


class DmaBufAllocator(Allocator):
    """dma-buf memory: from a dma-heap (``DMA_HEAP_IOCTL_ALLOC``) or ``/dev/udmabuf`` over a
    sealed memfd, with ``DMA_BUF_IOCTL_SYNC`` start/end around every CPU access.

    Construction fails with :class:`DmaBufUnavailableError` when neither node can be opened,
    naming the missing nodes and what to use instead - this machine's kernel has neither.
    ``ioctl`` is injectable so the ioctl layouts are testable without the device nodes.
    """

    source = MemorySource.DMABUF
    max_alignment = PAGE_SIZE

    def __init__(
        self, heap_path: str = DEFAULT_DMA_HEAP, udmabuf_path: str = DEFAULT_UDMABUF, *,
        prefer: str = "heap", ioctl: Callable[..., Any] = fcntl.ioctl,
    ) -> None:
        super().__init__()
        if prefer not in ("heap", "udmabuf"):
            raise ValueError(f"prefer must be 'heap' or 'udmabuf', not {prefer!r}")
        self.heap_path = heap_path
        self.udmabuf_path = udmabuf_path
        self._ioctl = ioctl
        usable, problems = dma_buf_nodes(heap_path, udmabuf_path)
        if not usable:
            raise DmaBufUnavailableError(
                "dma-buf allocation is unavailable: "
                + "; ".join(problems)
                + ". Use MemfdAllocator for memory shared between processes or with devices "
                "that import host memory (OpenCL USE_HOST_PTR), or MallocAllocator for "
                "process-private host memory.",
                missing=tuple(p for p in (heap_path, udmabuf_path) if not os.path.exists(p)),
            )
        order = ["heap", "udmabuf"] if prefer == "heap" else ["udmabuf", "heap"]
        self.method = next(m for m in order if m in usable)
        path = heap_path if self.method == "heap" else udmabuf_path
        self._node_fd = os.open(
            path, (os.O_RDONLY if self.method == "heap" else os.O_RDWR) | os.O_CLOEXEC
        )

    def close(self) -> None:
        """Free everything and close the device node."""
        self.free_all()
        if self._node_fd >= 0:
            os.close(self._node_fd)
            self._node_fd = -1

    def _obtain(self, nbytes: int, padded: int, alignment: int) -> Allocation:
        length = round_up(max(padded, 1), PAGE_SIZE)
        if self.method == "heap":
            data = bytearray(
                struct.pack(DMA_HEAP_ALLOC_FMT, length, 0, os.O_RDWR | os.O_CLOEXEC, 0)
            )
            self._ioctl(self._node_fd, DMA_HEAP_IOCTL_ALLOC, data, True)
            buf_fd = struct.unpack(DMA_HEAP_ALLOC_FMT, bytes(data))[1]
        else:
            memfd = os.memfd_create("tvm-ethos-udmabuf", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
            try:
                os.ftruncate(memfd, length)
                fcntl.fcntl(memfd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK)  # udmabuf requires it
                data = bytearray(
                    struct.pack(UDMABUF_CREATE_FMT, memfd, UDMABUF_FLAGS_CLOEXEC, 0, length)
                )
                # With a mutable buffer, fcntl.ioctl returns the syscall's result: the new fd.
                buf_fd = int(self._ioctl(self._node_fd, UDMABUF_CREATE, data, True))
            finally:
                os.close(memfd)  # the udmabuf holds the pages
        if buf_fd < 0:  # pragma: no cover - the kernel reports errors as OSError
            raise AllocationError(f"dma-buf allocation of {length} B failed")
        try:
            mm, mem = _map_fd(buf_fd, length)
        except BaseException:
            os.close(buf_fd)
            raise
        return Allocation(
            self, mem, nbytes, padded, alignment, fd=buf_fd, release=_unmapper(mm, (buf_fd,))
        )

    def _sync(self, alloc: Allocation, *, start: bool, read: bool, write: bool) -> None:
        super()._sync(alloc, start=start, read=read, write=write)
        flags = (DMA_BUF_SYNC_START if start else DMA_BUF_SYNC_END) | (
            (DMA_BUF_SYNC_READ if read else 0) | (DMA_BUF_SYNC_WRITE if write else 0)
        )
        self._ioctl(alloc.fd, DMA_BUF_IOCTL_SYNC, struct.pack(DMA_BUF_SYNC_FMT, flags))


def dma_buf_nodes(
    heap_path: str = DEFAULT_DMA_HEAP, udmabuf_path: str = DEFAULT_UDMABUF
) -> tuple[list[str], list[str]]:
    """Which dma-buf methods are usable (``"heap"``, ``"udmabuf"``) and why the others are not."""
    usable: list[str] = []
    problems: list[str] = []
    for method, path, config, mode in (
        ("heap", heap_path, "CONFIG_DMABUF_HEAPS_SYSTEM", os.R_OK),
        ("udmabuf", udmabuf_path, "CONFIG_UDMABUF", os.R_OK | os.W_OK),
    ):
        if not os.path.exists(path):
            problems.append(f"{path} does not exist (kernel built without {config})")
        elif not os.access(path, mode):
            problems.append(f"{path} exists but is not accessible to this user")
        else:
            usable.append(method)
    return usable, problems


def dma_buf_unavailable_reason(
    heap_path: str = DEFAULT_DMA_HEAP, udmabuf_path: str = DEFAULT_UDMABUF
) -> str | None:
    """The exact message :class:`DmaBufAllocator` would raise here, or None when it works."""
    try:
        DmaBufAllocator(heap_path, udmabuf_path).close()
    except DmaBufUnavailableError as exc:
        return str(exc)
    return None
