"""AVX-512 VNNI dot products for the exact int8 host kernels.

``vpdpbusd`` adds to each of 16 int32 lanes the sum of four products of an unsigned byte and a
signed byte, with no intermediate rounding or saturation, so an int32 accumulation of
``u8 x s8`` products is exact. TFLite's int8 kernels multiply two signed codes; the activation
code ``x`` is made unsigned as ``x + 128`` (the same byte with its top bit flipped, so one XOR
of the four broadcast bytes) and the difference, ``128 * sum(w)`` per output channel, is taken
out of the bias at compile time together with the input zero point's term
(``te_ops.vnni_conv_eligible``, ``te_ops.lower_conv2d``).

The weights are laid out at compile time as ``(OC/16, K/4, 16 * 4)``: one 64-byte vector holds
four consecutive reduction elements of 16 output channels, the operand ``vpdpbusd`` takes.

``cpu_schedule`` tiles such an accumulator as any other (columns x 16 channels in registers),
splits its reduction into steps of 4 and makes each step one instruction
(:func:`replace_with_vnni`).
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.ir.expr import Call, TensorLoad
from tvm.sym import Analyzer
from tvm.target import codegen

#: int32 lanes of one vpdpbusd (a 512-bit register)
VNNI_LANES = 16
#: reduction elements per lane and instruction
VNNI_DEPTH = 4
#: accumulator tile of a VNNI conv, at most: output columns x channels, 16 zmm accumulators
#: (of 32), so 16 vpdpbusd are in flight and each 64-byte weight load serves 8 columns, each
#: broadcast input word 2 vectors (rfcs/0008 for the tiles measured)
VNNI_TILE_COLUMNS = 8
VNNI_TILE_CHANNELS = 32
#: the block annotation that marks an accumulator laid out for VNNI (value: its form)
DOT_ANNOTATION = "tvm_ethos.x86_dot"
#: the form: int8 activations shifted to unsigned (``x + 128``) times int8 weights
VNNI_S8 = "vnni_16x4_s8"
_FLIP_SIGN_BITS = -0x7F7F7F80  # 0x80808080 as int32: the top bit of each of four bytes


def _loads(expr) -> list:
    """The BufferLoads of an accumulator update's value (adds, products, casts of loads)."""
    if isinstance(expr, TensorLoad):
        return [expr]
    if isinstance(expr, (tirx.Add, tirx.Mul)):
        return _loads(expr.a) + _loads(expr.b)
    if isinstance(expr, tirx.Cast):
        return _loads(expr.value)
    return []


def replace_with_vnni(sch, step, kind: str) -> None:
    """Replace the body of ``step`` (a block made by ``Schedule.blockize`` over the loops
    ``16 channels x 4 reduction elements`` of an accumulator update in ``te_ops``' VNNI form)
    by one ``vpdpbusd``: the 16 accumulators, the four activation bytes broadcast (their top
    bits flipped for int8, ``x + 128``) and the 64 weight bytes.

    This is what ``Schedule.tensorize`` would do with a registered intrinsic; it is written out
    because tensorize goes through TVM's JSON serialiser (``ToJSONGraph``), which segfaults in
    this TVM build (``tvm.ir.save_json`` of any object does). The block keeps its iterators and
    regions, so buffer compaction still sees the tile."""
    from tvm_ethos.lower.line_buffer import _subst

    blk = sch.get(step)
    loop_c, loop_k = blk.body, blk.body.body
    realize = loop_k.body
    if not isinstance(realize, s_tir.SBlockRealize) or blk.init is not None:
        raise ValueError("replace_with_vnni: not a blockized 16x4 accumulator update")
    at_zero = {loop_c.loop_var: tirx.const(0, "int32"), loop_k.loop_var: tirx.const(0, "int32")}
    env = {iv.var: _subst(val, at_zero)
           for iv, val in zip(realize.block.iter_vars, realize.iter_values)}
    store = realize.block.body
    ana = Analyzer()

    def vector(load_or_store, lanes: int):
        base = [ana.simplify(_subst(e, env)) for e in load_or_store.indices]
        return base[:-1] + [tirx.Ramp(base[-1], 1, lanes)]

    loads = _loads(store.value)
    weights = next(ld for ld in loads if len(ld.source.shape) == 3)
    acts = next(ld for ld in loads if str(ld.source.dtype) == "int8"
                and not ld.source.same_as(weights.source))
    acc_index = vector(store, VNNI_LANES)
    if kind != VNNI_S8:
        raise ValueError(f"replace_with_vnni: unknown form {kind!r}")
    a = tirx.reinterpret("int32", tirx.BufferLoad(acts.source, vector(acts, VNNI_DEPTH)))
    a = tirx.bitwise_xor(a, tirx.const(_FLIP_SIGN_BITS, "int32"))
    w = tirx.BufferLoad(weights.source, vector(weights, VNNI_LANES * VNNI_DEPTH))
    dot = tirx.call_llvm_pure_intrin(
        "int32x16", "llvm.x86.avx512.vpdpbusd.512",
        tirx.BufferLoad(store.buffer, acc_index),
        tirx.reinterpret("int8x64", tirx.Broadcast(a, VNNI_LANES)),
        w,
    )
    new = s_tir.SBlock(blk.iter_vars, blk.reads, blk.writes, blk.name_hint,
                       tirx.BufferStore(store.buffer, dot, acc_index), None,
                       blk.alloc_buffers, blk.match_buffers, blk.annotations)
    sch.state.replace(sch.get_sref(step), new, {blk: new})


def has_vnni(target: dict | str) -> bool:
    """Whether the llvm ``target`` (its ``-mcpu`` / ``-mattr``) has AVX-512 VNNI; CPUs without
    it (AVX2 only, e.g. Zen 3) keep the int32 multiply-add kernels."""
    tgt = tvm.target.Target(target)
    if tgt.kind.name != "llvm":
        return False
    return bool(codegen.target_has_features("avx512vnni", tgt)) and bool(
        codegen.target_has_features("avx512bw", tgt)
    )



# ----------------------------------------------------------------- NPU emulator stripes
def _terms(expr) -> list:
    """Every sub-expression of an accumulator update (through adds, subtractions, products,
    casts and calls such as ``if_then_else``)."""
    out = [expr]
    if isinstance(expr, (tirx.Add, tirx.Sub, tirx.Mul)):
        out += _terms(expr.a) + _terms(expr.b)
    elif isinstance(expr, tirx.Cast):
        out += _terms(expr.value)
    elif isinstance(expr, Call):
        for arg in expr.args:
            out += _terms(arg)
    return out


def stripe_acc_to_vnni(sch, block) -> None:
    """An NPU emulator stripe's 1x1 conv accumulator (``vectorize_stripes``: per output pixel,
    a reduction over ``K`` input channels outside a vector of 16 output channels, the weights
    a staged HWIO slice) on ``vpdpbusd``, its operands built in registers: the four
    activation bytes of each step broadcast with their top bits flipped (``x + 128``), the
    weight rows ``k .. k+3`` of the 16 channels interleaved into one 64-byte vector (a
    shuffle), and ``sum(w)`` accumulated alongside with a broadcast of ones, so after the
    reduction ``acc - (128 + x_zp) * sum(w)`` is TFLite's ``sum((x - x_zp) * w)``. Raises
    ValueError (the caller keeps its schedule) where the block is not that."""
    from tvm_ethos.lower.line_buffer import _subst

    loops = sch.get_loops(block)
    if len(loops) < 2:
        raise ValueError("not an accumulator update")
    # the loops compute_at left: unit loops, the reduction over K, the 16 channels (vector)
    channel = loops[-1]
    if _extent(sch, channel) != VNNI_LANES:
        raise ValueError("not 16 channels")
    k = _extent(sch, loops[-2])
    if k % VNNI_DEPTH:
        raise ValueError("reduction not whole groups of 4")
    first = next((i for i, lp in enumerate(loops) if all(
        _extent(sch, q) == 1 for q in loops[i:-2])), None)
    if first is None:
        raise ValueError("loops between the pixel and the reduction")
    step = sch.blockize(loops[first])
    outer = sch.get(step)
    # walk the loops blockize left inside to the update block
    stmt, loop_vars = outer.body, []
    while isinstance(stmt, tirx.For):
        if not (isinstance(stmt.min, tirx.IntImm) and int(stmt.min) == 0):
            raise ValueError("a loop not from 0")
        loop_vars.append(stmt.loop_var)
        stmt = stmt.body
    if not isinstance(stmt, s_tir.SBlockRealize) or outer.init is not None:
        raise ValueError("blockize did not leave one update block")
    inner = stmt
    store = inner.block.body
    if not isinstance(store, tirx.BufferStore):
        raise ValueError("not an accumulator update")
    terms = _terms(store.value)
    loads = [t for t in terms if isinstance(t, TensorLoad)]
    # ``(x - zp) * w`` with the input read guarded: after simplification ``x + (-zp)``
    offsets = [t for t in terms if isinstance(t, (tirx.Add, tirx.Sub))
               and isinstance(t.a, tirx.Cast) and isinstance(t.a.value, TensorLoad)
               and isinstance(t.b, tirx.IntImm)]
    if len(loads) != 3 or len(offsets) > 1:
        raise ValueError("not (x - zp) * w")
    products = [t for t in terms if isinstance(t, tirx.Mul) and isinstance(t.b, tirx.Cast)
                and isinstance(t.b.value, TensorLoad)]
    if len(products) != 1:
        raise ValueError("not (x - zp) * w")
    weights = products[0].b.value
    acts = next(ld for ld in loads
                if not ld.source.same_as(store.buffer) and not ld.source.same_as(weights.source))
    x_zp = 0
    if offsets:
        if not offsets[0].a.value.same_as(acts):
            raise ValueError("not (x - zp) * w")
        x_zp = int(offsets[0].b.value) * (1 if isinstance(offsets[0], tirx.Sub) else -1)
    if str(acts.source.dtype) != "int8" or str(weights.source.dtype) != "int8":
        raise ValueError("not int8 x int8")
    wshape = [int(d) for d in weights.source.shape]
    if len(wshape) != 4 or wshape[:2] != [1, 1] or wshape[2] != k:
        raise ValueError("not a 1x1 convolution over the reduction")
    k4 = tirx.Var("k4", "int32")
    zero = tirx.const(0, "int32")
    ana = Analyzer()
    for iv in outer.iter_vars:
        ana.bind(iv.var, iv.dom)
    ana.bind(k4, tvm.ir.Range(zero, tirx.const(k // VNNI_DEPTH, "int32")))

    def at_point(load_or_store, j: int, c: int) -> list:
        """The indices of a load or store at reduction element ``4 * k4 + j``, channel ``c``."""
        at = {v: zero for v in loop_vars}
        at[loop_vars[-2]] = k4 * VNNI_DEPTH + j  # the reduction loop
        at[loop_vars[-1]] = tirx.const(c, "int32")  # the channel loop
        env = {iv.var: _subst(val, at)
               for iv, val in zip(inner.block.iter_vars, inner.iter_values)}
        return [ana.simplify(_subst(e, env)) for e in load_or_store.indices]

    def steps(load_or_store, j: int, c: int) -> list:
        base = at_point(load_or_store, 0, 0)
        return [int(ana.simplify(b - a)) if isinstance(ana.simplify(b - a), tirx.IntImm)
                else None for a, b in zip(base, at_point(load_or_store, j, c))]

    def indices(load_or_store, j: int, lanes: int):
        base = at_point(load_or_store, j, 0)
        return base[:-1] + [tirx.Ramp(base[-1], 1, lanes)]

    # the vectors built below must be what the scalar loops read: channels contiguous in the
    # accumulator and the weights, reduction elements contiguous in the input, no other use
    def unit(n: int) -> list:
        return [0] * (n - 1) + [1]

    if (steps(store, 0, 1) != unit(len(store.indices))
            or steps(weights, 0, 1) != unit(len(weights.indices))
            or steps(acts, 1, 0) != unit(len(acts.indices))
            or steps(acts, 0, 1) != [0] * len(acts.indices)
            or steps(store, 1, 0) != [0] * len(store.indices)):
        raise ValueError("operands not contiguous along channels / the reduction")

    # the input read's guard (padding) must hold everywhere: every product is summed
    for guard in [t.args[0] for t in terms if isinstance(t, Call) and len(t.args) == 3]:
        at = {v: zero for v in loop_vars}
        at[loop_vars[-2]] = k4 * VNNI_DEPTH
        env = {iv.var: _subst(val, at)
               for iv, val in zip(inner.block.iter_vars, inner.iter_values)}
        if not ana.can_prove(_subst(guard, env)):
            raise ValueError("a padded input read")
    acc_index = indices(store, 0, VNNI_LANES)
    rows = [tirx.BufferLoad(weights.source, indices(weights, j, VNNI_LANES))
            for j in range(VNNI_DEPTH)]
    order = [tirx.const(j * VNNI_LANES + c, "int32")
             for c in range(VNNI_LANES) for j in range(VNNI_DEPTH)]
    w = tirx.Shuffle(rows, order)
    a = tirx.reinterpret("int32", tirx.BufferLoad(acts.source, indices(acts, 0, VNNI_DEPTH)))
    a = tirx.bitwise_xor(a, tirx.const(_FLIP_SIGN_BITS, "int32"))
    ones = tirx.reinterpret("int8x64", tirx.Broadcast(tirx.const(0x01010101, "int32"),
                                                       VNNI_LANES))
    sums = tirx.decl_buffer((VNNI_LANES,), "int32", name="weight_sums", scope="local")
    sums_index = [tirx.Ramp(zero, 1, VNNI_LANES)]
    acc = tirx.BufferLoad(store.buffer, acc_index)

    def dpbusd(src, u8, s8):
        return tirx.call_llvm_pure_intrin("int32x16", "llvm.x86.avx512.vpdpbusd.512", src, u8, s8)

    body = tirx.SeqStmt([
        tirx.BufferStore(sums, tirx.Broadcast(zero, VNNI_LANES), sums_index),
        tirx.For(k4, zero, tirx.const(k // VNNI_DEPTH, "int32"), tirx.ForKind.SERIAL,
                 tirx.SeqStmt([
                     tirx.BufferStore(store.buffer, dpbusd(
                         acc, tirx.reinterpret("int8x64", tirx.Broadcast(a, VNNI_LANES)), w),
                         acc_index),
                     tirx.BufferStore(sums, dpbusd(
                         tirx.BufferLoad(sums, sums_index), ones, w), sums_index),
                 ])),
        tirx.BufferStore(store.buffer, acc - tirx.BufferLoad(sums, sums_index)
                         * tirx.Broadcast(tirx.const(128 + x_zp, "int32"), VNNI_LANES),
                         acc_index),
    ])
    new = s_tir.SBlock(outer.iter_vars, outer.reads, outer.writes, outer.name_hint, body, None,
                       list(outer.alloc_buffers) + [sums], outer.match_buffers,
                       outer.annotations)
    sch.state.replace(sch.get_sref(step), new, {outer: new})


def _extent(sch, loop) -> int:
    ext = sch.get(loop).extent
    return int(ext) if isinstance(ext, tirx.IntImm) else -1
