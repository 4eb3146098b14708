"""Allocators: alignment, padding, leak accounting, memfd sharing, the dma-buf paths."""
from __future__ import annotations

import fcntl
import mmap
import os
import socket
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.runtime import allocators as A
from tvm_ethos.runtime.allocators import (
    AllocationError,
    DmaBufAllocator,
    DmaBufUnavailableError,
    LiveStats,
    MallocAllocator,
    MemfdAllocator,
    MemorySource,
    aligned_copy,
    aligned_empty,
    map_shared_fd,
)

PAGE = mmap.PAGESIZE


@settings(max_examples=300, deadline=None)
@given(
    exp=st.integers(0, 16),
    nbytes=st.integers(0, 70_000),
    pad_to=st.integers(1, 4096),
)
def test_malloc_alignment_and_padding(exp: int, nbytes: int, pad_to: int) -> None:
    alloc = MallocAllocator()
    a = alloc.allocate(nbytes, alignment=1 << exp, pad_to=pad_to)
    assert a.address % (1 << exp) == 0
    assert a.padded_nbytes % pad_to == 0
    assert nbytes <= a.padded_nbytes < nbytes + pad_to
    v = a.view(padded=True)
    assert v.ctypes.data == a.address and v.nbytes == a.padded_nbytes
    if a.padded_nbytes:
        v[-1] = 0xAB  # the padding is really ours to write
        assert v[-1] == 0xAB
    assert alloc.live() == LiveStats(1, a.padded_nbytes)
    a.free()
    assert alloc.live() == LiveStats(0, 0)


@settings(max_examples=40, deadline=None)
@given(
    exp=st.integers(0, PAGE.bit_length() - 1),
    nbytes=st.integers(1, 3 * PAGE),
    pad_to=st.integers(1, 2048),
)
def test_memfd_alignment_and_padding(exp: int, nbytes: int, pad_to: int) -> None:
    alloc = MemfdAllocator()
    a = alloc.allocate(nbytes, alignment=1 << exp, pad_to=pad_to)
    try:
        assert a.address % (1 << exp) == 0 and a.address % PAGE == 0
        assert a.padded_nbytes % pad_to == 0 and a.padded_nbytes >= nbytes
        a.view(padded=True)[-1] = 7
    finally:
        a.free()
    assert alloc.live() == LiveStats(0, 0)


@pytest.mark.parametrize("bad", [0, 3, 48, 4097, -64])
def test_alignment_must_be_power_of_two(bad: int) -> None:
    with pytest.raises(AllocationError, match="power of two"):
        MallocAllocator().allocate(16, alignment=bad)


def test_invalid_sizes_rejected() -> None:
    with pytest.raises(AllocationError):
        MallocAllocator().allocate(-1)
    with pytest.raises(AllocationError):
        MallocAllocator().allocate(10, pad_to=0)


def test_memfd_alignment_above_page_rejected_with_reason() -> None:
    with pytest.raises(AllocationError, match="page"):
        MemfdAllocator().allocate(16, alignment=PAGE * 2)


@pytest.mark.parametrize("cls", [MallocAllocator, MemfdAllocator])
def test_live_accounting_and_idempotent_free(cls) -> None:
    alloc = cls()
    blocks = [alloc.allocate(100 * (i + 1), alignment=64, pad_to=256) for i in range(10)]
    assert alloc.live() == LiveStats(10, sum(b.padded_nbytes for b in blocks))
    for b in blocks[:5]:
        b.free()
    frees = alloc.frees
    blocks[0].free()  # twice: nothing happens
    alloc.free(blocks[1])
    assert alloc.frees == frees == 5
    assert alloc.live() == LiveStats(5, sum(b.padded_nbytes for b in blocks[5:]))
    assert alloc.free_all() == 5
    assert alloc.live() == LiveStats(0, 0)
    assert alloc.allocations == 10 and alloc.frees == 10
    assert all(b.freed for b in blocks)


def test_free_of_foreign_allocation_rejected() -> None:
    a, b = MallocAllocator(), MallocAllocator()
    blk = a.allocate(32)
    with pytest.raises(AllocationError, match="another allocator"):
        b.free(blk)
    assert a.live().count == 1


@pytest.mark.parametrize("cls", [MallocAllocator, MemfdAllocator])
def test_views_survive_free_but_new_views_do_not(cls) -> None:
    alloc = cls()
    blk = alloc.allocate(4096, alignment=64)
    v = blk.view(np.int32, (32, 32))
    v[:] = np.arange(1024, dtype=np.int32).reshape(32, 32)
    blk.free()
    assert alloc.live() == LiveStats(0, 0)
    # The old view still owns mapped memory (no dangling pointer after free)...
    assert int(v.sum()) == sum(range(1024))
    # ...and the freed block hands out nothing new.
    with pytest.raises(AllocationError):
        blk.view()
    with pytest.raises(AllocationError):
        _ = blk.fd


def test_view_dtype_must_divide() -> None:
    blk = MallocAllocator().allocate(10)
    with pytest.raises(ValueError):
        blk.view(np.int32)


def test_memfd_two_mappings_share_pages() -> None:
    alloc = MemfdAllocator()
    blk = alloc.allocate(3 * PAGE + 5, alignment=PAGE)
    other = map_shared_fd(blk.fd, blk.nbytes)  # a second, independent mapping of the same fd
    assert other.ctypes.data != blk.address
    mine = blk.view()
    mine[:] = np.arange(mine.size, dtype=np.uint64).astype(np.uint8)
    assert np.array_equal(other, mine)
    other[123] = 0x5A
    assert mine[123] == 0x5A  # a write through either mapping is seen by the other: same pages
    del other
    blk.free()
    assert alloc.live() == LiveStats(0, 0)


def test_memfd_is_sealed_against_resizing() -> None:
    blk = MemfdAllocator().allocate(PAGE)
    seals = fcntl.fcntl(blk.fd, fcntl.F_GET_SEALS)
    assert seals & fcntl.F_SEAL_SHRINK and seals & fcntl.F_SEAL_GROW
    with pytest.raises(PermissionError):
        os.ftruncate(blk.fd, 0)  # a peer cannot make our mapping fault
    blk.free()


CHILD = textwrap.dedent(
    """
    import mmap, socket, sys
    sock = socket.socket(fileno=int(sys.argv[1]))
    msg, fds, _flags, _addr = socket.recv_fds(sock, 64, 1)
    n = int(msg.decode())
    mm = mmap.mmap(fds[0], n, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE)
    ok = all(mm[i] == (i * 7) % 251 for i in range(0, n, 97))
    mm[0:4] = b"CHLD"
    sock.sendall(b"ok" if ok else b"bad")
    """
)


def test_memfd_fd_passes_to_child_process() -> None:
    alloc = MemfdAllocator()
    blk = alloc.allocate(64 * 1024)
    view = blk.view()
    view[:] = (np.arange(view.size) * 7 % 251).astype(np.uint8)
    parent, child = socket.socketpair()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(child.fileno())], pass_fds=[child.fileno()]
        )
        child.close()
        socket.send_fds(parent, [str(blk.nbytes).encode()], [blk.fd])
        parent.settimeout(30)
        answer = parent.recv(16)
        assert proc.wait(timeout=30) == 0
    finally:
        parent.close()
    assert answer == b"ok"  # the child read our bytes through the fd...
    assert bytes(view[:4]) == b"CHLD"  # ...and its write landed in our mapping
    blk.free()
    assert alloc.live() == LiveStats(0, 0)


# ---- dma-buf -----------------------------------------------------------------------------

REASON = A.dma_buf_unavailable_reason()
REQUIRE = os.environ.get("TVM_ETHOS_REQUIRE_DMABUF") == "1"


def test_dmabuf_real_node() -> None:
    """On a board with /dev/dma_heap/system or /dev/udmabuf: allocate, sync, share."""
    if REASON is not None:
        if REQUIRE:
            pytest.fail(f"TVM_ETHOS_REQUIRE_DMABUF=1 but {REASON}")
        pytest.skip(REASON)
    alloc = DmaBufAllocator()
    try:
        blk = alloc.allocate(10_000, alignment=PAGE, pad_to=1024)
        assert blk.source is MemorySource.DMABUF and blk.address % PAGE == 0
        assert blk.padded_nbytes % 1024 == 0
        with blk.cpu_access(write=True) as raw:
            raw[:] = 0x3C
        other = map_shared_fd(blk.fd, blk.nbytes)
        blk.begin_cpu_access(read=True, write=False)
        assert (other == 0x3C).all()
        blk.end_cpu_access(read=True, write=False)
        del other
        blk.free()
        assert alloc.live() == LiveStats(0, 0)
    finally:
        alloc.close()


def test_dmabuf_unavailable_error_names_nodes_and_alternatives(tmp_path) -> None:
    heap, udma = str(tmp_path / "no_heap"), str(tmp_path / "no_udmabuf")
    with pytest.raises(DmaBufUnavailableError) as err:
        DmaBufAllocator(heap, udma)
    msg = str(err.value)
    assert heap in msg and udma in msg
    assert "CONFIG_DMABUF_HEAPS_SYSTEM" in msg and "CONFIG_UDMABUF" in msg
    assert "MemfdAllocator" in msg and "MallocAllocator" in msg
    assert err.value.missing == (heap, udma)
    assert "\n" not in msg  # one clear line


def test_dmabuf_unavailable_here_is_reported_exactly() -> None:
    # This machine's kernel has neither node (notes/zero-copy.md); the reason is the error text.
    usable, problems = A.dma_buf_nodes()
    if usable:
        assert REASON is None
    else:
        assert REASON is not None and all(p in REASON for p in problems)


class FakeKernel:
    """Stands in for the dma-heap / udmabuf drivers: checks the ioctl layouts, hands out memfds."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, bytes]] = []

    def __call__(self, fd, request, arg, mutate=True):
        data = bytes(arg)
        self.calls.append((request, data))
        if request == A.DMA_HEAP_IOCTL_ALLOC:
            length, fd_out, fd_flags, heap_flags = struct.unpack(A.DMA_HEAP_ALLOC_FMT, data)
            assert len(data) == 24 and fd_out == 0 and heap_flags == 0
            assert fd_flags == os.O_RDWR | os.O_CLOEXEC and length % PAGE == 0
            mfd = os.memfd_create("fake-heap")
            os.ftruncate(mfd, length)
            arg[:] = struct.pack(A.DMA_HEAP_ALLOC_FMT, length, mfd, fd_flags, heap_flags)
            return 0
        if request == A.UDMABUF_CREATE:
            memfd, flags, offset, size = struct.unpack(A.UDMABUF_CREATE_FMT, data)
            assert len(data) == 24 and flags == A.UDMABUF_FLAGS_CLOEXEC and offset == 0
            assert fcntl.fcntl(memfd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK
            assert os.fstat(memfd).st_size == size and size % PAGE == 0
            return os.dup(memfd)  # the dma-buf fd is the syscall's return value
        if request == A.DMA_BUF_IOCTL_SYNC:
            assert len(data) == 8
            return 0
        raise AssertionError(f"unexpected ioctl 0x{request:x}")


@pytest.mark.parametrize("method", ["heap", "udmabuf"])
def test_dmabuf_ioctl_protocol_with_fake_driver(tmp_path, method: str) -> None:
    node = tmp_path / "node"
    node.write_bytes(b"")
    fake = FakeKernel()
    heap = str(node) if method == "heap" else str(tmp_path / "absent")
    udma = str(node) if method == "udmabuf" else str(tmp_path / "absent")
    alloc = DmaBufAllocator(heap, udma, ioctl=fake)
    assert alloc.method == method
    blk = alloc.allocate(5000, alignment=256, pad_to=1024)
    assert blk.padded_nbytes == 5120 and blk.address % 256 == 0
    with blk.cpu_access(read=False, write=True) as raw:
        raw[:] = 9
    blk.begin_cpu_access(read=True, write=False)
    other = map_shared_fd(blk.fd, blk.nbytes)
    assert (other == 9).all()
    blk.end_cpu_access(read=True, write=False)
    syncs = [
        struct.unpack(A.DMA_BUF_SYNC_FMT, d)[0] for r, d in fake.calls if r == A.DMA_BUF_IOCTL_SYNC
    ]
    assert syncs == [
        A.DMA_BUF_SYNC_START | A.DMA_BUF_SYNC_WRITE,
        A.DMA_BUF_SYNC_END | A.DMA_BUF_SYNC_WRITE,
        A.DMA_BUF_SYNC_START | A.DMA_BUF_SYNC_READ,
        A.DMA_BUF_SYNC_END | A.DMA_BUF_SYNC_READ,
    ]
    assert A.DMA_BUF_SYNC_START == 0 and A.DMA_BUF_SYNC_END == 4 and A.DMA_BUF_SYNC_RW == 3
    del other
    alloc.close()
    assert alloc.live() == LiveStats(0, 0) and blk.freed


def test_ioctl_numbers_match_linux_headers() -> None:
    # _IOC(dir, type, nr, size) = dir << 30 | size << 16 | type << 8 | nr
    def ioc(direction: int, typ: str, nr: int, size: int) -> int:
        return direction << 30 | size << 16 | ord(typ) << 8 | nr

    assert A.DMA_HEAP_IOCTL_ALLOC == ioc(3, "H", 0, struct.calcsize(A.DMA_HEAP_ALLOC_FMT))
    assert A.UDMABUF_CREATE == ioc(1, "u", 0x42, struct.calcsize(A.UDMABUF_CREATE_FMT))
    assert A.DMA_BUF_IOCTL_SYNC == ioc(1, "b", 0, struct.calcsize(A.DMA_BUF_SYNC_FMT))


@given(st.lists(st.integers(1, 9), min_size=0, max_size=3),  # an empty array has no address
       st.sampled_from(["int8", "int32", "float32"]), st.sampled_from([1, 16, 64, 128, 4096]))
@settings(max_examples=40, deadline=None)
def test_aligned_arrays_start_on_the_alignment_and_keep_the_values(shape, dtype, alignment):
    x = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    y = aligned_copy(x, alignment)
    assert y.shape == x.shape and y.dtype == x.dtype and np.array_equal(x, y)
    assert y.ctypes.data % alignment == 0
    assert aligned_empty(shape, dtype, alignment).ctypes.data % alignment == 0
