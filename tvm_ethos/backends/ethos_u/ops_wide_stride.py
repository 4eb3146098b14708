"""An AVERAGE_POOL_2D whose width stride is past the NPU's 3: one pool per output column.

The NPU's kernel register takes strides of 1 to 3. Output column ``j`` of a pool reads the
input columns ``j * stride - left`` onwards, ``kernel`` of them, whatever the stride: so each
output column is a pool of its own (width 1, any height stride up to 3) over its own columns
of the input, read through the input's strides where it lies. Vela 5.2 runs the same pool as
one operation per output element; one per column does the same arithmetic in fewer
operations. Each column's padding is the part of its window outside the input (TFLite's SAME
padding on the first and last columns), so every column divides by its own count as the
whole pool does.
"""
from __future__ import annotations

import dataclasses

from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u.npu_ops import NPU_MAX_STRIDE, FmSlot, feature_map, pool_op
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError, vela_api


def wide_stride(q) -> bool:
    """Whether ``q`` is an average pool whose width stride the NPU cannot take in one
    operation (a single window, global pooling, is one operation whatever its strides)."""
    return q.kind == Op.AVG_POOL2D and int(q.attrs["strides"][1]) > NPU_MAX_STRIDE and \
        not single_window(q)


def single_window(q) -> bool:
    """Whether the pool ``q`` is one window over its whole input (a 1x1 output): it has no
    effective stride."""
    return tuple(q.out_shape[1:3]) == (1, 1) and \
        tuple(q.attrs["pool_size"]) == tuple(q.in_shapes[0][1:3])


def _columns(dst, src, col0: int) -> None:
    """Give ``dst`` (an operation's feature map, its shape set) the memory of ``src`` (the
    whole box's) from column ``col0`` on: its tiles shifted by ``col0`` columns, the box's
    strides and region."""
    from ethosu.vela.register_command_stream_util import get_strides  # the 'vela' extra

    api = vela_api()
    strides = get_strides(src)
    step = 16 * src.data_type.size_in_bytes() if src.layout == api.NpuLayout.NHCWB16 \
        else strides.width
    t = src.tiles
    a0, a1, a2, a3 = t.addresses
    width = dst.shape.width
    if col0 >= t.width_0:        # wholly right of the left tiles: tiles 1 and 3
        d = (col0 - t.width_0) * step
        tiles = api.NpuTileBox(t.height_1, 0, width, [a1 + d, 0, a3 + d, 0])
    elif col0 + width <= t.width_0:   # wholly in the left tiles: 0 and 2
        d = col0 * step
        tiles = api.NpuTileBox(t.height_0, 0, width, [a0 + d, 0, a2 + d, 0])
    else:
        d = col0 * step
        tiles = api.NpuTileBox(t.height_0, t.height_1, t.width_0 - col0, [a0 + d, a1, a2 + d, a3])
    dst.tiles, dst.strides, dst.region, dst.layout = tiles, strides, src.region, src.layout


def column_pool_ops(q, operands: list[FmSlot], ofm: FmSlot, em, box=None) -> list:
    """The pools of ``q`` over ``operands[0]`` into ``ofm`` (whole tensors, or a stripe's
    boxes with ``q``'s padding the stripe's), one per output column."""
    ifm = operands[0]
    (_, kw), (sh, sw) = q.attrs["pool_size"], q.attrs["strides"]
    top, left, bottom, _ = (int(v) for v in q.attrs["padding"])
    ih, iw, c = ifm.shape
    oh, ow, _ = ofm.shape
    whole_ifm, whole_ofm = feature_map(ifm), feature_map(ofm)
    if em.place is not None:
        em.place(whole_ifm, ifm)
        em.place(whole_ofm, ofm)
    ops = []
    for j in range(ow):
        start = j * sw - left
        lo, hi = max(start, 0), min(start + kw, iw)
        if hi <= lo:
            raise UnsupportedOperatorError(q.tflite_name, f"output column {j} reads only "
                                                          "padding")
        pads = (top, lo - start, bottom, start + kw - hi)
        col = dataclasses.replace(q, attrs=dict(q.attrs, strides=(sh, 1), padding=pads))
        npu = pool_op(col, dataclasses.replace(ifm, shape=(ih, hi - lo, c)),
                      dataclasses.replace(ofm, shape=(oh, 1, c)))
        _columns(npu.ifm, whole_ifm, lo)
        _columns(npu.ofm, whole_ofm, j)
        npu.block_config = em.block(npu)
        npu.name = q.kind.value
        ops.append(npu)
    return ops


def work_bytes(q, box=None) -> int:
    """The pools read and write the feature maps only."""
    return 0
