"""TVM-generated OpenCL kernels on PyOpenCL (PoCL here): results, launch recipe, zero-copy."""
from __future__ import annotations

import numpy as np
import pytest

cl = pytest.importorskip(
    "pyopencl", reason="pyopencl not installed (pip install 'tvm-ethos[opencl]')"
)

from tvm_ethos.host.opencl.opencl_extraction import UnsupportedKernelError, extract_opencl  # noqa: E402
from tvm_ethos.runtime.allocators import (  # noqa: E402
    LiveStats,
    MallocAllocator,
    MemfdAllocator,
    MemorySource,
)
from tvm_ethos.runtime.fallback_memory import (  # noqa: E402
    BackendCapabilities,
    EdgeStep,
    FallbackMemoryManager,
    plan_edge,
)
from tvm_ethos.runtime.opencl_device import (  # noqa: E402
    DEVICE_ENV_VAR,
    MisalignedBufferError,
    OpenCLDevice,
    OpenCLDeviceInfo,
    OpenCLModuleSpec,
    OpenCLUnavailableError,
    device_info,
    list_devices,
    select_device,
)

if not list_devices():
    pytest.skip(
        "no OpenCL platform found: install pyopencl[pocl] (PoCL CPU device) or a GPU driver ICD",
        allow_module_level=True,
    )

tvm = pytest.importorskip("tvm", reason="apache-tvm is needed to generate the kernels")
from tvm import te, tirx, topi  # noqa: E402

ZX, ZY, MULT, SHIFT = -3, 5, 1518500250, 38  # int8 requantisation, TFLite-style fixed point


def _add_i8():
    a = te.placeholder((1000,), "int8", name="A")  # 1000: not a multiple of the 256-wide block
    b = te.placeholder((1000,), "int8", name="B")
    c = te.compute((1000,), lambda i: a[i] + b[i], name="C")
    return te.create_prim_func([a, b, c])


def _conv_i8():
    """3x3 int8 conv, NHWC, zero points, int32 bias, fixed-point requantise, clamp."""
    x = te.placeholder((1, 8, 8, 8), "int8", name="X")
    w = te.placeholder((3, 3, 8, 16), "int8", name="W")
    bias = te.placeholder((16,), "int32", name="bias")
    pad = te.compute(
        (1, 10, 10, 8),
        lambda n, h, w_, c: tirx.if_then_else(
            tirx.all(h >= 1, h < 9, w_ >= 1, w_ < 9), x[n, h - 1, w_ - 1, c].astype("int32") - ZX, 0
        ),
        name="pad",
    )
    kh, kw, ci = (
        te.reduce_axis((0, 3), "kh"),
        te.reduce_axis((0, 3), "kw"),
        te.reduce_axis((0, 8), "ci"),
    )
    acc = te.compute(
        (1, 8, 8, 16),
        lambda n, h, w_, o: te.sum(
            pad[n, h + kh, w_ + kw, ci] * w[kh, kw, ci, o].astype("int32"), axis=[kh, kw, ci]
        ),
        name="acc",
    )

    def requant(n, h, w_, o):
        v = (acc[n, h, w_, o] + bias[o]).astype("int64") * MULT + (
            tirx.const(1, "int64") << (SHIFT - 1)
        )
        v = (v >> SHIFT).astype("int32") + ZY
        return tirx.max(tirx.min(v, 127), -128).astype("int8")

    y = te.compute((1, 8, 8, 16), requant, name="Y")
    return te.create_prim_func([x, w, bias, y])


def _matmul_i8():
    a = te.placeholder((32, 64), "int8", name="A")
    b = te.placeholder((64, 48), "int8", name="B")
    k = te.reduce_axis((0, 64), "k")
    c = te.compute(
        (32, 48),
        lambda i, j: te.sum(a[i, k].astype("int32") * b[k, j].astype("int32"), axis=k),
        name="C",
    )
    return te.create_prim_func([a, b, c])


def _softmax_f32():
    x = te.placeholder((4, 1000), "float32", name="X")
    return te.create_prim_func([x, topi.nn.softmax(x, axis=1)])


def _norm_two_kernels():
    """Hand-scheduled: a row-sum kernel, a global intermediate, a second kernel (output first)."""
    a = te.placeholder((8, 64), "float32", name="A")
    k = te.reduce_axis((0, 64), "k")
    s = te.compute((8,), lambda i: te.sum(a[i, k], axis=k), name="S")
    d = te.compute((8, 64), lambda i, j: a[i, 63 - j] / s[i], name="D")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"norm": te.create_prim_func([d, a])}))
    sch.work_on("norm")
    i, _ = sch.get_loops(sch.get_sblock("S"))
    sch.bind(i, "threadIdx.x")
    i, j = sch.get_loops(sch.get_sblock("D"))
    sch.bind(i, "blockIdx.x")
    sch.bind(j, "threadIdx.x")
    return sch.mod["norm"].with_attr("tirx.is_scheduled", True)


@pytest.fixture(scope="module")
def irmodule():
    funcs = {
        "add_i8": _add_i8(), "conv_i8": _conv_i8(), "matmul_i8": _matmul_i8(),
        "softmax_f32": _softmax_f32(), "norm": _norm_two_kernels(),
    }
    return tvm.IRModule({n: f.with_attr("global_symbol", n) for n, f in funcs.items()})


@pytest.fixture(scope="module")
def spec(irmodule) -> OpenCLModuleSpec:
    return extract_opencl(irmodule)


@pytest.fixture(scope="module")
def device() -> OpenCLDevice:
    return OpenCLDevice()


@pytest.fixture(scope="module")
def program(device, spec):
    return device.build(spec)


def _ref(name: str, arrays: list[np.ndarray]) -> np.ndarray:
    if name == "add_i8":
        a, b = arrays[:2]
        return (a.astype(np.int32) + b).astype(np.int8)  # two's-complement wrap, as C char
    if name == "conv_i8":
        x, w, bias = arrays[:3]
        xp = np.zeros((1, 10, 10, 8), np.int64)
        xp[:, 1:9, 1:9, :] = x.astype(np.int64) - ZX
        acc = np.zeros((1, 8, 8, 16), np.int64)
        for i in range(3):
            for j in range(3):
                acc += np.einsum(
                    "nhwc,co->nhwo", xp[:, i : i + 8, j : j + 8, :], w[i, j].astype(np.int64)
                )
        v = ((acc + bias) * MULT + (1 << (SHIFT - 1))) >> SHIFT
        return np.clip(v + ZY, -128, 127).astype(np.int8)
    if name == "matmul_i8":
        a, b = arrays[:2]
        return a.astype(np.int32) @ b.astype(np.int32)
    if name == "softmax_f32":
        x = arrays[0].astype(np.float64)
        e = np.exp(x - x.max(1, keepdims=True))
        return (e / e.sum(1, keepdims=True)).astype(np.float32)
    if name == "norm":
        a = arrays[1].astype(np.float64)
        return (a[:, ::-1] / a.sum(1, keepdims=True)).astype(np.float32)
    raise KeyError(name)


def _inputs(fspec, alloc: MallocAllocator | None = None, align: int = 128) -> list[np.ndarray]:
    """Random inputs, zeroed outputs; in aligned memory of ``alloc`` when given."""
    rng = np.random.default_rng(7)
    out = []
    for p in fspec.params:
        if alloc is not None:
            arr = alloc.allocate(p.nbytes, alignment=align).view(p.dtype, p.shape)
        else:
            arr = np.empty(p.shape, p.dtype)
        if p.written:
            arr[...] = 0
        elif np.dtype(p.dtype).kind == "f":
            arr[...] = rng.standard_normal(p.shape).astype(p.dtype) * 3 + (
                4 if fspec.name == "norm" else 0
            )
        elif p.dtype == "int32":
            arr[...] = rng.integers(-5000, 5000, p.shape)
        else:
            info = np.iinfo(p.dtype)
            arr[...] = rng.integers(info.min, info.max + 1, p.shape)
        out.append(arr)
    return out


NAMES = ["add_i8", "conv_i8", "matmul_i8", "softmax_f32", "norm"]


@pytest.mark.parametrize("mode", ["copy", "import"])
@pytest.mark.parametrize("name", NAMES)
def test_tvm_kernels_match_numpy(program, device, spec, name: str, mode: str) -> None:
    fspec = spec.functions[name]
    alloc = MallocAllocator()
    arrays = _inputs(fspec, alloc if mode == "import" else None)
    before = device.counters.snapshot()
    program[name](*arrays, mode=mode)
    got = arrays[[i for i, p in enumerate(fspec.params) if p.written][0]]
    want = _ref(name, arrays)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        assert np.array_equal(got, want)  # bit-exact
    moved = device.counters.since(before)
    if mode == "import":
        assert moved.bytes_copied == 0 and moved.copies == 0
        assert moved.bytes_imported == sum(p.nbytes for p in fspec.params)
    else:
        assert moved.bytes_copied >= sum(p.nbytes for p in fspec.params)
    assert moved.launches == len(fspec.launches)
    alloc.free_all()


def test_int8_results_are_not_trivial(program, spec) -> None:
    # Guard against a test that passes on all-zero or all-clamped outputs.
    arrays = _inputs(spec.functions["conv_i8"])
    program["conv_i8"](*arrays)
    assert len(np.unique(arrays[3])) > 100
    arrays = _inputs(spec.functions["add_i8"])
    program["add_i8"](*arrays)
    wide = arrays[0].astype(np.int32) + arrays[1]
    assert ((wide > 127) | (wide < -128)).any()  # overflow cases really exercised


def test_kernel_argument_order_is_mapped_by_name(spec) -> None:
    conv = spec.functions["conv_i8"]
    assert [p.name for p in conv.params] == ["X", "W", "bias", "Y"]
    kernel_order = [a.name for a in conv.launches[0].args]
    assert sorted(kernel_order) == sorted(p.name for p in conv.params)
    assert kernel_order != [p.name for p in conv.params]  # TVM reorders: position would be wrong
    assert [p.written for p in conv.params] == [False, False, False, True]


def test_launch_sizes_are_block_times_thread(spec) -> None:
    add = spec.functions["add_i8"].launches[0]
    assert add.global_size == (1024,) and add.local_size == (256,)  # 4 blocks x 256 threads
    for f in spec.functions.values():
        for launch in f.launches:
            assert len(launch.global_size) == len(launch.local_size)
            assert all(g % loc == 0 and g >= loc
                       for g, loc in zip(launch.global_size, launch.local_size))


def test_multi_kernel_function_with_workspace(spec) -> None:
    norm = spec.functions["norm"]
    assert [launch.kernel for launch in norm.launches] == ["norm_kernel", "norm_kernel_1"]
    assert [(w.name, w.nbytes) for w in norm.workspaces] == [("S", 32)]
    assert norm.launches[0].global_size == (8,) and norm.launches[1].global_size == (512,)
    assert norm.launches[0].args[1].kind == "workspace"


def test_source_is_what_tvm_compile_generates(irmodule, spec) -> None:
    dl = tvm.s_tir.dlight
    single = tvm.IRModule({"add_i8": irmodule["add_i8"]})
    with tvm.target.Target("opencl"):
        scheduled = dl.ApplyDefaultSchedule(
            dl.gpu.Matmul(),
            dl.gpu.GEMV(),
            dl.gpu.Reduction(),
            dl.gpu.GeneralReduction(),
            dl.gpu.Fallback(),
        )(single)
    theirs = tvm.compile(scheduled, target="opencl").mod.imports[0].inspect_source()
    assert extract_opencl(single).source == theirs
    assert "__kernel void add_i8_kernel" in spec.source


def test_spec_round_trips_and_builds_once(device, spec, program) -> None:
    again = OpenCLModuleSpec.from_json(spec.to_json())
    assert again == spec and again.digest == spec.digest
    n = device.programs_built
    assert device.build(again) is program
    assert device.programs_built == n


def test_unsupported_inputs_are_reported() -> None:
    n = tirx.Var("n", "int32")
    a = te.placeholder((n,), "float32", name="A")
    b = te.compute((n,), lambda i: a[i] * 2.0, name="B")
    with pytest.raises(UnsupportedKernelError, match="dynamic|scalar"):
        extract_opencl(te.create_prim_func([a, b]))
    with pytest.raises(UnsupportedKernelError, match="opencl target"):
        extract_opencl(_add_i8(), target="llvm")
    # A host loop around a launch (rows left serial on the host): not a static launch sequence.
    a2 = te.placeholder((2, 256), "float32", name="A")
    c2 = te.compute((2, 256), lambda i, j: a2[i, j] + 1.0, name="C")
    sch = tvm.s_tir.Schedule(tvm.IRModule({"f": te.create_prim_func([a2, c2])}))
    sch.work_on("f")
    sch.bind(sch.get_loops(sch.get_sblock("C"))[1], "threadIdx.x")
    with pytest.raises(UnsupportedKernelError, match="host control flow"):
        extract_opencl(sch.mod, schedule=False)


def test_relax_module_kernels_chain_on_device(device) -> None:
    from tvm.script import ir as I
    from tvm.script import relax as R

    @I.ir_module
    class Mod:
        @R.function
        def main(x: R.Tensor((4, 32), "float32"), y: R.Tensor((4, 32), "float32")) -> R.Tensor(
            (4, 32), "float32"
        ):
            with R.dataflow():
                a = R.add(x, y)
                b = R.nn.softmax(a, axis=1)
                R.output(b)
            return b

    spec = extract_opencl(Mod)
    assert {"add", "softmax"} <= set(spec.functions)
    prog = device.build(spec)
    rng = np.random.default_rng(1)
    x, y = (rng.standard_normal((4, 32)).astype(np.float32) for _ in range(2))
    bx, by, bmid, bout = (device.alloc(4 * 32 * 4) for _ in range(4))
    evs = [device.upload(bx, x), device.upload(by, y)]
    # A GPU-internal edge: no host round trip, the second launch waits on the first's event.
    ev = prog["add"].launch([bx, by, bmid], wait_for=evs)
    ev = prog["softmax"].launch([bmid, bout], wait_for=[ev])
    out = np.empty((4, 32), np.float32)
    device.download(out, bout, wait_for=[ev])
    e = np.exp((x + y) - (x + y).max(1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


# ---- zero-copy, sync rules, misalignment -----------------------------------------------------


def test_zero_copy_host_writes_reach_kernel_without_copy(program, device, spec) -> None:
    """The proof on PoCL: no enqueue_copy, no map - plain host writes, plain host reads."""
    if not (device.info.is_cpu and device.info.unified_memory):
        pytest.skip(
            f"{device.info.device} is not a CPU device with unified memory: a GPU driver "
            "may mirror USE_HOST_PTR memory (NVIDIA does), so there is no zero-copy to prove"
        )
    fspec = spec.functions["add_i8"]
    alloc = MallocAllocator()
    blocks = [
        alloc.allocate(p.nbytes, alignment=device.info.base_address_alignment) for p in fspec.params
    ]
    a, b, c = (blk.view(np.int8) for blk in blocks)
    a[:] = 0
    b[:] = 0
    bufs = [device.import_host(v, misaligned="reject") for v in (a, b, c)]
    assert all(buf.kind == "imported" and buf.same_address and buf.zero_copy for buf in bufs)
    assert all(buf.sync_rule == "event" for buf in bufs)
    assert [buf.host_address for buf in bufs] == [blk.address for blk in blocks]
    before = device.counters.snapshot()
    for step in range(3):  # reuse across "inferences": written after wrapping
        a[:] = np.arange(1000) % 100 + step  # straight into our memory, behind the driver's back
        b[:] = 3
        program["add_i8"].launch(bufs).wait()
        assert np.array_equal(c, (np.arange(1000) % 100 + step + 3).astype(np.int8))
    moved = device.counters.since(before)
    assert moved.bytes_copied == 0 and moved.copies == 0 and moved.host_syncs == 0
    alloc.free_all()


def test_sync_rule_auto_on_this_device(device) -> None:
    alloc = MallocAllocator()
    blk = alloc.allocate(4096, alignment=device.info.base_address_alignment)
    buf = device.import_host(blk.view())
    if device.info.is_cpu and device.info.unified_memory and buf.zero_copy:
        assert buf.sync_rule == "event"  # PoCL: the buffer is our memory
    else:
        assert buf.sync_rule == "map"
    alloc.free_all()


def test_map_returns_our_address_under_the_map_rule() -> None:
    dev = OpenCLDevice(host_sync="map")
    alloc = MallocAllocator()
    blk = alloc.allocate(1 << 16, alignment=dev.info.base_address_alignment)
    blk.view()[:] = 42
    buf = dev.import_host(blk.view())
    assert buf.sync_rule == "map"
    view = dev.begin_host_access(buf, write=True)
    assert view.ctypes.data == blk.address == buf.host_address  # zero-copy: no staging copy
    assert (view == 42).all()
    view[:] = 7
    dev.end_host_access(buf, wrote=True)
    dev.finish()
    assert (blk.view() == 7).all()
    assert dev.counters.bytes_copied == 0 and dev.counters.host_syncs == 1
    alloc.free_all()


def _misaligned(n: int, align: int) -> tuple[np.ndarray, np.ndarray]:
    """A view at an address one byte past an ``align`` boundary, with guard bytes around it."""
    backing = MallocAllocator().allocate(n + 2 * align, alignment=align).view()
    backing[:] = 0xEE
    view = backing[align + 1 : align + 1 + n]
    return backing, view


def test_misaligned_caller_buffer_rejected(device) -> None:
    align = device.info.base_address_alignment
    _backing, view = _misaligned(1000, align)
    with pytest.raises(MisalignedBufferError, match=f"multiple of {align}"):
        device.import_host(view.view(np.int8), misaligned="reject")


def test_misaligned_caller_buffer_staged_never_corrupted(program, device) -> None:
    align = device.info.base_address_alignment
    backings, views = zip(*(_misaligned(1000, align) for _ in range(3)))
    a, b, c = (v.view(np.int8) for v in views)
    a[:] = np.arange(1000) % 50
    b[:] = -7
    c[:] = 0
    before = device.counters.snapshot()
    bufs = [device.import_host(v) for v in (a, b, c)]  # default: stage through a copy
    assert [buf.kind for buf in bufs] == ["staged"] * 3  # never wrapped at a shifted address
    ev = program["add_i8"].launch(bufs)
    device.begin_host_access(bufs[2], wait_for=[ev])  # copies the result back into c
    assert np.array_equal(c, (np.arange(1000) % 50 - 7).astype(np.int8))
    assert np.array_equal(a, (np.arange(1000) % 50).astype(np.int8))  # inputs untouched
    moved = device.counters.since(before)
    assert moved.bytes_copied == 4000 and moved.bytes_imported == 0
    for backing in backings:  # guard bytes on both sides intact
        assert (backing[: align + 1] == 0xEE).all() and (backing[align + 1001 :] == 0xEE).all()


@pytest.mark.parametrize("kind", [MemorySource.MALLOC, MemorySource.MEMFD])
def test_npu_gpu_npu_edges_run_on_fallback_memory(program, device, kind) -> None:
    """The building blocks together: plan the edges, allocate once, 100 inferences, unload."""
    npu = BackendCapabilities(  # the emulated NPU works on host memory, cannot export
        "npu", alignment=4096, size_multiple=1024, import_sources=frozenset({kind}),
        fallback_import_memory_required=True,
    )
    gpu = device.info.capabilities("gpu")
    mal, mfd = MallocAllocator(), MemfdAllocator()
    mgr = FallbackMemoryManager({MemorySource.MALLOC: mal, MemorySource.MEMFD: mfd})
    to_gpu = plan_edge(npu, gpu, available=mgr.available_sources)
    to_npu = plan_edge(gpu, npu, available=mgr.available_sources)
    assert to_gpu.step is to_npu.step is EdgeStep.FALLBACK_IMPORT
    assert to_gpu.memory_source is kind and to_gpu.alignment == 4096
    before = device.counters.snapshot()
    wrapped: dict[str, object] = {}
    for inference in range(100):
        bufs = []
        for name, dec in (("A", to_gpu), ("B", to_gpu), ("C", to_npu)):
            alloc = mgr.for_decision(("add", name), 1000, dec)
            assert alloc.address % 4096 == 0 and alloc.padded_nbytes == 1024
            if name not in wrapped:  # the executor wraps at load time
                wrapped[name] = device.import_allocation(alloc)
            bufs.append(wrapped[name])
        # The "NPU" produces A and B in place, the GPU consumes them, the "NPU" reads C.
        with (
            device.host_access(bufs[0], write=True) as a,
            device.host_access(bufs[1], write=True) as b,
        ):
            a.view(np.int8)[:1000] = (np.arange(1000) + inference) % 120
            b.view(np.int8)[:1000] = -5
        ev = program["add_i8"].launch(bufs)
        with device.host_access(bufs[2], wait_for=[ev]) as c:
            got = c.view(np.int8)[:1000].copy()
        assert np.array_equal(got, ((np.arange(1000) + inference) % 120 - 5).astype(np.int8))
    moved = device.counters.since(before)
    assert moved.bytes_copied == 0 and moved.imports == 3 and moved.launches == 100
    assert mgr.stats().allocations == 3 and mal.allocations + mfd.allocations == 3
    assert mgr.unload() == 3
    assert mal.live() == LiveStats(0, 0) and mfd.live() == LiveStats(0, 0)


def test_async_requests_in_flight(program, device, spec) -> None:
    fspec = spec.functions["matmul_i8"]
    alloc = MallocAllocator()
    requests = []
    for r in range(6):  # enqueue all, wait for none until the end
        arrays = _inputs(fspec, alloc)
        arrays[0][...] = np.roll(arrays[0], r, axis=0)
        bufs = [device.import_host(a, misaligned="reject") for a in arrays]
        requests.append((arrays, bufs, program["matmul_i8"].launch(bufs)))
    for arrays, bufs, ev in requests:
        device.begin_host_access(bufs[2], wait_for=[ev])
        device.end_host_access(bufs[2])
        assert np.array_equal(arrays[2], arrays[0].astype(np.int32) @ arrays[1].astype(np.int32))
    alloc.free_all()


# ---- device selection and properties ------------------------------------------------------


def test_device_selection_by_option_and_env(monkeypatch) -> None:
    pairs = list_devices()
    platform, dev = pairs[-1]
    want = dev.name.strip().lower()
    first_match = next(
        d for p, d in pairs if want in f"{p.name.strip()} / {d.name.strip()}".lower()
    )
    monkeypatch.setenv(DEVICE_ENV_VAR, want.upper())  # case-insensitive substring
    assert select_device().int_ptr == first_match.int_ptr
    assert select_device(platform.name[:5] + ":" + dev.name[:5]).name.startswith(dev.name[:5])
    monkeypatch.setenv(DEVICE_ENV_VAR, "no-such-device-xyz")
    with pytest.raises(OpenCLUnavailableError, match="no-such-device-xyz.*available"):
        select_device()
    with pytest.raises(OpenCLUnavailableError):
        OpenCLDevice()  # the option and the variable reach the device constructor
    monkeypatch.delenv(DEVICE_ENV_VAR)
    gpus = [d for _p, d in pairs if d.type & cl.device_type.GPU]
    assert select_device().int_ptr == (gpus[0] if gpus else pairs[0][1]).int_ptr


def test_pocl_is_the_default_here_when_no_gpu() -> None:
    pairs = list_devices()
    if any(d.type & cl.device_type.GPU for _p, d in pairs):
        pytest.skip("a GPU is present: it is the default, not PoCL")
    assert "portable computing language" in select_device().platform.name.lower()


def test_device_info_matches_the_driver(device) -> None:
    info = device.info
    d = device.device
    assert info.base_address_alignment == d.mem_base_addr_align // 8
    assert info.unified_memory == bool(d.host_unified_memory)
    assert info.has_arm_import == ("cl_arm_import_memory" in d.extensions.split())
    assert info == device_info(d)


def test_device_properties_drive_auto_mode(device) -> None:
    npu = BackendCapabilities(
        "npu", alignment=4096, size_multiple=1024, import_sources=frozenset({MemorySource.DMABUF}),
        fallback_import_memory_required=True,
    )
    here = device.info.capabilities()
    expected = EdgeStep.FALLBACK_IMPORT if device.info.import_preferred else EdgeStep.MEM_COPY
    assert plan_edge(npu, here).step is expected
    discrete = OpenCLDeviceInfo(
        platform="NVIDIA CUDA", device="NVIDIA H100", vendor="NVIDIA", version="OpenCL 3.0 CUDA",
        device_type="GPU", unified_memory=False, base_address_alignment=512, import_extensions=(),
        max_work_group_size=1024, global_mem_size=80 << 30,
    )
    dec = plan_edge(npu, discrete.capabilities("h100"))
    assert dec.step is EdgeStep.MEM_COPY and "discrete" in dec.reason
    mali = OpenCLDeviceInfo(
        platform="ARM Platform", device="Mali-G78", vendor="ARM", version="OpenCL 3.0",
        device_type="GPU", unified_memory=True, base_address_alignment=64,
        import_extensions=("cl_arm_import_memory", "cl_arm_import_memory_dma_buf"),
        max_work_group_size=512, global_mem_size=4 << 30,
    )
    dec = plan_edge(npu, mali.capabilities("mali"))
    assert dec.step is EdgeStep.FALLBACK_IMPORT and dec.memory_source is MemorySource.DMABUF
    assert dec.alignment == 4096 and dec.size_multiple == 1024
