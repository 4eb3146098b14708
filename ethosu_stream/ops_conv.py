"""CONV and DEPTHWISE: int8/int16 IFM, weights from the compressed stream, 40-bit bias and a
per-channel multiplier/shift from the scale stream."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .accelerator import AcceleratorInfo
from .errors import StreamError
from .feature_map import from_registers
from .memory import Memory
from .ops_common import (
    Kernel,
    ShramInfo,
    channel_scales,
    kernel,
    ofm_box,
    padded_ifm,
    rounding_mode,
    scale_stage,
    windows,
    write_ofm,
)
from .registers import RegisterState
from .weights import decode_weights

#: float32 and float64 hold every integer below these exactly
_EXACT32, _EXACT64 = 1 << 24, 1 << 53


@dataclass(frozen=True)
class _Weights:
    """A decoded weight stream: OHWI int64, its largest magnitude, and the matrix the
    products take (``(I*H*W, O)`` for CONV, ``(H, W, O)`` for DEPTHWISE) in float64 and
    float32."""

    ohwi: np.ndarray
    max_abs: int
    matrix: np.ndarray
    matrix32: np.ndarray

    @classmethod
    def of(cls, ohwi: np.ndarray, depthwise: bool) -> "_Weights":
        if depthwise:
            matrix = ohwi[:, :, :, 0].transpose(1, 2, 0).astype(np.float64)
        else:
            # rows in (I, H, W) order: the order the IFM windows are gathered in
            matrix = ohwi.transpose(3, 1, 2, 0).reshape(-1, ohwi.shape[0]).astype(np.float64)
        return cls(ohwi, int(np.abs(ohwi).max(initial=0)), matrix, matrix.astype(np.float32))


def _weights(mem: Memory, state: RegisterState, acc: AcceleratorInfo, shape_ohwi, depthwise,
             part_kernel, ifm_bits, dilation) -> _Weights | None:
    if state.address("WEIGHT1_LENGTH"):
        raise StreamError("a second core's weight stream (WEIGHT1_LENGTH) is not modelled: "
                          "two-core configurations (ethos-u65-512) are not supported")
    length = state.address("WEIGHT_LENGTH")
    region, base = state.param("WEIGHT_REGION"), state.address("WEIGHT_BASE")
    raw = mem.read_bytes(region, base, length, "the weight stream")
    if raw is None:  # a dry run: the stream's bytes are recorded, not decoded
        return None
    block_depth = state.param("OFM_BLK_DEPTH_M1") + 1

    def decode() -> _Weights:
        try:
            w = decode_weights(raw.tobytes(), shape_ohwi, ifm_ublock=acc.ifm_ublock_depth,
                               ofm_ublock=acc.ofm_ublock_depth, block_depth=block_depth,
                               depthwise=depthwise, part_kernel=part_kernel, ifm_bits=ifm_bits,
                               dilation=dilation)
        except ValueError as exc:
            raise StreamError(str(exc)) from None
        return _Weights.of(w, depthwise)

    key = ("weights", base, length, tuple(shape_ohwi), acc.ifm_ublock_depth,
           acc.ofm_ublock_depth, block_depth, depthwise, part_kernel, ifm_bits, tuple(dilation))
    return mem.memo(region, base, length, key, decode)


def _conv_sums(x: np.ndarray, w: _Weights, k: Kernel, out_hw: tuple[int, int],
               depthwise: bool) -> np.ndarray:
    """The (oh, ow, od) int64 sums of products. CONV gathers every window once (im2col) and
    makes one matrix product; DEPTHWISE adds one product per tap. The bound
    ``taps * depth * max|x| * max|w|`` holds every product and partial sum, in any summation
    order; below 2**24 the arithmetic is float32, below 2**53 float64 (every value is then an
    integer the type holds exactly), else int64."""
    oh, ow = out_hw
    taps = k.height * k.width * (1 if depthwise else x.shape[2])
    x_abs = max(int(x.max()), -int(x.min())) if x.size else 0
    bound = taps * x_abs * w.max_abs
    exact = bound < _EXACT64
    ftype, fmatrix = (np.float32, w.matrix32) if bound < _EXACT32 else (np.float64, w.matrix)
    if depthwise:
        dtype = ftype if exact else np.int64
        wt = fmatrix if exact else w.ohwi[:, :, :, 0].transpose(1, 2, 0)
        xs = x.astype(dtype)
        total = np.zeros((oh, ow, x.shape[2]), dtype)
        for ky, kx, tap in windows(xs, k, out_hw):
            total += tap * wt[ky, kx]
        return total.astype(np.int64)
    if not exact:
        total = np.zeros((oh, ow, w.ohwi.shape[0]), np.int64)
        for ky, kx, tap in windows(x, k, out_hw):
            total += tap @ w.ohwi[:, ky, kx, :].T
        return total
    depth = x.shape[2]
    if k.height == k.width == 1 and k.stride_y == k.stride_x == 1:
        cols = x[:oh, :ow].reshape(oh * ow, depth).astype(ftype)
    else:
        span = ((k.height - 1) * k.dilation_y + 1, (k.width - 1) * k.dilation_x + 1)
        win = np.lib.stride_tricks.sliding_window_view(x, span, axis=(0, 1))
        win = win[:(oh - 1) * k.stride_y + 1:k.stride_y, :(ow - 1) * k.stride_x + 1:k.stride_x,
                  :, ::k.dilation_y, ::k.dilation_x]
        cols = np.empty((oh, ow, depth, k.height, k.width), ftype)
        cols[...] = win
        cols = cols.reshape(oh * ow, taps)
    return (cols @ fmatrix).reshape(oh, ow, -1).astype(np.int64)


def run_conv(mem: Memory, state: RegisterState, acc: AcceleratorInfo, shram: ShramInfo,
             depthwise: bool) -> int:
    """Executes the operation; returns its MAC count."""
    oh, ow, od = ofm_box(mem, state)
    k = kernel(state)
    ifm_depth = od if depthwise else state.param("IFM_DEPTH_M1") + 1
    ifm_bits = from_registers(state, "IFM").dtype.itemsize * 8
    shape = (od, k.height, k.width, 1 if depthwise else ifm_depth)
    w = _weights(mem, state, acc, shape, depthwise, k.part_kernel_first and not depthwise,
                 ifm_bits, (k.dilation_x, k.dilation_y))
    x, _ = padded_ifm(mem, state, k, (oh, ow), ifm_depth, fill=0)
    if x is None:  # a dry run
        channel_scales(mem, state, od)
        write_ofm(mem, state, None, shram, (oh, ow, od))
    else:
        sums = _conv_sums(x, w, k, (oh, ow), depthwise)
        out = scale_stage(sums, channel_scales(mem, state, od), rounding_mode(state))
        write_ofm(mem, state, out, shram)
    return oh * ow * od * k.height * k.width * (1 if depthwise else ifm_depth)
