"""Run TVM-generated OpenCL kernels through PyOpenCL: the GPU fallback of tvm-ethos.

Why this module exists: the apache-tvm 0.27 wheel generates OpenCL C (codegen is on) but has no
OpenCL runtime ("OpenCL runtime is not linked into this build"). So the compiler takes what TVM
knows and PyOpenCL does not - the kernel source and, per kernel, its argument order and launch
sizes - out of TVM's lowered modules once (``tvm_ethos.host.opencl.opencl_extraction``, needs
``tvm``), keeps it as a plain, JSON-serialisable :class:`OpenCLModuleSpec`, and this module
runs it with PyOpenCL (:class:`OpenCLDevice`, needs ``pyopencl``, never ``tvm``). Extraction
and execution live apart so that a cached spec runs on a machine without TVM.

Where the launch sizes come from: after TVM's default TIR pipeline and host/device split, each
host function calls its kernels through ``tirx.call_ffi_kernel(symbol, operands..., launch
values...)`` with ``launch_params`` tags such as ``["blockIdx.y", "blockIdx.x", "threadIdx.y",
"threadIdx.x"]``. As in TVM's own ``LaunchParamConfig``, global size = block x thread extent per
axis, local size = thread extent. The operands follow the *kernel's* parameter order, which is
not the PrimFunc's (a conv's kernel takes ``W, X, out`` for a PrimFunc ``X, W, out``): operands
are mapped back to PrimFunc parameters by buffer, never by position.

Memory, the reason the fallback can be zero-copy: a buffer is either device memory filled by
``enqueue_copy`` (the copy path, counted in ``bytes_copied``) or our own aligned host memory
wrapped with ``CL_MEM_USE_HOST_PTR`` (the import path, counted in ``bytes_imported``). Drivers
accept misaligned host pointers silently (PoCL does), so the alignment rule is ours: a caller
buffer whose address is not a multiple of the device's base-address alignment is either staged
through a copy or rejected, never wrapped.

Host/device synchronisation of imported buffers (see rfcs/0003): the portable OpenCL rule is
map before host access, unmap after ("map" rule). On a CPU device with unified memory whose map
returned our own address (checked once per import), the buffer *is* our memory, and a wait on the
producing event is all that is needed ("event" rule, the ``clFinish`` sync of Arm NN's
ClFallbackImportWorkload). ``host_sync="auto"`` picks per buffer. An equal map address alone
proves nothing on a GPU: the spec makes the map return the host pointer, and NVIDIA's driver
mirrors USE_HOST_PTR memory on the card and copies at map/unmap (measured on an H100).
``bytes_copied`` counts the runtime's own copies only.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from tvm_ethos.errors import TvmEthosError
from tvm_ethos.runtime.allocators import Allocation, MemorySource, is_aligned
from tvm_ethos.runtime.fallback_memory import BackendCapabilities

#: Environment variable that selects the OpenCL device (see :func:`select_device`).
DEVICE_ENV_VAR = "TVM_ETHOS_OPENCL_DEVICE"

#: Arm's import extensions: their presence means the driver can import host or dma-buf memory
#: without copying (Mali), which is what ``fallback_mode="auto"`` looks for.
ARM_IMPORT_EXTENSIONS = (
    "cl_arm_import_memory",
    "cl_arm_import_memory_host",
    "cl_arm_import_memory_dma_buf",
    "cl_arm_import_memory_protected",
    "cl_arm_import_memory_android_hardware_buffer",
)


class OpenCLError(TvmEthosError, RuntimeError):
    """An OpenCL device, program or kernel cannot be used as asked."""


class OpenCLUnavailableError(OpenCLError):
    """No OpenCL platform or no device matching the selection exists on this machine."""



class MisalignedBufferError(TvmEthosError, ValueError):
    """A caller buffer cannot be imported: its address or size breaks the device's rule."""


# --------------------------------------------------------------------------------------------
# The spec: everything needed to launch, no TVM objects (serialisable, cacheable).
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamSpec:
    """A PrimFunc tensor parameter, in PrimFunc order."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    #: True when some kernel stores into it: an output (the copy path reads back only these).
    written: bool = False

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class WorkspaceSpec:
    """A global intermediate the host function allocated between two kernels."""

    name: str
    nbytes: int


@dataclass(frozen=True)
class KernelArg:
    """One kernel operand: a PrimFunc parameter, a workspace, or a constant scalar."""

    kind: str  # "param" | "workspace" | "scalar"
    name: str = ""
    dtype: str = ""
    value: float | int | None = None


@dataclass(frozen=True)
class KernelLaunch:
    """One ``call_ffi_kernel``: which kernel, its operands in kernel order, its NDRange."""

    kernel: str
    args: tuple[KernelArg, ...]
    global_size: tuple[int, ...]
    local_size: tuple[int, ...]


@dataclass(frozen=True)
class FunctionSpec:
    """A PrimFunc as a sequence of kernel launches over its parameters and workspaces."""

    name: str
    params: tuple[ParamSpec, ...]
    launches: tuple[KernelLaunch, ...]
    workspaces: tuple[WorkspaceSpec, ...] = ()

    def param(self, name: str) -> ParamSpec:
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(f"{self.name} has no parameter {name!r}")


@dataclass(frozen=True)
class OpenCLModuleSpec:
    """OpenCL C source plus the launch recipe of every function extracted from one IRModule."""

    source: str
    functions: Mapping[str, FunctionSpec]

    @property
    def digest(self) -> str:
        """Content hash: programs are built once per digest and device."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()

    def to_json(self) -> str:
        return json.dumps(
            {
                "source": self.source,
                "functions": {k: dataclasses.asdict(v) for k, v in sorted(self.functions.items())},
            },
            sort_keys=True,
        )

    @staticmethod
    def from_json(text: str) -> "OpenCLModuleSpec":
        raw = json.loads(text)
        functions = {}
        for name, f in raw["functions"].items():
            functions[name] = FunctionSpec(
                name=f["name"],
                params=tuple(
                    ParamSpec(p["name"], tuple(p["shape"]), p["dtype"], p["written"])
                    for p in f["params"]
                ),
                launches=tuple(
                    KernelLaunch(
                        kernel=k["kernel"],
                        args=tuple(KernelArg(**a) for a in k["args"]),
                        global_size=tuple(k["global_size"]),
                        local_size=tuple(k["local_size"]),
                    )
                    for k in f["launches"]
                ),
                workspaces=tuple(WorkspaceSpec(**w) for w in f["workspaces"]),
            )
        return OpenCLModuleSpec(source=raw["source"], functions=functions)


# --------------------------------------------------------------------------------------------
# Devices
# --------------------------------------------------------------------------------------------


def _cl() -> Any:
    """Import pyopencl on first use: extraction and the planner must work without it."""
    try:
        import pyopencl
    except ImportError as exc:  # pragma: no cover - the opencl extra is installed here
        raise OpenCLUnavailableError(
            "pyopencl is not installed: pip install 'tvm-ethos[opencl]' (pyopencl[pocl])"
        ) from exc
    return pyopencl


def list_devices() -> list[tuple[Any, Any]]:
    """Every (platform, device) pair the ICD loader sees; empty when there is no platform."""
    cl = _cl()
    try:
        platforms = cl.get_platforms()
    except cl.Error:  # no ICD / no platform: clGetPlatformIDs fails with PLATFORM_NOT_FOUND
        return []
    out = []
    for p in platforms:
        try:
            out.extend((p, d) for d in p.get_devices())
        except cl.Error:
            continue
    return out


def _describe(platform: Any, device: Any) -> str:
    return f"{platform.name.strip()} / {device.name.strip()}"


def select_device(spec: str | None = None) -> Any:
    """Pick the OpenCL device: ``spec``, else ``$TVM_ETHOS_OPENCL_DEVICE``, else a default.

    ``spec`` is a case-insensitive substring of "platform / device" (for example ``"pocl"``,
    ``"nvidia"``, ``"mali"``), or ``"<platform substring>:<device substring>"`` when both are
    needed (two PoCL platforms can be installed side by side). Without a selection the first GPU
    device wins (a Mali board, an NVIDIA card), else the first device (PoCL's CPU device here).
    """
    cl = _cl()
    pairs = list_devices()
    if not pairs:
        raise OpenCLUnavailableError(
            "no OpenCL platform found: install pyopencl[pocl] (PoCL, CPU) or a GPU driver's ICD"
        )
    spec = spec if spec is not None else os.environ.get(DEVICE_ENV_VAR) or None
    if spec:
        want = spec.lower().strip()
        if ":" in want:
            pw, dw = (s.strip() for s in want.split(":", 1))
            hits = [(p, d) for p, d in pairs if pw in p.name.lower() and dw in d.name.lower()]
        else:
            hits = [(p, d) for p, d in pairs if want in _describe(p, d).lower()]
        if not hits:
            have = "; ".join(_describe(p, d) for p, d in pairs)
            raise OpenCLUnavailableError(f"no OpenCL device matches {spec!r}; available: {have}")
        return hits[0][1]
    for _p, d in pairs:
        if d.type & cl.device_type.GPU:
            return d
    return pairs[0][1]


@dataclass(frozen=True)
class OpenCLDeviceInfo:
    """The properties the runtime decides with (import or copy, alignment, sync rule)."""

    platform: str
    device: str
    vendor: str
    version: str
    device_type: str
    #: CL_DEVICE_HOST_UNIFIED_MEMORY: device and host share physical memory (PoCL, Mali).
    unified_memory: bool
    #: CL_DEVICE_MEM_BASE_ADDR_ALIGN, converted from bits to bytes.
    base_address_alignment: int
    import_extensions: tuple[str, ...]
    max_work_group_size: int
    global_mem_size: int
    extensions: tuple[str, ...] = field(default=(), repr=False)

    @property
    def is_cpu(self) -> bool:
        return "CPU" in self.device_type

    @property
    def has_arm_import(self) -> bool:
        return "cl_arm_import_memory" in self.import_extensions

    @property
    def import_preferred(self) -> bool:
        """Whether importing beats copying here (measured: yes on PoCL, no on a discrete card)."""
        return self.unified_memory or self.has_arm_import

    def capabilities(self, name: str = "opencl") -> BackendCapabilities:
        """This device as an edge endpoint for :func:`~tvm_ethos.runtime.fallback_memory.plan_edge`.

        USE_HOST_PTR wraps any host mapping (malloc, memfd, an mmap'd dma-buf), so all three are
        importable; like Arm NN's ClImportTensorHandleFactory the GPU cannot export its own
        memory, so it asks for fallback memory at every edge.
        """
        return BackendCapabilities(
            name=name,
            alignment=self.base_address_alignment,
            import_sources=frozenset(
                {MemorySource.MALLOC, MemorySource.MEMFD, MemorySource.DMABUF}
            ),
            export_sources=frozenset(),
            fallback_import_memory_required=True,
            unified_memory=self.unified_memory,
            import_extension=self.has_arm_import,
        )


def device_info(device: Any | None = None) -> OpenCLDeviceInfo:
    """Describe ``device`` (default: :func:`select_device`)."""
    cl = _cl()
    if device is None:
        device = select_device()
    exts = tuple(sorted(device.extensions.split()))
    try:
        unified = bool(device.host_unified_memory)
    except cl.Error:  # removed in some 3.0 drivers: assume discrete, the safe (copy) side
        unified = False
    return OpenCLDeviceInfo(
        platform=device.platform.name.strip(),
        device=device.name.strip(),
        vendor=device.vendor.strip(),
        version=device.version.strip(),
        device_type=cl.device_type.to_string(device.type),
        unified_memory=unified,
        base_address_alignment=max(int(device.mem_base_addr_align) // 8, 1),
        import_extensions=tuple(e for e in exts if e in ARM_IMPORT_EXTENSIONS),
        max_work_group_size=int(device.max_work_group_size),
        global_mem_size=int(device.global_mem_size),
        extensions=exts,
    )


@dataclass
class TransferCounters:
    """What moved between host and device; the executor diffs these per inference."""

    bytes_copied: int = 0
    copies: int = 0
    bytes_imported: int = 0
    imports: int = 0
    host_syncs: int = 0
    launches: int = 0

    def snapshot(self) -> "TransferCounters":
        return dataclasses.replace(self)

    def since(self, before: "TransferCounters") -> "TransferCounters":
        return TransferCounters(
            **{
                f.name: getattr(self, f.name) - getattr(before, f.name)
                for f in dataclasses.fields(self)
            }
        )


class DeviceBuffer:
    """An OpenCL buffer plus where its bytes live and how the host may touch them.

    ``kind``: ``"device"`` (device memory, copy path), ``"imported"`` (USE_HOST_PTR over
    ``host``; truly copy-free where :attr:`zero_copy`), ``"staged"`` (device memory standing in
    for a caller array that could not be imported; synchronising copies back into ``host``).
    """

    def __init__(
        self, cl_buffer: Any, nbytes: int, kind: str, host: np.ndarray | None = None,
        sync_rule: str = "copy", same_address: bool = False, zero_copy: bool = False,
    ) -> None:
        self.cl_buffer = cl_buffer
        self.nbytes = nbytes
        self.kind = kind
        self.host = host
        self.sync_rule = sync_rule
        #: The driver's map returned our own address. Necessary, not sufficient: the OpenCL spec
        #: makes a map of a USE_HOST_PTR buffer return the host pointer, and a discrete GPU's
        #: driver may still mirror the memory and copy at map/unmap (NVIDIA does: measured).
        self.same_address = same_address
        #: The device works on our memory itself: same address *and* a CPU device with unified
        #: memory (PoCL), where device memory is host virtual memory. Only then is the "event"
        #: rule sound and the import truly copy-free.
        self.zero_copy = zero_copy
        self._mapped: Any = None

    @property
    def host_address(self) -> int | None:
        return None if self.host is None else int(self.host.ctypes.data)

    def __repr__(self) -> str:
        return f"DeviceBuffer({self.kind}, {self.nbytes} B, sync={self.sync_rule})"


class OpenCLDevice:
    """One OpenCL device with one in-order queue: programs, buffers, launches, counters.

    Asynchronous by events: every enqueue returns a ``pyopencl.Event``; callers chain them with
    ``wait_for`` and wait only where a host-side consumer needs the data.
    """

    def __init__(
        self, device: Any | str | None = None, *, host_sync: str = "auto", profiling: bool = False
    ) -> None:
        """``device``: a ``pyopencl.Device``, a selection string, or None (see
        :func:`select_device`). ``host_sync``: "auto" (per buffer, see the module docstring),
        or force "map" (always correct) or "event" (only correct where the device works on
        host memory)."""
        cl = _cl()
        if host_sync not in ("auto", "map", "event"):
            raise ValueError(f"host_sync must be 'auto', 'map' or 'event', not {host_sync!r}")
        if device is None or isinstance(device, str):
            device = select_device(device)
        self.cl = cl
        self.device = device
        self.info = device_info(device)
        self.context = cl.Context([device])
        props = cl.command_queue_properties.PROFILING_ENABLE if profiling else 0
        self.queue = cl.CommandQueue(self.context, device, properties=props)
        self.host_sync = host_sync
        self.counters = TransferCounters()
        self._programs: dict[str, OpenCLProgram] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"OpenCLDevice({self.info.platform} / {self.info.device})"

    # ---- programs ------------------------------------------------------------------------

    def build(self, spec: OpenCLModuleSpec, options: Sequence[str] = ()) -> "OpenCLProgram":
        """Compile ``spec`` once per device (cached by content digest and options)."""
        key = spec.digest + "|" + " ".join(options)
        with self._lock:
            prog = self._programs.get(key)
            if prog is None:
                try:
                    built = self.cl.Program(self.context, spec.source).build(options=list(options))
                except self.cl.Error as exc:
                    raise OpenCLError(f"OpenCL build failed on {self.info.device}: {exc}") from exc
                prog = OpenCLProgram(self, spec, built)
                self._programs[key] = prog
            return prog

    @property
    def programs_built(self) -> int:
        return len(self._programs)

    # ---- buffers -------------------------------------------------------------------------

    def alloc(self, nbytes: int) -> DeviceBuffer:
        """Device memory for the copy path (contents undefined)."""
        mf = self.cl.mem_flags
        return DeviceBuffer(
            self.cl.Buffer(self.context, mf.READ_WRITE, max(nbytes, 1)), nbytes, "device"
        )

    def upload(
        self, buf: DeviceBuffer, host: np.ndarray, *, wait_for: Iterable[Any] | None = None,
        blocking: bool = False,
    ) -> Any:
        """Copy path, host -> device: enqueue_copy, counted in ``bytes_copied``."""
        src = _as_bytes(host)
        if src.nbytes > buf.nbytes:
            raise ValueError(f"{src.nbytes} B do not fit a {buf.nbytes} B buffer")
        if src.nbytes == 0:  # OpenCL rejects empty copies
            return self.cl.enqueue_marker(self.queue, wait_for=_events(wait_for))
        ev = self.cl.enqueue_copy(
            self.queue, buf.cl_buffer, src, is_blocking=blocking, wait_for=_events(wait_for)
        )
        self._count_copy(src.nbytes)
        return ev

    def download(
        self, host: np.ndarray, buf: DeviceBuffer, *, wait_for: Iterable[Any] | None = None,
        blocking: bool = True,
    ) -> Any:
        """Copy path, device -> host: enqueue_copy, counted in ``bytes_copied``."""
        dst = _as_bytes(host)
        if dst.nbytes > buf.nbytes:
            raise ValueError(f"a {buf.nbytes} B buffer cannot fill {dst.nbytes} B")
        if dst.nbytes == 0:
            return self.cl.enqueue_marker(self.queue, wait_for=_events(wait_for))
        ev = self.cl.enqueue_copy(
            self.queue, dst, buf.cl_buffer, is_blocking=blocking, wait_for=_events(wait_for)
        )
        self._count_copy(dst.nbytes)
        return ev

    def import_host(
        self, host: np.ndarray, *, misaligned: str = "copy", alignment: int | None = None
    ) -> DeviceBuffer:
        """Wrap our host memory with CL_MEM_USE_HOST_PTR, or stage/reject it.

        Zero-copy where the device works on host memory (PoCL; Mali); a discrete GPU's driver
        mirrors such a buffer and copies at map/unmap behind our counters, which is why
        ``fallback_mode="auto"`` copies explicitly there.

        The address must be a multiple of ``alignment`` (default: the device's base-address
        alignment). Drivers do not enforce it (PoCL wraps misaligned pointers zero-copy), so we
        do: ``misaligned="copy"`` stages the array through device memory (counted as copies,
        results copied back by :meth:`begin_host_access`); ``"reject"`` raises
        :class:`MisalignedBufferError`. Either way the caller's bytes are never reinterpreted at
        a shifted address.
        """
        if misaligned not in ("copy", "reject"):
            raise ValueError(f"misaligned must be 'copy' or 'reject', not {misaligned!r}")
        if not host.flags.c_contiguous:
            raise MisalignedBufferError("only C-contiguous arrays can be imported")
        need = alignment or self.info.base_address_alignment
        raw = _as_bytes(host)
        if raw.nbytes == 0 or not is_aligned(int(raw.ctypes.data), need):
            why = (
                f"address 0x{int(raw.ctypes.data):x} is not a multiple of {need} B "
                f"(base-address alignment of {self.info.device})"
                if raw.nbytes
                else "an empty array cannot back an OpenCL buffer"
            )
            if misaligned == "reject":
                raise MisalignedBufferError(f"cannot import: {why}")
            buf = self.alloc(raw.nbytes)
            self.upload(buf, raw, blocking=True)
            return DeviceBuffer(buf.cl_buffer, raw.nbytes, "staged", host=raw, sync_rule="copy")
        mf = self.cl.mem_flags
        clbuf = self.cl.Buffer(self.context, mf.READ_WRITE | mf.USE_HOST_PTR, hostbuf=raw)
        same = self._same_address(clbuf, raw)
        zero_copy = same and self.info.is_cpu and self.info.unified_memory
        rule = self.host_sync
        if rule == "auto":
            rule = "event" if zero_copy else "map"
        with self._lock:
            self.counters.imports += 1
            self.counters.bytes_imported += raw.nbytes
        return DeviceBuffer(
            clbuf, raw.nbytes, "imported", host=raw, sync_rule=rule, same_address=same,
            zero_copy=zero_copy,
        )

    def import_allocation(self, alloc: Allocation, *, misaligned: str = "reject") -> DeviceBuffer:
        """Wrap an allocator block (fallback memory) over its padded size.

        Fallback memory is allocated for both sides of an edge, so a misaligned block is a
        planning bug: rejected by default rather than silently staged.
        """
        return self.import_host(alloc.view(padded=True), misaligned=misaligned)

    def _same_address(self, clbuf: Any, raw: np.ndarray) -> bool:
        """Map once and compare the address with ours (see :attr:`DeviceBuffer.same_address`)."""
        cl = self.cl
        mapped, _ev = cl.enqueue_map_buffer(
            self.queue, clbuf, cl.map_flags.READ, 0, (raw.nbytes,), np.uint8, is_blocking=True
        )
        same = int(mapped.ctypes.data) == int(raw.ctypes.data)
        mapped.base.release(self.queue).wait()
        del mapped
        return same

    # ---- host access (the sync rules) ----------------------------------------------------

    def begin_host_access(
        self, buf: DeviceBuffer, *, write: bool = False, wait_for: Iterable[Any] | None = None
    ) -> np.ndarray:
        """Make ``buf``'s device-side results readable (and writable) at the host.

        Returns the bytes to use at the host. "event" rule: wait for ``wait_for`` and return our
        memory; "map" rule: a blocking map (the driver's view, equal to ours when zero-copy);
        staged: copy back into the caller's array; device: not host-accessible (use download).
        """
        events = _events(wait_for)
        with self._lock:
            self.counters.host_syncs += 1
        if buf.kind == "device":
            raise OpenCLError("device memory is not host-accessible: use download()")
        if buf.kind == "staged":
            assert buf.host is not None
            self.download(buf.host, buf, wait_for=events, blocking=True)
            return buf.host
        if buf.sync_rule == "event":
            for e in events or ():
                e.wait()
            assert buf.host is not None
            return buf.host
        cl = self.cl
        flags = cl.map_flags.READ | (cl.map_flags.WRITE if write else 0)
        mapped, _ev = cl.enqueue_map_buffer(
            self.queue, buf.cl_buffer, flags, 0, (buf.nbytes,), np.uint8, wait_for=events,
            is_blocking=True,
        )
        buf._mapped = mapped
        return mapped

    def end_host_access(self, buf: DeviceBuffer, *, wrote: bool = False) -> Any:
        """Hand ``buf`` back to the device after host access; returns an event (or None)."""
        if buf.kind == "staged" and wrote:
            assert buf.host is not None
            return self.upload(buf, buf.host)
        if buf.kind == "imported" and buf._mapped is not None:
            mapped, buf._mapped = buf._mapped, None
            ev = mapped.base.release(self.queue)
            del mapped
            return ev
        return None

    @contextmanager
    def host_access(
        self, buf: DeviceBuffer, *, write: bool = False, wait_for: Iterable[Any] | None = None
    ) -> Iterator[np.ndarray]:
        """``with dev.host_access(buf) as view:`` - begin/end around a host read or write."""
        view = self.begin_host_access(buf, write=write, wait_for=wait_for)
        try:
            yield view
        finally:
            self.end_host_access(buf, wrote=write)

    def finish(self) -> None:
        """Wait for everything queued (the seed's ClFallbackImportWorkload sync)."""
        self.queue.finish()

    def _count_copy(self, nbytes: int) -> None:
        with self._lock:
            self.counters.bytes_copied += nbytes
            self.counters.copies += 1


class OpenCLProgram:
    """A built program and its launchable functions (kernel objects made once)."""

    def __init__(self, device: OpenCLDevice, spec: OpenCLModuleSpec, program: Any) -> None:
        self.device = device
        self.spec = spec
        self.program = program
        self.functions = {n: OpenCLFunction(self, f) for n, f in spec.functions.items()}

    def __getitem__(self, name: str) -> "OpenCLFunction":
        return self.functions[name]


class OpenCLFunction:
    """One PrimFunc: launches its kernels in order over caller buffers and its own workspaces.

    Workspaces are allocated on first launch and kept (a loaded network allocates nothing per
    inference). Kernel objects carry their arguments, so launches of one function are
    serialised by a lock; the queue is in-order, so workspaces are never shared by two
    launches at once.
    """

    def __init__(self, program: OpenCLProgram, spec: FunctionSpec) -> None:
        self.program = program
        self.spec = spec
        cl = program.device.cl
        self._kernels = {k.kernel: cl.Kernel(program.program, k.kernel) for k in spec.launches}
        self._workspaces: dict[str, DeviceBuffer] | None = None
        self._lock = threading.Lock()

    def _workspace(self, name: str) -> DeviceBuffer:
        if self._workspaces is None:
            dev = self.program.device
            self._workspaces = {w.name: dev.alloc(w.nbytes) for w in self.spec.workspaces}
        return self._workspaces[name]

    def launch(
        self, buffers: Sequence[DeviceBuffer] | Mapping[str, DeviceBuffer], *,
        wait_for: Iterable[Any] | None = None,
    ) -> Any:
        """Enqueue every kernel of the function; returns the last kernel's event.

        ``buffers`` are in PrimFunc parameter order, or keyed by parameter name.
        """
        spec = self.spec
        if not isinstance(buffers, Mapping):
            if len(buffers) != len(spec.params):
                raise ValueError(
                    f"{spec.name} takes {len(spec.params)} buffers, got {len(buffers)}"
                )
            buffers = {p.name: b for p, b in zip(spec.params, buffers)}
        for p in spec.params:
            b = buffers.get(p.name)
            if b is None:
                raise ValueError(f"{spec.name}: no buffer for parameter {p.name}")
            if b.nbytes < p.nbytes:
                raise ValueError(
                    f"{spec.name}: {p.name} needs {p.nbytes} B, buffer has {b.nbytes} B"
                )
        dev = self.program.device
        cl = dev.cl
        events = _events(wait_for)
        ev = None
        with self._lock:
            for launch in spec.launches:
                kernel = self._kernels[launch.kernel]
                for i, a in enumerate(launch.args):
                    if a.kind == "param":
                        kernel.set_arg(i, buffers[a.name].cl_buffer)
                    elif a.kind == "workspace":
                        kernel.set_arg(i, self._workspace(a.name).cl_buffer)
                    else:
                        kernel.set_arg(i, np.array(a.value, dtype=a.dtype))
                ev = cl.enqueue_nd_range_kernel(
                    dev.queue, kernel, launch.global_size, launch.local_size, wait_for=events
                )
                events = None  # in-order queue: later kernels follow the first
                with dev._lock:
                    dev.counters.launches += 1
        return ev

    def __call__(self, *arrays: np.ndarray, mode: str = "copy", misaligned: str = "copy") -> None:
        """Run on numpy arrays (all parameters, outputs preallocated); outputs written in place.

        ``mode="copy"``: device buffers, inputs uploaded, outputs downloaded. ``mode="import"``:
        every array wrapped with USE_HOST_PTR (see :meth:`OpenCLDevice.import_host`).
        A test/debug convenience; the executor keeps its buffers across inferences instead.
        """
        spec = self.spec
        if len(arrays) != len(spec.params):
            raise ValueError(f"{spec.name} takes {len(spec.params)} arrays, got {len(arrays)}")
        dev = self.program.device
        for p, a in zip(spec.params, arrays):
            if a.nbytes != p.nbytes or np.dtype(a.dtype) != np.dtype(p.dtype):
                raise ValueError(
                    f"{spec.name}: {p.name} wants {p.shape} {p.dtype}, got {a.shape} {a.dtype}"
                )
        if mode == "copy":
            bufs = [dev.alloc(p.nbytes) for p in spec.params]
            # Outputs are uploaded too: a kernel may read before it writes (in-place, padding).
            events = [dev.upload(b, a) for b, a in zip(bufs, arrays)]
            ev = self.launch(bufs, wait_for=events)
            for p, b, a in zip(spec.params, bufs, arrays):
                if p.written:
                    dev.download(a, b, wait_for=[ev], blocking=True)
        elif mode == "import":
            bufs = [dev.import_host(a, misaligned=misaligned) for a in arrays]
            ev = self.launch(bufs)
            for p, b in zip(spec.params, bufs):
                if p.written:
                    dev.begin_host_access(b, wait_for=[ev])
                    dev.end_host_access(b)
            ev.wait()
        else:
            raise ValueError(f"mode must be 'copy' or 'import', not {mode!r}")


def _as_bytes(a: np.ndarray) -> np.ndarray:
    """A flat uint8 view of a C-contiguous array (no copy)."""
    if not a.flags.c_contiguous:
        raise ValueError("array must be C-contiguous")
    return a.reshape(-1).view(np.uint8)


def _events(wait_for: Iterable[Any] | None) -> list[Any] | None:
    if wait_for is None:
        return None
    evs = [e for e in wait_for if e is not None]
    return evs or None
