"""Quantized-operator patterns over the QDQ Relax that the importers produce, and their reading.

TFLite int8 operators arrive as regions such as::

    dequantize(x) -> conv2d(., dequantize(W)) -> add(., dequantize(bias)) -> quantize -> clip

Each region is matched as one quantized operator (a :class:`QOp`): its int8 inputs, constant
weights and bias, quantization parameters and fused activation bounds. The same pattern
variants serve every backend (the NPUs and the exact host kernels); backends differ only in the
check they apply to a QOp. ``read_qop`` re-reads a QOp from a composite function, so the code
generators see exactly what the checks saw.
"""
from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import numpy as np
from tvm import relax
from tvm.relax.dpl.pattern import is_call_dps_packed, is_const, is_op, is_tuple, wildcard

from ethos_arch.ops import Op, parse_op
from planner.parts import DEPTH_REDUCTION_AXES
from tvm_ethos.compute import (
    concat_requant,
    float_lut16,
    int16_activation,
    int16x8,
    mirror_pad,
    resize_bilinear,
    softmax16,
)
from tvm_ethos.compute.hard_swish import refusal
from tvm_ethos.compute.lstm import PACKED_NAME as LSTM_PACKED_NAME
from tvm_ethos.compute.lstm import LstmQuantization
from tvm_ethos.compute.quant import dtype_range, f32, quantize_multipliers, quantize_value
from tvm_ethos.qop import QOp

# kinds whose exact kernel is TFLite's 8-bit table-based one (tvm_ethos/compute/te_ops.py)
TABLE_KINDS = (Op.SIGMOID, Op.TANH, Op.LEAKY_RELU, Op.SOFTMAX, Op.ELU)


# ------------------------------------------------------------------ pattern construction
def _dq(x):
    return is_op("relax.dequantize")(x, is_const(), is_const())


def _q(x):
    return is_op("relax.quantize")(x, is_const(), is_const())


def _tail(pre, ann, with_clip: bool):
    q = _q(pre)
    ann["q"] = q
    if with_clip:
        clip = is_op("relax.clip")(q, wildcard(), wildcard())
        ann["clip"] = clip
        return clip
    return q


def _wide_dq(ann):
    """An int64 bias as the importer dequantizes it (``astype`` to float32 times the scale:
    TVM's dequantize takes no int64; ``tflite_converter``)."""
    values, scale = is_const(), is_const()
    ann.update(bias_wide=values, bias_wide_scale=scale)
    return is_op("relax.multiply")(is_op("relax.astype")(values), scale)


def _bias_tail(core, ann, bias: str | None, with_clip: bool):
    """[``add(core, dequantize(bias))``, ``bias`` "dq"; or the int64 form, "wide"] then the
    requantization tail; returns the root."""
    pre = core
    if bias:
        b = _dq(is_const()) if bias == "dq" else _wide_dq(ann)
        pre = is_op("relax.add")(core, b)
        ann.update(bias_dq=b, bias_add=pre)
    root = _tail(pre, ann, with_clip)
    ann["root"] = root
    return root


def _maybe_clip(pre, ann, with_clip: bool):
    """An integer-domain operator with an optional fused ``clip``; returns the root."""
    root = is_op("relax.clip")(pre, wildcard(), wildcard()) if with_clip else pre
    if with_clip:
        ann["clip"] = root
    ann["root"] = root
    return root


#: a weighted operator's bias: dequantized (int32), the int64 form (16x8), or none
_BIAS_FORMS = ("dq", "wide", None)


def _conv_variants():
    out = []
    for reshape_w, bias, clip in itertools.product((False, True), _BIAS_FORMS, (True, False)):
        ann = {}
        x = wildcard()
        dqx = _dq(x)
        w = is_const()
        dqw = _dq(w)
        wt = is_op("relax.reshape")(dqw, wildcard()) if reshape_w else dqw
        conv = is_op("relax.nn.conv2d")(dqx, wt)
        ann.update(x0=x, dq0=dqx, w=w, dqw=dqw, op=conv)
        out.append((Op.CONV2D, _bias_tail(conv, ann, bias, clip), ann))
    return out


def _transpose_conv_variants():
    """TRANSPOSE_CONV as the importer gives it: ``conv2d_transpose`` of the dequantized input
    and IOHW weights (output channels on axis 1), then the conv's bias and tail."""
    out = []
    for bias, clip in itertools.product(_BIAS_FORMS, (True, False)):
        ann = {}
        x, w = wildcard(), is_const()
        dqx, dqw = _dq(x), _dq(w)
        core = is_op("relax.nn.conv2d_transpose")(dqx, dqw)
        ann.update(x0=x, dq0=dqx, w=w, dqw=dqw, op=core)
        out.append((Op.TRANSPOSE_CONV2D, _bias_tail(core, ann, bias, clip), ann))
    return out


def _fc_variants():
    out = []
    for bias, clip in itertools.product(_BIAS_FORMS, (True, False)):
        ann = {}
        x = wildcard()
        dqx = _dq(x)
        w = is_const()
        perm = is_op("relax.permute_dims")(w)
        dqw = _dq(perm)
        mm = is_op("relax.matmul")(dqx, dqw)
        ann.update(x0=x, dq0=dqx, w=w, wperm=perm, dqw=dqw, op=mm)
        out.append((Op.FULLY_CONNECTED, _bias_tail(mm, ann, bias, clip), ann))
    return out


def _pool_variants():
    out = []
    for clip in (True, False):
        ann = {}
        x = wildcard()
        cin = is_op("relax.astype")(x)
        pool = is_op("relax.nn.avg_pool2d")(cin)
        cout = is_op("relax.astype")(pool)
        ann.update(x0=x, cast_in=cin, op=pool, cast_out=cout)
        out.append((Op.AVG_POOL2D, _maybe_clip(cout, ann, clip), ann))
    for clip in (True, False):
        ann = {}
        x = wildcard()
        pool = is_op("relax.nn.max_pool2d")(x)
        ann.update(x0=x, op=pool)
        out.append((Op.MAX_POOL2D, _maybe_clip(pool, ann, clip), ann))
    return out


def _unary_qdq_variants(kind, op_name, prescale: bool = False, extra_args: int = 0):
    """``dequantize -> op -> quantize [-> clip]``; with ``prescale`` also the variant with a
    constant multiply before the op (SOFTMAX's beta, see
    ``tvm_ethos/frontend/tflite_import.py``); ``extra_args`` non-tensor arguments of the op
    (resize2d's size)."""
    out = []
    for scaled, clip in itertools.product((True, False) if prescale else (False,), (True, False)):
        ann = {}
        x = wildcard()
        dqx = _dq(x)
        arg = dqx
        if scaled:
            arg = is_op("relax.multiply")(dqx, is_const())
            ann["prescale"] = arg
        core = is_op(op_name)(arg, *[wildcard() for _ in range(extra_args)])
        ann.update(x0=x, dq0=dqx, op=core)
        root = _tail(core, ann, clip)
        ann["root"] = root
        out.append((kind, root, ann))
    return out


def _binary_variants():
    out = []
    for kind, op_name in ((Op.ADD, "relax.add"), (Op.MUL, "relax.multiply"),
                          (Op.SUB, "relax.subtract"), (Op.MINIMUM, "relax.minimum"),
                          (Op.MAXIMUM, "relax.maximum")):
        for act, clip in itertools.product((None, "relax.nn.relu", "relax.clip"), (True, False)):
            ann = {}
            a, b = wildcard(), wildcard()
            dqa, dqb = _dq(a), _dq(b)
            core = is_op(op_name)(dqa, dqb)
            ann.update(x0=a, x1=b, dq0=dqa, dq1=dqb, op=core)
            pre = core
            if act == "relax.nn.relu":
                pre = is_op(act)(core)
                ann["act"] = pre
            elif act == "relax.clip":
                pre = is_op(act)(core, wildcard(), wildcard())
                ann["act"] = pre
            root = _tail(pre, ann, clip)
            ann["root"] = root
            out.append((kind, root, ann))
    return out


def _relu_variants():
    """RELU (``relax.nn.relu``), RELU6, RELU_N1_TO_1 and RELU_0_TO_1 (``relax.clip``) between a
    dequantize and a quantize: a requantization whose clamp is the activation's (``read_qop``'s
    "act")."""
    out = []
    for act, clip in itertools.product(("relax.nn.relu", "relax.clip"), (True, False)):
        ann = {}
        x = wildcard()
        dqx = _dq(x)
        core = is_op(act)(dqx) if act == "relax.nn.relu" else is_op(act)(dqx, wildcard(),
                                                                           wildcard())
        ann.update(x0=x, dq0=dqx, op=core, act=core)
        root = _tail(core, ann, clip)
        ann["root"] = root
        out.append((Op.RELU, root, ann))
    return out


def _wide_q(pre, ann):
    """A quantize into int32 as the importer writes it (``astype(round(pre / scale) +
    zero_point)``: TVM's quantize takes no int32; ``tflite_converter``)."""
    scale, zero = is_const(), is_const()
    ann.update(wide_q_scale=scale, wide_q_zero=zero)
    scaled = is_op("relax.round")(is_op("relax.divide")(pre, scale))
    return is_op("relax.astype")(is_op("relax.add")(scaled, zero))


def _requantize_variants():
    """QUANTIZE between integer types: a dequantize then a quantize (and the converter's
    clip), or into int32 the wide quantize (TFLite's int32 tensors take no fused clamp)."""
    out = []
    for clip in (True, False):
        ann = {}
        x = wildcard()
        dqx = _dq(x)
        ann.update(x0=x, dq0=dqx, op=dqx)
        root = _tail(dqx, ann, clip)
        ann["root"] = root
        out.append((Op.REQUANTIZE, root, ann))
    ann = {}
    x = wildcard()
    dqx = _dq(x)
    ann.update(x0=x, dq0=dqx, op=dqx)
    ann["root"] = _wide_q(dqx, ann)
    out.append((Op.REQUANTIZE, ann["root"], ann))
    return out


def _reshape_variants():
    ann = {}
    x = wildcard()
    r = is_op("relax.reshape")(x, wildcard())
    ann.update(x0=x, op=r, root=r)
    return [(Op.RESHAPE, r, ann)]


def _concat_variants():
    ann = {}
    c = is_op("relax.concat")(wildcard())
    ann.update(op=c, root=c)
    return [(Op.CONCATENATE, c, ann)]


def _concat_qdq_variants(max_inputs: int = 8):
    """The importer's quantized CONCATENATION: ``quantize(concat((dequantize(x_i), ...)))``,
    one variant per number of inputs, each first with the ``clip`` TVM's converter writes
    for a fused activation (the operator's own clamp, as a convolution's), then without."""
    out = []
    for n, clip in itertools.product(range(max_inputs, 1, -1), (True, False)):
        ann = {}
        xs = [wildcard() for _ in range(n)]
        dqs = [_dq(x) for x in xs]
        c = is_op("relax.concat")(is_tuple(dqs))
        for i, (x, dq) in enumerate(zip(xs, dqs)):
            ann[f"x{i}"], ann[f"dq{i}"] = x, dq
        ann["op"] = c
        ann["root"] = _tail(c, ann, clip)
        out.append((Op.CONCATENATE, ann["root"], ann))
    return out


def _hard_swish_variants():
    """TVM's HARD_SWISH: ``x * clip(x + 3, 0, 6) / 6`` between a dequantize and a quantize
    (the same dequantized ``x`` in both factors; ``read_qop`` checks the constants)."""
    out = []
    for clip in (True, False):
        ann = {}
        x = wildcard()
        dqx = _dq(x)
        plus = is_op("relax.add")(dqx, is_const())
        relu6 = is_op("relax.clip")(plus, wildcard(), wildcard())
        times = is_op("relax.multiply")(dqx, relu6)
        core = is_op("relax.divide")(times, is_const())
        ann.update(x0=x, dq0=dqx, plus=plus, relu6=relu6, op=core)
        ann["root"] = _tail(core, ann, clip)
        out.append((Op.HARD_SWISH, ann["root"], ann))
    return out


def _elu_variants():
    """The converter's ELU: ``-1 * relu(1 - exp(x)) + relu(x)`` between a dequantize and a
    quantize (the same dequantized ``x`` in both terms; ``read_qop`` checks the constants)."""
    out = []
    for clip in (True, False):
        ann = {}
        x = wildcard()
        dqx = _dq(x)
        one_minus = is_op("relax.subtract")(is_const(), is_op("relax.exp")(dqx))
        neg = is_op("relax.multiply")(is_const(), is_op("relax.nn.relu")(one_minus))
        core = is_op("relax.add")(neg, is_op("relax.nn.relu")(dqx))
        ann.update(x0=x, dq0=dqx, one_minus=one_minus, neg=neg, op=core)
        ann["root"] = _tail(core, ann, clip)
        out.append((Op.ELU, ann["root"], ann))
    return out


def _prelu_variants():
    """The converter's PRELU: ``prelu(dequantize(x), dequantize(alpha))`` between a dequantize
    and a quantize, alpha a constant of one code per channel; or ``where(dq >= 0, dq, dq *
    dequantize(alpha))`` of one dequantized ``x``, alpha a constant map over the height, width
    and depth (``read_qop`` checks the zero)."""
    out = []
    for where in (False, True):
        for clip in (True, False):
            ann = {}
            x = wildcard()
            dqx = _dq(x)
            alpha = is_const()
            dqa = _dq(alpha)
            if where:
                ge = is_op("relax.greater_equal")(dqx, is_const())
                core = is_op("relax.where")(ge, dqx, is_op("relax.multiply")(dqx, dqa))
                ann["ge"] = ge
            else:
                core = is_op("relax.nn.prelu")(dqx, dqa)
            ann.update(x0=x, dq0=dqx, alpha=alpha, dqa=dqa, op=core)
            ann["root"] = _tail(core, ann, clip)
            out.append((Op.PRELU, ann["root"], ann))
    return out


def _squared_difference_variants():
    """SQUARED_DIFFERENCE as TVM's converter writes it: ``quantize(d * d)`` with ``d =
    subtract(dequantize(a), dequantize(b))``."""
    out = []
    for clip in (True, False):
        ann = {}
        a, b = wildcard(), wildcard()
        dqa, dqb = _dq(a), _dq(b)
        diff = is_op("relax.subtract")(dqa, dqb)
        core = is_op("relax.multiply")(diff, diff)
        ann.update(x0=a, x1=b, dq0=dqa, dq1=dqb, diff=diff, op=core)
        ann["root"] = _tail(core, ann, clip)
        out.append((Op.SQUARED_DIFFERENCE, ann["root"], ann))
    return out


def _batch_matmul_variants():
    """The converter's BATCH_MATMUL: ``matmul`` of two dequantized operands, each read
    through ``permute_dims`` (its adj flag) or not, between a dequantize and a quantize.
    An operand may be a constant (the converter dequantizes its codes, then permutes), but
    never a dequantized constant's ``permute_dims`` inside the dequantize: that is
    FULLY_CONNECTED's form, whose verdict (and reasons) must stand."""
    def operand():
        return ~is_op("relax.permute_dims")(is_const())

    out = []
    for adj_x, adj_y, clip in itertools.product((False, True), (False, True), (True, False)):
        ann = {}
        a, b = operand(), operand()
        dqa, dqb = _dq(a), _dq(b)
        lhs = is_op("relax.permute_dims")(dqa) if adj_x else dqa
        rhs = is_op("relax.permute_dims")(dqb) if adj_y else dqb
        core = is_op("relax.matmul")(lhs, rhs)
        ann.update(x0=a, x1=b, dq0=dqa, dq1=dqb, op=core)
        if adj_x:
            ann["perm_x"] = lhs
        if adj_y:
            ann["perm_y"] = rhs
        ann["root"] = _tail(core, ann, clip)
        out.append((Op.BATCH_MATMUL, ann["root"], ann))
    return out


def _transpose_variants():
    """TRANSPOSE on the codes: ``permute_dims`` of anything but a constant (a FULLY_CONNECTED's
    weights, which stay constant-folding material when the layer is refused). One of a
    reshape may be DEPTH_TO_SPACE's, whose verdict must stand: the partition declines it
    unless the source says the chain is the model's own (``partition_chains``)."""
    ann = {}
    x = ~is_const()
    core = is_op("relax.permute_dims")(x)
    ann.update(x0=x, op=core, root=core)
    return [(Op.TRANSPOSE, core, ann)]


def _depth_to_space_variants():
    """TVM's DEPTH_TO_SPACE: ``reshape -> permute_dims -> reshape`` on the codes."""
    ann = {}
    x = wildcard()
    r1 = is_op("relax.reshape")(x, wildcard())
    perm = is_op("relax.permute_dims")(r1)
    r2 = is_op("relax.reshape")(perm, wildcard())
    ann.update(x0=x, split_dims=r1, op=perm, root=r2)
    return [(Op.DEPTH_TO_SPACE, r2, ann)]


class ChainForm(NamedTuple):
    """A ``reshape -> permute_dims -> reshape`` chain's shapes and permutation: what a Relax
    chain and the TFLite operators it came from have in common."""

    in_shape: tuple[int, ...]
    mid_shape: tuple[int, ...]
    perm: tuple[int, ...]
    out_shape: tuple[int, ...]


class SixDChain(NamedTuple):
    """One ``reshape -> permute_dims -> reshape`` chain through a 6-D tensor in ``main``: its
    form and the names of its bindings (a reshape TVM's converter left unbound has none)."""

    form: ChainForm
    reshapes: frozenset[str]
    transpose: str | None


def six_d_chains(func: relax.Function) -> tuple[SixDChain, ...]:
    """Every ``reshape -> permute_dims -> reshape`` chain through a 6-D tensor of ``func``
    (:func:`_depth_to_space_variants`' form), in binding order: how TVM's importer writes
    DEPTH_TO_SPACE, and a TFLite RESHAPE -> TRANSPOSE -> RESHAPE of that form reads the
    same; ``partition_chains`` tells them apart."""
    ((_, pat, ann),) = _depth_to_space_variants()
    var2val = {b.var: b.value for block in func.body.blocks for b in block.bindings}
    val2var = {v: k for k, v in var2val.items()}
    out = []
    for value in var2val.values():
        if not (isinstance(value, relax.Call)
                and getattr(value.op, "name", "") == "relax.reshape"):
            continue
        m = pat.extract_matched_expr(value, var2val)
        if m is None or len(_shape(m[ann["split_dims"]])) != 6:
            continue
        axes = m[ann["op"]].attrs.axes
        form = ChainForm(tuple(_shape(m[ann["x0"]])), tuple(_shape(m[ann["split_dims"]])),
                         tuple(int(a) for a in axes) if axes is not None else (5, 4, 3, 2, 1, 0),
                         tuple(_shape(m[ann["root"]])))
        transpose = val2var.get(m[ann["op"]])
        out.append(SixDChain(form, frozenset(val2var[m[ann[k]]].name
                                             for k in ("split_dims", "root")
                                             if m[ann[k]] in val2var),
                             transpose.name if transpose is not None else None))
    return tuple(out)


def six_d_chain_reshapes(func: relax.Function) -> frozenset[str]:
    """Names of the bindings of ``func`` that are a reshape of a chain through a 6-D tensor
    (:func:`six_d_chains`). Such a reshape belongs to its chain, which is taken or left
    whole (its permutation is DEPTH_TO_SPACE's, :func:`_transpose_variants`) unless the
    chain is known to be the model's own: a 6-D reshape outside one is a model's own."""
    return frozenset(name for chain in six_d_chains(func) for name in chain.reshapes)


def _arg_max_variants():
    """The converter's quantized ARG_MAX: ``argmax`` of the codes, cast to int32 (an int64
    output is the ``argmax`` itself)."""
    out = []
    for cast in (True, False):
        ann = {}
        x = wildcard()
        core = is_op("relax.argmax")(x)
        root = is_op("relax.astype")(core) if cast else core
        ann.update(x0=x, op=core, root=root)
        out.append((Op.ARG_MAX, root, ann))
    return out


def _lstm_variants():
    """The converter's int8 LSTM (``tflite_converter.convert_quantized_lstm``): one
    ``call_dps_packed`` of the sequence, the gates' weights and biases and the quantization
    (constants)."""
    x, w, b, params = wildcard(), is_const(), is_const(), is_const()
    root = is_call_dps_packed(LSTM_PACKED_NAME, [x, w, b, params])
    return [(Op.LSTM, root, {"x0": x, "weights": w, "bias": b, "params": params,
                             "op": root, "root": root})]


def _read_lstm(ann: dict) -> QOp:
    """The LSTM's QOp: its sequence, the (4, cells, features + cells) weights, the (4, cells)
    biases and ``attrs["quantization"]`` (``compute.lstm.LstmQuantization``)."""
    root, x = ann["root"], ann["x0"]
    q = LstmQuantization.from_params(_const_np(ann["params"]))
    op = QOp(kind=Op.LSTM, inputs=[x], in_shapes=[_shape(x)], in_dtypes=[_dtype(x)],
             out_shape=_shape(root), out_dtype=_dtype(root), in_q=[q.input_q],
             out_q=q.hidden_q, weights=_const_np(ann["weights"]), w_dtype="int8",
             bias=_const_np(ann["bias"]), attrs={"quantization": q})
    return op


def _integer_variant(kind, op_name, extra_args: int, attrs: dict | None = None):
    """A data-movement operator on the codes (no QDQ): ``op(x, *extra_args)`` [with ``attrs``:
    the float resize inside a bilinear QDQ region is no nearest resize]."""
    ann = {}
    x = wildcard()
    core = is_op(op_name)(x, *[wildcard() for _ in range(extra_args)])
    if attrs:
        core = core.has_attr(attrs)
    ann.update(x0=x, op=core, root=core)
    return [(kind, core, ann)]


def pattern_variants() -> list[tuple[Op, Any, dict]]:
    """All (kind, pattern, annotations), most specific first."""
    return (
        _conv_variants()
        + _transpose_conv_variants()
        + _fc_variants()
        + _batch_matmul_variants()
        + _binary_variants()
        + _pool_variants()
        + _unary_qdq_variants(Op.MEAN, "relax.mean")
        + _unary_qdq_variants(Op.REDUCE_MAX, "relax.max")
        + _unary_qdq_variants(Op.REDUCE_MIN, "relax.min")
        + _unary_qdq_variants(Op.REDUCE_SUM, "relax.sum")
        + _arg_max_variants()
        + _lstm_variants()
        + _unary_qdq_variants(Op.SOFTMAX, "relax.nn.softmax", prescale=True)
        + _unary_qdq_variants(Op.SIGMOID, "relax.sigmoid")
        + _unary_qdq_variants(Op.TANH, "relax.tanh")
        + _unary_qdq_variants(Op.LEAKY_RELU, "relax.nn.leakyrelu")
        + _hard_swish_variants()
        + _prelu_variants()
        + _squared_difference_variants()
        + _elu_variants()
        + _unary_qdq_variants(Op.RSQRT, "relax.rsqrt")
        + _unary_qdq_variants(Op.EXP, "relax.exp")
        + _unary_qdq_variants(Op.GELU, "relax.nn.gelu")
        + _unary_qdq_variants(Op.GELU, "relax.nn.gelu_tanh")
        + _unary_qdq_variants(Op.LOG, "relax.log")
        + _unary_qdq_variants(Op.RESIZE_BILINEAR, "relax.image.resize2d", extra_args=1)
        + _unary_qdq_variants(Op.PAD, "relax.nn.pad")
        + _relu_variants()
        + _unary_qdq_variants(Op.ABS, "relax.abs")
        + _requantize_variants()
        + _depth_to_space_variants()
        + _transpose_variants()
        + _integer_variant(Op.MIRROR_PAD, "relax.nn.pad", extra_args=0,
                           attrs={"pad_mode": "reflect"})
        + _integer_variant(Op.MIRROR_PAD, "relax.nn.pad", extra_args=0,
                           attrs={"pad_mode": "symmetric"})
        + _integer_variant(Op.REVERSE, "relax.flip", extra_args=0)
        + _integer_variant(Op.TILE, "relax.tile", extra_args=0)
        + _integer_variant(Op.NEG, "relax.negative", extra_args=0)
        + _integer_variant(Op.SPLIT, "relax.strided_slice", extra_args=3)
        + _integer_variant(Op.SPLIT, "relax.strided_slice", extra_args=4)  # with strides
        + _integer_variant(Op.RESIZE_NEAREST, "relax.image.resize2d", extra_args=1,
                           attrs={"method": "nearest_neighbor"})
        + _reshape_variants()
        + _concat_variants()
        + _concat_qdq_variants()  # after the code copy: its reasons are the ones reported
    )


# ------------------------------------------------------------------ reading a QOp
def _const_np(expr) -> np.ndarray:
    return expr.value.numpy()


def _ty(expr):
    return expr.ty


def _shape(expr) -> tuple:
    ty = _ty(expr)
    try:
        return tuple(int(v) for v in ty.shape.values)
    except Exception:  # symbolic shapes
        return tuple(ty.shape.values) if ty.shape is not None else ()


def _dtype(expr) -> str:
    return str(_ty(expr).dtype)


def _qparams_of_dq(call) -> tuple[np.ndarray, np.ndarray, int]:
    scale = np.asarray(_const_np(call.args[1]), dtype=np.float32).ravel()
    zp = np.asarray(_const_np(call.args[2])).astype(np.int64).ravel()
    return scale, zp, int(call.attrs.axis)


def _clip_bounds(call) -> tuple[float, float]:
    lo, hi = call.args[1], call.args[2]
    get = lambda v: float(v.value) if hasattr(v, "value") else float(v)  # noqa: E731
    return get(lo), get(hi)


def read_qop(kind: Op, ann: dict) -> QOp:
    """Build a QOp from the matched expressions of one pattern variant."""
    if kind == Op.LSTM:
        return _read_lstm(ann)
    root = ann["root"]
    out_shape, out_dtype = _shape(root), _dtype(root)
    op = QOp(
        kind=kind, inputs=[], in_shapes=[], in_dtypes=[], out_shape=out_shape, out_dtype=out_dtype
    )
    problems = op.problems

    def add_input(expr, dq=None):
        op.inputs.append(expr)
        op.in_shapes.append(_shape(expr))
        op.in_dtypes.append(_dtype(expr))
        if dq is not None:
            s, z, _ = _qparams_of_dq(dq)
            if s.size != 1 or z.size != 1:
                problems.append("per-channel quantization of an activation input")
            op.in_q.append((float(s[0]), int(z[0])))

    if kind == Op.CONCATENATE and "dq0" in ann:
        n = sum(1 for k in ann if k.startswith("dq"))
        for i in range(n):
            add_input(ann[f"x{i}"], ann[f"dq{i}"])
        op.attrs["axis"] = int(ann["op"].attrs.axis)
    elif kind == Op.CONCATENATE:
        tup = ann["op"].args[0]
        fields = getattr(tup, "fields", None)
        if fields is None:
            problems.append("concatenate of a non-literal tuple")
            fields = []
        for f in fields:
            add_input(f)
        op.attrs["axis"] = int(ann["op"].attrs.axis)
    else:
        add_input(ann["x0"], ann.get("dq0"))
        if "x1" in ann:
            add_input(ann["x1"], ann.get("dq1"))

    if "q" in ann:
        s, z, _ = _qparams_of_dq(ann["q"])
        if s.size != 1:
            problems.append("per-channel quantization of the output")
        op.out_q = (float(s[0]), int(z[0]))
    if "wide_q_scale" in ann:
        op.out_q = (float(np.float32(_const_np(ann["wide_q_scale"]))),
                    int(_const_np(ann["wide_q_zero"])))
    qmin, qmax = dtype_range(out_dtype) if out_dtype in ("int8", "uint8", "int16") else (-128, 127)
    if "wide_q_scale" in ann:
        qmin, qmax = int(np.iinfo(np.int32).min), int(np.iinfo(np.int32).max)
    op.act_min, op.act_max = qmin, qmax
    if "clip" in ann:
        lo, hi = _clip_bounds(ann["clip"])
        op.act_min = max(op.act_min, int(np.ceil(lo)))
        op.act_max = min(op.act_max, int(np.floor(hi)))
    if "act" in ann and op.out_q is not None:
        act = ann["act"]
        if act.op.name == "relax.nn.relu":
            op.float_activation = "relu"
            op.act_min = max(op.act_min, quantize_value(0.0, *op.out_q))
        else:
            lo, hi = _clip_bounds(act)
            op.float_activation = f"clip({lo:g},{hi:g})"
            op.act_min = max(op.act_min, quantize_value(lo, *op.out_q))
            op.act_max = min(op.act_max, quantize_value(hi, *op.out_q))

    core = ann["op"]
    if kind == Op.CONV2D:
        a = core.attrs
        op.attrs.update(
            strides=tuple(int(v) for v in a.strides),
            padding=tuple(int(v) for v in a.padding),
            dilation=tuple(int(v) for v in a.dilation),
            groups=int(a.groups),
            data_layout=str(a.data_layout),
            kernel_layout=str(a.kernel_layout),
            out_layout=str(a.out_layout),
        )
        w = _const_np(ann["w"])
        ws, wz, waxis = _qparams_of_dq(ann["dqw"])
        op.w_dtype = str(w.dtype)
        layout = op.attrs["kernel_layout"]
        if "wreshape" in ann or w.ndim != 4 or _shape(ann["op"].args[1]) != w.shape:
            # depthwise: TFLite (1, KH, KW, C*M) reshaped to (KH, KW, C*M, 1)
            new_shape = _shape(ann["op"].args[1])
            if int(np.prod(new_shape)) != w.size:
                problems.append("weight reshape that changes the element count")
            w = w.reshape(new_shape)
        if layout == "HWIO":
            pass
        elif layout == "HWOI":
            w = w.transpose(0, 1, 3, 2)
        elif layout == "OHWI":
            w = w.transpose(1, 2, 3, 0)
        else:
            problems.append(f"kernel layout {layout}")
        op.weights = np.ascontiguousarray(w)
        op.w_scale, op.w_zp = ws, wz
        cin = op.in_shapes[0][3] if len(op.in_shapes[0]) == 4 else None
        groups = op.attrs["groups"]
        if groups > 1 and cin is not None and groups == cin and op.weights.shape[2] == 1:
            op.kind = Op.DEPTHWISE_CONV2D
            op.attrs["depth_multiplier"] = op.weights.shape[3] // groups
        elif groups > 1:
            problems.append(f"grouped convolution (groups={groups}) that is not depthwise")
    elif kind == Op.TRANSPOSE_CONV2D:
        _read_transpose_conv(op, ann, problems)
    elif kind == Op.FULLY_CONNECTED:
        w = _const_np(ann["w"])  # (N, K) as TFLite stores it
        perm = ann["wperm"]
        axes = [int(v) for v in perm.attrs.axes] if perm.attrs.axes is not None else [1, 0]
        if w.ndim != 2 or axes != [1, 0]:
            problems.append("fully connected weights that are not a transposed 2-D matrix")
        ws, wz, _ = _qparams_of_dq(ann["dqw"])
        op.weights, op.w_scale, op.w_zp, op.w_dtype = np.ascontiguousarray(w), ws, wz, str(w.dtype)
    elif kind in (Op.AVG_POOL2D, Op.MAX_POOL2D):
        a = core.attrs
        op.attrs.update(
            pool_size=tuple(int(v) for v in a.pool_size),
            strides=tuple(int(v) for v in a.strides),
            padding=tuple(int(v) for v in a.padding),
            dilation=tuple(int(v) for v in a.dilation),
            layout=str(a.layout),
            ceil_mode=bool(a.ceil_mode),
        )
        if kind == Op.AVG_POOL2D:
            op.attrs["count_include_pad"] = bool(a.count_include_pad)
            if _dtype(ann["cast_in"]) != "int32":
                problems.append("average pool not accumulated in int32")
    elif kind == Op.MEAN:
        axes = core.attrs.axis
        rank = len(op.in_shapes[0])
        # negative axes counted from the end, as TFLite resolves them (and _read_reduce)
        op.attrs["axis"] = tuple(int(v) % rank if rank else int(v) for v in axes) \
            if axes is not None else None
        op.attrs["keepdims"] = bool(core.attrs.keepdims)
    elif kind in REDUCE_KINDS:
        _read_reduce(op, core, problems)
    elif kind == Op.ARG_MAX:
        _read_arg_max(op, core, problems)
    elif kind == Op.SOFTMAX:
        rank = len(op.in_shapes[0])
        op.attrs["axis"] = int(core.attrs.axis)
        if rank == 0 or op.attrs["axis"] % rank != rank - 1:
            problems.append(
                f"softmax over axis {op.attrs['axis']} of a {rank}-D tensor; the integer kernel "
                "normalises the last axis"
            )
        beta = 1.0
        if "prescale" in ann:
            b = np.asarray(_const_np(ann["prescale"].args[1]), dtype=np.float32)
            if b.size != 1:
                problems.append("softmax input scaled by a non-scalar constant")
            beta = float(b.ravel()[0]) if b.size else 1.0
        op.attrs["beta"] = beta
        lowest = {"int8": -128, "int16": -32768}.get(out_dtype, 0)
        steps = 65536 if out_dtype == "int16" else 256
        if op.in_dtypes[0] == "int16":
            problems.extend(softmax16_refusals(op))
        elif op.out_q is not None and (abs(op.out_q[0] * steps - 1) > 1e-3
                                       or op.out_q[1] != lowest):
            problems.append(
                f"softmax output quantization (scale {op.out_q[0]:g}, zero point {op.out_q[1]}); "
                f"TFLite's 8-bit kernel requires scale 1/{steps} and zero point {lowest}"
            )
    elif kind == Op.LEAKY_RELU:
        op.attrs["alpha"] = float(np.float32(core.attrs.alpha))
    elif kind == Op.HARD_SWISH:
        _read_hard_swish(op, ann, problems)
    elif kind == Op.PRELU:
        _read_prelu(op, ann, problems)
    elif kind == Op.SQUARED_DIFFERENCE:
        if op.in_dtypes not in (["int8", "int8"], ["int16", "int16"]) \
                or op.out_dtype != op.in_dtypes[0]:
            problems.append(f"SQUARED_DIFFERENCE of {op.in_dtypes} to {op.out_dtype}; the "
                            "integer kernels are TFLite Micro's int8 and int16 ones")
    elif kind == Op.BATCH_MATMUL:
        _read_batch_matmul(op, ann, problems)
    elif kind == Op.ELU:
        consts = (float(_const_np(ann["one_minus"].args[0])), float(_const_np(ann["neg"].args[0])))
        if consts != (1.0, -1.0):
            problems.append(f"{consts[1]:g} * relu({consts[0]:g} - exp(x)) + relu(x) is no ELU")
        if op.in_dtypes[0] != "int8":
            problems.append(f"ELU of {op.in_dtypes[0]}; the exact kernel is TFLite's int8 table")
    elif kind == Op.RSQRT and (op.in_dtypes[0], op.out_dtype) != ("int8", "int8"):
        problems.append(f"RSQRT from {op.in_dtypes[0]} to {op.out_dtype}; the exact kernel is "
                        "TFLite Micro's int8 one (compute.rsqrt)")
    elif kind in (Op.EXP, Op.LOG) and (op.in_dtypes[0], op.out_dtype) == ("int16", "int16"):
        why = float_lut16.refusal(kind, op.in_q[0], op.out_q) if op.in_q and op.out_q else \
            f"an int16 {kind.value} without quantization; TFLite's kernel is quantized"
        if why:
            problems.append(why)
    elif kind in (Op.EXP, Op.LOG) and (op.in_dtypes[0], op.out_dtype) != ("int8", "int8"):
        problems.append(f"{op.tflite_name} from {op.in_dtypes[0]} to {op.out_dtype}; the exact "
                        f"kernels are TFLite's int8 table (compute.quant.{kind.value}_lut) and "
                        "its int16 interpolated one (compute.float_lut16)")
    elif kind == Op.NEG and (op.in_dtypes[0], op.out_dtype) != ("int8", "int8"):
        problems.append(f"NEG of {op.in_dtypes[0]} to {op.out_dtype}; the NPU's table is "
                        "TFLite's int8 NEG on the codes (compute.quant.neg_lut)")
    elif kind == Op.GELU:
        op.attrs["approximate"] = core.op.name == "relax.nn.gelu_tanh"
        if (op.in_dtypes[0], op.out_dtype) not in (("int8", "int8"), ("uint8", "uint8")):
            problems.append(f"GELU from {op.in_dtypes[0]} to {op.out_dtype}; the exact kernel "
                            "is TFLite's 8-bit table (compute.quant.gelu_lut)")
    elif kind == Op.RESIZE_BILINEAR:
        _read_resize(op, core, problems)
    elif kind in _DATA_MOVEMENT_READERS:
        _DATA_MOVEMENT_READERS[kind](op, ann, problems)
    if kind in TABLE_KINDS and (
        op.in_dtypes[0] not in ("int8", "uint8") or op.out_dtype != op.in_dtypes[0]
    ) and not (kind == "softmax" and (op.in_dtypes[0], op.out_dtype) in (("int8", "int16"),
                                                                         ("int16", "int16"))) \
            and not _int16_activation(op, problems) \
            and not (kind == Op.LEAKY_RELU and (op.in_dtypes[0], op.out_dtype) == ("int16",
                                                                                   "int16")):
        problems.append(
            f"{op.tflite_name} from {op.in_dtypes[0]} to {op.out_dtype}; "
            "the exact kernel is TFLite's "
            "8-bit one (same input and output type); int16 is a different fixed-point kernel"
        )
    elif kind == Op.RESHAPE:
        op.out_q = None
    elif kind == Op.CONCATENATE and op.out_q is not None and any(q != op.out_q for q in op.in_q):
        why = concat_requant.refusal(op.out_dtype, op.in_q, op.out_q)
        if why:
            problems.append(f"requantizing concatenation: {why}")

    if "bias_wide" in ann:      # int64 (16x8)
        op.bias = _const_np(ann["bias_wide"])
        op.bias_scale = np.asarray(_const_np(ann["bias_wide_scale"]), np.float32).ravel()
    elif "bias_dq" in ann:
        b = _const_np(ann["bias_dq"].args[0])
        bs, bz, _ = _qparams_of_dq(ann["bias_dq"])
        op.bias, op.bias_scale = b, bs
        if np.any(bz != 0):
            problems.append("bias with a non-zero zero point")
    if kind in (Op.CONV2D, Op.FULLY_CONNECTED) and "int16" in (op.in_dtypes[0], op.out_dtype):
        _read_16x8(op, problems)
    if kind == Op.TRANSPOSE_CONV2D:
        _read_transpose_conv_kernel(op, problems)
    return op


def _read_transpose_conv(op: QOp, ann: dict, problems: list) -> None:
    """A transpose conv's geometry and its weights as HWIO (the conv's layout, so the conv's
    requantization reads them alike): no dilation or groups (the kernel: see
    :func:`_read_transpose_conv_kernel`)."""
    a = ann["op"].attrs
    op.attrs.update(
        strides=tuple(int(v) for v in a.strides),
        padding=tuple(int(v) for v in a.padding),
        output_padding=tuple(int(v) for v in a.output_padding),
        dilation=tuple(int(v) for v in a.dilation),
        groups=int(a.groups),
    )
    layouts = (str(a.data_layout), str(a.kernel_layout), str(a.out_layout))
    if layouts != ("NHWC", "IOHW", "NHWC"):
        problems.append(f"transpose conv layouts {layouts}; the importer gives NHWC/IOHW/NHWC")
    if op.attrs["dilation"] != (1, 1) or op.attrs["groups"] != 1:
        problems.append(f"transpose conv with dilation {op.attrs['dilation']} and groups "
                        f"{op.attrs['groups']}; TFLite's TRANSPOSE_CONV has neither")
    w = _const_np(ann["w"])
    ws, wz, waxis = _qparams_of_dq(ann["dqw"])
    if w.ndim != 4 or (ws.size > 1 and waxis != 1):
        problems.append("transpose conv weights that are not IOHW quantized per output channel")
    else:
        w = w.transpose(2, 3, 0, 1)
    op.weights, op.w_scale, op.w_zp, op.w_dtype = np.ascontiguousarray(w), ws, wz, str(w.dtype)


def _read_transpose_conv_kernel(op: QOp, problems: list) -> None:
    """Which integer kernel a transpose conv is (read after its bias): TFLite Micro's int8 one
    (symmetric weights), its 16x8 one (int16 activations with zero points 0, int8 weights,
    an int64 accumulator with or without a bias: no bias is an int64 zero one) or LiteRT's
    uint8 one (one weight scale and zero point; TFLite Micro has no uint8 kernel)."""
    form = (op.in_dtypes[0], op.w_dtype, op.out_dtype)
    if form == ("uint8", "uint8", "uint8"):
        if op.per_channel or np.asarray(op.w_zp).size > 1:
            problems.append("uint8 transpose conv weights quantized per channel; LiteRT's "
                            "uint8 kernel takes one weight scale and zero point")
        return
    if form not in (("int8", "int8", "int8"), ("int16", "int8", "int16")):
        problems.append(f"transpose conv of {op.in_dtypes[0]} x {op.w_dtype} to {op.out_dtype}; "
                        "the exact kernels are TFLite Micro's int8 and 16x8 ones and "
                        "LiteRT's uint8 one")
        return
    if np.any(np.asarray(op.w_zp) != 0):
        problems.append("transpose conv weights with a non-zero zero point; TFLite's kernel "
                        "takes symmetric weights")
    if form[0] == "int16":
        if op.bias is None:
            op.bias = np.zeros(op.weights.shape[3], np.int64)
        elif np.asarray(op.bias).dtype != np.int64:
            problems.append(f"TRANSPOSE_CONV 16x8 with a {np.asarray(op.bias).dtype} bias; "
                            "TFLite Micro's kernel reads the bias as int64")
            return
        _read_16x8(op, problems)


def _read_16x8(op: QOp, problems: list) -> None:
    """A weighted operator with int16 activations is TFLite's 16x8 kernel (``compute.
    int16x8``): int16 in and out, int8 weights, a bias, zero points 0 and, with an int64
    bias, a scale its int64 requantization takes."""
    if (op.in_dtypes[0], op.out_dtype, op.w_dtype) != ("int16", "int16", "int8"):
        problems.append(f"{op.tflite_name} of {op.in_dtypes[0]} with {op.w_dtype} weights to "
                        f"{op.out_dtype}; TFLite's 16x8 kernel takes int16 with int8 weights "
                        "to int16")
        return
    if op.bias is None:
        problems.append(f"{op.tflite_name} 16x8 without a bias; TFLite Micro's accumulator "
                        "then follows an option the importer does not read")
    zps = (op.in_q[0][1] if op.in_q else 0, op.out_q[1] if op.out_q else 0)
    if any(zps) or np.any(np.asarray(op.w_zp) != 0):
        problems.append(f"{op.tflite_name} 16x8 with zero points {zps} (weights "
                        f"{np.unique(np.asarray(op.w_zp)).tolist()}); TFLite's kernel requires 0")
    if op.bias is not None and np.abs(np.asarray(op.bias, np.int64)).max(initial=0) >= 1 << 47:
        problems.append(f"{op.tflite_name} 16x8 with a bias beyond 47 bits; TFLite's int64 "
                        "requantization takes sums below 2**47")
    if op.in_q and op.out_q is not None and int16x8.wide_accumulator(op.in_dtypes[0], op.bias):
        ws = np.asarray(op.w_scale, np.float32).ravel()
        _, shift = quantize_multipliers(
            [f32(op.in_q[0][0]) * float(w) / f32(op.out_q[0]) for w in ws])
        why = int16x8.refusal(shift)
        if why:
            problems.append(f"{op.tflite_name}: {why}")


#: resize2d coordinate modes and TFLite's (align_corners, half_pixel_centers) for each
RESIZE_MODES = {
    "asymmetric": (False, False),
    "align_corners": (True, False),
    "half_pixel": (False, True),
}


def _read_resize(op: QOp, core, problems: list) -> None:
    """RESIZE_BILINEAR: TFLite's kernels interpolate the codes themselves, int8 and int16 in
    fixed point (10 fractional bits), uint8 in float32 (``compute.resize_bilinear``), so they
    are exact only with equal input and output quantization."""
    a = core.attrs
    mode = str(a.coordinate_transformation_mode)
    op.attrs.update(method=str(a.method), layout=str(a.layout), coordinate_transformation_mode=mode)
    if op.attrs["method"] != "linear":
        problems.append(f"resize method {op.attrs['method']}; the integer kernel is bilinear")
    if mode not in RESIZE_MODES:
        problems.append(
            f"resize coordinate mode {mode}; the integer kernel takes {', '.join(RESIZE_MODES)}"
        )
    else:
        op.attrs["align_corners"], op.attrs["half_pixel_centers"] = RESIZE_MODES[mode]
    if len(op.in_shapes[0]) != 4:
        problems.append(
            f"resize of a {len(op.in_shapes[0])}-D tensor; the integer kernel takes NHWC"
        )
    dtypes = resize_bilinear.INTEGER_DTYPES | resize_bilinear.FLOAT_DTYPES
    if op.in_dtypes[0] not in dtypes or op.out_dtype != op.in_dtypes[0]:
        problems.append(
            f"RESIZE_BILINEAR from {op.in_dtypes[0]} to {op.out_dtype}; "
            "the exact kernels are TFLite's int8, int16 and uint8 ones (one type in and out)"
        )
    if op.in_q and op.out_q is not None and op.in_q[0] != op.out_q:
        problems.append(f"resize with input quantization {op.in_q[0]} and output {op.out_q}; "
                        "each of TFLite's kernels interpolates codes and needs them equal")


def _read_pad(op: QOp, ann: dict, problems: list) -> None:
    """PAD / PADV2 (QDQ form): the fill code is the quantized fill value (the zero point for
    PAD, the constant's code for PADV2); exact only with equal input and output quantization."""
    a = ann["op"].attrs
    widths = [int(v) for v in a.pad_width]
    op.attrs["pad_width"] = tuple(zip(widths[0::2], widths[1::2]))
    if str(a.pad_mode) != "constant":
        problems.append(f"pad mode {a.pad_mode}; the integer kernel pads with a constant")
    if op.out_q is None:
        return
    op.attrs["fill"] = int(np.round(float(a.pad_value) / np.float64(op.out_q[0]))) + op.out_q[1]
    if op.in_q and op.in_q[0] != op.out_q:
        problems.append(f"pad with input quantization {op.in_q[0]} and output {op.out_q}; "
                        "TFLite's kernel copies codes and needs them equal")


#: REDUCE_MAX, REDUCE_MIN and SUM: the reductions read as integer operators over H and W,
#: or over the depth (H, W or both with it: ``REDUCE_AXES``)
REDUCE_KINDS = (Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_SUM)
#: the axes of an NHWC tensor the integer kernels reduce
REDUCE_AXES = ((1, 2), (1,), (2,)) + DEPTH_REDUCTION_AXES


def _read_reduce(op: QOp, core, problems: list) -> None:
    """REDUCE_MAX / REDUCE_MIN / SUM: the integer kernels reduce H and W of an NHWC int8,
    uint8 or int16 tensor, or its depth with any of H and W (TFLite's kernels; the NPU's are
    a pool or a convolution over the input, ``ops_reduce``, ``ops_reduce_depth``). TFLite's
    REDUCE_MAX and REDUCE_MIN pick a code and refuse an output quantized unlike the input, so
    another one is no integer operator."""
    axes = core.attrs.axis
    rank = len(op.in_shapes[0])
    op.attrs["axis"] = tuple(sorted(int(v) % rank for v in axes)) if axes is not None and rank \
        else None
    op.attrs["keepdims"] = bool(core.attrs.keepdims)
    if rank != 4 or op.attrs["axis"] not in REDUCE_AXES:
        problems.append(f"{op.tflite_name} over axes {op.attrs['axis']} of a {rank}-D tensor; "
                        "the integer kernel reduces height and width of NHWC, or its depth "
                        "with any of them")
    # an int16 REDUCE_MAX / REDUCE_MIN picks a code as the int8 one does (LiteRT's int16
    # kernel), an int16 SUM rescales the sum of x - zp as it does (TFLite Micro's), over
    # any of the axes
    int16 = op.in_dtypes[0] == op.out_dtype == "int16" and op.attrs["axis"] in REDUCE_AXES
    # a uint8 REDUCE_MAX / REDUCE_MIN picks a code as the int8 one does, a uint8 SUM rescales
    # the sum of x - zp as it does (LiteRT's uint8 kernels; TFLite Micro has none)
    uint8 = op.in_dtypes[0] == op.out_dtype == "uint8"
    if not (int16 or uint8) and (op.in_dtypes[0] != "int8" or op.out_dtype != "int8"):
        problems.append(f"{op.tflite_name} from {op.in_dtypes[0]} to {op.out_dtype}; the "
                        "integer kernels are TFLite's int8, uint8 and int16 ones")
    if op.kind != Op.REDUCE_SUM and op.out_q is not None and op.in_q and op.in_q[0] != op.out_q:
        problems.append(f"{op.tflite_name} with input quantization {op.in_q[0]} and output "
                        f"{op.out_q}; TFLite's int8 kernel requires them equal")


def _read_arg_max(op: QOp, core, problems: list) -> None:
    """ARG_MAX: the index of the first largest code along the last axis (TFLite's kernels
    take any axis; the integer kernel and the NPU reduce the innermost one), of int8 or uint8
    codes into int32 or int64."""
    rank = len(op.in_shapes[0])
    axis = int(core.attrs.axis) % rank if rank and core.attrs.axis is not None else None
    op.attrs["axis"] = axis
    if axis != rank - 1 or bool(core.attrs.keepdims):
        problems.append(f"ARG_MAX along axis {axis} of a {rank}-D tensor; the integer kernel "
                        "reduces the last axis")
    if op.in_dtypes[0] not in ("int8", "uint8") or op.out_dtype not in ("int32", "int64"):
        problems.append(f"ARG_MAX of {op.in_dtypes[0]} into {op.out_dtype}; the integer "
                        "kernel takes int8 or uint8 codes into int32 or int64")


def softmax16_refusals(op: QOp) -> list[str]:
    """What TFLite's int16 SOFTMAX kernel (``te_ops.lower_softmax16``) does not take of
    ``op``, each naming what would: int16 in and out, input zero point 0, output (1/32768,
    0), a positive beta, a scale x beta whose multiplier shifts the difference left by at
    most ``MAX_LEFT_SHIFT`` bits, rows short enough for an int32 sum."""
    out = []
    if op.out_dtype != "int16":
        out.append(f"SOFTMAX of int16 to {op.out_dtype}; TFLite's int16 kernel writes int16")
    if op.in_q and op.in_q[0][1] != 0:
        out.append(f"SOFTMAX of int16 with input zero point {op.in_q[0][1]}; TFLite's int16 "
                   "kernel requires 0 (re-quantize the input symmetrically)")
    if op.out_q is not None and (abs(op.out_q[0] * 32768 - 1) > 1e-3 or op.out_q[1] != 0):
        out.append(f"SOFTMAX output quantization (scale {op.out_q[0]:g}, zero point "
                   f"{op.out_q[1]}); TFLite's int16 kernel requires (1/32768, 0)")
    beta = op.attrs.get("beta", 1.0)
    if not beta > 0:
        out.append(f"SOFTMAX beta {beta:g}; TFLite's int16 kernel takes a positive beta")
    elif op.in_q:
        _, shift = softmax16.input_multiplier(op.in_q[0][0], beta, softmax16.Kernel.LITERT)
        if shift > softmax16.MAX_LEFT_SHIFT:
            out.append(f"SOFTMAX of int16 with input scale x beta = {op.in_q[0][0] * beta:g}; "
                       f"TFLite's kernel shifts the input difference left by {shift} bits in "
                       f"int32, which overflows past {softmax16.MAX_LEFT_SHIFT} (a smaller "
                       "input scale would fit)")
    depth = int(op.in_shapes[0][-1]) if op.in_shapes[0] else 0
    if depth > softmax16.MAX_DEPTH:
        out.append(f"SOFTMAX of int16 over rows of {depth}; over {softmax16.MAX_DEPTH} values "
                   "TFLite's int32 sum of exponentials can overflow")
    return out


def _int16_activation(op: QOp, problems: list) -> bool:
    """Whether ``op`` is an int16 LOGISTIC / TANH (TFLite's int16 kernel, ``lower.
    int16_activation``); what that kernel refuses of its quantization goes to ``problems``."""
    if op.kind not in int16_activation.KINDS or (op.in_dtypes[0], op.out_dtype) != (
            "int16", "int16"):
        return False
    why = int16_activation.refusal(op.kind, op.in_q[0], op.out_q) if op.out_q else ""
    if why:
        problems.append(f"{op.tflite_name}: {why}")
    return True


def _read_hard_swish(op: QOp, ann: dict, problems: list) -> None:
    """HARD_SWISH: the chain must be ``x * clip(x + 3, 0, 6) / 6`` and TFLite's kernel must
    take the types and scales (``compute.hard_swish.refusal``)."""
    consts = (float(_const_np(ann["plus"].args[1])), float(_const_np(ann["op"].args[1])))
    if consts != (3.0, 6.0) or _clip_bounds(ann["relu6"]) != (0.0, 6.0):
        problems.append(f"x * clip(x + {consts[0]:g}, {_clip_bounds(ann['relu6'])}) / "
                        f"{consts[1]:g} is no HARD_SWISH")
    if op.out_q is not None and op.in_q:
        why = refusal(op.in_dtypes[0], op.in_q[0], op.out_q) if op.in_dtypes[0] == \
            op.out_dtype else f"{op.in_dtypes[0]} -> {op.out_dtype}; one type in and out"
        if why:
            problems.append(f"HARD_SWISH: {why}")


#: a PRELU's (input, output, alpha) types with an integer kernel: TFLite Micro's int8 and
#: int16 ones (each with int8 alpha codes) and LiteRT's uint8 one (TFLite Micro has none)
PRELU_KERNEL_TYPES = frozenset({("int8", "int8", "int8"), ("int16", "int16", "int8"),
                                ("uint8", "uint8", "uint8")})


def _read_prelu(op: QOp, ann: dict, problems: list) -> None:
    """PRELU: alpha's codes per channel of the last axis, or its map over the height, width
    and depth (``alpha_shape``, ``compute.quant.prelu_alpha``), and its quantization;
    TFLite's integer kernel (two multipliers, ``compute.quant.prelu_multipliers``), one
    for each of :data:`PRELU_KERNEL_TYPES`."""
    codes = np.asarray(_const_np(ann["alpha"]))
    s, z, _ = _qparams_of_dq(ann["dqa"])
    rank = len(op.in_shapes[0])
    if "ge" in ann:
        zero = np.asarray(_const_np(ann["ge"].args[1]))
        shape = tuple(op.in_shapes[0])
        if zero.size != 1 or float(zero.ravel()[0]) != 0.0 or rank != 4 or codes.ndim != 4 \
                or codes.shape[0] != 1 or any(a not in (1, d) for a, d in
                                              zip(codes.shape[1:], shape[1:])):
            problems.append("PRELU whose alpha is no map over the height, width and depth of "
                            "a 4-D input compared with zero")
        else:
            op.attrs["alpha_shape"] = tuple(int(d) for d in codes.shape[1:])
    elif int(ann["op"].attrs.axis) % max(rank, 1) != rank - 1 or codes.ndim != 1 or \
            codes.size != (op.in_shapes[0][-1] if rank else 1):
        problems.append("PRELU whose alpha is not one value per channel of the last axis")
    if s.size != 1 or z.size != 1:
        problems.append("PRELU with alpha quantized per channel")
    op.attrs["alpha"] = tuple(int(v) for v in codes.ravel())
    op.attrs["alpha_q"] = (float(s[0]), int(z[0]))
    if (op.in_dtypes[0], op.out_dtype, str(codes.dtype)) not in PRELU_KERNEL_TYPES:
        problems.append(f"PRELU from {op.in_dtypes[0]} to {op.out_dtype} (alpha "
                        f"{codes.dtype}); the integer kernels are TFLite Micro's int8 and "
                        "int16 ones (int8 alpha) and LiteRT's uint8 one (uint8 alpha)")


def _read_batch_matmul(op: QOp, ann: dict, problems: list) -> None:
    """BATCH_MATMUL: the adj flags (each a ``permute_dims`` exchanging exactly the last two
    axes); TFLite's int8 kernel, so int8 operands and output of rank 2 and above."""
    for name, key in (("adj_x", "perm_x"), ("adj_y", "perm_y")):
        op.attrs[name] = key in ann
        if key in ann:
            rank = len(op.in_shapes[0 if name == "adj_x" else 1])
            axes = ann[key].attrs.axes
            axes = list(range(rank))[::-1] if axes is None else [int(v) for v in axes]
            if axes != list(range(rank - 2)) + [rank - 1, rank - 2]:
                problems.append(f"BATCH_MATMUL operand permuted by {axes}; only the last two "
                                "axes exchanged is an adj flag")
    if min(len(s) for s in op.in_shapes) < 2:
        problems.append("BATCH_MATMUL of an operand below 2-D")
    dtypes = (*op.in_dtypes, op.out_dtype)
    if dtypes != ("int8", "int8", "int8"):
        problems.append(f"BATCH_MATMUL of {op.in_dtypes} to {op.out_dtype}; the integer "
                        "kernel is TFLite's int8 one")


def _prim_ints(tup) -> tuple[int, ...]:
    return tuple(int(v.value) for v in tup.fields)


def _read_split(op: QOp, ann: dict, problems: list) -> None:
    """One output of SPLIT / SPLIT_V, or one axis of a (STRIDED_)SLICE: every ``stride``-th
    element of ``[begin, end)`` along ``axis`` (``stride`` 1 but for a STRIDED_SLICE)."""
    core = ann["op"]
    try:
        axes, begin, end = (_prim_ints(a) for a in core.args[1:4])
        strides = _prim_ints(core.args[4]) if len(core.args) > 4 else (1,)
    except (AttributeError, TypeError, ValueError):
        problems.append("slice bounds that are not literal integers")
        return
    rank = len(op.in_shapes[0])
    if len(axes) != 1 or len(strides) != 1:
        problems.append(f"slice over axes {axes}; a SPLIT output slices one axis")
        return
    axis, stride = axes[0] % rank, strides[0]
    size = op.in_shapes[0][axis]
    b = begin[0] + size if begin[0] < 0 else begin[0]
    e = min(end[0] + size if end[0] < 0 else end[0], size)
    op.attrs.update(axis=axis, begin=b, end=e, stride=stride)
    if stride < 1:
        problems.append(f"slice stride {stride}; a slice reads forwards")
    elif -(-(e - b) // stride) != op.out_shape[axis]:
        problems.append(f"slice [{b}, {e}) step {stride} of an axis of {size} gives "
                        f"{op.out_shape[axis]} elements")


def _read_depth_to_space(op: QOp, ann: dict, problems: list) -> None:
    """DEPTH_TO_SPACE (DCR): ``(n, h, w, c) -> (n, h, w, b, b, c/b^2) -> swap w and the first
    b -> (n, h*b, w*b, c/b^2)``; anything else this chain could be is refused."""
    ins, out = op.in_shapes[0], op.out_shape
    mid = _shape(ann["split_dims"])
    perm = ann["op"].attrs.axes
    perm = [int(v) for v in perm] if perm is not None else []
    ok = len(ins) == 4 and len(out) == 4 and len(mid) == 6 and perm == [0, 1, 3, 2, 4, 5]
    if ok:
        n, h, w, c = ins
        b = mid[3]
        ok = (mid == (n, h, w, b, b, c // (b * b)) and b * b * mid[5] == c
              and tuple(out) == (n, h * b, w * b, c // (b * b)))
        op.attrs["block_size"] = b
    if not ok:
        problems.append(f"reshape {ins} -> {mid} -> permute {perm} -> reshape {out} is not a "
                        "DEPTH_TO_SPACE")


def _read_resize_nearest(op: QOp, ann: dict, problems: list) -> None:
    """RESIZE_NEAREST_NEIGHBOR on the codes: the frontend's encoding of TFLite's options
    (:data:`NEAREST_MODES`)."""
    a = ann["op"].attrs
    mode = (str(a.coordinate_transformation_mode), str(a.rounding_method))
    op.attrs.update(method=str(a.method), layout=str(a.layout))
    if op.attrs["method"] != "nearest_neighbor":
        problems.append(f"resize method {op.attrs['method']} on integer codes")
    flags = NEAREST_FLAGS.get(mode)
    if flags is None:
        problems.append(
            f"nearest resize with coordinate mode {mode[0]} and rounding {mode[1] or '(default)'}; "
            "the integer kernel takes TFLite's three modes"
        )
    else:
        op.attrs["align_corners"], op.attrs["half_pixel_centers"] = flags
    if len(op.in_shapes[0]) != 4 or op.attrs["layout"] != "NHWC":
        problems.append(
            f"resize of a {len(op.in_shapes[0])}-D {op.attrs['layout']} tensor; "
            "the kernel takes NHWC"
        )


#: TFLite's (align_corners, half_pixel_centers) -> the resize2d (coordinate mode, rounding) the
#: frontend writes for RESIZE_NEAREST_NEIGHBOR: reference_ops::ResizeNearestNeighbor takes
#: ``floor(x * in/out)``, ``round(x * (in-1)/(out-1))`` or ``floor((x + 0.5) * in/out)`` (TVM's
#: ``tf_half_pixel_for_nn``), clamped to the input
NEAREST_MODES = {
    (False, False): ("asymmetric", "floor"),
    (True, False): ("align_corners", "round"),
    (False, True): ("tf_half_pixel_for_nn", "floor"),
}
NEAREST_FLAGS = {mode: flags for flags, mode in NEAREST_MODES.items()}

def _read_transpose(op: QOp, ann: dict, problems: list) -> None:
    """TRANSPOSE on the codes: its permutation."""
    axes = ann["op"].attrs.axes
    op.attrs["perm"] = (tuple(int(v) for v in axes) if axes is not None
                        else tuple(reversed(range(len(op.in_shapes[0])))))


def _read_mirror_pad(op: QOp, ann: dict, problems: list) -> None:
    """MIRROR_PAD on the codes: its paddings and mode (REFLECT, or SYMMETRIC: the edge
    repeated); the integer kernels take the forms ``mirror_pad.kernel_refusal`` allows."""
    widths = [int(v) for v in ann["op"].attrs.pad_width]
    pads = tuple(zip(widths[0::2], widths[1::2]))
    mode = "SYMMETRIC" if str(ann["op"].attrs.pad_mode) == "symmetric" else "REFLECT"
    op.attrs.update(pad_width=pads, mode=mode)
    why = mirror_pad.kernel_refusal(pads)
    if why:
        problems.append(why)


def _read_reverse(op: QOp, ann: dict, problems: list) -> None:
    """REVERSE_V2 on the codes: its one axis."""
    rank = len(op.in_shapes[0])
    op.attrs["axis"] = int(ann["op"].attrs.axis) % max(rank, 1)


def _read_tile(op: QOp, ann: dict, problems: list) -> None:
    """TILE on the codes: its multiples, one per axis."""
    reps = tuple(int(v) for v in ann["op"].attrs.repeats)
    rank = len(op.in_shapes[0])
    op.attrs["reps"] = (1,) * (rank - len(reps)) + reps
    if len(reps) > rank:
        problems.append(f"TILE of a {rank}-D tensor by {reps}; one multiple per axis")


_DATA_MOVEMENT_READERS = {
    Op.PAD: _read_pad,
    Op.TILE: _read_tile,
    Op.REVERSE: _read_reverse,
    Op.MIRROR_PAD: _read_mirror_pad,
    Op.SPLIT: _read_split,
    Op.DEPTH_TO_SPACE: _read_depth_to_space,
    Op.RESIZE_NEAREST: _read_resize_nearest,
    Op.TRANSPOSE: _read_transpose,
}


_VARIANTS_BY_KIND: dict[Op, list] = {}


def qop_from_composite(func: relax.Function) -> QOp:
    """Re-read the QOp from a composite function made by ``FuseOpsByPattern``."""
    name = str(func.attrs["Composite"])
    kind = parse_op(name.split(".", 1)[1], f"composite {name}")
    if not _VARIANTS_BY_KIND:
        for k, pat, ann in pattern_variants():
            _VARIANTS_BY_KIND.setdefault(k, []).append((pat, ann))
    body = func.body
    var2val = {}
    for block in body.blocks:
        for b in block.bindings:
            var2val[b.var] = b.value
    root = body.body
    for pat, ann in _VARIANTS_BY_KIND[kind]:
        matched = pat.extract_matched_expr(root, var2val)
        if matched is None:
            continue
        named = {k: matched[p] for k, p in ann.items() if p in matched}
        # matched exprs come back as values; params stay params
        return read_qop(kind, named)
    raise ValueError(f"composite {name} does not match any of its pattern variants")
