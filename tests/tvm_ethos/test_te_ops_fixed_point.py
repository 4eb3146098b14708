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

        from tvm_ethos.lower.te_ops import srdhm

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
