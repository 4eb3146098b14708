"""te_ops' fixed-point helpers against gemmlowp's definitions, written out in Python integers
(``SaturatingRoundingDoublingHighMul``: sign-dependent nudge, division truncating to zero)."""
import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

INT32 = st.integers(-(2**31), 2**31 - 1)


def gemmlowp_srdhm(a: int, b: int) -> int:
    if a == b == -(2**31):
        return 2**31 - 1
    ab = a * b
    nudge = 1 << 30 if ab >= 0 else 1 - (1 << 30)
    v = ab + nudge
    q = abs(v) // (1 << 31)
    return q if v >= 0 else -q


_KERNEL = {}


def _srdhm_kernel():
    """One llvm kernel computing ``te_ops.srdhm`` elementwise over 64 pairs."""
    if not _KERNEL:
        import tvm
        from tvm import te

        from tvm_ethos.compute.te_ops import srdhm

        a = te.placeholder((64,), "int32", name="a")
        b = te.placeholder((64,), "int32", name="b")
        out = te.compute((64,), lambda i: srdhm(a[i], b[i]), name="out")
        _KERNEL["f"] = tvm.tirx.build(te.create_prim_func([a, b, out]), target="llvm")
    return _KERNEL["f"]


@settings(max_examples=30, deadline=None)
# (INT32_MIN, INT32_MIN), gemmlowp's saturating case, is left out: the multiplier operand is
# never negative (quant.quantize_multiplier), and that case gives INT32_MIN here
@example(pairs=[(-(2**31), 2**31 - 1), (2**31 - 1, 2**31 - 1), (-(2**31), 1 << 30),
                (-1, 1 << 30), (1, 1 << 30), (-3, 1 << 30), (0, 0)])
@given(pairs=st.lists(st.tuples(INT32, st.integers(0, 2**31 - 1)), min_size=1, max_size=64))
def test_srdhm_is_gemmlowps(pairs):
    import tvm

    f = _srdhm_kernel()
    a = np.zeros(64, np.int32)
    b = np.zeros(64, np.int32)
    a[: len(pairs)] = [p[0] for p in pairs]
    b[: len(pairs)] = [p[1] for p in pairs]
    out = tvm.runtime.tensor(np.zeros(64, np.int32))
    f(tvm.runtime.tensor(a), tvm.runtime.tensor(b), out)
    want = [gemmlowp_srdhm(int(x), int(y)) for x, y in zip(a, b)]
    assert out.numpy().tolist() == want


def gemmlowp_rdbpot(x: int, exponent: int) -> int:
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (1 if x < 0 else 0)
    return (x >> exponent) + (1 if remainder > threshold else 0)


def tflite_mbqm(x: int, multiplier: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier (double rounding)."""
    left, right = max(shift, 0), max(-shift, 0)
    return gemmlowp_rdbpot(gemmlowp_srdhm(x * (1 << left), multiplier), right)


_ONE_SHIFT = {}


def _one_shift_kernel(form: str = "general"):
    """``te_ops.mbqm_one_shift`` elementwise over 64 (x, multiplier, shift) triples; ``form``
    "right_only": the specialization for shifts that are all negative (no left factor, every
    lane rounds)."""
    if form not in _ONE_SHIFT:
        import tvm
        from tvm import te

        from tvm_ethos.compute.te_ops import mbqm_one_shift

        x = te.placeholder((64,), "int32", name="x")
        m = te.placeholder((64,), "int32", name="m")
        lmul = te.placeholder((64,), "int32", name="lmul")
        right = te.placeholder((64,), "int32", name="right")
        if form == "general":
            out = te.compute((64,), lambda i: mbqm_one_shift(x[i], m[i], lmul[i], right[i]),
                             name="out")
        else:
            out = te.compute((64,), lambda i: mbqm_one_shift(x[i], m[i], None, right[i], True),
                             name="out")
        f = te.create_prim_func([x, m, lmul, right, out])
        _ONE_SHIFT[form] = tvm.tirx.build(f, target="llvm")
    return _ONE_SHIFT[form]


TRIPLE = st.tuples(INT32, st.integers(0, 2**31 - 1), st.integers(-31, 8)).filter(
    lambda t: t[2] <= 0 or -(2**31) <= t[0] * (1 << t[2]) < 2**31)  # no int32 overflow (UB)


@settings(max_examples=40, deadline=None)
@example(triples=[(-(2**31), 2**31 - 1, 0), (2**31 - 1, 2**31 - 1, -31), (-(2**31), 1 << 30, -1),
                  (-3, 1 << 30, -1), (3, 1 << 30, -1), (-1, 1 << 30, -1), (0, 0, -5),
                  (-(2**31), 2**31 - 1, -31), (-6, 1 << 30, -2), (-2, 1 << 30, -2)],
         form="general")
@example(triples=[(-3, 1 << 30, -1), (3, 1 << 30, -1), (-6, 1 << 30, -2), (-2, 1 << 30, -2),
                  (-(2**31), 2**31 - 1, -31), (2**31 - 1, 2**31 - 1, -1)], form="right_only")
@given(triples=st.lists(TRIPLE, min_size=1, max_size=64),
       form=st.sampled_from(["general", "right_only"]))
def test_mbqm_one_shift_is_tflites(triples, form):
    import tvm

    from tvm_ethos.compute.te_ops import mbqm_one_shift_constants

    if form == "right_only":
        triples = [(x, m, min(s, -1)) for x, m, s in triples]
    f = _one_shift_kernel(form)
    triples = (triples * 64)[:64]
    x = np.array([t[0] for t in triples], np.int32)
    m = np.array([t[1] for t in triples], np.int32)
    k = mbqm_one_shift_constants(m, np.array([t[2] for t in triples], np.int32))
    out = tvm.runtime.tensor(np.zeros(64, np.int32))
    f(*[tvm.runtime.tensor(a) for a in (x, m, k["lmul"], k["right"])], out)
    assert out.numpy().tolist() == [tflite_mbqm(*t) for t in triples]
