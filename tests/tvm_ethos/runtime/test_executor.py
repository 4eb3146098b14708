"""The executor end to end: the seed's six fallback scenarios (GPU->CPU, CPU->GPU, GPU->NPU,
NPU->GPU, GPU->NPU->GPU, NPU->GPU->NPU), each with a single tensor edge and with several
inputs / outputs between subgraphs, on partitioned TFLite graphs; bit-exact with the TFLite
reference interpreter; zero bytes copied on the import paths; misaligned caller buffers;
fallback buffers freed at unload; no allocation after the first inference; async requests.

The OpenCL device is PoCL here (unified memory, so ``auto`` imports). The GPU "rejects" an
operator through the opencl target's ``cpu_ops`` option (like a GpuAcc -> CpuAcc preference
list); the NPU rejects a 9x1 convolution (Ethos-N kernels are at most 7x7).
"""
from __future__ import annotations

import zlib

import numpy as np
import pytest

pytest.importorskip("pyopencl")

from conftest import oracle  # noqa: E402
from graph_builder import Graph  # noqa: E402

import tvm_ethos  # noqa: E402
from tvm_ethos.runtime.allocators import MemorySource, aligned_copy  # noqa: E402
from tvm_ethos.runtime.executor import Executor, MisalignedInputError  # noqa: E402
from tvm_ethos.runtime.fallback_memory import EdgeStep  # noqa: E402
from tvm_ethos.runtime.opencl_device import OpenCLUnavailableError, list_devices  # noqa: E402

if not list_devices():  # pragma: no cover - PoCL is installed with the opencl extra
    pytest.skip("no OpenCL device", allow_module_level=True)

NPU = "ethos-n"
SHAPE = (1, 8, 8, 4)


def tall(g, x):  # a 9x1 convolution: too tall for Ethos-N, so it falls back to the GPU
    return g.conv2d(x, 4, kernel=(9, 1))


def npu_conv(g, x):
    return g.conv2d(x, 4)


# name -> (target, cpu_ops, graph builder, backends of the subgraphs in order)
def _gpu_cpu(g, x):
    return [g.pool("max", g.conv2d(x, 4))]


def _gpu_cpu_multi(g, x):  # GPU subgraph with 2 outputs -> CPU subgraph with 2 inputs, 2 outputs
    a, b = g.conv2d(x, 4), g.conv2d(x, 4, kernel=(1, 1))
    return [g.add(a, b), g.pool("max", a)]


def _cpu_gpu(g, x):
    return [g.conv2d(g.pool("max", x, size=(3, 3), stride=(1, 1), padding="SAME"), 4)]


def _cpu_gpu_multi(g, x):  # CPU (two pools) -> GPU (add, conv)
    a = g.pool("max", x, size=(3, 3), stride=(1, 1), padding="SAME")
    b = g.pool("max", x, size=(2, 2), stride=(1, 1), padding="SAME")
    return [g.conv2d(g.add(a, b), 4)]


def _gpu_npu(g, x):
    return [npu_conv(g, tall(g, x))]


def _gpu_npu_multi(g, x):  # two GPU results -> one NPU ADD (equal shapes)
    return [g.add(tall(g, x), tall(g, x))]


def _npu_gpu(g, x):
    return [tall(g, npu_conv(g, x))]


def _npu_gpu_multi(g, x):  # NPU subgraph with 2 outputs -> GPU subgraph with 2 inputs (2 outputs)
    a = npu_conv(g, x)
    b = npu_conv(g, a)
    return [tall(g, a), tall(g, b)]


def _gpu_npu_gpu(g, x):
    return [tall(g, npu_conv(g, tall(g, x)))]


def _gpu_npu_gpu_multi(g, x):  # GPU (2 out) -> NPU (2 in, 2 out) -> GPU (2 in)
    y = g.add(tall(g, x), tall(g, x))
    z = npu_conv(g, y)
    return [tall(g, y), tall(g, z)]


def _npu_gpu_npu(g, x):
    return [npu_conv(g, tall(g, npu_conv(g, x)))]


def _npu_gpu_npu_multi(g, x):  # NPU (2 out) -> GPU (2 in, 2 out) -> NPU (2 in)
    a = npu_conv(g, x)
    b = npu_conv(g, a)
    return [g.add(tall(g, a), tall(g, b))]


SCENARIOS = {
    "gpu_cpu": ("opencl", "max_pool2d", _gpu_cpu, ["opencl", "llvm"]),
    "gpu_cpu_multi": ("opencl", "add+max_pool2d", _gpu_cpu_multi, ["opencl", "llvm"]),
    "cpu_gpu": ("opencl", "max_pool2d", _cpu_gpu, ["llvm", "opencl"]),
    "cpu_gpu_multi": ("opencl", "max_pool2d", _cpu_gpu_multi, ["llvm", "opencl"]),
    "gpu_npu": (f"{NPU},opencl", "", _gpu_npu, ["opencl", NPU]),
    "gpu_npu_multi": (f"{NPU},opencl", "", _gpu_npu_multi, ["opencl", NPU]),
    "npu_gpu": (f"{NPU},opencl", "", _npu_gpu, [NPU, "opencl"]),
    "npu_gpu_multi": (f"{NPU},opencl", "", _npu_gpu_multi, [NPU, "opencl"]),
    "gpu_npu_gpu": (f"{NPU},opencl", "", _gpu_npu_gpu, ["opencl", NPU, "opencl"]),
    "gpu_npu_gpu_multi": (f"{NPU},opencl", "", _gpu_npu_gpu_multi, ["opencl", NPU, "opencl"]),
    "npu_gpu_npu": (f"{NPU},opencl", "", _npu_gpu_npu, [NPU, "opencl", NPU]),
    "npu_gpu_npu_multi": (f"{NPU},opencl", "", _npu_gpu_npu_multi, [NPU, "opencl", NPU]),
}

_COMPILED: dict = {}


def compiled(name):
    """(model bytes, CompiledModel) of a scenario, compiled once per test session."""
    if name not in _COMPILED:
        target, cpu_ops, build, _ = SCENARIOS[name]
        g = Graph(np.random.RandomState(zlib.crc32(name.encode()) % 1000))
        outs = build(g, g.input(SHAPE))
        model = g.build(outs)
        opts = {"cpu_ops": cpu_ops} if cpu_ops else {}
        _COMPILED[name] = (
            model,
            tvm_ethos.compile(tvm_ethos.load_model(model), target=target, **opts),
        )
    return _COMPILED[name]


aligned = aligned_copy


def inputs_for(seed, alignment=4096):
    rs = np.random.RandomState(seed)
    return [aligned(rs.randint(-128, 128, size=SHAPE).astype(np.int8), alignment)]


def check_exact(model, outs, xs):
    ref = oracle(model, xs)
    assert len(outs) == len(ref)
    for o, r in zip(outs, ref):
        assert np.array_equal(o.reshape(r.shape), r), (
            f"max diff {np.abs(o.astype(int) - r.reshape(o.shape)).max()}"
        )


def executor(cm, **opts):
    return Executor(cm.program, cm.executable.mod, **opts)


def edge_bytes(ex) -> int:
    """Bytes crossing between backends per inference (each destination backend counted)."""
    return sum(e.nbytes for e in ex.edge_report)


# ------------------------------------------------------------------------------------ scenarios
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_import_and_copy(name):
    model, cm = compiled(name)
    _t, _ops, _b, backends = SCENARIOS[name]
    assert [sg.backend for sg in cm.program.subgraphs] == backends, cm.program.summary()
    crossing = list(zip(cm.program.subgraphs, cm.program.subgraphs[1:]))
    shared = [len(set(a.outputs) & set(b.inputs)) for a, b in crossing]
    assert all(shared), cm.program.summary()  # each subgraph feeds the next
    if name.endswith("_multi"):  # several tensors between two subgraphs
        assert max(shared) >= 2, cm.program.summary()
    else:
        assert max(shared) == 1, cm.program.summary()

    # import: every edge imported, nothing copied between backends (and none at the boundary
    # when the caller's buffers are aligned and the last subgraph runs on the CPU side)
    ex = executor(cm, fallback_mode="import")
    try:
        steps = {e.step for e in ex.edge_report}
        assert steps and EdgeStep.MEM_COPY not in steps, str(ex.edge_report)
        dev = ex.device.counters.snapshot()
        for seed in (1, 2):
            xs = inputs_for(seed)
            check_exact(model, ex.run(xs), xs)
            st = ex.last_run_stats
            assert st.edge_bytes_copied == 0 and st.edge_bytes_imported == edge_bytes(ex)
            assert not any(t.startswith("MemCopy") for t in st.trace)
            if cm.program.subgraphs[-1].device == "cpu":
                assert st.bytes_copied == 0, st.trace
            gpu_to_host = [e for e in ex.edge_report if e.decision.source == "opencl"]
            assert st.gpu_syncs >= len(gpu_to_host)  # the seed's sync before a host-side reader
        # the OpenCL driver was asked for no copy at all (enqueue_copy is what counts there)
        if cm.program.subgraphs[-1].device == "cpu":
            assert ex.device.counters.since(dev).bytes_copied == 0
        # a GPU buffer at an edge is our fallback memory itself (same address, zero copy)
        checked = 0
        for loc, buf in ex._slots[0].dev.items():
            if loc[0] == "home" and loc in ex._slots[0].allocs:
                alloc = ex._slots[0].allocs[loc]
                assert (
                    buf.kind == "imported" and buf.host_address == alloc.address and buf.zero_copy
                )
                checked += 1
        assert checked == len({e.tensor for e in ex.edge_report})
    finally:
        ex.unload()

    # copy: every edge copied, same results
    ex = executor(cm, fallback_mode="copy")
    try:
        assert {e.step for e in ex.edge_report} == {EdgeStep.MEM_COPY}
        xs = inputs_for(3)
        check_exact(model, ex.run(xs), xs)
        st = ex.last_run_stats
        assert st.edge_bytes_copied == edge_bytes(ex) > 0 and st.edge_bytes_imported == 0
        assert ex.memory.stats().allocations == 0  # no fallback memory in copy mode
    finally:
        ex.unload()


def test_auto_follows_the_device():
    """auto imports where the device has unified memory (PoCL), copies on a discrete card."""
    import dataclasses

    model, cm = compiled("npu_gpu_npu")
    ex = executor(cm)  # fallback_mode="auto"
    try:
        unified = ex.device.info.import_preferred
        want = EdgeStep.FALLBACK_IMPORT if unified else EdgeStep.MEM_COPY
        assert {e.step for e in ex.edge_report} == {want}
        assert all("auto:" in e.decision.reason for e in ex.edge_report)
        gpu = ex.capabilities["opencl"]
    finally:
        ex.unload()
    discrete = dataclasses.replace(gpu, unified_memory=False, import_extension=False)
    ex = executor(cm, capabilities={"opencl": discrete})
    try:
        assert {e.step for e in ex.edge_report} == {EdgeStep.MEM_COPY}
        assert "discrete" in str(ex.edge_report)
        xs = inputs_for(4)
        check_exact(model, ex.run(xs), xs)
        assert ex.last_run_stats.edge_bytes_copied == edge_bytes(ex)
    finally:
        ex.unload()


def test_cpu_gpu_with_fallback_memory_on_the_cpu_side():
    """Seed 000's CPU/GPU test: give the CPU backend FallbackImportMemoryRequired and the
    llvm -> GPU edge becomes a FallbackImport (one LCM-aligned buffer) instead of MemImport."""
    import dataclasses

    model, cm = compiled("cpu_gpu_multi")
    ex = executor(cm, fallback_mode="import")
    try:
        assert {e.step for e in ex.edge_report} == {EdgeStep.MEM_IMPORT}
        assert ex.memory.stats().allocations == 0
        cpu = ex.capabilities["llvm"]
    finally:
        ex.unload()
    ex = executor(
        cm,
        fallback_mode="import",
        capabilities={"llvm": dataclasses.replace(cpu, fallback_import_memory_required=True)},
    )
    try:
        assert {e.step for e in ex.edge_report} == {EdgeStep.FALLBACK_IMPORT}
        xs = inputs_for(5)
        check_exact(model, ex.run(xs), xs)
        n_edges = len(ex.edge_report)
        assert ex.memory.stats().buffers == n_edges
        for alloc in ex._slots[0].allocs.values():
            assert alloc.address % 128 == 0  # lcm(64 CPU, 128 PoCL)
        assert ex.last_run_stats.edge_bytes_copied == 0
    finally:
        assert ex.unload() == n_edges


def test_output_feeding_consumers_on_two_other_backends():
    """An NPU output read by the GPU and by the CPU: one shared buffer, aligned for all three."""
    rs = np.random.RandomState(21)
    g = Graph(rs)
    x = g.input(SHAPE)
    a = npu_conv(g, x)
    model = g.build([tall(g, a), g.pool("avg", a)])
    cm = tvm_ethos.compile(
        tvm_ethos.load_model(model), target=f"{NPU},opencl", cpu_ops="avg_pool2d"
    )
    assert [sg.backend for sg in cm.program.subgraphs] == [NPU, "opencl", "llvm"]
    ex = executor(cm, fallback_mode="import")
    try:
        fan = [e for e in ex.edge_report if e.decision.source == NPU]
        assert {e.decision.destination for e in fan} == {"opencl", "llvm"}
        assert {e.step for e in fan} == {EdgeStep.FALLBACK_IMPORT}
        assert all("shared by 2 consumers" in e.decision.reason for e in fan)
        assert all(e.decision.alignment == 128 for e in fan)
        for seed in (6, 7):
            xs = inputs_for(seed)
            check_exact(model, ex.run(xs), xs)
        assert ex.memory.stats().buffers == 1  # one buffer for both consumers
        assert ex.last_run_stats.edge_bytes_copied == 0
    finally:
        assert ex.unload() == 1


def test_real_model_gpu_npu_gpu():
    """DS-CNN on Ethos-N + OpenCL: the 10x4 first conv on the GPU, the depthwise / pointwise
    stack on the NPU, pool + fully connected + softmax back on the GPU: bit-exact with TFLite's
    reference kernels, edges imported, the GPU waited on before the NPU reads its output."""
    from conftest import assert_bit_exact, model_path

    path = model_path("ds_cnn_kws")
    cm = tvm_ethos.compile(
        tvm_ethos.load_model(path), target=f"{NPU},opencl", fallback_mode="import"
    )
    assert [sg.backend for sg in cm.program.subgraphs] == ["opencl", NPU, "opencl"]
    assert_bit_exact(cm, path, n_inputs=2, seed=3)
    st = cm.last_run_stats
    assert st.edge_bytes_copied == 0 and st.edge_bytes_imported == 2 * 25 * 5 * 64
    assert any(t.startswith("sync ") for t in st.trace)
    assert cm.edge_report.steps() == {"FallbackImport": 2}
    assert cm.unload() == 2


# ------------------------------------------------------------------------------ memory and reuse
def test_unload_frees_every_fallback_buffer_and_reuse_allocates_nothing():
    model, cm = compiled("npu_gpu_npu_multi")
    ex = executor(cm, fallback_mode="import")
    alloc_malloc = ex.memory.allocators[MemorySource.MALLOC]
    xs = inputs_for(8)
    ex.run(xs)
    first = ex.memory_stats()
    n_fallback = len([e for e in ex.edge_report if e.step is EdgeStep.FALLBACK_IMPORT])
    assert first.fallback_buffers == n_fallback == 4  # 2 edges NPU->GPU, 2 edges GPU->NPU
    assert alloc_malloc.live().count == n_fallback
    for k in range(99):
        out = ex.run(inputs_for(100 + k % 3))
        assert ex.last_run_stats.allocations == 0
    check_exact(model, out, inputs_for(100 + 98 % 3))
    assert ex.memory_stats() == first  # nothing allocated after the first inference
    assert ex.memory.stats().reuses == 0  # buffers are kept per slot, never re-requested
    assert ex.unload() == n_fallback
    assert alloc_malloc.live().count == 0 and ex.activations.live().count == 0
    assert ex.memory.stats().frees == n_fallback
    with pytest.raises(Exception, match="unloaded"):
        ex.run(xs)


def test_compiled_model_run_goes_through_the_executor():
    model, cm = compiled("gpu_npu_gpu")
    xs = inputs_for(9)
    check_exact(model, cm.run(*xs), xs)
    st = cm.last_run_stats
    assert st is not None and st.gpu_launches == 2 and st.cpu_calls == 1
    assert "FallbackImport" in str(cm.edge_report)
    assert cm.unload() == 2
    # the Relax VM executable still runs the whole model (on the CPU): same bits
    check_exact(model, cm.run_vm(*xs), xs)
    check_exact(model, cm.run(*xs), xs)  # a new executor after unload
    cm.unload()


# ------------------------------------------------------------------------------ caller buffers
@pytest.mark.parametrize("name", ["npu_gpu_npu", "gpu_npu"])
def test_misaligned_caller_buffers(name):
    model, cm = compiled(name)
    x = inputs_for(10)[0]
    raw = np.full(x.nbytes + 256 + 64, 0x5A, np.uint8)
    off = (-int(raw.ctypes.data)) % 128 + 1  # one byte past an aligned address
    mis = raw[off:off + x.nbytes].view(np.int8).reshape(x.shape)
    mis[...] = x
    before = raw.copy()
    ex = executor(cm, fallback_mode="import")
    try:
        check_exact(model, ex.run([mis]), [x])
        st = ex.last_run_stats
        assert st.io_bytes_copied >= x.nbytes and st.edge_bytes_copied == 0
        assert any("input" in t for t in st.trace)
        # the caller's memory (and the bytes around it) untouched
        assert np.array_equal(raw, before)
    finally:
        ex.unload()
    ex = executor(cm, fallback_mode="import", misaligned="reject")
    try:
        with pytest.raises(MisalignedInputError, match="not a multiple"):
            ex.run([mis])
        check_exact(model, ex.run([x]), [x])  # an aligned buffer is fine
        assert np.array_equal(raw, before)
    finally:
        ex.unload()


def test_bad_inputs_are_refused():
    _model, cm = compiled("npu_gpu")
    with pytest.raises(tvm_ethos.TvmEthosError, match="shape"):
        cm.run(np.zeros((1, 8, 8, 3), np.int8))
    with pytest.raises(tvm_ethos.TvmEthosError, match="dtype"):
        cm.run(np.zeros(SHAPE, np.uint8))
    with pytest.raises(tvm_ethos.OptionError, match="fallback_mode"):
        tvm_ethos.compile(
            tvm_ethos.load_model(compiled("npu_gpu")[0]),
            target=f"{NPU},opencl",
            fallback_mode="zero",
        )
    with pytest.raises(OpenCLUnavailableError):
        executor(cm, opencl_device="no-such-device")


# ------------------------------------------------------------------------------ async requests
def test_requests_in_flight_on_one_network():
    model, cm = compiled("npu_gpu_npu_multi")
    ex = executor(cm, fallback_mode="import", max_requests=3)
    try:
        xss = [inputs_for(200 + k) for k in range(8)]
        reqs = [ex.start_async(xs) for xs in xss]
        outs = [r.wait(timeout=120) for r in reqs]
        for xs, out in zip(xss, outs):
            check_exact(model, out, xs)
        slots = {r.stats.slot for r in reqs}
        assert slots <= {0, 1, 2}
        assert ex.memory_stats().slots <= 3
        # each slot has its own edge buffers: 4 edges x slots used
        assert ex.memory.stats().buffers == 4 * ex.memory_stats().slots
    finally:
        freed = ex.unload()
    assert freed == 4 * len(ex._slots)


def test_async_and_sync_mixed():
    model, cm = compiled("gpu_npu_gpu_multi")
    xs1, xs2 = inputs_for(300), inputs_for(301)
    r = cm.start_async(*xs1)
    out2 = cm.run(*xs2)
    check_exact(model, r.wait(timeout=120), xs1)
    check_exact(model, out2, xs2)
    cm.unload()


# ------------------------------------------------------------------------------ save / load
def test_save_load_fresh_process_runs_the_executor(tmp_path):
    import json
    import os
    import subprocess
    import sys
    import textwrap
    from pathlib import Path

    import tvm
    from tvm import relax

    repo = Path(__file__).resolve().parents[3]
    model, cm = compiled("npu_gpu_npu")
    xs = inputs_for(400)
    ref = oracle(model, xs)[0]
    # the executable is still a plain Relax VM executable (the OpenCL part built for llvm in it)
    vm = relax.VirtualMachine(cm.executable, tvm.cpu())
    assert np.array_equal(vm["main"](tvm.runtime.tensor(xs[0])).numpy().reshape(ref.shape), ref)
    saved = cm.save(tmp_path / "m.tvmethos")
    np.save(tmp_path / "x.npy", xs[0])
    script = textwrap.dedent(f"""
        import json, numpy as np, tvm_ethos
        cm = tvm_ethos.load({str(saved)!r}, fallback_mode="import")
        raw = np.empty(4096 * 2, np.uint8)
        off = (-raw.ctypes.data) % 4096
        x = raw[off:off + 256].view(np.int8).reshape(1, 8, 8, 4)
        x[...] = np.load({str(tmp_path / 'x.npy')!r})
        out = cm.run(x)[0]
        np.save({str(tmp_path / 'out.npy')!r}, out)
        st = cm.last_run_stats
        print(json.dumps({{"copied": st.bytes_copied, "imported": st.edge_bytes_imported,
                          "steps": cm.edge_report.steps(), "freed": cm.unload()}}))
    """)
    res = subprocess.run(
        [sys.executable, "-c", script],
        cwd=repo,
        capture_output=True,
        text=True,
        env={
            "PYTHONPATH": str(repo),
            "PATH": "/usr/bin:/bin",
            "HOME": os.environ.get("HOME", str(tmp_path)),
        },
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    info = json.loads(res.stdout.strip().splitlines()[-1])
    assert np.array_equal(np.load(tmp_path / "out.npy").reshape(ref.shape), ref)
    assert info == {"copied": 0, "imported": 2 * 256, "steps": {"FallbackImport": 2}, "freed": 2}
