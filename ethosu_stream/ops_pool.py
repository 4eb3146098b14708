"""POOL: max, average and reduce-sum."""
from __future__ import annotations

import numpy as np

from . import rounding
from .errors import StreamError
from .feature_map import from_registers
from .memory import Memory
from .ops_common import (
    ShramInfo,
    channel_scales,
    global_scale,
    kernel,
    ofm_box,
    padded_ifm,
    padding,
    read_fm,
    rounding_mode,
    scale_stage,
    uses_global_scale,
    windows,
    write_ofm,
)
from .registers import RegisterState

MAX, AVERAGE, REDUCE_SUM = 0, 1, 2
_NEG = -(1 << 40)


def _padded_average(acc: np.ndarray | None, count: np.ndarray | None,
                    state: RegisterState) -> np.ndarray | None:
    """A padded window: the hardware divides by the real (unpadded) elements itself, rounding
    half away from zero as TFLite's average pool does; Vela then writes OFM_SCALE 1, shift 0.
    Other scales with padding are not modelled."""
    if global_scale(state) != (1, 0):
        raise StreamError(f"average pooling over padding with OFM_SCALE {global_scale(state)} "
                          "is not modelled (only (1, 0), what Vela writes)")
    if acc is None:
        return None
    half = count // 2
    return np.where(acc >= 0, (acc + half) // count, -((-acc + half) // count))


def run_pool(mem: Memory, state: RegisterState, mode: int, shram: ShramInfo) -> int:
    oh, ow, od = ofm_box(mem, state)
    k = kernel(state)
    if mode == REDUCE_SUM:
        if state.param("IFM_UPSCALE"):
            raise StreamError("an upscaled REDUCE_SUM is not modelled")
        ifm = from_registers(state, "IFM")
        depth = state.param("IFM_DEPTH_M1") + 1
        x = read_fm(mem, ifm, oh, ow, depth, "the IFM")
        acc = None if x is None else (x - ifm.zero_point).sum(axis=2, keepdims=True)
        macs = oh * ow * depth
    elif mode in (MAX, AVERAGE):
        x, valid = padded_ifm(mem, state, k, (oh, ow), od, fill=_NEG if mode == MAX else 0)
        acc = count = None
        if x is None:  # a dry run
            pass
        elif mode == MAX:
            acc = np.full((oh, ow, od), _NEG, np.int64)
            for _, _, tap in windows(x, k, (oh, ow)):
                acc = np.maximum(acc, tap)
        else:
            acc = np.zeros((oh, ow, od), np.int64)
            count = np.zeros((oh, ow, 1), np.int64)
            for _, _, tap in windows(x, k, (oh, ow)):
                acc += tap
            for _, _, tap in windows(valid.astype(np.int64), k, (oh, ow)):
                count += tap
        macs = oh * ow * od * k.height * k.width
    else:
        raise StreamError(f"pooling mode {mode} is unknown (MAX 0, AVERAGE 1, REDUCE_SUM 2)")
    if mode == MAX:
        # Vela writes max pooling unscaled: per-channel mode with no scale stream (3.x,
        # 4.x) or the global OFM_SCALE (1, 0) (5.x)
        if uses_global_scale(state) and global_scale(state) != (1, 0):
            raise StreamError(f"max pooling with OFM_SCALE {global_scale(state)} is not "
                              "modelled; it runs unscaled")
        out = acc
    elif mode == AVERAGE and any(padding(state)):
        out = _padded_average(acc, count, state)
    elif uses_global_scale(state):
        scale, shift = global_scale(state)
        out = None if acc is None else rounding.scale(acc, scale, shift, rounding_mode(state))
    elif mode == AVERAGE:
        raise StreamError("average pooling with per-channel scaling is not modelled")
    else:
        scales = channel_scales(mem, state, od)
        out = None if acc is None else scale_stage(acc, scales, rounding_mode(state))
    write_ofm(mem, state, out, shram, (oh, ow, od))
    return macs
