"""TFLite's per-channel conv requantization on 16 int32 lanes, without widening them to int64.

A conv's output stage (``te_ops._conv_output``, in :func:`te_ops.mbqm_one_shift`'s form) is
``clamp(rdbpot(srdhm(x, M), r) + zp)`` for ``x = (acc + bias) * 2**left`` with a 64-bit
product ``P = x * M``. Vectorized as written, LLVM sign-extends each half of the 16 int32 lanes
to 8 int64 lanes, multiplies with ``vpmullq``, does the rounding and the per-lane shift in
64-bit lanes and packs the results back (``vpmovqd``, an insert). Here the 16 lanes stay one
register, seen as 8 int64 lanes where a product is needed:

* ``vpmuldq`` multiplies the even int32 lanes (the low halves, sign extended) into 8 exact
  64-bit products, and again for the odd lanes shifted down. LLVM has no intrinsic for it; it
  selects ``vpmuldq`` for a 64-bit multiply of operands that are sign extensions of 32-bit
  values, written ``(v << 32) >> 32`` (even) and ``v >> 32`` (odd) on the int64 view.
* Each product gets ``K = 2**30 + 2**(30+r)`` (``2**30`` where ``r = 0``) and
  ``u = (P + K) >> 31`` is taken into 32 bits: the even lanes' from the low half of
  ``(P + K) >> 31``, the odd lanes' from the high half of ``(P + K) << 1``, one blend.
* ``q = (u - [x < 0]) >> r`` (``vpsravd``, 16 lanes at once), the correction only where
  ``r >= 1``.

Why it is TFLite's value: with ``y = srdhm(x, M) = floor((P + 2**30) / 2**31)`` and ``r >= 1``,
``RoundingDivideByPOT(y, r) = floor((y + 2**(r-1) - [y < 0]) / 2**r)`` and
``y + 2**(r-1) = floor((P + K) / 2**31) = u`` (``2**(30+r)`` is a multiple of ``2**31``).
``[y < 0]`` may be replaced by ``[x < 0]`` (``M >= 0``): they differ only where
``-2**30 <= P < 0``, where ``y = 0`` and ``(2**(r-1) - 1) >> r = 0 = (2**(r-1)) >> r``; and
where ``M = 0`` the same. For ``r = 0``, ``u = y``. ``u`` must fit int32: it does where
``|x| < 2**30`` (``|P| < 2**61``, so ``|y| < 2**30`` and ``u < 2**31``), which ``te_ops``
checks per layer from the weights, the bias and the input zero point
(:data:`X_LIMIT`) before it marks a stage for this form. Tests:
tests/tvm_ethos/test_x86_requant.py (hypothesis over multipliers, shifts, zero points, clamps
and every ``|x| < 2**30``, ties included).

The schedule (``cpu_schedule``) splits a marked stage's channel loop into vectors of 16,
blockizes each and replaces the block's body by :func:`requant_vector`
(:func:`replace_with_vector_requant`), as ``x86_dot`` does for ``vpdpbusd``.
"""
from __future__ import annotations

from tvm import tirx
from tvm.ir.expr import TensorLoad

from tvm_ethos.host.cpu.x86_dot import open_step, put_step

#: the block annotation of an output stage in this form; its value (:func:`encode`):
#: ``"bias,mult,right,lmul|zp|lo|hi|all_right"``: the names of the per-channel constants'
#: buffers (``lmul`` empty when no channel shifts left), the output zero point, the clamp and
#: whether every channel shifts right
REQUANT_ANNOTATION = "tvm_ethos.requant"
#: int32 lanes of one requantization vector (a 512-bit register)
LANES = 16
#: ``|(acc + bias) * 2**left|`` must stay below this for ``u`` to fit int32 (module doc)
X_LIMIT = 1 << 30
_HALF = LANES // 2
_LOW = 0xFFFFFFFF


def encode(bias: str, mult: str, right: str, lmul: str | None, zp: int, lo: int, hi: int,
           all_right: bool) -> str:
    """The :data:`REQUANT_ANNOTATION` value of an output stage."""
    return f"{bias},{mult},{right},{lmul or ''}|{zp}|{lo}|{hi}|{int(all_right)}"


def _decode(value: str):
    names, zp, lo, hi, all_right = value.split("|")
    bias, mult, right, lmul = names.split(",")
    return bias, mult, right, lmul or None, int(zp), int(lo), int(hi), all_right == "1"


def _c64(v: int):
    return tirx.Broadcast(tirx.const(v, "int64"), _HALF)


def _c32(v: int):
    return tirx.Broadcast(tirx.const(v, "int32"), LANES)


def _as64(v):
    return tirx.reinterpret(f"int64x{_HALF}", v)


def _sext_low(v64):
    """The low halves of 64-bit lanes, sign extended (``vpmuldq`` reads only them)."""
    return tirx.shift_right(tirx.shift_left(v64, _c64(32)), _c64(32))


def _rounding(r64, all_right: bool):
    """``K = 2**30 + 2**(30+r)`` per 64-bit lane (``2**30`` where ``r = 0``)."""
    k = tirx.shift_left(_c64(1), r64 + _c64(30))
    if not all_right:
        k = tirx.Select(r64 > _c64(0), k, _c64(0))
    return _c64(1 << 30) + k


def requant_vector(acc, bias, mult, right, lmul, zp: int, lo: int, hi: int, all_right: bool,
                   out_dtype: str):
    """``clamp(mbqm_one_shift(acc + bias) + zp, lo, hi)`` of 16 lanes (each argument an
    int32x16 expression; ``lmul`` None where no channel shifts left; every
    ``|x| < X_LIMIT``), as ``out_dtype`` lanes."""
    x = acc + bias
    if lmul is not None:
        x = x * lmul
    x64, m64 = _as64(x), _as64(mult)
    r64 = _as64(right)
    r_even = tirx.bitwise_and(r64, _c64(_LOW))  # 0 <= r <= 31
    r_odd = tirx.shift_right(r64, _c64(32))
    p_even = _sext_low(x64) * _sext_low(m64)
    p_odd = tirx.shift_right(x64, _c64(32)) * tirx.shift_right(m64, _c64(32))
    u_even = tirx.shift_right(p_even + _rounding(r_even, all_right), _c64(31))  # low halves
    u_odd = tirx.shift_left(p_odd + _rounding(r_odd, all_right), _c64(1))  # high halves
    u = tirx.reinterpret(f"int32x{LANES}", tirx.bitwise_or(
        tirx.bitwise_and(u_even, _c64(_LOW)), tirx.bitwise_and(u_odd, _c64(~_LOW))))
    negative = tirx.shift_right(x, _c32(31))  # -1 where x < 0
    if not all_right:
        negative = tirx.Select(right > _c32(0), negative, _c32(0))
    v = tirx.shift_right(u + negative, right) + _c32(zp)
    v = tirx.min(tirx.max(v, _c32(lo)), _c32(hi))
    return v.astype(f"{out_dtype}x{LANES}")


def _loads(expr, out: dict) -> dict:
    """The BufferLoads of a requantization expression, by buffer name."""
    if isinstance(expr, TensorLoad):
        out.setdefault(expr.source.name, expr)
        return out
    for field in ("a", "b", "value", "condition", "true_value", "false_value"):
        sub = getattr(expr, field, None)
        if sub is not None and not isinstance(sub, (int, str)):
            _loads(sub, out)
    return out


def applies(sch, block, value: str) -> bool:
    """Whether ``block`` reads the constants ``value`` names and one accumulator, as
    :func:`replace_with_vector_requant` needs (TIR's simplifier may fold a degenerate stage,
    e.g. a clamp to one value, into a constant)."""
    names = {r.source.name for r in sch.get(block).reads}
    bias, mult, right, lmul, *_ = _decode(value)
    consts = {n for n in (bias, mult, right, lmul) if n}
    return consts <= names and len(names - consts) == 1


def replace_with_vector_requant(sch, step, value: str) -> None:
    """Replace the body of ``step`` (a block made by ``Schedule.blockize`` over a loop of 16
    output channels of a stage annotated :data:`REQUANT_ANNOTATION` with ``value``) by
    :func:`requant_vector`. The block keeps its iterators and regions."""
    what = "replace_with_vector_requant"
    store, ramp, (loop,) = open_step(sch, step, what, loops=1)
    if int(loop.extent) != LANES:
        raise ValueError(f"{what}: not a blockized loop of 16 channels")
    bias_n, mult_n, right_n, lmul_n, zp, lo, hi, all_right = _decode(value)
    loads = _loads(store.value, {})
    consts = {bias_n, mult_n, right_n, lmul_n}
    acc = [ld for name, ld in loads.items() if name not in consts]
    if len(acc) != 1 or any(n not in loads for n in consts if n):
        raise ValueError(f"{what}: not a conv requantization stage")

    def vector(load_or_store):
        return ramp(load_or_store, LANES)

    def load(name):
        return tirx.BufferLoad(loads[name].source, vector(loads[name]))

    value_vec = requant_vector(
        tirx.BufferLoad(acc[0].source, vector(acc[0])), load(bias_n), load(mult_n),
        load(right_n), load(lmul_n) if lmul_n else None, zp, lo, hi, all_right,
        str(store.buffer.dtype),
    )
    put_step(sch, step, store, value_vec, vector(store))
