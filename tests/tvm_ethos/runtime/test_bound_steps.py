"""The executor binds a CPU subgraph's kernels to its slot's buffers once (after the first
inference) and only the caller's inputs and the returned outputs per inference: later
inferences with new, misaligned or reused input arrays stay bit-exact, every inference returns
its own output arrays, and a kernel that fails on a later inference is still named."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import oracle
from graph_builder import Graph

import tvm_ethos
from tvm_ethos.runtime.executor import Executor, InferenceError

SHAPE = (1, 8, 8, 4)


@pytest.fixture(scope="module")
def llvm_model():
    g = Graph(np.random.RandomState(5))
    x = g.input(SHAPE)
    a = g.conv2d(x, 8)
    model = g.build([g.pool("max", a), g.conv2d(a, 4, kernel=(1, 1))])
    return model, tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")


def _exact(model, outs, x):
    ref = oracle(model, [x])
    assert len(outs) == len(ref)
    for o, r in zip(outs, ref):
        assert np.array_equal(np.asarray(o).reshape(r.shape), r)


def test_new_inputs_each_inference_stay_exact(llvm_model):
    model, cm = llvm_model
    ex = Executor(cm.program, cm.executable.mod)
    try:
        rs = np.random.RandomState(0)
        firsts = None
        for k in range(4):
            x = rs.randint(-128, 128, size=SHAPE).astype(np.int8)
            if k == 2:  # one byte off an aligned address: staged, a different buffer is bound
                raw = np.zeros(x.nbytes + 128, np.uint8)
                x = _misaligned(raw, x)
            outs = ex.run([x])
            _exact(model, outs, x)
            if firsts is None:
                firsts = [o.copy() for o in outs]
                held = outs
        # the arrays a first inference returned are the caller's: later runs do not write them
        for h, f in zip(held, firsts):
            assert np.array_equal(h, f)
        assert ex.last_run_stats.cpu_calls == sum(len(sg.steps) for sg in cm.program.subgraphs)
    finally:
        ex.unload()


def _misaligned(raw, x):
    off = (-int(raw.ctypes.data)) % 64 + 1
    out = raw[off:off + x.nbytes].view(np.int8).reshape(x.shape)
    out[...] = x
    return out


def test_kernel_failing_after_binding_is_named(llvm_model):
    model, cm = llvm_model
    ex = Executor(cm.program, cm.executable.mod)
    try:
        steps = [st.func for sg in cm.program.subgraphs for st in sg.steps]
        victim = steps[-1]
        real = ex._funcs[victim]
        fail = {"on": False}

        def kernel(*args):
            if fail["on"]:
                raise RuntimeError("injected kernel failure")
            return real(*args)

        ex._funcs[victim] = kernel
        x = np.random.RandomState(1).randint(-128, 128, size=SHAPE).astype(np.int8)
        _exact(model, ex.run([x]), x)
        fail["on"] = True
        with pytest.raises(InferenceError, match=f"kernel {victim}: RuntimeError: injected") as err:
            ex.run([x])
        assert victim in err.value.step
        fail["on"] = False
        _exact(model, ex.run([x]), x)  # the slot is usable after the failure
    finally:
        ex.unload()
