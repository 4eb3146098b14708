"""Edge steps between backends and the memory that makes the import steps zero-copy.

The design is Arm NN's zero-copy fallback: at every edge between subgraphs
on two backends the runtime inserts one of three steps -

* **FallbackImport** - the source backend cannot export memory (its capability says
  *FallbackImportMemoryRequired*), but both sides can import one kind of memory: the runtime
  allocates a buffer aligned for both (:class:`FallbackMemoryManager`), imports it as the
  source's output and the destination's input. Nothing is copied.
* **MemImport** - the source's own output memory is of a kind the destination imports.
* **MemCopy** - anything else, or where importing is measured to be slower.

``fallback_mode``: ``"copy"`` and ``"import"`` force a path (an impossible forced import is an
error, not a silent copy); ``"auto"`` decides per edge from device properties, because which
path wins depends on the device: where device and host share memory (PoCL, a Mali next to the
Ethos-N) an import moves nothing, while a discrete card's driver mirrors imported host memory,
so the import is a copy after all, and a slower one (figures: rfcs/0003 sections 1 and 6). So
auto imports only when both ends have unified host memory or an import extension
(``cl_arm_import_memory``).

Backend specifics stay out: a backend describes itself with a plain
:class:`BackendCapabilities`; this module never names a backend.
"""
from __future__ import annotations

import dataclasses
import enum
import threading
from dataclasses import dataclass
from typing import Hashable, Iterable, Mapping, Sequence

from tvm_ethos.errors import TvmEthosError
from tvm_ethos.runtime.allocators import (
    DEFAULT_ALIGNMENT,
    Allocation,
    Allocator,
    DmaBufAllocator,
    DmaBufUnavailableError,
    MallocAllocator,
    MemfdAllocator,
    MemorySource,
    is_power_of_two,
    lcm,
)
from tvm_ethos.runtime.options import check_runtime_options

#: Simplest memory first: plain host memory needs no fd; dma-buf only when a side demands it.
DEFAULT_SOURCE_PREFERENCE = (MemorySource.MALLOC, MemorySource.MEMFD, MemorySource.DMABUF)


class EdgeStep(str, enum.Enum):
    """The step at one edge (the names of Arm NN's compatibility layers)."""

    FALLBACK_IMPORT = "FallbackImport"
    MEM_IMPORT = "MemImport"
    MEM_COPY = "MemCopy"


class EdgePlanError(TvmEthosError, ValueError):
    """A forced import (``fallback_mode="import"``) is impossible at an edge."""


@dataclass(frozen=True)
class BackendCapabilities:
    """What one side of an edge can do with memory (Arm NN's tensor-handle-factory facts).

    ``alignment``: base-address alignment, bytes, for memory it imports (a power of two).
    ``size_multiple``: imported buffers must be a multiple of this many bytes (Ethos-N: 1024
    for some inputs). ``import_sources`` / ``export_sources``: memory kinds it can work on in
    place / hand out. ``fallback_import_memory_required``: it cannot export its output, so an
    edge leaving it needs fallback memory (Arm's ClImportTensorHandleFactory says so).
    ``unified_memory``: device and host share physical memory. ``import_extension``: the
    driver imports foreign memory zero-copy (``cl_arm_import_memory``).
    """

    name: str
    alignment: int = DEFAULT_ALIGNMENT
    size_multiple: int = 1
    import_sources: frozenset[MemorySource] = frozenset()
    export_sources: frozenset[MemorySource] = frozenset()
    fallback_import_memory_required: bool = False
    unified_memory: bool = True
    import_extension: bool = False

    def __post_init__(self) -> None:
        if not is_power_of_two(self.alignment):
            raise ValueError(f"{self.name}: alignment must be a power of two, got {self.alignment}")
        if self.size_multiple <= 0:
            raise ValueError(f"{self.name}: size_multiple must be positive")
        object.__setattr__(self, "import_sources", frozenset(self.import_sources))
        object.__setattr__(self, "export_sources", frozenset(self.export_sources))

    @property
    def prefers_import(self) -> bool:
        """Import is the fast path on this side (unified memory or an import extension)."""
        return self.unified_memory or self.import_extension


@dataclass(frozen=True)
class EdgeDecision:
    """The step chosen for one edge, with the buffer it needs and why."""

    step: EdgeStep
    reason: str
    source: str
    destination: str
    mode: str
    #: Kind of the shared buffer (None for MemCopy).
    memory_source: MemorySource | None = None
    #: Base-address alignment and size multiple the shared buffer must have (1 for MemCopy).
    alignment: int = 1
    size_multiple: int = 1

    @property
    def is_import(self) -> bool:
        return self.step is not EdgeStep.MEM_COPY

    def describe(self) -> str:
        """One line for the plan report."""
        head = f"{self.source} -> {self.destination}: {self.step.value}"
        if self.memory_source is not None:
            head += (
                f" ({self.memory_source.value}, align {self.alignment} B, "
                f"size multiple {self.size_multiple} B)"
            )
        return f"{head} - {self.reason}"


def _names(sources: Iterable[MemorySource]) -> str:
    return ", ".join(sorted(s.value for s in sources)) or "nothing"


def _pick(sources: Iterable[MemorySource], prefer: Sequence[MemorySource]) -> MemorySource:
    sources = set(sources)
    for s in prefer:
        if s in sources:
            return s
    return sorted(sources, key=lambda s: s.value)[0]


def _candidates(
    src: BackendCapabilities, dst: BackendCapabilities, available: frozenset[MemorySource]
) -> tuple[EdgeStep, frozenset[MemorySource], str]:
    """The import step possible at this edge, the memory kinds that allow it, and why."""
    if src.fallback_import_memory_required:
        common = src.import_sources & dst.import_sources
        usable = common & available
        why = (
            f"{src.name} requires fallback import memory; both import {_names(common)}"
            if common
            else f"{src.name} requires fallback import memory, but {src.name} imports "
            f"{_names(src.import_sources)} and {dst.name} imports {_names(dst.import_sources)}"
        )
        if common and not usable:
            why += f", none of which this machine can allocate (can: {_names(available)})"
        return EdgeStep.FALLBACK_IMPORT, usable, why
    common = src.export_sources & dst.import_sources
    why = (
        f"{src.name} exports {_names(common)}, which {dst.name} imports"
        if common
        else f"{src.name} exports {_names(src.export_sources)}, {dst.name} imports "
        f"{_names(dst.import_sources)}"
    )
    return EdgeStep.MEM_IMPORT, common, why


def plan_edge(
    src: BackendCapabilities,
    dst: BackendCapabilities,
    mode: str = "auto",
    *,
    available: Iterable[MemorySource] | None = None,
    prefer: Sequence[MemorySource] = DEFAULT_SOURCE_PREFERENCE,
) -> EdgeDecision:
    """Choose FallbackImport, MemImport or MemCopy for the edge ``src`` -> ``dst``.

    ``available``: memory kinds this machine can allocate (default: all; pass the keys of the
    FallbackMemoryManager's allocators so dma-buf is not chosen where it cannot be made).
    """
    check_runtime_options({"fallback_mode": mode})
    avail = frozenset(available) if available is not None else frozenset(MemorySource)

    def copy(reason: str) -> EdgeDecision:
        return EdgeDecision(EdgeStep.MEM_COPY, reason, src.name, dst.name, mode)

    if mode == "copy":
        return copy("fallback_mode='copy' forces a copy")
    step, usable, why = _candidates(src, dst, avail)
    if not usable:
        if mode == "import":
            raise EdgePlanError(
                f"fallback_mode='import' impossible at {src.name} -> {dst.name}: {why}"
            )
        return copy(f"auto: {why}; nothing to share, so copy")
    slow = [b.name for b in (src, dst) if not b.prefers_import]
    slow_why = (
        f"{' and '.join(slow)} has neither unified host memory nor an import extension "
        "(a discrete device: reading host memory over the bus is slower than one copy)"
    )
    if mode == "auto" and slow:
        return copy(f"auto: {slow_why}")
    memory = _pick(usable, prefer)
    align = lcm(src.alignment, dst.alignment)
    mult = lcm(src.size_multiple, dst.size_multiple)
    if mode == "import":
        reason = "fallback_mode='import' forces import; " + why
        if slow:
            reason += f" (auto would copy: {slow_why})"
    else:
        reason = f"auto: {why}; unified memory or import extension on both sides"
    reason += f"; alignment lcm({src.alignment}, {dst.alignment}) = {align} B"
    return EdgeDecision(step, reason, src.name, dst.name, mode, memory, align, mult)


def plan_edges(
    src: BackendCapabilities,
    dsts: Sequence[BackendCapabilities],
    mode: str = "auto",
    *,
    available: Iterable[MemorySource] | None = None,
    prefer: Sequence[MemorySource] = DEFAULT_SOURCE_PREFERENCE,
) -> list[EdgeDecision]:
    """One output feeding several consumers: every importing consumer shares one buffer.

    The shared buffer's kind must suit all of them and its alignment / size multiple is the
    lcm over the source and every importing consumer. A consumer that cannot take the shared
    kind is copied from the shared buffer (auto) or is an error (import).
    """
    decisions = [plan_edge(src, d, mode, available=available, prefer=prefer) for d in dsts]
    avail = frozenset(available) if available is not None else frozenset(MemorySource)
    shared: set[MemorySource] | None = None
    sharers: list[int] = []
    for i, (d, dec) in enumerate(zip(dsts, decisions)):
        if not dec.is_import:
            continue
        _step, usable, _why = _candidates(src, d, avail)
        narrowed = set(usable) if shared is None else shared & usable
        if not narrowed:
            assert shared is not None
            if mode == "import":
                raise EdgePlanError(
                    f"fallback_mode='import' impossible: {src.name}'s output is shared as "
                    f"{_names(shared)}, which {d.name} cannot import"
                )
            decisions[i] = dataclasses.replace(
                dec, step=EdgeStep.MEM_COPY, memory_source=None, alignment=1, size_multiple=1,
                reason=f"auto: {src.name}'s output is shared as {_names(shared)}, which "
                f"{d.name} cannot import; copied from the shared buffer",
            )
            continue
        shared = narrowed
        sharers.append(i)
    if sharers:
        assert shared is not None
        memory = _pick(shared, prefer)
        align = lcm(src.alignment, *(dsts[i].alignment for i in sharers))
        mult = lcm(src.size_multiple, *(dsts[i].size_multiple for i in sharers))
        for i in sharers:
            extra = "" if len(sharers) == 1 else f"; one buffer shared by {len(sharers)} consumers"
            decisions[i] = dataclasses.replace(
                decisions[i], memory_source=memory, alignment=align, size_multiple=mult,
                reason=decisions[i].reason + extra,
            )
    return decisions


@dataclass(frozen=True)
class FallbackMemoryStats:
    """Counters of one manager; ``allocations`` stops growing after the first inference."""

    buffers: int  # live now
    nbytes: int  # padded bytes live now
    allocations: int  # made since creation
    requests: int
    reuses: int
    frees: int


def default_allocators() -> dict[MemorySource, Allocator]:
    """malloc and memfd everywhere; dma-buf where a heap or udmabuf node exists."""
    out: dict[MemorySource, Allocator] = {
        MemorySource.MALLOC: MallocAllocator(),
        MemorySource.MEMFD: MemfdAllocator(),
    }
    try:
        out[MemorySource.DMABUF] = DmaBufAllocator()
    except DmaBufUnavailableError:
        pass
    return out


class FallbackMemoryManager:
    """The fallback memory of one loaded network: one buffer per edge, for the network's life.

    The first request for an edge allocates a buffer aligned to the lcm of all the alignments
    given (source and destinations) and padded to the lcm of their size multiples; every later
    request - every later inference - gets the same buffer back, so a loaded network allocates
    nothing after its first inference. :meth:`unload` frees them all (Arm NN's
    ``DeallocateMemory`` on network unload); the manager refuses requests afterwards.
    """

    def __init__(self, allocators: Mapping[MemorySource, Allocator] | None = None) -> None:
        self.allocators = dict(allocators) if allocators is not None else default_allocators()
        self._buffers: dict[Hashable, Allocation] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._allocations = 0
        self._requests = 0
        self._reuses = 0
        self._frees = 0

    @property
    def available_sources(self) -> frozenset[MemorySource]:
        """Memory kinds this manager can allocate: pass to :func:`plan_edge`."""
        return frozenset(self.allocators)

    @property
    def closed(self) -> bool:
        return self._closed

    def buffer(
        self,
        edge: Hashable,
        nbytes: int,
        *,
        source: MemorySource = MemorySource.MALLOC,
        alignments: Iterable[int] = (DEFAULT_ALIGNMENT,),
        size_multiples: Iterable[int] = (),
    ) -> Allocation:
        """The buffer of ``edge``: created on the first call, the same one on every later call."""
        align = lcm(*alignments)
        mult = lcm(*size_multiples)
        with self._lock:
            if self._closed:
                raise RuntimeError("FallbackMemoryManager already unloaded")
            self._requests += 1
            have = self._buffers.get(edge)
            if have is not None:
                if (
                    have.source is not source
                    or have.nbytes < nbytes
                    or have.alignment % align
                    or have.padded_nbytes % mult
                ):
                    raise ValueError(
                        f"edge {edge!r} was allocated as {have}, now asked for {nbytes} B of "
                        f"{source.value}, align {align}, size multiple {mult}: a loaded "
                        "network's edges do not change"
                    )
                self._reuses += 1
                return have
            allocator = self.allocators.get(source)
            if allocator is None:
                raise ValueError(
                    f"no {source.value} allocator (have: {_names(self.allocators)}); plan edges "
                    "with available=manager.available_sources"
                )
            alloc = allocator.allocate(nbytes, alignment=align, pad_to=mult)
            self._buffers[edge] = alloc
            self._allocations += 1
            return alloc

    def for_decision(self, edge: Hashable, nbytes: int, decision: EdgeDecision) -> Allocation:
        """The buffer an import decision asks for (MemCopy edges need none)."""
        if decision.memory_source is None:
            raise ValueError(f"{decision.step.value} at {edge!r} needs no fallback memory")
        return self.buffer(
            edge, nbytes, source=decision.memory_source, alignments=(decision.alignment,),
            size_multiples=(decision.size_multiple,),
        )

    def release(self, edge: Hashable) -> bool:
        """Free one edge's buffer (a request slot torn down after a failed first inference);
        a later request for ``edge`` allocates a new one. Returns whether there was one."""
        with self._lock:
            alloc = self._buffers.pop(edge, None)
        if alloc is None:
            return False
        alloc.free()
        with self._lock:
            self._frees += 1
        return True

    def __contains__(self, edge: Hashable) -> bool:
        return edge in self._buffers

    def __len__(self) -> int:
        return len(self._buffers)

    def unload(self) -> int:
        """Free every buffer (network unload); returns how many. Idempotent."""
        with self._lock:
            buffers = list(self._buffers.values())
            self._buffers.clear()
            self._closed = True
        for b in buffers:
            b.free()
        with self._lock:
            self._frees += len(buffers)
        return len(buffers)

    def __enter__(self) -> "FallbackMemoryManager":
        return self

    def __exit__(self, *exc: object) -> None:
        self.unload()

    @property
    def allocations(self) -> int:
        """Buffers allocated so far (what :meth:`stats` counts, without building the rest)."""
        return self._allocations

    def stats(self) -> FallbackMemoryStats:
        with self._lock:
            return FallbackMemoryStats(
                buffers=len(self._buffers),
                nbytes=sum(b.padded_nbytes for b in self._buffers.values()),
                allocations=self._allocations,
                requests=self._requests,
                reuses=self._reuses,
                frees=self._frees,
            )
