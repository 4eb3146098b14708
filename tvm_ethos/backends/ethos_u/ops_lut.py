"""LOGISTIC, TANH, LEAKY_RELU, HARD_SWISH, ELU, RSQRT and QUANTIZE (integer requantization) as
NPU operations.

The activations are functions of one int8 code, so each is a 256-entry table applied by
the NPU's LUT activation: the table goes from flash to SHRAM by a DMA, then a 1x1 average pool
with unit scale and zero points 0 passes every code through unchanged and the output stage
looks it up (entry ``code + 128``). Every table is TFLite Micro's kernel on each code,
clamped to the operator's fused activation range: LOGISTIC / TANH are TFLite Micro's gemmlowp
fixed point (``compute.int8_activation``; Vela 5.2 writes LiteRT's float32 tables, which
differ on a code or two at some input scales), LEAKY_RELU takes its
multipliers in double as TFLite Micro does (:func:`leaky_relu_table`; the emulator's
follows LiteRT's float32 ratios), HARD_SWISH is TFLite's int16 fixed point
(``compute.hard_swish``), ELU TFLite's float32 table (``compute.quant.elu_lut``), RSQRT
TFLite Micro's fixed-point Newton-Raphson (``compute.rsqrt``). Vela lowers these operators
the same way (an identity operation carrying the LUT). An int16 LOGISTIC / TANH needs no
table: the pool carries the output unit's own int16 sigmoid / tanh
(``compute.int16_activation``). An int16 EXP / LOG is TFLite's interpolated 513-entry float
table (``compute.float_lut16``), loaded as the 512 base-and-slope words of the NPU's 16-bit
LUT (2 KiB, every SHRAM LUT slot), which interpolates as TFLite does. An int16 LEAKY_RELU
has no table either: it is two requantizations and their MAX or MIN, or for a negative alpha
their difference (:func:`leaky_relu16_ops`). A uint8 LOGISTIC, TANH, LEAKY_RELU, HARD_SWISH or
GELU is the same pool over a uint8 table, looked up at entry ``code`` (:func:`uint8_table`:
LiteRT's reference kernels, as TFLite Micro has no uint8 kernel for them).

QUANTIZE between integer types is TFLite's ``Requantize``: ``MultiplyByQuantizedMultiplier(x -
zp_in, M, s) + zp_out`` with ``(M, s)`` quantized from ``scale_in / scale_out`` in double. It is a
1x1 average pool whose explicit OFM scale is ``(M, 31 - s)`` in the TFL rounding mode, which is
that double rounding (Vela also turns QUANTIZE into an average pool). Into int32 (from int16)
the pool writes an int32 OFM, which takes no zero point: ``compute.requantize32`` says where
that is TFLite Micro's kernel (Vela 5.2 keeps every QUANTIZE into int32 on the CPU).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ethos_arch.ops import Op
from planner.work_memory import WorkMemory
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, activation, feature_map, real_bound
from tvm_ethos.backends.ethos_u.stream_base import (
    SCRATCH_REGION,
    UnsupportedOperatorError,
    vela_api,
)
from tvm_ethos.compute import (
    float_lut16,
    int8_activation,
    int16_activation,
    leaky_relu,
    requantize32,
)
from tvm_ethos.compute.hard_swish import hard_swish_lut
from tvm_ethos.compute.quant import (
    elu_lut,
    exp_lut,
    f32,
    gelu_lut,
    leaky_relu_lut,
    log_lut,
    logistic_lut,
    neg_lut,
    quantize_multiplier,
    tanh_lut,
)
from tvm_ethos.compute.rsqrt import rsqrt_lut

#: base-pointer index of SHRAM as a DMA destination (Vela's ``BASE_PTR_INDEX_MEM2MEM``)
SHRAM_REGION = 0x103
#: operators applied through an int8 lookup table
LUT_KINDS = (Op.SIGMOID, Op.TANH, Op.LEAKY_RELU, Op.HARD_SWISH, Op.ELU, Op.RSQRT, Op.EXP,
             Op.GELU, Op.LOG, Op.NEG)
#: the table operators with a uint8 -> uint8 table too (LiteRT's reference kernels, which
#: Vela 5.2 also puts on the NPU as uint8 tables)
UINT8_KINDS = (Op.SIGMOID, Op.TANH, Op.LEAKY_RELU, Op.HARD_SWISH, Op.GELU)
REQUANTIZE_KINDS = (Op.REQUANTIZE,)
#: int16 operators the output unit computes itself (its tanh / sigmoid activation is TFLite's
#: int16 algorithm; Vela's generator scales the input to it as TFLite's prepare does)
ACTIVATION16_KINDS = {Op.SIGMOID: "SIGMOID", Op.TANH: "TANH"}
#: integer types a requantization reads and writes on the NPU
_REQUANT_TYPES = ("int8", "uint8", "int16")
#: alignment of an operator's working memory in the arena
_WORK_ALIGN = 16


def table(q) -> np.ndarray:
    """The 256 output codes of a LUT operator (int8 -> int8: entry ``code + 128``; uint8 ->
    uint8, :data:`UINT8_KINDS`: entry ``code``), or UnsupportedOperatorError saying why the
    NPU's table cannot express it."""
    dtype = _table_type(q)
    in_q, out_q = (q.in_q[0] if q.in_q else None), q.out_q   # NEG reads no quantization
    if dtype == "uint8":
        values = uint8_table(q)
    elif q.kind in int8_activation.KINDS:
        values = int8_activation.npu_lut(q.kind, in_q, out_q)
    elif q.kind == Op.LEAKY_RELU:
        values = leaky_relu_table(in_q, out_q, q.attrs["alpha"])
    elif q.kind == Op.HARD_SWISH:
        values = hard_swish_table(in_q, out_q)
    elif q.kind == Op.ELU:
        values = elu_lut("int8", in_q, out_q)
    elif q.kind == Op.RSQRT:
        values = rsqrt_lut("int8", in_q, out_q)
    elif q.kind == Op.EXP:
        values = exp_lut("int8", in_q, out_q)
    elif q.kind == Op.GELU:
        values = gelu_lut("int8", in_q, out_q, q.attrs["approximate"])
    elif q.kind == Op.LOG:
        values = log_lut("int8", in_q, out_q)
    elif q.kind == Op.NEG:
        values = neg_lut("int8")
    else:
        raise UnsupportedOperatorError(q.tflite_name, "it is not a table operator")
    return np.clip(values.astype(np.int64), q.act_min, q.act_max).astype(dtype)


def _table_type(q) -> str:
    """The type of ``q``'s 256-entry table ("int8" or "uint8"), or UnsupportedOperatorError
    naming the types the NPU's tables take."""
    pair = (q.in_dtypes[0], q.out_dtype)
    if pair == ("int8", "int8") or (pair == ("uint8", "uint8") and q.kind in UINT8_KINDS):
        return pair[0]
    if is_float_table16(q):
        raise UnsupportedOperatorError(q.tflite_name, "an int16 table has 512 base-and-slope "
                                       "words, not 256 codes (table16)")
    uint8 = ", ".join(k.tflite_name for k in UINT8_KINDS)
    raise UnsupportedOperatorError(
        q.tflite_name, f"{pair[0]} -> {pair[1]}; the NPU's lookup tables take int8 -> int8, "
        f"or uint8 -> uint8 for {uint8} (quantize the tensors to int8)")


def uint8_table(q) -> np.ndarray:
    """A uint8 LUT operator's output on every code (entry ``code``), before its fused clamp:
    LiteRT's reference kernel, the definition of a uint8 model (TFLite Micro refuses uint8
    LOGISTIC, TANH, LEAKY_RELU and HARD_SWISH and has no GELU). It is the "tir" emulator's
    table (``te_ops._lut_of``): LOGISTIC / TANH / GELU tabulated in float32, LEAKY_RELU with
    LiteRT's float32 ratios (``compute.quant.leaky_relu_lut``), HARD_SWISH TFLite's int16
    fixed point. The NPU looks a uint8 code up at its own entry, as Vela 5.2's uint8 tables
    are written (``ethosu_stream.ops_common.apply_lut``)."""
    in_q, out_q = q.in_q[0], q.out_q
    if q.kind == Op.SIGMOID:
        return logistic_lut("uint8", in_q, out_q)
    if q.kind == Op.TANH:
        return tanh_lut("uint8", in_q, out_q)
    if q.kind == Op.LEAKY_RELU:
        return leaky_relu_lut("uint8", in_q, out_q, q.attrs["alpha"])
    if q.kind == Op.HARD_SWISH:
        try:
            return hard_swish_lut("uint8", in_q, out_q)
        except ValueError as err:
            raise UnsupportedOperatorError("HARD_SWISH", str(err)) from None
    if q.kind == Op.GELU:
        return gelu_lut("uint8", in_q, out_q, q.attrs["approximate"])
    raise UnsupportedOperatorError(q.tflite_name, "no uint8 table (uint8 -> uint8 tables: "
                                   f"{', '.join(k.tflite_name for k in UINT8_KINDS)})")


def is_float_table16(q) -> bool:
    """An int16 EXP / LOG: TFLite's interpolated 513-entry table (``compute.float_lut16``),
    which the NPU's 16-bit LUT reads the same way."""
    return q.kind in float_lut16.KINDS and (q.in_dtypes[0], q.out_dtype) == ("int16", "int16")


def table16(q) -> np.ndarray:
    """The 512 base-and-slope words (uint32) of an int16 EXP / LOG, or
    UnsupportedOperatorError where TFLite's kernel refuses the quantization or the NPU's
    lookup would not give its output (``compute.float_lut16.npu_refusal``)."""
    why = float_lut16.npu_refusal(q.kind, q.in_q[0], q.out_q)
    if why:
        raise UnsupportedOperatorError(q.tflite_name, why)
    return float_lut16.npu_words(q.kind, q.in_q[0], q.out_q)


def leaky_relu_table(in_q: tuple, out_q: tuple, alpha: float) -> np.ndarray:
    """LEAKY_RELU on every int8 code as TFLite Micro's prepare and kernel compute it: both
    multipliers from the float32 scales and alpha widened to double before they are multiplied
    and divided (LiteRT's prepare does that arithmetic in float32, ``compute.quant.leaky_relu_lut``:
    the two differ where ``x * ratio`` falls on a rounding tie), the alpha one applied with the
    sign taken out (``compute.leaky_relu``)."""
    return leaky_relu.tflm_lut("int8", in_q, out_q, alpha)


def hard_swish_table(in_q: tuple, out_q: tuple) -> np.ndarray:
    """HARD_SWISH on every int8 code (entry ``code + 128``): TFLite's reference int8 kernel
    (``compute.hard_swish``), or UnsupportedOperatorError where that kernel refuses the scales."""
    try:
        return hard_swish_lut("int8", in_q, out_q)
    except ValueError as err:
        raise UnsupportedOperatorError("HARD_SWISH", str(err)) from None


def requantize_scale(q) -> tuple[int, int]:
    """The NPU's (multiplier, right shift) of a requantization: TFLite's
    ``QuantizeMultiplier(scale_in / scale_out)`` as ``(M, 31 - shift)``."""
    wide = q.out_dtype == "int32" and q.in_dtypes[0] in requantize32.INPUT_TYPES
    for dtype in (q.in_dtypes[0], *(() if wide else (q.out_dtype,))):
        if dtype not in _REQUANT_TYPES:
            raise UnsupportedOperatorError(
                q.tflite_name, f"{q.in_dtypes[0]} -> {q.out_dtype}; the NPU requantizes "
                f"between {', '.join(_REQUANT_TYPES)} and from "
                f"{', '.join(requantize32.INPUT_TYPES)} into int32 (float tensors stay on the "
                "host)")
    # TFLite saturates the shift to [-31, 30], so 31 - shift fits the NPU's six bits; an int32
    # OFM (int16 in, ``compute.requantize32``) takes the same scale, and no zero point
    m, shift = quantize_multiplier(f32(q.in_q[0][0]) / f32(q.out_q[0]))
    return m, 31 - shift


def _identity_pool(ifm: FmSlot, ofm: FmSlot):
    """A 1x1 average pool over the whole map, no activation yet, no block config."""
    api = vela_api()
    npu = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
    npu.ifm, npu.ofm = feature_map(ifm), feature_map(ofm)
    npu.kernel = api.NpuKernel(1, 1)
    npu.padding = api.NpuPadding(0, 0, 0, 0)
    npu.rounding_mode = api.NpuRoundingMode.TFL
    return npu


def _explicit(multiplier: int, shift: int):
    from ethosu.vela.operation import ExplicitScaling

    return ExplicitScaling(False, [shift], [multiplier])


def lut_dma(q, flash, lut_address: int):
    """The DMA that puts the operator's table at ``lut_address`` of SHRAM (slot 0)."""
    api = vela_api()
    words = table16(q).astype("<u4") if is_float_table16(q) else table(q)
    src = flash.add(words.tobytes())
    return api.NpuDmaOperation(src, api.NpuAddressRange(SHRAM_REGION, lut_address, src.length))


def lut_op(q, ifm: FmSlot, ofm: FmSlot):
    """The pooling operation that looks every code of ``ifm`` up in the table in SHRAM slot 0
    (loaded by :func:`lut_dma`; an int16 one interpolates its 16-bit table, which fills every
    slot); no block config yet."""
    api = vela_api()
    unit = {"scale": 1.0, "zero_point": 0}
    npu = _identity_pool(dataclasses.replace(ifm, **unit), dataclasses.replace(ofm, **unit))
    npu.rescale = _explicit(1, 0)
    npu.activation = api.NpuActivation(api.NpuActivationOp.TABLE_LOOKUP)
    npu.activation.lookup_table_index = 0
    return npu


def activation16_op(q, ifm: FmSlot, ofm: FmSlot):
    """An int16 LOGISTIC / TANH: a 1x1 average pool carrying the output unit's activation,
    the input scaled to its unit from the feature maps' quantization; no block config yet."""
    api = vela_api()
    why = int16_activation.refusal(q.kind, q.in_q[0], q.out_q)
    if why:
        raise UnsupportedOperatorError(q.tflite_name, why)
    npu = _identity_pool(ifm, ofm)
    npu.activation = api.NpuActivation(getattr(api.NpuActivationOp, ACTIVATION16_KINDS[q.kind]))
    return npu


def _is_activation16(q) -> bool:
    return q.kind in ACTIVATION16_KINDS and q.in_dtypes[0] == "int16"


def is_leaky_relu16(q) -> bool:
    """An int16 LEAKY_RELU: no int16 table holds it, so it is three operations
    (:func:`leaky_relu16_ops`)."""
    return q.kind == Op.LEAKY_RELU and q.in_dtypes[0] == "int16"


def leaky_relu16_work(q) -> WorkMemory:
    """Arena for the identity branch of :func:`leaky_relu16_ops`: one int16 element for each
    of the output's, or of a stripe's where it runs over stripes (the planner's form), every
    byte written (the arena layout aligns the block's start)."""
    return WorkMemory(per_element=2)


def leaky_relu16_work_bytes(q, box: tuple | None = None) -> int:
    """:func:`leaky_relu16_work` over the whole output, or over one ``box`` of it."""
    return leaky_relu16_work(q).for_stripe(q.out_shape if box is None else box)


def leaky_relu16_ops(q, ifm: FmSlot, ofm: FmSlot, work: int, block, place=None) -> list:
    """An int16 LEAKY_RELU of ``ifm`` into ``ofm`` (whole tensors or one stripe's boxes): the
    alpha branch requantized into ``ofm``, the identity branch into the work block at
    ``work``, then one elementwise operation of the two written over ``ofm`` (it reads each
    element before writing it, as Vela lets an OFM overwrite its IFM). For ``alpha >= 0``
    that is Vela 5.2's form, their MAX (MIN for alpha > 1); a negative alpha's branch is
    requantized by ``|alpha|`` and subtracted (:func:`_negated_alpha_ops`). Every
    requantization is TFLite Micro's ``MultiplyByQuantizedMultiplier`` with its
    double-precision multiplier (``compute.leaky_relu``), in the pool's TFL rounding;
    ``leaky_relu.two_branch_refusal`` checks the form on every code. ``place(fm, slot)`` puts
    a stripe's boxes where their buffers hold them."""
    api = vela_api()
    alpha = float(q.attrs["alpha"])
    why = leaky_relu.two_branch_refusal("int16", q.in_q[0], q.out_q, alpha)
    if why:
        raise UnsupportedOperatorError(q.tflite_name, why)
    if alpha < 0:
        return _negated_alpha_ops(q, ifm, ofm, work, block, place)
    ratios = leaky_relu.scales(q.in_q[0], q.out_q, alpha)
    identity = dataclasses.replace(ofm, region=SCRATCH_REGION, offset=work)
    located = place or (lambda fm, slot: None)
    ops = []
    for dst, (m, shift) in ((ofm, ratios.alpha_multiplier),
                            (identity, ratios.identity_multiplier)):
        npu = _identity_pool(ifm, dst)
        npu.rescale = _explicit(m, 31 - shift)
        npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        located(npu.ifm, ifm)
        located(npu.ofm, dst)
        ops.append(npu)
    pick = api.NpuElementWiseOp.MAX if alpha <= 1 else api.NpuElementWiseOp.MIN
    npu = api.NpuElementWiseOperation(pick)
    npu.ifm, npu.ifm2, npu.ofm = feature_map(ofm), feature_map(identity), feature_map(ofm)
    npu.rounding_mode = api.NpuRoundingMode.TFL
    npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    located(npu.ifm, ofm)
    located(npu.ofm, ofm)
    ops.append(npu)
    return _named(ops, q, ("alpha", "identity", "select"), block)


def _named(ops: list, q, names: tuple[str, ...], block) -> list:
    """``ops`` (an int16 LEAKY_RELU's three operations), each with its block chosen and its
    name, ``<kind>_<name>``."""
    for npu, name in zip(ops, names):
        npu.block_config = block(npu)
        npu.name = f"{q.kind.value}_{name}"
    return ops


def _negated_alpha_ops(q, ifm: FmSlot, ofm: FmSlot, work: int, block, place=None) -> list:
    """A negative alpha's three operations (``compute.leaky_relu.negated_branches``): the
    ``|alpha|`` branch into ``ofm`` at zero point ``z`` clamped above at ``z``, the identity
    branch into the work block clamped below at the output's zero point, then ``identity -
    alpha branch`` over ``ofm``, every operand at the output's scale (the SUB's rescales are
    powers of two: exact)."""
    api = vela_api()
    s_out, zp = q.out_q
    z = leaky_relu.negated_zero_point(q.out_q)
    ratios = leaky_relu.scales(q.in_q[0], q.out_q, float(q.attrs["alpha"]))
    scaled = dataclasses.replace(ofm, scale=s_out, zero_point=z)
    identity = dataclasses.replace(ofm, region=SCRATCH_REGION, offset=work, scale=s_out,
                                   zero_point=zp)
    located = place or (lambda fm, slot: None)
    ops = []
    for dst, slot, (m, shift), bound in (
            (scaled, ofm, ratios.alpha_multiplier, "max"),
            (identity, identity, ratios.identity_multiplier, "min")):
        npu = _identity_pool(ifm, dst)
        npu.rescale = _explicit(m, 31 - shift)
        npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        setattr(npu.activation, bound, real_bound(dst.zero_point, s_out, dst.zero_point))
        located(npu.ifm, ifm)
        located(npu.ofm, slot)
        ops.append(npu)
    npu = api.NpuElementWiseOperation(api.NpuElementWiseOp.SUB)
    npu.ifm, npu.ifm2 = feature_map(identity), feature_map(scaled)
    npu.ofm = feature_map(dataclasses.replace(ofm, scale=s_out, zero_point=zp))
    npu.rounding_mode = api.NpuRoundingMode.TFL
    npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    located(npu.ifm2, ofm)
    located(npu.ofm, ofm)
    ops.append(npu)
    return _named(ops, q, ("alpha", "identity", "negate"), block)


def requantize_op(q, ifm: FmSlot, ofm: FmSlot):
    """The pooling operation of one requantization (its fused clamp included); no block
    config yet."""
    m, shift = requantize_scale(q)
    npu = _identity_pool(ifm, ofm)
    npu.rescale = _explicit(m, shift)
    npu.activation = activation(q, ofm)
    return npu


def before(q, flash, lut_address: int) -> list:
    """What must run before each operation of ``q``: its table's DMA for a LUT operator
    (again for every stripe: another operation's block may use the SHRAM banks in between),
    nothing for a requantization."""
    return [lut_dma(q, flash, lut_address)] if q.kind in LUT_KINDS and not _is_activation16(q) \
        else []


def npu_op(q, ifm: FmSlot, ofm: FmSlot):
    """The one block operation of a table or requantization operator over ``ifm`` (any box
    of the tensor: every output element reads only its own input element); no block config
    yet."""
    if _is_activation16(q):
        npu = activation16_op(q, ifm, ofm)
    elif q.kind in LUT_KINDS:
        npu = lut_op(q, ifm, ofm)
    elif q.kind in REQUANTIZE_KINDS:
        npu = requantize_op(q, ifm, ofm)
    else:
        raise UnsupportedOperatorError(q.tflite_name, "no table or requantization form")
    npu.name = q.kind.value
    return npu
