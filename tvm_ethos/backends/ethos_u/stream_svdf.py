"""An SVDF (``ops_svdf.Svdf``) as one Ethos-U command stream, the step TFLite Micro's integer
kernel computes, for all batches at once:

1. the state shift: a 1x1 pool copies some rows' values 1..memory-1 into a scratch buffer,
   a second copies them back one value to the left (two copies: the NPU gives no order to
   an operation reading and writing one buffer, and the DMA takes only 16-byte aligned
   addresses and lengths), as many rows at a time as :func:`shift_rows` says, so that the
   buffer holds what one pair of copies needs rather than the whole state;
2. the new column: a FULLY_CONNECTED of the input with ``weights_feature`` into an int16
   buffer over the shift's (free again once the shift is done), at TFLite Micro's
   ``effective_scale_1``, its output zero point the state's and its clamp the state type's
   range shifted by it, so each value is ``zp + clamp(r)`` exactly as TFLite Micro forms
   it before storing it;
3. a 1x1 pool copies the low byte of each of those int16 values (a strided int8 view) into
   the state's last column (strided by ``memory``): the byte TFLite Micro's int8 store
   keeps, also where ``zp + clamp(r)`` leaves the int8 range;
4. the time step, the rank sum, the bias and the output requantization as one
   FULLY_CONNECTED of the whole state (``filters * memory`` values a batch, less the
   state's zero point) into ``units`` outputs: unit ``u``'s weights are the
   ``weights_time`` rows of its ``rank`` filters and zero elsewhere, its bias TFLite Micro's,
   its multiplier ``effective_scale_2``, the output's zero point, the int8 range.

The state is the operator's variable tensor: an input of the ``ethos-u`` operator that the
stream updates in place in the scratch arena, so it carries over between invocations as on
a board. :class:`SvdfArena` keeps it clear of the neighbouring ``ethos-u`` operators'
stretches and of the states placed before it, and its writes off what they keep.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from planner.parts import SVDF_SHIFT_BUFFER_BYTES, svdf_shift_rows
from tvm_ethos.backends.ethos_u.encode_ahead import encode_weights
from tvm_ethos.backends.ethos_u.npu_ops import (
    FmSlot,
    block_config,
    feature_map,
    fully_connected_op,
    real_bound,
)
from tvm_ethos.backends.ethos_u.ops_svdf import KIND, Svdf
from tvm_ethos.backends.ethos_u.payload import ArenaTensor, EthosUPayload
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    SCRATCH_REGION,
    Flash,
    UnsupportedOperatorError,
    npu_accelerator,
    vela_api,
)
from tvm_ethos.backends.ethos_u.stream_memo import generator
from tvm_ethos.backends.ethos_u.stream_payload import driver_payload
from tvm_ethos.compute.quant import quantize_multiplier


class Neighbour(NamedTuple):
    """An ethos-u operator sharing a tensor with the SVDF: that tensor's offset in its
    stretch, the stretch's bytes, and the (offset, bytes) in its stretch of what it keeps
    between invocations (its own states), which the SVDF's stream must not write."""

    offset: int
    stretch_bytes: int
    keeps: tuple[tuple[int, int], ...] = ()


#: the bytes the state shift's buffer may take before the shift goes fewer rows at a time
#: (where the new column's int16 buffer, which lies over it, is larger, that size)
SHIFT_BUFFER_BYTES = SVDF_SHIFT_BUFFER_BYTES


def shift_rows(svdf: Svdf) -> int:
    """State rows one pair of shift copies moves (0: a memory of 1, nothing to shift): the
    planner's :func:`~planner.parts.svdf_shift_rows`, so that its Part prices and holds what
    the stream does."""
    return svdf_shift_rows(svdf.batches * svdf.filters, svdf.memory)


class SvdfArena(NamedTuple):
    """Offsets in the SVDF's stretch of the scratch arena: its input, output and state
    (int8), the new column (int16, one value a filter and batch) and the shift's scratch
    (int8, ``memory - 1`` values a row for :func:`shift_rows` rows); ``bytes`` the
    stretch's size."""

    input: int
    output: int
    state: int
    column: int
    shifted: int
    bytes: int

    @classmethod
    def of(cls, svdf: Svdf, input_from: Neighbour | None = None,
           output_to: Neighbour | None = None, floor: int | None = None,
           input_kept: bool = True) -> "SvdfArena":
        """The first layout that keeps the state out of the neighbours' stretches and off
        the states placed before it, and the SVDF's writes off what the neighbours keep.
        ``floor``: where the lowest state placed so far starts, relative to the input's
        address (None: none known); ``input_kept``: whether anything reads the input
        after the SVDF (else the output may lie over it). First the state below
        everything (the neighbours' stretches and ``floor``), the input, the working
        buffers and the output above: a
        chain of SVDFs stacks its states downwards, each under the ones before, while
        every SVDF's working buffers lie where the chain's tensors pass, the same bytes
        for all of them (the stretch covers the states before its own, which its stream
        does not write); then the input lowest, the working buffers, the state and the
        output highest (a chain of such stretches climbs the arena, every state between
        its own operator's input and output); else the state above everything, the
        neighbours' stretches included; UnsupportedOperatorError where none does."""
        sizes = _Sizes.of(svdf)
        layouts = (_stacked(sizes, input_from, output_to, floor, input_kept),
                   _chained(sizes, input_from, output_to),
                   _state_on_top(sizes, input_from, output_to))
        for arena in layouts:
            if _clear(arena, sizes, input_from, output_to, floor):
                return arena
        raise UnsupportedOperatorError(KIND, "no layout of its stretch keeps its state clear "
                                       "of the ethos-u operators beside it and theirs of it")


class _Sizes(NamedTuple):
    input: int
    output: int
    state: int
    column: int
    shifted: int

    @classmethod
    def of(cls, svdf: Svdf) -> "_Sizes":
        b, f = svdf.batches, svdf.filters
        return cls(b * svdf.input_size, b * svdf.units, b * svdf.state_size, 2 * b * f,
                   shift_rows(svdf) * (svdf.memory - 1))

    @property
    def work(self) -> int:
        """The shift's buffer and the new column over it."""
        return max(self.column, self.shifted)


def _up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _stretch(at: int, theirs: Neighbour | None) -> tuple[int, int] | None:
    """A neighbour's stretch [lo, hi) in the SVDF's offsets, its shared tensor at ``at``."""
    return None if theirs is None else (at - theirs.offset,
                                        at - theirs.offset + theirs.stretch_bytes)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def _phase(theirs: Neighbour | None) -> int:
    """Where a shared tensor starts modulo ALIGN: as in the neighbour's stretch, so that both
    stretches start aligned."""
    return theirs.offset % ALIGN if theirs else 0


def _at_or_above(low: int, phase: int) -> int:
    """The least offset >= ``low`` at ``phase`` modulo ALIGN."""
    return low + (phase - low) % ALIGN


def _stacked(sizes: _Sizes, input_from: Neighbour | None, output_to: Neighbour | None,
             floor: int | None, input_kept: bool) -> SvdfArena:
    """The state lowest, under the neighbours' stretches and ``floor``; above it (past the
    states before it) the input, the working buffers, the output over them (it is written
    last, from the state alone), and over the input too where nothing reads it after."""
    x = _phase(input_from)   # offsets from here on are relative to the stretch's start
    work = _up(x + sizes.input)
    y = _at_or_above(work if input_kept else x, _phase(output_to))
    top = max(work + sizes.work, y + sizes.output)
    ceiling = min([x] + [s[0] for s in (_stretch(x, input_from), _stretch(y, output_to)) if s]
                  + ([x + floor] if floor is not None else []))
    state = (ceiling - sizes.state) // ALIGN * ALIGN
    shift = -state   # the state starts the stretch
    return SvdfArena(x + shift, y + shift, 0, work + shift, work + shift, top + shift)


def _chained(sizes: _Sizes, input_from: Neighbour | None,
             output_to: Neighbour | None) -> SvdfArena:
    """Input, working buffers, state, output, upwards; the state above the writer's stretch
    and the output high enough that the reader's stretch starts above the state."""
    x = _phase(input_from)
    col = _up(x + sizes.input)
    state = _up(col + sizes.work)
    if input_from is not None:
        state = max(state, _up(_stretch(x, input_from)[1]))
    low = state + sizes.state + (output_to.offset if output_to else 0)
    y = _at_or_above(low, _phase(output_to))
    return SvdfArena(x, y, state, col, col, y + sizes.output)


def _state_on_top(sizes: _Sizes, input_from: Neighbour | None,
                  output_to: Neighbour | None) -> SvdfArena:
    """Input, output, working buffers, then the state above the neighbours' stretches."""
    x = _phase(input_from)
    y = _at_or_above(x + sizes.input, _phase(output_to))
    col = _up(y + sizes.output)
    ends = [_up(col + sizes.work)] + [
        s[1] for s in (_stretch(x, input_from), _stretch(y, output_to)) if s]
    state = _up(max(ends))
    return SvdfArena(x, y, state, col, col, state + sizes.state)


def _clear(arena: SvdfArena, sizes: _Sizes, input_from: Neighbour | None,
           output_to: Neighbour | None, floor: int | None) -> bool:
    """Whether no neighbour's stretch covers the state, the state lies under ``floor``
    (where given), and the SVDF's stream writes nothing a neighbour keeps."""
    mine = (arena.state, arena.state + sizes.state)
    if floor is not None and mine[1] > arena.input + floor:
        return False
    written = [(at, at + n) for at, n in ((arena.column, sizes.work), mine,
                                          (arena.output, sizes.output)) if n]
    for at, theirs in ((arena.input, input_from), (arena.output, output_to)):
        if theirs is None:
            continue
        if _overlap(mine, _stretch(at, theirs)):
            return False
        base = at - theirs.offset
        if any(_overlap((base + off, base + off + n), w)
               for off, n in theirs.keeps for w in written):
            return False
    return True


# ------------------------------------------------------------------------------ the stream
def _view(slot: FmSlot, strides: tuple[int, int] | None = None):
    """The NPU feature map of ``slot``, NHWC with (row, column) byte strides where given."""
    fm = feature_map(slot)
    if strides is not None:
        api = vela_api()
        fm.strides = api.NpuShape3D(strides[0], strides[1], np.dtype(slot.dtype).itemsize)
    return fm


class _Emitter:
    def __init__(self, svdf: Svdf, accelerator: str, arena: SvdfArena, flash: Flash):
        self.svdf, self.arena, self.flash = svdf, arena, flash
        self.api = vela_api()
        self.acc = npu_accelerator(accelerator)
        self.ops: list = []

    def copy(self, ifm, ofm, name: str) -> None:
        """A 1x1 average pool at scale 1: the values unchanged."""
        from ethosu.vela.operation import ExplicitScaling

        api = self.api
        npu = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
        npu.ifm, npu.ofm = ifm, ofm
        npu.kernel = api.NpuKernel(1, 1)
        npu.padding = api.NpuPadding(0, 0, 0, 0)
        npu.rounding_mode = api.NpuRoundingMode.TFL
        npu.activation = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        npu.rescale = ExplicitScaling(False, [0], [1])
        npu.block_config = block_config(npu, self.acc)
        npu.name = f"svdf {name}"
        self.ops.append(npu)

    def fully_connected(self, ifm: FmSlot, ofm: FmSlot, weights: np.ndarray, bias: np.ndarray,
                        scale: float, activation, name: str) -> None:
        """``weights`` (outputs, inputs) of raw codes, ``bias`` int32 per output, TFLite
        Micro's multiplier of ``scale``."""
        api = self.api
        npu = fully_connected_op(api, ifm, ofm)
        npu.activation = activation
        npu.block_config = block_config(npu, self.acc)
        enc = encode_weights(
            self.acc, weights.astype(np.int16)[:, None, None, :], (1, 1), 8,
            npu.block_config.depth, False, api.NpuBlockTraversal.DEPTH_FIRST)
        m, s = quantize_multiplier(scale)
        entries = b"".join(bytes(api.npu_encode_bias(np.int64(v), int(m), 31 - int(s)))
                           for v in bias.tolist())
        npu.weights, npu.biases = [self.flash.add(enc)], [self.flash.add(entries)]
        npu.name = f"svdf {name}"
        self.ops.append(npu)

    def step(self) -> None:
        api, svdf, a = self.api, self.svdf, self.arena
        b, f, m = svdf.batches, svdf.filters, svdf.memory
        rows = b * f   # one state row a filter and batch
        unit = 1.0
        step = shift_rows(svdf)
        for first in range(0, rows, step) if step else ():
            n = min(step, rows - first)
            at = a.state + first * m
            old = FmSlot(SCRATCH_REGION, at + 1, (1, n, m - 1), "int8", unit, 0)
            tmp = FmSlot(SCRATCH_REGION, a.shifted, (1, n, m - 1), "int8", unit, 0)
            new = FmSlot(SCRATCH_REGION, at, (1, n, m - 1), "int8", unit, 0)
            self.copy(_view(old, (n * m, m)), _view(tmp), "shift out")
            self.copy(_view(tmp), _view(new, (n * m, m)), "shift back")
        zp = svdf.state_q.zero_point
        x = FmSlot(SCRATCH_REGION, a.input, (1, b, svdf.input_size), "int8",
                   svdf.input_q.scale, svdf.input_q.zero_point)
        col = FmSlot(SCRATCH_REGION, a.column, (1, b, f), "int16", unit, zp)
        clamp = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
        clamp.min, clamp.max = real_bound(zp - 128, unit, zp), real_bound(zp + 127, unit, zp)
        self.fully_connected(x, col, svdf.weights_feature, np.zeros(f, np.int64),
                             svdf.feature_scale, clamp, "feature")
        low = FmSlot(SCRATCH_REGION, a.column, (1, rows, 1), "int8", unit, 0)
        last = FmSlot(SCRATCH_REGION, a.state + m - 1, (1, rows, 1), "int8", unit, 0)
        self.copy(_view(low, (2 * rows, 2)), _view(last, (rows * m, m)), "new column")
        state = FmSlot(SCRATCH_REGION, a.state, (1, b, svdf.state_size), "int8",
                       svdf.state_q.scale, zp)
        out = FmSlot(SCRATCH_REGION, a.output, (1, b, svdf.units), "int8",
                     svdf.output_q.scale, svdf.output_q.zero_point)
        self.fully_connected(state, out, time_weights(svdf), svdf.bias, svdf.time_scale,
                             api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU), "time")


def time_weights(svdf: Svdf) -> np.ndarray:
    """(units, filters * memory): unit ``u`` reads its ``rank`` filters' rows of the state
    with their ``weights_time`` rows, every other value with weight 0."""
    out = np.zeros((svdf.units, svdf.filters, svdf.memory), np.int16)
    for u in range(svdf.units):
        rows = slice(u * svdf.rank, (u + 1) * svdf.rank)
        out[u, rows] = svdf.weights_time[rows]
    return out.reshape(svdf.units, svdf.state_size)


@generator
def svdf_payload(svdf: Svdf, accelerator: str, names: tuple[str, str, str],
                 arena: SvdfArena) -> EthosUPayload:
    """The payload of one SVDF step for ``accelerator`` laid out as ``arena``; ``names`` are
    the source tensors' names of its input, state and output. Inputs are (input, state),
    the state updated in place; the output is the operator's."""
    acc = npu_accelerator(accelerator)
    flash = Flash()
    emitter = _Emitter(svdf, accelerator, arena, flash)
    emitter.step()
    payload = driver_payload(emitter.ops, acc)
    b = svdf.batches
    ins = (ArenaTensor(names[0], (b, svdf.input_size), "int8", arena.input),
           ArenaTensor(names[1], (b, svdf.state_size), "int8", arena.state))
    outs = (ArenaTensor(names[2], (b, svdf.units), "int8", arena.output),)
    return EthosUPayload(accelerator, bytes(payload), bytes(flash.data), arena.bytes, 0, ins,
                         outs, work_bytes=_Sizes.of(svdf).work)
