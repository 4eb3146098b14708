"""What every block operation shares: the OFM box, kernel/stride/padding, the output stage
(rounding, zero point, clamp, LUT) and the per-channel scale stream."""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from . import activation16, lut16, rounding
from .bias import ENTRY_BYTES, ChannelScales, decode_bias_stream
from .errors import StreamError
from .feature_map import FeatureMap, from_registers
from .memory import SHRAM_REGION, Memory
from .registers import RegisterState

ACT_NONE, ACT_LUT_START, ACT_LUT_END = 0, 16, 23
ACT_TANH, ACT_SIGMOID = activation16.TANH, activation16.SIGMOID
# ACTIVATION bits 12-15, the range the clamp works in: the OFM's own, or forced to int8
# (what Vela writes for a LUT on a 32-bit OFM)
CLIP_OFM_PRECISION, CLIP_FORCE_INT8 = 0, 3
UPSCALE_NEAREST = 1
#: IFM_UPSCALE's zero-inserting 2x mode (Vela's TRANSPOSE resampling of a transpose conv)
UPSCALE_ZEROS = 2


@dataclass(frozen=True)
class Kernel:
    height: int  # undilated taps
    width: int
    stride_y: int
    stride_x: int
    dilation_y: int
    dilation_x: int
    part_kernel_first: bool


# bounds what one operation may allocate; Vela's softmax max-pools a whole row (1 x classes)
MAX_KERNEL_TAPS = 1 << 16


def _derived(f):
    """``f(state)`` remembered in ``state.derived`` (until the next register write)."""
    name = f.__name__

    @functools.wraps(f)
    def get(state: RegisterState):
        value = state.derived.get(name)
        if value is None:
            value = state.derived[name] = f(state)
        return value

    return get


@_derived
def kernel(state: RegisterState) -> Kernel:
    """KERNEL_STRIDE packs: bit 0/1 stride x/y - 1 low bits, bit 2 part-kernel-first
    traversal, bits 3/4 dilation x/y - 1, bits 6-8 / 9-11 the stride x/y - 1 high bits."""
    v = state.param("KERNEL_STRIDE")
    sx = ((v & 1) | (((v >> 6) & 7) << 1)) + 1
    sy = (((v >> 1) & 1) | (((v >> 9) & 7) << 1)) + 1
    dx, dy = ((v >> 3) & 1) + 1, ((v >> 4) & 1) + 1
    kh = state.param("KERNEL_HEIGHT_M1") // dy + 1
    kw = state.param("KERNEL_WIDTH_M1") // dx + 1
    if kh * kw > MAX_KERNEL_TAPS:
        raise StreamError(f"a {kh}x{kw} kernel has more taps than the model runs "
                          f"({MAX_KERNEL_TAPS})")
    return Kernel(kh, kw, sy, sx, dy, dx, bool(v & 4))


@_derived
def ofm_shape(state: RegisterState) -> tuple[int, int, int]:
    return (state.param("OFM_HEIGHT_M1") + 1, state.param("OFM_WIDTH_M1") + 1,
            state.param("OFM_DEPTH_M1") + 1)


@_derived
def padding(state: RegisterState) -> tuple[int, int, int, int]:
    """(top, left, bottom, right)."""
    return tuple(state.param(f"IFM_PAD_{s}") for s in ("TOP", "LEFT", "BOTTOM", "RIGHT"))


def check_box(mem: Memory, fm: FeatureMap, h: int, w: int, c: int, what: str) -> None:
    """Refuses a box that cannot fit its region before anything is allocated for it: its
    elements have distinct addresses, so it needs at least h * w * c elements of room."""
    if min(h, w, c) <= 0:
        raise StreamError(f"{what} box is empty ({h}x{w}x{c}): the OFM shape, kernel and "
                          "padding registers disagree")
    size = mem.region_size(fm.region)
    if h * w * c * fm.dtype.itemsize > size:
        raise StreamError(f"{what} box {h}x{w}x{c} ({fm.dtype}) needs more bytes than region "
                          f"{fm.region} holds ({size})")


def read_fm(mem: Memory, fm: FeatureMap, h: int, w: int, c: int,
            what: str) -> np.ndarray | None:
    """The box as int64 (``None`` on a dry run, which only records the access)."""
    check_box(mem, fm, h, w, c, what)
    return mem.read_box(fm, h, w, c, what)


def ofm_box(mem: Memory, state: RegisterState) -> tuple[int, int, int]:
    """The OFM shape, checked against its region before the operation computes anything."""
    shape = ofm_shape(state)
    check_box(mem, from_registers(state, "OFM"), *shape, "the OFM")
    return shape


def _spans(k: Kernel, out_hw: tuple[int, int]) -> tuple[int, int]:
    oh, ow = out_hw
    return ((oh - 1) * k.stride_y + (k.height - 1) * k.dilation_y + 1,
            (ow - 1) * k.stride_x + (k.width - 1) * k.dilation_x + 1)


def ifm_hw(state: RegisterState, k: Kernel, out_hw: tuple[int, int]) -> tuple[int, int]:
    """The IFM extent a kernel operation reads: what the OFM box, stride and dilated kernel
    span, less the padding (the registers hold no IFM height or width)."""
    top, left, bottom, right = padding(state)
    span_h, span_w = _spans(k, out_hw)
    if max(top, bottom) >= span_h or max(left, right) >= span_w:
        raise StreamError(f"padding (top {top}, left {left}, bottom {bottom}, right {right}) "
                          f"covers the whole {span_h}x{span_w} window span")
    return span_h - top - bottom, span_w - left - right


def padded_ifm(mem: Memory, state: RegisterState, k: Kernel, out_hw: tuple[int, int],
               depth: int, fill: int | None) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
    """The IFM the kernel walks over, zero point removed, with the padding applied: returns
    (values, valid) where ``valid`` marks real (not padded) positions ((None, None) on a dry
    run)."""
    top, left, _, _ = padding(state)
    span_h, span_w = _spans(k, out_hw)
    ih, iw = ifm_hw(state, k, out_hw)
    ifm = from_registers(state, "IFM")
    upscale = state.param("IFM_UPSCALE")
    if upscale == UPSCALE_NEAREST:  # the kernel walks a 2x nearest-neighbour enlargement
        small = read_fm(mem, ifm, (ih + 1) // 2, (iw + 1) // 2, depth, "the IFM")
        if small is None:
            return None, None
        vals = small.repeat(2, axis=0).repeat(2, axis=1)[:ih, :iw] - ifm.zero_point
    elif upscale == UPSCALE_ZEROS:  # each IFM element followed by a zero row and column
        small = read_fm(mem, ifm, (ih + 1) // 2, (iw + 1) // 2, depth, "the IFM")
        if small is None:
            return None, None
        vals = np.zeros((ih, iw, depth), np.int64)
        vals[::2, ::2] = small - ifm.zero_point
    elif upscale:
        raise StreamError(f"IFM upscaling mode {upscale} is not one of the NPU's (0: none, "
                          f"{UPSCALE_NEAREST}: nearest, {UPSCALE_ZEROS}: zeros)")
    else:
        vals = read_fm(mem, ifm, ih, iw, depth, "the IFM")
        if vals is None:
            return None, None
        vals -= ifm.zero_point
        if not (top or left or span_h > ih or span_w > iw):
            return vals, np.ones((span_h, span_w, 1), bool)
    full = np.full((span_h, span_w, depth), 0 if fill is None else fill, np.int64)
    valid = np.zeros((span_h, span_w, 1), bool)
    full[top:top + ih, left:left + iw] = vals
    valid[top:top + ih, left:left + iw] = True
    return full, valid


def windows(a: np.ndarray, k: Kernel, out_hw: tuple[int, int]):
    """(ky, kx, view of a at that tap for every output position)."""
    oh, ow = out_hw
    for ky in range(k.height):
        for kx in range(k.width):
            y0, x0 = ky * k.dilation_y, kx * k.dilation_x
            yield ky, kx, a[y0:y0 + (oh - 1) * k.stride_y + 1:k.stride_y,
                            x0:x0 + (ow - 1) * k.stride_x + 1:k.stride_x]


def channel_scales(mem: Memory, state: RegisterState, channels: int) -> ChannelScales | None:
    """The first ``channels`` entries of the scale stream (``None`` on a dry run)."""
    length = state.address("SCALE_LENGTH")
    if length < channels * ENTRY_BYTES:
        raise StreamError(f"SCALE_LENGTH {length} is short of {channels} entries of "
                          f"{ENTRY_BYTES} bytes")
    region, base, n = state.param("SCALE_REGION"), state.address("SCALE_BASE"), \
        channels * ENTRY_BYTES
    raw = mem.read_bytes(region, base, n, "the scale stream")
    if raw is None:
        return None
    return mem.memo(region, base, n, ("scales", base, channels),
                    lambda: decode_bias_stream(raw, channels))


def rounding_mode(state: RegisterState) -> int:
    return (state.param("OFM_PRECISION") >> 14) & 3


def uses_global_scale(state: RegisterState) -> bool:
    return bool(state.param("OFM_PRECISION") & (1 << 8))


def global_scale(state: RegisterState) -> tuple[int, int]:
    return state.payload("OFM_SCALE"), state.param("OFM_SCALE") & 0x3F


def write_ofm(
    mem: Memory, state: RegisterState, values: np.ndarray | None, shram: "ShramInfo | None",
    shape: tuple[int, int, int] | None = None,
) -> None:
    """The output stage on scaled ``values`` (no zero point yet): add the OFM zero point,
    apply the activation (clamp, or LUT then clamp) and store. On a dry run ``values`` is
    ``None`` and ``shape`` the OFM box: the LUT and the OFM are only recorded.

    A 32-bit OFM without a LUT takes neither the zero point nor the 16-bit clamp registers:
    it saturates to its own range (rfcs/0007 section 7, rule 2). With a LUT the zero point and
    the clamp form the table index, whatever the OFM's width. Tanh and sigmoid (16-bit OFM,
    zero point 0) take the scaled value itself, and the clamp bounds their result (rule 11)."""
    ofm = from_registers(state, "OFM")
    func = activation(state, ofm.dtype)
    lo, hi = state.signed("ACTIVATION_MIN"), state.signed("ACTIVATION_MAX")
    info = _iinfo(ofm.dtype)
    if values is not None and not (ofm.dtype.itemsize == 4 and func == ACT_NONE):
        values = values + ofm.zero_point
    if ofm.dtype.itemsize == 4:
        # the clamp registers are 16-bit: a 32-bit OFM saturates to its own range instead
        lo, hi = info.min, info.max
    if func == ACT_NONE:
        out = None if values is None else np.clip(values, max(lo, info.min), min(hi, info.max))
    elif func in (ACT_TANH, ACT_SIGMOID):
        out = None if values is None else np.clip(activation16.apply(func, values),
                                                  max(lo, info.min), min(hi, info.max))
    elif ACT_LUT_START <= func <= ACT_LUT_END:
        # the clamp picks the LUT index (the table's input, on a 16-bit OFM); the table's
        # entry is the output. An 8-bit table's entry is the index less the lowest code of
        # its range: int8 (also forced on a 32-bit OFM) + 128, uint8 the code itself
        index_range = (info.min, info.max) if ofm.dtype.itemsize <= 2 else (-128, 127)
        index = None if values is None else np.clip(np.clip(values, lo, hi), *index_range)
        if index is not None and ofm.dtype.itemsize != 2:
            index = index - index_range[0]
        out = apply_lut(mem, index, func - ACT_LUT_START, ofm.dtype, shram)
        if out is not None:
            out = np.clip(out, info.min, info.max)
    box = values.shape if values is not None else shape
    mem.write_box(ofm, out, box, "the OFM")


def activation(state: RegisterState, dtype: np.dtype) -> int:
    """The ACTIVATION function (bits 0-11), refused where the model does not know what the
    hardware does: tanh/sigmoid other than on a signed 16-bit OFM with zero point 0 (the only
    form Vela writes), a clip range other than the OFM's own (the forced int8 range only with
    a LUT on a signed OFM), a LUT on an unsigned OFM other than uint8, a 16-bit LUT other than
    in slot 0 (its table fills every slot)."""
    act = state.param("ACTIVATION")
    func, clip = act & 0xFFF, act >> 12
    dtype = np.dtype(dtype)
    if func in (ACT_TANH, ACT_SIGMOID):
        _check_tanh_sigmoid(state, func, clip, dtype)
        return func
    if func != ACT_NONE and not ACT_LUT_START <= func <= ACT_LUT_END:
        raise StreamError(f"activation function {func} (unknown) is not modelled; only "
                          "none/clamp, tanh (3), sigmoid (4) and LUTs (16-23) are")
    if func == ACT_NONE:
        if clip != CLIP_OFM_PRECISION:
            raise StreamError(f"activation clip range {clip} (ACTIVATION bits 12-15) without "
                              "a LUT is not modelled; only the OFM's own range (0) is")
        return func
    if dtype.kind != "i" and dtype != np.dtype(np.uint8):
        raise StreamError(f"a LUT activation on a {dtype} OFM is not modelled; only int8 or "
                          "uint8 tables (int8 or uint8 OFM), int16 interpolated tables (int16 "
                          "OFM) and int32 tables (int32 OFM) are")
    if dtype == np.dtype(np.uint8) and clip != CLIP_OFM_PRECISION:
        raise StreamError(f"activation clip range {clip} with a LUT on a uint8 OFM is not "
                          "modelled; the model indexes uint8 tables with uint8 values, which "
                          f"is clip range {CLIP_OFM_PRECISION} there")
    if dtype.itemsize == 2:
        if clip != CLIP_OFM_PRECISION:
            raise StreamError(f"activation clip range {clip} with a LUT on a {dtype} OFM is "
                              "not modelled; the model indexes 16-bit tables with int16 "
                              f"values, which is clip range {CLIP_OFM_PRECISION} there")
        if func != ACT_LUT_START:
            raise StreamError(f"a 16-bit LUT in slot {func - ACT_LUT_START} (ACTIVATION "
                              f"{func}) is not modelled; its {lut16.TABLE_BYTES}-byte table "
                              f"fills every slot, so only slot 0 (ACTIVATION {ACT_LUT_START}) "
                              "is")
        return func
    allowed = (CLIP_FORCE_INT8,) if dtype.itemsize == 4 else (CLIP_OFM_PRECISION,
                                                              CLIP_FORCE_INT8)
    if clip not in allowed:
        raise StreamError(f"activation clip range {clip} with a LUT on a {dtype} OFM is not "
                          f"modelled; the model indexes tables with int8 values, which is "
                          f"clip range {' or '.join(map(str, allowed))} there")
    return func


def _check_tanh_sigmoid(state: RegisterState, func: int, clip: int, dtype: np.dtype) -> None:
    name = "tanh" if func == ACT_TANH else "sigmoid"
    if dtype != np.dtype(np.int16):
        raise StreamError(f"activation function {func} ({name}) on a {dtype} OFM is not "
                          "modelled; only on an int16 OFM (Vela runs 8-bit tanh/sigmoid as a "
                          "LUT)")
    if clip != CLIP_OFM_PRECISION:
        raise StreamError(f"activation clip range {clip} (ACTIVATION bits 12-15) with "
                          f"{name} is not modelled; only the OFM's own range (0) is")
    zero_point = state.signed("OFM_ZERO_POINT")
    if zero_point:
        raise StreamError(f"{name} with OFM_ZERO_POINT {zero_point} is not modelled; its "
                          "result is signed 0.15 fixed point with zero point 0")


@functools.lru_cache(maxsize=None)
def _iinfo(dtype: np.dtype) -> np.iinfo:
    return np.iinfo(dtype)


@dataclass(frozen=True)
class ShramInfo:
    lut_address: int
    slot_size: int


def apply_lut(mem: Memory, index: np.ndarray | None, slot: int, dtype: np.dtype,
              shram: ShramInfo | None) -> np.ndarray | None:
    """A 256-entry LUT, ``index`` its entries (0-255): entries of the OFM's type on an 8-bit
    OFM (int8, or uint8, whose table Vela writes in code order), int32 entries for a 32-bit
    OFM (the form Vela's int8 softmax uses for its exponentials); on a 16-bit OFM the
    interpolated table of ``lut16`` indexed by the int16 value. ``index`` ``None`` (a dry
    run): the table is only recorded as read."""
    if shram is None:
        raise StreamError("a LUT activation needs the accelerator's SHRAM layout (run with an "
                          "accelerator)")
    base = shram.lut_address + slot * shram.slot_size
    if np.dtype(dtype).itemsize == 2:
        raw = mem.read_bytes(SHRAM_REGION, base, lut16.TABLE_BYTES, "the 16-bit LUT")
        if raw is None:
            return None
        return lut16.lookup(*lut16.decode(raw), index)
    entry = np.dtype(np.int32 if np.dtype(dtype).itemsize == 4 else dtype)
    raw = mem.read_bytes(SHRAM_REGION, base, 256 * entry.itemsize, "the LUT")
    if raw is None:
        return None
    table = raw.view(entry.newbyteorder("<")).astype(np.int64)
    return table[index]


def scale_stage(acc: np.ndarray, s: ChannelScales, mode: int) -> np.ndarray:
    return rounding.scale(acc + s.bias, s.scale, s.shift, mode)
