"""The runtime under faults, over time and under concurrency (issue 8, rfcs/0006 section 4).

One small network, compiled once for the module, split four ways so that every kind of step
sits in the middle of an inference: NPU (emulator) -> GPU (OpenCL on PoCL) -> NPU -> CPU (llvm),
with FallbackImport buffers at the three edges. Tensors are 1x8x8x4 int8, so an inference
takes well under a millisecond and the counts below fit the CI budget on 2 cores.

1. Faults injected into one inference (monkeypatched): an OpenCL launch failure, an allocator
   failure and an NPU emulator error, each on a warm network (slot already populated) and on a
   cold one (first inference). The call raises :class:`InferenceError` (a ``TvmEthosError``)
   naming the step; the allocators' live counts are back where they were before the call (warm:
   the steady state; cold: nothing); no slot is lost; the next inference on the same loaded
   network is bit-exact with the LiteRT reference interpreter. An OpenCL *build* failure at load
   raises ``OpenCLError`` naming the build, caches nothing and leaks no executor, fd or buffer.
2. Leaks: N load/unload cycles and M inferences on one loaded network, resident memory and open
   fds measured after a warm-up and at the end (tolerances below); every fallback buffer freed.
3. Concurrency: 8 threads issue async requests on one loaded network (4 slots, so requests
   wait for slots); each output is compared with the oracle output of its own distinct input.

Counts: N = 1,000, M = 10,000, R = 1,000 requests unless a measured rate says they would not fit
their time share (~25 s / ~20 s / ~20 s) on this machine; then the largest count that fits is
used and the test prints so. ``TVM_ETHOS_LONG=1`` always runs the full counts.
"""
from __future__ import annotations

import gc
import os
import threading
import time
import zlib

import numpy as np
import pytest

pytest.importorskip("pyopencl")

import pyopencl as cl  # noqa: E402
from graph_builder import Graph  # noqa: E402

import tvm_ethos  # noqa: E402
from tvm_ethos.errors import TvmEthosError  # noqa: E402
from tvm_ethos.runtime.allocators import AllocationError, MemorySource, aligned_copy  # noqa: E402
from tvm_ethos.runtime.executor import Executor, InferenceError, shared_opencl_device  # noqa: E402
from tvm_ethos.runtime.fallback_memory import EdgeStep  # noqa: E402
from tvm_ethos.runtime.opencl_device import OpenCLError, list_devices  # noqa: E402

if not list_devices():  # pragma: no cover - PoCL is installed with the opencl extra
    pytest.skip("no OpenCL device", allow_module_level=True)

NPU = "ethos-n"
SHAPE = (1, 8, 8, 4)
LONG = os.environ.get("TVM_ETHOS_LONG", "") not in ("", "0")
FULL_CYCLES, FULL_INFERENCES, FULL_REQUESTS = 1000, 10_000, 1000
# tolerances, after a warm-up: allocator noise of the Python heap, not a per-iteration leak
RSS_TOLERANCE = 4 << 20  # bytes (1,000 cycles x 4 KiB leaked would be caught)
FD_TOLERANCE = 0


# ------------------------------------------------------------------------------ the network
@pytest.fixture(scope="module")
def net():
    """(model bytes, CompiledModel): NPU -> GPU -> NPU -> CPU, compiled once."""
    g = Graph(np.random.RandomState(zlib.crc32(b"reliability") % 1000))
    x = g.input(SHAPE)
    a = g.conv2d(x, 4)  # NPU
    b = g.conv2d(a, 4, kernel=(9, 1))  # 9x1: too tall for Ethos-N -> GPU
    c = g.conv2d(b, 4)  # NPU
    model = g.build([g.pool("avg", c)])  # 2x2 avg pool: not on Ethos-N, GPU asked not to -> CPU
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=f"{NPU},opencl",
                           cpu_ops="avg_pool2d", fallback_mode="import")
    backends = [sg.backend for sg in cm.program.subgraphs]
    assert backends == [NPU, "opencl", NPU, "llvm"], cm.program.summary()
    yield model, cm
    cm.unload()


class Oracle:
    """LiteRT's reference kernels, one interpreter reused (the NPU emulator's arithmetic)."""

    def __init__(self, model: bytes):
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        self.it = Interpreter(model_content=bytes(model),
                              experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        self.it.allocate_tensors()
        self.i = self.it.get_input_details()[0]["index"]
        self.o = self.it.get_output_details()[0]["index"]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.it.set_tensor(self.i, x)
        self.it.invoke()
        return self.it.get_tensor(self.o).copy()


@pytest.fixture(scope="module")
def oracle(net):
    return Oracle(net[0])


aligned = aligned_copy


def make_input(seed: int) -> np.ndarray:
    return aligned(np.random.RandomState(seed).randint(-128, 128, size=SHAPE).astype(np.int8))


def check(outs, ref) -> None:
    assert len(outs) == 1
    got = outs[0].reshape(ref.shape)
    assert np.array_equal(got, ref), f"max diff {np.abs(got.astype(int) - ref.astype(int)).max()}"


def new_executor(cm, **opts) -> Executor:
    opts.setdefault("fallback_mode", "import")
    return Executor(cm.program, cm.executable.mod, **opts)


def live(ex: Executor) -> dict:
    """Everything the loaded network holds, per allocator / kind."""
    out = {f"fallback:{s.value}": a.live().count for s, a in ex.memory.allocators.items()}
    ms = ex.memory_stats()
    out.update(fallback_buffers=ms.fallback_buffers, activations=ms.activation_buffers,
               device_buffers=ms.device_buffers,
               gpu_buffers=sum(len(s.dev) for s in ex._slots),
               host_views=sum(len(s.host) for s in ex._slots))
    return out


def slots_free(ex: Executor) -> bool:
    return ex._free.qsize() == len(ex._slots)


def rss() -> int:
    try:
        import psutil

        return psutil.Process().memory_info().rss
    except ImportError:  # pragma: no cover
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def fit(full: int, per_item_s: float, share_s: float, what: str) -> int:
    """The full count, or the largest that fits ``share_s`` at the measured rate (said aloud)."""
    if LONG or full * per_item_s <= share_s:
        return full
    n = max(1, int(share_s / per_item_s))
    print(f"\n{what}: {n} instead of {full} ({per_item_s * 1e3:.2f} ms each would take "
          f"{full * per_item_s:.0f} s; TVM_ETHOS_LONG=1 runs {full})")
    return n


# ------------------------------------------------------------------------------ 1. faults
def _fail_launch(monkeypatch, at: int = 1):
    """The ``at``-th OpenCL kernel enqueue from now fails as a driver would report it."""
    real = cl.enqueue_nd_range_kernel
    count = [0]

    def enqueue(*a, **k):
        count[0] += 1
        if count[0] == at:
            raise cl.RuntimeError("clEnqueueNDRangeKernel failed: OUT_OF_RESOURCES (injected)")
        return real(*a, **k)

    monkeypatch.setattr(cl, "enqueue_nd_range_kernel", enqueue)
    return count


def _fail_emulator(monkeypatch, ex: Executor):
    """The second NPU subgraph's emulator kernel fails (after the GPU kernel was enqueued)."""
    import tvm

    sg = ex.program.subgraphs[2]
    func = sg.steps[-1].func
    real = ex._funcs[func]

    def kernel(*args):
        real(*args)  # it has written part of its output by the time it fails
        raise tvm.error.InternalError("ethos-n emulator: command stream error at op 0 (injected)")

    monkeypatch.setitem(ex._funcs, func, kernel)
    for slot in ex._slots:
        # a warm slot bound its kernels on its first run; it binds the failing one afresh, and
        # gets its own bindings back when the patch is undone
        monkeypatch.setattr(slot, "bound", {})
    return func


def _fail_allocation(monkeypatch, allocator, at: int = 1):
    real = allocator._obtain
    count = [0]

    def obtain(nbytes, padded, alignment):
        count[0] += 1
        if count[0] == at:
            raise AllocationError(f"malloc of {padded} B failed: out of memory (injected)")
        return real(nbytes, padded, alignment)

    monkeypatch.setattr(allocator, "_obtain", obtain)
    return count


FAULTS = ["opencl_launch", "allocator", "npu_emulator"]


@pytest.mark.parametrize("warm", [True, False], ids=["warm", "cold"])
@pytest.mark.parametrize("fault", FAULTS)
def test_fault_mid_inference(net, oracle, monkeypatch, fault, warm):
    model, cm = net
    ex = new_executor(cm, max_requests=2)
    try:
        assert {e.step for e in ex.edge_report} == {EdgeStep.FALLBACK_IMPORT}
        x0, x1 = make_input(10), make_input(11)
        ref0, ref1 = oracle(x0), oracle(x1)
        if warm:
            check(ex.run([x0]), ref0)
        before = live(ex)
        x_bad = x1
        with monkeypatch.context() as mp:
            if fault == "opencl_launch":
                _fail_launch(mp)
                step = "subgraph 1 (tvm_ethos_seg0_opencl on opencl): OpenCL launch"
            elif fault == "npu_emulator":
                func = _fail_emulator(mp, ex)
                step = f"subgraph 2 ({ex.program.subgraphs[2].name} on {NPU}): kernel {func}"
            elif warm:
                # a warm slot allocates nothing more, except to stage a misaligned caller buffer
                raw = np.empty(x1.nbytes + 128, np.uint8)
                off = (-int(raw.ctypes.data)) % 64 + 1
                x_bad = raw[off:off + x1.nbytes].view(np.int8).reshape(SHAPE)
                x_bad[...] = x1
                _fail_allocation(mp, ex.activations)
                step = f"subgraph 0 ({ex.program.subgraphs[0].name} on {NPU}): preparing its inputs"
            else:
                # the second edge buffer (GPU output): after the NPU kernel has run
                _fail_allocation(mp, ex.memory.allocators[MemorySource.MALLOC], at=2)
                step = "subgraph 1 (tvm_ethos_seg0_opencl on opencl)"
            with pytest.raises(InferenceError) as info:
                ex.run([x_bad])
        err = info.value
        assert isinstance(err, TvmEthosError)
        msg = str(err)
        assert msg.startswith("inference failed at ") and step in msg, msg
        assert "\n" not in msg and "injected" in msg, msg
        assert err.__cause__ is not None
        # every buffer of the failed inference released: counts as before the call
        assert live(ex) == before, (live(ex), before)
        assert slots_free(ex)
        assert not any(b._mapped is not None for s in ex._slots for b in s.dev.values())
        # the next inference on the same loaded network is right (twice: slot reuse too)
        check(ex.run([x1]), ref1)
        steady = live(ex)
        check(ex.run([x0]), ref0)
        assert live(ex) == steady and ex.last_run_stats.allocations == 0
        if not warm:
            assert before == {k: 0 for k in before}
    finally:
        ex.unload()
    assert live(ex)["fallback:malloc"] == 0 and ex.activations.live().count == 0


def test_fault_in_async_request(net, oracle, monkeypatch):
    """A failure inside a request started with start_async comes back from wait()."""
    _model, cm = net
    ex = new_executor(cm, max_requests=2)
    try:
        x = make_input(12)
        ref = oracle(x)
        check(ex.start_async([x]).wait(60), ref)
        before = live(ex)
        with monkeypatch.context() as mp:
            _fail_emulator(mp, ex)
            req = ex.start_async([x])
            with pytest.raises(InferenceError, match="emulator"):
                req.wait(60)
        assert live(ex) == before and slots_free(ex)
        check(ex.start_async([x]).wait(60), ref)
    finally:
        ex.unload()


def test_opencl_build_failure_at_load(net, oracle, monkeypatch):
    """The OpenCL program fails to build (real PoCL build of broken source): a clear
    OpenCLError at load, nothing cached, no executor / buffer / fd left behind."""
    _model, cm = net
    dev = shared_opencl_device()
    real_program = cl.Program
    sources = []

    def program(ctx, src):
        sources.append(src)
        return real_program(ctx, src + "\n#error injected build failure\n")

    gc.collect()
    n_exec = sum(isinstance(o, Executor) for o in gc.get_objects())
    fd0 = fds()
    with monkeypatch.context() as mp:
        mp.setattr(dev, "_programs", {})  # not built yet on this device
        mp.setattr(cl, "Program", program)
        with pytest.raises(OpenCLError) as info:
            new_executor(cm)
        assert sources, "the build was not attempted"
        assert dev._programs == {}  # a failed build is not cached
    msg, is_ours = str(info.value), isinstance(info.value, TvmEthosError)
    del info  # its traceback holds the half-made executor's frame
    assert is_ours
    assert msg.startswith(f"OpenCL build failed on {dev.info.device}"), msg[:300]
    assert "injected build failure" in msg
    gc.collect()
    assert sum(isinstance(o, Executor) for o in gc.get_objects()) == n_exec
    assert fds() == fd0
    # the device is still usable: a load after the failure builds and runs
    ex = new_executor(cm)
    try:
        x = make_input(13)
        check(ex.run([x]), oracle(x))
    finally:
        ex.unload()


# ------------------------------------------------------------------------------ 2. leaks
def test_load_unload_cycles_do_not_leak(net, oracle):
    model, cm = net
    cm.unload()
    x = make_input(20)
    ref = oracle(x)
    n_edges = 3

    def cycle():
        out = cm.run(x)
        ex = cm._executor
        assert ex.memory.stats().buffers == n_edges
        freed = cm.unload()
        assert freed == n_edges and ex.closed
        assert ex.memory.allocators[MemorySource.MALLOC].live().count == 0
        assert ex.activations.live().count == 0
        return out

    check(cycle(), ref)
    warm = 50
    t0 = time.perf_counter()
    for _ in range(warm):
        cycle()
    per = (time.perf_counter() - t0) / warm
    n = fit(FULL_CYCLES, per, 25.0, "load/unload cycles")
    gc.collect()
    rss0, fd0 = rss(), fds()
    for k in range(n - warm):
        out = cycle()
        if k % 100 == 0:
            check(out, ref)
    check(cycle(), ref)
    gc.collect()
    d_rss, d_fd = rss() - rss0, fds() - fd0
    print(
        f"\n{n} load/unload cycles: {per * 1e3:.2f} ms each, RSS {d_rss / 1024:+.0f} KiB, "
        f"fds {d_fd:+d}"
    )
    assert d_fd <= FD_TOLERANCE, f"{d_fd} fds leaked over {n} cycles"
    assert d_rss <= RSS_TOLERANCE, f"RSS grew {d_rss / 1024:.0f} KiB over {n} cycles"


def test_many_inferences_on_one_network_do_not_leak(net, oracle):
    _model, cm = net
    ex = new_executor(cm)
    try:
        xs = [make_input(30 + k) for k in range(8)]
        refs = [oracle(x) for x in xs]
        check(ex.run([xs[0]]), refs[0])
        steady, stats0 = live(ex), ex.memory_stats()
        warm = 500
        t0 = time.perf_counter()
        for k in range(warm):
            check(ex.run([xs[k % 8]]), refs[k % 8])
        per = (time.perf_counter() - t0) / warm
        m = fit(FULL_INFERENCES, per, 20.0, "inferences on one network")
        gc.collect()
        rss0, fd0 = rss(), fds()
        for k in range(m - warm):
            check(ex.run([xs[k % 8]]), refs[k % 8])
            assert ex.last_run_stats.allocations == 0
        gc.collect()
        d_rss, d_fd = rss() - rss0, fds() - fd0
        print(
            f"\n{m} inferences: {per * 1e3:.3f} ms each, RSS {d_rss / 1024:+.0f} KiB, fds {d_fd:+d}"
        )
        # nothing allocated after the first
        assert live(ex) == steady and ex.memory_stats() == stats0
        assert d_fd <= FD_TOLERANCE, f"{d_fd} fds leaked over {m} inferences"
        assert d_rss <= RSS_TOLERANCE, f"RSS grew {d_rss / 1024:.0f} KiB over {m} inferences"
    finally:
        freed = ex.unload()
    assert freed == 3 and ex.memory.stats().frees == 3
    assert ex.memory.allocators[MemorySource.MALLOC].live().count == 0
    assert ex.activations.live().count == 0


# ------------------------------------------------------------------------------ 3. concurrency
def test_eight_threads_async_requests(net, oracle):
    _model, cm = net
    threads, slots = 8, 4
    ex = new_executor(cm, max_requests=slots)
    try:
        x = make_input(40)
        check(ex.run([x]), oracle(x))
        t0 = time.perf_counter()
        for _ in range(20):
            ex.start_async([x]).wait(60)
        per = (time.perf_counter() - t0) / 20 / 2  # ~2 requests run at once on 2 cores
        n = fit(FULL_REQUESTS, per, 20.0, "async requests")
        n -= n % threads
        rs = np.random.RandomState(41)
        xs = [aligned(rs.randint(-128, 128, size=SHAPE).astype(np.int8)) for _ in range(n)]
        refs = [oracle(x) for x in xs]
        assert len({r.tobytes() for r in refs}) > n * 0.99  # outputs tell requests apart
        results: list = [None] * n
        errors: list = []
        barrier = threading.Barrier(threads)

        def worker(w: int):
            try:
                mine = list(range(w, n, threads))
                barrier.wait()
                for i in range(0, len(mine), 4):  # a few requests in flight per thread
                    batch = [(j, ex.start_async([xs[j]])) for j in mine[i:i + 4]]
                    for j, req in batch:
                        results[j] = (req.wait(120)[0], req.stats.slot)
            except BaseException as err:  # pragma: no cover - reported below
                errors.append(err)

        t0 = time.perf_counter()
        ts = [threading.Thread(target=worker, args=(w,)) for w in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(300)
        wall = time.perf_counter() - t0
        assert not errors, errors[:3]
        bad = [j for j in range(n) if results[j] is None
               or not np.array_equal(results[j][0].reshape(refs[j].shape), refs[j])]
        assert not bad, f"{len(bad)} of {n} requests wrong or missing, e.g. {bad[:10]}"
        used = {r[1] for r in results}
        print(f"\n{n} requests from {threads} threads in {wall:.1f} s, slots used {sorted(used)}")
        assert used <= set(range(slots))
        assert ex.memory_stats().slots <= slots and slots_free(ex)
        assert ex.memory.stats().buffers == 3 * ex.memory_stats().slots
    finally:
        ex.unload()
    assert ex.memory.allocators[MemorySource.MALLOC].live().count == 0
    assert ex.activations.live().count == 0
