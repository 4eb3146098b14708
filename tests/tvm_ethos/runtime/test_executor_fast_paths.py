"""The executor's per-inference shortcuts give what the numpy calls they replace give."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.runtime.executor import CPU_ALIGNMENT, _address, _aligned_output, _TensorPlan


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 300), start=st.integers(0, 70),
       dtype=st.sampled_from(["int8", "uint8", "int16", "int32", "float32"]))
def test_address_is_ctypes_data(size, start, dtype):
    raw = np.empty(size + 80, np.uint8)
    view = raw[start:start + size]
    assert _address(view) == view.ctypes.data
    typed = np.empty(size, dtype)
    assert _address(typed) == typed.ctypes.data


def test_address_of_an_empty_or_read_only_array():
    empty = np.empty(0, np.int8)
    assert _address(empty) == empty.ctypes.data
    ro = np.zeros(8, np.int8)
    ro.flags.writeable = False
    assert _address(ro) == ro.ctypes.data


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       dtype=st.sampled_from(["int8", "int16", "int32", "float32"]))
def test_aligned_output_shape_dtype_alignment(shape, dtype):
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    plan = _TensorPlan(0, "t", tuple(shape), dtype, nbytes, 0, "llvm", "cpu", [], True)
    out = _aligned_output(plan)
    assert out.shape == tuple(shape) and out.dtype == np.dtype(dtype)
    assert out.ctypes.data % CPU_ALIGNMENT == 0 and out.flags.c_contiguous
    assert out.flags.writeable


# ------------------------------------------------------------ output arrays cut from blocks
@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=4),
       dtype=st.sampled_from(["int8", "uint8", "int32", "float32"]),
       count=st.integers(1, 150))
def test_output_arrays_are_separate_aligned_arrays(shape, dtype, count):
    """Every array ``_OutputArrays.new`` hands out has the output's shape and dtype, starts at
    a multiple of CPU_ALIGNMENT, is writeable and C-contiguous, and shares no byte with any
    other one (blocks of rows, or one allocation each for large outputs)."""
    from tvm_ethos.runtime.executor import _OutputArrays

    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    made = _OutputArrays(_TensorPlan(0, "t", tuple(shape), dtype, nbytes, 0, "llvm", "cpu",
                                     [], True))
    arrays = [made.new() for _ in range(count)]
    for k, a in enumerate(arrays):
        assert a.shape == tuple(shape) and a.dtype == np.dtype(dtype)
        assert a.ctypes.data % CPU_ALIGNMENT == 0 and a.flags.c_contiguous and a.flags.writeable
        a.view(np.uint8)[...] = k % 251
    spans = sorted((a.ctypes.data, a.ctypes.data + a.nbytes) for a in arrays)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:]))
    for k, a in enumerate(arrays):
        assert (a.view(np.uint8) == k % 251).all()


# ------------------------------------------------------------ one flat list of kernel calls
@pytest.fixture(scope="module")
def two_output_model():
    from graph_builder import Graph

    import tvm_ethos

    g = Graph(np.random.RandomState(7))
    x = g.input((1, 8, 8, 4))
    a = g.conv2d(x, 8)
    model = g.build([g.pool("max", a), g.conv2d(a, 4, kernel=(1, 1))])
    return model, tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")


def _stats_fields(st):
    d = st.as_dict()
    d.pop("seconds")
    d.pop("allocations")
    return d


def _aligned_and_misaligned(x):
    from tvm_ethos.runtime.allocators import aligned_copy

    raw = np.zeros(x.nbytes + 128, np.uint8)
    off = (-int(raw.ctypes.data)) % 64 + 1
    mis = raw[off:off + x.nbytes].view(x.dtype).reshape(x.shape)
    mis[...] = x
    return aligned_copy(x), mis


def test_flat_calls_match_the_per_subgraph_path(two_output_model):
    """An all-CPU network runs its later inferences as one flat list of calls: the same
    outputs (bit-exact, new arrays each time), the same counters and trace as the first,
    per-subgraph inference, for aligned and staged inputs alike."""
    from conftest import oracle

    from tvm_ethos.runtime.executor import Executor

    model, cm = two_output_model
    ex = Executor(cm.program, cm.executable.mod)
    try:
        assert ex._flat_ok
        rs = np.random.RandomState(3)
        for _ in range(2):
            x = rs.randint(-128, 128, size=(1, 8, 8, 4)).astype(np.int8)
            for arr in _aligned_and_misaligned(x):
                fresh = Executor(cm.program, cm.executable.mod)  # its first run: per subgraph
                try:
                    want = fresh.run([arr])
                    want_stats = _stats_fields(fresh.last_run_stats)
                    assert fresh._slots[0].flat is not None
                finally:
                    fresh.unload()
                if not ex._slots:  # ex's first inference builds its flat calls
                    ex.run([arr])
                assert ex._slots[0].flat is not None
                got = ex.run([arr])
                assert _stats_fields(ex.last_run_stats) == want_stats
                ref = oracle(model, [x])
                for g, w, r in zip(got, want, ref):
                    assert np.array_equal(g.reshape(r.shape), r) and np.array_equal(g, w)
        held = ex.run([x])
        again = ex.run([x])
        assert all(not np.shares_memory(h, a) for h, a in zip(held, again))
    finally:
        ex.unload()


def test_flat_calls_refuse_misaligned_inputs_when_asked(two_output_model):
    from tvm_ethos.runtime.executor import Executor, MisalignedInputError

    _model, cm = two_output_model
    x = np.random.RandomState(4).randint(-128, 128, size=(1, 8, 8, 4)).astype(np.int8)
    aligned, mis = _aligned_and_misaligned(x)
    ex = Executor(cm.program, cm.executable.mod, misaligned="reject")
    try:
        ex.run([aligned])
        ex.run([aligned])
        assert ex._slots[0].flat is not None
        with pytest.raises(MisalignedInputError, match="not a multiple"):
            ex.run([mis])
        ex.run([aligned])  # the slot is free again
    finally:
        ex.unload()


# ------------------------------------------------------------ idle slots
def test_idle_slots_wake_a_waiting_request():
    """``get`` waits until a slot is put back; ``get_nowait`` never waits."""
    import queue
    import threading

    from tvm_ethos.runtime.executor import _IdleSlots

    idle = _IdleSlots()
    with pytest.raises(queue.Empty):
        idle.get_nowait()
    got = []
    waiter = threading.Thread(target=lambda: got.append(idle.get()))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not got
    idle.put("slot")
    waiter.join(5)
    assert got == ["slot"] and idle.qsize() == 0
    idle.put("a")
    idle.put("b")
    assert idle.get_nowait() == "b" and idle.qsize() == 1


def test_npu_streams_keep_the_per_subgraph_path():
    """An NPU subgraph that runs as a command stream is not a kernel call: such a network
    keeps the per-subgraph path (edges, streams) on every inference, and stays exact."""
    from conftest import oracle
    from graph_builder import Graph

    import tvm_ethos

    g = Graph(np.random.RandomState(8))
    x = g.input((1, 8, 8, 8))
    model = g.build([g.conv2d(g.conv2d(x, 8), 8)])
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-u,llvm")
    assert "ethos-u" in cm.partition_summary
    ex = cm.executor
    assert not ex._flat_ok
    xs = [np.random.RandomState(9).randint(-128, 128, size=(1, 8, 8, 8)).astype(np.int8)]
    for _ in range(2):
        (got,), (ref,) = cm.run(*xs), oracle(model, xs)
        assert np.array_equal(got.reshape(ref.shape), ref)
    assert ex._slots[0].flat is None
