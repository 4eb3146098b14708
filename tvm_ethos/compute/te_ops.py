"""Quantized operators in TE with integer arithmetic identical to TFLite's reference kernels.

Conventions (all checked bit-exact against ai-edge-litert's reference kernels by the tests):

* int32 accumulation of ``(x - x_zp) * (w - w_zp)``; padded positions contribute 0, i.e. they
  hold the input zero point, as TFLite's reference loops skip them;
* requantization ``MultiplyByQuantizedMultiplier``: ``SaturatingRoundingDoublingHighMul`` with
  the Q31 multiplier (round half away from zero on the 64-bit product) followed by
  ``RoundingDivideByPOT`` (round half away from zero) for the right shift;
* the output zero point is added, then the fused activation clamp, then the cast.

Each ``lower_*`` function takes a :class:`~tvm_ethos.patterns.QOp`, the TE tensors of its integer
inputs and a :class:`ConstPool` that turns numpy constants into placeholders (weights, bias,
per-channel multipliers and shifts stay PrimFunc arguments, never baked into the code).
"""
from __future__ import annotations

import numpy as np
from tvm import te, tirx
from tvm.sym import Analyzer

from ethos_arch.mean_window import normalized_axes
from ethos_arch.ops import Op
from tvm_ethos.compute import (
    concat_requant,
    fixed_point,
    float_lut16,
    int8_activation,
    int16_activation,
    int16x8,
    leaky_relu,
    prelu,
    resize_bilinear,
    softmax16,
    squared_difference,
)
from tvm_ethos.compute.hard_swish import hard_swish_lut
from tvm_ethos.compute.lstm import lower_lstm
from tvm_ethos.compute.quant import (
    INT32_MAX,
    INT32_MIN,
    batch_matmul_multiplier,
    dtype_range,
    elu_lut,
    exp_lut,
    f32,
    gelu_lut,
    leaky_relu_lut,
    log_lut,
    logistic_lut,
    neg_lut,
    prelu_alpha,
    prelu_multipliers,
    quantize_multiplier,
    round_half_away_f32,
    tanh_lut,
)
from tvm_ethos.compute.relu_requant import relu_multiplier
from tvm_ethos.compute.requant_constants import acc_dtype as _acc_dtype
from tvm_ethos.compute.requant_constants import bias_of as _bias_of
from tvm_ethos.compute.requant_constants import (
    conv_multipliers,
    fc_multipliers,
    mean_multiplier,
)
from tvm_ethos.compute.requant_constants import out_q as _out_q
from tvm_ethos.compute.rsqrt import rsqrt_lut
from tvm_ethos.host.cpu import x86_avx2, x86_requant
from tvm_ethos.host.cpu.x86_dot import (
    DOT_ANNOTATION,
    DOT_STEPS,
    VNNI_DEPTH,
    VNNI_DW_S8,
    VNNI_LANES,
    VNNI_S8,
)
from tvm_ethos.host.cpu.x86_operands import (
    clamped,
    conv_window,
    dot_weights,
    window_im2col_stage,
    window_pad_stage,
    window_row_weights,
)


class ConstPool:
    """Numpy constants that become PrimFunc parameters, in order of creation; the few a
    kernel writes back (an LSTM's states, :meth:`add_state`) are marked by their position."""

    def __init__(self, prefix: str = "c"):
        self.prefix = prefix
        self.items: list[tuple[te.Tensor, np.ndarray]] = []
        self.states: list[int] = []

    def add(self, name: str, array: np.ndarray) -> te.Tensor:
        array = np.ascontiguousarray(array)
        ph = te.placeholder(
            array.shape, dtype=str(array.dtype), name=f"{self.prefix}{len(self.items)}_{name}"
        )
        self.items.append((ph, array))
        return ph

    def add_state(self, name: str, initial: np.ndarray) -> te.Tensor:
        """A parameter the kernel reads and writes back in place: a variable of the compiled
        model that keeps its value from one run to the next (``initial`` is its reset
        value, what the executor restores)."""
        self.states.append(len(self.items))
        return self.add(name, initial)


# ----------------------------------------------------------------------- fixed point
def _i32(v):
    return tirx.const(int(v), "int32")


def _i64(v):
    return tirx.const(int(v), "int64")


def _let(value, body_fn, dtype=None):
    """Hook for sharing a sub-expression; see the comment in the body."""
    # Plain substitution: tirx.Let bodies get duplicated by vectorization and then trip the
    # bound analyser ("conflicts with memorization"). Expressions stay small because every
    # requantization that feeds another one is materialised as its own TE stage instead.
    return body_fn(value)


def srdhm(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul on int32 expressions.

    gemmlowp adds a nudge of ``2**30`` (``ab >= 0``) or ``1 - 2**30`` and divides by ``2**31``
    truncating toward zero; for ``ab < 0`` that is ``ceil((ab + 1 - 2**30) / 2**31)``
    ``= floor((ab + 2**30) / 2**31)``, the same as for ``ab >= 0``. So one add and one
    arithmetic shift, no sign-dependent nudge or division
    (tests/tvm_ethos/test_te_ops_fixed_point.py checks it against gemmlowp's form)."""

    def with_ab(a_, b_):
        def body(ab):
            hi = tirx.shift_right(ab + _i64(1 << 30), _i64(31)).astype("int32")
            overflow = tirx.all(a_ == _i32(INT32_MIN), b_ == _i32(INT32_MIN))
            return tirx.Select(overflow, _i32(INT32_MAX), hi)

        return _let(a_.astype("int64") * b_.astype("int64"), body)

    return _let(a, lambda a_: _let(b, lambda b_: with_ab(a_, b_)))


def rdbpot(x, exponent):
    """gemmlowp RoundingDivideByPOT: arithmetic right shift rounding half away from zero."""
    if isinstance(exponent, int) and exponent == 0:
        return x

    def body(x_, e_):
        if isinstance(e_, int):
            mask = _i32((1 << e_) - 1)
            threshold_base = _i32(((1 << e_) - 1) >> 1)
            shifted = tirx.shift_right(x_, _i32(e_))
        else:
            mask = tirx.shift_left(_i32(1), e_) - _i32(1)
            threshold_base = tirx.shift_right(mask, _i32(1))
            shifted = tirx.shift_right(x_, e_)
        remainder = tirx.bitwise_and(x_, mask)
        threshold = threshold_base + tirx.Select(x_ < _i32(0), _i32(1), _i32(0))
        return shifted + tirx.Select(remainder > threshold, _i32(1), _i32(0))

    if isinstance(exponent, int):
        return _let(x, lambda x_: body(x_, exponent))
    return _let(x, lambda x_: _let(exponent, lambda e_: body(x_, e_)))


def mbqm(x, multiplier, shift):
    """TFLite MultiplyByQuantizedMultiplier; multiplier/shift python ints or int32 expressions."""
    m = _i32(multiplier) if isinstance(multiplier, int) else multiplier
    if isinstance(shift, int):
        left, right = max(shift, 0), max(-shift, 0)
        xl = x * _i32(1 << left) if left else x
        return rdbpot(srdhm(xl, m), right)

    def body(s_):
        left = tirx.max(s_, _i32(0))
        right = tirx.max(_i32(0) - s_, _i32(0))
        xl = x * tirx.shift_left(_i32(1), left)
        return rdbpot(srdhm(xl, m), right)

    return _let(shift, body)


def mbqm_one_shift_constants(mult: np.ndarray, shift: np.ndarray) -> dict:
    """Per-channel int32 constants of :func:`mbqm_one_shift` for TFLite multipliers ``mult``
    (``[0, 2**31)``) and shifts ``shift``: the left-shift factor and the right shift (int32:
    Relax constants of int64 arrays come out int32)."""
    mult = np.asarray(mult, np.int64)
    shift = np.asarray(shift, np.int64)
    if mult.min() < 0:
        raise ValueError("mbqm_one_shift: a negative multiplier (gemmlowp's saturating case)")
    return {
        "lmul": np.left_shift(np.int64(1), np.maximum(shift, 0)).astype(np.int32),
        "right": np.maximum(-shift, 0).astype(np.int32),
    }


def mbqm_one_shift(x, multiplier, lmul, right, all_right: bool = False):
    """:func:`mbqm` for a non-negative multiplier as one 64-bit add and arithmetic shift
    (``lmul = 2**left`` and ``right`` from :func:`mbqm_one_shift_constants`, per channel).

    With ``P = (x << left) * M``, gemmlowp's high multiply is ``y = floor((P + 2**30) / 2**31)``
    (:func:`srdhm`) and ``RoundingDivideByPOT(y, r)`` for ``r >= 1`` is
    ``floor((y + 2**(r-1) - [y < 0]) / 2**r)`` (its remainder compare, rounding half away
    from zero). The added term is an integer, so the two floors nest into one:
    ``floor((P + 2**30 + (2**(r-1) - [y < 0]) * 2**31) / 2**(31 + r))``, and ``y < 0`` exactly
    when ``P + 2**30 < 0``. ``|P| < 2**62``, so the sum stays inside int64. The same int32 as
    :func:`mbqm` for every int32 ``x`` (tests/tvm_ethos/test_te_ops_fixed_point.py), without
    the int32 remainder, compare and correction after the 64-bit step. ``lmul`` None: no
    channel shifts left (the usual conv, whose multipliers are below one); ``all_right``: every
    channel shifts right, so the ``r > 0`` tests fold away."""
    r = right.astype("int64")
    xl = x if lmul is None else x * lmul
    p = xl.astype("int64") * multiplier.astype("int64")
    if all_right:
        rounding = tirx.shift_left(_i64(1), r + _i64(30))
        neg = tirx.Select(p < _i64(-(1 << 30)), _i64(1 << 31), _i64(0))
    else:
        rounding = tirx.Select(r > _i64(0), tirx.shift_left(_i64(1), r + _i64(30)), _i64(0))
        neg = tirx.Select(tirx.all(r > _i64(0), p < _i64(-(1 << 30))), _i64(1 << 31), _i64(0))
    return tirx.shift_right(p + _i64(1 << 30) + rounding - neg, r + _i64(31)).astype("int32")


def mbqm_single_rounding(x, multiplier, shift):
    """TFLite's ``MultiplyByQuantizedMultiplier`` in its single-rounding form:
    ``(x * multiplier + 2**(30 - shift)) >> (31 - shift)`` in int64, one rounding (ties up).
    LiteRT's reference FULLY_CONNECTED rounds so (its conv, pooling and elementwise kernels
    round twice, :func:`mbqm`): on large layers the double-rounding form differs from
    BUILTIN_REF by 1 on a few outputs in ten thousand (tests/tvm_ethos/test_fc_rounding.py)."""
    m = _i32(multiplier) if isinstance(multiplier, int) else multiplier
    s = _i32(shift) if isinstance(shift, int) else shift
    total = (_i32(31) - s).astype("int64")
    half = tirx.shift_left(_i64(1), total - _i64(1))
    return tirx.shift_right(x.astype("int64") * m.astype("int64") + half, total).astype("int32")


def clamp_cast(v, lo: int, hi: int, dtype: str):
    """``v`` clamped to ``[lo, hi]`` (the lower bound first, as TFLite clamps) and cast.

    A clamp can take one value whatever its input: a range of one code (RELU6 at scales above
    12, a zero point at the top code) or none, or a ``v`` whose codes all lie beyond one bound.
    TVM's simplifier then folds it to that constant when it makes the PrimFunc, and the TIR
    stops reading the tensors ``v`` reads, while the NPU reads them (the planner holds them
    in SRAM, so the emulator's memory check fails; a fused activation's accumulator is left
    without a consumer). Such a clamp is written as ``(v & 0) + value``, which the simplifier
    keeps and which is that value for every ``v``."""
    clamped = tirx.min(tirx.max(v, _i32(lo)), _i32(hi))
    one = Analyzer().simplify(clamped)
    if isinstance(one, tirx.IntImm):
        clamped = tirx.bitwise_and(v.astype("int32"), _i32(0)) + _i32(one.value)
    return clamped.astype(dtype)


# ----------------------------------------------------------------------- convolution
def vnni_conv_eligible(op, x_dtype: str) -> bool:
    """Whether a conv2d can run on ``vpdpbusd`` (``x86_dot``) exactly: a 1x1 convolution
    (no padding, so every read is inside the input), int8 weights with zero point 0 and int8
    activations (TFLite's uint8 models have uint8 weights) and input channels a multiple of 4
    (whole 4-byte groups of one pixel). Output channels are padded to whole vectors of 16."""
    kh, kw, cpg, co = op.weights.shape
    return (
        op.attrs["groups"] == 1
        and (kh, kw) == (1, 1)
        and not any(op.attrs["padding"])
        and str(op.weights.dtype) == "int8"
        and not np.any(np.asarray(op.w_zp) != 0)
        and x_dtype == "int8"
        and cpg % 4 == 0
    )


def vnni_fc_eligible(op, x_dtype: str) -> bool:
    """As :func:`vnni_conv_eligible` for fully connected: int8 codes, weight zero point 0, and
    the input's last axis a multiple of 4 (so every 4-byte group lies in one row of it)."""
    _nout, k = op.weights.shape
    return (
        str(op.weights.dtype) == "int8"
        and not np.any(np.asarray(op.w_zp) != 0)
        and x_dtype == "int8"
        and k % 4 == 0
        and op.in_shapes[0][-1] % 4 == 0
    )


def _vnni_weights(wk: np.ndarray, bias: np.ndarray, in_zp: int):
    """``wk`` (reduction x outputs, int8) laid out for ``x86_dot`` as ``(OC/16, K/4, 16 * 4)``
    (:func:`dot_weights`), and the bias with ``(128 + x_zp) * sum(w)`` taken out:
    ``sum((x + 128) * w) - (128 + x_zp) * sum(w)`` is ``sum((x - x_zp) * w)``, so ``acc +
    bias`` is the same int32 as TFLite's. None when the corrected bias leaves int32."""
    return dot_weights(wk, bias, 128 + in_zp, VNNI_LANES, VNNI_DEPTH, np.int8)


def _vnni_acc(shape, x_at, wp, k: int, name: str, steps: tuple | None = None):
    """The accumulator ``sum((x + 128) * w)`` in ``x86_dot``'s form over the last axis of
    ``shape`` (output channels, padded to whole vectors) and ``k`` reduction elements;
    ``x_at(spatial, rk)`` reads an activation code: int8 ``x``, or uint8 ``x + 128`` already
    (a source stage that stores the shifted byte, :func:`_shifted_code`, so the schedule's
    broadcast needs no sign flip). ``steps``: the reduction's nested extents in steps of 4
    (a window conv's rows, then its steps along a row), so the schedule can split it into
    loops whose source addresses are affine instead of divided per step (``DOT_STEPS``)."""
    rk = te.reduce_axis((0, k), name="rk")

    def acc_fn(*idx):
        oc = idx[-1]
        code = x_at(idx[:-1], rk)
        xv = code.astype("int32") if code.dtype == "uint8" else code.astype("int32") + _i32(128)
        wv = wp[oc // VNNI_LANES, rk // VNNI_DEPTH,
                (oc % VNNI_LANES) * VNNI_DEPTH + rk % VNNI_DEPTH]
        return te.sum(xv * wv.astype("int32"), axis=rk)

    attrs = {DOT_ANNOTATION: VNNI_S8}
    if steps is not None and len(steps) > 1:
        attrs[DOT_STEPS] = [int(s) for s in steps]
    return te.compute(shape, acc_fn, name=name, attrs=attrs)


def _shifted_code(code):
    """An int8 activation code as the uint8 byte ``x + 128`` (its top bit flipped): what
    ``vpdpbusd`` takes as its unsigned operand."""
    return (code.astype("int32") + _i32(128)).astype("uint8")


def _vnni_conv_acc(op, x, pool: ConstPool, name: str, bias: np.ndarray):
    """The 1x1 conv accumulator in ``x86_dot``'s form and its corrected bias (None when the
    bias would leave int32)."""
    _, _, k, co = op.weights.shape
    sh, sw = op.attrs["strides"]
    made = _vnni_weights(op.weights.reshape(k, co), bias, int(op.in_q[0][1]))
    if made is None:
        return None
    packed, corrected = made
    wp = pool.add(f"{name}_wvnni", packed)
    _, oh_, ow_, _ = op.out_shape
    shape = (op.in_shapes[0][0], oh_, ow_, packed.shape[0] * packed.shape[2] // 4)
    acc = _vnni_acc(shape, lambda s, rk: x[s[0], s[1] * sh, s[2] * sw, rk], wp, k,
                    f"{name}_acc")
    return acc, corrected


def vnni_window_eligible(op, x_dtype: str) -> bool:
    """Whether a KxK (or padded, or strided 1x1) conv2d or a depthwise conv can run on
    ``vpdpbusd`` exactly: int8 codes, int8 weights with zero point 0, and either one group
    (a full conv: :func:`_vnni_window_conv_acc`) or one input channel per group (depthwise:
    :func:`_vnni_depthwise_acc`). Padding is a stage that holds the input zero point, so every
    product the instruction sums is one TFLite sums, or zero."""
    _kh, _kw, cpg, _co = op.weights.shape
    return (
        (op.attrs["groups"] == 1 or cpg == 1)
        and str(op.weights.dtype) == "int8"
        and not np.any(np.asarray(op.w_zp) != 0)
        and x_dtype == "int8"
    )


def _vnni_window_conv_acc(op, x, pool: ConstPool, name: str, bias: np.ndarray):
    """A full conv (one group) in ``x86_dot``'s form: a sum over its taps of 1x1 dot products.

    The reduction runs over ``(kh, kw, cin)`` of a source that needs no bounds checks: with
    input channels a multiple of 4, the input padded with its zero point (a stage, absent when
    the windows stay inside the input), so every 4-byte group is 4 channels of one pixel; with
    fewer (MobileNet's RGB, DS-CNN's single channel), the padded input rows with ``(width,
    cin)`` along one axis (``_rows``), where a window row is ``kw * cin`` contiguous bytes,
    taken in steps of 4 (the bytes past it meet zero weights); with a dilated width, each
    window row laid out along one axis, ``(kw, cin)`` padded to a multiple of 4 with zero
    weights (``_im2col``, along the width only). Each stage stores the shifted byte
    ``x + 128`` (:func:`_shifted_code`), so the kernel broadcasts it as it is. Padded
    positions hold ``x_zp + 128``, so their products are exactly the ``(128 + x_zp) * w`` the
    bias takes out. Returns ``(acc, corrected bias)`` or None."""
    kh, kw, cin, co = op.weights.shape
    n_, h_, w_, oh_, ow_, sh, sw, dh, dw, pt, pl, rows, cols = conv_window(op)
    zp = int(op.in_q[0][1])
    fill = tirx.const(zp + 128, "uint8")
    if cin % 4 == 0:
        if pt == 0 and pl == 0 and rows <= h_ and cols <= w_:
            src = x
        else:
            src = window_pad_stage(op, x, _shifted_code, fill, f"{name}_pad")
        cs = cin
        wk = op.weights.reshape(kh * kw * cin, co)

        def x_at(s, r):
            return src[s[0], s[1] * sh + r // (kw * cs) * dh, s[2] * sw + r // cs % kw * dw,
                       r % cs]

        steps = (kh, kw * cs // 4)
    elif dw == 1:
        # each window row is kw * cin contiguous bytes of the padded input row: the rows laid
        # out flat, (width, channels) along one axis, read at ow * sw * cin; cs rounds a
        # window row up to whole steps of 4 (the bytes past it meet zero weights)
        cs = -(-kw * cin // 4) * 4
        flat = -(-((ow_ - 1) * sw * cin + cs) // cin) * cin

        def row_fn(n, i, f):
            ih, iw = i - pt, f // cin - pl
            inside = tirx.all(ih >= 0, ih < h_, iw >= 0, iw < w_)
            return tirx.if_then_else(
                inside, _shifted_code(x[n, clamped(ih, h_), clamped(iw, w_), f % cin]), fill)

        rows_src = te.compute((n_, rows, flat), row_fn, name=f"{name}_rows")
        wk = window_row_weights(op, cs)

        def x_at(s, r):
            return rows_src[s[0], s[1] * sh + r // cs * dh, s[2] * (sw * cin) + r % cs]

        steps = (kh, cs // 4)
    else:
        cs = -(-kw * cin // 4) * 4
        src = window_im2col_stage(op, x, cs, _shifted_code, fill, f"{name}_im2col")
        wk = window_row_weights(op, cs)

        def x_at(s, r):
            return src[s[0], s[1] * sh + r // cs * dh, s[2], r % cs]

        steps = (kh, cs // 4)
    made = _vnni_weights(wk, bias, zp)
    if made is None:
        return None
    packed, corrected = made
    wp = pool.add(f"{name}_wvnni", packed)
    shape = (n_, oh_, ow_, packed.shape[0] * packed.shape[2] // 4)
    return _vnni_acc(shape, x_at, wp, wk.shape[0], f"{name}_acc", steps), corrected


def _vnni_depthwise_acc(op, x, pool: ConstPool, name: str, bias: np.ndarray):
    """A depthwise conv in ``x86_dot``'s depthwise form: each int32 lane one channel, each
    ``vpdpbusd`` four horizontal taps of it.

    A stage packs, per output column and channel, the four input bytes of taps ``4g .. 4g+3``
    of a window row (``x + 128``, padded positions ``x_zp + 128``, taps past the kernel 0) into
    one uint32, so 16 channels' words are one 64-byte operand; the weights are laid out the
    same way, ``(kh * groups of 4 taps, channels * 4)``, zero past the kernel and the channels.
    Channels are padded to whole vectors of 16. ``sum((x + 128) * w) - (128 + x_zp) * sum(w)``
    is TFLite's sum, the second term taken out of the bias. Returns ``(acc, corrected bias)``
    or None when that bias leaves int32."""

    kh, kw, _one, co = op.weights.shape
    n_, h_, w_, oh_, ow_, sh, sw, dh, dw, pt, pl, rows, _cols = conv_window(op)
    cin = op.in_shapes[0][3]
    opg = co // cin
    zp = int(op.in_q[0][1])
    groups = -(-kw // VNNI_DEPTH)
    cp = -(-co // VNNI_LANES) * VNNI_LANES
    wt = np.zeros((kh, groups * VNNI_DEPTH, cp), np.int8)
    wt[:, :kw, :co] = op.weights[:, :, 0, :]
    wq = np.ascontiguousarray(
        wt.reshape(kh * groups, VNNI_DEPTH, cp).transpose(0, 2, 1)).reshape(kh * groups, cp * 4)
    corrected = bias.astype(np.int64) - (128 + zp) * op.weights.astype(np.int64).sum(axis=(0, 1, 2))
    if corrected.min() < INT32_MIN or corrected.max() > INT32_MAX:
        return None
    wp = pool.add(f"{name}_wvnni", wq)

    def pack_fn(n, i, j, g, c):
        ih = i - pt
        word = tirx.const(0, "uint32")
        for k in range(VNNI_DEPTH):
            t = g * VNNI_DEPTH + k
            iw = j * sw + t * dw - pl
            inside = tirx.all(ih >= 0, ih < h_, iw >= 0, iw < w_)
            code = tirx.if_then_else(
                inside,
                x[n, clamped(ih, h_), clamped(iw, w_), tirx.min(c, _i32(co - 1)) // opg]
                .astype("int32"),
                _i32(zp),
            ) + _i32(128)
            byte = tirx.if_then_else(tirx.all(t < kw, c < co), code, _i32(0)).astype("uint32")
            word = word | (byte << tirx.const(8 * k, "uint32")) if k else byte
        return word

    packed = te.compute((n_, rows, ow_, groups, cp), pack_fn, name=f"{name}_taps")
    r = te.reduce_axis((0, kh * groups * VNNI_DEPTH), name="rk")

    def acc_fn(n, oh, ow, c):
        g4 = r // VNNI_DEPTH
        word = packed[n, oh * sh + g4 // groups * dh, ow, g4 % groups, c]
        byte = (word >> (r % VNNI_DEPTH * 8).astype("uint32")) & tirx.const(255, "uint32")
        wv = wp[g4, c * VNNI_DEPTH + r % VNNI_DEPTH]
        return te.sum(byte.astype("int32") * wv.astype("int32"), axis=r)

    acc = te.compute((n_, oh_, ow_, cp), acc_fn, name=f"{name}_acc",
                     attrs={DOT_ANNOTATION: VNNI_DW_S8})
    return acc, corrected.astype(np.int32)


def lower_conv2d(op, inputs, pool: ConstPool, name="conv", vnni: bool = False,
                 avx2: bool = False):
    """conv2d and depthwise (grouped) conv2d, NHWC activations, HWIO weights. With ``vnni``
    (an llvm host with AVX-512 VNNI), an eligible conv (:func:`vnni_conv_eligible`,
    :func:`vnni_window_eligible`) gets its accumulator in ``x86_dot``'s form instead: the same
    int32 sums, plus a constant the bias takes out. With ``avx2`` (an llvm host with AVX2 and
    no VNNI), an eligible full conv gets ``x86_avx2``'s multiply-add form the same way."""
    (x,) = inputs
    kh, kw, cpg, co = op.weights.shape
    bias = _bias_of(op, co)
    if avx2:

        made = (x86_avx2.conv_acc(op, x, pool, name, bias)
                if x86_avx2.conv_eligible(op, str(x.dtype)) else None)
        if made is not None:
            return _conv_output(op, made[0], pool, name, made[1])
    if vnni and vnni_conv_eligible(op, str(x.dtype)):
        made = _vnni_conv_acc(op, x, pool, name, bias)
        if made is not None:
            return _conv_output(op, made[0], pool, name, made[1], one_shift=True)
    elif vnni and vnni_window_eligible(op, str(x.dtype)):
        if op.attrs["groups"] == 1:
            made = _vnni_window_conv_acc(op, x, pool, name, bias)
        else:
            made = _vnni_depthwise_acc(op, x, pool, name, bias)
        if made is not None:
            return _conv_output(op, made[0], pool, name, made[1], one_shift=True)
    n_, h_, w_, c_ = op.in_shapes[0]
    sh, sw = op.attrs["strides"]
    dh, dw = op.attrs["dilation"]
    pt, pl = op.attrs["padding"][0], op.attrs["padding"][1]
    groups = op.attrs["groups"]
    opg = co // groups
    in_zp = int(op.in_q[0][1])
    w_zp = np.broadcast_to(np.asarray(op.w_zp, dtype=np.int64), (co,))
    w = pool.add(f"{name}_w", op.weights)
    wzp_t = pool.add(f"{name}_wzp", w_zp.astype(np.int32)) if np.any(w_zp != 0) else None
    _, oh_, ow_, _ = op.out_shape
    rh = te.reduce_axis((0, kh), name="rh")
    rw = te.reduce_axis((0, kw), name="rw")
    rc = te.reduce_axis((0, cpg), name="rc")

    acc_t = _acc_dtype(op)

    def acc_fn(n, oh, ow, oc):
        ih = oh * sh + rh * dh - pt
        iw = ow * sw + rw * dw - pl
        ic = rc if groups == 1 else (oc // opg) * cpg + rc
        inside = tirx.all(ih >= 0, ih < h_, iw >= 0, iw < w_)
        xv = tirx.if_then_else(inside, x[n, ih, iw, ic].astype(acc_t) - _i32(in_zp).astype(
            acc_t), tirx.const(0, acc_t))
        wv = w[rh, rw, rc, oc].astype(acc_t)
        if wzp_t is not None:
            wv = wv - wzp_t[oc].astype(acc_t)
        return te.sum(xv * wv, axis=[rh, rw, rc])

    acc = te.compute((n_, oh_, ow_, co), acc_fn, name=f"{name}_acc")
    return _conv_output(op, acc, pool, name, bias)


def lower_transpose_conv2d(op, inputs, pool: ConstPool, name="tconv"):
    """TRANSPOSE_CONV, NHWC activations, HWIO weights: TFLite Micro's int8 kernel scatters
    ``(x - x_zp) * w`` of input row ``i`` and tap ``k`` to output row ``i * stride - pad + k``
    into an int32 buffer; here each output gathers the same products (int32 sums wrap alike
    in any order), then the conv's bias and per-channel requantization. The 16x8 kernel
    gathers into int64 (its bias int64), LiteRT's uint8 one subtracts the weights' zero point
    (``compute.transpose_conv``)."""
    (x,) = inputs
    kh, kw, ci, co = op.weights.shape
    bias = _bias_of(op, co)
    _, h_, w_, _ = op.in_shapes[0]
    sh, sw = op.attrs["strides"]
    pt, pl = op.attrs["padding"][0], op.attrs["padding"][1]
    in_zp = int(op.in_q[0][1])
    w_zp = int(np.asarray(op.w_zp if op.w_zp is not None else 0).ravel()[0])
    w = pool.add(f"{name}_w", op.weights)
    acc_t = _acc_dtype(op)
    rh = te.reduce_axis((0, kh), name="rh")
    rw = te.reduce_axis((0, kw), name="rw")
    rc = te.reduce_axis((0, ci), name="rc")

    def acc_fn(n, oh, ow, oc):
        th, tw = oh + pt - rh, ow + pl - rw   # input row times the stride
        ih, iw = tirx.floordiv(th, sh), tirx.floordiv(tw, sw)
        hit = tirx.all(th >= 0, tirx.floormod(th, sh) == 0, ih < h_,
                       tw >= 0, tirx.floormod(tw, sw) == 0, iw < w_)
        xv = tirx.if_then_else(hit, x[n, ih, iw, rc].astype(acc_t) - _i32(in_zp).astype(acc_t),
                               tirx.const(0, acc_t))
        wv = w[rh, rw, rc, oc].astype(acc_t)
        if w_zp:
            wv = wv - tirx.const(w_zp, acc_t)
        return te.sum(xv * wv, axis=[rh, rw, rc])

    acc = te.compute(tuple(op.out_shape), acc_fn, name=f"{name}_acc")
    return _conv_output(op, acc, pool, name, bias)


def conv_x_bound(op) -> np.ndarray:
    """Per output channel, a bound on ``|acc + bias|`` of a conv with int8 input codes and
    weight zero point 0 (the VNNI forms; TFLite's int32 accumulator, whatever the input): the
    largest ``|x - x_zp|`` times the sum of the channel's ``|w|``, plus ``|bias|``.
    ``x86_requant`` needs it below ``2**30`` (times the left-shift factor)."""
    lo, hi = dtype_range("int8")
    in_zp = int(op.in_q[0][1])
    span = max(hi - in_zp, in_zp - lo)
    w = np.abs(np.asarray(op.weights, np.int64)).reshape(-1, op.weights.shape[-1]).sum(axis=0)
    b = np.zeros_like(w) if op.bias is None else np.abs(np.asarray(op.bias, np.int64))
    return span * w + b


def _conv_output(op, acc, pool: ConstPool, name: str, bias: np.ndarray,
                 one_shift: bool = False):
    """The requantization stage of a conv accumulator: ``acc + bias``, TFLite's per-channel
    multiplier and shift, the output zero point and the activation clamp. ``one_shift`` (the
    AVX-512 host kernels, whose vector units shift 64-bit lanes by per-lane amounts):
    :func:`mbqm_one_shift`, the same int32 in fewer instructions."""
    _, out_zp = _out_q(op)
    mult, shift = conv_multipliers(op)
    if _acc_dtype(op) == "int64":
        return output_16x8(op, acc, pool, name, bias, mult, shift)
    b = pool.add(f"{name}_bias", bias)
    if one_shift and mult.min() >= 0:
        m_t = pool.add(f"{name}_mult", mult)
        consts = mbqm_one_shift_constants(mult, shift)
        lmul = pool.add(f"{name}_lmul", consts["lmul"]) if (shift > 0).any() else None
        right = pool.add(f"{name}_right", consts["right"])
        vector = bool((conv_x_bound(op) * consts["lmul"]).max() < x86_requant.X_LIMIT)
        return one_shift_output(acc, b, m_t, lmul, right, bool((shift < 0).all()), out_zp,
                                (op.act_min, op.act_max), op.out_dtype, op.out_shape,
                                f"{name}_out", vector)
    m_t = pool.add(f"{name}_mult", mult)
    s_t = pool.add(f"{name}_shift", shift)

    def out_fn(n, oh, ow, oc):
        v = acc[n, oh, ow, oc] + b[oc]
        v = mbqm(v, m_t[oc], s_t[oc]) + _i32(out_zp)
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, out_fn, name=f"{name}_out")


#: the name suffix of the low 16 bits of a 16x8 bias beyond 32 bits (:func:`output_16x8`):
#: part of the bias the NPU's bias/scale stream carries, no planner tensor of its own
BIAS_LOW_SUFFIX = "_bias_low"


def output_16x8(op, acc, pool: ConstPool, name: str, bias: np.ndarray, mult: np.ndarray,
                shift: np.ndarray):
    """The requantization stage of a 16x8 operator's int64 accumulator (NHWC or rows x
    channels): ``acc + bias`` scaled by TFLite's reduced multiplier with one rounding
    (``int16x8.reduced_scales``), truncated to int32 as TFLite's kernel does, then the
    output zero point and the activation clamp."""
    reduced, right = int16x8.reduced_scales(mult, shift)
    bias = np.asarray(bias, np.int64)
    # int32 constants (int64 ones do not survive the Relax constants): a bias beyond 32 bits
    # as its high part and its low 16 bits (BIAS_LOW_SUFFIX, carried with the bias)
    wide = bool(bias.size) and not (INT32_MIN <= bias.min() and bias.max() <= INT32_MAX)
    b = pool.add(f"{name}_bias", (bias >> 16 if wide else bias).astype(np.int32))
    b_low = pool.add(f"{name}{BIAS_LOW_SUFFIX}", (bias & 0xFFFF).astype(np.int32)) \
        if wide else None
    m_t = pool.add(f"{name}_mult", reduced.astype(np.int32))
    r_t = pool.add(f"{name}_shift", right.astype(np.int32))
    out_zp = int(op.out_q[1])
    out_shape = op.out_shape
    rows = len(acc.shape) == 2 and len(out_shape) != 2

    def out_fn(*idx):
        o = idx[-1]
        if rows:     # a fully connected's (rows, units) accumulator of an N-D output
            row = 0
            for d, i in zip(out_shape[:-1], idx[:-1]):
                row = row * d + i
            a = acc[row, o]
        else:
            a = acc[idx]
        r = r_t[o].astype("int64")
        bv = b[o].astype("int64")
        if b_low is not None:
            bv = bv * _i64(1 << 16) + b_low[o].astype("int64")
        v = (a + bv) * m_t[o].astype("int64") + tirx.shift_left(
            _i64(1), r - _i64(1))
        v = tirx.shift_right(v, r).astype("int32") + _i32(out_zp)
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(out_shape, out_fn, name=f"{name}_out")


def one_shift_output(acc, b, m_t, lmul, right, all_right: bool, out_zp: int,
                     clamp: tuple[int, int], out_dtype: str, shape, name: str, vector: bool):
    """The output stage ``clamp(mbqm_one_shift(acc + b) + out_zp)`` (NHWC ``shape``, at most
    the accumulator's: padded channels dropped) of an NHWC accumulator with
    per-channel constants (:func:`mbqm_one_shift_constants`; ``lmul`` None where no channel
    shifts left). ``vector``: every ``|(acc + b) * lmul|`` is below ``x86_requant.X_LIMIT``
    (:func:`conv_x_bound`), so the stage is marked for ``x86_requant``'s 16-lane form, which
    the CPU schedule puts in its place (the same int32 values)."""

    def fused_fn(n, oh, ow, oc):
        v = acc[n, oh, ow, oc] + b[oc]
        v = mbqm_one_shift(v, m_t[oc], None if lmul is None else lmul[oc], right[oc],
                           all_right) + _i32(out_zp)
        return clamp_cast(v, clamp[0], clamp[1], out_dtype)

    attrs = {}
    if vector:
        attrs[x86_requant.REQUANT_ANNOTATION] = x86_requant.encode(
            b.op.name, m_t.op.name, right.op.name, None if lmul is None else lmul.op.name,
            out_zp, clamp[0], clamp[1], all_right)
    return te.compute(shape, fused_fn, name=name, attrs=attrs)


def _unflatten(flat, shape) -> tuple:
    """The row-major index into ``shape`` of the flat offset ``flat``."""
    idx = []
    for d in reversed(shape):
        idx.append(tirx.floormod(flat, d))
        flat = tirx.floordiv(flat, d)
    return tuple(reversed(idx))


def lower_fully_connected(op, inputs, pool: ConstPool, name="fc", vnni: bool = False,
                          avx2: bool = False, tfl_rounding: bool = False):
    """FULLY_CONNECTED: ``(out, in)`` weights, the input flattened to rows of ``in``. With
    ``vnni``, an eligible one (:func:`vnni_fc_eligible`) accumulates in ``x86_dot``'s form;
    with ``avx2``, in ``x86_avx2``'s."""
    (x,) = inputs
    nout, k = op.weights.shape
    in_zp = int(op.in_q[0][1])
    _, out_zp = _out_q(op)
    mult, shift = fc_multipliers(op)
    w_zp = int(np.asarray(op.w_zp).ravel()[0])
    bias = _bias_of(op, nout)
    in_shape = op.in_shapes[0]
    lead = int(np.prod(in_shape)) // k
    out_shape = op.out_shape

    def x_at(row, kk):  # the input flattened to (lead, k)
        return x[_unflatten(row * k + kk, in_shape)]


    made = None  # (accumulator, corrected bias) in a dot-product form
    if avx2 and x86_avx2.fc_eligible(op, str(x.dtype)):
        made = x86_avx2.fc_acc(op, x_at, lead, pool, name, bias)
    elif vnni and vnni_fc_eligible(op, str(x.dtype)):
        laid = _vnni_weights(op.weights.T, bias, in_zp)
        if laid is not None:
            wp = pool.add(f"{name}_wvnni", laid[0])
            made = (_vnni_acc((lead, laid[0].shape[0] * laid[0].shape[2] // 4),
                              lambda s, rk: x_at(s[0], rk), wp, k, f"{name}_acc"), laid[1])
    if made is not None:
        acc, bias = made
    else:
        w = pool.add(f"{name}_w", op.weights)
        rk = te.reduce_axis((0, k), name="rk")
        acc_t = _acc_dtype(op)
        acc = te.compute(
            (lead, nout),
            lambda r, o: te.sum(
                (x_at(r, rk).astype(acc_t) - tirx.const(in_zp, acc_t))
                * (w[o, rk].astype(acc_t) - tirx.const(w_zp, acc_t)),
                axis=rk,
            ),
            name=f"{name}_acc",
        )
    if _acc_dtype(op) == "int64":
        return output_16x8(op, acc, pool, name, bias, mult, shift)
    b = pool.add(f"{name}_bias", bias)
    m_t = pool.add(f"{name}_mult", mult)
    s_t = pool.add(f"{name}_shift", shift)

    def out_fn(*idx):
        o = idx[-1]
        row = 0
        for d, i in zip(out_shape[:-1], idx[:-1]):
            row = row * d + i
        v = acc[row, o] + b[o]
        # TFLite Micro's FULLY_CONNECTED rounds twice, LiteRT's int8 one once; int16
        # activations (16x8 with an int32 bias) follow TFLite Micro, the 16x8 oracle; uint8
        # LiteRT's kernel (once) on the NPU too, TFLite Micro having none
        twice = (tfl_rounding and op.in_dtypes[0] != "uint8") or op.in_dtypes[0] == "int16"
        requant = mbqm if twice else mbqm_single_rounding
        v = requant(v, m_t[o], s_t[o]) + _i32(out_zp)
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(out_shape, out_fn, name=f"{name}_out")


# ----------------------------------------------------------------------- pooling / mean
def _pool_geometry(op):
    ph, pw = op.attrs["pool_size"]
    sh, sw = op.attrs["strides"]
    pt, pl = op.attrs["padding"][0], op.attrs["padding"][1]
    return ph, pw, sh, sw, pt, pl


def lower_avg_pool2d(op, inputs, pool: ConstPool, name="avgpool"):
    (x,) = inputs
    _, h_, w_, _ = op.in_shapes[0]
    ph, pw, sh, sw, pt, pl = _pool_geometry(op)
    rh = te.reduce_axis((0, ph), name="rh")
    rw = te.reduce_axis((0, pw), name="rw")

    def sum_fn(n, oh, ow, c):
        ih = oh * sh + rh - pt
        iw = ow * sw + rw - pl
        inside = tirx.all(ih >= 0, ih < h_, iw >= 0, iw < w_)
        return te.sum(
            tirx.if_then_else(inside, x[n, ih, iw, c].astype("int32"), _i32(0)), axis=[rh, rw]
        )

    acc = te.compute(op.out_shape, sum_fn, name=f"{name}_sum")

    def out_fn(n, oh, ow, c):
        h0 = oh * sh - pt
        w0 = ow * sw - pl
        hs, he = tirx.max(h0, 0), tirx.min(h0 + ph, h_)
        ws, we = tirx.max(w0, 0), tirx.min(w0 + pw, w_)
        cnt = ((he - hs) * (we - ws)).astype("int32")
        a = acc[n, oh, ow, c]
        half = tirx.truncdiv(cnt, _i32(2))
        v = tirx.Select(a > _i32(0), tirx.truncdiv(a + half, cnt), tirx.truncdiv(a - half, cnt))
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, out_fn, name=f"{name}_out")


def lower_max_pool2d(op, inputs, pool: ConstPool, name="maxpool"):
    (x,) = inputs
    _, h_, w_, _ = op.in_shapes[0]
    ph, pw, sh, sw, pt, pl = _pool_geometry(op)
    rh = te.reduce_axis((0, ph), name="rh")
    rw = te.reduce_axis((0, pw), name="rw")
    lo = tirx.min_value("int32")

    def max_fn(n, oh, ow, c):
        ih = oh * sh + rh - pt
        iw = ow * sw + rw - pl
        inside = tirx.all(ih >= 0, ih < h_, iw >= 0, iw < w_)
        return te.max(tirx.if_then_else(inside, x[n, ih, iw, c].astype("int32"), lo), axis=[rh, rw])

    acc = te.compute(op.out_shape, max_fn, name=f"{name}_max")
    return te.compute(
        op.out_shape,
        lambda *i: clamp_cast(acc[i], op.act_min, op.act_max, op.out_dtype),
        name=f"{name}_out",
    )


def lower_mean(op, inputs, pool: ConstPool, name="mean"):
    """MEAN over any axes of the input that keep its depth, TFLite's reference int8 MEAN (see
    mean_multiplier); height and width of NHWC unless ``op.attrs["axis"]`` names others
    (``patterns`` normalizes them). SUM (``op.kind`` REDUCE_SUM): TFLite's int8 SUM is the
    same rescale of the same sum with no element count to fold in (``mean_multiplier`` of
    one element)."""
    if op.kind == Op.REDUCE_SUM and 3 in op.attrs.get("axis", ()):
        return lower_reduce_over_depth(op, inputs, pool, name)
    (x,) = inputs
    in_shape = [int(s) for s in op.in_shapes[0]]
    rank = len(in_shape)
    axes = normalized_axes(op.attrs.get("axis") or (1, 2), rank)
    kept = [i for i in range(rank) if i not in axes]
    in_scale, in_zp = f32(op.in_q[0][0]), int(op.in_q[0][1])
    out_scale, out_zp = _out_q(op)
    count = 1 if op.kind == Op.REDUCE_SUM else int(np.prod([in_shape[a] for a in axes]))
    mult, shift = mean_multiplier(in_scale, out_scale, count)
    reduced = {a: te.reduce_axis((0, in_shape[a]), name=_REDUCE_AXIS_NAMES.get(a, f"r{a}"))
               for a in axes}

    def sum_fn(*k):
        at = dict(zip(kept, k))
        idx = [reduced[i] if i in reduced else at[i] for i in range(rank)]
        return te.sum(x[tuple(idx)].astype("int32") - _i32(in_zp), axis=list(reduced.values()))

    acc = te.compute([in_shape[i] for i in kept], sum_fn, name=f"{name}_sum")
    keep = len(op.out_shape) == rank

    def out_fn(*idx):
        v = mbqm(acc[tuple(idx[i] for i in kept) if keep else idx], mult, shift)
        return clamp_cast(v + _i32(out_zp), op.act_min, op.act_max, op.out_dtype)

    assert keep or len(op.out_shape) == len(kept)
    return te.compute(op.out_shape, out_fn, name=f"{name}_out")


#: the reduction axes' names of a MEAN over NHWC height and width
_REDUCE_AXIS_NAMES = {1: "rh", 2: "rw"}


def lower_reduce_min_max(op, inputs, pool: ConstPool, name="reduce"):
    """REDUCE_MAX / REDUCE_MIN over H and W of an NHWC tensor: TFLite's 8-bit kernels pick
    the largest (smallest) code, input and output quantized alike (``patterns._read_reduce``).
    Over H or W alone (or with the depth) each kept axis is one to one, as over the depth."""
    axes = tuple(op.attrs.get("axis", (1, 2)))
    if 3 in axes:
        return lower_reduce_over_depth(op, inputs, pool, name)
    if axes != (1, 2):
        return _lower_reduce_min_max_one_axis(op, inputs, axes[0], name)
    (x,) = inputs
    n_, h_, w_, c_ = op.in_shapes[0]
    reducer = te.max if op.kind == Op.REDUCE_MAX else te.min
    rh = te.reduce_axis((0, h_), name="rh")
    rw = te.reduce_axis((0, w_), name="rw")
    acc = te.compute(
        (n_, c_),
        lambda n, c: reducer(x[n, rh, rw, c].astype("int32"), axis=[rh, rw]),
        name=f"{name}_acc",
    )
    assert len(op.out_shape) in (2, 4)
    return te.compute(
        op.out_shape,
        lambda *i: clamp_cast(acc[i[0], i[-1]], op.act_min, op.act_max, op.out_dtype),
        name=f"{name}_out",
    )


def _lower_reduce_min_max_one_axis(op, inputs, axis: int, name: str):
    """REDUCE_MAX / REDUCE_MIN over the height (``axis`` 1) or the width (2) alone of an NHWC
    tensor: the largest (smallest) code of each kept position, then the output's shape."""
    (x,) = inputs
    n_, h_, w_, c_ = (int(s) for s in op.in_shapes[0])
    r = te.reduce_axis((0, (h_, w_)[axis - 1]), name=_REDUCE_AXIS_NAMES[axis])
    reducer = te.max if op.kind == Op.REDUCE_MAX else te.min
    kept = (n_, 1, w_, c_) if axis == 1 else (n_, h_, 1, c_)

    def reduce_fn(n, h, w, c):
        at = (n, r, w, c) if axis == 1 else (n, h, r, c)
        return reducer(x[at].astype("int32"), axis=[r])

    acc = te.compute(kept, reduce_fn, name=f"{name}_acc")
    keep = len(op.out_shape) == 4

    def out_fn(*i):
        at = i if keep else i[:axis] + (_i32(0),) + i[axis:]
        return clamp_cast(acc[at], op.act_min, op.act_max, op.out_dtype)

    return te.compute(tuple(op.out_shape), out_fn, name=f"{name}_out")


def lower_reduce_over_depth(op, inputs, pool: ConstPool, name="reduce"):
    """SUM, REDUCE_MAX and REDUCE_MIN over the depth of an NHWC tensor of int8, uint8 or
    int16 codes, with height, width or both reduced too (``op.attrs["axis"]``,
    ``patterns._read_reduce``): TFLite's kernels (TFLite Micro's; LiteRT's for uint8 and the
    int16 REDUCE_MAX / REDUCE_MIN, which TFLite Micro lacks) reduce any axes alike and every
    type alike, SUM rescaling ``sum(x - zp)`` in int32 by ``s_in / s_out`` alone
    (``mean_multiplier`` of one element), REDUCE_MAX / REDUCE_MIN picking a code. One
    reduction reading each element once, its kept axes one to one (the part matcher's
    propagator), then the output's shape (``keepdims`` or not)."""
    (x,) = inputs
    n_, h_, w_, c_ = (int(s) for s in op.in_shapes[0])
    axes = tuple(op.attrs["axis"])
    rh = te.reduce_axis((0, h_), name="rh") if 1 in axes else None
    rw = te.reduce_axis((0, w_), name="rw") if 2 in axes else None
    rc = te.reduce_axis((0, c_), name="rc")
    red = [a for a in (rh, rw, rc) if a is not None]
    kept = (n_, 1 if rh is not None else h_, 1 if rw is not None else w_)
    if op.kind == Op.REDUCE_SUM:
        in_zp = int(op.in_q[0][1])
        out_scale, out_zp = _out_q(op)
        mult, shift = mean_multiplier(f32(op.in_q[0][0]), out_scale, 1)
        acc = te.compute(kept, lambda n, h, w: te.sum(
            x[n, h if rh is None else rh, w if rw is None else rw, rc].astype("int32")
            - _i32(in_zp), axis=red), name=f"{name}_sum")

        def value(n, h, w):
            return mbqm(acc[n, h, w], mult, shift) + _i32(out_zp)
    else:
        reducer = te.max if op.kind == Op.REDUCE_MAX else te.min
        acc = te.compute(kept, lambda n, h, w: reducer(
            x[n, h if rh is None else rh, w if rw is None else rw, rc].astype("int32"),
            axis=red), name=f"{name}_acc")

        def value(n, h, w):
            return acc[n, h, w]
    zero = _i32(0)
    out_axes = [a for a in range(4) if op.attrs.get("keepdims", True) or a not in axes]

    def out_fn(*i):
        at = dict(zip(out_axes, i))
        return clamp_cast(value(at.get(0, zero), at.get(1, zero) if rh is None else zero,
                                at.get(2, zero) if rw is None else zero),
                          op.act_min, op.act_max, op.out_dtype)

    return te.compute(tuple(op.out_shape), out_fn, name=f"{name}_out")


def lower_arg_max(op, inputs, pool: ConstPool, name="argmax"):
    """ARG_MAX along the last axis (``patterns._read_arg_max``), TFLite's first maximum: the
    NPU's packing (``ops_argmax``) widened to any depth ``C``. Each code, made non-negative,
    times ``C`` plus its channel's reversed index ``C - 1 - c`` orders first by code, then by
    the smaller channel; the largest such value gives the index back. One reduction reading
    each element once (so the part matcher derives one access map: the whole depth, the
    other axes one to one), within int32 up to 65535 channels."""
    (x,) = inputs
    *lead, c_ = (int(s) for s in op.in_shapes[0])
    lowest = 0 if op.in_dtypes[0] == "uint8" else -128
    rc = te.reduce_axis((0, c_), name="rc")
    packed = te.compute(
        tuple(lead),
        lambda *i: te.max((x[tuple(i) + (rc,)].astype("int32") - _i32(lowest)) * _i32(c_)
                          + (_i32(c_ - 1) - rc), axis=rc),
        name=f"{name}_packed")

    def index(*i):
        # the remainder written out: ``floormod`` by one folds to a constant, and an output
        # reading nothing is no Part of its input
        rest = packed[i] - tirx.floordiv(packed[i], _i32(c_)) * _i32(c_)
        return (_i32(c_ - 1) - rest).astype(op.out_dtype)

    return te.compute(tuple(op.out_shape), index, name=f"{name}_out")


# ----------------------------------------------------------------------- elementwise
def _broadcast_index(in_shape, out_idx):
    """Index into an input of ``in_shape`` broadcast (numpy rules) to the output index."""
    off = len(out_idx) - len(in_shape)
    return tuple(0 if d == 1 else out_idx[off + i] for i, d in enumerate(in_shape))


def _mbqm_const_one_shift(x, multiplier: int, shift: int):
    """:func:`mbqm` by a constant multiplier and shift in :func:`mbqm_one_shift`'s form."""
    left, right = max(shift, 0), max(-shift, 0)
    return mbqm_one_shift(x, _i32(multiplier), _i32(1 << left) if left else None, _i32(right),
                          right > 0)


def lower_add(op, inputs, pool: ConstPool, name="add", vnni: bool = False):
    """ADD (reference_integer_ops::Add), and SUB (``op.kind == "sub"``: TFLite's 8-bit SUB is
    the same arithmetic with the rescaled second input subtracted): both inputs rescaled to
    2*max(scale) with left shift 20 (15 for int16 tensors, as TFLite's int16 kernel).
    With ``vnni`` (an AVX-512 host), each rescale is :func:`mbqm_one_shift`'s single 64-bit
    add and shift, which reads its operand once, so the three rescales are one stage (no
    int32 tensors between them); the same int32 values."""
    a, b = inputs
    (s1, z1), (s2, z2) = [(f32(s), int(z)) for s, z in op.in_q]
    so, zo = _out_q(op)
    left_shift = 15 if op.out_dtype == "int16" else 20
    twice_max = 2 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << left_shift) * so))
    sign = -1 if op.kind == Op.SUB else 1
    if vnni and min(m1, m2, mo) >= 0:
        def fused(*idx):
            xa = a[_broadcast_index(op.in_shapes[0], idx)].astype("int32") - _i32(z1)
            xb = b[_broadcast_index(op.in_shapes[1], idx)].astype("int32") - _i32(z2)
            raw = (_mbqm_const_one_shift(xa * _i32(1 << left_shift), m1, sh1)
                   + _i32(sign) * _mbqm_const_one_shift(xb * _i32(1 << left_shift), m2, sh2))
            v = _mbqm_const_one_shift(raw, mo, sho) + _i32(zo)
            return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

        return te.compute(op.out_shape, fused, name=f"{name}_out")

    def scaled(t, k, zp, m, sh):
        return te.compute(
            op.in_shapes[k],
            lambda *i: mbqm((t[i].astype("int32") - _i32(zp)) * _i32(1 << left_shift), m, sh),
            name=f"{name}_in{k}",
        )

    sa = scaled(a, 0, z1, m1, sh1)
    sb = scaled(b, 1, z2, m2, sh2)

    def fn(*idx):
        raw = (
            sa[_broadcast_index(op.in_shapes[0], idx)]
            + _i32(sign) * sb[_broadcast_index(op.in_shapes[1], idx)]
        )
        v = mbqm(raw, mo, sho) + _i32(zo)
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_squared_difference(op, inputs, pool: ConstPool, name="squared_difference"):
    """SQUARED_DIFFERENCE (TFLite Micro's int8 or int16 kernel, ``compute.squared_difference``):
    each offset code widened (int8 by ``2**7``, int16 not) and rescaled to ``2 * max(scale)``,
    the difference squared in int32 and requantized to the output."""
    a, b = inputs
    dtype = op.in_dtypes[0]
    sc = squared_difference.scales(op.in_q[0], op.in_q[1], op.out_q, dtype)
    widen = _i32(1 << squared_difference.left_shift(dtype))

    def scaled(t, k, m):
        zp = int(op.in_q[k][1])
        return te.compute(op.in_shapes[k],
                          lambda *i: mbqm((t[i].astype("int32") - _i32(zp)) * widen, *m),
                          name=f"{name}_in{k}")

    sa, sb = scaled(a, 0, sc.input1), scaled(b, 1, sc.input2)

    m_out, left = sc.output.multiplier, max(sc.output.shift, 0)

    def fn(*idx):
        diff = sa[_broadcast_index(op.in_shapes[0], idx)] - \
            sb[_broadcast_index(op.in_shapes[1], idx)]
        square = diff * diff
        if left:
            # the kernel's int32 left shift wraps; spelled out, as TVM's simplifier may widen
            # an int32 product it takes not to overflow
            wide = square.astype("int64") * _i64(1 << left) + _i64(1 << 31)
            square = (tirx.bitwise_and(wide, _i64(0xFFFFFFFF)) - _i64(1 << 31)).astype("int32")
        v = mbqm(square, m_out, min(sc.output.shift, 0)) + _i32(int(op.out_q[1]))
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_mul(op, inputs, pool: ConstPool, name="mul"):
    """MUL (reference_integer_ops::Mul)."""
    a, b = inputs
    (s1, z1), (s2, z2) = [(f32(s), int(z)) for s, z in op.in_q]
    so, zo = _out_q(op)
    m, sh = quantize_multiplier(s1 * s2 / so)

    def fn(*idx):
        va = a[_broadcast_index(op.in_shapes[0], idx)].astype("int32") - _i32(z1)
        vb = b[_broadcast_index(op.in_shapes[1], idx)].astype("int32") - _i32(z2)
        v = mbqm(va * vb, m, sh) + _i32(zo)
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_min_max(op, inputs, pool: ConstPool, name="minmax"):
    """MINIMUM / MAXIMUM (reference_ops::MaximumMinimumBroadcast): TFLite compares the codes
    as they are, whatever the quantization (its converter gives inputs and output one)."""
    a, b = inputs
    pick = tirx.min if op.kind == Op.MINIMUM else tirx.max

    def fn(*idx):
        v = pick(a[_broadcast_index(op.in_shapes[0], idx)].astype("int32"),
                 b[_broadcast_index(op.in_shapes[1], idx)].astype("int32"))
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_abs(op, inputs, pool: ConstPool, name="abs"):
    """ABS (TFLite Micro's elementwise AbsHelper): ``|x - zp_in|``, rescaled by ``s_in /
    s_out`` only when the scales differ, plus the output zero point."""
    (x,) = inputs
    s1, z1 = f32(op.in_q[0][0]), int(op.in_q[0][1])
    so, zo = _out_q(op)
    m, sh = quantize_multiplier(s1 / so)

    def fn(*idx):
        v = tirx.abs(x[idx].astype("int32") - _i32(z1))
        if s1 != so:
            v = mbqm(v, m, sh)
        return clamp_cast(v + _i32(zo), op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_requantize(op, inputs, pool: ConstPool, name="requant"):
    """QUANTIZE between integer types and the standalone RELU family: TFLite's requantization
    clamped to the activation (a RELU's multiplier as its kernel forms it,
    ``compute.relu_requant``)."""
    (x,) = inputs
    z1 = int(op.in_q[0][1])
    zo = _out_q(op)[1]
    m, sh = relu_multiplier(op.in_q[0][0], op.out_q[0], op.float_activation)

    def fn(*idx):
        v = mbqm(x[idx].astype("int32") - _i32(z1), m, sh) + _i32(zo)
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


# ----------------------------------------------------------------------- data movement
def lower_reshape(op, inputs, pool: ConstPool, name="reshape"):
    (x,) = inputs
    in_shape = op.in_shapes[0]

    def fn(*idx):
        flat = 0
        for d, i in zip(op.out_shape, idx):
            flat = flat * d + i
        return x[_unflatten(flat, in_shape)]

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def _concat_input(op, k: int, x, src):
    """Element ``src`` of concatenation input ``k`` in the output's codes: the code itself, or
    for an input quantized unlike the output its rescale rounded once, half up (the NPU's form,
    ``compute.concat_requant``, which the pattern checked equal to LiteRT's on every code)."""
    v = x[src]
    if op.out_q is None or not op.in_q or tuple(op.in_q[k]) == tuple(op.out_q):
        return v
    r = concat_requant.rescale(op.in_q[k], op.out_q)
    lo, hi = dtype_range(op.out_dtype)
    scaled = mbqm_single_rounding(v.astype("int32") - _i32(r.in_q[1]), r.multiplier,
                                  31 - r.right_shift)
    return clamp_cast(scaled + _i32(r.out_q[1]), lo, hi, op.out_dtype)


def lower_concatenate(op, inputs, pool: ConstPool, name="concat"):
    """CONCATENATION: each input's codes at its offset along the axis, an input quantized
    unlike the output requantized (:func:`_concat_input`), then a fused activation's clamp
    (each of the NPU's copies clamps what it writes)."""
    axis = op.attrs["axis"] % len(op.out_shape)
    offsets = np.cumsum([0] + [s[axis] for s in op.in_shapes])
    clamped = op.out_dtype in ("int8", "uint8", "int16") and \
        (op.act_min, op.act_max) != dtype_range(op.out_dtype)

    def fn(*idx):
        i = idx[axis]
        val = None
        for k in range(len(inputs)):  # the last input whose offset ``i`` reaches
            src = list(idx)
            src[axis] = i - int(offsets[k])
            v = _concat_input(op, k, inputs[k], tuple(src))
            val = v if val is None else tirx.if_then_else(i >= int(offsets[k]), v, val)
        return clamp_cast(val, op.act_min, op.act_max, op.out_dtype) if clamped else val

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_pad(op, inputs, pool: ConstPool, name="pad"):
    """PAD / PADV2: the input codes, and the fill code (the zero point, or PADV2's constant)
    outside them; ``x`` is read only inside its bounds."""
    (x,) = inputs
    before = [b for b, _ in op.attrs["pad_width"]]
    fill = tirx.const(op.attrs["fill"], op.out_dtype)

    def fn(*idx):
        src = [i - b for i, b in zip(idx, before)]
        inside = tirx.all(*[tirx.all(s >= 0, s < n) for s, n in zip(src, op.in_shapes[0])])
        return tirx.if_then_else(inside, x[tuple(src)].astype(op.out_dtype), fill)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_mirror_pad(op, inputs, pool: ConstPool, name="mirror_pad"):
    """MIRROR_PAD: an index ``s`` outside ``[0, n)`` reads ``-s`` or ``2n - 2 - s`` in
    REFLECT mode (the edge not repeated), ``-s - 1`` or ``2n - 1 - s`` in SYMMETRIC mode (the
    edge repeated)."""
    (x,) = inputs
    before = [b for b, _ in op.attrs["pad_width"]]
    edge = 0 if op.attrs.get("mode") == "SYMMETRIC" else 1

    def fn(*idx):
        src = []
        for i, b, n in zip(idx, before, op.in_shapes[0]):
            s = i - b
            src.append(tirx.Select(s < 0, edge - 1 - s,
                                   tirx.Select(s >= n, 2 * n - 1 - edge - s, s)))
        return x[tuple(src)]

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_reverse(op, inputs, pool: ConstPool, name="reverse"):
    """REVERSE_V2: index ``i`` of the axis reads ``n - 1 - i``."""
    (x,) = inputs
    axis, n = op.attrs["axis"], op.in_shapes[0][op.attrs["axis"]]

    def fn(*idx):
        src = list(idx)
        src[axis] = n - 1 - src[axis]
        return x[tuple(src)]

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_tile(op, inputs, pool: ConstPool, name="tile"):
    """TILE: every output index reads the input at that index modulo the input's shape."""
    (x,) = inputs
    shape = op.in_shapes[0]

    def fn(*idx):
        return x[tuple(i if n == o else tirx.floormod(i, n)
                       for i, n, o in zip(idx, shape, op.out_shape))]

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_split(op, inputs, pool: ConstPool, name="split"):
    """One output of SPLIT / SPLIT_V (or one axis of a slice): every ``stride``-th element
    from ``begin`` along ``axis``."""
    (x,) = inputs
    axis, begin, stride = op.attrs["axis"], op.attrs["begin"], op.attrs.get("stride", 1)

    def fn(*idx):
        src = list(idx)
        src[axis] = src[axis] * stride + begin
        return x[tuple(src)]

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_transpose(op, inputs, pool: ConstPool, name="transpose"):
    """TRANSPOSE: output index ``i`` reads the input at ``i`` permuted back."""
    (x,) = inputs
    perm = op.attrs["perm"]

    def fn(*idx):
        src = [None] * len(perm)
        for k, p in enumerate(perm):
            src[p] = idx[k]
        return x[tuple(src)]

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_depth_to_space(op, inputs, pool: ConstPool, name="d2s"):
    """DEPTH_TO_SPACE in TFLite's (DCR) order: output ``(h, w, c)`` reads input
    ``(h // b, w // b, ((h % b) * b + w % b) * C_out + c)``."""
    (x,) = inputs
    b, c_out = op.attrs["block_size"], op.out_shape[3]

    def fn(n, h, w, c):
        depth = (tirx.floormod(h, b) * b + tirx.floormod(w, b)) * c_out + c
        return x[n, tirx.floordiv(h, b), tirx.floordiv(w, b), depth]

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def nearest_source_index(
    out_size: int, in_size: int, align_corners: bool, half_pixel: bool
) -> np.ndarray:
    """The input index of every output index of ``reference_ops::ResizeNearestNeighbor``
    (float32 scale and product, ``std::floor`` or ``std::round``, clamped to the input)."""
    if align_corners and out_size > 1:
        scale = np.float32(in_size - 1) / np.float32(out_size - 1)
    else:
        scale = np.float32(in_size) / np.float32(out_size)
    offset = np.float32(0.5 if half_pixel else 0.0)
    src = []
    for o in range(out_size):
        v = (np.float32(o) + offset) * scale
        k = int(round_half_away_f32(v)) if align_corners else int(np.floor(v))
        src.append(max(min(k, in_size - 1), 0))
    return np.asarray(src, np.int64)


def _index_expr(v, table: np.ndarray, in_size: int, out_size: int):
    """``table[v]`` as an integer expression: an exact rational rule (``v * in // out``,
    ``(2v + 1) * in // 2out`` or align_corners' rounded ``v * (in-1) / (out-1)``; the first
    is the form the part matcher reads as a window) where it reproduces the float32 table,
    else a Select chain over the table's runs (one per input index)."""
    rules = [(in_size, 0, out_size), (2 * in_size, in_size, 2 * out_size)]
    if out_size > 1:
        rules.append((2 * (in_size - 1), out_size - 1, 2 * (out_size - 1)))
    for num, add, den in rules:
        ints = np.minimum((np.arange(out_size) * num + add) // den, in_size - 1)
        if np.array_equal(ints, table):
            return tirx.min(tirx.floordiv(v * num + add, den), in_size - 1)
    expr = tirx.const(int(table[-1]), "int32")
    starts = [o for o in range(1, out_size) if table[o] != table[o - 1]]
    for o in reversed(starts):
        expr = tirx.Select(v < o, tirx.const(int(table[o - 1]), "int32"), expr)
    return expr


def lower_resize_nearest(op, inputs, pool: ConstPool, name="resize_nn"):
    """RESIZE_NEAREST_NEIGHBOR: a gather of codes through TFLite's index rule per axis
    (computed at compile time, :func:`nearest_source_index`)."""
    (x,) = inputs
    _, ih, iw, _ = op.in_shapes[0]
    _, oh, ow, _ = op.out_shape
    ac, hp = op.attrs["align_corners"], op.attrs["half_pixel_centers"]
    ys, xs = nearest_source_index(oh, ih, ac, hp), nearest_source_index(ow, iw, ac, hp)

    def fn(n, y, xx, c):
        return x[n, _index_expr(y, ys, ih, oh), _index_expr(xx, xs, iw, ow), c]

    return te.compute(op.out_shape, fn, name=f"{name}_out")


# ----------------------------------------------------------------------- lookup tables
def _lut_of(op, tflite_micro: bool = False) -> np.ndarray:
    dtype = op.in_dtypes[0]
    if tflite_micro and dtype == "int8" and op.kind in int8_activation.KINDS:
        return int8_activation.npu_lut(op.kind, op.in_q[0], op.out_q)
    if dtype == "int16" and op.kind in int16_activation.KINDS:
        return int16_activation.int16_lut(op.kind, op.in_q[0], op.out_q)
    if dtype == "int16" and op.kind in float_lut16.KINDS:
        return float_lut16.every_code(op.kind, op.in_q[0], op.out_q)
    if op.kind == Op.SIGMOID:
        return logistic_lut(dtype, op.in_q[0], op.out_q)
    if op.kind == Op.TANH:
        return tanh_lut(dtype, op.in_q[0], op.out_q)
    if op.kind == Op.LEAKY_RELU and dtype == "int16":
        # TFLite Micro's int16 kernel, as the NPU's form computes it (compute.leaky_relu)
        return leaky_relu.tflm_lut(dtype, op.in_q[0], op.out_q, op.attrs["alpha"])
    if op.kind == Op.LEAKY_RELU:
        return leaky_relu_lut(dtype, op.in_q[0], op.out_q, op.attrs["alpha"])
    if op.kind == Op.HARD_SWISH:
        return hard_swish_lut(dtype, op.in_q[0], op.out_q)
    if op.kind == Op.ELU:
        return elu_lut(dtype, op.in_q[0], op.out_q)
    if op.kind == Op.RSQRT:
        return rsqrt_lut(dtype, op.in_q[0], op.out_q)
    if op.kind == Op.EXP:
        return exp_lut(dtype, op.in_q[0], op.out_q)
    if op.kind == Op.GELU:
        return gelu_lut(dtype, op.in_q[0], op.out_q, op.attrs["approximate"])
    if op.kind == Op.LOG:
        return log_lut(dtype, op.in_q[0], op.out_q)
    if op.kind == Op.NEG:
        return neg_lut(dtype)
    raise NotImplementedError(f"no lookup table for {op.kind}")


def lower_batch_matmul(op, inputs, pool: ConstPool, name="bmm"):
    """BATCH_MATMUL (TFLite's int8 kernel): per output element the int32 sum over the
    reduced axis of ``(a - zp_a) * (b - zp_b)`` (an operand with its adj flag read
    transposed, batch dimensions broadcast from size 1), rescaled by
    ``quant.batch_matmul_multiplier`` with TFLite Micro's two roundings, plus ``zp_out``,
    clamped."""
    a, b = inputs
    sa, sb = (tuple(int(d) for d in s) for s in op.in_shapes)
    adj_x, adj_y = bool(op.attrs.get("adj_x")), bool(op.attrs.get("adj_y"))
    k = sa[-2] if adj_x else sa[-1]
    zpa, zpb = int(op.in_q[0][1]), int(op.in_q[1][1])
    m, s = batch_matmul_multiplier(op)
    out_zp = int(op.out_q[1])
    out_shape = tuple(int(d) for d in op.out_shape)
    rk = te.reduce_axis((0, k), name="rk")

    def batch(shape, idx):
        """The operand's batch index of output batch index ``idx`` (size-1 broadcast)."""
        lead = idx[len(idx) - (len(shape) - 2):] if len(shape) > 2 else ()
        return tuple(0 if d == 1 else i for d, i in zip(shape[:-2], lead))

    def acc_fn(*idx):
        bi, i, j = idx[:-2], idx[-2], idx[-1]
        av = a[batch(sa, bi) + ((rk, i) if adj_x else (i, rk))]
        bv = b[batch(sb, bi) + ((j, rk) if adj_y else (rk, j))]
        return te.sum((av.astype("int32") - _i32(zpa)) * (bv.astype("int32") - _i32(zpb)),
                      axis=rk)

    acc = te.compute(out_shape, acc_fn, name=f"{name}_acc")

    def out_fn(*idx):
        v = mbqm(acc[idx], m, s) + _i32(out_zp)
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(out_shape, out_fn, name=f"{name}_out")


def _mbqm_wrapping(v, multiplier: int, shift: int):
    """TFLite's MultiplyByQuantizedMultiplier for a left ``shift`` (``shift > 0``) whose
    ``v * (1 << shift)`` leaves int32: the product truncated to int32 as the kernel's int32
    arithmetic wraps it (``compute.prelu``), then the doubling high multiply."""
    wrapped = (v.astype("int64") * _i64(1 << shift)).astype("int32")
    return srdhm(wrapped, _i32(multiplier))


def lower_prelu(op, inputs, pool: ConstPool, name="prelu"):
    """PRELU (TFLite Micro's int8 and int16 kernels, LiteRT's uint8 one): ``v = x - zp_in``;
    ``v >= 0`` rescaled by ``s_in / s_out``, else ``v * (alpha - zp_alpha)`` by ``s_in *
    s_alpha / s_out`` (alpha per channel of the last axis, or its map over the height, width
    and depth of a 4-D input, an axis of 1 broadcast: ``compute.quant.prelu_alpha``;
    ``compute.quant.prelu_multipliers``), plus ``zp_out``, clamped; a branch whose left shift
    wraps int32 for some code wraps as the kernel does (``compute.prelu.wrapping_shifts``)."""
    (x,) = inputs
    in_zp = int(op.in_q[0][1])
    a_scale, a_zp = op.attrs["alpha_q"]
    (m1, s1), (m2, s2) = prelu_multipliers(op.in_q[0][0], a_scale, op.out_q[0])
    mapped = "alpha_shape" in op.attrs
    codes = prelu_alpha(op.attrs) if mapped else np.asarray(op.attrs["alpha"])
    alpha = pool.add(f"{name}_alpha", codes.astype(np.int32) - np.int32(a_zp))
    out_zp = int(op.out_q[1])
    wraps = {w.branch for w in prelu.wrapping_shifts(op.in_dtypes[0], op.in_q[0],
                                                      (a_scale, a_zp), op.out_q, codes)}

    def scaled(v, m, s, branch):
        return _mbqm_wrapping(v, m, s) if branch in wraps else mbqm(v, m, s)

    def alpha_at(idx):
        if not mapped:
            return alpha[idx[-1]]
        return alpha[tuple(i if n > 1 else 0 for i, n in zip(idx[1:], codes.shape))]

    def fn(*idx):
        v = x[idx].astype("int32") - _i32(in_zp)
        pos = scaled(v, m1, s1, "identity")
        neg = scaled(v * alpha_at(idx), m2, s2, "alpha")
        return clamp_cast(tirx.Select(v >= _i32(0), pos, neg) + _i32(out_zp), op.act_min,
                          op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def lower_lut(op, inputs, pool: ConstPool, name="lut", tfl_rounding: bool = False):
    """LOGISTIC, TANH, LEAKY_RELU, HARD_SWISH, ELU: a gather from a table of one entry per input
    code (HARD_SWISH's is TFLite's int16 fixed point on each code, ``compute.hard_swish``;
    an int16 LOGISTIC / TANH has 65536 entries, ``compute.int16_activation``).

    TFLite tabulates LOGISTIC / TANH at prepare time (float32, see ``quant.logistic_lut``), and
    LEAKY_RELU is a function of one input code too, so a 256-entry table computed at compile
    time is exact for all inputs; it is how Ethos-U runs these operators (its LUT).
    ``tfl_rounding`` (an Ethos-U subgraph): an int8 LOGISTIC / TANH takes TFLite Micro's
    fixed-point table (``compute.int8_activation``), as the NPU's LUT does."""
    (x,) = inputs
    table = _lut_of(op, tfl_rounding)
    lo = dtype_range(op.in_dtypes[0])[0]
    t = pool.add(f"{name}_table", table)

    def fn(*idx):
        v = t[x[idx].astype("int32") - _i32(lo)].astype("int32")
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def _mul_hi(a, b):
    """``round(a * b / 2**31)``, ties up, for int32 operands that are never both INT32_MIN:
    :func:`srdhm` without its saturation test, so each operand appears once (the reciprocal's
    Newton-Raphson nests it three deep)."""
    prod = a.astype("int64") * b.astype("int64") + _i64(1 << 30)
    return tirx.shift_right(prod, _i64(31)).astype("int32")


def _times_four_saturated(v):
    """gemmlowp ``SaturatingRoundingMultiplyByPOT<2>`` (``Rescale<2>``) on int32."""
    wide = v.astype("int64") * _i64(4)
    return tirx.min(tirx.max(wide, _i64(INT32_MIN)), _i64(INT32_MAX)).astype("int32")


def _significant_bits(total, lead, name):
    """The significant bits of each positive int32 row sum in ``total`` (32 less its leading
    zeros), counted by comparisons since TIR has no ``clz`` intrinsic; a softmax shifts its
    sum left by 31 less these to normalise it."""
    return te.compute(
        lead,
        lambda *i: sum(
            (tirx.Select(total[i] >= _i32(1 << k), _i32(1), _i32(0)) for k in range(1, 31)),
            _i32(1),
        ),
        name=f"{name}_bits",
    )


def lower_softmax(op, inputs, pool: ConstPool, name="softmax"):
    """SOFTMAX over the last axis as TFLite's reference kernel computes it for 8-bit tensors
    (``reference_ops::Softmax``, the one BUILTIN_REF and TFLite Micro run; the numpy statement is
    ``fixed_point.softmax_8bit``): integer arithmetic only, so the result matches bit for bit on
    every target, OpenCL included.

    * ``e = table[255 - (max - x)]``: the Q0.31 ``exp`` of every distance to the row maximum,
      computed at compile time (``fixed_point.exp_table``, a PrimFunc argument);
    * the Q12.19 row sum of ``e`` rounded by 2**12 (int32: integer adds in any order);
    * per row, the position of the sum's top bit (a count of comparisons: no ``clz`` intrinsic,
      which OpenCL C and LLVM spell differently) and gemmlowp's Newton-Raphson reciprocal of
      the half sum in Q2.29, one TE stage per step so no expression is duplicated;
    * per element, the rounding doubling high multiply by the Q0.31 reciprocal and the rounding
      shift by ``num_bits_over_unit + 23`` (int64: the shift reaches 34; ``+ 15`` for an int16
      output), plus the lowest output code (-128 for int8, 0 for uint8, -32768 for int16; the
      output scale is 1/256, 1/65536 for int16, which ``patterns`` checks)."""
    if op.in_dtypes[0] == "int16":
        return lower_softmax16(op, inputs, pool, name)
    (x,) = inputs
    shape = tuple(op.in_shapes[0])
    lead, depth = shape[:-1], shape[-1]
    exps = fixed_point.exp_table(op.in_q[0][0], op.attrs.get("beta", 1.0))
    table = pool.add(f"{name}_exp", exps)
    lowest = dtype_range(op.out_dtype)[0]
    rmax = te.reduce_axis((0, depth), name="rmax")
    mx = te.compute(
        lead, lambda *i: te.max(x[i + (rmax,)].astype("int32"), axis=rmax), name=f"{name}_max"
    )

    def e_at(i, j):
        return table[_i32(255) - mx[i] + x[i + (j,)].astype("int32")]

    rsum = te.reduce_axis((0, depth), name="rsum")
    total = te.compute(
        lead,
        lambda *i: te.sum(rdbpot(e_at(i, rsum), fixed_point.SUM_INTEGER_BITS), axis=rsum),
        name=f"{name}_sum",
    )
    bits = _significant_bits(total, lead, name)

    def half_at(i):  # the sum with its top bit at bit 30: RoundingHalfSum(shifted - 1, 1)
        return tirx.shift_left(total[i], _i32(31) - bits[i])

    c48, cneg32 = _i32(fixed_point.C48_OVER_17), _i32(fixed_point.CNEG32_OVER_17)
    est = te.compute(
        lead, lambda *i: c48 + _mul_hi(half_at(i), cneg32), name=f"{name}_recip0"
    )
    def newton(prev):
        def step(*i):
            one_minus = _i32(1 << 29) - _mul_hi(half_at(i), prev[i])
            return prev[i] + _times_four_saturated(_mul_hi(prev[i], one_minus))

        return step

    for k in range(1, 4):
        est = te.compute(lead, newton(est), name=f"{name}_recip{k}")

    def out_fn(*i):
        row = i[:-1]
        scale = tirx.min(est[row].astype("int64") * _i64(2), _i64(INT32_MAX))
        prod = tirx.shift_right(scale * e_at(row, i[-1]).astype("int64") + _i64(1 << 30), _i64(31))
        # num_bits_over_unit + 31 - bits(output): + 23 for 8-bit outputs, + 15 for int16
        shift = bits[row].astype("int64") + _i64(3 - fixed_point.output_shift_drop(op.out_dtype))
        half = tirx.shift_left(_i64(1), shift - _i64(1))
        q = tirx.shift_right(prod + half, shift).astype("int32")
        return clamp_cast(q + _i32(lowest), op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, out_fn, name=f"{name}_out")


def _interpolate(table, v):
    """TFLite's ``lut_lookup_with_interpolation`` of int16 values ``v`` (int32 expressions)
    in a 513-entry int32 table: the high nine bits pick the entry, the low seven interpolate
    to the next one, rounding half up."""
    index = tirx.shift_right(v, _i32(7)) + _i32(256)
    offset = tirx.bitwise_and(v, _i32(0x7F))
    base = table[index]
    return base + tirx.shift_right((table[index + _i32(1)] - base) * offset + _i32(64), _i32(7))


def lower_softmax16(op, inputs, pool: ConstPool, name="softmax16",
                    kernel: softmax16.Kernel = softmax16.Kernel.LITERT,
                    exps_stage: bool = True):
    """SOFTMAX of int16 codes to Q0.15 as ``kernel``'s reference kernel computes it
    (``reference_ops::SoftmaxInt16``; the numpy statement is ``softmax16.softmax_int16``):
    LiteRT's, the oracle of the llvm host, or TFLite Micro's, what the Ethos-U's stream
    computes (its tables and input multiplier). Integer arithmetic on two 513-entry tables
    that are PrimFunc arguments (``softmax16.tables``). ``exps_stage``: the exponentials
    computed once into a stage (a host kernel), or recomputed where the sum and the output
    read them (an NPU subgraph, whose schedule holds one element of each stage, as the NPU
    its accumulator).

    * the difference to the row maximum, scaled by the input multiplier so that [-65535, 0]
      codes cover [-10, 0], recentred to int16 and looked up in the exp table;
    * the int32 row sum of the exponentials (``patterns`` bounds the depth so it cannot
      overflow), its significant bits counted by comparisons (no ``clz`` intrinsic);
    * the sum normalised to Q1.16 past its leading zeros, recentred and looked up in the
      1/(1 + x) table;
    * each exponential times that reciprocal, shifted right (rounding half up) by the sum's
      bits less one, clamped to [0, 32767]."""
    (x,) = inputs
    shape = tuple(op.in_shapes[0])
    lead, depth = shape[:-1], shape[-1]
    exp_np, reciprocal_np = softmax16.tables(kernel)
    exp_t = pool.add(f"{name}_exp", exp_np.astype(np.int32))
    reciprocal_t = pool.add(f"{name}_reciprocal_table", reciprocal_np.astype(np.int32))
    multiplier, shift = softmax16.input_multiplier(op.in_q[0][0], op.attrs.get("beta", 1.0),
                                                   kernel)
    rmax = te.reduce_axis((0, depth), name="rmax")
    mx = te.compute(
        lead, lambda *i: te.max(x[i + (rmax,)].astype("int32"), axis=rmax), name=f"{name}_max"
    )

    def exp_fn(*i):
        scaled = mbqm(x[i].astype("int32") - mx[i[:-1]], multiplier, shift)
        return _interpolate(exp_t, tirx.min(tirx.max(scaled + _i32(32767), _i32(-32768)),
                                             _i32(32767)))

    if exps_stage:
        exps = te.compute(shape, exp_fn, name=f"{name}_exps")

        def exp_at(i):
            return exps[i]
    else:
        def exp_at(i):
            return exp_fn(*i)

    rsum = te.reduce_axis((0, depth), name="rsum")
    total = te.compute(lead, lambda *i: te.sum(exp_at(i + (rsum,)), axis=rsum),
                       name=f"{name}_sum")
    bits = _significant_bits(total, lead, name)

    def reciprocal_fn(*i):
        shifted = tirx.shift_right(tirx.shift_left(total[i], _i32(31) - bits[i])
                                   + _i32(1 << 13), _i32(14))
        return _interpolate(reciprocal_t, tirx.min(tirx.max(shifted - _i32(98304),
                                                            _i32(-32768)), _i32(32767)))

    reciprocal = te.compute(lead, reciprocal_fn, name=f"{name}_reciprocal")

    def out_fn(*i):
        row = i[:-1]
        right = bits[row].astype("int64") - _i64(1)
        v = tirx.shift_right(exp_at(i).astype("int64") * reciprocal[row].astype("int64")
                             + tirx.shift_left(_i64(1), right - _i64(1)), right)
        # clamped in int64: TVM folds an int32 clamp of this variable shift away (it bounds
        # the shift's result too tightly), and a row's largest output reaches 32768
        return tirx.min(tirx.max(v, _i64(0)), _i64(32767)).astype(op.out_dtype)

    return te.compute(op.out_shape, out_fn, name=f"{name}_out")


# ----------------------------------------------------------------------- resize
def _resize_axis(o, in_size: int, out_size: int, align_corners: bool, half_pixel: bool):
    """TFLite's integer interpolation coordinate along one axis (10 fractional bits): the
    scaled position and the two source indices (C division truncates toward zero)."""
    if align_corners and out_size > 1:
        s10 = ((1 << 10) * (in_size - 1) + (out_size - 1) // 2) // (out_size - 1)
    else:
        s10 = ((1 << 10) * in_size + out_size // 2) // out_size
    pos = o * _i32(s10) + _i32(s10 // 2 - (1 << 9)) if half_pixel else o * _i32(s10)
    lo = tirx.max(tirx.truncdiv(pos, _i32(1 << 10)), _i32(0))
    hi = tirx.min(tirx.truncdiv(pos + _i32((1 << 10) - 1), _i32(1 << 10)), _i32(in_size - 1))
    return pos, lo, hi


def lower_resize_bilinear(op, inputs, pool: ConstPool, name="resize"):
    """RESIZE_BILINEAR on int8 or int16 codes (``reference_ops::ResizeBilinearInteger``,
    which every x86 resolver runs for int8 and LiteRT's for int16): the four neighbours
    weighted in int64 with 10-bit fractions each, ``(sum + sign * 2^19) / 2^20`` truncated;
    on uint8 codes LiteRT's float32 kernel (:func:`_lower_resize_bilinear_float`)."""
    if resize_bilinear.float_kernel(op.in_dtypes[0]):
        return _lower_resize_bilinear_float(op, inputs, pool, name)
    (x,) = inputs
    _, ih, iw, _ = op.in_shapes[0]
    _, oh, ow, _ = op.out_shape
    ac, hp = op.attrs["align_corners"], op.attrs["half_pixel_centers"]
    one = _i64(1 << 10)

    def fn(n, y, xx, c):
        py, y0, y1 = _resize_axis(y, ih, oh, ac, hp)
        px, x0, x1 = _resize_axis(xx, iw, ow, ac, hp)
        fy = (py - y0 * _i32(1 << 10)).astype("int64")
        fx = (px - x0 * _i32(1 << 10)).astype("int64")

        def at(yy, xxx):
            return x[n, yy, xxx, c].astype("int64")

        acc = (at(y0, x0) * (one - fy) * (one - fx) + at(y1, x0) * fy * (one - fx)
               + at(y0, x1) * (one - fy) * fx + at(y1, x1) * fy * fx)
        rounded = acc + tirx.Select(acc > _i64(0), _i64(1 << 19), _i64(-(1 << 19)))
        v = tirx.truncdiv(rounded, _i64(1 << 20)).astype("int32")
        return clamp_cast(v, op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


def _as_f32(d):
    """The float64 ``d`` rounded to float32's precision (to nearest, ties to even), in integer
    operations on its bits: the host's code generator may reassociate or fuse floating-point
    operations (its fast-math flags), never integer ones, so each float32 step of a kernel
    stays rounded where the kernel rounds it. ``d`` lies in float32's normal range or is 0."""
    bits = tirx.reinterpret("int64", d)
    lsb = tirx.bitwise_and(tirx.shift_right(bits, _i64(29)), _i64(1))
    kept = tirx.shift_right(bits + _i64((1 << 28) - 1) + lsb, _i64(29))
    return tirx.reinterpret("float64", tirx.shift_left(kept, _i64(29)))


def _f32_mul(a, b):
    """The float32 product of two float32 values held in float64: the float64 product is exact
    (24 + 24 bits), then rounded as float32 rounds it."""
    return _as_f32(a * b)


def _f32_add(a, b):
    """The float32 sum of two float32 values held in float64: the float64 sum, rounded again
    to float32's precision, is the float32 sum (53 bits hold twice 24 bits and two more, so
    the second rounding never differs from rounding the exact sum)."""
    return _as_f32(a + b)


def _lower_resize_bilinear_float(op, inputs, pool: ConstPool, name: str):
    """``reference_ops::ResizeBilinear<uint8_t>``: per axis the two source indices and the
    float32 weights the kernel forms (``compute.resize_bilinear.float_taps``, tables made at
    compile time), each code times its two weights, the four products summed in the
    kernel's order, ``0.5`` added and the sum truncated; every step a float32 one, held in
    float64 and rounded by :func:`_as_f32`."""
    (x,) = inputs
    _, ih, iw, _ = op.in_shapes[0]
    _, oh, ow, _ = op.out_shape
    ac, hp = op.attrs["align_corners"], op.attrs["half_pixel_centers"]

    def tables(axis: str, taps: resize_bilinear.AxisTaps):
        lo, hi, w_lo, w_hi = taps
        return (pool.add(f"{name}_{axis}lo", lo), pool.add(f"{name}_{axis}hi", hi),
                pool.add(f"{name}_{axis}wlo", w_lo), pool.add(f"{name}_{axis}whi", w_hi))

    ylo, yhi, wy0, wy1 = tables("y", resize_bilinear.float_taps(ih, oh, ac, hp))
    xlo, xhi, wx0, wx1 = tables("x", resize_bilinear.float_taps(iw, ow, ac, hp))

    def fn(n, y, xx, c):
        def tap(row, col, wy, wx):
            v = x[n, row[y], col[xx], c].astype("float64")
            return _f32_mul(_f32_mul(v, wy[y].astype("float64")), wx[xx].astype("float64"))

        acc = tap(ylo, xlo, wy0, wx0)
        for t in (tap(yhi, xlo, wy1, wx0), tap(ylo, xhi, wy0, wx1), tap(yhi, xhi, wy1, wx1),
                  tirx.const(0.5, "float64")):
            acc = _f32_add(acc, t)
        return clamp_cast(acc.astype("int32"), op.act_min, op.act_max, op.out_dtype)

    return te.compute(op.out_shape, fn, name=f"{name}_out")


LOWERINGS = {
    Op.CONV2D: lower_conv2d,
    Op.DEPTHWISE_CONV2D: lower_conv2d,
    Op.TRANSPOSE_CONV2D: lower_transpose_conv2d,
    Op.FULLY_CONNECTED: lower_fully_connected,
    Op.AVG_POOL2D: lower_avg_pool2d,
    Op.MAX_POOL2D: lower_max_pool2d,
    Op.MEAN: lower_mean,
    Op.REDUCE_MAX: lower_reduce_min_max,
    Op.REDUCE_MIN: lower_reduce_min_max,
    Op.REDUCE_SUM: lower_mean,
    Op.ARG_MAX: lower_arg_max,
    Op.ADD: lower_add,
    Op.MUL: lower_mul,
    Op.SUB: lower_add,
    Op.SQUARED_DIFFERENCE: lower_squared_difference,
    Op.MINIMUM: lower_min_max,
    Op.MAXIMUM: lower_min_max,
    Op.REQUANTIZE: lower_requantize,
    Op.RELU: lower_requantize,
    Op.ABS: lower_abs,
    Op.RESHAPE: lower_reshape,
    Op.CONCATENATE: lower_concatenate,
    Op.SIGMOID: lower_lut,
    Op.TANH: lower_lut,
    Op.LEAKY_RELU: lower_lut,
    Op.HARD_SWISH: lower_lut,
    Op.PRELU: lower_prelu,
    Op.BATCH_MATMUL: lower_batch_matmul,
    Op.ELU: lower_lut,
    Op.RSQRT: lower_lut,
    Op.EXP: lower_lut,
    Op.GELU: lower_lut,
    Op.LOG: lower_lut,
    Op.NEG: lower_lut,
    Op.SOFTMAX: lower_softmax,
    Op.RESIZE_BILINEAR: lower_resize_bilinear,
    Op.PAD: lower_pad,
    Op.MIRROR_PAD: lower_mirror_pad,
    Op.REVERSE: lower_reverse,
    Op.TILE: lower_tile,
    Op.SPLIT: lower_split,
    Op.DEPTH_TO_SPACE: lower_depth_to_space,
    Op.RESIZE_NEAREST: lower_resize_nearest,
    Op.TRANSPOSE: lower_transpose,
}


#: operators only an NPU takes, whole, that its emulator computes: no host target claims them
#: (the hosts' pattern table is ``LOWERINGS``)
NPU_ONLY_LOWERINGS = {
    Op.LSTM: lower_lstm,
}


def lower_qop(op, inputs, pool: ConstPool, name: str, vnni: bool = False, avx2: bool = False,
              tfl_rounding: bool = False):
    """``op`` in TE. ``vnni``: the kernels are for an llvm host with AVX-512 VNNI (the conv
    and fully connected accumulators that can take ``x86_dot``'s form get it); ``avx2``: for
    one with AVX2 and no VNNI (``x86_avx2``'s form). ``tfl_rounding``: TFLite Micro's
    arithmetic where it differs from LiteRT's reference kernels, as the Ethos-U's stream
    computes it (an Ethos-U subgraph): FULLY_CONNECTED rounds twice (the NPU's TFL
    rounding), not once, an int16 SOFTMAX takes TFLite Micro's tables and multiplier, and an
    int8 LOGISTIC / TANH TFLite Micro's fixed-point table."""
    if op.kind in NPU_ONLY_LOWERINGS:
        return NPU_ONLY_LOWERINGS[op.kind](op, inputs, pool, name=name)
    try:
        fn = LOWERINGS[op.kind]
    except KeyError:
        raise NotImplementedError(f"no integer lowering for {op.kind}") from None
    if tfl_rounding and fn is lower_fully_connected:
        return fn(op, inputs, pool, name=name, tfl_rounding=True)
    if tfl_rounding and fn is lower_lut:
        return fn(op, inputs, pool, name=name, tfl_rounding=True)
    if tfl_rounding and fn is lower_softmax and op.in_dtypes[0] == "int16":
        return lower_softmax16(op, inputs, pool, name=name,
                               kernel=softmax16.Kernel.TFLITE_MICRO, exps_stage=False)
    if avx2 and fn in (lower_conv2d, lower_fully_connected):
        return fn(op, inputs, pool, name=name, avx2=True)
    if vnni and fn in (lower_conv2d, lower_fully_connected, lower_add):
        return fn(op, inputs, pool, name=name, vnni=True)
    return fn(op, inputs, pool, name=name)
