"""The executor: a loaded network runs its subgraphs (emulated NPU, OpenCL GPU, llvm CPU) in order.

A loaded network owns (rfcs/0003; after Arm NN's zero-copy fallback):

* its **subgraphs**, in program order, from the compiled :class:`NetworkProgram`: NPU subgraphs
  call their emulator kernel, llvm subgraphs call TVM-built CPU kernels, OpenCL subgraphs
  launch TVM's OpenCL C through PyOpenCL (built once per loaded network);
* its **edges**: every tensor that goes from a subgraph on one backend to a subgraph on
  another gets one step, decided once at load from the two backends' capabilities and the
  device's properties (``plan_edges``): *FallbackImport* (one buffer from the
  :class:`FallbackMemoryManager`, aligned to the lcm of both sides, the producer's output and
  the consumers' input), *MemImport* (the producer's own output memory, which the consumer
  imports) or *MemCopy*. ``fallback_mode`` = ``"auto"`` | ``"import"`` | ``"copy"``;
  :attr:`Executor.edge_report` says what was chosen and why;
* its **memory**: per in-flight request a slot of activation buffers; every buffer (fallback
  memory included) is allocated when its slot is first used and reused by every later
  inference; :meth:`Executor.unload` frees them all;
* its **states**: the program's state constants (an LSTM's hidden and cell state) as one
  copy of its own, which the kernels read and write in place, so each inference goes on
  from the one before, as TFLite Micro's variable tensors do; inferences of a network with
  states run one at a time (in the order they start), and :meth:`Executor.reset_state`
  restores the reset values.

``run(inputs)`` executes in the calling thread; ``start_async(inputs)`` returns an
:class:`InferRequest` whose ``wait()`` gives the outputs; up to ``max_requests`` run at once,
each in its own slot. The GPU side is asynchronous (events): before a CPU-side subgraph (NPU
emulator, llvm) reads a GPU-produced tensor the executor waits on the producing kernel's event
(``begin_host_access``: Arm NN's ClFallbackImportWorkload sync), and a GPU subgraph that
reads CPU-written imported memory waits on the unmap event where the device needs one.

Counters: each inference's :class:`RunStats` (``bytes_copied``, ``bytes_imported``, per edge and
at the caller's boundary, GPU syncs, launches, allocations, a trace).

The executor never names a backend: it sees ids, capabilities (registry) and where a subgraph's
kernels run (``device``: cpu or opencl).
"""
from __future__ import annotations

import ctypes
import dataclasses
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from tvm_ethos.backends.registry import get_registry
from tvm_ethos.errors import TvmEthosError
from tvm_ethos.runtime.allocators import MallocAllocator, MemorySource, is_aligned
from tvm_ethos.runtime.fallback_memory import (
    BackendCapabilities,
    EdgeDecision,
    EdgeStep,
    FallbackMemoryManager,
    plan_edges,
)
from tvm_ethos.runtime.opencl_device import DEVICE_ENV_VAR, OpenCLDevice
from tvm_ethos.runtime.options import check_runtime_options
from tvm_ethos.runtime.payloads import run_payload
from tvm_ethos.runtime.program import NetworkProgram

#: TVM's ``from_dlpack`` needs 64 B aligned memory; CPU kernels read caller arrays in place only
#: then.
CPU_ALIGNMENT = 64

_SOURCE_NAMES = {
    "malloc": MemorySource.MALLOC,
    "memfd": MemorySource.MEMFD,
    "dma_buf": MemorySource.DMABUF,
    "dmabuf": MemorySource.DMABUF,
}


class ExecutorError(TvmEthosError, RuntimeError):
    """The executor cannot run as asked (unloaded network, bad inputs)."""


class MisalignedInputError(ExecutorError, ValueError):
    """A caller buffer breaks the alignment rule and ``misaligned="reject"`` was asked."""


class InferenceError(ExecutorError):
    """An inference failed part way (a kernel, an OpenCL launch, an allocation). ``step`` names
    where; the original exception is ``__cause__``. The request's slot is returned clean (the
    GPU queue drained, host-access brackets closed, a never-completed slot's buffers freed), so
    the next inference on the same loaded network runs normally."""

    def __init__(self, step: str, cause: BaseException):
        self.step = step
        first = (str(cause).strip().splitlines() or [""])[0]
        super().__init__(f"inference failed at {step}: {type(cause).__name__}: {first}")


# ---------------------------------------------------------------------------- reports, stats
@dataclass(frozen=True)
class EdgeEntry:
    """One edge of the loaded network: a tensor from a producer backend to a consumer backend."""

    tensor: str
    nbytes: int
    producer: str  # subgraph name
    consumers: tuple  # subgraph names on the destination backend
    decision: EdgeDecision

    @property
    def step(self) -> EdgeStep:
        return self.decision.step

    def describe(self) -> str:
        return (
            f"{self.tensor} ({self.nbytes} B) {self.producer} -> {', '.join(self.consumers)}: "
            f"{self.decision.describe()}"
        )


@dataclass
class EdgeReport:
    """What the loaded network chose at every edge, and why."""

    mode: str
    device: str
    edges: list

    def steps(self) -> dict:
        out: dict = {}
        for e in self.edges:
            out[e.step.value] = out.get(e.step.value, 0) + 1
        return out

    def __iter__(self):
        return iter(self.edges)

    def __len__(self):
        return len(self.edges)

    def __str__(self):
        opencl = f", opencl: {self.device}" if self.device else ""
        head = f"edges (fallback_mode={self.mode!r}{opencl}): "
        head += ", ".join(f"{k} x{v}" for k, v in self.steps().items()) if self.edges else "none"
        return "\n".join([head] + [f"  {e.describe()}" for e in self.edges])


@dataclass
class RunStats:
    """One inference. ``bytes_copied`` / ``bytes_imported`` = edges + caller boundary."""

    edge_bytes_copied: int = 0
    edge_bytes_imported: int = 0
    io_bytes_copied: int = 0
    io_bytes_imported: int = 0
    copies: int = 0
    gpu_syncs: int = 0
    gpu_launches: int = 0
    cpu_calls: int = 0
    allocations: int = 0
    seconds: float = 0.0
    slot: int = 0
    trace: list = field(default_factory=list)

    @property
    def bytes_copied(self) -> int:
        return self.edge_bytes_copied + self.io_bytes_copied

    @property
    def bytes_imported(self) -> int:
        return self.edge_bytes_imported + self.io_bytes_imported

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["bytes_copied"] = self.bytes_copied
        d["bytes_imported"] = self.bytes_imported
        return d


@dataclass
class MemoryStats:
    fallback_buffers: int
    fallback_allocations: int
    fallback_frees: int
    activation_buffers: int
    activation_allocations: int
    device_buffers: int
    device_allocations: int
    slots: int


# ---------------------------------------------------------------------------- helpers
def _release_device_buffers(buffers: dict) -> None:
    """Release every OpenCL buffer in ``buffers`` and empty it; one already released (by a
    failed run's cleanup) is not an error."""
    for b in buffers.values():
        try:
            b.cl_buffer.release()
        except Exception:  # pragma: no cover - already released
            pass
    buffers.clear()


def runtime_capabilities(backend_id: str, caps, name: str | None = None) -> BackendCapabilities:
    """A registry ``Capabilities`` as an edge endpoint (a CPU-side backend: unified memory)."""
    return BackendCapabilities(
        name=name or backend_id,
        alignment=int(caps.memory_alignment),
        import_sources=frozenset(
            _SOURCE_NAMES[s] for s in caps.import_memory_sources if s in _SOURCE_NAMES
        ),
        export_sources=frozenset(
            _SOURCE_NAMES[s] for s in caps.export_memory_sources if s in _SOURCE_NAMES
        ),
        fallback_import_memory_required=bool(caps.fallback_import_memory_required),
        unified_memory=True,
        import_extension=False,
    )


_DEVICES: dict = {}
_DEVICES_LOCK = threading.Lock()


def shared_opencl_device(selection: str | None = None):
    """One :class:`OpenCLDevice` per selection in this process (programs are built once per
    device)."""
    import os

    key = selection if selection is not None else os.environ.get(DEVICE_ENV_VAR, "")
    with _DEVICES_LOCK:
        dev = _DEVICES.get(key)
        if dev is None:
            dev = OpenCLDevice(selection)
            _DEVICES[key] = dev
        return dev


@dataclass
class _TensorPlan:
    tid: int
    name: str
    shape: tuple
    dtype: str
    nbytes: int
    producer: int  # subgraph index, -1 for a network input
    src_backend: str | None
    src_device: str  # "cpu" | "opencl" | "caller"
    consumers: list
    is_output: bool
    decisions: dict = field(default_factory=dict)  # consumer backend -> EdgeDecision
    shared: EdgeDecision | None = None  # the import decision whose buffer is the home

    @property
    def direct_output(self) -> bool:
        """Only a network output, written by a CPU kernel straight into the caller's result."""
        return self.is_output and self.src_device == "cpu" and not self.consumers


class _Slot:
    """One request's buffers (activation buffers, edge buffers, imports), kept for the network's
    life."""

    def __init__(self, index: int):
        self.index = index
        self.host: dict = {}  # loc -> np.ndarray
        self.allocs: dict = {}  # loc -> Allocation
        self.tvm: dict = {}  # loc -> tvm Tensor
        self.dev: dict = {}  # loc -> DeviceBuffer
        self.bound: dict = {}  # CPU subgraph index -> its steps with this slot's tensors bound
        self.ready = False  # one inference completed in it: its buffers are the steady state
        self.flat: _FlatCalls | None = None  # every kernel call of an all-CPU network, bound


@dataclass
class _FlatCalls:
    """A slot's whole inference as one list of kernel calls (a network whose subgraphs all run
    on one CPU backend, :meth:`Executor._flat_calls`). ``calls`` holds ``(function, args,
    step)`` with ``args`` a tuple, so calling it makes no new one; the calls that take a
    caller's input or write a returned output (``late``) are rebuilt per inference from
    ``base`` (the same calls with None there) and their ``scratch`` argument lists, filled at
    ``inputs`` ``(tensor id, [(call, position), ...])`` and ``outputs``
    ``(_OutputArrays, [(call, position), ...])``, in the program's order, and cleared after
    it."""

    calls: list
    base: list
    late: list
    scratch: dict
    inputs: list
    outputs: list
    trace: list


class _Inference:
    def __init__(self, slot: _Slot, stats: RunStats):
        self.slot = slot
        self.stats = stats
        self.events: dict = {}  # loc -> [cl events] after which the GPU side may read it
        self.copied: set = set()  # locs filled this inference
        self.imported: set = set()  # (tensor, backend) handed over without a copy
        self.caller_host: dict = {}  # tid -> np array (caller input, as used by CPU kernels)
        self.caller_dev: dict = {}  # tid -> DeviceBuffer (caller input on the GPU)
        self.results: dict = {}  # tid -> np array written in place (direct outputs)
        self.tvm_tmp: dict = {}
        self.last_events: list = []
        self.step = "preparing the inputs"  # where a failure happened (InferenceError)


class _IdleSlots:
    """Free request slots, last in first out. ``get_nowait`` is a list pop (atomic under the
    GIL, no lock: the per-inference path); ``get`` waits on a condition that ``put``
    notifies. (``queue.LifoQueue`` takes its condition on every get and put.)"""

    def __init__(self):
        self._items: list = []
        self._cv = threading.Condition(threading.Lock())

    def get_nowait(self) -> _Slot:
        try:
            return self._items.pop()
        except IndexError:
            raise queue.Empty from None

    def get(self) -> _Slot:
        with self._cv:
            while True:
                try:
                    return self._items.pop()
                except IndexError:  # none, or taken by a get_nowait since the last check
                    self._cv.wait()

    def put(self, slot: _Slot) -> None:
        with self._cv:
            self._items.append(slot)
            self._cv.notify()

    def qsize(self) -> int:
        return len(self._items)


class InferRequest:
    """An inference started by :meth:`Executor.start_async`; ``wait()`` returns its outputs."""

    def __init__(self, future: Future):
        self._future = future

    def wait(self, timeout: float | None = None) -> list:
        return self._future.result(timeout)[0]

    @property
    def stats(self) -> RunStats:
        return self._future.result()[1]

    def done(self) -> bool:
        return self._future.done()


# ---------------------------------------------------------------------------- the executor
def _run_stream(payload, args: list, n_outs: int) -> None:
    """One NPU kernel call as its command stream on the functional model: the activation
    inputs come first in ``args`` (the constants after them are in the stream's flash), the
    outputs last."""
    ins = [a.numpy() for a in args[:len(payload.inputs)]]
    outs = run_payload(payload, ins)
    for dst, got in zip(args[-n_outs:], outs):
        dst.copyfrom(got.reshape(dst.shape))


def _address(x: np.ndarray) -> int:
    """The address of a C-contiguous, writeable array's first byte (``x.ctypes.data`` builds a
    ctypes object on every call, several microseconds of a small network's inference)."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(x))
    except (TypeError, ValueError):  # empty or not a writeable buffer
        return int(x.ctypes.data)


def _aligned_output(plan: _TensorPlan) -> np.ndarray:
    """A new host array of ``plan``'s shape and dtype at a multiple of ``CPU_ALIGNMENT``
    (``allocators.aligned_empty`` with the dtype and size the plan already knows)."""
    dt = np.dtype(plan.dtype)
    n = plan.nbytes
    raw = np.empty(n + CPU_ALIGNMENT, dtype=np.uint8)
    off = (-_address(raw)) % CPU_ALIGNMENT
    return raw[off : off + n].view(dt).reshape(plan.shape)


#: output arrays up to this size are cut from shared blocks of this many bytes
_BLOCK_BYTES = 16384
_BLOCK_ROWS = 64


class _OutputArrays:
    """New arrays for one network output, each at a multiple of ``CPU_ALIGNMENT``: small ones
    (at most half of ``_BLOCK_BYTES``) cut, up to ``_BLOCK_ROWS`` at a time, from one block
    allocated at once, so an inference takes a ready array from a list instead of allocating
    and aligning one (an array keeps its block alive: at most ``_BLOCK_BYTES``); larger ones
    made one by one (:func:`_aligned_output`)."""

    def __init__(self, plan: _TensorPlan):
        self.plan = plan
        self.dtype = np.dtype(plan.dtype)
        stride = -(-max(plan.nbytes, 1) // CPU_ALIGNMENT) * CPU_ALIGNMENT
        self.stride = stride
        self.rows = min(_BLOCK_ROWS, _BLOCK_BYTES // stride) if 2 * stride <= _BLOCK_BYTES else 1
        self._ready: list = []

    def new(self) -> np.ndarray:
        try:
            return self._ready.pop()
        except IndexError:
            pass
        if self.rows == 1:
            return _aligned_output(self.plan)
        plan, stride = self.plan, self.stride
        raw = np.empty(self.rows * stride + CPU_ALIGNMENT, dtype=np.uint8)
        off = (-_address(raw)) % CPU_ALIGNMENT
        base = raw[off:off + self.rows * stride]
        rows = [base[k * stride:k * stride + plan.nbytes].view(self.dtype).reshape(plan.shape)
                for k in range(self.rows)]
        rows.reverse()  # handed out in address order
        self._ready = rows
        return self._ready.pop()


class Executor:
    """A loaded network (see the module docstring)."""

    def __init__(
        self,
        program: NetworkProgram,
        library=None,
        *,
        fallback_mode: str = "auto",
        opencl_device: str | None = None,
        misaligned: str = "copy",
        max_requests: int = 4,
        npu_runtime: str = "stream",
        allocators=None,
        capabilities: dict | None = None,
        registry=None,
    ):
        check_runtime_options({"fallback_mode": fallback_mode, "opencl_device": opencl_device,
                               "misaligned": misaligned, "max_requests": max_requests,
                               "npu_runtime": npu_runtime})
        #: NPU kernels that run as command streams on the functional model, by symbol
        self._streams = dict(program.payloads) if npu_runtime == "stream" else {}
        self.program = program
        self.fallback_mode = fallback_mode
        self.misaligned = misaligned
        self.max_requests = max_requests
        self._closed = False
        self._lock = threading.Lock()
        #: held through each inference of a network with states (their order is the runs')
        self._state_lock = threading.Lock() if program.states else None
        self.last_run_stats: RunStats | None = None
        sgs = program.subgraphs

        # kernels
        self.device = None
        self._cl_funcs: dict = {}
        if any(sg.device == "opencl" for sg in sgs):
            if program.opencl is None:
                raise ExecutorError("the program has OpenCL subgraphs but no OpenCL kernels")
            self.device = shared_opencl_device(opencl_device)
            built = self.device.build(program.opencl)
            self._cl_funcs = dict(built.functions)
        self._funcs: dict = {}
        self._tvm = None
        if any(sg.device == "cpu" for sg in sgs):
            import tvm

            self._tvm = tvm
            if library is None:
                raise ExecutorError("the program has CPU subgraphs but no library")
            for sg in sgs:
                if sg.device != "cpu":
                    continue
                for st in sg.steps:
                    if st.func not in self._funcs:
                        try:
                            self._funcs[st.func] = library.get_function(st.func, query_imports=True)
                        except Exception as err:
                            raise ExecutorError(
                                f"kernel {st.func} not found in the model's library: {err}"
                            ) from None
        # constants: CPU tensors / GPU buffers, made once
        self._const_cpu: dict = {}
        self._const_dev: dict = {}
        for sg in sgs:
            for st in sg.steps:
                for a in st.args:
                    if a[0] != "c":
                        continue
                    c = program.constants[a[1]]
                    if sg.device == "cpu" and a[1] not in self._const_cpu:
                        self._const_cpu[a[1]] = self._tvm.runtime.tensor(c)
                    if sg.device == "opencl" and a[1] not in self._const_dev:
                        buf = self.device.alloc(max(c.nbytes, 1))
                        self.device.upload(buf, np.ascontiguousarray(c), blocking=True)
                        self._const_dev[a[1]] = buf

        # capabilities and the edge plan
        self.memory = FallbackMemoryManager(allocators)
        self.activations = MallocAllocator()
        self._device_allocations = 0
        self.capabilities = self._capabilities(capabilities or {}, registry)
        self.plans = self._plan()
        # what _check_inputs compares per call, built once (numpy's dtype names are slow)
        self._input_checks = [
            (tid, tuple(program.tensors[tid].shape), np.dtype(program.tensors[tid].dtype))
            for tid in program.inputs
        ]
        self.edge_report = EdgeReport(
            fallback_mode, str(self.device.info.device) if self.device is not None else "",
            self._edge_entries(),
        )

        # request slots
        self._slots: list = []
        self._free = _IdleSlots()
        # a network on one CPU backend runs as one flat list of calls (_FlatCalls) once a slot
        # has completed an inference: no edges, brackets or streams to handle per subgraph
        outs = list(program.outputs)
        self._flat_ok = (
            bool(sgs)
            and all(sg.device == "cpu" for sg in sgs)
            and len({sg.backend for sg in sgs}) == 1
            and not any(st.func in self._streams for sg in sgs for st in sg.steps)
            and not any(p.decisions or p.shared is not None for p in self.plans.values())
            and len(set(outs)) == len(outs)
            and len(set(program.inputs)) == len(program.inputs)
            and all(t in self.plans and self.plans[t].direct_output for t in outs)
        )
        self._pool: ThreadPoolExecutor | None = None

    # ------------------------------------------------------------------ set-up
    def _capabilities(self, override: dict, registry) -> dict:
        reg = registry or get_registry()
        out = {}
        for sg in self.program.subgraphs:
            if sg.backend in out:
                continue
            if sg.backend in override:
                out[sg.backend] = override[sg.backend]
            elif sg.device == "opencl":
                out[sg.backend] = self.device.info.capabilities(name=sg.backend)
            else:
                out[sg.backend] = runtime_capabilities(
                    sg.backend, reg.get(sg.backend).capabilities()
                )
        return out

    def _plan(self) -> dict:
        prog = self.program
        producer = prog.producer()
        consumers = prog.consumers()
        outputs = set(prog.outputs)
        plans = {}
        for tid, spec in prog.tensors.items():
            p = producer.get(tid)
            if p is None:
                continue  # never written (a constant-only value would be here)
            sg = prog.subgraphs[p] if p >= 0 else None
            plan = _TensorPlan(
                tid, spec.name, tuple(spec.shape), spec.dtype, spec.nbytes, p,
                sg.backend if sg else None, sg.device if sg else "caller",
                [c for c in consumers.get(tid, []) if c != p], tid in outputs,
            )
            if sg is not None:
                dst_backends = []
                for c in plan.consumers:
                    b = prog.subgraphs[c].backend
                    if b != sg.backend and b not in dst_backends:
                        dst_backends.append(b)
                if dst_backends:
                    decisions = plan_edges(
                        self.capabilities[sg.backend], [self.capabilities[b] for b in dst_backends],
                        self.fallback_mode, available=self.memory.available_sources,
                    )
                    plan.decisions = dict(zip(dst_backends, decisions))
                    plan.shared = next((d for d in decisions if d.is_import), None)
            plans[tid] = plan
        return plans

    def _edge_entries(self) -> list:
        out = []
        for plan in self.plans.values():
            for b, d in plan.decisions.items():
                names = tuple(
                    self.program.subgraphs[c].name
                    for c in plan.consumers
                    if self.program.subgraphs[c].backend == b
                )
                out.append(
                    EdgeEntry(
                        plan.name, plan.nbytes, self.program.subgraphs[plan.producer].name, names, d
                    )
                )
        return out

    # ------------------------------------------------------------------ slots and buffers
    def _acquire(self) -> _Slot:
        try:
            return self._free.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            if self._closed:
                raise ExecutorError("the network is unloaded")
            if len(self._slots) < self.max_requests:
                slot = _Slot(len(self._slots))
                self._slots.append(slot)
                return slot
        return self._free.get()

    def _release(self, slot: _Slot) -> None:
        self._free.put(slot)

    def _home_alloc(self, slot: _Slot, plan: _TensorPlan):
        """The allocation behind a tensor's home when an edge imports it (None otherwise)."""
        loc = ("home", plan.tid)
        if loc in slot.allocs:
            return slot.allocs[loc]
        d = plan.shared
        if d is None:
            return None
        if d.step is EdgeStep.FALLBACK_IMPORT:
            alloc = self.memory.for_decision((slot.index, plan.tid), plan.nbytes, d)
        else:  # MemImport: the producer's own output memory, made importable for the consumer
            alloc = self.activations.allocate(
                plan.nbytes, alignment=d.alignment, pad_to=d.size_multiple
            )
        slot.allocs[loc] = alloc
        return alloc

    def _host(self, slot: _Slot, loc) -> np.ndarray:
        """A CPU-side array for ``loc`` (made on first use, then kept)."""
        arr = slot.host.get(loc)
        if arr is not None:
            return arr
        plan = self.plans[loc[1]]
        alloc = self._home_alloc(slot, plan) if loc[0] == "home" else None
        if alloc is None:
            alloc = self.activations.allocate(plan.nbytes, alignment=CPU_ALIGNMENT)
            slot.allocs[loc] = alloc
        arr = alloc.view(plan.dtype, plan.shape)
        slot.host[loc] = arr
        return arr

    def _tvm_tensor(self, slot: _Slot, loc):
        t = slot.tvm.get(loc)
        if t is None:
            t = self._tvm.runtime.from_dlpack(self._host(slot, loc))
            slot.tvm[loc] = t
        return t

    def _dev(self, slot: _Slot, loc):
        """The GPU-side buffer for ``loc``: an import of its allocation, or device memory."""
        b = slot.dev.get(loc)
        if b is not None:
            return b
        plan = self.plans[loc[1]]
        alloc = self._home_alloc(slot, plan) if loc[0] == "home" else None
        if alloc is not None:
            b = self.device.import_allocation(alloc)
        else:
            b = self.device.alloc(plan.nbytes)
            with self._lock:
                self._device_allocations += 1
        slot.dev[loc] = b
        return b

    # ---------------------------------------------------------------- where a reader finds a tensor
    def _loc_for(self, tid: int, backend: str):
        plan = self.plans[tid]
        if plan.producer < 0:
            return ("input", tid)
        if backend == plan.src_backend:
            return ("home", tid)
        d = plan.decisions[backend]
        return ("home", tid) if d.is_import else ("copy", tid, backend)

    # ------------------------------------------------------------------ running
    def run(self, inputs) -> list:
        outs, _stats = self._infer(inputs)
        return outs

    def start_async(self, inputs) -> InferRequest:
        """Start one inference on ``inputs`` in a worker thread; ``wait()`` on the returned
        :class:`InferRequest` gives the outputs.

        The inputs are not copied here: the request reads them while it runs, after this
        call has returned. Where the zero-copy path applies (a C-contiguous, writeable array
        whose address is a multiple of ``CPU_ALIGNMENT`` for a CPU-side subgraph, or of the
        device's base-address alignment for an OpenCL import) the kernels read the caller's
        memory in place; otherwise the request copies the array into its slot, but also only
        once it runs. So the caller must not modify (or reuse as a buffer) an input array
        until ``wait()`` has returned or ``done()`` is True: a change made earlier may or may
        not reach the result. To reuse a buffer at once, pass a copy (``x.copy()``) or call
        :meth:`run`, which has finished with its inputs when it returns. The outputs are new
        arrays, the caller's to keep.
        """
        if self._closed:
            raise ExecutorError("the network is unloaded")
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=self.max_requests, thread_name_prefix="tvm-ethos-infer"
                )
            pool = self._pool
        arrays = list(inputs)  # read when the request runs: see the docstring
        return InferRequest(pool.submit(self._infer, arrays))

    def _check_inputs(self, inputs) -> list:
        inputs = list(inputs)
        prog = self.program
        if len(inputs) != len(prog.inputs):
            raise ExecutorError(f"the model takes {len(prog.inputs)} input(s), {len(inputs)} given")
        out = []
        for (tid, shape, dtype), x in zip(self._input_checks, inputs):
            x = np.asarray(x)
            if x.shape != shape:
                spec = prog.tensors[tid]
                raise ExecutorError(
                    f"input {spec.name!r}: shape {tuple(x.shape)}, expected {tuple(spec.shape)}"
                )
            if x.dtype != dtype:
                spec = prog.tensors[tid]
                raise ExecutorError(f"input {spec.name!r}: dtype {x.dtype}, expected {spec.dtype}")
            out.append(x)
        return out

    def reset_state(self) -> None:
        """Put the network's states (an LSTM's hidden and cell state) back to their reset
        values, as TFLite Micro's ``reset()`` (``ResetVariableTensors``) does: the next
        inference computes what the first one did. Nothing to do for a network without."""
        if self._state_lock is None:
            return
        with self._state_lock:
            for c in self.program.states:
                if c in self._const_cpu:
                    self._const_cpu[c].copyfrom(np.ascontiguousarray(self.program.constants[c]))

    def _infer(self, inputs):
        if self._state_lock is None:
            return self._infer_one(inputs)
        with self._state_lock:
            return self._infer_one(inputs)

    def _infer_one(self, inputs):
        if self._closed:
            raise ExecutorError("the network is unloaded")
        arrays = self._check_inputs(inputs)
        before = self._alloc_count()
        t0 = time.perf_counter()
        slot = self._acquire()
        if slot.flat is not None:
            return self._infer_flat(slot, arrays, before, t0)
        stats = RunStats(slot=slot.index)
        inf = _Inference(slot, stats)
        ok = False
        try:
            for tid, x in zip(self.program.inputs, arrays):
                inf.caller_host[tid] = x
            for i, sg in enumerate(self.program.subgraphs):
                if sg.device == "opencl":
                    self._run_gpu(inf, i, sg)
                else:
                    self._run_cpu(inf, i, sg)
            inf.step = "collecting the outputs"
            outs = self._collect(inf)
            # the slot's buffers are reused by the next request: nothing may still be in flight
            inf.step = "waiting for the GPU"
            for evs in list(inf.events.values()) + [inf.last_events]:
                for ev in evs:
                    if ev is not None:
                        ev.wait()
            ok = True
            slot.ready = True
            if self._flat_ok:
                slot.flat = self._flat_calls(slot)
        except ExecutorError:
            raise
        except Exception as err:
            raise InferenceError(inf.step, err) from err
        finally:
            if not ok:
                self._recover(inf)
            self._release(slot)
        stats.seconds = time.perf_counter() - t0
        stats.allocations = self._alloc_count() - before
        with self._lock:
            self.last_run_stats = stats
        return outs, stats

    def _flat_calls(self, slot: _Slot) -> _FlatCalls:
        """``slot``'s steps (bound by its first inference) as one list of calls
        (:class:`_FlatCalls`); tensors passed from one subgraph to the next are the slot's own
        buffers, bound as they are."""
        prog = self.program
        calls: list = []
        inputs: dict = {t: [] for t in prog.inputs}
        outputs: dict = {t: [] for t in prog.outputs}
        scratch: dict = {}
        for i, sg in enumerate(prog.subgraphs):
            where = f"subgraph {i} ({sg.name} on {sg.backend})"
            for func, name, args, late in slot.bound[i]:
                args = list(args)
                for k, tid, is_input in late:
                    if is_input and tid not in inputs:  # from an earlier subgraph: the slot's
                        args[k] = self._tvm_tensor(slot, ("home", tid))
                    else:
                        (inputs if is_input else outputs)[tid].append((len(calls), k))
                        scratch[len(calls)] = args
                calls.append((func, tuple(args), f"{where}: kernel {name}"))
        trace = [f"run {sg.name} on {sg.backend}" for sg in prog.subgraphs]
        outputs = [(_OutputArrays(self.plans[t]), where) for t, where in outputs.items()]
        return _FlatCalls(calls, list(calls), sorted(scratch), scratch, list(inputs.items()),
                          outputs, trace)

    def _infer_flat(self, slot: _Slot, arrays: list, before: int, t0: float):
        """One inference of an all-CPU network on a slot that completed one before: the
        caller's inputs and new output arrays put in the bound calls, then every kernel
        called in order (what :meth:`_infer` does, without its per-subgraph edge handling)."""
        flat = slot.flat
        calls, scratch = flat.calls, flat.scratch
        stats = RunStats(slot=slot.index)
        outs = []
        done = 0
        step = "preparing the inputs"
        try:
            for (tid, where), x in zip(flat.inputs, arrays):
                t = self._caller_tensor(slot, stats, tid, x)
                for c, k in where:
                    scratch[c][k] = t
            for made, where in flat.outputs:
                arr = made.new()
                outs.append(arr)
                t = self._tvm.runtime.from_dlpack(arr)
                stats.io_bytes_imported += made.plan.nbytes
                for c, k in where:
                    scratch[c][k] = t
            for c in flat.late:
                func, _args, name = calls[c]
                calls[c] = (func, tuple(scratch[c]), name)
            for func, args, step in calls:
                func(*args)
                done += 1
        except ExecutorError:
            raise
        except Exception as err:
            raise InferenceError(step, err) from err
        finally:
            stats.cpu_calls = done
            for _tid, where in flat.inputs + flat.outputs:  # the caller's arrays are not kept
                for c, k in where:
                    scratch[c][k] = None
            for c in flat.late:
                calls[c] = flat.base[c]
            self._release(slot)
        stats.trace.extend(flat.trace)
        stats.seconds = time.perf_counter() - t0
        stats.allocations = self._alloc_count() - before
        self.last_run_stats = stats
        return outs, stats

    def _recover(self, inf: _Inference) -> None:
        """After a failed inference: nothing of it may still run or stay mapped, and a slot that
        never completed an inference gives its buffers back (live counts as before the call)."""
        if self.device is not None:
            try:
                self.device.finish()  # kernels enqueued before the failure still write the slot
            except Exception:  # pragma: no cover - a broken queue: the buffers go at unload
                pass
        inf.caller_dev.clear()
        inf.tvm_tmp.clear()
        inf.results.clear()
        inf.events.clear()
        inf.last_events = []
        slot = inf.slot
        if slot.ready:
            return  # a complete slot: its buffers are the network's steady state, kept for reuse
        _release_device_buffers(slot.dev)
        slot.bound.clear()
        slot.flat = None
        slot.tvm.clear()
        slot.host.clear()
        for loc, alloc in slot.allocs.items():
            if loc[0] == "home" and (slot.index, loc[1]) in self.memory:
                self.memory.release((slot.index, loc[1]))
            else:
                alloc.free()
        slot.allocs.clear()

    def _alloc_count(self) -> int:
        return self.memory.allocations + self.activations.allocations + self._device_allocations

    # ---- caller inputs
    def _caller_cpu(self, inf: _Inference, tid: int):
        """A caller input as a TVM tensor: in place when aligned, else staged or refused."""
        t = inf.tvm_tmp.get(("input", tid))
        if t is None:
            t = self._caller_tensor(inf.slot, inf.stats, tid, inf.caller_host[tid])
            inf.tvm_tmp[("input", tid)] = t
        return t

    def _caller_tensor(self, slot: _Slot, stats: RunStats, tid: int, x: np.ndarray):
        """``x`` (the caller's input ``tid``) as a TVM tensor: in place when aligned, else
        copied into ``slot``'s staging buffer (or refused, ``misaligned="reject"``)."""
        plan = self.plans[tid]
        flags = x.flags
        contiguous, writeable = flags.c_contiguous, flags.writeable
        addr = _address(x) if contiguous and writeable else None
        if addr is not None and not addr % CPU_ALIGNMENT:
            stats.io_bytes_imported += plan.nbytes
            arr = x
        else:
            why = (
                "not C-contiguous" if not contiguous
                else "read-only (DLPack cannot share it)" if not writeable
                else f"address 0x{addr:x} is not a multiple of {CPU_ALIGNMENT} B"
            )
            if self.misaligned == "reject":
                raise MisalignedInputError(f"input {plan.name!r}: {why} (misaligned='reject')")
            arr = self._host(slot, ("stage", tid))
            np.copyto(arr, x)
            stats.io_bytes_copied += plan.nbytes
            stats.copies += 1
            stats.trace.append(f"stage input {plan.name} ({why})")
        return self._tvm.runtime.from_dlpack(arr)

    def _caller_gpu(self, inf: _Inference, tid: int):
        """A caller input on the GPU: imported in place (USE_HOST_PTR) where importing is the
        chosen path and the address suits the device, else uploaded (or refused)."""
        b = inf.caller_dev.get(tid)
        if b is not None:
            return b
        x = inf.caller_host[tid]
        plan = self.plans[tid]
        dev = self.device
        want_import = self.fallback_mode == "import" or (
            self.fallback_mode == "auto" and dev.info.import_preferred
        )
        aligned = (
            x.flags.c_contiguous and x.flags.writeable
            and is_aligned(int(x.ctypes.data), dev.info.base_address_alignment)
        )
        if want_import and aligned:
            b = dev.import_host(x, misaligned="reject")
            inf.stats.io_bytes_imported += plan.nbytes
        else:
            if want_import and self.misaligned == "reject":
                raise MisalignedInputError(
                    f"input {plan.name!r}: address 0x{int(x.ctypes.data):x} is not a multiple of "
                    f"{dev.info.base_address_alignment} B (misaligned='reject')"
                )
            b = self._dev(inf.slot, ("stage", tid))
            ev = dev.upload(b, np.ascontiguousarray(x))
            inf.events[("input", tid)] = [ev]
            inf.stats.io_bytes_copied += plan.nbytes
            inf.stats.copies += 1
            inf.stats.trace.append(f"upload input {plan.name}")
        inf.caller_dev[tid] = b
        return b

    # ---- making a tensor readable where a subgraph runs
    @staticmethod
    def _count_import(inf: _Inference, plan: _TensorPlan, backend: str) -> None:
        if plan.src_backend == backend or (plan.tid, backend) in inf.imported:
            return
        inf.imported.add((plan.tid, backend))
        inf.stats.edge_bytes_imported += plan.nbytes
        inf.stats.trace.append(
            f"{plan.decisions[backend].step.value} {plan.name} {plan.src_backend} -> {backend}"
        )

    def _ready_cpu(self, inf: _Inference, tid: int, backend: str, accessed: list):
        """The TVM tensor a CPU subgraph on ``backend`` reads for ``tid``."""
        loc = self._loc_for(tid, backend)
        if loc[0] == "input":
            return self._caller_cpu(inf, tid)
        plan = self.plans[tid]
        slot = inf.slot
        if loc[0] == "home":
            if plan.src_device == "opencl":
                # GPU-produced, imported memory: wait on the producer's event (Arm NN's sync)
                b = self._dev(slot, loc)
                self.device.begin_host_access(b, wait_for=inf.events.get(loc))
                accessed.append(b)
                inf.stats.gpu_syncs += 1
                inf.stats.trace.append(
                    f"sync {plan.name}: wait for the GPU before {backend} reads it"
                )
            self._count_import(inf, plan, backend)
            return self._tvm_tensor(slot, loc)
        # MemCopy into this backend's own memory
        if loc not in inf.copied:
            dst = self._host(slot, loc)
            if plan.src_device == "opencl":
                src = self._dev(slot, ("home", tid))
                self.device.download(
                    dst, src, wait_for=inf.events.get(("home", tid)), blocking=True
                )
                inf.stats.gpu_syncs += 1
            else:
                np.copyto(dst, self._host(slot, ("home", tid)))
            inf.copied.add(loc)
            inf.stats.edge_bytes_copied += plan.nbytes
            inf.stats.copies += 1
            inf.stats.trace.append(f"MemCopy {plan.name} {plan.src_backend} -> {backend}")
        return self._tvm_tensor(slot, loc)

    def _ready_gpu(self, inf: _Inference, tid: int, backend: str, waits: list):
        """The DeviceBuffer a GPU subgraph reads for ``tid`` (events to wait for go to
        ``waits``)."""
        loc = self._loc_for(tid, backend)
        if loc[0] == "input":
            b = self._caller_gpu(inf, tid)
            waits.extend(inf.events.get(("input", tid), []))
            return b
        plan = self.plans[tid]
        slot = inf.slot
        if loc[0] == "home":
            waits.extend(inf.events.get(loc, []))
            self._count_import(inf, plan, backend)
            return self._dev(slot, loc)
        if loc not in inf.copied:
            dst = self._dev(slot, loc)
            ev = self.device.upload(dst, self._host(slot, ("home", tid)))
            inf.events[loc] = [ev]
            inf.copied.add(loc)
            inf.stats.edge_bytes_copied += plan.nbytes
            inf.stats.copies += 1
            inf.stats.trace.append(f"MemCopy {plan.name} {plan.src_backend} -> {backend}")
        waits.extend(inf.events.get(loc, []))
        return self._dev(slot, loc)

    # ---- subgraphs
    def _out_cpu(self, inf: _Inference, tid: int):
        plan = self.plans[tid]
        if plan.direct_output:
            t = inf.tvm_tmp.get(("result", tid))
            if t is None:
                arr = _aligned_output(plan)
                inf.results[tid] = arr
                t = self._tvm.runtime.from_dlpack(arr)
                inf.tvm_tmp[("result", tid)] = t
                inf.stats.io_bytes_imported += plan.nbytes
            return t
        return self._tvm_tensor(inf.slot, ("home", tid))

    def _run_cpu(self, inf: _Inference, i: int, sg) -> None:
        accessed: list = []
        mapped_out: list = []
        allocs: list = []
        try:
            self._run_cpu_body(inf, i, sg, accessed, mapped_out, allocs)
        except BaseException:
            # close what was opened (CPU access brackets, maps) before the error goes up
            for a, w in allocs:
                try:
                    a.end_cpu_access(read=not w, write=w)
                except Exception:  # pragma: no cover
                    pass
            for b in accessed + [b for _t, b in mapped_out]:
                try:
                    self.device.end_host_access(b)
                except Exception:  # pragma: no cover
                    pass
            raise

    def _run_cpu_body(
        self, inf: _Inference, i: int, sg, accessed: list, mapped_out: list, allocs: list
    ) -> None:
        slot = inf.slot
        where = f"subgraph {i} ({sg.name} on {sg.backend})"
        inf.step = f"{where}: preparing its inputs"
        inputs = {t: self._ready_cpu(inf, t, sg.backend, accessed) for t in sg.inputs}
        inf.step = f"{where}: preparing its outputs"
        # outputs other backends import: open them for CPU writes (map rule; nothing on PoCL)
        for t in sg.outputs:
            plan = self.plans[t]
            if plan.shared is not None and any(
                self.program.subgraphs[c].device == "opencl"
                and self._loc_for(t, self.program.subgraphs[c].backend)[0] == "home"
                for c in plan.consumers
            ):
                b = self._dev(slot, ("home", t))
                self.device.begin_host_access(b, write=True)
                mapped_out.append((t, b))
        # dma-buf: the CPU access bracket (DMA_BUF_IOCTL_SYNC) around every read and write
        for t in sg.outputs:
            if not self.plans[t].direct_output:
                self._host(slot, ("home", t))
        bracket = [
            (slot.allocs[("home", t)], False) for t in sg.inputs if ("home", t) in slot.allocs
        ]
        bracket += [
            (slot.allocs[("home", t)], True) for t in sg.outputs if ("home", t) in slot.allocs
        ]
        for a, w in bracket:
            a.begin_cpu_access(read=not w, write=w)
            allocs.append((a, w))
        bound = slot.bound.get(i)
        if bound is None:
            bound = slot.bound[i] = self._bind_steps(inf, sg, where)
        done = 0
        try:
            for func, name, args, late in bound:
                if late:
                    args = list(args)
                    for k, tid, is_input in late:
                        args[k] = inputs[tid] if is_input else self._out_cpu(inf, tid)
                func(*args)
                if name in self._streams:
                    inf.stats.trace.append(f"stream {name} on the Ethos-U functional model")
                done += 1
        except BaseException:
            inf.step = f"{where}: kernel {bound[done][1]}"
            raise
        finally:
            inf.stats.cpu_calls += done
        inf.step = f"{where}: handing its outputs over"
        while allocs:
            a, w = allocs.pop()
            a.end_cpu_access(read=not w, write=w)
        while accessed:
            self.device.end_host_access(accessed.pop())
        while mapped_out:
            t, b = mapped_out.pop()
            ev = self.device.end_host_access(b, wrote=True)
            inf.events[("home", t)] = [ev] if ev is not None else []
        inf.stats.trace.append(f"run {sg.name} on {sg.backend}")

    def _bind_steps(self, inf: _Inference, sg, where: str) -> list:
        """``sg``'s steps as ``(function, name, args, late)``: constants and the slot's own
        buffers bound once, since they stay the same for the slot's life; ``late`` lists the
        positions, with their tensor ids, of what changes per inference (the caller's inputs
        and the arrays returned as outputs)."""
        bound = []
        for st in sg.steps:
            inf.step = f"{where}: kernel {st.func}"
            args, late = [], []
            reads = [(a, a[0] == "t" and a[1] in sg.inputs) for a in st.args]
            for k, (a, is_input) in enumerate(reads + [(("t", o), False) for o in st.outs]):
                if a[0] == "c":
                    args.append(self._const_cpu[a[1]])
                elif is_input or self.plans[a[1]].direct_output:
                    args.append(None)
                    late.append((k, a[1], is_input))
                else:
                    args.append(self._out_cpu(inf, a[1]))
            bound.append((self._kernel(st), st.func, tuple(args), tuple(late)))
        return bound

    def _kernel(self, st):
        """What runs step ``st`` on the CPU: its compiled function, or for an NPU kernel with a
        generated command stream (``npu_runtime="stream"``), the stream on the functional model."""
        payload = self._streams.get(st.func)
        if payload is None:
            return self._funcs[st.func]
        n_outs = len(st.outs)
        return lambda *args: _run_stream(payload, args, n_outs)

    def _run_gpu(self, inf: _Inference, i: int, sg) -> None:
        slot = inf.slot
        where = f"subgraph {i} ({sg.name} on {sg.backend})"
        inf.step = f"{where}: preparing its inputs"
        waits: list = []
        inputs = {t: self._ready_gpu(inf, t, sg.backend, waits) for t in sg.inputs}
        ev = None
        for st in sg.steps:
            inf.step = f"{where}: OpenCL launch of {st.func}"
            bufs = []
            for a in st.args:
                if a[0] == "c":
                    bufs.append(self._const_dev[a[1]])
                elif a[1] in inputs:
                    bufs.append(inputs[a[1]])
                else:
                    bufs.append(self._dev(slot, ("home", a[1])))
            bufs.extend(self._dev(slot, ("home", o)) for o in st.outs)
            ev = self._cl_funcs[st.func].launch(bufs, wait_for=waits or None)
            waits = []  # one in-order queue: later kernels follow
            inf.stats.gpu_launches += 1
        for t in sg.outputs:
            inf.events[("home", t)] = [ev] if ev is not None else []
        if ev is not None:
            inf.last_events = [ev]
        inf.stats.trace.append(
            f"launch {sg.name} on {sg.backend} ({len(sg.steps)} kernel(s), async)"
        )

    # ---- outputs
    def _collect(self, inf: _Inference) -> list:
        outs = []
        seen: set = set()
        for tid in self.program.outputs:
            plan = self.plans[tid]
            if plan.direct_output and tid in inf.results and tid not in seen:
                outs.append(inf.results[tid])
                seen.add(tid)
                continue
            res = _aligned_output(plan)
            if plan.producer < 0:
                np.copyto(res, inf.caller_host[tid])
            elif plan.src_device == "opencl":
                loc = ("home", tid)
                b = self._dev(inf.slot, loc)
                if plan.shared is not None:
                    host = self.device.begin_host_access(b, wait_for=inf.events.get(loc))
                    np.copyto(
                        res.reshape(-1).view(np.uint8),
                        np.asarray(host).reshape(-1).view(np.uint8)[: plan.nbytes],
                    )
                    self.device.end_host_access(b)
                else:
                    self.device.download(res, b, wait_for=inf.events.get(loc), blocking=True)
                inf.stats.gpu_syncs += 1
            else:
                np.copyto(res, self._host(inf.slot, ("home", tid)))
            inf.stats.io_bytes_copied += plan.nbytes
            inf.stats.copies += 1
            outs.append(res)
            seen.add(tid)
        return outs

    # ------------------------------------------------------------------ memory, unload
    def memory_stats(self) -> MemoryStats:
        fm = self.memory.stats()
        live = self.activations.live()
        dev_buffers = sum(
            1 for s in self._slots for b in s.dev.values() if getattr(b, "kind", "") == "device"
        )
        return MemoryStats(
            fallback_buffers=fm.buffers,
            fallback_allocations=fm.allocations,
            fallback_frees=fm.frees,
            activation_buffers=live.count,
            activation_allocations=self.activations.allocations,
            device_buffers=dev_buffers,
            device_allocations=self._device_allocations,
            slots=len(self._slots),
        )

    @property
    def closed(self) -> bool:
        return self._closed

    def unload(self) -> int:
        """Wait for requests in flight, free every buffer; returns the fallback buffers freed."""
        with self._lock:
            if self._closed:
                return 0
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        if self.device is not None:
            self.device.finish()
        freed = self.memory.unload()
        self.activations.free_all()
        for s in self._slots:
            _release_device_buffers(s.dev)
            s.host.clear()
            s.bound.clear()
            s.flat = None
            s.tvm.clear()
            s.allocs.clear()
        _release_device_buffers(self._const_dev)
        return freed

    def __del__(self):  # pragma: no cover - best effort
        try:
            if not self._closed:
                self.unload()
        except Exception:
            pass
