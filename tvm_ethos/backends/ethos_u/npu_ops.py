"""One quantized operator (a :class:`~tvm_ethos.patterns.QOp`) as one Vela ``NpuOperation``.

Each builder takes the operator and where its operands live (:class:`FmSlot`) and returns a
block operation without a block config or weights; :func:`block_config` picks one and
:func:`attach_constants` encodes the weights for its depth. The integer
arithmetic must be TFLite's: the per-channel (multiplier, shift) pairs are the ones the "tir"
emulator computes (``compute.quant``), written in the NPU's form ``(multiplier, 31 - shift)``;
elementwise and pooling scales are left to Vela's generator, which derives them from the
feature maps' float scales as its own compiler does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
from dataclasses import dataclass

import numpy as np

from ethos_arch.mean_window import MeanWindow, mean_window, window_refusal
from ethos_arch.ops import Op
from planner.npu_dilation import NpuKernel, npu_kernel
from tvm_ethos.backends.ethos_u.encode_ahead import EncodeRequest, encode_request
from tvm_ethos.backends.ethos_u.shram_layouts import fitting_layout
from tvm_ethos.backends.ethos_u.stream_base import (
    Flash,
    UnsupportedOperatorError,
    fm_shape,
    kernel_key,
    uses_lut,
    vela_api,
)
from tvm_ethos.backends.ethos_u.stream_memo import remembered
from tvm_ethos.compute import int16x8, transpose_conv
from tvm_ethos.compute.quant import f32, quantize_multiplier, quantize_multipliers
from tvm_ethos.compute.requant_constants import mean_multiplier
from tvm_ethos.errors import CompileError


@dataclass(frozen=True)
class FmSlot:
    """A feature map in memory: NHWC, ``shape`` the (height, width, depth) the NPU sees."""

    region: int
    offset: int
    shape: tuple[int, int, int]
    dtype: str
    scale: float | None
    zero_point: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


#: the most axes of a tensor the stream holds (Vela 5.2's TFLite limit)
MAX_RANK = 8


def shape3(shape: tuple[int, ...], what: str) -> tuple[int, int, int]:
    """(height, width, depth) of an NHWC tensor of rank 1 to :data:`MAX_RANK`. Axes before
    the last two fold into the height (the same bytes): only an operator that reads rows
    (FULLY_CONNECTED, a reshape) passes the checks with a batch above 1, and only TRANSPOSE
    (which reads its tensors through strides of its own) with more than four axes."""
    shape = tuple(int(s) for s in shape)
    if len(shape) > MAX_RANK:
        raise UnsupportedOperatorError(
            what, f"tensor shape {shape}: the NPU takes at most {MAX_RANK}-D")
    if len(shape) >= 4:
        shape = (int(np.prod(shape[:-2], dtype=np.int64)),) + shape[-2:]
    full = (1,) * (3 - len(shape[-3:])) + shape[-3:]
    return full[0], full[1], full[2]


def feature_map(slot: FmSlot):
    api = vela_api()
    fm = api.NpuFeatureMap()
    fm.data_type = {
        "int8": api.NpuDataType.INT8,
        "uint8": api.NpuDataType.UINT8,
        "int16": api.NpuDataType.INT16,
        "int32": api.NpuDataType.INT32,
    }[slot.dtype]
    fm.region = slot.region
    h, w, c = slot.shape
    fm.shape = api.NpuShape3D(h, w, c)
    fm.tiles = api.NpuTileBox(h, 0, w, [slot.offset, 0, 0, 0])
    fm.quantization = api.NpuQuantization(slot.scale, slot.zero_point)
    fm.layout = api.NpuLayout.NHWC
    return fm


def real_bound(q: int, scale: float, zero_point: int) -> float:
    """A real value that Vela's generator quantizes back to exactly ``q`` (its activation
    registers are set from real bounds; the clamp must be the integer one TFLite applies)."""
    from ethosu.vela.numeric_util import quantise_float32

    for nudge in (0.0, 0.25, -0.25, 0.45, -0.45):
        v = (q - zero_point + nudge) * scale
        if quantise_float32(v, scale, zero_point) == q:
            return v
    raise CompileError(f"no real activation bound quantizes to {q} at scale {scale}")


def fully_connected_op(api, ifm: FmSlot, ofm: FmSlot):
    """The NpuConv2DOperation a graph-level stream (an LSTM's, an SVDF's) runs a
    FULLY_CONNECTED as: a 1x1 kernel without padding, depth first, TFLite's rounding; its
    caller sets the activation, block and weights."""
    npu = api.NpuConv2DOperation()
    npu.ifm, npu.ofm = feature_map(ifm), feature_map(ofm)
    npu.kernel = api.NpuKernel(1, 1)
    npu.padding = api.NpuPadding(0, 0, 0, 0)
    npu.block_traversal = api.NpuBlockTraversal.DEPTH_FIRST
    npu.rounding_mode = api.NpuRoundingMode.TFL
    return npu


def activation(op, out: FmSlot):
    api = vela_api()
    act = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    lo, hi = np.iinfo(np.dtype(out.dtype)).min, np.iinfo(np.dtype(out.dtype)).max
    scale = out.scale if out.scale is not None else 1.0
    if op.act_min > lo:
        act.min = real_bound(op.act_min, scale, out.zero_point)
    if op.act_max < hi:
        act.max = real_bound(op.act_max, scale, out.zero_point)
    return act


def _common(npu, op, ifm: FmSlot, ofm: FmSlot):
    api = vela_api()
    npu.ifm, npu.ofm = feature_map(ifm), feature_map(ofm)
    npu.activation = activation(op, ofm)
    npu.rounding_mode = api.NpuRoundingMode.TFL
    return npu


def read_padding(padding: tuple[int, int, int, int], ifm_hw: tuple[int, int],
                 ofm_hw: tuple[int, int], kernel_hw: tuple[int, int],
                 strides: tuple[int, int],
                 dilation: tuple[int, int] = (1, 1)) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) with the bottom and right padding cut to the rows and
    columns the last window reads past the IFM. The NPU has no IFM height or width register:
    it takes the IFM's extent from the OFM size, the dilated kernel, the stride and all four
    pads, so a trailing pad no window reads would shorten the IFM it reads (its last rows or
    columns then read as padding). Vela never writes such a pad (``calc_explicit_padding``,
    and each stripe's pad bottom is what its last window reaches)."""
    top, left, bottom, right = (int(v) for v in padding)
    (h, w), (oh, ow) = ifm_hw, ofm_hw
    (kh, kw), (sh, sw), (dh, dw) = kernel_hw, strides, dilation
    bottom = min(bottom, max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - top - h))
    right = min(right, max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - left - w))
    return top, left, bottom, right


def _padding(op, ifm: FmSlot, ofm: FmSlot, kernel_hw: tuple[int, int],
             dilation: tuple[int, int] = (1, 1)):
    pads = read_padding(op.attrs["padding"], ifm.shape[:2], ofm.shape[:2], kernel_hw,
                        op.attrs["strides"], dilation)
    return vela_api().NpuPadding(*pads)


def conv_scales(op, channels: int) -> list[tuple[int, int]]:
    """Per output channel (multiplier, NPU shift), exactly as ``te_ops`` requantizes."""
    in_scale = f32(op.in_q[0][0])
    out_scale = f32(op.out_q[0])
    ws = np.asarray(op.w_scale, dtype=np.float32).ravel()
    if op.kind == Op.FULLY_CONNECTED and ws.size == 1:
        # TFLite's per-tensor multiplier takes the product in float32
        m, s = quantize_multiplier(float(np.float32(in_scale) * np.float32(ws[0])) / out_scale)
        pairs = [(m, s)] * channels
    else:
        ws = np.broadcast_to(ws, (channels,))
        mult, shift = quantize_multipliers(
            transpose_conv.real_multipliers(op, in_scale, ws, out_scale))
        pairs = list(zip(mult.tolist(), shift.tolist()))
    if is_16x8(op):
        # TFLite's int64 requantization: the reduced multiplier, one rounding (NATURAL)
        reduced, right = int16x8.reduced_scales(*np.array(pairs, np.int64).reshape(-1, 2).T)
        return [(int(m), int(r)) for m, r in zip(reduced, right)]
    return [(int(m), 31 - int(s)) for m, s in pairs]


def is_16x8(op) -> bool:
    """A convolution, fully connected or transpose conv with int16 activations and an int64
    bias: TFLite's 16x8 kernel with its int64 accumulator, which the NPU computes with the
    reduced scales and NATURAL rounding (``compute.int16x8``). With an int32 bias TFLite
    rounds as for int8, which the NPU's TFL rounding does with the full scales."""
    return op.kind in (Op.CONV2D, Op.DEPTHWISE_CONV2D, Op.FULLY_CONNECTED,
                       Op.TRANSPOSE_CONV2D) and \
        int16x8.wide_accumulator(op.in_dtypes[0], op.bias)


def weights_ohwi(op) -> np.ndarray:
    """The weights, zero point removed, in the OHWI int16 volume ``npu_encode_weights`` takes.
    The difference is taken in int16 directly: integer wrap-around is modular, so it is the
    int16 of the exact difference, without widening every weight to int64 first."""
    w = np.asarray(op.weights)
    zp = np.asarray(op.w_zp if op.w_zp is not None else 0)
    if w.dtype.kind not in "iu" or zp.dtype.kind not in "iu":   # truncated as int64 would
        w, zp = w.astype(np.int64), zp.astype(np.int64)
    w, zp = w.astype(np.int16), zp.astype(np.int16).ravel()
    if op.kind == Op.FULLY_CONNECTED:  # (N, K)
        return np.ascontiguousarray((w - zp[0])[:, None, None, :])
    # HWIO, zero point per output channel
    ohwi = (w - np.broadcast_to(zp, (w.shape[3],))).transpose(3, 0, 1, 2)
    return np.ascontiguousarray(_spread(ohwi, op))


def conv_kernel(op) -> NpuKernel:
    """The kernel the NPU runs for a convolution (``planner.npu_dilation``): a dilation
    above 2 spread into zero taps."""
    return npu_kernel(tuple(int(v) for v in op.weights.shape[:2]),
                      tuple(op.attrs.get("dilation", (1, 1))))


def _spread(ohwi: np.ndarray, op) -> np.ndarray:
    """OHWI weights with zero taps between the source taps where the NPU's kernel spreads
    them (a dilation above 2); the weights themselves otherwise."""
    if op.kind not in (Op.CONV2D, Op.DEPTHWISE_CONV2D):
        return ohwi
    k = conv_kernel(op)
    if k.spread == (1, 1):
        return ohwi
    out = np.zeros((ohwi.shape[0], *k.kernel, ohwi.shape[3]), ohwi.dtype)
    out[:, ::k.spread[0], ::k.spread[1], :] = ohwi
    return out


def conv_op(op, ifm: FmSlot, ofm: FmSlot):
    api = vela_api()
    if op.kind == Op.DEPTHWISE_CONV2D:
        if op.attrs.get("depth_multiplier", 1) != 1:
            raise UnsupportedOperatorError(op.tflite_name, "a depth multiplier above 1")
        npu = api.NpuConvDepthWiseOperation()
    else:
        npu = api.NpuConv2DOperation()
        npu.block_traversal = api.NpuBlockTraversal.DEPTH_FIRST
    _common(npu, op, ifm, ofm)
    if is_16x8(op):
        npu.rounding_mode = api.NpuRoundingMode.NATURAL
    if op.kind == Op.FULLY_CONNECTED:
        # TFLite Micro's FULLY_CONNECTED rounds twice (MultiplyByQuantizedMultiplier), as the
        # NPU's TFL rounding does (and Vela's streams): the Ethos-U subgraph's "tir" emulator
        # rounds so too (te_ops.lower_qop's tfl_rounding). TFLite Micro has no uint8 one:
        # LiteRT's kernel defines it, one rounding (ties up), the NPU's NATURAL
        if op.in_dtypes[0] == "uint8":
            npu.rounding_mode = api.NpuRoundingMode.NATURAL
        npu.kernel = api.NpuKernel(1, 1)
        npu.padding = api.NpuPadding(0, 0, 0, 0)
    else:
        (kh, kw), (dh, dw), _ = conv_kernel(op)
        sh, sw = op.attrs["strides"]
        npu.kernel = api.NpuKernel(kw, kh, sw, sh, dw, dh)
        npu.padding = _padding(op, ifm, ofm, (kh, kw), (dh, dw))
    return npu


def pool_op(op, ifm: FmSlot, ofm: FmSlot):
    api = vela_api()
    sub = api.NpuPoolingOp.AVERAGE if op.kind == Op.AVG_POOL2D else api.NpuPoolingOp.MAX
    if op.kind == Op.AVG_POOL2D:
        # TFLite averages the stored values, zero point included, and rounds that; the NPU
        # would round the average of (x - zero point): a tie then rounds the other way
        # (TFLite requires equal input and output scales: the NPU's scale is 1 / area)
        ifm = dataclasses.replace(ifm, scale=1.0, zero_point=0)
        ofm = dataclasses.replace(ofm, scale=1.0, zero_point=0)
    npu = _common(api.NpuPoolingOperation(sub), op, ifm, ofm)
    ph, pw = op.attrs["pool_size"]
    whole = tuple(ofm.shape[:2]) == (1, 1) and (ph, pw) == tuple(ifm.shape[:2])
    sh, sw = pool_strides(op.attrs["strides"], ofm.shape[:2], single_window=whole)
    npu.kernel = api.NpuKernel(pw, ph, sw, sh)
    npu.padding = _padding(op, ifm, ofm, (ph, pw))
    pad = npu.padding
    padded = any((pad.top, pad.left, pad.bottom, pad.right))
    explicit = avg_pool_scale(ph * pw, padded) if op.kind == Op.AVG_POOL2D else None
    if explicit is not None:
        from ethosu.vela.operation import ExplicitScaling

        npu.rescale = ExplicitScaling(False, [explicit[1]], [explicit[0]])
    return npu


#: the largest stride the NPU's kernel register takes along an axis
NPU_MAX_STRIDE = 3


def pool_strides(strides: tuple[int, int], out_hw: tuple[int, int],
                 single_window: bool = False) -> tuple[int, int]:
    """The (height, width) strides a pool's kernel register takes: a stride past the NPU's 3
    along an axis of one output element is 1, as one window has no next one to step to
    (the same window, the same arithmetic); any other is the pool's own. A single window
    over the whole input (global pooling) keeps its strides as written: the block search
    reads them, and its stream stays the one it was."""
    if single_window:
        return int(strides[0]), int(strides[1])
    return tuple(1 if int(s) > NPU_MAX_STRIDE and int(n) == 1 else int(s)
                 for s, n in zip(strides, out_hw))


def avg_pool_scale(area: int, padded: bool = False) -> tuple[int, int] | None:
    """The OFM (scale, shift) an average pool of ``area`` elements gets, or None for Vela's
    own (which rounds as TFLite for every int8 sum when the area is not a power of two).
    TFLite rounds sum / (valid elements) half away from zero. Over padding the NPU divides
    by the valid elements itself, so rounding as TFLite, when the scale is the identity (what
    Vela writes there). Without padding, for a power-of-two area a scale of 2**31 makes the
    NPU's first (ties-up) rounding exact and its second, a rounding shift by log2(area),
    rounds half away from zero."""
    if padded:
        return 1, 0
    if area & (area - 1):
        return None
    return 1 << 31, 31 + area.bit_length() - 1


def elementwise_op(op, a: FmSlot, b: FmSlot, ofm: FmSlot):
    """ADD / MUL / SUB / MINIMUM / MAXIMUM; the NPU broadcasts only its second operand, so a
    broadcast first operand swaps them (``reversed_operands`` keeps the arithmetic the same)."""
    api = vela_api()
    sub = {Op.ADD: api.NpuElementWiseOp.ADD, Op.MUL: api.NpuElementWiseOp.MUL,
           Op.SUB: api.NpuElementWiseOp.SUB, Op.MINIMUM: api.NpuElementWiseOp.MIN,
           Op.MAXIMUM: api.NpuElementWiseOp.MAX}[op.kind]
    npu = api.NpuElementWiseOperation(sub)
    reverse = a.shape != ofm.shape
    if reverse and b.shape != ofm.shape:
        raise UnsupportedOperatorError(op.tflite_name, "both operands broadcast")
    first, second = (b, a) if reverse else (a, b)
    _common(npu, op, first, ofm)
    npu.ifm2 = feature_map(second)
    npu.reversed_operands = reverse
    if op.kind == Op.MUL:
        # TFLite's multiplier of the product, so the rounding is its own
        (s1, _), (s2, _) = op.in_q
        m, s = quantize_multiplier(f32(s1) * f32(s2) / f32(op.out_q[0]))
        npu.rescale = (m, 31 - s)
    return npu


def _mean_window(op) -> MeanWindow:
    window = mean_window(op.in_shapes[0], op.attrs.get("axis") or ())
    if window is None:
        raise UnsupportedOperatorError(op.tflite_name, f"mean over axes {op.attrs.get('axis')}")
    why = window_refusal(window)
    if why:
        # the NPU's kernel limits; Vela splits such a MEAN into several convolutions
        raise UnsupportedOperatorError(op.tflite_name, why)
    return window


def mean_op(op, ifm: FmSlot, ofm: FmSlot):
    """MEAN over the height, the width or both of its NHWC view (``ethos_arch.mean_window``)
    as a depthwise convolution with all-one weights over the reduced extent, stride 1 over
    a kept one (its IFM zero point subtracted by the NPU, as TFLite sums ``x - zp``); the
    division by the element count lives in the per-channel scale (``mean_scales``), so the
    only rounding is TFLite's own ``MultiplyByQuantizedMultiplier``. The view reads the
    input's bytes as they lie (NHWC), so a reshape of them is free."""
    api = vela_api()
    window = _mean_window(op)
    kh, kw = window.kernel
    npu = api.NpuConvDepthWiseOperation()
    _common(npu, op, dataclasses.replace(ifm, shape=window.view),
            dataclasses.replace(ofm, shape=window.out_view))
    npu.kernel = api.NpuKernel(kw, kh)
    npu.padding = api.NpuPadding(0, 0, 0, 0)
    return npu


def mean_scales(op, count: int | None = None) -> tuple[int, int]:
    """(multiplier, NPU shift) of TFLite's int8 MEAN, the element count (``count``, else its
    one kernel's) folded into the multiplier as its reference kernel does
    (``requant_constants.mean_multiplier``, which ``te_ops`` applies too)."""
    count = _mean_window(op).count if count is None else count
    mult, shift = mean_multiplier(f32(op.in_q[0][0]), f32(op.out_q[0]), count)
    if not 0 <= 31 - shift <= 63:
        raise UnsupportedOperatorError(op.tflite_name, f"a scale shift of {shift}")
    return int(mult), 31 - int(shift)


def mean_weights(op) -> np.ndarray:
    """All-one OHWI weights of the depthwise convolution that sums the mean's window."""
    kh, kw = _mean_window(op).kernel
    return np.ones((int(op.in_shapes[0][-1]), kh, kw, 1), np.int16)


def legal_blocks(npu, accelerator) -> list:
    """Vela's legal OFM blocks for ``npu`` (``npu_find_block_configs``: those that fit the
    shared buffer, ``NpuShape3D`` (height, width, depth)). Remembered for the stream being
    generated by what the search reads of the operation (:func:`_block_search_key`): a
    plan's stripes repeat a few shapes many times."""
    return list(remembered("legal blocks", lambda: _block_search_key(npu, accelerator),
                           lambda: _find_block_configs(npu, accelerator)))


def _find_block_configs(npu, accelerator) -> tuple:
    api = vela_api()
    with contextlib.redirect_stdout(io.StringIO()):
        configs = tuple(api.npu_find_block_configs(npu, accelerator))
    if not configs:
        raise CompileError(f"Vela offers no block config for {npu.op_type.name}")
    return configs


def _block_search_key(npu, accelerator) -> tuple:
    """Everything ``npu_find_block_configs`` reads of an operation: its class (a pooling's
    REDUCE_SUM, a convolution's traversal), the IFM, IFM2 and OFM shapes, a scalar IFM2, the
    upscaling, the IFM's element width, the kernel, a LUT and whether every feature map is
    quantized."""
    api = vela_api()
    return (accelerator, type(npu).__name__, getattr(npu, "sub_op_type", None),
            getattr(npu, "block_traversal", None) if isinstance(npu, api.NpuConv2DOperation)
            else None,
            fm_shape(npu.ifm), fm_shape(npu.ifm2), fm_shape(npu.ofm),
            getattr(npu, "ifm2_scalar", None) is not None, npu.ifm_upscale,
            npu.ifm.data_type.size_in_bits(), kernel_key(npu.kernel), uses_lut(npu),
            all(fm is None or fm.quantization is not None for fm in (npu.ifm, npu.ifm2, npu.ofm)))


def largest_block(configs):
    """The largest legal block (fewest blocks), ties broken by shape: deterministic."""
    return max(configs, key=lambda c: (c.height * c.width * c.depth, c.depth, c.width, c.height))


def block_config(npu, accelerator):
    """The largest of Vela's legal blocks: the choice where no plan says otherwise."""
    return largest_block(legal_blocks(npu, accelerator))


#: why an operation runs the block it runs (:func:`chosen_block`)
PLANNER_BLOCK = "planner"
PLANNER_BLOCK_UNLISTED = "planner, not in npu_find_block_configs' list"
NOT_LEGAL = "fallback: planner block not legal"
NO_PLANNER_BLOCK = "fallback: no planner block"
#: an operation the planner does not cost (SOFTMAX's pieces, copies) running the block its
#: search finds for the operation itself (``stream_cascade``)
SEARCHED = "planner's search, operation not costed"
#: Vela's OFM split depth and deepest block (``ArchitectureFeatures.OFMSplitDepth``,
#: ``ofm_block_max``), the rule ``npu_find_block_configs`` applies besides the fit
_OFM_SPLIT_DEPTH, _OFM_BLOCK_DEPTH_MAX = 16, 128


@functools.lru_cache(maxsize=None)
def _architecture(accelerator):
    from ethosu.vela.architecture_features import Accelerator, create_default_arch

    with contextlib.redirect_stdout(io.StringIO()):  # Vela's notes on its default config
        return create_default_arch(Accelerator.from_npu_accelerator(accelerator))


def generator_accepts(npu, accelerator, block: tuple[int, int, int]) -> bool:
    """Whether Vela's register generator takes ``block`` (height, width, depth) for ``npu``:
    its own check (``get_arch_block_config``: a multiple of the micro-block that fits the
    shared buffer), which every block it writes must pass."""
    api = vela_api()
    saved = getattr(npu, "block_config", None)
    npu.block_config = api.NpuShape3D(*block)
    traversal = getattr(npu, "block_traversal", None) or api.NpuBlockTraversal.DEPTH_FIRST
    try:
        return fitting_layout(npu, traversal, _architecture(accelerator)) is not None
    finally:
        npu.block_config = saved


def chosen_block(npu, accelerator, wanted: tuple[int, int, int] | None):
    """(block config, why): the block ``wanted`` ((height, width, depth), the one the
    planner's performance model costed the operation with) where Vela takes it for ``npu``,
    else the largest of Vela's legal blocks, with the reason (:data:`NOT_LEGAL`,
    :data:`NO_PLANNER_BLOCK` when ``wanted`` is None). The planner's search mirrors Vela's,
    but not every operation the stream emits is one the planner lowered the same way (a
    MEAN, a stripe clipped at a tensor's edge), so its block is checked, not trusted.

    ``npu_find_block_configs`` lists only blocks at least 2 high and 2 wide (its resampling
    test compares the internal resampling mode with the API's enum, never equal), though
    its generator takes the 1-high micro-blocks of the Ethos-U55-32/64/128 (which Vela's own
    compiler programs): a planner block the list lacks but the generator's own fit check
    (:func:`generator_accepts`) takes is used and counted apart
    (:data:`PLANNER_BLOCK_UNLISTED`)."""
    configs = legal_blocks(npu, accelerator)
    if wanted is None:
        return largest_block(configs), NO_PLANNER_BLOCK
    wanted = tuple(int(v) for v in wanted)
    for c in configs:
        if (c.height, c.width, c.depth) == wanted:
            return c, PLANNER_BLOCK
    # the list's other rule: a block that splits the OFM's depth splits it in 16s
    ofm_depth = npu.ofm.shape.depth
    whole_depth = wanted[2] >= min(ofm_depth, _OFM_BLOCK_DEPTH_MAX)
    if (whole_depth or wanted[2] % _OFM_SPLIT_DEPTH == 0) and generator_accepts(
            npu, accelerator, wanted):
        return vela_api().NpuShape3D(*wanted), PLANNER_BLOCK_UNLISTED
    return largest_block(configs), NOT_LEGAL


def weights_request(q, acc, block_depth: int, depthwise: bool, traversal,
                    weights=None) -> EncodeRequest:
    """The encoding of ``q``'s weights (``weights``, default its own) for a block of
    ``block_depth`` channels: what :func:`attach_constants` encodes, and what a generation
    predicts before its emission (``encode_ahead``)."""
    dilation = conv_kernel(q).dilation[::-1] if q.kind in (Op.CONV2D, Op.DEPTHWISE_CONV2D) \
        else tuple(q.attrs.get("dilation", (1, 1)))[::-1]  # (x, y)
    ifm_bits = np.dtype(q.in_dtypes[0]).itemsize * 8
    return EncodeRequest(acc, weights_ohwi(q) if weights is None else weights,
                         tuple(dilation), ifm_bits, block_depth, depthwise, traversal)


def attach_constants(npu, q, channels: int, acc, flash: Flash, weights=None,
                      scales=None) -> None:
    """Block config first (the encoding depends on its depth and a convolution's
    traversal), then the encoded weights and the bias/scale stream (``weights``/``scales``
    default to the operator's own)."""
    api = vela_api()
    if getattr(npu, "block_config", None) is None:
        npu.block_config = block_config(npu, acc)
    depthwise = isinstance(npu, api.NpuConvDepthWiseOperation)
    traversal = api.NpuBlockTraversal.DEPTH_FIRST
    if isinstance(npu, api.NpuConv2DOperation):   # the weights follow the operation's order
        traversal = npu.block_traversal
    enc = encode_request(weights_request(q, acc, npu.block_config.depth, depthwise,
                                         traversal, weights))
    npu.weights = [flash.add(enc)]
    bias = q.bias.astype(np.int64) if q.bias is not None else np.zeros(channels, np.int64)
    npu.biases = [flash.add(bias_entries(bias, scales or conv_scales(q, channels)))]


#: The ranges of a bias/scale entry's fields (Vela's ``encode_bias``): [low, high).
_BIAS_FIELDS = (("bias", -(1 << 39), 1 << 39), ("multiplier", 0, 1 << 32),
                ("shift", 0, 1 << 6))


def bias_entries(bias: np.ndarray, scales) -> bytes:
    """The bias/scale stream of an operation, the bytes ``npu_encode_bias`` gives entry by
    entry (10 per output channel, little endian: a signed 40-bit bias, an unsigned 32-bit
    multiplier, a 6-bit shift), packed on arrays at once: a layer has up to a thousand
    channels, and Vela's packer is a Python call per channel. Channel k pairs ``bias[k]``
    with ``scales[k]`` ((multiplier, shift)), as many as the shorter of the two has. A value
    out of its field's range is a CompileError naming the channel."""
    n = min(len(bias), len(scales))
    b = np.asarray(bias, np.int64)[:n]
    ms = np.array(list(scales[:n]), np.int64).reshape(n, 2)
    for (name, low, high), values in zip(_BIAS_FIELDS, (b, ms[:, 0], ms[:, 1])):
        bad = np.flatnonzero((values < low) | (values >= high))
        if bad.size:
            k = int(bad[0])
            raise CompileError(f"output channel {k}: {name} {int(values[k])} does not fit the "
                               f"NPU's bias/scale entry ({low} <= {name} < {high}); "
                               "requantize the layer so that its scales and bias fit")
    out = np.empty((n, 10), np.uint8)
    out[:, :5] = b.astype("<i8").view(np.uint8).reshape(n, 8)[:, :5]
    out[:, 5:9] = ms[:, 0].astype("<u4").view(np.uint8).reshape(n, 4)
    out[:, 9] = ms[:, 1]
    return out.tobytes()
