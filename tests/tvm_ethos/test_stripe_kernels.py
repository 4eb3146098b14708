"""The NPU emulator's stripe kernels (tvm_ethos/emulator/stripe_kernels.py): the checked cascading
schedule on vectors and, on AVX-512 VNNI hosts, 1x1 convolutions on vpdpbusd; bit-exact with
TFLite, planned == scheduled bytes, every predicate of the checked schedule kept, and no write
outside an allocation under glibc's malloc checker."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact, model_path
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.host_cpu import target_or_skip
from tvm_ethos.emulator import stripe_kernels
from tvm_ethos.host.cpu import cpu_schedule
from tvm_ethos.host.cpu.x86_dot import has_vnni

needs_vnni = pytest.mark.skipif(not has_vnni(cpu_schedule.host_target()),
                                reason="this CPU has no AVX-512 VNNI")
U55 = "ethos-u,llvm"
ROOT = Path(__file__).resolve().parents[2]
MALLOC_DEBUG = Path("/lib/x86_64-linux-gnu/libc_malloc_debug.so.0")


def _captured(monkeypatch):
    """Every (before, after) PrimFunc pair ``stripe_kernels.schedule_stripes`` makes."""
    seen = []
    real = stripe_kernels.schedule_stripes

    def spy(prim, *a, **k):
        out = real(prim, *a, **k)
        seen.append((prim, out))
        return out

    monkeypatch.setattr(stripe_kernels, "schedule_stripes", spy)
    return seen


def _without_vnni(monkeypatch):
    """Build for a CPU without AVX-512 (so no VNNI) that this machine can run (skipped where
    there is none)."""
    target = target_or_skip(lacks=("avx512f",))
    monkeypatch.setattr(cpu_schedule, "host_target", lambda: dict(target))


def _predicates(prim) -> dict:
    """Block name -> its realize's predicate, for every block of ``prim``."""
    from tvm import s_tir, tirx

    sch = s_tir.Schedule(prim)
    out = {}
    todo = list(sch.get_child_blocks(sch.get_sblock("root")))
    while todo:
        blk = todo.pop()
        todo += list(sch.get_child_blocks(blk))
        block = sch.get(blk)
        parent = sch.get_sref(blk).parent.stmt
        body = getattr(parent, "body", None)
        kids = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
        for kid in kids:
            if isinstance(kid, s_tir.SBlockRealize) and kid.block.same_as(block):
                out[block.name_hint] = kid.predicate
    return out


def assert_predicates_kept(before, after):
    """Every predicate of the checked schedule still guards its block (or the block blockize
    made of it, ``<name>_o``) in the kernel that is built: the prologue steps and a ring's
    old rows compute nothing, so nothing is written where the schedule did not allocate."""
    from tvm import tirx
    from tvm.sym import Analyzer

    from tvm_ethos.emulator.line_buffer import _subst

    old, new = _predicates(before), _predicates(after)
    checked = 0
    for name, pred in old.items():
        if isinstance(pred, tirx.IntImm) and int(pred) == 1:
            continue
        # a reduction's init and update blocks (decompose_reduction), a blockized block
        derived = [f"{name}{part}{o}" for part in ("", "_init", "_update") for o in ("", "_o")]
        found = [new[d] for d in derived if d in new]
        assert found, name
        for got in found:
            names = {v.name: v for v in tirx.analysis.undefined_vars(got)}
            env = {v: names[v.name] for v in tirx.analysis.undefined_vars(pred)
                   if v.name in names}
            want = _subst(pred, env)
            ana = Analyzer()
            with ana.constraint_scope(got):
                kept = str(got) == str(want) or ana.can_prove(want)
            assert kept, (name, pred, got)
            checked += 1
    return checked


def _staging_copies_vectorized(prim) -> int:
    """How many weight / bias staging copies ``prim`` has; asserts each runs on vectors."""
    from tvm import s_tir, tirx

    sch = s_tir.Schedule(prim)
    n = 0
    for blk in sch.get_child_blocks(sch.get_sblock("root")):
        if sch.get(blk).name_hint.endswith("_global.npu_sram"):
            kinds = [sch.get(lp).kind for lp in sch.get_loops(blk)]
            assert kinds[-1] == tirx.ForKind.VECTORIZED, sch.get(blk).name_hint
            n += 1
    return n


@needs_vnni
@pytest.mark.parametrize("make", [
    lambda rs: tb.conv2d(rs, in_shape=(1, 12, 12, 32), cout=32, kernel=(1, 1)),
    lambda rs: tb.conv2d(rs, in_shape=(1, 9, 9, 64), cout=48, kernel=(1, 1), stride=(2, 2),
                         act="relu6"),
    lambda rs: tb.conv2d(rs, in_shape=(1, 7, 7, 128), cout=128, kernel=(1, 1), act="relu"),
])
def test_pointwise_conv_stripes_run_vpdpbusd_exact(make, monkeypatch):
    """On a VNNI host the emulator's 1x1 conv stripes accumulate with vpdpbusd (operands
    interleaved in registers, sum(w) alongside); the plan is still exact and the outputs
    bit-exact with TFLite."""
    seen = _captured(monkeypatch)
    model = make(np.random.RandomState(7))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=U55, npu_runtime="tir")
    assert cm.partition_summary == {"ethos-u": 1}
    (_before, after), = seen
    assert "vpdpbusd" in after.script()
    for sub in cm.plan_report["subgraphs"].values():
        assert sub["planned_bytes"] == sub["scheduled_bytes"]
    assert_bit_exact(cm, model, n_inputs=3, seed=7)


@needs_vnni
@pytest.mark.parametrize("make", [
    lambda rs: tb.conv2d(rs, in_shape=(1, 12, 12, 16), cout=32, kernel=(3, 3)),
    lambda rs: tb.conv2d(rs, in_shape=(1, 9, 11, 8), cout=16, kernel=(3, 3), stride=(2, 2),
                         act="relu"),
    lambda rs: tb.conv2d(rs, in_shape=(1, 10, 7, 12), cout=16, kernel=(5, 3)),
    lambda rs: tb.conv2d(rs, in_shape=(1, 9, 9, 8), cout=16, kernel=(3, 3), dilation=(2, 2),
                         padding="VALID"),
])
def test_padded_conv_stripes_run_vpdpbusd_exact(make, monkeypatch):
    """KxK convolutions with SAME padding on vpdpbusd: a read in the padding takes four x_zp
    bytes, whose products the sum(w) correction cancels; bit-exact with TFLite."""
    seen = _captured(monkeypatch)
    model = make(np.random.RandomState(3))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=U55, npu_runtime="tir")
    (_before, after), = seen
    assert "vpdpbusd" in after.script()
    assert_bit_exact(cm, model, n_inputs=3, seed=3)


def test_without_vnni_stripes_stay_int32(monkeypatch):
    _without_vnni(monkeypatch)
    seen = _captured(monkeypatch)
    model = tb.conv2d(np.random.RandomState(7), in_shape=(1, 12, 12, 32), cout=32,
                      kernel=(1, 1))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=U55, npu_runtime="tir")
    (_before, after), = seen
    assert "vpdpbusd" not in after.script() and "T.vectorized" in after.script()
    assert_bit_exact(cm, model, n_inputs=2, seed=7)


@needs_vnni
@settings(max_examples=8, deadline=None)
@given(
    cin4=st.integers(1, 24),
    cout=st.integers(1, 48),
    hw=st.tuples(st.integers(1, 10), st.integers(1, 10)),
    stride=st.sampled_from([(1, 1), (2, 2)]),
    kernel=st.sampled_from([(1, 1), (3, 3), (1, 3)]),
    seed=st.integers(0, 1000),
)
@example(cin4=2, cout=16, hw=(5, 3), stride=(1, 1), kernel=(3, 3), seed=1)
def test_conv_any_geometry_bit_exact(cin4, cout, hw, stride, kernel, seed):
    rs = np.random.RandomState(seed)
    model = tb.conv2d(rs, in_shape=(1, *hw, 4 * cin4), cout=cout, kernel=kernel, stride=stride)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target=U55, npu_runtime="tir")
    assert_bit_exact(cm, model, n_inputs=2, seed=seed)


@needs_vnni
def test_prologue_predicates_survive_vpdpbusd(monkeypatch):
    """ResNet-8 at its smallest budget: a lockstep cascade whose step loop starts early (the
    prologue, ``0 <= step``) holds the stride-2 1x1 conv ``l4`` on a ring. ``blockize`` drops
    that predicate; the VNNI block must get it back, else the prologue steps accumulate into
    rows before the compacted accumulator (the heap corruption of the reverted 8be7cf2)."""
    seen = _captured(monkeypatch)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model_path("resnet8_cifar")), target=U55,
                           npu_runtime="tir",
                           budget=17776)
    assert cm.plan_report["peak_memory_bytes"] == 17776
    (before, after), = seen
    assert "l4_conv2d_acc_update_o" in after.script(), "l4 runs on vpdpbusd"
    assert assert_predicates_kept(before, after) > 0
    assert _staging_copies_vectorized(after) > 0
    assert_bit_exact(cm, model_path("resnet8_cifar"), n_inputs=2)


_MALLOC_CASE = """
import sys, tempfile, numpy as np, tvm_ethos
cm = tvm_ethos.compile(tvm_ethos.load_model(sys.argv[1]), target="ethos-u,llvm", npu_runtime="tir",
                       budget=int(sys.argv[2]))
x = np.random.RandomState(0).randint(-128, 128, (1, 32, 32, 3)).astype(np.int8)
cm.run(x)
with tempfile.TemporaryDirectory() as d:
    tvm_ethos.load(cm.save(d + "/m.tvmethos")).run(x)
print("ok")
"""


@pytest.mark.slow
@pytest.mark.skipif(not MALLOC_DEBUG.exists(), reason="glibc's malloc debug library missing")
@pytest.mark.parametrize("budget", [17776, None])
def test_resnet8_emulator_passes_glibc_malloc_checker(budget):
    """Compile, run, save and load ResNet-8 under glibc's heap checker, which aborts on a
    corrupted heap that bit-exact outputs do not reveal."""
    env = dict(os.environ, LD_PRELOAD=str(MALLOC_DEBUG), MALLOC_CHECK_="3",
               PYTHONPATH=str(ROOT))
    args = [str(model_path("resnet8_cifar")), str(budget or 10**9)]
    run = subprocess.run([sys.executable, "-c", _MALLOC_CASE, *args], env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0 and "ok" in run.stdout, run.stderr[-2000:]
