"""A command stream that executes the planner's Proposal: stripes, rings and its arena layout.

``stream_plan.plan_steps`` lists what each Plan computes, step by step (the schedule the
"tir" emulator runs, ``emulator.schedule``); every step becomes one NPU operation over that box
of its Part's output:

* its IFM is the window the box reads (stride, dilated kernel, padding), clipped to the input
  tensor, and its padding only what the window reaches past the tensor's edges (a stripe
  inside the tensor has none);
* every tensor lives where ``stream_plan.arena_layout`` puts it: the tensors between Plans
  whole, a Plan's intermediates in their planned buffers, folded ``row % rows`` along every
  axis the buffer is shorter on (the ring addressing the TensorIR schedule uses). A box that
  wraps a ring is one feature map in up to four tiles (``NpuTileBox``): tile 2 holds the rows
  past the ring's end, tiles 1 and 3 the columns. The layout is the plan's SRAM: the arena
  (region 1) on an Ethos-U55, the fast scratch (region 2) on an Ethos-U65, whose arena then
  holds only the network's inputs and outputs: read and written there in place when the
  plan was made so (``Device.io_read_in_place``, the compile path's Ethos-U65 device), else
  copied in and out (``_io_in_fast_scratch``);
* its block config (and a convolution's traversal) is the one the planner's performance
  model costed the step with, where Vela takes it (``_Emitter.block_config``);
* weights are encoded once per block depth and traversal into flash (region 0); a Plan's
  weight copies and staging buffer are one block of the layout, which DMAs fill with encoded
  streams (``stream_weights``: copies before the Plan, staged Parts slice by slice); what
  does not fit is read in place from flash;
* PAD and CONCATENATION are their copies clipped to the step's rows and columns, each box
  addressed in its buffer, ring or whole (``_Emitter.ring_movement``), and to its channels
  where the step computes only some;
* a step over a range of output channels (a Part whose next reads only those) is one
  operation per piece of it contiguous in every buffer it touches (``stream_channels``); an
  empty range (a CONCATENATION stripe that reads none of an input) is no operation;
* a RESHAPE planned alone (``planner.aliases``) is its input's bytes: its output gets its
  root's address and no operation; an activation planned alone ``in_place`` gets its root's
  address and its operation, which writes each element over the one it reads;
* FULLY_CONNECTED, MEAN, SOFTMAX and any other RESHAPE (its bytes copied by an identity
  pool) run only over whole tensors held whole; a Plan that stripes them or keeps their
  operands in a ring raises :class:`UnsupportedOperatorError` naming the operator, as does a
  Plan form ``plan_steps`` does not list.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from planner.aliases import aliased_outputs, in_place
from planner.devices import get_device
from planner.errors import PlannerError
from planner.perf.ethos_u import lower_part
from planner.perf.ethos_u_npu import ACCELERATORS, NpuOp, find_block_config
from planner.work_memory import work_tensor
from tvm_ethos.backends.ethos_u.encode_ahead import (
    AHEAD_MIN_REQUEST,
    EncodeRequest,
    encoding_ahead,
    worth_ahead,
)
from tvm_ethos.backends.ethos_u.npu_ops import (
    PLANNER_BLOCK,
    PLANNER_BLOCK_UNLISTED,
    SEARCHED,
    FmSlot,
    attach_constants,
    block_config,
    chosen_block,
    shape3,
    weights_request,
)
from tvm_ethos.backends.ethos_u.npu_ops import feature_map as plain_feature_map
from tvm_ethos.backends.ethos_u.ops_lstm import KIND as LSTM
from tvm_ethos.backends.ethos_u.ops_movement import (
    RING_KINDS,
    box_origin,
    channel_runs,
    clip,
    feature_map_of,
    fm_copy_op,
    ring_copies,
    stripe_box,
)
from tvm_ethos.backends.ethos_u.payload import ArenaTensor, EthosUPayload
from tvm_ethos.backends.ethos_u.stream_base import (
    ALIGN,
    FAST_SCRATCH_REGION,
    FLASH_REGION,
    SCRATCH_REGION,
    Flash,
    UnsupportedOperatorError,
    lut_address,
    npu_accelerator,
    sram_region,
    uses_lut,
    vela_api,
)
from tvm_ethos.backends.ethos_u.stream_block_agreement import (
    AGREED_BLOCK,
    no_slower,
    within_output,
)
from tvm_ethos.backends.ethos_u.stream_channels import (
    ALL_INPUT_CHANNELS,
    OWN_WEIGHTS,
    channel_pieces,
    clip_channels,
    own_constants,
)
from tvm_ethos.backends.ethos_u.stream_gen import output_source, work_key
from tvm_ethos.backends.ethos_u.stream_lstm import JoinedLstm, joined_ops
from tvm_ethos.backends.ethos_u.stream_memo import generator
from tvm_ethos.backends.ethos_u.stream_ops import (
    POINTWISE,
    Emission,
    Form,
    emitter,
    operator_constants,
)
from tvm_ethos.backends.ethos_u.stream_payload import driver_payload
from tvm_ethos.backends.ethos_u.stream_plan import (
    Buffer,
    LayoutError,
    ScheduleFormError,
    arena_layout,
    longest_runs,
    plan_steps,
)
from tvm_ethos.backends.ethos_u.stream_weights import (
    PrefetchFormError,
    Stager,
    WeightPool,
    channel_slice,
    copy_weights,
    pool_key,
    weight_pool,
)

#: the planner's NPU operation class (planner.perf.ethos_u_npu) of each Vela operation type
_NPU_CLASS = {"NpuConv2DOperation": "conv", "NpuConvDepthWiseOperation": "depthwise",
              "NpuPoolingOperation": "pooling", "NpuElementWiseOperation": "elementwise"}
#: the region the network's inputs and outputs are emitted in while the plan's SRAM is still
#: region 1: not a base pointer, renamed to the arena (region 1) once the plan's SRAM has
#: moved to the fast scratch (``generate_planned``)
_ARENA_IO = -1
#: the first of the regions a ring movement's stand-in operand slots name (never emitted)
_STAND_IN = -100


@dataclasses.dataclass(frozen=True)
class _Storage:
    """Where a feature map lives: its buffer of ``shape`` (height, width, depth) at ``offset``
    of the arena; a tensor taller or wider than its buffer is folded (a ring)."""

    offset: int
    shape: tuple[int, int, int]
    tensor: tuple[int, int, int]
    dtype: str
    region: int = SCRATCH_REGION

    @property
    def whole(self) -> bool:
        return self.shape == self.tensor


def _window(o0, o1, k, s, d, before, extent):
    """The clipped input range [lo, hi) output rows [o0, o1) read, and the padding before and
    after it."""
    lo = o0 * s - before
    hi = (o1 - 1) * s - before + (k - 1) * d + 1
    clo, chi = max(lo, 0), min(hi, extent)
    return clo, chi, clo - lo, hi - chi


def tile_addresses(a0: int, a1: int, a2: int, a3: int, wraps_rows: bool,
                   wraps_cols: bool) -> list[int]:
    """The four tile bases of a box, those of the tiles it does not reach 0 (tile 1 is the
    columns past the ring's end, tile 2 the rows, tile 3 both): an unreached tile's base is
    never read, and a constant one is not written again at every stripe (the emitter writes
    only registers whose value changes)."""
    return [a0, a1 if wraps_cols else 0, a2 if wraps_rows else 0,
            a3 if wraps_rows and wraps_cols else 0]


def feature_map(api, st: _Storage, rows, cols, region: int, scale, zero_point):
    """The NpuFeatureMap of the box ``rows`` x ``cols`` (all channels) of a tensor held in
    ``st``: up to four tiles where the box wraps the buffer."""
    (y0, y1), (x0, x1) = rows, cols
    bh, bw, c = st.shape
    e = np.dtype(st.dtype).itemsize
    h, w = y1 - y0, x1 - x0
    if h > bh or w > bw:  # pragma: no cover - the planner sizes buffers for their windows
        raise UnsupportedOperatorError("a ring", f"a {h}x{w} box in a {bh}x{bw} buffer")
    fm = plain_feature_map(FmSlot(region, st.offset, (h, w, c), st.dtype, scale, zero_point))
    sy, sx = bw * c * e, c * e
    ry, rx = y0 % bh, x0 % bw
    h0, w0 = min(h, bh - ry), min(w, bw - rx)
    base = st.offset
    fm.tiles = api.NpuTileBox(h0, h0 if w0 < w else 0, w0,
                              tile_addresses(base + ry * sy + rx * sx, base + ry * sy,
                                             base + rx * sx, base, h0 < h, w0 < w))
    fm.strides = api.NpuShape3D(sy, sx, e)
    return fm


class _Emitter:
    """Turns steps into NPU operations (block configs and encoded weights cached).

    Each operation's block is the one the planner's performance model (``perf``, the
    device's) costed its stripe with, where Vela lists it as legal for the operation
    (:func:`~tvm_ethos.backends.ethos_u.npu_ops.chosen_block`), or the height and width of
    the operation before's where that is legal and estimated no slower
    (``stream_block_agreement``: the registers are not written again); ``block_sources``
    counts the operations by where their block came from."""

    def __init__(self, lw, acc, accelerator, flash, storage, offsets, part_layer, consts,
                 stager=None, graph=None, perf=None):
        self.api = vela_api()
        self.stager = stager
        self.lw, self.acc, self.accelerator, self.flash = lw, acc, accelerator, flash
        self.storage, self.offsets, self.part_layer, self.consts = (storage, offsets,
                                                                    part_layer, consts)
        self.layers = list(lw.layers)
        self.outs = list(lw.tensors.values())
        self.parts = {p.name: p for p in graph.parts} if graph is not None else {}
        self.perf = perf if hasattr(perf, "breakdown") else None
        self.step_at = None          # (part, box) of the step being emitted
        self.planned: dict = {}      # (part, stripe shape) -> [(NPU class, BlockConfig,
        #                              planner NpuOp, the Part's whole NpuOp or None)]
        self.held = None             # (height, width) of the block the last operation ran
        self.agreed: dict = {}       # (block key, held) -> the agreeing block, or None
        self.block_sources: dict = {}
        self.blocks: dict = {}
        self.encoded: dict = {}
        self.const_slots: dict = {}
        self.ring_plans: dict = {}   # step -> (stand-in operand slots, whole-tensor copies)
        self.te_dims: dict = {}      # TE tensor name -> (shape, dtype): see :meth:`dims`
        self.work_bytes: dict = {}   # step -> bytes of its working memory (_work_bytes)
        self.ops: list = []

    def dims(self, t) -> tuple[tuple[int, ...], str]:
        """(shape as ints, dtype) of the TE tensor ``t``, read from TVM once per tensor: every
        step reads its operands' again, and each read builds TVM objects."""
        k = t.op.name
        if k not in self.te_dims:
            self.te_dims[k] = (tuple(int(s) for s in t.shape), str(t.dtype))
        return self.te_dims[k]

    # --- constants and configs
    def block_config(self, npu, key):
        """The block of ``npu``, an operation of the current step (cached by ``key``); a
        convolution also takes the traversal the planner costed with its block
        (part-kernel-first where that uses the MAC array better, as Vela chooses), else
        depth-first."""
        api = self.api
        if key not in self.blocks:
            wanted, traversal = self.planner_block(npu) if self.step_at is not None \
                else (None, None)
            conv = isinstance(npu, api.NpuConv2DOperation)
            if conv and traversal == "part_kernel":
                npu.block_traversal = api.NpuBlockTraversal.PART_KERNEL_FIRST
            cfg, why = chosen_block(npu, self.acc, wanted)
            if conv and why not in (PLANNER_BLOCK, PLANNER_BLOCK_UNLISTED):
                npu.block_traversal = api.NpuBlockTraversal.DEPTH_FIRST
                cfg = block_config(npu, self.acc)
            self.blocks[key] = (cfg, why, getattr(npu, "block_traversal", None))
        cfg, why, traversal = self.blocks[key]
        if traversal is not None:
            npu.block_traversal = traversal
        if why in (PLANNER_BLOCK, PLANNER_BLOCK_UNLISTED) and self.held is not None and \
                self.held != (cfg.height, cfg.width):
            if (key, self.held) not in self.agreed:
                self.agreed[key, self.held] = self.agreeing_block(npu, cfg)
            agreed = self.agreed[key, self.held]
            if agreed is not None:
                cfg, why = agreed, AGREED_BLOCK
        self.block_sources[why] = self.block_sources.get(why, 0) + 1
        self.held = (cfg.height, cfg.width)
        return cfg

    def agreeing_block(self, npu, cfg):
        """The block of ``npu`` (an operation of the current step, whose own block is
        ``cfg``) with the height and width the previous operation ran: where it is no larger
        than ``npu``'s output needs, Vela's generator takes it and the planner's performance
        model estimates it no slower; else None."""
        planned = self.planned_op(npu)
        if planned is None or not hasattr(self.perf, "fm_timing"):   # not an Ethos-U model
            return None
        op, whole = planned
        ofm = (npu.ofm.shape.height, npu.ofm.shape.width)
        if not within_output(self.held, ofm, ACCELERATORS[self.accelerator].ofm_ublock[:2]):
            return None
        other = self.held + (cfg.depth,)
        got, why = chosen_block(npu, self.acc, other)
        if why not in (PLANNER_BLOCK, PLANNER_BLOCK_UNLISTED):
            return None
        if not no_slower(self.perf, op, whole, (cfg.height, cfg.width, cfg.depth), other):
            return None
        return got

    def fallback_block(self, npu):
        """The block of an operation the planner does not cost as such (a SOFTMAX's pieces,
        copies): its own block search's for the operation, where Vela takes it
        (:data:`SEARCHED`), else Vela's largest."""
        cfg, why = chosen_block(npu, self.acc, self.searched_block(npu))
        if why in (PLANNER_BLOCK, PLANNER_BLOCK_UNLISTED):
            why = SEARCHED
        self.block_sources[why] = self.block_sources.get(why, 0) + 1
        self.held = (cfg.height, cfg.width)
        return cfg

    def searched_block(self, npu):
        """The planner's block search (``find_block_config``, regor's) run on ``npu``
        itself, clipped as :meth:`planner_block` clips; None where it finds none."""
        api = self.api
        cls = _NPU_CLASS.get(type(npu).__name__)
        if cls == "pooling" and npu.sub_op_type == api.NpuPoolingOp.REDUCE_SUM:
            cls = "reduce_sum"

        def shape4(fm):
            return (1, fm.shape.height, fm.shape.width, fm.shape.depth)

        ifm2 = getattr(npu, "ifm2", None)
        k = npu.kernel
        lut = uses_lut(npu)
        op = NpuOp(cls, type(npu).__name__, shape4(npu.ifm), shape4(npu.ofm),
                   ifm2=shape4(ifm2) if ifm2 is not None else (
                       (1, 1, 1, 1) if getattr(npu, "ifm2_scalar", None) is not None else None),
                   kernel=(k.height, k.width) if k else (1, 1),
                   stride=(k.stride_y, k.stride_x) if k else (1, 1),
                   dilation=(k.dilation_y, k.dilation_x) if k else (1, 1),
                   ifm_bits=npu.ifm.data_type.size_in_bits(),
                   ofm_bits=npu.ofm.data_type.size_in_bits(),
                   upscale=1 if npu.ifm_upscale == api.NpuResamplingMode.NONE else 2,
                   lut_bytes=2048 if lut else 0)   # Vela reserves two banks for any LUT
        acc = ACCELERATORS[self.accelerator]
        try:
            block = find_block_config(acc, op).ofm_block
        except PlannerError:
            return None
        ofm = op.ofm[1:]
        return tuple(-(-min(b, o) // u) * u for b, o, u in zip(block, ofm, acc.ofm_ublock))

    def planner_block(self, npu):
        """(OFM block (height, width, depth), traversal): what the planner's performance
        model costed the current step with, for the one operation of its lowering of
        ``npu``'s class, the block clipped to the OFM as Vela lists blocks (rounded up to
        the micro-block); (None, None) when there is no model, no such operation or
        several."""
        configs = self.planned_step(npu)
        if len(configs) != 1:
            return None, None
        ofm = (npu.ofm.shape.height, npu.ofm.shape.width, npu.ofm.shape.depth)
        return self.clipped(configs[0][0], ofm), configs[0][0].traversal

    def clipped(self, cfg, ofm) -> tuple[int, int, int]:
        """The OFM block of the planner's ``cfg`` clipped to ``ofm`` (height, width, depth)
        as Vela lists blocks: rounded up to the micro-block."""
        ub = ACCELERATORS[self.accelerator].ofm_ublock
        return tuple(-(-min(b, o) // u) * u for b, o, u in zip(cfg.ofm_block, ofm, ub))

    def planned_step(self, npu) -> list:
        """[(BlockConfig, planner NpuOp, the Part's whole NpuOp or None)] of the operations
        of ``npu``'s class in the planner's lowering of the current step ([] when there is
        no model)."""
        part, box = self.step_at
        cls = _NPU_CLASS.get(type(npu).__name__)
        return [(cfg, op, w) for c, cfg, op, w in self.planned_box(part, box) if c == cls]

    def planned_box(self, part: str, box) -> list:
        """[(class, BlockConfig, planner NpuOp, the Part's whole NpuOp or None)] of the
        planner's lowering of ``box`` of ``part`` ([] when there is no model)."""
        if self.perf is None or part not in self.parts:
            return []
        shape = tuple(hi - lo for lo, hi in box)
        if (part, shape) not in self.planned:
            p = self.parts[part]
            try:
                ops = lower_part(p, shape)
                costs = self.perf.breakdown(p, shape)
                wholes = lower_part(p, p.output.shape)
            except PlannerError:
                ops, costs, wholes = [], [], []
            if len(wholes) != len(ops):
                wholes = [None] * len(ops)
            self.planned[part, shape] = [(op.npu, b.config, op, w)
                                         for op, b, w in zip(ops, costs, wholes)]
        return self.planned[part, shape]

    def predicted_requests(self, steps) -> list[EncodeRequest]:
        """The whole-weights encodings the emission of ``steps`` is expected to ask for
        first, one per Part of at least AHEAD_MIN_REQUEST weights: a convolution or
        FULLY_CONNECTED whose weights are not staged encodes its own weights at the block
        depth and traversal its Part was planned with (:meth:`block_config`). A block the
        emission then checks and changes makes the prediction wrong, which costs time,
        never bytes (``encode_ahead``)."""
        api, out, seen = self.api, [], set()
        for s in steps:
            step = self.part_layer.get(s.part)
            if step is None or s.part in seen:
                continue
            seen.add(s.part)
            q = self.layers[step]
            em = emitter(q)
            if q.weights is None or q.weights.size < AHEAD_MIN_REQUEST or \
                    em.constants is not operator_constants or \
                    (self.stager is not None and step in self.stager.halves):
                continue
            planned = [(c, cfg, op) for c, cfg, op, _ in self.planned_box(s.part, s.box)
                       if c in ("conv", "depthwise")]
            if len(planned) != 1:
                continue
            c, cfg, op = planned[0]
            depth = self.clipped(cfg, op.ofm[1:])[2]
            traversal = api.NpuBlockTraversal.PART_KERNEL_FIRST \
                if c == "conv" and cfg.traversal == "part_kernel" else \
                api.NpuBlockTraversal.DEPTH_FIRST
            out.append(weights_request(q, self.acc, depth, c == "depthwise", traversal))
        return out

    def planned_op(self, npu):
        """(planner NpuOp, the Part's whole NpuOp or None) of ``npu`` in the current step, or
        None where the planner did not cost one such operation."""
        if self.step_at is None:
            return None
        configs = self.planned_step(npu)
        return configs[0][1:] if len(configs) == 1 else None

    def constants(self, npu, step: int, q, channels, key, weights=None, scales=None):
        """Block config, then the weights encoded for its depth and the bias/scale stream,
        each added to flash once per (operator, block depth, traversal)."""
        npu.block_config = self.block_config(npu, key)
        ck = (step, npu.block_config.depth, getattr(npu, "block_traversal", None))
        if ck not in self.encoded:
            attach_constants(npu, q, channels, self.acc, self.flash, weights, scales)
            self.encoded[ck] = (npu.weights, npu.biases)
        npu.weights, npu.biases = self.encoded[ck]

    def const_slot(self, t, qz) -> FmSlot:
        k = t.op.name
        if k not in self.const_slots:
            arr = np.ascontiguousarray(self.consts[k])
            rng = self.flash.add(arr.tobytes())
            self.const_slots[k] = FmSlot(FLASH_REGION, rng.address, shape3(arr.shape, k),
                                         str(arr.dtype), None, 0)
        return dataclasses.replace(self.const_slots[k], scale=qz[0] if qz else None,
                                   zero_point=qz[1] if qz else 0)

    def whole_slot(self, t, qz, what) -> FmSlot:
        k = t.op.name
        if k in self.consts:
            return self.const_slot(t, qz)
        st = self.storage[k]
        if not st.whole:
            raise UnsupportedOperatorError(what, f"its operand {k} is held in a ring "
                                                 f"{st.shape} of a {st.tensor} tensor")
        shape, dtype = self.dims(t)
        return FmSlot(st.region, st.offset, shape3(shape, k), dtype,
                      qz[0] if qz else None, qz[1] if qz else 0)

    # --- one step
    def emit(self, part: str, box):
        """The operations of one step: ``box`` of ``part``'s output, as its operator's row of
        the stream table (``stream_ops``) says."""
        step = self.part_layer[part]
        self.step_at = (part, box)
        q, out, ins = self.layers[step], self.outs[step], self.lw.layer_inputs[step]
        em = emitter(q)
        oshape, odtype = self.dims(out)
        full = tuple((0, s) for s in oshape)
        in_q = list(q.in_q) + [None] * (len(ins) - len(q.in_q))
        if em.ring is not None and (len(oshape) == 4 and self.dims(ins[0])[0][0] == 1
                                    or self.in_ring(list(ins) + [out])):
            # one stripe read from the input's box, held whole or in a ring (a batch of
            # several or fewer axes held whole: the copies below)
            self.ops += em.ring(q, ins, out, box, full, self.box_fm, self.fallback_block)
            return
        if q.kind in RING_KINDS and len(oshape) == 4 and (
                self.in_ring(list(ins) + [out]) or tuple(box[3]) != full[3]):
            # (a box of some channels: the same copies clipped to them, buffers whole)
            self.ops += self.ring_movement(step, q, ins, out, box, full)
            return
        if em.form is Form.MOVEMENT:  # whole tensors, the stripe's part of the copies
            operands = [self.whole_slot(t, iq, q.tflite_name) for t, iq in zip(ins, in_q)]
            ofm = self.whole_slot(out, q.out_q or (operands[0].scale, operands[0].zero_point),
                                  q.tflite_name)
            self.ops += em.sequence(q, operands, ofm, self.emission(step),
                                    stripe_box(q, box, full))
            return
        if em.form is Form.SEQUENCE and not em.whole(len(oshape)) and not em.boxed:
            # operations that each read only their own elements: the stripe's box of whole
            # tensors, the operator's working memory beside them (PRELU, BATCH_MATMUL)
            if em.work is not None and em.work_bytes(q, tuple(hi - lo for lo, hi in box)) \
                    > self.work_bytes.get(step, 0):
                raise UnsupportedOperatorError(q.tflite_name, f"a {box} box past the working "
                                                              "memory of its stripe")
            operands = [self.whole_slot(t, iq, q.tflite_name) for t, iq in zip(ins, in_q)]
            ofm = self.whole_slot(out, q.out_q, q.tflite_name)
            self.ops += em.sequence(q, operands, ofm, self.emission(step),
                                    stripe_box(q, box, full))
            return
        if em.form is Form.ALIAS and tuple(box) != full and self.dims(ins[0])[0] == oshape \
                and len(oshape) == 4 and box[3] == full[3]:
            # a RESHAPE to its own shape (the importer's after a SLICE) in a cascade whose next
            # Part reads only part of it: the box copied, as any other stripe
            self.ops.append(self.box_copy(ins[0], out, box))
            return
        if em.form is Form.ALIAS and tuple(box) != full and \
                self.flat_run(ins[0], out, box, full):
            # a RESHAPE to another shape whose stripe is one run of pixels in NHWC order:
            # the same pixels of its input, copied
            self.ops += self.flat_box_copies(ins[0], out, box, oshape)
            return
        if em.whole(len(oshape)):
            self.emit_whole(step, q, em, box, full, out, ins, in_q)
            return
        if len(oshape) != 4 or oshape[0] != 1:
            raise UnsupportedOperatorError(q.tflite_name, f"output shape {oshape}")
        (_, _), (y0, y1), (x0, x1), (c0, c1) = box
        if c0 == c1:   # a CONCATENATION's stripe that reads none of this input's channels
            return
        some_channels = (c0, c1) != (0, oshape[3])
        if some_channels and (em.form is Form.SEQUENCE or em.stripe_window is not None
                              or self.stager is not None and step in self.stager.halves):
            raise UnsupportedOperatorError(q.tflite_name, f"the plan computes channels "
                                                          f"[{c0}, {c1}) of a stripe")
        windowed = em.geometry is not None
        (kh, kw), (sh, sw), (dh, dw), (pt, pl, _pb, _pr) = \
            em.geometry(q) if windowed else POINTWISE
        out_q = q.out_q
        src = ins[0]
        if out_q is None:  # pools keep their input's quantization
            out_q = in_q[0]
        ofm_fm = self.box_fm(out, (y0, y1), (x0, x1), out_q)
        sshape = self.dims(src)[0]
        if em.stripe_window is not None:   # its own window arithmetic (TRANSPOSE_CONV)
            (iy0, iy1), (ix0, ix1), pad = em.stripe_window(q, (y0, y1), (x0, x1),
                                                           tuple(sshape[1:3]))
            windowed, qs = True, dataclasses.replace(q, attrs=dict(q.attrs, stripe_padding=pad))
        else:
            iy0, iy1, top, bottom = _window(y0, y1, kh, sh, dh, pt, sshape[1])
            ix0, ix1, left, right = _window(x0, x1, kw, sw, dw, pl, sshape[2])
            pad = (top, left, bottom, right)
            qs = dataclasses.replace(q, attrs=dict(q.attrs, padding=pad)) if windowed else q
        h, w, c = y1 - y0, x1 - x0, oshape[3]
        ofm_slot = FmSlot(1, 0, (h, w, c), odtype, *(out_q or (None, 0)))
        operands = []
        for t, iq in zip(ins, in_q):
            if t.op.name in self.consts:
                operands.append((self.const_slot(t, iq), None))
                continue
            te_shape, te_dtype = self.dims(t)
            tshape = shape3(te_shape, t.op.name)
            if windowed or tshape == (h, w, c) or tshape[:2] == oshape[1:3]:
                ry, rx = ((iy0, iy1), (ix0, ix1)) if windowed else ((y0, y1), (x0, x1))
                slot = FmSlot(1, 0, (ry[1] - ry[0], rx[1] - rx[0], tshape[2]), te_dtype,
                              *(iq or (None, 0)))
                operands.append((slot, self.box_fm(t, ry, rx, iq)))
            else:  # a broadcast operand: read whole
                operands.append((self.whole_slot(t, iq, q.tflite_name), None))
        if em.form is Form.SEQUENCE:   # several operations over the stripe's boxes
            if em.work_bytes(q, (1, h, w, c)) > self.work_bytes.get(step, 0):
                raise UnsupportedOperatorError(q.tflite_name, f"a {h}x{w} box past the "
                                                              "working memory of its stripe")
            self.ops += em.sequence(qs, [o[0] for o in operands], ofm_slot, dataclasses.replace(
                self.emission(step), place=self.box_placer(operands, ofm_slot, ofm_fm)), box)
            return
        if em.before is not None:
            self.ops += em.before(q, self.flash, lut_address(self.accelerator))
        if some_channels:
            self.ops += self.channel_range(step, q, em, qs, operands, ofm_fm, (h, w),
                                           (c0, c1), pad, ofm_slot)
            return
        npu = em.build(qs, [o[0] for o in operands], ofm_slot)
        self.place(npu, operands, ofm_fm, reversed_=getattr(npu, "reversed_operands", False))
        key = (step, (h, w), tuple(fm.shape for fm in [npu.ifm] if fm), pad)
        npu.name = q.kind.value
        if self.stager is not None and step in self.stager.halves:
            # weights staged slice by slice through the Plan's double buffer
            self.ops += self.stager.slices(npu, q, step, c, self.block_config)
            return
        if em.constants is not None:
            self.constants(npu, step, q, c, key, *em.constants(q, c))
        else:
            npu.block_config = self.block_config(npu, key)
        self.ops.append(npu)

    def channel_range(self, step: int, q, em, qs, operands, ofm_fm, hw, channels, pad,
                      ofm_slot: FmSlot) -> list:
        """The operations of a stripe over output channels ``channels`` only
        (``stream_channels``): one per piece contiguous in every buffer it touches, the OFM
        and every operand of the output's depth (but a convolution's IFM, all of whose
        channels each output channel reads) narrowed to the piece, the weights and scales
        of its output channels."""
        depth = ofm_slot.shape[2]   # the output tensor's
        narrowed = q.kind not in ALL_INPUT_CHANNELS
        depths = [ofm_fm.shape.depth]
        for slot, fm in operands:
            if fm is None:
                continue
            if narrowed and slot.shape[2] == depth:
                depths.append(fm.shape.depth)
            elif fm.shape.depth != slot.shape[2]:
                raise UnsupportedOperatorError(
                    q.tflite_name, f"the plan computes channels [{channels[0]}, "
                    f"{channels[1]}) of a stripe from an input held in a buffer of "
                    f"{fm.shape.depth} of its {slot.shape[2]} channels")
        ops = []
        for piece in channel_pieces(*channels, depths):
            n = piece.count
            pieces = []
            for slot, fm in operands:
                if narrowed and slot.shape[2] == depth:
                    whole = fm if fm is not None else plain_feature_map(slot)
                    fm = channel_slice(whole, piece.first % whole.shape.depth, n)
                    slot = dataclasses.replace(slot, shape=slot.shape[:2] + (n,))
                pieces.append((slot, fm))
            out_slot = dataclasses.replace(ofm_slot, shape=hw + (n,))
            npu = em.build(qs, [o[0] for o in pieces], out_slot)
            self.place(npu, pieces, channel_slice(ofm_fm, piece.first % ofm_fm.shape.depth, n),
                       reversed_=getattr(npu, "reversed_operands", False))
            npu.name = q.kind.value
            key = (step, hw, tuple(fm.shape for fm in [npu.ifm] if fm), pad, piece)
            if q.kind in OWN_WEIGHTS:
                self.piece_constants(npu, step, piece, key, *own_constants(qs, piece))
            elif em.constants is not None:
                self.piece_constants(npu, step, piece, key, qs, *em.constants(qs, n))
            else:
                npu.block_config = self.block_config(npu, key)
            ops.append(npu)
        return ops

    def piece_constants(self, npu, step: int, piece, key, q, weights, scales) -> None:
        """:meth:`constants` of one piece of a channel range: its own encoding, cached by
        the piece as well."""
        npu.block_config = self.block_config(npu, key)
        ck = (step, piece, npu.block_config.depth, getattr(npu, "block_traversal", None))
        if ck not in self.encoded:
            attach_constants(npu, q, piece.count, self.acc, self.flash, weights, scales)
            self.encoded[ck] = (npu.weights, npu.biases)
        npu.weights, npu.biases = self.encoded[ck]

    def emit_whole(self, step: int, q, em, box, full, out, ins, in_q):
        """A step of an operator emitted only over whole tensors, held whole: the plan must
        not stripe it."""
        if tuple(box) != full:
            raise UnsupportedOperatorError(q.tflite_name, f"the plan stripes it ({box})")
        operands = [self.whole_slot(t, iq, q.tflite_name) for t, iq in zip(ins, in_q)]
        out_q = q.out_q or (operands[0].scale, operands[0].zero_point)
        ofm = self.whole_slot(out, out_q, q.tflite_name)
        if em.form is Form.ALIAS:
            self.ops.append(self.copy_op(operands[0], ofm, (step, "reshape")))
            return
        if em.form is Form.SEQUENCE:
            self.ops += em.sequence(q, operands, ofm, self.emission(step))
            return
        if em.before is not None:
            self.ops += em.before(q, self.flash, lut_address(self.accelerator))
        ifm = operands[0]
        if em.views is not None:
            ifm, ofm = em.views(q, ifm, ofm)
        npu = em.build(q, [ifm, *operands[1:]], ofm)
        if em.constants is not None:
            self.constants(npu, step, q, ofm.shape[2], (step,),
                           *em.constants(q, ofm.shape[2]))
        else:   # an operation the planner does not cost over the whole tensor (a table's)
            npu.block_config = self.fallback_block(npu)
        npu.name = q.kind.value
        self.ops.append(npu)

    def emission(self, step: int | None = None) -> Emission:
        """What a multi-operation emitter needs of this path (blocks: :meth:`fallback_block`;
        working memory: operator ``step``'s block of the layout)."""
        return Emission(self.flash, lut_address(self.accelerator), self.fallback_block,
                        None if step is None else self.offsets.get(work_key(step)),
                        accelerator=self.accelerator)

    def in_ring(self, tensors) -> bool:
        """Whether any of ``tensors`` (constants aside) is held in a ring of the plan."""
        return any(t.op.name in self.storage and not self.storage[t.op.name].whole
                   for t in tensors)

    def ring_movement(self, step: int, q, ins, out, box, full) -> list:
        """PAD or CONCATENATION (``ops_movement.RING_KINDS``) where the plan holds an operand
        or the output in a ring: the operator's copies over whole tensors (made once, on
        stand-in slots that only locate each box), clipped to the stripe's rows and columns,
        each box addressed in its buffer (tiles where it wraps the ring)."""
        if step not in self.ring_plans:
            stand = [self.const_slot(t, None) if t.op.name in self.consts else
                     FmSlot(_STAND_IN - k, 0, shape3(t.shape, t.op.name), str(t.dtype), None, 0)
                     for k, t in enumerate(ins)]
            ofm = FmSlot(_STAND_IN - len(ins), 0, shape3(out.shape, out.op.name),
                         str(out.dtype), None, 0)
            self.ring_plans[step] = (stand, ring_copies(q, stand, ofm, self.flash))
        stand, copies = self.ring_plans[step]
        box = tuple(tuple(b) for b in box)
        channels = box[3]   # a range of them: each copy clipped to it too
        rows_cols = stripe_box(q, box[:3] + (tuple(full[3]),), full) or \
            (tuple(full[1]), tuple(full[2]))
        out_depth = self.storage[out.op.name].shape[2]
        ops = []
        for cp in (part for c in copies for part in clip(c, *rows_cols)):
            cp = clip_channels(cp, channels)
            if cp is None:
                continue
            k = next((k for k, s in enumerate(stand)
                      if s.region <= _STAND_IN and s.region == cp.src.region), None)
            (h, w, n), (y, x, c) = cp.src.shape, cp.at
            if k is None:   # PAD's fill codes, or a constant operand: in flash
                runs = channel_runs(0, c, n, n, out_depth)
            else:
                sy, sx, sc = box_origin(cp.src, stand[k])
                runs = channel_runs(sc, c, n, self.storage[ins[k].op.name].shape[2],
                                    out_depth)
            for s, d, m in runs:
                if k is None:
                    src = feature_map_of(cp.src.at(0, 0, s, (h, w, m)))
                else:
                    src = self.ring_box(ins[k], (sy, sx, s), (h, w, m))
                dst = self.ring_box(out, (y, x, d), (h, w, m))
                ops.append(fm_copy_op(src, dst, q.tflite_name, self.fallback_block,
                                      cp.rescale, cp.clamp))
        return ops

    def ring_box(self, t, at, shape):
        """The NpuFeatureMap of the (height, width, depth) box ``shape`` of ``t`` from element
        ``at``, in the tensor's buffer: its rows and columns may wrap a ring (tiles), its
        channels a sub-range of the buffer's."""
        (y, x, c), (h, w, d) = at, shape
        fm = self.box_fm(t, (y, y + h), (x, x + w), None)
        if (c, d) != (0, fm.shape.depth):
            e = np.dtype(str(t.dtype)).itemsize
            api = self.api
            fm.tiles = api.NpuTileBox(fm.tiles.height_0, fm.tiles.height_1, fm.tiles.width_0,
                                      [a + c * e for a in fm.tiles.addresses])
            fm.shape = api.NpuShape3D(h, w, d)
        return fm

    def copy_op(self, src: FmSlot, dst: FmSlot, key):
        """A RESHAPE: its bytes copied by a 1x1 MAX pool over a flat 1 x 1 x n view, the
        identity (DMA lengths must be whole 16-byte bursts)."""
        n = src.nbytes // np.dtype(src.dtype).itemsize
        if n > 65536:
            raise UnsupportedOperatorError("RESHAPE", f"a copy of {n} {src.dtype} elements")
        flat = {"shape": (1, 1, n)}
        npu = identity_copy(dataclasses.replace(src, **flat), dataclasses.replace(dst, **flat),
                            "RESHAPE")
        npu.block_config = self.fallback_block(npu)
        npu.name = "reshape"
        return npu

    def box_copy(self, src, out, box):
        """The identity copy of ``box`` of ``src`` into the same box of ``out`` (a tensor of
        its shape)."""
        (_, _), rows, cols, (_, c) = box
        (_, dtype) = self.dims(out)
        slot = FmSlot(1, 0, (rows[1] - rows[0], cols[1] - cols[0], c), dtype, None, 0)
        npu = identity_copy(slot, slot, "RESHAPE")
        self.place(npu, [(slot, self.box_fm(src, rows, cols, None))],
                   self.box_fm(out, rows, cols, None), reversed_=False)
        npu.block_config = self.fallback_block(npu)
        npu.name = "reshape"
        return npu

    def flat_run(self, src, out, box, full) -> bool:
        """Whether ``box`` of a 4-D output of one batch is one run of pixels in NHWC order
        (whole columns and channels, or one row of whole channels) and ``src`` and ``out``
        are held with whole rows (a ring of rows at most; a tensor of one row, a ring of
        columns), so that the run is at most a few runs of bytes in each buffer."""
        sts = [self.storage.get(t.op.name) for t in (src, out)]
        if len(box) != 4 or full[0] != (0, 1) or any(
                st is None or st.shape[2] != st.tensor[2]
                or st.shape[1] != st.tensor[1] and st.tensor[0] != 1 for st in sts) \
                or sts[0].tensor[2] != sts[1].tensor[2]:
            return False
        box = tuple(tuple(b) for b in box)
        return box[0] == full[0] and box[3] == full[3] and (
            box[2] == full[2] or box[1][1] - box[1][0] == 1)

    def flat_box_copies(self, src, out, box, oshape) -> list:
        """Identity copies of ``box`` of a RESHAPE's output (:meth:`flat_run`) from the same
        pixels of its input ``src``: one per piece contiguous in both buffers (a ring of
        rows holds pixel ``p`` at row ``(p // width) % rows``)."""
        (_, _), (y0, y1), (x0, x1), (_, c) = box
        st_in, st_out = self.storage[src.op.name], self.storage[out.op.name]
        dtype = self.dims(out)[1]
        e = np.dtype(dtype).itemsize

        def place(st, p):   # (pixel index in the buffer, pixels left before it wraps)
            rows, width = st.shape[:2]   # (one row: a ring of columns)
            at = (p // width) % rows * width + p % width
            return at, rows * width - at

        first = y0 * oshape[2] + x0
        end = first + (y1 - y0) * (x1 - x0)
        ops, p = [], first
        while p < end:
            (a, na), (b, nb) = place(st_in, p), place(st_out, p)
            n = min(end - p, na, nb, 65536)
            npu = identity_copy(
                FmSlot(st_in.region, st_in.offset + a * c * e, (1, n, c), dtype, None, 0),
                FmSlot(st_out.region, st_out.offset + b * c * e, (1, n, c), dtype, None, 0),
                "RESHAPE")
            npu.block_config = self.fallback_block(npu)
            npu.name = "reshape"
            ops.append(npu)
            p += n
        return ops

    def box_fm(self, t, rows, cols, qz):
        st = self.storage[t.op.name]
        return feature_map(self.api, st, rows, cols, st.region,
                           qz[0] if qz else None, qz[1] if qz else 0)

    @staticmethod
    def box_placer(operands, ofm_slot: FmSlot, ofm_fm):
        """``place(fm, slot)`` for a sequence over a stripe: a feature map built from an
        operand's or the output's box slot gets that box's tiles, strides and region."""
        boxes = [(slot, fm) for slot, fm in operands if fm is not None] + [(ofm_slot, ofm_fm)]

        def place(fm, slot) -> None:
            for s, box in boxes:
                if s is slot:
                    fm.tiles, fm.strides, fm.region = box.tiles, box.strides, box.region
                    return
        return place

    @staticmethod
    def place(npu, operands, ofm_fm, reversed_: bool):
        """Give the operation the boxes' tiles and strides (the builders made plain maps with
        the quantization each operation needs)."""
        def patch(dst, fm):
            if fm is not None:
                dst.tiles, dst.strides, dst.region = fm.tiles, fm.strides, fm.region

        order = list(reversed(operands)) if reversed_ else operands
        patch(npu.ifm, order[0][1])
        if len(order) > 1 and getattr(npu, "ifm2", None) is not None:
            patch(npu.ifm2, order[1][1])
        patch(npu.ofm, ofm_fm)


def identity_copy(src: FmSlot, dst: FmSlot, what: str):
    """A 1x1 MAX pool of ``src`` into ``dst`` (the same shape, 8-bit): the identity, so a
    byte-exact copy between any regions (DMA lengths are whole 16-byte bursts, which would
    spill past a tensor's end); an int16 map is copied as the int8 map of its bytes. No block
    config yet."""
    if src.dtype == dst.dtype == "int16" and src.shape == dst.shape:
        src, dst = (dataclasses.replace(s, dtype="int8", shape=s.shape[:2] + (2 * s.shape[2],))
                    for s in (src, dst))
    if src.dtype not in ("int8", "uint8") or src.shape != dst.shape:
        raise UnsupportedOperatorError(what, f"a copy of a {src.dtype} {src.shape} tensor")
    api = vela_api()
    npu = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    unit = {"scale": 1.0, "zero_point": 0}
    npu.ifm = plain_feature_map(dataclasses.replace(src, **unit))
    npu.ofm = plain_feature_map(dataclasses.replace(dst, **unit))
    npu.kernel = api.NpuKernel(1, 1)
    npu.padding = api.NpuPadding(0, 0, 0, 0)
    npu.activation = None
    npu.rounding_mode = api.NpuRoundingMode.TFL
    return npu


def move_region(ops, src: int, dst: int) -> None:
    """Point every feature map, weight/bias range and DMA range of ``ops`` that is in region
    ``src`` at region ``dst`` (same offsets)."""
    for npu in ops:
        for name in ("ifm", "ifm2", "ofm"):
            fm = getattr(npu, name, None)
            if fm is not None and fm.region == src:
                fm.region = dst
        for name in ("src", "dest"):
            rng = getattr(npu, name, None)
            if rng is not None and rng.region == src:
                setattr(npu, name, rng._replace(region=dst))
        for name in ("weights", "biases"):
            ranges = getattr(npu, name, None)
            if ranges:
                setattr(npu, name, [r._replace(region=dst) if r.region == src else r
                                    for r in ranges])


def _io_in_fast_scratch(em, lw, layout) -> tuple[dict, int]:
    """On an Ethos-U65 (``sram_region`` 2): the plan's SRAM becomes the fast scratch, and
    the network's inputs and outputs, which TFLite Micro puts in the arena (region 1, DRAM),
    are copied into the SRAM buffers the plan gives them before the first operation and out
    of them after the last (:func:`identity_copy`). Returns (arena offset of every input and
    output, arena bytes): the inputs, then the outputs, each on 16 bytes."""
    moved = list(em.ops)
    move_region(moved, SCRATCH_REGION, FAST_SCRATCH_REGION)
    arena, top = {}, 0
    for t in list(lw.input_tensors) + list(lw.outputs):
        if t.op.name in arena:
            continue
        arena[t.op.name] = top
        top = -(-(top + int(np.prod([int(s) for s in t.shape])) *
                  np.dtype(str(t.dtype)).itemsize) // ALIGN) * ALIGN

    def slot(region, offset, t):
        return FmSlot(region, offset, shape3(t.shape, t.op.name), str(t.dtype), 1.0, 0)

    copies_in, copies_out = [], []
    for t in lw.input_tensors:
        copies_in.append(identity_copy(slot(SCRATCH_REGION, arena[t.op.name], t),
                                       slot(FAST_SCRATCH_REGION, layout.offsets[t.op.name], t),
                                       f"input {t.op.name}"))
    for t in lw.outputs:
        src = output_source(lw, t)
        copies_out.append(identity_copy(slot(FAST_SCRATCH_REGION, layout.offsets[src.op.name],
                                             t),
                                        slot(SCRATCH_REGION, arena[t.op.name], t),
                                        f"output {t.op.name}"))
    for npu in copies_in + copies_out:
        npu.block_config = em.fallback_block(npu)
        npu.name = "io copy"
    em.ops = copies_in + moved + copies_out
    return arena, top


def _io(lw) -> tuple[list[str], list[str]]:
    """The planner tensors of ``lw``'s inputs and outputs (an output copy stage's
    source)."""
    return ([t.op.name for t in lw.input_tensors],
            [output_source(lw, t).op.name for t in lw.outputs])


def _io_names(boundary: tuple[list[str], list[str]]) -> list[str]:
    """The planner tensors of the network's inputs and outputs (``boundary``), each once,
    inputs first."""
    return list(dict.fromkeys(boundary[0] + boundary[1]))


def _io_in_arena(graph, boundary: tuple[list[str], list[str]]) -> tuple[dict, int]:
    """(arena offset of every network input and output, ``boundary``, arena bytes) for a
    plan that reads and writes them in place: the inputs, then the outputs, each on 16
    bytes."""
    arena, top = {}, 0
    for name in _io_names(boundary):
        arena[name] = top
        top = -(-(top + graph.tensor(name).bytes) // ALIGN) * ALIGN
    return arena, top


def _work_bytes(lw, proposal, part_layer) -> dict[int, int]:
    """The working memory of every operator lowered to several NPU operations, by layer:
    what it needs over its whole output, or, for one whose working memory scales with the
    stripe (its row's ``work``), over the plan's stripe of it (a box of each step,
    :meth:`_Emitter.emit` checks)."""
    stripes = {part_layer[ps.part]: tuple(ps.stripe.shape) for plan in proposal.plans
               for ps in plan.part_schedules if ps.part in part_layer}
    work = {}
    for i, q in enumerate(lw.layers):
        em = emitter(q)
        if em.work_bytes is None:
            continue
        striped = em.work is not None and i in stripes
        n = em.work_bytes(q, stripes[i]) if striped else em.work_bytes(q)
        if n:  # an operator needing none (a one-rotation TRANSPOSE) has no block
            work[i] = n
    return work


def _buffers(graph, proposal, lw, part_layer, work: dict, pools: dict, io_apart: bool = False,
             lstm: str | None = None, boundary: tuple[list[str], list[str]] | None = None
             ) -> tuple[list[Buffer], dict]:
    """Every block the arena holds, and the buffer shape of every feature map; ``io_apart``:
    the network's inputs and outputs live outside it (the plan reads them in place);
    ``lstm``: the Part with no layer (an LSTM joined to ``lw``, ``stream_lstm``), whose
    working memory is its Plan's ``<part>:work`` block, and whose states
    (``<part>:state``, which every Plan holds) are one block live across every Plan;
    ``boundary``: the network's input and output tensors (default ``lw``'s)."""
    tensors = {t.name: t for t in graph.tensors}
    by_part = {p.name: p for p in graph.parts}
    nplans = len(proposal.plans)
    boundary = _io(lw) if boundary is None else boundary
    producer, last = dict.fromkeys(boundary[0], 0), {}
    inputs = set(boundary[0])
    for k, plan in enumerate(proposal.plans):
        producer[plan.output] = k
        for name in plan.parts:
            for t in by_part[name].inputs:
                if not t.is_constant:
                    last[t.name] = max(last.get(t.name, k), k)
    for name in boundary[1]:
        last[name] = nplans - 1
    aliased = aliased_outputs(graph, [plan.parts for plan in proposal.plans])
    for name, root in aliased.items():   # the root's bytes live until the alias's readers
        if name in last:
            last[root] = max(last.get(root, producer[root]), last[name])
    buffers, shapes = [], {}
    apart = set(_io_names(boundary)) if io_apart else set()
    for name, k in producer.items():
        t = tensors[name]
        shapes[name] = tuple(int(s) for s in t.shape)
        if name in apart or name in aliased:
            continue
        buffers.append(Buffer(name, t.bytes, np.dtype(t.dtype).itemsize, k,
                              max(last.get(name, k), k), "input" if name in inputs else "tensor"))
    for k, plan in enumerate(proposal.plans):
        configs = {tc.tensor: tc for tc in plan.tensor_configs}
        own = 0
        for name in plan.parts[:-1]:
            tname = by_part[name].output.name
            tc = configs[tname]
            shapes[tname] = tuple(int(s) for s in tc.buffer_shape)
            buffers.append(Buffer(tname, tc.buffer_bytes, 1, k, k))
            own += tc.buffer_bytes
        pool = pools[k]
        if pool.nbytes:
            # one block: the encoded weight streams are larger than the raw bytes each
            # TensorConfig counts (stream headers), and the Plan's total is what they share
            buffers.append(Buffer(pool_key(k), pool.nbytes,
                                  16 if pool.copied or pool.staged else 1, k, k, "weights"))
            own += pool.nbytes
        # persistent, with the network's inputs and outputs (``planner.plan_costing``): in
        # the arena apart from the plan's SRAM where those are apart
        states = [] if io_apart else \
            [tc for tc in plan.tensor_configs if tc.tensor.endswith(":state")]
        own += sum(tc.buffer_bytes for tc in states)
        if k == 0:   # one block under every Plan, which the host initializes; its rows
            # (int8 hidden state, int16 cell state) keep their alignment within it
            buffers += [Buffer(tc.tensor, tc.buffer_bytes, 2, 0, nplans - 1, "input")
                        for tc in states]
        for name in plan.parts:
            if name == lstm:   # no layer: its work block is the plan's for its Part
                tc = configs[work_tensor(name)]
                buffers.append(Buffer(tc.tensor, tc.buffer_bytes, ALIGN, k, k, "work"))
                own += tc.buffer_bytes
                continue
            # the operator's work block: what the plan holds for its Part (its buffer
            # ``work_tensor``), which must be what the stream uses; a Part the plan holds
            # none for gets the stream's figure, outside the plan's memory
            step = part_layer[name]
            held = configs.get(work_tensor(name))
            if held is not None:
                if work.get(step, 0) != held.buffer_bytes:
                    raise ScheduleFormError(
                        f"plan {k} holds {held.buffer_bytes:,} B of working memory for "
                        f"{name}, its stream uses {work.get(step, 0):,} B")
                buffers.append(Buffer(work_key(step), held.buffer_bytes, 16, k, k, "work"))
                own += held.buffer_bytes
            elif step in work:
                buffers.append(Buffer(work_key(step), work[step], 16, k, k, "work"))
        if own != plan.memory_bytes:
            raise ScheduleFormError(f"plan {k}'s buffers add up to {own:,} B, it counts "
                                    f"{plan.memory_bytes:,} B")
    return buffers, shapes


def _joined_ops(joined: JoinedLstm, part, storage: dict, state: tuple[int, int], layout,
                flash, accelerator: str) -> list:
    """The joined LSTM's operations: its sequences whole where the layout put them, its
    states at ``state`` (offset, region), its working memory in its block."""
    seq, out = (storage[t.name] for t in (part.inputs[0], part.output))
    if not (seq.whole and out.whole):
        raise UnsupportedOperatorError("this plan", "it holds the LSTM's sequences in rings")
    return joined_ops(joined, (seq.offset, seq.region), (out.offset, out.region), state,
                      layout.offsets[f"{part.name}:work"], flash, accelerator)


@generator
def generate_planned(lw, accelerator: str, match, proposal, device=None,
                     joined: JoinedLstm | None = None) -> EthosUPayload:
    """The command stream of ``lw`` executing ``proposal`` (see the module docstring);
    ``device``: the planner Device it was planned for (its performance model chose the
    blocks; default ``planner.devices.get_device(accelerator)``'s); ``joined``: an LSTM
    whose output is ``lw``'s one input (the first Part of ``match.graph``) or whose input
    is ``lw``'s one output (the last), ``stream_lstm.with_lstm``: its step is emitted in
    the same stream, the payload's inputs are its sequence (first) and ``lw``'s (last),
    then its states, its outputs ``lw``'s (first) or its sequence (last)."""

    api = vela_api()
    acc = npu_accelerator(accelerator)
    for q in lw.layers:
        if emitter(q) is None:
            raise UnsupportedOperatorError(
                q.tflite_name, "no NPU operation is generated for it yet (rfcs/0007 section 2)")
    layer_of = {t.op.name: i for i, t in enumerate(lw.tensors.values())}
    part_layer = {mp.part.name: layer_of[mp.root.op.name] for mp in match.parts}
    work = _work_bytes(lw, proposal, part_layer)
    graph = match.graph
    schedule = "plan"
    outputs = {p.name: p.output.name for p in graph.parts}
    owner = {t.name: p.name for p in graph.parts for t in p.inputs if t.is_constant}
    stageable = {n for n, i in part_layer.items() if emitter(lw.layers[i]).stageable}
    if device is None:
        device = get_device(accelerator)
    io_apart = device.io_read_in_place and device.io_region != device.fm_region
    boundary = _io(lw)   # the stream's input and output tensors
    lstm_part = None   # the joined LSTM's Part
    if joined is not None:
        lstm_part = graph.parts[0] if joined.first else graph.parts[-1]
        boundary = ([lstm_part.inputs[0].name], boundary[1]) if joined.first else \
            (boundary[0], [lstm_part.output.name])
    if joined is not None and not io_apart and sram_region(accelerator) != SCRATCH_REGION:
        raise UnsupportedOperatorError(
            "this plan", "an LSTM's states persist between invocations, which the fast "
            "scratch of an Ethos-U65 (a cache) does not keep: plan with the network's inputs "
            "and outputs in the arena")
    if io_apart and sram_region(accelerator) != FAST_SCRATCH_REGION:
        raise UnsupportedOperatorError(
            "this plan", f"it keeps the network's inputs and outputs in {device.io_region} "
            f"apart from its {device.fm_region}, which only an Ethos-U65's fast scratch "
            "separates from the arena (plan with io_region='sram')")
    try:
        pools = {k: weight_pool(plan, {outputs[n] for n in plan.parts}, owner, stageable)
                 for k, plan in enumerate(proposal.plans)}
        lstm_name = lstm_part.name if lstm_part is not None else None
        buffers, shapes = _buffers(graph, proposal, lw, part_layer, work, pools, io_apart,
                                   lstm_name, boundary)
        runs = dict.fromkeys(range(len(proposal.plans)), 1)
        try:
            try:
                layout = arena_layout(buffers, proposal.memory_bytes)
                if joined is None:
                    runs, buffers, shapes, layout = longest_runs(
                        graph, proposal, buffers, shapes, proposal.memory_bytes, layout=layout)
            except LayoutError:
                if not any(p.copied or p.staged for p in pools.values()):
                    raise
                # a weight block a DMA writes is 16-byte aligned; where no layout of aligned
                # blocks fits the peak, the weights stay in flash (reserved blocks, no DMA)
                pools = {k: WeightPool(p.nbytes) for k, p in pools.items()}
                buffers, shapes = _buffers(graph, proposal, lw, part_layer, work, pools,
                                           io_apart, lstm_name, boundary)
                layout = arena_layout(buffers, proposal.memory_bytes)
        except LayoutError:
            if not work and joined is None:
                raise
            # working memory the plan does not hold (an operator's the planner was not told
            # of), and an LSTM's aligned blocks: where the plan leaves no room for them, the
            # arena grows and the stream does not claim the peak
            layout = arena_layout(buffers, None)
            names = sorted({lw.layers[i].tflite_name for i in work} |
                           ({LSTM} if joined is not None else set()))
            schedule = f"plan, {' and '.join(names)} beyond its memory"
        steps = [s for k, plan in enumerate(proposal.plans)
                 for s in plan_steps(graph, plan, k, runs[k])]
    except (ScheduleFormError, LayoutError, PrefetchFormError) as err:
        raise UnsupportedOperatorError("this plan", str(err)) from None
    io_arena, io_bytes = _io_in_arena(graph, boundary) if io_apart else ({}, 0)
    lstm_state = None   # (offset, region) of the joined LSTM's states
    lstm_work = 0       # bytes of its working memory
    if lstm_part is not None:
        lstm_work = next(b.nbytes for b in buffers if b.name == f"{lstm_part.name}:work")
        key = f"{lstm_part.name}:state"
        if io_apart:   # in the arena after the inputs and outputs
            lstm_state = (io_bytes, _ARENA_IO)
            state_bytes = next(tc.buffer_bytes for tc in proposal.plans[0].tensor_configs
                               if tc.tensor == key)
            io_bytes = -(-(io_bytes + state_bytes) // ALIGN) * ALIGN
        else:
            lstm_state = (layout.offsets[key], SCRATCH_REGION)
    storage = {}
    # an in-place network output where the inputs and outputs live apart keeps its own place
    aliased = {name: root for name, root in
               aliased_outputs(graph, [plan.parts for plan in proposal.plans]).items()
               if name not in io_arena}
    for name, buf_shape in shapes.items():
        t = graph.tensor(name)
        if name in aliased:   # its root's bytes, under its own shape
            continue
        at, region = (io_arena[name], _ARENA_IO) if name in io_arena else \
            (layout.offsets[name], SCRATCH_REGION)
        storage[name] = _Storage(at, shape3(buf_shape, name), shape3(t.shape, name),
                                 str(np.dtype(t.dtype)), region)
    for name, root in aliased.items():
        t, st = graph.tensor(name), storage[root]
        storage[name] = _Storage(st.offset, shape3(t.shape, name), shape3(t.shape, name),
                                 st.dtype, st.region)
    flash = Flash()
    consts = {t.op.name: a for t, a in zip(lw.const_tensors, lw.consts)}
    stager = Stager(api, flash, acc, {
        part_layer[pool.staged]: (k,) + pool.halves(layout.offsets[pool_key(k)])
        for k, pool in pools.items() if pool.staged})
    em = _Emitter(lw, acc, accelerator, flash, storage, layout.offsets, part_layer, consts,
                  stager, graph, device.perf)
    em.work_bytes = work
    plan_starts: dict = {}
    part_ops: dict = {}
    alias_parts = {p.name for p in graph.parts
                   if p.output.name in aliased and not in_place(p, graph)}
    with encoding_ahead(worth_ahead(em.predicted_requests(steps))):
        for s in steps:
            plan_starts.setdefault(s.plan, len(em.ops))
            first = len(em.ops)
            if s.part in alias_parts:   # no operation: its output is its input's bytes
                continue
            if lstm_part is not None and s.part == lstm_part.name:
                em.ops += _joined_ops(joined, lstm_part, storage, lstm_state, layout, flash,
                                      accelerator)
                continue
            em.emit(s.part, s.box)
            part_ops.setdefault((s.plan, s.part), []).extend(em.ops[first:])
    em.step_at = None
    em.ops, copied = copy_weights(api, em.ops, plan_starts, part_ops, pools, layout.offsets)
    # an in-place output is its root's bytes (``planner.aliases.in_place``)
    io_offsets = dict(layout.offsets, **{n: layout.offsets[r] for n, r in aliased.items()
                                         if r in layout.offsets})
    arena_bytes, fast_bytes = layout.size, 0
    touched = ("tensor", "work")
    if io_apart:    # the plan's SRAM is the fast scratch; the inputs and outputs stay put
        move_region(em.ops, SCRATCH_REGION, FAST_SCRATCH_REGION)
        move_region(em.ops, _ARENA_IO, SCRATCH_REGION)
        io_offsets, arena_bytes, fast_bytes = io_arena, io_bytes, layout.size
    elif sram_region(accelerator) == FAST_SCRATCH_REGION:
        io_offsets, arena_bytes = _io_in_fast_scratch(
            em, lw, dataclasses.replace(layout, offsets=io_offsets))
        fast_bytes = layout.size
    if not io_apart:    # the inputs in the plan's SRAM: copied in whole, or read there
        touched += ("input",)
    # the weight blocks the DMAs fill are touched too
    touched_top = max([layout.top(touched)] + [layout.offsets[pool_key(k)] + used
                                                for k, used in copied.pool_used.items()]
                      + [at + n for at, n in stager.touched])
    payload = driver_payload(em.ops, acc)

    def arena(t) -> ArenaTensor:
        name = t.op.name if fast_bytes and not io_apart else output_source(lw, t).op.name
        return ArenaTensor(t.op.name, tuple(int(s) for s in t.shape), str(t.dtype),
                           io_offsets[name])

    if joined is None:
        inputs = tuple(arena(t) for t in lw.input_tensors)
        outputs = tuple(arena(t) for t in lw.outputs)
    elif joined.first:   # its sequence and states in, lw's outputs out
        inputs = (joined.sequence(storage[boundary[0][0]].offset),) + \
            joined.states(lstm_state[0])
        outputs = tuple(arena(t) for t in lw.outputs)
    else:                # lw's inputs and its states in, its sequence out
        inputs = tuple(arena(t) for t in lw.input_tensors) + joined.states(lstm_state[0])
        outputs = (joined.sequence(storage[boundary[1][0]].offset),)
    return EthosUPayload(accelerator, bytes(payload), bytes(flash.data), arena_bytes, fast_bytes,
                         inputs,
                         outputs, sum(work.values()) + lstm_work,
                         schedule,
                         layout.size - touched_top, copied.dma_bytes + stager.dma_bytes,
                         copied.left_in_flash + stager.left_in_flash,
                         tuple(sorted(em.block_sources.items())))
