"""CONV and DEPTHWISE: int8/int16 IFM, weights from the compressed stream, 40-bit bias and a
per-channel multiplier/shift from the scale stream."""
from __future__ import annotations

import numpy as np

from .accelerator import AcceleratorInfo
from .errors import StreamError
from .feature_map import from_registers
from .memory import Memory
from .ops_common import (
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


def _weights(mem: Memory, state: RegisterState, acc: AcceleratorInfo, shape_ohwi, depthwise,
             part_kernel, ifm_bits, dilation) -> np.ndarray:
    if state.address("WEIGHT1_LENGTH"):
        raise StreamError("a second core's weight stream (WEIGHT1_LENGTH) is not modelled: "
                          "two-core configurations (ethos-u65-512) are not supported")
    length = state.address("WEIGHT_LENGTH")
    raw = mem.read_bytes(state.param("WEIGHT_REGION"), state.address("WEIGHT_BASE"), length,
                         "the weight stream")
    try:
        return decode_weights(raw.tobytes(), shape_ohwi, ifm_ublock=acc.ifm_ublock_depth,
                              ofm_ublock=acc.ofm_ublock_depth,
                              block_depth=state.param("OFM_BLK_DEPTH_M1") + 1,
                              depthwise=depthwise, part_kernel=part_kernel, ifm_bits=ifm_bits,
                              dilation=dilation)
    except ValueError as exc:
        raise StreamError(str(exc)) from None


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
    # float64 matrix products are fast and exact while every partial sum stays below 2**53
    bound = k.height * k.width * shape[3] * int(np.abs(x).max(initial=0)) * \
        int(np.abs(w).max(initial=0))
    dtype = np.float64 if bound < 1 << 53 else np.int64
    x, w = x.astype(dtype), w.astype(dtype)
    total = np.zeros((oh, ow, od), dtype)
    for ky, kx, tap in windows(x, k, (oh, ow)):
        if depthwise:
            total += tap * w[:, ky, kx, 0]
        else:
            total += tap @ w[:, ky, kx, :].T
    out = scale_stage(total.astype(np.int64), channel_scales(mem, state, od),
                      rounding_mode(state))
    write_ofm(mem, state, out + from_registers(state, "OFM").zero_point, shram)
    return oh * ow * od * k.height * k.width * (1 if depthwise else ifm_depth)
