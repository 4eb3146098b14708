"""Arm Ethos-U (U55 / U65 / U85) backend.

Constraints follow Vela's published SUPPORTED_OPS list: int8/uint8 (int16 for some operators)
tensors of at most 4-D with every dimension in [1, 65535], batch 1; conv2d / depthwise with
strides 1..3, dilated kernel height <= 64 and dilated kernel area <= 4096, 8-bit constant
weights whose per-channel sum |w - zp| <= 127 * 65536, an int32 1-D bias (int64 within 40
bits with int16 activations, TFLite's 16x8 kernels); depthwise depth
multiplier > 1 only with one input channel (a dilation past 2 as a kernel spread with zero
taps); pools with strides 1..3 (an average pool's width stride any: one pool per output
column) and kernels up to 256 high
and 65536 in area (SAME-padded average pools up to 8x8); per-axis quantization only for
convolutions and fully connected; a single-window pool (global pooling) has no stride limit; mean
over H, W or both (of NHWC, a 3-D or 2-D tensor padded to it; one kernel of <= 64 rows, 4096
taps; more rows over both: one row of H*W, as Vela); add / mul with broadcasting only along
dimensions of
size 1; softmax with equal input and output shapes and types (or int8 -> int16), beta >= 0 and
H*W <= 65535; logistic, tanh, leaky relu and hard swish (a LUT on the NPU; no specific
constraints); bilinear and nearest resize by one
1x/2x/4x/8x factor (bilinear half-pixel centres: 2x); pad of a 3-D/4-D tensor without batch padding,
filled with the zero point; split (each output a slice; Vela's axis and even-split rules hold for
every valid SPLIT); reshape (of any batch, up to 8-D: an alias of its bytes); concatenate;
requantize; REDUCE_MAX / REDUCE_MIN over H and W
(one max pool up to 256 rows and 65536 elements) and SUM (one depthwise convolution up to 64 rows
and 4096 elements), and past those (MEAN too) pools of bands of rows (``ops_reduce_split``);
a pool of one output row or column takes any stride along it; ARG_MAX along the depth (at most
127 channels, 8-bit codes into int32 or int64, any height and width: cut into pieces the
registers take);
PRELU and ELU; MIRROR_PAD of any axis of up to 5-D (a batch or an outer index: copies of whole
inner blocks); REVERSE_V2 (an axis up to 1024) of height, width and depth and TILE (up to
1024 copies) of any axis; transpose, any permutation of up to 8-D of any batch (int32 too); int8
BATCH_MATMUL up to 4-D (reduced axis and columns up to 65536). DEPTH_TO_SPACE
is not on Vela's list and stays on the host.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ethos_arch.accelerators import DEFAULT_ACCELERATOR, names
from ethos_arch.mean_window import mean_window, window_refusal
from ethos_arch.ops import Op
from planner.devices import ETHOS_U55, ETHOS_U65
from tvm_ethos.backends.base import (
    BACKEND_API_VERSION,
    EmulatorLowering,
    LayerSupport,
    NpuBackend,
    OptionSpec,
    Plugin,
)
from tvm_ethos.backends.ethos_u import (
    ops_argmax,
    ops_reduce,
    ops_reduce_depth,
    ops_reduce_split,
    ops_softmax16,
    ops_transpose_conv,
    ops_wide_stride,
)
from tvm_ethos.backends.ethos_u.npu_ops import MAX_RANK, pool_strides
from tvm_ethos.backends.ethos_u.ops_batch_matmul import reduced_depth
from tvm_ethos.backends.ethos_u.ops_fc import row_plane, rows_of
from tvm_ethos.backends.ethos_u.ops_movement import copy_dtype
from tvm_ethos.backends.ethos_u.payload_format import ETHOS_U_PAYLOAD_FORMAT
from tvm_ethos.backends.ethos_u.stream_report_lines import stream_report_lines
from tvm_ethos.backends.npu_common import (
    NPU_CAPABILITIES,
    NpuCodegen,
    common_npu_checks,
    reshape_rank,
    weight_sum_ok,
)
from tvm_ethos.compute import (
    add_sub,
    float_lut16,
    int16x8,
    leaky_relu,
    prelu,
    requantize32,
    squared_difference,
)
from tvm_ethos.compute.relu_requant import LITERT_CLIPS
from tvm_ethos.errors import CompileError
from tvm_ethos.runtime.payloads import register_payload_format

BACKEND_ID = "ethos-u"
#: The accelerator_config values: every Ethos-U configuration of the accelerator registry.
ACCELERATOR_CONFIGS = names(lambda a: a.backend_id == BACKEND_ID)
U_TYPES = ("int8", "uint8", "int16")
#: int64: the bias of TFLite's 16x8 kernels (``_int16_bias``)
BIAS_TYPES = ("int32", "int64")


def _strides(q, lo=1, hi=3):
    sh, sw = q.attrs["strides"]
    if not (lo <= sh <= hi and lo <= sw <= hi):
        return [f"strides {sh}x{sw}; stride values must be in the range [{lo}, {hi}]"]
    return []


def _conv(q, o):
    r = _strides(q)
    kh, kw = q.weights.shape[0], q.weights.shape[1]
    dh, dw = q.attrs["dilation"]
    dkh, dkw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    if not 1 <= dkh <= 64:
        r.append(f"dilated kernel height {dkh}; must be in the range [1, 64]")
    if not 1 <= dkh * dkw <= 4096:
        r.append(f"dilated kernel area {dkh * dkw}; must be in the range [1, 4096]")
    if not weight_sum_ok(q):
        r.append("the sum of the weights of an output channel exceeds 8323072")
    if q.bias is not None and q.bias.ndim != 1:
        r.append("bias must be 1-D")
    if q.kind == Op.DEPTHWISE_CONV2D:
        m = q.attrs.get("depth_multiplier", 1)
        if m > 1 and q.in_shapes[0][3] != 1:
            r.append(
                f"depth multiplier {m} with {q.in_shapes[0][3]} input channels; multipliers > 1 "
                "need one input channel"
            )
    return r


def _reshape(q, o):
    """Vela's RESHAPE, EXPAND_DIMS and SQUEEZE have no rank limit: the same bytes read with
    another shape. The stream's tensors hold up to :data:`MAX_RANK` axes (``npu_ops.shape3``,
    TFLite's limit), so one is taken to, from or within any rank a TFLite model has, whatever
    it regroups. The 6-D reshapes of TVM's
    DEPTH_TO_SPACE (not on Vela's list, so on the host) never come here: the partition leaves
    them to their chain, unless the source says the chain is the model's own
    (``partition_chains``)."""
    rank = len(q.in_shapes[0])
    return ([f"input is {rank}-D; at most {MAX_RANK}-D"] if rank > MAX_RANK else []) + \
        reshape_rank(q, o, max_rank=MAX_RANK)


def _transpose_conv(q, o):
    """Vela's TRANSPOSE_CONV: strides 1x1 or 2x2 (the NPU's 2x upscale; a width stride of 2
    over one row too), the output shape the upscale gives, a kernel that covers TFLite's
    cropping, then the CONV_2D's limits."""
    why = ops_transpose_conv.stride_refusal(q) or ops_transpose_conv.shape_refusal(q)
    if why:
        return [why]
    if min(ops_transpose_conv.conv_padding(q)) < 0:
        return [f"a {q.weights.shape[0]}x{q.weights.shape[1]} transpose conv kernel shorter "
                f"than its stride {q.attrs['strides']} and cropping {q.attrs['padding']}"]
    return _conv(ops_transpose_conv.as_conv(q), o)


def _fc(q, o):
    r = []
    if q.bias is not None and q.bias.ndim != 1:
        r.append("bias must be 1-D")
    return r


def _int16_bias(q, o):
    """int16 activations (TFLite's 16x8 kernels), where TFLite wraps to 32 bits what the
    NPU's wider datapath keeps: an int64 bias within the NPU's 40 bits; with an int32 bias
    every sum within 32 bits (TFLite's int32 accumulator); and every scaled sum within 32
    bits (TFLite's requantization returns int32). A sum is at most 32768 * sum |w| +
    |bias| per output channel."""
    if q.bias is None or q.weights is None:
        return []
    if q.in_dtypes[0] != "int16":
        return [] if str(q.bias.dtype) == "int32" else [
            f"a {q.bias.dtype} bias with {q.in_dtypes[0]} activations; int64 only with int16"]
    bias = np.abs(np.asarray(q.bias, np.int64))
    if int16x8.wide_accumulator(q.in_dtypes[0], q.bias) and bias.max(initial=0) >= 1 << 39:
        return [f"an int64 bias of magnitude {int(bias.max())}; the NPU's bias is 40 bits"]
    w = np.abs(np.asarray(q.weights, np.int64))
    per_channel = w.sum(axis=1) if q.kind == Op.FULLY_CONNECTED else \
        w.reshape(-1, w.shape[-1]).sum(axis=0)
    bound = 32768 * per_channel + bias
    if not int16x8.wide_accumulator(q.in_dtypes[0], q.bias) and bound.max(initial=0) >= 1 << 31:
        return ["int16 activations with an int32 bias whose sums may leave 32 bits, where "
                "TFLite's int32 accumulator wraps"]
    if q.in_q and q.out_q is not None:
        ratio = (float(np.float32(q.in_q[0][0])) * np.asarray(q.w_scale, np.float64).ravel()
                 / float(np.float32(q.out_q[0])))
        if (bound * ratio).max(initial=0) >= 2.0 ** 31:
            return ["int16 activations whose scaled sums may leave 32 bits, where TFLite's "
                    "requantization wraps"]
    return []


def _as_rows(q):
    """FULLY_CONNECTED reads its input as rows of the weights' depth whatever its shape: the
    NPU's limits apply to that rows x depth view. A batch of 4-D inputs is taken when each is
    one row (N x 1 x 1 x depth, a 1x1 convolution to the planner, which has no part for a
    batch of 2-D planes)."""
    if q.kind != Op.FULLY_CONNECTED or q.weights is None or (
            len(q.in_shapes[0]) == 4 and tuple(q.in_shapes[0][1:3]) != (1, 1)):
        return q
    depth, units = int(q.weights.shape[1]), int(q.weights.shape[0])
    rows = rows_of(q)
    h, w = row_plane(rows) or (1, rows)   # no plane: the rows' count is refused
    return dataclasses.replace(q, in_shapes=[(h, w, depth)] + list(q.in_shapes[1:]),
                               out_shape=(h, w, units))


def _as_copy(q):
    """A TRANSPOSE moves elements whatever its rank or batch: each of its copies is a box of
    at most three dimensions cut to the NPU's registers, so the common checks see only its
    types (its tensors as one element each), an int32 tensor's as the int8 codes of its
    bytes (``ops_movement.copy_dtype``)."""
    if q.kind == Op.RESHAPE:
        return _unbatched(q)
    if q.kind in (Op.MIRROR_PAD, Op.TILE) or q.kind == Op.SPLIT and len(q.in_shapes[0]) == 4:
        return _rows_folded(q)
    if q.kind != Op.TRANSPOSE:
        return q
    return dataclasses.replace(q, in_shapes=[(1,)] * len(q.in_shapes), out_shape=(1,),
                               in_dtypes=[copy_dtype(dt) for dt in q.in_dtypes],
                               out_dtype=copy_dtype(q.out_dtype))


def _unbatched(q):
    """A RESHAPE is an alias of its input's bytes in the stream (``STREAM_OPS``): a batch
    above 1 reads the same bytes, so the common checks see its tensors with a batch of 1,
    and one of more axes as the stream holds it (``npu_ops.shape3``: the axes before the last
    two folded into the height; :func:`_reshape` refuses more than :data:`MAX_RANK`)."""
    def one(shape):
        shape = tuple(int(d) for d in shape)
        if len(shape) >= 5:
            return (1, int(np.prod(shape[:-2], dtype=np.int64))) + shape[-2:]
        return (1,) + shape[1:] if len(shape) == 4 else shape

    return dataclasses.replace(q, in_shapes=[one(s) for s in q.in_shapes],
                               out_shape=one(q.out_shape))


def _rows_folded(q):
    """A MIRROR_PAD's, TILE's or SPLIT's copies read and write its tensors with every axis
    before the last two folded into the height (``ops_movement.mirror_pad_copies``,
    ``tile_copies``, a 4-D ``split_copies``: a batch or a 5-D tensor's outer index is rows
    of the same bytes), so the common checks see that view, a batch of 1."""
    def one(shape):
        shape = tuple(int(d) for d in shape)
        if len(shape) < 4:
            return shape
        return (1, int(np.prod(shape[:-2], dtype=np.int64))) + shape[-2:]

    return dataclasses.replace(q, in_shapes=[one(s) for s in q.in_shapes],
                               out_shape=one(q.out_shape))


def _batch_as_rows(q):
    """An 8-bit SOFTMAX computes each row (over the last axis) from itself, over whole
    tensors (``STREAM_OPS``): the stream holds them with the batch folded into the height
    (``npu_ops.shape3``), as Vela takes them, so the common checks see that view, a batch
    of 1. (A PRELU is striped by the plan, whose stripes are rows of one batch: not so.)"""
    if q.kind == Op.SOFTMAX and not ops_softmax16.is_softmax16(q) or \
            q.kind == Op.PRELU and q.attrs.get("alpha_shape", (1,))[0] == 1:
        return _rows_folded(q)
    return q


def _as_matrices(q):
    """A BATCH_MATMUL's operands and output are matrices of batches: the stream folds the
    batch dimensions into rows (``ops_batch_matmul``), so the common checks see each tensor
    as (batches, rows, columns); its own limits are :func:`_batch_matmul`'s."""
    if q.kind != Op.BATCH_MATMUL:
        return q

    def folded(shape):
        shape = tuple(int(d) for d in shape)
        return (int(np.prod(shape[:-2], dtype=np.int64)),) + shape[-2:]

    return dataclasses.replace(q, in_shapes=[folded(s) for s in q.in_shapes],
                               out_shape=folded(q.out_shape))


def _batch_matmul(q, o):
    """Vela 5.2's BATCH_MATMUL (its MatMul): the reduced axis and the output's columns at most
    65536; at most 4-D (Vela 5.2 folds only the two dimensions before the matrices into its
    rows: a 5-D product it computes only in part)."""
    r = []
    rank = max(len(s) for s in (*q.in_shapes, q.out_shape))
    if rank > 4:
        r.append(f"a {rank}-D BATCH_MATMUL; the NPU takes at most 4-D")
    k, n = reduced_depth(q), int(q.out_shape[-1])
    if k > 65536 or n > 65536:
        r.append(f"a BATCH_MATMUL reducing {k} into {n} columns; at most 65536 each")
    return r


def _as_codes(q):
    """ARG_MAX writes indices, not codes: the common checks see its output as its input's
    type (``_arg_max`` holds the indices' own rules); its stream cuts every box into pieces
    the registers take (``ops_argmax.pieces``), so they see each dimension but a 4-D
    tensor's batch as at most 1 (an empty one stays empty)."""
    if q.kind != Op.ARG_MAX:
        return q

    def cut(shape):
        return tuple(int(d) if k == 0 and len(shape) == 4 else min(int(d), 1)
                     for k, d in enumerate(shape))

    return dataclasses.replace(q, out_dtype=q.in_dtypes[0],
                               in_shapes=[cut(s) for s in q.in_shapes], out_shape=cut(q.out_shape))


def _as_softmax16_rows(q):
    """An int16 SOFTMAX runs over rows of its depth whatever its shape (``ops_softmax16``: a
    1 x rows x depth map): the common checks see that view where it fits a feature map, its
    own limits (``ops_softmax16.refusals``) name what does not."""
    if not ops_softmax16.is_softmax16(q) or ops_softmax16.refusals(q):
        return q
    rows, depth = ops_softmax16.geometry(q)
    return dataclasses.replace(q, in_shapes=[(1, rows, depth)], out_shape=(1, rows, depth))


def _arg_max(q, o):
    """Vela's ARG_MAX: along the depth, at most 127 channels (each code and its channel's
    index packed into one int16, the index in the seven low bits); int32 or int64 indices;
    any number of pixels (one max pool of a row per pixel for each piece of at most 65536,
    ``ops_argmax``)."""
    r = []
    c = q.in_shapes[0][-1]
    if c > ops_argmax.MAX_DEPTH:
        r.append(f"ARG_MAX over a depth of {c}; the NPU packs the index into 7 bits, at most "
                 f"{ops_argmax.MAX_DEPTH} channels")
    if q.out_dtype not in ("int32", "int64"):
        r.append(f"ARG_MAX into {q.out_dtype}; the stream writes int32 or int64 indices")
    return r


def _pool_strides(q):
    """Strides 1..3; an average pool's width stride any (one pool per output column,
    ``ops_wide_stride``); any stride along an axis of one output element (one window: the
    NPU steps by 1 there, ``npu_ops.pool_strides``)."""
    sh, sw = q.attrs["strides"]
    eff = pool_strides((sh, sw), tuple(q.out_shape[1:3]))
    if q.kind != Op.AVG_POOL2D or not ops_wide_stride.wide_stride(q):
        return [] if all(1 <= s <= 3 for s in eff) else _strides(q)
    if not 1 <= eff[0] <= 3:
        return [f"strides {sh}x{sw}; an average pool's height stride must be in the range "
                "[1, 3] (its width stride may be any)"]
    return []


def _pool(q, o):
    # a pool with a single window (1x1 output, window covering the input) has no effective stride
    r = [] if ops_wide_stride.single_window(q) else _pool_strides(q)
    ph, pw = q.attrs["pool_size"]
    same = any(q.attrs["padding"])
    if q.kind == Op.AVG_POOL2D and same:
        if not (1 <= ph <= 8 and 1 <= pw <= 8):
            r.append(f"SAME-padded average pool {ph}x{pw}; kernel must be at most 8x8")
    else:
        if not 1 <= ph <= 256:
            r.append(f"pool height {ph}; must be in the range [1, 256]")
        if not 1 <= ph * pw <= 65536:
            r.append(f"pool area {ph * pw}; must be in the range [1, 65536]")
    return r


def _mean(q, o):
    """A MEAN reducing the height, the width or both of its input's NHWC view (rank 2 to 4,
    ``ethos_arch.mean_window``), in one depthwise kernel as ``npu_ops.mean_op`` emits it."""
    axis = q.attrs.get("axis")
    shape = tuple(q.in_shapes[0])
    # a batch above one is refused by the common checks, naming it
    window = mean_window((1,) + shape[1:] if len(shape) == 4 else shape, axis or ())
    if window is None:
        return [f"mean over axes {axis} of a {len(q.in_shapes[0])}-D tensor; axis indices "
                "must correspond to height and width (of NHWC, or the first two of a 3-D "
                "tensor)"]
    if window_refusal(window) and ops_reduce_split.bands(q) is not None:
        why = ops_reduce_split.refusal(q)   # the pools of bands of rows
        return [why] if why else []
    why = window_refusal(window)
    return [why] if why else []


def _reduce(q, o):
    """REDUCE_MAX and REDUCE_MIN: a single-window max pool (its kernel limits); SUM: MEAN's
    depthwise convolution in one kernel (at most 64 rows and 4096 taps, as ``mean_op``)."""
    if len(q.in_shapes[0]) != 4:
        return [f"{q.tflite_name} of a {len(q.in_shapes[0])}-D tensor; the NPU reduces NHWC"]
    if ops_reduce_split.bands(q) is not None:   # past one kernel: pools of bands of rows
        why = ops_reduce_split.refusal(q)
        return [why] if why else []
    if ops_reduce_depth.over_depth(q):   # a convolution or max pools (ops_reduce_depth)
        return ops_reduce_depth.refusals(q)
    if tuple(q.attrs.get("axis") or ()) not in ops_reduce.SPATIAL_AXES:
        return [f"{q.tflite_name} over axes {q.attrs.get('axis')}; the NPU reduces the height, "
                "the width or both of NHWC, or its depth with any of them"]
    h, w = ops_reduce.reduction_window(q).kernel
    if q.kind in (Op.REDUCE_MAX, Op.REDUCE_MIN) and not (h <= 256 and h * w <= 65536):
        return [f"{q.tflite_name} over {h}x{w}; one max pool takes at most 256 rows and 65536 "
                "elements"]
    if q.kind == Op.REDUCE_SUM and not (h <= 64 and h * w <= 4096):
        return [f"SUM over {h}x{w}; one depthwise convolution takes at most 64 rows and 4096 "
                "elements"]
    return []


def _binary(q, o):
    a, b = q.in_shapes
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    for x, y in zip(a, b):
        if x != y and 1 not in (x, y):
            return [f"shapes {q.in_shapes[0]} and {q.in_shapes[1]} do not broadcast"]
    if q.in_dtypes[0] != q.in_dtypes[1]:
        return ["both input data types must match"]
    return []


def _add_sub(q, o):
    """ADD / SUB: a quantization on which the Ethos-U55/U65's single rounding of the rescaled
    input is TFLite Micro's double one for every input (``compute.add_sub.npu_refusal``)."""
    r = _binary(q, o)
    if not r and q.out_q is not None and len(q.in_q) == 2 and q.in_dtypes[0] in ("int8",
                                                                                   "int16"):
        why = add_sub.npu_refusal(q.in_q[0], q.in_q[1], q.out_q, (q.act_min, q.act_max),
                                  subtract=q.kind == Op.SUB,
                                  bits=8 if q.in_dtypes[0] == "int8" else 16)
        if why:
            r.append(why)
    return r


def _squared_difference(q, o):
    """Seven operations (``ops_squared_difference``; eight where both operands broadcast, the
    first expanded to the output's shape), and a quantization on which they are TFLite
    Micro's kernel (int8 or int16) for every pair of codes
    (``compute.squared_difference.npu_refusal``)."""
    r = _binary(q, o)
    if not r and q.out_q is not None and len(q.in_q) == 2:
        why = squared_difference.npu_refusal(q.in_q[0], q.in_q[1], q.out_q,
                                             (q.act_min, q.act_max), q.in_dtypes[0])
        if why:
            r.append(why)
    return r


def _same_q(q, o):
    """Vela: MINIMUM / MAXIMUM with both inputs quantized as the OFM (TFLite compares codes)."""
    r = _binary(q, o)
    if q.out_q is not None and any(tuple(iq) != tuple(q.out_q) for iq in q.in_q):
        r.append(f"input quantization {list(q.in_q)} and output {q.out_q}; both input "
                 "quantization parameters must match the OFM's")
    return r


def _relu(q, o):
    """RELU requantizes; TFLite Micro's RELU6 clamps the input codes and keeps their
    quantization (the converter quantizes it with the input's parameters), so another clamp
    only with the output quantized as the input. RELU_0_TO_1 (``clip(0,1)``) and RELU_N1_TO_1
    (``clip(-1,1)``) have no TFLite Micro kernel; LiteRT's (``QuantizedReluX``) requantize as
    RELU does (their multiplier the float32 quotient, ``compute.relu_requant``), so they take
    any output quantization."""
    if q.float_activation and q.float_activation.startswith("clip") and q.out_q is not None \
            and q.float_activation not in LITERT_CLIPS and tuple(q.in_q[0]) != tuple(q.out_q):
        return [f"{q.float_activation} from quantization {q.in_q[0]} to {q.out_q}; the "
                "output must be quantized as the input"]
    return []


def _softmax(q, o):
    """Vela: matching shapes and types (semantic checks), beta >= 0, IFM H*W <= 65535; an
    int16 one what its stream takes (``ops_softmax16.refusals``)."""
    r = []
    if tuple(q.in_shapes[0]) != tuple(q.out_shape):
        r.append("IFM and OFM shapes must match")
    if q.in_dtypes[0] != q.out_dtype and (q.in_dtypes[0], q.out_dtype) != ("int8", "int16"):
        r.append("IFM and OFM data types must match (or int8 -> int16)")
    if ops_softmax16.is_softmax16(q):
        r.extend(ops_softmax16.refusals(q))
    if q.attrs.get("beta", 1.0) < 0:
        r.append(f"beta {q.attrs['beta']:g}; beta value needs to be positive")
    shp = (1,) * (4 - len(q.in_shapes[0])) + tuple(q.in_shapes[0])
    if shp[1] * shp[2] > 65535:
        r.append(
            f"IFM height x width {shp[1] * shp[2]}; the product must be in the range [1, 65535]"
        )
    return r


def _resize_scale(q, o):
    """Vela's constraint_resize and resize_attrs: a 1x1 input, or an equal shape, or one
    1x/2x/4x/8x factor for both axes (of H-1, W-1 with align_corners)."""
    _, ih, iw, _ = q.in_shapes[0]
    _, oh, ow, _ = q.out_shape
    ac = q.attrs.get("align_corners", False)
    if (ih, iw) == (1, 1) or tuple(q.in_shapes[0]) == tuple(q.out_shape):
        return []
    if ac:
        fh = (oh - 1) / (ih - 1) if ih != 1 else 1
        fw = (ow - 1) / (iw - 1) if iw != 1 else 1
    else:
        fh, fw = oh / ih, ow / iw
    ok = fh in (1.0, 2.0, 4.0, 8.0) and fw in (1.0, 2.0, 4.0, 8.0)
    if ok and oh != 1 and ow != 1:
        ok = fh == fw
    elif ok:
        ok = (fh == ih == 1) or (fw == iw == 1)
    if ok:
        return []
    return [f"resize {ih}x{iw} -> {oh}x{ow} (align_corners={ac}); the scale must be "
            "1x/2x/4x/8x, equal for height and width"]


def _resize(q, o):
    """RESIZE_BILINEAR: the scale rule, and (constraint_resizebi_half_pixel_centers_dims)
    half-pixel centres only for 2x (or a 1x1 input)."""
    _, ih, iw, _ = q.in_shapes[0]
    _, oh, ow, _ = q.out_shape
    r = _resize_scale(q, o)
    if (
        q.attrs.get("half_pixel_centers", False)
        and (ih, iw) != (1, 1)
        and (oh, ow) != (2 * ih, 2 * iw)
    ):
        r.append(
            f"half-pixel centres with {ih}x{iw} -> {oh}x{ow}; only a 2x scale (or a 1x1 input)"
        )
    return r


def _pad(q, o):
    """Vela's constraint_pad_shape and constraint_padding_dimensions: a 3-D or 4-D tensor, no
    batch padding; the borders are copies of the fill code from flash, so a PADV2's constant
    other than the zero point pads as well (Vela 5.2 takes that form too)."""
    r = []
    pads = q.attrs["pad_width"]
    if len(pads) not in (3, 4):
        r.append(
            f"padding of a {len(pads)}-D tensor; the pad tensor must have the shape [3,2] or [4,2]"
        )
    elif len(pads) == 4 and any(pads[0]):
        r.append(f"batch padding {pads[0]}; the pad tensor can only pad height, width and depth")
    return r


def _transpose(q, o):
    """Any constant permutation: a sequence of strided copies whose boxes the stream cuts to
    the NPU's registers (``ops_movement.transpose_steps``); the stream holds tensors of up
    to eight axes (``npu_ops.shape3``), as Vela 5.2 takes. An int32 tensor moves as its
    bytes (``ops_movement.copy_form``), so any permutation of one too."""
    rank = len(q.in_shapes[0])
    if rank > MAX_RANK:
        return [f"a {rank}-D permutation; the NPU's transpose takes at most "
                f"{MAX_RANK}-D"]
    return []


def _reverse(q, o):
    """REVERSE_V2: one copy per index of the reversed axis (height, width or depth)."""
    rank, axis = len(q.in_shapes[0]), q.attrs["axis"]
    if rank == 4 and axis == 0:
        return ["REVERSE_V2 of the batch axis; the NPU reverses height, width or depth"]
    n = q.in_shapes[0][axis]
    if n > MAX_REVERSE:
        return [f"REVERSE_V2 of an axis of {n}; the stream copies each index, at most "
                f"{MAX_REVERSE}"]
    return []


#: the longest axis REVERSE_V2 is streamed for (one copy per index); the most copies of TILE
MAX_REVERSE = MAX_TILES = 1024


def _tile(q, o):
    """TILE: one copy of the input per repetition (of a 4-D tensor's batch too, folded into
    its rows), each input batch apart where the height repeats too (``tile_copies``)."""
    reps = q.attrs["reps"]
    n = 1
    for r in reps:
        n *= r
    shape = q.in_shapes[0]
    if len(shape) == 4 and int(shape[0]) > 1 and int(reps[1]) > 1:
        n *= int(shape[0])
    if n > MAX_TILES:
        return [f"TILE by {tuple(reps)}: {n} copies, at most {MAX_TILES}"]
    return []


def _none(q, o):
    return []


def _requantize(q, o):
    """A QUANTIZE into int32: the pool's int32 OFM where it is TFLite Micro's kernel
    (``compute.requantize32``); between 8- and 16-bit types every quantization."""
    if q.out_dtype != "int32":
        return []
    why = requantize32.npu_refusal(q.in_dtypes[0], q.in_q[0], q.out_q)
    return [why] if why else []


def _as_wide_codes(q):
    """A QUANTIZE into int32 writes TFLite's int32 requantization: the common checks see its
    output as its input's type (``_requantize`` holds the int32 output's own rules)."""
    if q.kind != Op.REQUANTIZE or q.out_dtype != "int32":
        return q
    return dataclasses.replace(q, out_dtype=q.in_dtypes[0])


def _split(q, o):
    """Vela's constraint_stridedslice_stride_values: a stride over height or width only (the
    NPU reads a feature map's rows and columns through strides, its depth densely)."""
    stride, rank = q.attrs.get("stride", 1), len(q.in_shapes[0])
    if stride != 1 and q.attrs["axis"] not in (rank - 3, rank - 2):
        return [f"a slice with stride {stride} along axis {q.attrs['axis']} of a {rank}-D "
                "tensor; the NPU strides over height or width only"]
    return []


def _float_table16(q, o):
    """int8: a LUT. int16 (EXP, LOG): the 16-bit LUT of TFLite's interpolated table, where
    the NPU's saturating lookup gives TFLite's wrapping one on every code
    (``compute.float_lut16.npu_refusal``)."""
    if q.in_dtypes[0] != "int16" or q.out_q is None or not q.in_q:
        return []
    why = float_lut16.npu_refusal(q.kind, q.in_q[0], q.out_q)
    return [why] if why else []


def _leaky_relu(q, o):
    """int8 and uint8: a LUT. int16: two requantizations and their MAX / MIN, or their
    difference for a negative alpha (``ops_lut.leaky_relu16_ops``), where that is TFLite
    Micro's kernel on every code."""
    if q.in_dtypes[0] != "int16" or q.out_q is None or not q.in_q:
        return []
    why = leaky_relu.two_branch_refusal("int16", q.in_q[0], q.out_q, float(q.attrs["alpha"]))
    return [why] if why else []


def _prelu(q, o):
    """Four operations (``ops_prelu``), TFLite's kernel wherever its int32 left shifts do not
    wrap (``compute.prelu.npu_refusal``)."""
    if q.out_q is None or not q.in_q or "alpha_q" not in q.attrs:
        return []
    why = prelu.npu_refusal(q.in_dtypes[0], q.in_q[0], q.attrs["alpha_q"], q.out_q,
                            q.attrs["alpha"])
    return [why] if why else []


def _per_axis(q, o):
    """Vela: per-axis quantization only for the convolutions and fully connected."""
    if q.per_channel and q.kind not in (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED):
        return [
            "per-axis quantization is only supported for CONV_2D, DEPTHWISE_CONV_2D and "
            f"FULLY_CONNECTED, not {q.tflite_name}"
        ]
    return []


CHECKS = {
    Op.CONV2D: lambda q, o: _conv(q, o) + _int16_bias(q, o),
    Op.DEPTHWISE_CONV2D: lambda q, o: _conv(q, o) + _int16_bias(q, o),
    Op.TRANSPOSE_CONV2D: _transpose_conv,
    Op.FULLY_CONNECTED: lambda q, o: _fc(q, o) + _per_axis(q, o) + _int16_bias(q, o),
    Op.MAX_POOL2D: _pool,
    Op.AVG_POOL2D: _pool,
    Op.MEAN: _mean,
    Op.REDUCE_MAX: _reduce,
    Op.REDUCE_MIN: _reduce,
    Op.REDUCE_SUM: _reduce,
    Op.ARG_MAX: _arg_max,
    Op.ADD: _add_sub,
    Op.MUL: _binary,
    Op.SUB: _add_sub,
    Op.SQUARED_DIFFERENCE: _squared_difference,
    Op.MINIMUM: _same_q,
    Op.MAXIMUM: _same_q,
    Op.RELU: _relu,
    Op.ABS: _none,
    Op.SOFTMAX: _softmax,
    Op.SIGMOID: _none,
    Op.TANH: _none,
    Op.LEAKY_RELU: _leaky_relu,
    Op.HARD_SWISH: _none,
    Op.PRELU: _prelu,
    Op.BATCH_MATMUL: _batch_matmul,
    Op.ELU: _none,
    Op.RSQRT: _none,
    Op.EXP: _float_table16,
    Op.GELU: _none,
    Op.LOG: _float_table16,
    Op.NEG: _none,
    Op.RESIZE_BILINEAR: _resize,
    Op.RESIZE_NEAREST: _resize_scale,
    Op.PAD: _pad,
    Op.MIRROR_PAD: _none,
    Op.REVERSE: _reverse,
    Op.TILE: _tile,
    Op.SPLIT: _split,
    Op.REQUANTIZE: _requantize,
    Op.RESHAPE: _reshape,
    Op.CONCATENATE: _none,
    Op.TRANSPOSE: _transpose,
    # the importer converts only the LSTMs the stream takes (``ops_lstm.read_lstm``)
    Op.LSTM: _none,
}


class EthosUBackend(NpuBackend):
    """Arm Ethos-U's whole contract: the planner's Ethos-U devices, Vela's operator limits,
    the emulator, and register command streams generated through Vela's API and run on the
    functional model (``ethosu_stream``)."""

    backend_id = BACKEND_ID
    device_options = ("accelerator_config",)

    def options_schema(self):
        return {
            "accelerator_config": OptionSpec(
                DEFAULT_ACCELERATOR.name, allowed=ACCELERATOR_CONFIGS,
                help="Ethos-U configuration"
            ),
        }

    def layer_support(self):
        return LayerSupport(
            CHECKS,
            common=lambda q, o: common_npu_checks(
                _as_wide_codes(_as_codes(_as_matrices(_as_copy(_as_rows(_as_softmax16_rows(
                    _batch_as_rows(q))))))), o,
                act_types=U_TYPES, max_dim=65535, bias_types=BIAS_TYPES),
        )

    def codegen_factory(self):
        return NpuCodegen(self.backend_id)

    def capabilities(self):
        return NPU_CAPABILITIES

    def planner_device_name(self, options):
        return str(options.get("accelerator_config", DEFAULT_ACCELERATOR.name))

    def planner_sram_size(self, options):
        return None

    def planner_device_names(self):
        return ETHOS_U55 + ETHOS_U65

    def planner_solitary_ops(self):
        """What the stream table cannot emit with an operand in a cascade's ring."""
        # lazy: the stream table loads the stream generator's npu_ops; the plugin loads on
        # every tvmc start
        from tvm_ethos.backends.ethos_u.stream_ops import PLANNER_SOLITARY

        return PLANNER_SOLITARY

    def planner_work(self, layer):
        """The working memory of the operations the stream table runs ``layer`` as."""
        # lazy: as planner_solitary_ops
        from tvm_ethos.backends.ethos_u.stream_ops import planned_work

        return planned_work(layer)

    def planner_whole_output_ops(self):
        """What the stream table emits only over a whole output, from whole operands."""
        # lazy: as planner_solitary_ops
        from tvm_ethos.backends.ethos_u.stream_ops import WHOLE_OUTPUT_OPS

        return WHOLE_OUTPUT_OPS

    def emulator_lowering(self):
        # its stream and TFLite Micro's kernel round FULLY_CONNECTED alike; the NPU pads a
        # convolution's input itself, so a PAD before one is its padding (as in Vela)
        return EmulatorLowering(tflite_fc_rounding=True, fold_pads=True)

    def command_stream(self, lowered, options: dict, planned=None):
        """A register command stream through Vela's API (the ``vela`` extra): the planner's
        schedule when ``planned`` (``(match, proposal, device)``) is given
        (``stream_cascade``), else layer by layer (``stream_gen``)."""
        # lazy: the stream generator (Vela API) loads when a stream is made, not at every tvmc start
        from tvm_ethos.backends.ethos_u import stream_cascade, stream_gen

        accelerator = str(options.get("accelerator_config", DEFAULT_ACCELERATOR.name))
        try:
            if planned is not None:
                return stream_cascade.generate_planned(lowered, accelerator, *planned)
            return stream_gen.generate(lowered, accelerator)
        except CompileError:
            raise
        except Exception as err:   # Vela's own checks (asserts, size errors): no stream
            raise CompileError(f"Vela's API refused the subgraph's stream: "
                               f"{type(err).__name__}: {err}") from err

    def stream_report(self, payload, planned_peak: int | None) -> dict:
        # lazy: the functional model loads only when a stream runs, not on every tvmc start
        from ethosu_stream import StreamError
        from tvm_ethos.backends.ethos_u.stream_run import stream_report

        try:
            return stream_report(payload, planned_peak)
        except StreamError as err:
            raise CompileError(f"the functional model cannot run the generated stream: "
                               f"{err}") from err

    def stream_report_lines(self, entry):
        return stream_report_lines(entry)


plugin = Plugin(BACKEND_ID, BACKEND_API_VERSION, EthosUBackend)
# the runtime saves, reads and runs this backend's command streams through it
register_payload_format(ETHOS_U_PAYLOAD_FORMAT)
