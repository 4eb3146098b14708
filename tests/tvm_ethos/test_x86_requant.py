"""x86_requant: the conv output stage on 16 int32 lanes (vpmuldq on even and odd lanes, the
rounding shift in int32) against TFLite's MultiplyByQuantizedMultiplier written out in Python
integers (gemmlowp's definitions, ties included), and in the host kernels of real models."""
import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_te_ops_fixed_point import tflite_mbqm

import tvm_ethos
from tests.helpers.host_cpu import runnable_mcpu
from tvm_ethos.compute import te_ops
from tvm_ethos.host.cpu import cpu_schedule, x86_requant

WIDTH, CHANNELS = 64, 32
#: each vector form: (the CPU it is built for where this machine runs none with it, one this
#: machine runs or None). AVX-512 holds the 16 lanes in one register; on AVX2 LLVM splits them
FORMS = {
    "avx512": ("znver4", runnable_mcpu(has=("avx512f", "avx512bw"))),
    "avx2": ("znver3", runnable_mcpu(has=("avx2",), lacks=("avx512f",))),
}
_KERNELS = {}


def _kernel(left: bool, all_right: bool, zp: int, lo: int, hi: int, mcpu: str):
    """The scheduled output stage of an int32 ``(1, 1, WIDTH, CHANNELS)`` accumulator with
    per-channel bias, multiplier, left factor and right shift as inputs (built once per form)."""
    key = (left, all_right, zp, lo, hi, mcpu)
    if key not in _KERNELS:
        import tvm
        from tvm import te

        shape = (1, 1, WIDTH, CHANNELS)
        acc = te.placeholder(shape, "int32", name="acc")
        bias = te.placeholder((CHANNELS,), "int32", name="bias")
        mult = te.placeholder((CHANNELS,), "int32", name="mult")
        lmul = te.placeholder((CHANNELS,), "int32", name="lmul") if left else None
        right = te.placeholder((CHANNELS,), "int32", name="right")
        out = te_ops.one_shift_output(acc, bias, mult, lmul, right, all_right, zp, (lo, hi),
                                      "int8", shape, "out", vector=True)
        params = [acc, bias, mult] + ([lmul] if left else []) + [right, out]
        target = {"kind": "llvm", "mcpu": mcpu}
        prim = cpu_schedule.schedule_for_cpu(te.create_prim_func(params),
                                             *cpu_schedule.host_tile(target))
        assert "int64x8" in prim.script()  # the 16-lane form replaced the scalar one
        _KERNELS[key] = tvm.compile(tvm.IRModule({"main": prim}), target=tvm.target.Target(target))
    return _KERNELS[key]


def _x86() -> bool:
    import platform

    return platform.machine() in ("x86_64", "AMD64")


CHANNEL = st.tuples(
    st.one_of(st.integers(0, 2**31 - 1),
              st.sampled_from([0, 1, 1 << 30, (1 << 30) + 1, 2**31 - 1, 1 << 29, 3 << 29])),
    st.integers(-31, 30),  # TFLite's shift: left where positive
    st.integers(-(2**29), 2**29),  # bias
)


@pytest.mark.skipif(not _x86(), reason="x86 vector kernels")
@settings(max_examples=16, deadline=None)
@example(channels=[(1 << 30, -1, 0), (1 << 30, -2, 5), (2**31 - 1, -31, 0), (0, -3, 7),
                   (1 << 30, 0, -1), (3 << 29, 4, 0), (2**31 - 1, 1, -(2**29))],
         zp=-128, clamp=(-128, 127), seed=0, form="avx512")
@example(channels=[(1 << 30, -1, 0), (1 << 29, -5, 3), (2**31 - 1, -31, 0)],
         zp=5, clamp=(-20, 90), seed=1, form="avx2")
@given(channels=st.lists(CHANNEL, min_size=1, max_size=CHANNELS),
       zp=st.integers(-128, 127),
       clamp=st.tuples(st.integers(-128, 127), st.integers(-128, 127)).filter(
           lambda c: c[0] < c[1]),
       seed=st.integers(0, 2**16),
       form=st.sampled_from(sorted(FORMS)))
def test_vector_requant_is_tflites(channels, zp, clamp, seed, form):
    """Every lane equals ``clamp(MultiplyByQuantizedMultiplier(acc + bias) + zp)`` for any
    multiplier in [0, 2**31), shift, bias, zero point and clamp, and any accumulator with
    ``|(acc + bias) * 2**left| < 2**30`` (the layer bound ``te_ops`` checks): dense small
    values (every rounding tie of power-of-two multipliers), the extremes and random ones. On
    AVX-512 and on AVX2, each run on a CPU this machine has; a form no such CPU has is built
    and its 16-lane form checked, not run (its code would die with SIGILL here)."""
    import tvm

    channels = (channels * CHANNELS)[:CHANNELS]
    mult = np.array([c[0] for c in channels], np.int32)
    shift = np.array([c[1] for c in channels], np.int32)
    bias = np.array([c[2] for c in channels], np.int32)
    left = bool((shift > 0).any())
    all_right = bool((shift < 0).all())
    k = te_ops.mbqm_one_shift_constants(mult, shift)
    limit = x86_requant.X_LIMIT // k["lmul"].astype(np.int64)  # |x| < limit per channel
    rs = np.random.RandomState(seed)
    j = np.arange(WIDTH)[:, None]
    r = k["right"].astype(np.int64)[None, :]
    extremes = rs.uniform(-1, 1, (WIDTH, CHANNELS)) * (limit - 1)
    extremes[0], extremes[1] = limit - 1, -(limit - 1)
    # around multiples of 2**r: the ties of both roundings for power-of-two multipliers
    ties = (j // 5 - 6) * (1 << r) + (j % 5 - 2)
    dense = np.broadcast_to(j - WIDTH // 2, (WIDTH, CHANNELS))
    lo, hi = clamp
    built_for, runnable = FORMS[form]
    f = _kernel(left, all_right, zp, lo, hi, runnable or built_for)
    if runnable is None:
        return
    for rows in (extremes.astype(np.int64), ties, dense):
        rows = np.clip(rows, -(limit - 1), limit - 1)
        acc = (rows - bias).astype(np.int32).reshape(1, 1, WIDTH, CHANNELS)
        args = [acc, bias, mult] + ([k["lmul"]] if left else []) + [k["right"]]
        out = tvm.runtime.tensor(np.zeros((1, 1, WIDTH, CHANNELS), np.int8))
        f["main"](*[tvm.runtime.tensor(a) for a in args], out)
        want = [[min(max(tflite_mbqm(int(v), int(mult[c]), int(shift[c])) + zp, lo), hi)
                 for c, v in enumerate(row)] for row in rows]
        assert out.numpy().reshape(WIDTH, CHANNELS).tolist() == want


def test_layer_bound_decides_the_form():
    """``conv_x_bound``: the largest ``|x - x_zp|`` times the channel's sum of ``|w|`` plus
    ``|bias|``; a layer whose bound reaches 2**30 keeps the scalar form (no annotation)."""
    from types import SimpleNamespace

    from tvm import te

    w = np.zeros((3, 3, 2, 2), np.int8)
    w[..., 0] = -128
    w[0, 0, 0, 1] = 5
    op = SimpleNamespace(weights=w, bias=np.array([-7, 3], np.int32), in_q=[(0.1, -100)])
    assert te_ops.conv_x_bound(op).tolist() == [227 * 128 * 18 + 7, 227 * 5 + 3]
    acc = te.placeholder((1, 1, 1, 2), "int32", name="acc")
    consts = [te.placeholder((2,), "int32", name=n) for n in ("b", "m", "r")]
    for vector in (True, False):
        out = te_ops.one_shift_output(acc, consts[0], consts[1], None, consts[2], True, 0,
                                      (-128, 127), "int8", (1, 1, 1, 2), "out", vector)
        assert (x86_requant.REQUANT_ANNOTATION in out.op.attrs) == vector


def _vnni_host() -> bool:
    from tvm_ethos.host.cpu.x86_dot import has_vnni

    return has_vnni(cpu_schedule.host_target())


@pytest.mark.skipif(not _vnni_host(), reason="this CPU has no AVX-512 VNNI")
@pytest.mark.parametrize("make", [
    lambda rs: tb.conv2d(rs, in_shape=(1, 7, 7, 16), cout=32, kernel=(1, 1), act="relu6"),
    lambda rs: tb.conv2d(rs, in_shape=(1, 9, 9, 32), depthwise=True, act="relu6"),
    lambda rs: tb.conv2d(rs, in_shape=(1, 6, 5, 3), cout=16, kernel=(3, 3), stride=(2, 2)),
    lambda rs: tb.conv2d(rs, in_shape=(1, 4, 4, 8), cout=48, kernel=(1, 1), stride=(2, 2)),
])
def test_conv_kernels_use_the_vector_requant_exact(make, monkeypatch):
    """On a VNNI host the 1x1 (odd width: a predicated tail), depthwise and KxK conv kernels'
    output stages take the 16-lane form and stay bit-exact with TFLite's reference kernels."""
    seen = []
    real = cpu_schedule.schedule_for_cpu

    def spy(prim, *a, **k):
        out = real(prim, *a, **k)
        seen.append(out)
        return out

    monkeypatch.setattr(cpu_schedule, "schedule_for_cpu", spy)
    model = make(np.random.RandomState(3))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    assert any("int64x8" in f.script() for f in seen)
    assert_bit_exact(cm, model, n_inputs=3, seed=3)
