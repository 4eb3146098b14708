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

Depthwise convolutions use a second form (``VNNI_DW_S8``): each lane one channel, its four
bytes four horizontal taps of that channel, the activations packed per output column into a
uint32 per channel by a ``te_ops`` stage, so the operand is a plain 64-byte load.

``cpu_schedule`` tiles such an accumulator as any other (columns x 16 channels in registers),
splits its reduction into steps of 4 and makes each step one instruction
(:func:`replace_with_vnni`).
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.ir.expr import TensorLoad
from tvm.sym import Analyzer
from tvm.target import codegen

from tvm_ethos.host.cpu.tir_subst import subst

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
#: the block annotation with the nested extents, in steps of 4, of a window conv's reduction
#: (window rows, then steps along a row): split so, the source address of a step is affine
DOT_STEPS = "tvm_ethos.x86_dot_steps"
#: the form: int8 activations shifted to unsigned (``x + 128``) times int8 weights; a uint8
#: source already holds the shifted bytes
VNNI_S8 = "vnni_16x4_s8"
#: the depthwise form: each lane one channel, its four bytes four taps of that channel, the
#: activations packed per output column into a uint32 per channel (``te_ops``)
VNNI_DW_S8 = "vnni_dw_16x4_s8"
#: the name ``te_ops`` gives the weight constants laid out for ``vpdpbusd``
WEIGHTS_SUFFIX = "_wvnni"
_FLIP_SIGN_BITS = -0x7F7F7F80  # 0x80808080 as int32: the top bit of each of four bytes


def _loads(expr) -> list:
    """The BufferLoads of an accumulator update's value (adds, products, casts of loads)."""
    if isinstance(expr, TensorLoad):
        return [expr]
    if isinstance(expr, (tirx.Add, tirx.Mul)):
        return _loads(expr.a) + _loads(expr.b)
    if isinstance(expr, tirx.Cast):
        return _loads(expr.value)
    if isinstance(expr, (tirx.RShift, tirx.BitwiseAnd)):  # the depthwise form's byte
        return _loads(expr.a) + _loads(expr.b)
    return []


def _weight_load(loads: list):
    """The load of the ``(OC/16, K/4, 64)`` weights among an update's loads: the int8 constant
    ``te_ops`` names ``..._wvnni`` (an activation source can be three-dimensional too: a
    conv's padded rows, a fully connected layer's input)."""
    cands = [ld for ld in loads if len(ld.source.shape) == 3 and str(ld.source.dtype) == "int8"]
    named = [ld for ld in cands if ld.source.name.endswith(WEIGHTS_SUFFIX)]
    return (named or cands)[0]


def open_step(sch, step, what: str, loops: int = 2):
    """``(store, vector, loops)`` of ``step``, a block ``Schedule.blockize`` made over the
    ``loops`` innermost loops of an update (an accumulator's ``channels x reduction``, a
    requantization's channels): the update's store, ``vector(load_or_store, lanes)``, that
    access's indices at the step's origin with the innermost one a ramp of ``lanes``, and the
    loops. What an instruction replacing the body needs; ``what`` names the form in the error
    raised on any other block."""
    blk = sch.get(step)
    found, body = [], blk.body
    while isinstance(body, tirx.For):
        found.append(body)
        body = body.body
    if len(found) != loops or not isinstance(body, s_tir.SBlockRealize) or \
            blk.init is not None:
        raise ValueError(f"{what}: not a blockized update over {loops} loops")
    at_zero = {loop.loop_var: tirx.const(0, "int32") for loop in found}
    env = {iv.var: subst(val, at_zero)
           for iv, val in zip(body.block.iter_vars, body.iter_values)}
    ana = Analyzer()

    def vector(load_or_store, lanes: int):
        base = [ana.simplify(subst(e, env)) for e in load_or_store.indices]
        return base[:-1] + [tirx.Ramp(base[-1], 1, lanes)]

    return body.block.body, vector, found


def put_step(sch, step, store, value, index) -> None:
    """Replace ``step``'s body by one store of ``value`` at ``index`` of the update's
    buffer, keeping the block's iterators and regions (buffer compaction still sees the
    tile)."""
    blk = sch.get(step)
    new = s_tir.SBlock(blk.iter_vars, blk.reads, blk.writes, blk.name_hint,
                       tirx.BufferStore(store.buffer, value, index), None,
                       blk.alloc_buffers, blk.match_buffers, blk.annotations)
    sch.state.replace(sch.get_sref(step), new, {blk: new})


def replace_with_vnni(sch, step, kind: str) -> None:
    """Replace the body of ``step`` (a block made by ``Schedule.blockize`` over the loops
    ``16 channels x 4 reduction elements`` of an accumulator update in ``te_ops``' VNNI form)
    by one ``vpdpbusd``: the 16 accumulators, the four activation bytes broadcast (their top
    bits flipped for int8, ``x + 128``) and the 64 weight bytes.

    This is what ``Schedule.tensorize`` would do with a registered intrinsic; it is written out
    because tensorize goes through TVM's JSON serialiser (``ToJSONGraph``), which segfaults in
    this TVM build (``tvm.ir.save_json`` of any object does). The block keeps its iterators and
    regions, so buffer compaction still sees the tile."""
    store, vector, _ = open_step(sch, step, "replace_with_vnni")
    loads = _loads(store.value)
    acc_index = vector(store, VNNI_LANES)
    if kind == VNNI_S8:
        weights = _weight_load(loads)
        acts = next(ld for ld in loads if str(ld.source.dtype) in ("int8", "uint8")
                    and not ld.source.same_as(weights.source))
        a = tirx.reinterpret("int32", tirx.BufferLoad(acts.source, vector(acts, VNNI_DEPTH)))
        if str(acts.source.dtype) == "int8":  # a uint8 source holds x + 128 already
            a = tirx.bitwise_xor(a, tirx.const(_FLIP_SIGN_BITS, "int32"))
        a = tirx.reinterpret("int8x64", tirx.Broadcast(a, VNNI_LANES))
    elif kind == VNNI_DW_S8:
        # 16 channels' packed words (already x + 128) against their 16 x 4 weight bytes
        weights = next(ld for ld in loads if str(ld.source.dtype) == "int8")
        acts = next(ld for ld in loads if str(ld.source.dtype) == "uint32")
        a = tirx.reinterpret("int8x64", tirx.BufferLoad(acts.source, vector(acts, VNNI_LANES)))
    else:
        raise ValueError(f"replace_with_vnni: unknown form {kind!r}")
    w = tirx.BufferLoad(weights.source, vector(weights, VNNI_LANES * VNNI_DEPTH))
    dot = tirx.call_llvm_pure_intrin(
        "int32x16", "llvm.x86.avx512.vpdpbusd.512",
        tirx.BufferLoad(store.buffer, acc_index), a, w,
    )
    put_step(sch, step, store, dot, acc_index)


def has_vnni(target: dict | str) -> bool:
    """Whether the llvm ``target`` (its ``-mcpu`` / ``-mattr``) has AVX-512 VNNI; CPUs without
    it (AVX2 only, e.g. Zen 3) keep the int32 multiply-add kernels."""
    tgt = tvm.target.Target(target)
    if tgt.kind.name != "llvm":
        return False
    return bool(codegen.target_has_features("avx512vnni", tgt)) and bool(
        codegen.target_has_features("avx512bw", tgt)
    )
