"""FallbackMemoryManager (lcm alignment, reuse, unload) and the edge-step decision table."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.runtime.allocators import LiveStats, MallocAllocator, MemfdAllocator, MemorySource
from tvm_ethos.runtime.fallback_memory import (
    BackendCapabilities,
    EdgePlanError,
    EdgeStep,
    FallbackMemoryManager,
    plan_edge,
    plan_edges,
)

M, F, D = MemorySource.MALLOC, MemorySource.MEMFD, MemorySource.DMABUF
HOST_KINDS = frozenset({M, F, D})


def manager() -> tuple[FallbackMemoryManager, MallocAllocator, MemfdAllocator]:
    mal, mfd = MallocAllocator(), MemfdAllocator()
    return FallbackMemoryManager({M: mal, F: mfd}), mal, mfd


@settings(max_examples=200, deadline=None)
@given(
    aligns=st.lists(st.integers(0, 13).map(lambda e: 1 << e), min_size=1, max_size=4),
    mults=st.lists(st.integers(1, 3000), min_size=0, max_size=3),
    nbytes=st.integers(0, 50_000),
)
def test_buffer_satisfies_every_side(aligns: list[int], mults: list[int], nbytes: int) -> None:
    mgr, mal, _ = manager()
    buf = mgr.buffer("edge", nbytes, alignments=aligns, size_multiples=mults)
    assert all(buf.address % a == 0 for a in aligns)  # lcm: aligned for source and destination
    assert all(buf.padded_nbytes % m == 0 for m in mults)  # padded as each side requires
    assert buf.padded_nbytes >= nbytes
    mgr.unload()
    assert mal.live() == LiveStats(0, 0)


def test_lcm_of_non_power_of_two_size_multiples() -> None:
    mgr, _, _ = manager()
    buf = mgr.buffer("e", 1000, alignments=(128, 64), size_multiples=(48, 1024))
    assert buf.alignment == 128 and buf.address % 128 == 0
    assert buf.padded_nbytes == 3072  # lcm(48, 1024) = 3072, the first multiple >= 1000
    mgr.unload()


def test_reuse_across_inferences_allocates_nothing_after_the_first() -> None:
    mgr, mal, mfd = manager()
    edges = {("npu0", "gpu1"): (4096, M), ("gpu1", "npu2"): (1000, M), ("gpu1", "cpu3"): (77, F)}
    first = {}
    for inference in range(100):
        for edge, (n, src) in edges.items():
            buf = mgr.buffer(edge, n, source=src, alignments=(128, 64), size_multiples=(1024,))
            if inference == 0:
                first[edge] = buf
            assert buf is first[edge]
        if inference == 0:
            after_first = (mal.allocations, mfd.allocations)
    assert (mal.allocations, mfd.allocations) == after_first == (2, 1)
    s = mgr.stats()
    assert s.allocations == 3 and s.requests == 300 and s.reuses == 297 and s.buffers == 3
    assert s.nbytes == 4096 + 1024 + 1024  # each padded to a multiple of 1024
    assert mgr.unload() == 3
    assert mal.live() == LiveStats(0, 0) and mfd.live() == LiveStats(0, 0)
    assert mgr.stats().frees == 3 and mgr.stats().buffers == 0
    assert all(b.freed for b in first.values())
    assert mgr.unload() == 0  # idempotent
    with pytest.raises(RuntimeError, match="unloaded"):
        mgr.buffer(("npu0", "gpu1"), 4096)


def test_context_manager_unloads() -> None:
    mal = MallocAllocator()
    with FallbackMemoryManager({M: mal}) as mgr:
        mgr.buffer("a", 10)
        mgr.buffer("b", 20)
        assert mal.live().count == 2 and len(mgr) == 2 and "a" in mgr
    assert mal.live() == LiveStats(0, 0)


def test_changed_edge_is_an_error() -> None:
    mgr, _, _ = manager()
    mgr.buffer("e", 100, alignments=(64,))
    with pytest.raises(ValueError, match="do not change"):
        mgr.buffer("e", 200, alignments=(64,))
    with pytest.raises(ValueError, match="do not change"):
        mgr.buffer("e", 100, alignments=(4096,))
    with pytest.raises(ValueError, match="do not change"):
        mgr.buffer("e", 100, source=F, alignments=(64,))
    assert mgr.buffer("e", 50, alignments=(32,)) is mgr.buffer("e", 100)  # compatible: reused
    mgr.unload()


def test_missing_allocator_kind_is_an_error() -> None:
    mgr = FallbackMemoryManager({M: MallocAllocator()})
    assert mgr.available_sources == frozenset({M})
    with pytest.raises(ValueError, match="no dmabuf allocator"):
        mgr.buffer("e", 10, source=D)


def test_for_decision_uses_decision_requirements() -> None:
    mgr, _, mfd = manager()
    dec = plan_edge(GPU, CPU, available=mgr.available_sources, prefer=(F, M))
    buf = mgr.for_decision("e", 999, dec)
    assert buf.source is F and buf.alignment == dec.alignment == 128
    with pytest.raises(ValueError, match="needs no fallback memory"):
        mgr.for_decision("c", 10, plan_edge(GPU, CPU, "copy"))
    mgr.unload()
    assert mfd.live() == LiveStats(0, 0)


# ---- the edge-step decision table --------------------------------------------------------

NPU = BackendCapabilities(  # Ethos-N: imports dma-buf only, pads to 1024 B, cannot export
    "npu", alignment=4096, size_multiple=1024, import_sources=frozenset({D}),
    fallback_import_memory_required=True,
)
GPU = BackendCapabilities(  # PoCL / Mali via USE_HOST_PTR: unified memory, cannot export
    "gpu", alignment=128, import_sources=HOST_KINDS, fallback_import_memory_required=True,
)
DGPU = BackendCapabilities(  # a discrete card: no unified memory, no import extension
    "dgpu", alignment=512, import_sources=HOST_KINDS, fallback_import_memory_required=True,
    unified_memory=False,
)
MALI = BackendCapabilities(  # not reporting unified memory, but cl_arm_import_memory present
    "mali", alignment=64, import_sources=HOST_KINDS, fallback_import_memory_required=True,
    unified_memory=False, import_extension=True,
)
CPU = BackendCapabilities(  # llvm: works on any host memory, its outputs are malloc memory
    "cpu", alignment=64, import_sources=HOST_KINDS, export_sources=frozenset({M}),
)
MALLOC_ONLY = BackendCapabilities("host-only", alignment=64, import_sources=frozenset({M}))
NO_DMABUF = frozenset({M, F})

TABLE = [
    # src, dst, mode, available, step, memory, alignment, size multiple, words in the reason
    (CPU, GPU, "auto", None, EdgeStep.MEM_IMPORT, M, 128, 1, "cpu exports malloc"),
    (GPU, CPU, "auto", None, EdgeStep.FALLBACK_IMPORT, M, 128, 1, "gpu requires fallback"),
    (NPU, GPU, "auto", None, EdgeStep.FALLBACK_IMPORT, D, 4096, 1024, "lcm(4096, 128) = 4096"),
    (GPU, NPU, "auto", None, EdgeStep.FALLBACK_IMPORT, D, 4096, 1024, "both import dmabuf"),
    (NPU, CPU, "auto", None, EdgeStep.FALLBACK_IMPORT, D, 4096, 1024, "npu requires fallback"),
    (
        CPU,
        NPU,
        "auto",
        None,
        EdgeStep.MEM_COPY,
        None,
        1,
        1,
        "cpu exports malloc, npu imports dmabuf",
    ),
    (
        NPU,
        GPU,
        "auto",
        NO_DMABUF,
        EdgeStep.MEM_COPY,
        None,
        1,
        1,
        "none of which this machine can allocate",
    ),
    (CPU, DGPU, "auto", None, EdgeStep.MEM_COPY, None, 1, 1, "discrete"),
    (DGPU, NPU, "auto", None, EdgeStep.MEM_COPY, None, 1, 1, "dgpu has neither unified"),
    (CPU, DGPU, "import", None, EdgeStep.MEM_IMPORT, M, 512, 1, "auto would copy"),
    (MALI, NPU, "auto", None, EdgeStep.FALLBACK_IMPORT, D, 4096, 1024, "import extension"),
    (GPU, CPU, "copy", None, EdgeStep.MEM_COPY, None, 1, 1, "forces a copy"),
    (NPU, GPU, "copy", None, EdgeStep.MEM_COPY, None, 1, 1, "forces a copy"),
    (GPU, CPU, "import", None, EdgeStep.FALLBACK_IMPORT, M, 128, 1, "forces import"),
]


@pytest.mark.parametrize(
    "src,dst,mode,available,step,memory,align,mult,words", TABLE,
    ids=[f"{r[0].name}->{r[1].name}-{r[2]}{'-nodmabuf' if r[3] else ''}" for r in TABLE],
)
def test_decision_table(src, dst, mode, available, step, memory, align, mult, words) -> None:
    dec = plan_edge(src, dst, mode, available=available)
    assert (dec.step, dec.memory_source, dec.alignment, dec.size_multiple) == (
        step,
        memory,
        align,
        mult,
    )
    assert words in dec.reason, dec.reason
    assert dec.source == src.name and dec.destination == dst.name and dec.mode == mode
    assert dec.step.value in dec.describe()


@pytest.mark.parametrize(
    "src,dst,available",
    [(CPU, NPU, None), (NPU, GPU, NO_DMABUF), (MALLOC_ONLY, NPU, None)],
)
def test_forced_import_that_cannot_happen_is_an_error(src, dst, available) -> None:
    with pytest.raises(EdgePlanError, match="impossible"):
        plan_edge(src, dst, "import", available=available)


def test_bad_mode_rejected() -> None:
    with pytest.raises(ValueError, match="fallback_mode"):
        plan_edge(CPU, GPU, "zero-copy")


def test_capabilities_validated() -> None:
    with pytest.raises(ValueError, match="power of two"):
        BackendCapabilities("x", alignment=48)
    caps = BackendCapabilities("x", import_sources={M})  # any iterable becomes a frozenset
    assert caps.import_sources == frozenset({M})


def test_one_output_several_consumers_share_one_buffer() -> None:
    decs = plan_edges(GPU, [NPU, CPU, DGPU])
    npu, cpu, dgpu = decs
    assert npu.step is cpu.step is EdgeStep.FALLBACK_IMPORT
    # one buffer for both importers: a kind both take, aligned and padded for all three sides
    assert npu.memory_source is cpu.memory_source is D
    assert npu.alignment == cpu.alignment == 4096 and npu.size_multiple == cpu.size_multiple == 1024
    assert "shared by 2 consumers" in npu.reason
    assert dgpu.step is EdgeStep.MEM_COPY


def test_consumer_that_cannot_take_the_shared_kind_is_copied_or_refused() -> None:
    decs = plan_edges(GPU, [NPU, MALLOC_ONLY])
    assert decs[0].step is EdgeStep.FALLBACK_IMPORT and decs[0].memory_source is D
    assert decs[1].step is EdgeStep.MEM_COPY and "shared as dmabuf" in decs[1].reason
    with pytest.raises(EdgePlanError):
        plan_edges(GPU, [NPU, MALLOC_ONLY], "import")


def test_single_consumer_plan_edges_equals_plan_edge() -> None:
    for src, dst in [(GPU, CPU), (NPU, GPU), (CPU, DGPU)]:
        assert plan_edges(src, [dst]) == [plan_edge(src, dst)]
