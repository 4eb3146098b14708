"""Data movement on the Ethos-U NPU: PAD, SPLIT / SPLIT_V (and the slices the importer
writes in their form), CONCATENATION, MIRROR_PAD, REVERSE_V2, TILE (a copy per repetition)
and the resizes that replicate pixels, as strided copies.

None of these operators computes a value: each output element is an input element (or, for
PAD, the fill code), so each lowers to 1x1 MAX pools with unit quantization (the identity on
the codes; a CONCATENATION input quantized unlike the output, a 1x1 AVERAGE pool that
rescales it) whose feature maps are *strided views*: a box of a tensor read or written through
its own byte strides, at the box's address. A slice is a read through the source's strides, a
concatenation input a write through the output's, PAD's interior a write at an offset and its
border boxes copies of fill codes from flash, MIRROR_PAD's every padded band of an axis one
copy written backwards through a negative stride (``mirror_bands``; in a planner's stripe
every reflected row, column and channel a copy of an input one), REVERSE_V2's every index of
its axis a copy of its own. A nearest resize by an even factor is the NPU's 2x nearest IFM upscaling
written with strides of half the factor; by an odd one, a strided write per phase; from a
1x1 input, a zero-stride broadcast. A TRANSPOSE is a sequence of rotations of its axes, each one
copy of the whole tensor with two strides exchanged, or, where that takes several, one
strided copy per index of its outer axes (no working memory).

Each lowering yields :class:`Copy` records in the output's (height, width, depth)
coordinates, so a planner's stripe is the records clipped to its rows and columns
(:func:`clip`). DMAs are not used: their lengths are whole 16-byte bursts, which would spill
past a tensor's end.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

import numpy as np

from ethos_arch.ops import Op
from tvm_ethos.backends.ethos_u import mirror_bands
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, real_bound
from tvm_ethos.backends.ethos_u.stream_base import (
    SCRATCH_REGION,
    Flash,
    UnsupportedOperatorError,
    vela_api,
)
from tvm_ethos.compute import concat_requant
from tvm_ethos.compute.concat_requant import Rescale
from tvm_ethos.compute.quant import dtype_range

#: the largest feature-map dimension the NPU's registers hold
MAX_DIM = 65536
COPY_TYPES = ("int8", "uint8", "int16")


@dataclass(frozen=True)
class View:
    """A (height, width, depth) box of NHWC elements at ``offset`` in ``region``, rows
    ``row_stride`` and columns ``col_stride`` bytes apart (depth is dense)."""

    region: int
    offset: int
    shape: tuple[int, int, int]
    row_stride: int
    col_stride: int
    dtype: str

    @property
    def esize(self) -> int:
        return np.dtype(self.dtype).itemsize

    def at(self, y: int, x: int, c: int, shape: tuple[int, int, int]) -> View:
        """The sub-box of ``shape`` from element (y, x, c), with this view's strides."""
        off = self.offset + y * self.row_stride + x * self.col_stride + c * self.esize
        return View(self.region, off, shape, self.row_stride, self.col_stride, self.dtype)

    def every(self, ky: int, kx: int, shape: tuple[int, int, int]) -> View:
        """Every ``ky``-th row and ``kx``-th column from this view's origin, as ``shape``."""
        return View(self.region, self.offset, shape, self.row_stride * ky,
                     self.col_stride * kx, self.dtype)


def dense(slot: FmSlot, shape: tuple[int, int, int] | None = None) -> View:
    """The slot's bytes as a dense NHWC box (of ``shape``, default the slot's)."""
    h, w, c = shape or slot.shape
    e = np.dtype(slot.dtype).itemsize
    return View(slot.region, slot.offset, (h, w, c), w * c * e, c * e, slot.dtype)


def _fm(api, v: View):
    fm = api.NpuFeatureMap()
    fm.data_type = {"int8": api.NpuDataType.INT8, "uint8": api.NpuDataType.UINT8,
                    "int16": api.NpuDataType.INT16}[v.dtype]
    fm.region = v.region
    h, w, c = v.shape
    fm.shape = api.NpuShape3D(h, w, c)
    fm.tiles = api.NpuTileBox(h, 0, w, [v.offset, 0, 0, 0])
    fm.strides = api.NpuShape3D(v.row_stride, v.col_stride, v.esize)
    fm.quantization = api.NpuQuantization(1.0, 0)
    fm.layout = api.NpuLayout.NHWC
    return fm


def feature_map_of(v: View):
    """The NpuFeatureMap of a view (unit quantization: a copy's operand)."""
    return _fm(vela_api(), v)


def fm_copy_op(src, dst, what: str, block: Callable, rescale: Rescale | None = None,
               clamp: Clamp | None = None):
    """A 1x1 MAX pool from NpuFeatureMap ``src`` into ``dst`` (same shape and type; either
    may be a tiled box of a planner's ring), with unit quantization: the identity on the
    codes; with ``rescale``, the requantizing copy (:func:`_rescaling`); with ``clamp``, the
    written codes clamped (:func:`_clamping`). ``block`` picks the block config."""
    api = vela_api()
    for fm in (src, dst):
        fm.quantization = api.NpuQuantization(1.0, 0)
    npu = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    npu.ifm, npu.ofm = src, dst
    npu.kernel = api.NpuKernel(1, 1)
    npu.padding = api.NpuPadding(0, 0, 0, 0)
    npu.activation = None
    npu.rounding_mode = api.NpuRoundingMode.TFL
    if rescale is not None:
        _rescaling(api, npu, rescale)
    if clamp is not None:
        _clamping(api, npu, clamp)
    npu.block_config = block(npu)
    npu.name = what.lower()
    return npu


class Clamp(NamedTuple):
    """The output codes a copy may write, ``lo`` to ``hi``: a fused activation's clamp (a
    CONCATENATION's RELU, RELU6 or RELU_N1_TO_1, which TFLite applies to the output)."""
    lo: int
    hi: int


def _clamping(api, npu, clamp: Clamp) -> None:
    """Give the copy ``npu`` the activation clamp ``clamp`` on its output codes: Vela's
    generator sets the clamp registers from real bounds quantized by the OFM's quantization
    (unit for a plain copy, the output's for a requantizing one), so each bound is the real
    value that quantizes back to its code exactly."""
    q = npu.ofm.quantization
    act = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    act.min = real_bound(clamp.lo, q.scale_f32, q.zero_point)
    act.max = real_bound(clamp.hi, q.scale_f32, q.zero_point)
    npu.activation = act


def _rescaling(api, npu, r: Rescale) -> None:
    """Make the 1x1 pool ``npu`` a requantizing copy: an AVERAGE pool (the NPU scales its
    sum; a MAX pool's output is unscaled) from the input's zero point to the output's, by
    the explicit ``r.multiplier / 2**r.right_shift`` rounded once, half up (NATURAL)."""
    from ethosu.vela.operation import ExplicitScaling  # Vela is the optional 'vela' extra

    npu.sub_op_type = api.NpuPoolingOp.AVERAGE
    npu.ifm.quantization = api.NpuQuantization(r.in_q[0], r.in_q[1])
    npu.ofm.quantization = api.NpuQuantization(r.out_q[0], r.out_q[1])
    npu.rescale = ExplicitScaling(False, [r.right_shift], [r.multiplier])
    npu.rounding_mode = api.NpuRoundingMode.NATURAL


def copy_op(src: View, dst: View, what: str, block: Callable, upscale: bool = False,
            rescale: Rescale | None = None, clamp: Clamp | None = None):
    """A 1x1 MAX pool of ``src`` into ``dst`` with unit quantization: the identity on the
    codes (``upscale``: through the NPU's 2x2 nearest IFM upscaling, ``dst`` twice as high
    and wide; ``rescale``: the requantizing copy, :func:`_rescaling`; ``clamp``: the written
    codes clamped, :func:`_clamping`). ``block`` picks the block config."""
    if src.dtype not in COPY_TYPES or src.dtype != dst.dtype:
        raise UnsupportedOperatorError(what, f"a copy from {src.dtype} to {dst.dtype} (the "
                                             f"NPU copies {', '.join(COPY_TYPES)} codes)")
    f = 2 if upscale else 1
    want = (src.shape[0] * f, src.shape[1] * f, src.shape[2])
    if want != dst.shape:  # pragma: no cover - every caller builds matching boxes
        raise AssertionError(f"{what}: copy {src.shape} -> {dst.shape}")
    if max(src.shape + dst.shape) > MAX_DIM:
        raise UnsupportedOperatorError(
            what, f"a copy of a {src.shape} box (each dimension must be at most {MAX_DIM})")
    api = vela_api()
    npu = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    npu.ifm, npu.ofm = _fm(api, src), _fm(api, dst)
    npu.kernel = api.NpuKernel(1, 1)
    npu.padding = api.NpuPadding(0, 0, 0, 0)
    npu.activation = None
    npu.rounding_mode = api.NpuRoundingMode.TFL
    if upscale:
        npu.ifm_upscale = api.NpuResamplingMode.NEAREST
    if rescale is not None:
        _rescaling(api, npu, rescale)
    if clamp is not None:
        _clamping(api, npu, clamp)
    npu.block_config = block(npu)
    npu.name = what.lower()
    return npu


@dataclass(frozen=True)
class Copy:
    """Source box ``src`` written to the output with its element (0, 0, 0) at ``at`` (height,
    width, depth) and its rows / columns ``step`` output rows / columns apart; ``upscale``:
    through the NPU's 2x nearest IFM upscaling, each source element covering 2x2 of the
    written rows / columns (which are ``step`` apart); ``rescale``: a requantizing copy
    (a CONCATENATION input quantized unlike the output); ``clamp``: the written codes
    clamped (a CONCATENATION's fused activation)."""

    src: View
    at: tuple[int, int, int]
    step: tuple[int, int] = (1, 1)
    upscale: bool = False
    rescale: Rescale | None = None
    clamp: Clamp | None = None


def _span(origin: int, step: int, n: int, lo: int, hi: int) -> tuple[int, int]:
    """The source indices ``i`` in [0, n) whose output ``origin + i * step`` is in [lo, hi)."""
    first = max(0, -(-(lo - origin) // step))
    return first, max(first, min(n, -(-(hi - origin) // step)))


def _phases(cp: Copy) -> list[Copy]:
    """An upscaling copy as its four strided writes."""
    y, x, c = cp.at
    sy, sx = cp.step
    return [Copy(cp.src, (y + sy * dy, x + sx * dx, c), (2 * sy, 2 * sx), clamp=cp.clamp)
            for dy in (0, 1) for dx in (0, 1)]


def clip(cp: Copy, rows: tuple[int, int], cols: tuple[int, int]) -> list[Copy]:
    """The part of ``cp`` that writes output rows ``rows`` and columns ``cols``."""
    (y0, y1), (x0, x1) = rows, cols
    y, x, c = cp.at
    if cp.upscale:
        if cp.step != (1, 1) or (y0 - y) % 2 or (x0 - x) % 2 or (y1 - y) % 2 or (x1 - x) % 2:
            return [p for ph in _phases(cp) for p in clip(ph, rows, cols)]
        (i0, i1), (j0, j1) = _span(y, 2, cp.src.shape[0], y0, y1), _span(x, 2, cp.src.shape[1],
                                                                          x0, x1)
        if i0 == i1 or j0 == j1:
            return []
        src = cp.src.at(i0, j0, 0, (i1 - i0, j1 - j0, cp.src.shape[2]))
        return [Copy(src, (y + 2 * i0, x + 2 * j0, c), upscale=True, clamp=cp.clamp)]
    (sy, sx) = cp.step
    (i0, i1), (j0, j1) = _span(y, sy, cp.src.shape[0], y0, y1), _span(x, sx, cp.src.shape[1],
                                                                        x0, x1)
    if i0 == i1 or j0 == j1:
        return []
    src = cp.src.at(i0, j0, 0, (i1 - i0, j1 - j0, cp.src.shape[2]))
    return [Copy(src, (y + sy * i0, x + sx * j0, c), cp.step, rescale=cp.rescale,
                 clamp=cp.clamp)]


def _axis3(q, axis: int, rank: int) -> int:
    """The (height, width, depth) axis of ``axis`` of a rank-``rank`` tensor (batch 1)."""
    a = axis % rank + 3 - rank
    if a < 0:
        raise UnsupportedOperatorError(q.tflite_name, f"axis {axis} of a {rank}-D tensor "
                                                      "(the NPU moves height, width and depth)")
    return a


def _offset3(axis: int, n: int) -> tuple[int, int, int]:
    at = [0, 0, 0]
    at[axis] = n
    return at[0], at[1], at[2]


def _splits_batch(q) -> bool:
    """Whether ``q`` slices the batch of a 4-D tensor (whole rows of its folded view)."""
    rank = len(q.in_shapes[0])
    return rank == 4 and int(q.attrs["axis"]) % rank == 0


def split_copies(q, operands: list[FmSlot], ofm: FmSlot, flash: Flash) -> list[Copy]:
    """One SPLIT / SPLIT_V output (or one axis of a slice): every ``stride``-th element of
    ``[begin, end)`` of ``axis``, read through the input's strides (times the slice's).
    A 4-D tensor's batches are its rows' outer index (``npu_ops.shape3``): a slice of the
    batch is one run of whole rows, a slice of the width or depth the same read over every
    batch's rows, and a slice of the height one copy per batch index."""
    src, (sy, sx), (y, x, c) = dense(operands[0]), split_step(q), split_origin(q)
    batches = split_batch_rows(q)
    if _splits_batch(q):
        first = batches[0][1] * (src.shape[0] // int(q.in_shapes[0][0]))
        return [Copy(src.at(first, 0, 0, ofm.shape), (0, 0, 0))]
    if len(batches) == 1 or _axis3(q, int(q.attrs["axis"]), len(q.in_shapes[0])) != 0:
        return [Copy(src.at(y, x, c, ofm.shape).every(sy, sx, ofm.shape), (0, 0, 0))]
    h_in, h_out = src.shape[0] // len(batches), ofm.shape[0] // len(batches)
    one = (h_out,) + ofm.shape[1:]
    return [Copy(src.at(i * h_in + y, x, c, one).every(sy, sx, one), (k * h_out, 0, 0))
            for k, i in batches]


def split_batch_rows(q) -> list[tuple[int, int]]:
    """(output batch, input batch) of each batch a SPLIT output's copies move: every batch
    to itself, or for a slice of the batch, each output batch from ``begin`` on."""
    n_out = int(q.out_shape[0]) if len(q.out_shape) == 4 else 1
    if _splits_batch(q):
        if int(q.attrs.get("stride", 1)) != 1:
            raise UnsupportedOperatorError(q.tflite_name, "a stride over the batch (the NPU "
                                                          "strides over height or width)")
        return [(k, int(q.attrs["begin"]) + k) for k in range(n_out)]
    return [(k, k) for k in range(n_out)]


def split_origin(q) -> tuple[int, int, int]:
    """The input element (height, width, depth) a SPLIT output's element (0, 0, 0) is, in
    its batch (:func:`split_batch_rows`)."""
    if _splits_batch(q):
        return 0, 0, 0
    a = _axis3(q, int(q.attrs["axis"]), len(q.in_shapes[0]))
    return _offset3(a, int(q.attrs["begin"]))


def split_step(q) -> tuple[int, int]:
    """The input rows and columns between a slice's neighbouring output rows and columns
    (its stride on its axis, height or width; the NPU reads depth densely)."""
    if _splits_batch(q):
        return 1, 1
    stride = int(q.attrs.get("stride", 1))
    a = _axis3(q, int(q.attrs["axis"]), len(q.in_shapes[0]))
    if stride != 1 and a == 2:
        raise UnsupportedOperatorError(q.tflite_name, f"a stride of {stride} over depth (the "
                                                      "NPU strides over height or width)")
    return (stride, 1) if a == 0 else (1, stride) if a == 1 else (1, 1)


def strided_read(fm, step: tuple[int, int], shape: tuple[int, int], what: str):
    """``fm``, a box of whole rows and columns of a buffer, read every ``step`` rows and
    columns as ``shape`` (height, width); a box that wraps a ring (tiles) is refused."""
    sy, sx = step
    if (sy, sx) == (1, 1):
        return fm
    if fm.tiles.height_0 != fm.shape.height or fm.tiles.width_0 != fm.shape.width:
        raise UnsupportedOperatorError(what, "a strided read of a box that wraps a ring")
    api = vela_api()
    fm.strides = api.NpuShape3D(fm.strides.height * sy, fm.strides.width * sx, fm.strides.depth)
    fm.shape = api.NpuShape3D(shape[0], shape[1], fm.shape.depth)
    fm.tiles = api.NpuTileBox(shape[0], 0, shape[1], fm.tiles.addresses)
    return fm


def channel_runs(src_c: int, dst_c: int, n: int, src_depth: int,
                 dst_depth: int) -> list[tuple[int, int, int]]:
    """(source position, destination position, count) of each contiguous piece of a copy of
    ``n`` channels from source channel ``src_c`` to destination channel ``dst_c`` between
    buffers that hold channel ``c`` at ``c % depth`` (a planner's buffer of fewer channels
    than its tensor is a ring over channels, as over rows)."""
    out, done = [], 0
    while done < n:
        s, d = (src_c + done) % src_depth, (dst_c + done) % dst_depth
        k = min(n - done, src_depth - s, dst_depth - d)
        out.append((s, d, k))
        done += k
    return out


def _channels(fm, first: int, n: int, esize: int):
    """``fm`` narrowed to ``n`` channels from buffer position ``first`` (its strides kept)."""
    api = vela_api()
    fm.tiles = api.NpuTileBox(fm.tiles.height_0, fm.tiles.height_1, fm.tiles.width_0,
                              [a + first * esize for a in fm.tiles.addresses])
    fm.shape = api.NpuShape3D(fm.shape.height, fm.shape.width, n)
    return fm


def split_ring_ops(q, src: Callable, dst: Callable, channels: tuple[int, int],
                   block: Callable) -> list:
    """One stripe of a SPLIT output, channels ``channels`` of it, between feature maps of a
    planner's buffers (``src()`` the input box the stripe reads, ``dst()`` the output box,
    each all its buffer's channels; either may wrap a ring in tiles): the slice's channels
    copied, one copy per piece that is contiguous in both buffers (:func:`channel_runs`)."""
    esize = np.dtype(q.out_dtype).itemsize
    c0, c1 = channels
    ops = []
    first_src, first_dst = src(), dst()
    runs = channel_runs(c0 + split_origin(q)[2], c0, c1 - c0, first_src.shape.depth,
                        first_dst.shape.depth)
    for k, (s, d, n) in enumerate(runs):
        a, b = (first_src, first_dst) if k == 0 else (src(), dst())
        ops.append(fm_copy_op(_channels(a, s, n, esize), _channels(b, d, n, esize),
                              q.tflite_name, block))
    return ops


def concat_copies(q, operands: list[FmSlot], ofm: FmSlot, flash: Flash) -> list[Copy]:
    """CONCATENATION: each input written through the output's strides at its offset along
    ``axis``; an input quantized unlike the output requantized on the way (a rescaling copy:
    the pattern took only quantizations where that is LiteRT's result on every code,
    ``compute.concat_requant``); a fused activation clamps every copy's codes."""
    a = _axis3(q, int(q.attrs["axis"]), len(q.out_shape))
    out, at, clamp = [], 0, _concat_clamp(q)
    for k, slot in enumerate(operands):
        out.append(Copy(dense(slot), _offset3(a, at), rescale=_concat_rescale(q, k),
                        clamp=clamp))
        at += slot.shape[a]
    return out


def _concat_clamp(q) -> Clamp | None:
    """The fused activation's clamp of a concatenation's output codes (None: it clamps no
    code of the type)."""
    if (q.act_min, q.act_max) == dtype_range(q.out_dtype):
        return None
    return Clamp(int(q.act_min), int(q.act_max))


def _concat_rescale(q, k: int) -> Rescale | None:
    """The requantization of concatenation input ``k`` (None: quantized as the output)."""
    if q.out_q is None or len(q.in_q) <= k or tuple(q.in_q[k]) == tuple(q.out_q):
        return None
    return concat_requant.rescale(q.in_q[k], q.out_q)


def _pads3(q) -> list[tuple[int, int]]:
    pads = [tuple(int(v) for v in p) for p in q.attrs["pad_width"]]
    if len(pads) == 4 and pads[0] == (0, 0):
        pads = pads[1:]
    if len(pads) != 3:
        raise UnsupportedOperatorError(
            q.tflite_name, f"padding {tuple(pads)}: the NPU pads height, width and depth")
    return pads


def pad_copies(q, operands: list[FmSlot], ofm: FmSlot, flash: Flash) -> list[Copy]:
    """PAD: the input copied into the output at (top, left, front), then every border box
    copied from one block of fill codes in flash (as large as the largest box)."""
    (t, b), (lft, r), (f, bk) = _pads3(q)
    h, w, c = operands[0].shape
    _, ow, oc = ofm.shape
    copies = [Copy(dense(operands[0]), (t, lft, f))]
    borders = [  # (origin, shape) of each box of fill codes
        ((0, 0, 0), (t, ow, oc)), ((t + h, 0, 0), (b, ow, oc)),
        ((t, 0, 0), (h, lft, oc)), ((t, lft + w, 0), (h, r, oc)),
        ((t, lft, 0), (h, w, f)), ((t, lft, f + c), (h, w, bk)),
    ]
    borders = [(at, shape) for at, shape in borders if 0 not in shape]
    if not borders:
        return copies
    n = max(int(np.prod(shape)) for _, shape in borders)
    fill = flash.add(np.full(n, int(q.attrs["fill"]), dtype=np.dtype(ofm.dtype)).tobytes())
    for at, shape in borders:
        copies.append(Copy(dense(FmSlot(fill.region, fill.address, shape, ofm.dtype, None, 0)),
                           at))
    return copies


def _mirror_runs(before: int, after: int, n: int, edge: int) -> list[tuple[int, int, int]]:
    """(output index, input index, length) of the runs of one axis of ``n`` mirrored by
    ``before`` and ``after`` (``edge`` 1, REFLECT: the edge is not repeated; 0, SYMMETRIC: it
    is): the interior one run, each mirrored index its own (a stripe's copies read the input
    only, in forward order)."""
    runs = [(y, before - y - 1 + edge, 1) for y in range(before)]
    runs.append((before, 0, n))
    return runs + [(before + n + k, n - 1 - edge - k, 1) for k in range(after)]


def folded_runs(dims: list[int], pads: list[tuple[int, int]], edge: int
                 ) -> list[tuple[int, int, int]]:
    """(output row, input row, length) of the runs of the axes ``dims`` folded into the
    feature map's height (``npu_ops.shape3``: a batch, a 5-D tensor's outer axes and the
    height), mirrored by ``pads``: each mirrored outer index a copy of its whole inner block
    where the inner axes are not padded (one run, however many indices it spans), else of
    each of the inner block's runs."""
    runs = _mirror_runs(*pads[-1], dims[-1], edge)
    rows_in, rows_out = dims[-1], dims[-1] + sum(pads[-1])
    for n, (before, after) in zip(reversed(dims[:-1]), reversed(pads[:-1])):
        whole = runs == [(0, 0, rows_in)] and rows_in == rows_out
        folded = []
        for o, s, length in _mirror_runs(before, after, n, edge):
            if whole:
                folded.append((o * rows_out, s * rows_in, length * rows_in))
                continue
            folded += [((o + k) * rows_out + oi, (s + k) * rows_in + si, li)
                       for k in range(length) for oi, si, li in runs]
        runs, rows_in, rows_out = folded, rows_in * n, rows_out * (n + before + after)
    return runs


def mirror_pad_copies(q, operands: list[FmSlot], ofm: FmSlot, flash: Flash) -> list[Copy]:
    """MIRROR_PAD (REFLECT or SYMMETRIC) of any axis of a tensor of up to 5 axes in copies a
    planner's stripe clips (:func:`mirror_pad_ops` writes a whole output in fewer): every
    output row is an input row, every column an input column and every channel an input
    channel, so one copy per triple of a row run, a column run and a channel run; the axes
    before the width fold into the rows (:func:`folded_runs`)."""
    pads = [tuple(int(v) for v in p) for p in q.attrs["pad_width"]]
    dims = [int(d) for d in q.in_shapes[0]]
    if len(pads) < 3:   # fewer than three axes are the innermost of them (npu_ops.shape3)
        pads, dims = [(0, 0)] * (3 - len(pads)) + pads, [1] * (3 - len(dims)) + dims
    (lft, r), (f, bk) = pads[-2:]
    _, w, c = operands[0].shape
    edge = 0 if q.attrs.get("mode") == "SYMMETRIC" else 1
    src = dense(operands[0])
    return [Copy(src.at(sy, sx, sc, (ny, nx, nc)), (oy, ox, oc))
            for oy, sy, ny in folded_runs(dims[:-2], pads[:-2], edge)
            for ox, sx, nx in _mirror_runs(lft, r, w, edge)
            for oc, sc, nc in _mirror_runs(f, bk, c, edge)]


def reverse_copies(q, operands: list[FmSlot], ofm: FmSlot, flash: Flash) -> list[Copy]:
    """REVERSE_V2: index ``k`` of the axis written from index ``n - 1 - k``, one copy each
    (the NPU's strides do not run backwards)."""
    a = _axis3(q, int(q.attrs["axis"]), len(q.in_shapes[0]))
    src = dense(operands[0])
    n = src.shape[a]
    one = tuple(1 if i == a else d for i, d in enumerate(src.shape))
    return [Copy(src.at(*_offset3(a, n - 1 - k), one), _offset3(a, k)) for k in range(n)]


def tile_copies(q, operands: list[FmSlot], ofm: FmSlot, flash: Flash) -> list[Copy]:
    """TILE: the whole input copied once per repetition, at its multiple of the input's
    (height, width, depth); a 4-D tensor's batches fold into its rows (``npu_ops.shape3``),
    so a repeated batch is one more copy of the whole input further down, and where both
    the height and the batch are more than one each input batch is copied apart."""
    reps = list(q.attrs["reps"])
    rb = reps.pop(0) if len(reps) == 4 else 1
    ry, rx, rc = [1] * (3 - len(reps)) + reps
    n = int(q.in_shapes[0][0]) if len(q.in_shapes[0]) == 4 else 1
    h, w, c = operands[0].shape
    src = dense(operands[0])
    if n == 1 or ry == 1:
        return [Copy(src, ((b * ry + y) * h, x * w, k * c))
                for b in range(rb) for y in range(ry) for x in range(rx) for k in range(rc)]
    hb = h // n
    return [Copy(src.at(i * hb, 0, 0, (hb, w, c)), (((b * n + i) * ry + y) * hb, x * w, k * c))
            for b in range(rb) for i in range(n) for y in range(ry) for x in range(rx)
            for k in range(rc)]


def _factors(q) -> tuple[int, int]:
    """The integer (height, width) factors of a replicating resize, or an error."""
    (_, ih, iw, _), (_, oh, ow, _) = q.in_shapes[0], q.out_shape
    if q.attrs.get("align_corners", False):
        raise UnsupportedOperatorError(
            q.tflite_name, "align_corners (the output grid is not a replication of the input)")
    if oh % ih or ow % iw:
        raise UnsupportedOperatorError(
            q.tflite_name, f"a {ih}x{iw} -> {oh}x{ow} resize (not an integer upscale)")
    return oh // ih, ow // iw


def resize_copies(q, operands: list[FmSlot], ofm: FmSlot, flash: Flash) -> list[Copy]:
    """RESIZE_NEAREST_NEIGHBOR by integer factors (floor or half-pixel centres both pick
    input ``y // factor``): for even factors the NPU's 2x nearest upscaling, written with
    strides of half the factor once per phase of that half (one operation for 2x, four for
    4x), else one strided write per phase of the factor. RESIZE_BILINEAR only where it is
    a replication too: an equal shape or a 1x1 input (every tap the same value; TFLite's
    fixed-point weights sum to one)."""
    _, ih, iw, c = (int(s) for s in q.in_shapes[0])
    src = dense(operands[0])
    if (ih, iw) == (1, 1):  # every output pixel the one input pixel: zero strides
        oh, ow, _ = ofm.shape
        return [Copy(src.every(0, 0, (oh, ow, c)), (0, 0, 0))]
    if q.kind == Op.RESIZE_BILINEAR and tuple(q.in_shapes[0]) != tuple(q.out_shape):
        raise UnsupportedOperatorError(
            q.tflite_name, "a bilinear interpolation that is no box average (align_corners or "
                           "half-pixel centres: ops_resize streams the others; only a same-size "
                           "or 1x1-input resize is a copy)")
    fy, fx = _factors(q)
    if fy % 2 == 0 and fx % 2 == 0:  # 2x upscales written every (fy / 2, fx / 2) elements
        hy, hx = fy // 2, fx // 2
        return [Copy(src, (dy, dx, 0), (hy, hx), upscale=True)
                for dy in range(hy) for dx in range(hx)]
    return [Copy(src, (dy, dx, 0), (fy, fx)) for dy in range(fy) for dx in range(fx)]


class Rotation(NamedTuple):
    """One step of a transpose: the tensor read as an (a, b, inner) box and written as
    (b, a, inner), its two outer blocks of axes exchanged."""

    a: int
    b: int
    inner: int


def _merged(shape, perm) -> tuple[list[int], list[int]]:
    """(dims, order): ``perm`` of ``shape`` with its size-1 axes left out and every run of
    axes that stays together and in order merged into one, ``order[j]`` the merged input axis
    output axis ``j`` is."""
    keep = [a for a in range(len(shape)) if int(shape[a]) != 1]
    order = [keep.index(a) for a in perm if a in keep]
    runs: list[list[int]] = []
    for a in order:
        if runs and runs[-1][-1] + 1 == a:
            runs[-1].append(a)
        else:
            runs.append([a])
    starts = sorted(r[0] for r in runs)
    dims = [int(np.prod([int(shape[keep[a]]) for a in r], dtype=np.int64))
            for r in sorted(runs, key=lambda r: r[0])]
    return dims, [starts.index(r[0]) for r in runs]


def transpose_steps(shape, perm) -> tuple[Rotation, ...]:
    """Any permutation as a sequence of rotations, each one strided copy of the whole tensor:
    the axes already in their final place at the end stay put (``inner``) and the prefix
    before them is rotated so that the axis the output wants last among them comes last.
    Each step fixes at least one axis, so a rank-``n`` tensor takes at most ``n - 1`` (one
    for a swap of two blocks of axes, the forms Vela lists; none for a reshape)."""
    dims, target = _merged(shape, perm)
    cur = list(range(len(dims)))
    steps = []
    t = len(cur)
    while True:
        while t > 0 and cur[t - 1] == target[t - 1]:
            t -= 1
        if t == 0:
            return tuple(steps)
        p = cur.index(target[t - 1])
        size = [dims[a] for a in cur]
        steps.append(Rotation(int(np.prod(size[:p + 1], dtype=np.int64)),
                              int(np.prod(size[p + 1:t], dtype=np.int64)),
                              int(np.prod(size[t:], dtype=np.int64))))
        cur = cur[p + 1:t] + cur[:p + 1] + cur[t:]


#: the types a TRANSPOSE moves as the bytes of each element: the NPU copies 8- and 16-bit
#: codes only, so an element of these is that many int8 codes kept together
WORD_TYPES = {"int32": 4}


class CopyForm(NamedTuple):
    """The tensor a TRANSPOSE's copies move: its shape, the permutation and the codes'
    type."""

    shape: tuple[int, ...]
    perm: tuple[int, ...]
    dtype: str


def copy_dtype(dtype: str) -> str:
    """The type of the codes a TRANSPOSE of a ``dtype`` tensor copies."""
    return "int8" if dtype in WORD_TYPES else dtype


def copy_form(shape, perm, dtype: str) -> CopyForm:
    """A TRANSPOSE of ``shape`` by ``perm`` as the NPU copies it: an int8/uint8/int16 tensor
    as it is, an int32 one as int8 codes with a last axis of each element's four bytes,
    which the permutation leaves last (so every rotation keeps an element's bytes together,
    the inner block four times deeper)."""
    shape, perm = tuple(int(d) for d in shape), tuple(int(a) for a in perm)
    n = WORD_TYPES.get(dtype)
    if n is None:
        return CopyForm(shape, perm, dtype)
    return CopyForm(shape + (n,), perm + (len(shape),), copy_dtype(dtype))


def copy_steps(shape, perm, dtype: str) -> tuple[Rotation, ...]:
    """The rotations of a TRANSPOSE of a ``dtype`` tensor (:func:`copy_form`)."""
    form = copy_form(shape, perm, dtype)
    return transpose_steps(form.shape, form.perm)


def _as_codes(slot: FmSlot, dtype: str) -> FmSlot:
    """``slot``'s bytes as ``dtype`` codes (the same bytes, its depth scaled)."""
    if slot.dtype == dtype:
        return slot
    h, w, c = slot.shape
    n = np.dtype(slot.dtype).itemsize // np.dtype(dtype).itemsize
    return dataclasses.replace(slot, shape=(h, w, c * n), dtype=dtype)


class Strided(NamedTuple):
    """A TRANSPOSE as copies straight from its input into its output, Vela's form: the
    merged axes (:func:`_merged`) ``dims`` in input order, output axis ``j`` being input
    axis ``order[j]``; every copy moves the axes ``rows`` and ``cols`` as its rows and
    columns (each read and written through its own strides) and ``depth`` elements that
    stay together (the last axis where the permutation keeps it last, else one), one copy
    per index of the ``outer`` axes."""

    dims: tuple[int, ...]
    order: tuple[int, ...]
    rows: int
    cols: int
    depth: int
    outer: tuple[int, ...]


def strided_form(shape, perm) -> Strided:
    """The copies of :class:`Strided` for ``perm`` of ``shape``: its two largest moving
    axes (the first of equals) as every copy's rows and columns, so that it takes the
    fewest copies."""
    dims, order = _merged(shape, perm)
    n = len(dims)
    keeps_last = n > 0 and order[-1] == n - 1
    depth = dims[-1] if keeps_last else 1
    moving = list(range(n - 1 if keeps_last else n))
    while len(moving) < 2:   # a copy or one swap: an axis of one stands in
        dims, order, moving = dims + [1], order + [n], moving + [n]
        n += 1
    rows, cols = sorted(sorted(moving, key=lambda a: -dims[a])[:2])
    outer = tuple(a for a in moving if a not in (rows, cols))
    return Strided(tuple(dims), tuple(order), rows, cols, depth, outer)


def dense_strides(dims: tuple[int, ...]) -> list[int]:
    """Dense element strides of a tensor of ``dims``."""
    return [int(np.prod(dims[a + 1:], dtype=np.int64)) for a in range(len(dims))]


def strided_copies(form: Strided) -> int:
    """How many operations :func:`strided_ops` emits (boxes cut to the registers)."""
    d = form.dims
    outer = int(np.prod([d[a] for a in form.outer], dtype=np.int64))
    return outer * len(_chunks(d[form.rows])) * len(_chunks(d[form.cols])) * \
        len(_chunks(form.depth))


def rotation_copies(steps: tuple[Rotation, ...]) -> int:
    """How many operations the rotations ``steps`` emit (:func:`rotation_ops`)."""
    return sum(len(_chunks(a)) * len(_chunks(b)) * len(_chunks(inner)) for a, b, inner in steps)


#: the most copies a TRANSPOSE of several rotations is emitted as (:class:`Strided`, no
#: working memory) before it alternates through a copy of its tensor instead: Vela 5.2's
#: streams of 7- and 8-axis transposes run a few hundred operations
MAX_STRIDED_COPIES = 512


class TransposeForm(Enum):
    """How a TRANSPOSE's stream moves its tensor."""

    #: rotations of its axes, each one copy of the whole tensor (:func:`transpose_steps`),
    #: more than one alternating through working memory of the tensor's size
    ROTATIONS = "rotations"
    #: copies straight from input to output (:class:`Strided`), no working memory
    STRIDED = "strided"


def transpose_form(shape, perm, dtype: str) -> TransposeForm:
    """A TRANSPOSE of one rotation (or none) is that one copy; one of several rotations is
    strided copies, which take no working memory, unless they number more than
    :data:`MAX_STRIDED_COPIES`."""
    form = copy_form(shape, perm, dtype)
    if len(transpose_steps(form.shape, form.perm)) < 2:
        return TransposeForm.ROTATIONS
    if strided_copies(strided_form(form.shape, form.perm)) <= MAX_STRIDED_COPIES:
        return TransposeForm.STRIDED
    return TransposeForm.ROTATIONS


def transpose_copies(shape, perm, dtype: str) -> int:
    """How many copies the stream emits for a TRANSPOSE of a ``dtype`` tensor."""
    form = copy_form(shape, perm, dtype)
    if transpose_form(shape, perm, dtype) is TransposeForm.STRIDED:
        return strided_copies(strided_form(form.shape, form.perm))
    steps = transpose_steps(form.shape, form.perm)
    n = int(np.prod(form.shape, dtype=np.int64))
    return rotation_copies(steps or (Rotation(1, 1, n),))


def transpose_work_bytes(q) -> int:
    """Working memory of a transpose: one copy of the tensor to alternate through when its
    rotations are emitted and number more than one (none for one, none for strided
    copies)."""
    shape, perm = q.in_shapes[0], q.attrs["perm"]
    if len(copy_steps(shape, perm, q.out_dtype)) < 2 or \
            transpose_form(shape, perm, q.out_dtype) is TransposeForm.STRIDED:
        return 0
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(q.out_dtype).itemsize


def _chunks(n: int) -> list[tuple[int, int]]:
    """[start, stop) pieces of ``n`` no longer than a feature-map dimension may be."""
    return [(s, min(n, s + MAX_DIM)) for s in range(0, n, MAX_DIM)]


def strided_ops(form: Strided, src: FmSlot, dst: FmSlot, what: str, block: Callable) -> list:
    """The copies of :class:`Strided` ``form`` from ``src`` into ``dst``, in boxes no
    dimension of which exceeds the NPU's registers."""
    d, e = form.dims, np.dtype(src.dtype).itemsize
    ins = dense_strides(d)
    outs = [0] * len(d)
    for a, s in zip(form.order, dense_strides(tuple(d[a] for a in form.order))):
        outs[a] = s
    r, c = form.rows, form.cols
    ops = []
    for index in np.ndindex(*(d[a] for a in form.outer)):
        at_in = sum(int(i) * ins[a] for i, a in zip(index, form.outer))
        at_out = sum(int(i) * outs[a] for i, a in zip(index, form.outer))
        for i0, i1 in _chunks(d[r]):
            for j0, j1 in _chunks(d[c]):
                for k0, k1 in _chunks(form.depth):
                    box = (i1 - i0, j1 - j0, k1 - k0)
                    read = View(src.region, src.offset + (at_in + i0 * ins[r] + j0 * ins[c]
                                                          + k0) * e,
                                box, ins[r] * e, ins[c] * e, src.dtype)
                    write = View(dst.region, dst.offset + (at_out + i0 * outs[r]
                                                           + j0 * outs[c] + k0) * e,
                                 box, outs[r] * e, outs[c] * e, dst.dtype)
                    ops.append(copy_op(read, write, what, block))
    return ops


def rotation_ops(step: Rotation, src: FmSlot, dst: FmSlot, what: str, block: Callable) -> list:
    """One rotation: the (a, b, inner) box of ``src`` written to ``dst`` with its two outer
    strides exchanged, in boxes no dimension of which exceeds the NPU's registers."""
    a, b, inner = step
    e = np.dtype(src.dtype).itemsize
    ops = []
    for i0, i1 in _chunks(a):
        for j0, j1 in _chunks(b):
            for k0, k1 in _chunks(inner):
                box = (i1 - i0, j1 - j0, k1 - k0)
                read = View(src.region, src.offset + ((i0 * b + j0) * inner + k0) * e, box,
                            b * inner * e, inner * e, src.dtype)
                write = View(dst.region, dst.offset + ((j0 * a + i0) * inner + k0) * e, box,
                             inner * e, a * inner * e, dst.dtype)
                ops.append(copy_op(read, write, what, block))
    return ops


def transpose_ops(q, src: FmSlot, ofm: FmSlot, work: int | None, block: Callable) -> list:
    """TRANSPOSE in its :func:`transpose_form`: strided copies from ``src`` into ``ofm``, or
    its rotations (:func:`transpose_steps`), the last written to ``ofm`` and the ones before
    alternating between ``ofm`` and the working memory at ``work`` so that no step reads
    what it writes; a permutation that moves no data is one plain copy."""
    kind = transpose_form(q.in_shapes[0], q.attrs["perm"], src.dtype)
    form = copy_form(q.in_shapes[0], q.attrs["perm"], src.dtype)
    src, ofm = _as_codes(src, form.dtype), _as_codes(ofm, form.dtype)
    if kind is TransposeForm.STRIDED:
        return strided_ops(strided_form(form.shape, form.perm), src, ofm, q.tflite_name, block)
    steps = transpose_steps(form.shape, form.perm)
    if not steps:
        n = int(np.prod(form.shape, dtype=np.int64))
        return rotation_ops(Rotation(1, 1, n), src, ofm, q.tflite_name, block)
    if len(steps) > 1 and work is None:  # pragma: no cover - the stream paths give it
        raise AssertionError(f"{q.tflite_name}: {len(steps)} steps and no working memory")
    ops, at = [], src
    for k, step in enumerate(steps):
        to = ofm if (len(steps) - 1 - k) % 2 == 0 else FmSlot(
            SCRATCH_REGION, work, ofm.shape, ofm.dtype, None, 0)
        ops += rotation_ops(step, at, to, q.tflite_name, block)
        at = to
    return ops


def stripe_box(q, box, full) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The (rows, columns) of a planner's stripe ``box`` of a 4-D output (None for the whole
    ``full`` output); a stripe that splits channels or another layout is refused."""
    box, full = tuple(tuple(b) for b in box), tuple(tuple(f) for f in full)
    if box == full:
        return None
    if q.kind == Op.ARG_MAX and len(box) >= 2 and box[:-2] == full[:-2]:
        return box[-2], box[-1]   # its output has no depth: the last two axes are the pixels
    if len(box) != 4 or box[0] != full[0] or box[3] != full[3]:
        raise UnsupportedOperatorError(q.tflite_name, f"the plan stripes it as {box}")
    return box[1], box[2]


#: operators whose copies :func:`ring_copies` can place in a planner's rings (each copy one
#: dense box, no step or upscaling)
RING_KINDS = (Op.PAD, Op.CONCATENATE)


def ring_copies(q, operands: list[FmSlot], ofm: FmSlot, flash: Flash) -> list[Copy]:
    """The copies of a :data:`RING_KINDS` operator over whole tensors, for a stream that
    clips them to each stripe and addresses each box in the planner's buffers. ``operands``
    and ``ofm`` may be stand-ins: a copy's source box is found from its offset and the
    operand's dense strides (:func:`box_origin`)."""
    if q.kind not in RING_KINDS:  # pragma: no cover - the caller checks
        raise AssertionError(q.kind)
    return _LOWERINGS[q.kind](q, operands, ofm, flash)


def box_origin(v: View, slot: FmSlot) -> tuple[int, int, int]:
    """The (height, width, depth) element of dense ``slot`` at which view ``v`` starts."""
    e = np.dtype(slot.dtype).itemsize
    _, w, c = slot.shape
    d = (v.offset - slot.offset) // e
    return d // (w * c), d // c % w, d % c


_LOWERINGS = {
    Op.PAD: pad_copies,
    Op.MIRROR_PAD: mirror_pad_copies,
    Op.REVERSE: reverse_copies,
    Op.TILE: tile_copies,
    Op.SPLIT: split_copies,
    Op.CONCATENATE: concat_copies,
    Op.RESIZE_NEAREST: resize_copies,
    Op.RESIZE_BILINEAR: resize_copies,
}


def _batch_rows(q, rows: tuple[int, int]) -> list[tuple[int, int]]:
    """A stripe's output ``rows`` in every batch of a 4-D output, whose batches the copies
    fold into their rows (``npu_ops.shape3``): the planner stripes each batch's height."""
    if len(q.out_shape) != 4:
        return [rows]
    n, h = int(q.out_shape[0]), int(q.out_shape[1])
    return [(k * h + rows[0], k * h + rows[1]) for k in range(n)]


def movement_ops(q, operands: list[FmSlot], ofm: FmSlot, flash: Flash, block: Callable,
                 box: tuple[tuple[int, int], tuple[int, int]] | None = None) -> list:
    """The NPU operations of data-movement operator ``q`` (``stream_ops``' MOVEMENT rows)
    from ``operands`` into ``ofm``, or only those writing output rows and columns ``box``
    (a planner's stripe; whole tensors); ``block(npu)`` picks each one's block config,
    ``flash`` takes constants (PAD's fill codes)."""
    for slot in (*operands, ofm):
        if slot.dtype not in COPY_TYPES:
            raise UnsupportedOperatorError(q.tflite_name, f"a {slot.dtype} tensor")
    if q.kind == Op.MIRROR_PAD and box is None:
        return mirror_pad_ops(q, operands[0], ofm, block)
    copies = _LOWERINGS[q.kind](q, operands, ofm, flash)
    if box is not None:
        rows, cols = box
        copies = [p for cp in copies for span in _batch_rows(q, rows) for p in clip(cp, span, cols)]
    out = dense(ofm)
    ops = []
    for cp in copies:
        f = 2 if cp.upscale else 1
        h, w, c = cp.src.shape
        dst = out.at(*cp.at, (h * f, w * f, c)).every(*cp.step, (h * f, w * f, c))
        ops.append(copy_op(cp.src, dst, q.tflite_name, block, upscale=cp.upscale,
                           rescale=cp.rescale, clamp=cp.clamp))
    return ops


def _band_view(slot: FmSlot, box: mirror_bands.Box) -> View:
    return View(slot.region, slot.offset + box.offset, box.shape, *box.strides, slot.dtype)


def mirror_pad_ops(q, ifm: FmSlot, ofm: FmSlot, block: Callable) -> list:
    """A whole MIRROR_PAD (REFLECT or SYMMETRIC) of any axis of a tensor of up to 5 axes:
    the input into the middle of the output, then each padded band of each axis one copy
    written through a negative stride (``mirror_bands``), reading the input or the
    output's bands written before it. A planner's stripe takes :func:`mirror_pad_copies`
    instead, which read the input only."""
    pads = [tuple(int(v) for v in p) for p in q.attrs["pad_width"]]
    dims = [int(d) for d in q.in_shapes[0]]
    copies = mirror_bands.mirror_pad_copies(dims, pads, q.attrs.get("mode") == "SYMMETRIC",
                                            np.dtype(ofm.dtype).itemsize)
    return [copy_op(_band_view(ifm if cp.from_input else ofm, cp.src), _band_view(ofm, cp.dst),
                    q.tflite_name, block) for cp in copies]
