"""AVX2 multiply-add kernels for the exact int8 host kernels on CPUs without AVX-512 VNNI.

``vpmaddwd`` multiplies 16 pairs of int16 lanes and adds each pair into one of 8 int32 lanes.
Its operands here are int8 codes sign-extended to int16, so a product is at most
``128 * 128 = 2**14`` in magnitude and a pair sum ``2**15``: no rounding or saturation, the
int32 accumulation of TFLite's reference kernels exactly. (``vpmaddubsw``, unsigned bytes times
signed bytes, saturates its int16 pair sums: ``255 * 127 * 2 > 32767``, so it is not used.)

The form (``AVX2_MADD``): ``acc = sum(x * w)`` over an int16 copy of the activation codes
(a stage; padded positions hold the input zero point) and int16 weights laid out at compile
time as ``(OC/8, K/2, 8 * 2)``: one 32-byte vector holds two consecutive reduction elements of
8 output channels, the operand ``vpmaddwd`` takes against the activation pair broadcast to all
8 lanes. ``sum(x * w) - x_zp * sum(w) = sum((x - x_zp) * w)``, so ``x_zp * sum(w)`` per output
channel is taken out of the bias at compile time (refused where the bias leaves int32).
Output channels are padded with zero weights to whole vectors of 8.

``cpu_schedule`` tiles these accumulators as the VNNI ones (columns x channels in ymm
registers, the reduction in steps of 2) and :func:`replace_with_madd` makes each step one
``vpmaddwd`` and one ``vpaddd``. Which layers, tiles and CPUs, and why:
rfcs/0008-host-kernels.md.
"""
from __future__ import annotations

import numpy as np
import tvm
from tvm import te, tirx
from tvm.target import codegen

from tvm_ethos.host.cpu.x86_dot import DOT_ANNOTATION, _loads, open_step, put_step
from tvm_ethos.host.cpu.x86_operands import (
    conv_window,
    dot_weights,
    window_im2col_stage,
    window_pad_stage,
    window_row_weights,
)

#: int32 lanes of one vpmaddwd (a 256-bit register)
MADD_LANES = 8
#: reduction elements per lane and instruction
MADD_DEPTH = 2
#: the form: int16 activation codes times int16 weights, pairs along the reduction
AVX2_MADD = "avx2_madd_8x2_s16"
FORMS = (AVX2_MADD,)


def has_avx2(target: dict | str) -> bool:
    """Whether the llvm ``target`` (its ``-mcpu`` / ``-mattr``) has AVX2."""
    tgt = tvm.target.Target(target)
    return tgt.kind.name == "llvm" and bool(codegen.target_has_features("avx2", tgt))


def madd_tile(width: int) -> tuple[int, int]:
    """``(channels, columns)`` of an accumulator tile in this form for an output ``width``:
    4 columns x 16 channels (8 ymm accumulators) where 4 divides the width; else a tile of
    columns that divides it (no predicated tail column, whose accumulators LLVM keeps in
    memory): 5 to 8 columns x 8 channels, 2 x 32, 3 x 16, or 1 x 32 (rfcs/0008)."""
    if width % 4 == 0:
        return 16, 4
    for cols in (8, 7, 6, 5):
        if width % cols == 0:
            return 8, cols
    if width % 2 == 0:
        return 32, 2
    if width % 3 == 0:
        return 16, 3
    return 32, 1


# ----------------------------------------------------------------------- TE forms
def conv_eligible(op, x_dtype: str) -> bool:
    """Whether a full conv2d (one group, any kernel, stride, padding, dilation) can take the
    form exactly: int8 codes and int8 weights with zero point 0 (TFLite's int8 scheme)."""
    return (
        op.attrs["groups"] == 1
        and str(op.weights.dtype) == "int8"
        and not np.any(np.asarray(op.w_zp) != 0)
        and x_dtype == "int8"
    )


def fc_eligible(op, x_dtype: str) -> bool:
    """As :func:`conv_eligible` for fully connected, with an even input depth (a pair never
    straddles two rows)."""
    _nout, k = op.weights.shape
    return (
        str(op.weights.dtype) == "int8"
        and not np.any(np.asarray(op.w_zp) != 0)
        and x_dtype == "int8"
        and k % MADD_DEPTH == 0
    )


def madd_weights(wk: np.ndarray, bias: np.ndarray, in_zp: int):
    """``wk`` (reduction x outputs, int8, the reduction even) as int16 ``(OC/8, K/2, 8 * 2)``,
    the outputs padded with zero weights to whole vectors of 8, and the bias less
    ``x_zp * sum(w)``. None when that bias leaves int32."""
    return dot_weights(wk, bias, in_zp, MADD_LANES, MADD_DEPTH, np.int16)


def madd_acc(shape, x_at, wp, k: int, name: str):
    """The accumulator ``sum(x * w)`` in the form over the last axis of ``shape`` (output
    channels, padded to whole vectors) and ``k`` reduction elements; ``x_at(spatial, rk)``
    reads an int16 activation code."""
    rk = te.reduce_axis((0, k), name="rk")

    def acc_fn(*idx):
        oc = idx[-1]
        wv = wp[oc // MADD_LANES, rk // MADD_DEPTH,
                (oc % MADD_LANES) * MADD_DEPTH + rk % MADD_DEPTH]
        return te.sum(x_at(idx[:-1], rk).astype("int32") * wv.astype("int32"), axis=rk)

    return te.compute(shape, acc_fn, name=name, attrs={DOT_ANNOTATION: AVX2_MADD})


def conv_acc(op, x, pool, name: str, bias: np.ndarray):
    """A full conv in the form, as a sum over its taps of 1x1 dot products: the reduction runs
    over ``(kh, kw, cin)`` of an int16 source that needs no bounds checks. With an even input
    depth, that is the input (padded with its zero point where the windows leave it), so a
    pair is two channels of one pixel; with an odd one (RGB, DS-CNN's single channel), each
    window row laid out along one axis, ``(kw, cin)`` padded to even with zero weights (im2col
    along the width). Returns ``(acc, corrected bias)`` or None."""
    kh, kw, cin, co = op.weights.shape
    n_, h_, w_, oh_, ow_, sh, sw, dh, dw, pt, pl, rows, cols = conv_window(op)
    zp = int(op.in_q[0][1])
    fill = tirx.const(zp, "int16")

    def int16(v):
        return v.astype("int16")

    if cin % MADD_DEPTH == 0:
        if pt == 0 and pl == 0 and rows <= h_ and cols <= w_:
            src = te.compute((n_, h_, w_, cin), lambda *i: x[i].astype("int16"),
                             name=f"{name}_x16")
        else:
            src = window_pad_stage(op, x, int16, fill, f"{name}_pad16")
        kwe, swe, dwe, cs = kw, sw, dw, cin
        wk = op.weights.reshape(kh * kw * cin, co)
    else:
        cs = -(-kw * cin // MADD_DEPTH) * MADD_DEPTH
        src = window_im2col_stage(op, x, cs, int16, fill, f"{name}_im2col16")
        kwe, swe, dwe = 1, 1, 1
        wk = window_row_weights(op, cs)
    made = madd_weights(wk, bias, zp)
    if made is None:
        return None
    packed, corrected = made
    wp = pool.add(f"{name}_wmadd", packed)
    shape = (n_, oh_, ow_, packed.shape[0] * MADD_LANES)

    def x_at(s, r):
        return src[s[0], s[1] * sh + r // (kwe * cs) * dh, s[2] * swe + r // cs % kwe * dwe,
                   r % cs]

    return madd_acc(shape, x_at, wp, wk.shape[0], f"{name}_acc"), corrected


def fc_acc(op, x_at, lead: int, pool, name: str, bias: np.ndarray):
    """A fully connected accumulator in the form, ``(lead, outputs padded to vectors of 8)``,
    over an int16 copy of the input rows (``x_at(row, k)`` reads the int8 input). Returns
    ``(acc, corrected bias)`` or None."""
    _nout, k = op.weights.shape
    made = madd_weights(op.weights.T, bias, int(op.in_q[0][1]))
    if made is None:
        return None
    packed, corrected = made
    wp = pool.add(f"{name}_wmadd", packed)
    x16 = te.compute((lead, k), lambda r, kk: x_at(r, kk).astype("int16"), name=f"{name}_x16")
    acc = madd_acc((lead, packed.shape[0] * MADD_LANES), lambda s, rk: x16[s[0], rk], wp, k,
                   f"{name}_acc")
    return acc, corrected


# ----------------------------------------------------------------------- the instruction
def replace_with_madd(sch, step, kind: str) -> None:
    """Replace the body of ``step`` (a block made by ``Schedule.blockize`` over the loops
    ``8 channels x 2 reduction elements`` of an accumulator update in the form) by one
    ``vpmaddwd`` and one ``vpaddd``: the activation pair (two int16, one 32-bit word)
    broadcast to 8 lanes against the 16 int16 weights, added to the 8 accumulators.

    Written out rather than ``Schedule.tensorize`` for the reason ``x86_dot`` gives (its JSON
    serialiser segfaults in this TVM build); the block keeps its iterators and regions, so
    buffer compaction still sees the tile."""
    if kind != AVX2_MADD:
        raise ValueError(f"replace_with_madd: unknown form {kind!r}")
    store, vector, _ = open_step(sch, step, "replace_with_madd")
    loads = _loads(store.value)
    weights = next(ld for ld in loads if len(ld.source.shape) == 3)
    acts = next(ld for ld in loads if str(ld.source.dtype) == "int16"
                and not ld.source.same_as(weights.source))
    pair = tirx.reinterpret("int32", tirx.BufferLoad(acts.source, vector(acts, MADD_DEPTH)))
    a = tirx.reinterpret("int16x16", tirx.Broadcast(pair, MADD_LANES))
    w = tirx.BufferLoad(weights.source, vector(weights, MADD_LANES * MADD_DEPTH))
    acc_index = vector(store, MADD_LANES)
    madd = tirx.call_llvm_pure_intrin("int32x8", "llvm.x86.avx2.pmadd.wd", a, w)
    put_step(sch, step, store, tirx.BufferLoad(store.buffer, acc_index) + madd, acc_index)
