"""Apply a planner Proposal to an NPU subgraph's PrimFunc with ``tvm.s_tir.Schedule``.

For every Plan (a cascade) of the Proposal:

* the sink Part's output loops are split into the Plan's stripes and reordered as planned (width
  tiles outer, rows inner: ``StripeConfig.order``);
* every other Part of the Plan is ``compute_at``-ed into the innermost stripe loop, consumers
  first, so it computes, per stripe, exactly the window its consumers read (TVM relaxes the
  consumer's accesses; border rows are clipped by predicates) - the planner's RECOMPUTE buffer;
* the intermediate tensors are moved to the NPU SRAM scope (``set_scope``) and folded to the
  Plan's buffer shape with ``transform_layout`` (``row % rows`` along each striped axis, a ring
  addressing): a stripe's window is contiguous and never longer than the planned buffer, so the
  fold is injective within a stripe and the buffer has exactly the planned shape;
* a Part's internal stages (int32 accumulators, rescaled ADD inputs) are computed at the
  innermost loop of its output (``compute_at`` + scope ``local``: one element, the NPU's
  accumulator);
* weights the Plan copies to SRAM are ``cache_read`` into the SRAM scope once, before the Plan;
* the Plan's weight staging double buffer (the planner counts one per cascade, sized for its
  widest Part: two slices of 16 output channels) is two chained ``cache_read`` stages of that
  Part's constants, ``compute_at`` the loop over its 16-channel slices (or, when that Part's
  weights are copied to SRAM, at the copy's slice loop: the copy is filled through it);
* tensors between Plans inside the subgraph live in the SRAM scope at full size.

Then :func:`measure` lowers the scheduled function through the first passes of the TIR
pipeline (up to ``CompactBufferAllocation``), reads every allocation and computes, per memory
scope, the bytes allocated and the peak of live bytes over the Plans; both must equal what the
Plan predicts (``planned_bytes``). ``check`` raises :class:`MemoryMismatchError` otherwise.

Lockstep rolling buffers (``planner.lockstep``) are realized on top of that: the ring is the
same ``row % rows`` fold (sized by the planner for the rows the consumer computes per step), a
block predicate keeps only the rows the previous step did not compute, and an opaque iterator
in the producer's write region keeps the ring allocated outside the stripe loop (see
:func:`_lockstep`). With a prologue (``lockstep_rolling="prologue"``) the stripe loop starts
before the sink's first stripe (:func:`_start_early`), so that every ring is the steady one.
The planner's demand-driven rolling buffers filled one row at a time (``rolling_granules=(1,)``)
become line-buffer cascades: the stripe loop is rewritten into a finer step loop on which
every Part computes its next row at its own period (``tvm_ethos.emulator.line_buffer``, timed by
``planner.line_buffer``). Other granules are refused with :class:`UnrealizableScheduleError`
(rfcs/0005-planner-in-compile-path.md, section 4).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import tvm
import tvm_ffi
from tvm import s_tir, te, tirx
from tvm.ir import Range
from tvm.sym import Analyzer
from tvm.tirx import IndexMap

from planner.aliases import aliased_outputs
from planner.line_buffer import LineBufferError, line_timing
from planner.memory import BufferMode
from planner.staged_slices import SLICE_CHANNELS
from planner.work_memory import is_work_tensor
from tvm_ethos.emulator.line_buffer import (
    LineBufferScheduleError,
    realize_line_buffer,
    with_opaque_iterators,
)
from tvm_ethos.emulator.part_matchers import to_affine
from tvm_ethos.emulator.planned_memory import (  # noqa: F401 - MemoryMismatchError: its API
    ACC_SCOPE,
    DTYPE_BYTES,
    SRAM_SCOPE,
    MemoryMismatchError,
    planned_bytes,
)
from tvm_ethos.errors import CompileError

#: ``Schedule.annotate_buffer_access`` without its Python check (see ``_read_as_planned``)
_ANNOTATE_BUFFER_ACCESS = tvm.get_global_func("s_tir.schedule.ScheduleAnnotateBufferAccess")


class UnrealizableScheduleError(CompileError):
    """A Proposal uses a buffering mode this scheduler cannot express exactly in TensorIR."""


@dataclass
class BufferInfo:
    name: str
    scope: str
    shape: tuple
    dtype: str
    stmt: int | None  # top-level statement it is allocated in; None: the function root

    @property
    def bytes(self) -> int:
        return math.prod(self.shape) * DTYPE_BYTES.get(self.dtype, 4)


@dataclass
class ScheduledSubgraph:
    symbol: str
    primfunc: object
    planned_bytes: dict
    scheduled_bytes: dict
    planned_peak: int
    scheduled_peak: int
    plans: list = field(default_factory=list)   # per Plan: parts, planned / scheduled bytes
    buffers: list = field(default_factory=list)  # BufferInfo of every allocation
    # s_tir.analysis.calculate_allocated_bytes: TVM's per-scope maximum of the allocations
    # live at once by nesting (root allocations count for the whole function)
    analysis_bytes: dict = field(default_factory=dict)

    @property
    def exact(self) -> bool:
        return (self.planned_bytes == self.scheduled_bytes and
                self.planned_peak == self.scheduled_peak and
                all(p["planned_bytes"] == p["scheduled_bytes"] for p in self.plans))

    def to_json(self) -> dict:
        return {
            "planned_bytes": dict(self.planned_bytes),
            "scheduled_bytes": dict(self.scheduled_bytes),
            "planned_peak_bytes": self.planned_peak,
            "scheduled_peak_bytes": self.scheduled_peak,
            "plans": [dict(p) for p in self.plans],
        }


# ----------------------------------------------------------------------------- scheduling
def _ring_map(buf_shape, shape, every_axis=False):
    """The ``transform_layout`` folding a tensor into its planned buffer: ``i % rows`` along
    each axis the buffer is shorter on. With ``every_axis``, along every axis longer than one:
    a line-buffer ring is allocated above the step loop, where TVM's compaction of a
    whole-width window can overshoot the tensor (ds_cnn: 7 columns of 5)."""
    axes = [a for a, (b, n) in enumerate(zip(buf_shape, shape))
            if b < n or (every_axis and b > 1)]

    def fn(*idx):
        return tuple(idx[a] % int(buf_shape[a]) if a in axes else idx[a] for a in range(len(idx)))

    return fn, axes


def _stripe_loops(sch, block, stripe):
    """Split the output loops of ``block`` into the stripes of ``stripe`` in planned order.

    Returns the loop producers are computed at (the innermost stripe loop, or for a single
    stripe a loop of one iteration around all of the sink's)."""
    loops = sch.get_loops(block)
    rank = len(stripe.shape)
    if not loops and stripe.total_stripes == 1:
        return None   # an extern stage (an LSTM): its own loops inside, computed whole
    if len(loops) < rank:
        raise CompileError(f"schedule: block {sch.get(block).name_hint} has {len(loops)} "
                           f"loops for a rank-{rank} stripe")
    loops = loops[-rank:] if len(loops) > rank else loops
    striped = [a for a in range(rank) if stripe.stripes[a] > 1]
    if not striped:
        # one stripe: producers compute their whole output once, before the sink's loops
        # (at a leading loop above 1, as a 3-D, 2-D or 1-D sink's first axis may be, they
        # would compute only what one iteration reads: less than the planned buffer)
        if int(sch.get(loops[0]).extent) == 1:
            return loops[0]
        whole, _ = sch.split(loops[0], factors=[1, None])
        return whole
    outer, inner = {}, {}
    for a in striped:
        o, i = sch.split(loops[a], factors=[None, int(stripe.shape[a])])
        outer[a], inner[a] = o, i
    # loop nest: unstriped leading axes of extent 1 (batch), stripe loops by order, then the
    # rest (an unstriped H of a column tiling stays inside the stripe loop: a whole column)
    by_order = sorted(striped, key=lambda a: stripe.order[a])
    lead_axes = [a for a in range(rank)
                 if a not in striped and a < min(striped) and int(stripe.extent[a]) == 1]
    lead = [loops[a] for a in lead_axes]
    rest = [inner[a] if a in striped else loops[a] for a in range(rank) if a not in lead_axes]
    sch.reorder(*(lead + [outer[a] for a in by_order] + rest))
    return outer[by_order[-1]]


def _with_extern_regions(func, lowered):
    """``func`` with the block of every extern stage (an LSTM, ``compute.lstm``) reading its
    inputs and writing its output whole: ``create_prim_func`` leaves an extern block's
    regions empty, which ``set_scope`` and the measure's walk need."""
    externs = {}
    stack = list(lowered.outputs)
    while stack:
        t = stack.pop()
        if isinstance(t.op, te.ExternOp):
            externs[t.op.name] = t.op
        stack.extend(getattr(t.op, "input_tensors", []))
    if not externs:
        return func
    root = func.body.block
    buffers = {b.name: b for b in list(func.params) + list(root.alloc_buffers)}

    def whole(name):
        buf = buffers[name]
        return tirx.BufferRegion(buf, [Range(0, int(n)) for n in buf.shape])

    def fixed(stmt):
        if isinstance(stmt, s_tir.SBlockRealize) and stmt.block.name_hint in externs:
            b = stmt.block
            op = externs[b.name_hint]
            block = s_tir.SBlock(b.iter_vars, [whole(t.op.name) for t in op.input_tensors],
                                 [whole(op.name)], b.name_hint, b.body, b.init,
                                 b.alloc_buffers, b.match_buffers, b.annotations)
            return s_tir.SBlockRealize(stmt.iter_values, stmt.predicate, block)
        return stmt

    if root.name_hint in externs:
        # a subgraph of the extern stage alone: its block is the function's; put it under a
        # root block of its own, as every other stage is
        new_root = s_tir.SBlock([], [], [], "root", fixed(func.body), None, [], [], {})
    else:
        body = root.body
        body = tirx.SeqStmt([fixed(st) for st in body.seq]) \
            if isinstance(body, tirx.SeqStmt) else fixed(body)
        new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, body,
                                root.init, root.alloc_buffers, root.match_buffers,
                                root.annotations)
    realize = s_tir.SBlockRealize(func.body.iter_values, func.body.predicate, new_root)
    return func.with_body(realize)


def apply_proposal(lowered, match, proposal, device=None):
    """The scheduled PrimFunc of ``lowered`` for ``proposal`` (see the module docstring)."""
    func = _with_extern_regions(lowered.primfunc, lowered)
    sch = s_tir.Schedule(tvm.IRModule({"main": func}))
    parts = {mp.part.name: mp for mp in match.parts}
    plan_of = {}
    for k, plan in enumerate(proposal.plans):
        if getattr(plan.spec, "prefetch_next", False):
            raise UnrealizableScheduleError(
                f"schedule: plan {k} prefetches the next Part's weights across Plans, which "
                "TensorIR does not realize; plan with PlannerOptions(weight_prefetch=False), "
                "the default")
        for name in plan.parts:
            plan_of[name] = k
    missing = [mp.part.name for mp in match.parts if mp.part.name not in plan_of]
    if missing:
        raise CompileError(f"schedule: parts {missing} are in no Plan of the Proposal")
    out_names = {t.op.name for t in lowered.outputs}

    def blk(t):
        return sch.get_sblock(t.op.name)

    _read_as_planned(sch, match)
    # 1. weight copies: cache_read before anything moves, so the copy stays before its Plan
    consts = {t.op.name for t in lowered.const_tensors}
    copy_block = {}   # (plan index, constant) -> the copy block
    for k, plan in enumerate(proposal.plans):
        members = {parts[p].part.output.name for p in plan.parts}
        for tc in plan.tensor_configs:
            if tc.copy_region == tc.home_region or tc.tensor in members:
                continue
            if tc.tensor not in consts:
                raise UnrealizableScheduleError(
                    f"schedule: {tc.tensor} is staged in {tc.copy_region} (home "
                    f"{tc.home_region}); only weights are staged or copied in TensorIR "
                    "(network inputs and outputs must live in SRAM: io_region='sram')")
            if tc.double_buffer:
                continue  # a weight staging buffer: realized in step 3
            for s in _readers(plan, parts, tc.tensor):
                b = blk(s)
                idx = _read_index(sch, b, tc.tensor)
                if idx is not None:
                    copy_block[(k, tc.tensor)] = sch.cache_read(b, idx, SRAM_SCOPE)

    # 2. cascades
    for plan_index, plan in enumerate(proposal.plans):
        configs = {tc.tensor: tc for tc in plan.tensor_configs}
        computed = {ps.part: ps.stripe for ps in plan.part_schedules}
        rolling = []
        timing = _line_timing(match.graph, plan, configs, parts)
        sink = parts[plan.parts[-1]]
        step = _stripe_loops(sch, blk(sink.root), plan.spec.stripe)
        prologue = max((getattr(ps.stripe, "prologue", 0) for ps in plan.part_schedules),
                       default=0)
        if prologue:
            _start_early(sch, step, blk(sink.root), prologue)

        def accumulate(mp):
            # the Part's internal stages (accumulators, ADD's rescaled inputs) at the innermost
            # loop of its output: one element each, in the NPU's registers. (Inlining the
            # rescaled inputs instead would nest requantizations: exponential expressions.)
            for s in reversed(mp.stages):
                sch.compute_at(blk(s), sch.get_loops(blk(mp.root))[-1], preserve_unit_loops=True)
                sch.set_scope(blk(s), 0, ACC_SCOPE)

        accumulate(sink)
        for name in reversed(plan.parts[:-1]):  # consumers first
            # an extern stage (an LSTM's whole sequence) or any Part before an extern sink
            # computes its whole output once, before the sink, where TIR already puts it
            if step is not None and not isinstance(parts[name].root.op, te.ExternOp):
                sch.compute_at(blk(parts[name].root), step, preserve_unit_loops=True)
            accumulate(parts[name])
        for name in plan.parts[:-1]:
            mp = parts[name]
            tc = configs[mp.part.output.name]
            b = blk(mp.root)
            sch.set_scope(b, 0, SRAM_SCOPE)
            fn, axes = _ring_map(tc.buffer_shape, mp.part.output.shape,
                                 every_axis=timing is not None)
            if axes:
                sch.transform_layout(b, ("write", 0), fn, assume_injective_transform=True)
            if tc.buffer_mode == BufferMode.ROLLING:
                rolling.append((mp, tc))
        # the sink's output: a boundary tensor in SRAM unless it is a subgraph output
        if sink.root.op.name not in out_names:
            sch.set_scope(blk(sink.root), 0, SRAM_SCOPE)
        # 3. the Plan's weight staging double buffer
        staged = [tc for tc in plan.tensor_configs
                  if tc.double_buffer and tc.tensor in consts and tc.copy_region != tc.home_region]
        if staged:
            _stage_weights(sch, plan, parts, staged, step, copy_block, plan_index)
        # last: the opaque ring iterator would stop the staging's loop reorder
        if timing is not None:
            try:
                realize_line_buffer(sch, step, plan, parts, timing, SRAM_SCOPE)
            except LineBufferScheduleError as err:
                raise UnrealizableScheduleError(f"schedule: plan {plan_index}: {err}") from None
            continue
        for mp, tc in rolling:
            _lockstep(sch, mp, step, computed[mp.part.name], tc, prologue)
    return sch.mod["main"]


def _whole_axes(prop, shape) -> list[int]:
    """The input axes a propagator reads whole whatever the output stripe: no output
    coordinate moves them, and the window spans the extent from 0."""
    return [d for d in range(prop.input_dims)
            if not any(prop.transform[d][:-1]) and prop.transform[d][-1] == shape[d]
            and prop.offset[d] == 0]


def _same(expr, new) -> bool:
    """Whether a region bound ``expr`` is already ``new`` (an int or an expression)."""
    if isinstance(new, int):
        return isinstance(expr, tirx.IntImm) and int(expr) == new
    return tvm_ffi.structural_equal(expr, new)


def _read_as_planned(sch, match) -> None:
    """Make every block read its feature maps where its Part's propagator says
    (``explicit_read_region``), so that ``compute_at`` computes the windows the planner
    planned. TVM relaxes a block's read region as written, a RESHAPE's flattened index
    (``floordiv`` / ``floormod``) included, where the matcher simplified it first, with the
    iterators' ranges (``part_matchers.stage_reads``):

    * an axis the matcher found affine only once simplified (a RESHAPE that only moves axes)
      TVM relaxes, unsimplified, to the whole extent: the producer then computed more rows
      than its planned ring holds, and they overwrote one another; each index is read here
      as the matcher simplified it;
    * an axis the matcher found no affine map for is planned whole, and the producer's buffer
      holds it whole; TVM's relaxation can be tighter (one element of a one-element stripe),
      and the schedule computed, and allocated, less than planned; it is read whole here."""
    for mp in match.parts:
        if isinstance(mp.root.op, te.ExternOp):
            continue   # computed whole already (``_with_extern_regions``)
        for x, prop in zip(mp.part.inputs, mp.part.propagators):
            if x.is_constant:
                continue
            whole = _whole_axes(prop, x.shape)
            for s in [mp.root] + mp.stages:
                if all(t.op.name != x.name for t in s.op.input_tensors):
                    continue
                b = sch.get_sblock(s.op.name)
                block = sch.get(b)
                idx = _read_index(sch, b, x.name)
                region = block.reads[idx].region
                ana = Analyzer()
                for iv in block.iter_vars:
                    if int(iv.dom.extent) > 1:   # as ``stage_reads`` binds them
                        ana.bind(iv.var, iv.dom)
                bounds = []
                for d, r in enumerate(region):
                    if d in whole:
                        bounds += [0, x.shape[d]]
                    else:
                        bounds += [ana.simplify(r.min), ana.simplify(r.min + r.extent)]
                old = [e for r in region for e in (r.min, r.min + r.extent)]
                if all(_same(o, n) for o, n in zip(old, bounds)):
                    continue
                # (``Schedule.annotate_buffer_access`` asks one range per block iterator,
                # which a reduction's block or a reshape between ranks does not have)
                iters = [iv.var for iv in block.iter_vars]
                _ANNOTATE_BUFFER_ACCESS(sch, b, idx, 0, IndexMap(iters, bounds, None))


def _line_timing(graph, plan, configs, parts):
    """The line-buffer timing of a demand-driven rolling Plan (``tvm_ethos.emulator.line_buffer``),
    or None for a Plan without demand-driven rolling buffers."""
    if plan.spec.mode != "rolling" or not any(
            configs.get(parts[n].part.output.name) is not None and
            configs[parts[n].part.output.name].buffer_mode == BufferMode.ROLLING
            for n in plan.parts[:-1]):
        return None
    if plan.spec.granule != 1:
        raise UnrealizableScheduleError(
            f"schedule: a {plan.spec.label()} Plan: only rolling buffers filled one row at a "
            "time (granule 1) are realized in TensorIR, as line-buffer cascades; plan with "
            "PlannerOptions(rolling_granules=(1,), rolling_mixed=False)")
    try:
        return line_timing(graph, plan)
    except LineBufferError as err:
        raise UnrealizableScheduleError(f"schedule: {err}; plan with "
                                        "PlannerOptions(rolling_mixed=False)") from None


def _readers(plan, parts, tensor):
    """The TE stages of ``plan`` that read ``tensor``."""
    return [s for p in plan.parts for s in [parts[p].root] + parts[p].stages
            if any(x.op.name == tensor for x in s.op.input_tensors)]


def _read_index(sch, block, name):
    for i, r in enumerate(sch.get(block).reads):
        if _base(r.source.name) == name or r.source.name == name:
            return i
    return None


def _slice_axis(mp, tensor):
    """The TE axis of constant ``tensor`` that follows the Part's output channels."""
    k = [i for i, x in enumerate(mp.inputs) if x.op.name == tensor]
    if not k:
        return None
    acc = mp.access[k[0]]
    oc = mp.root.op.axis[-1].var.name
    follows = [a for a, d in enumerate(acc.dims) if d is not None and d.get(oc) != 0]
    return follows[0] if len(follows) == 1 else None


def _stage_weights(sch, plan, parts, staged, step, copy_block, plan_index):
    """The staging double buffer of the Plan's widest Part: its constants pass, one slice of
    SLICE_CHANNELS output channels at a time, through two SRAM buffers (the halves the
    DMA fills and the NPU reads) - two chained ``cache_read`` stages at the slice loop."""
    owners = {p for p in plan.parts for tc in staged
              if any(t.name == tc.tensor for t in parts[p].part.inputs)}
    if len(owners) != 1:
        raise UnrealizableScheduleError(f"schedule: staged weights {[t.tensor for t in staged]} "
                                        f"belong to Parts {sorted(owners)}, expected one")
    mp = parts[owners.pop()]
    oc = int(mp.root.shape[-1])
    width = min(oc, SLICE_CHANNELS)
    part_slice = None
    for tc in staged:
        copy = copy_block.get((plan_index, tc.tensor))
        if copy is not None:
            # the SRAM copy of the weights is filled through the staging buffer
            reader = copy
            axis = _slice_axis(mp, tc.tensor) or 0
            loops = sch.get_loops(reader)
            extent = int(sch.get(loops[axis]).extent)
            # one slice holds the whole tensor: the stages stay whole, at the root
            slice_loop = None if width >= extent else \
                _slice_loop(sch, loops, axis, width, extent, outer=loops[0])
        else:
            readers = [sch.get_sblock(s.op.name) for s in _readers(plan, parts, tc.tensor)]
            if len(readers) != 1:
                raise UnrealizableScheduleError(f"schedule: {tc.tensor} has {len(readers)} readers")
            reader = readers[0]
            if part_slice is None:
                root_loops = sch.get_loops(sch.get_sblock(mp.root.op.name))
                pos = [i for i, lp in enumerate(root_loops) if sch.get(lp).same_as(sch.get(step))]
                inner = root_loops[pos[0] + 1:] if pos else root_loops[1:]
                part_slice = _slice_loop(sch, inner, len(inner) - 1, width, oc, outer=step) \
                    if inner else step
            slice_loop = part_slice
        idx = _read_index(sch, reader, tc.tensor)
        first = sch.cache_read(reader, idx, SRAM_SCOPE)
        idx2 = _read_index(sch, reader, sch.get(first).writes[0].source.name)
        second = sch.cache_read(reader, idx2, SRAM_SCOPE)
        if slice_loop is not None:
            sch.compute_at(second, slice_loop, preserve_unit_loops=True)
            sch.compute_at(first, slice_loop, preserve_unit_loops=True)


def _slice_loop(sch, loops, axis, width, extent, outer):
    """Split loop ``loops[axis]`` into slices of ``width`` and make the slice loop the
    outermost of ``loops``; returns it (``outer`` when there is a single slice)."""
    if width >= extent:
        return outer
    o, i = sch.split(loops[axis], factors=[None, width])
    rest = [lp for a, lp in enumerate(loops) if a != axis]
    sch.reorder(o, *rest[:axis], i, *rest[axis:])
    return o


# ----------------------------------------------------------------------------- lockstep rings
def _realize_under(loop, block):
    """The SBlockRealize of ``block`` directly in ``loop``'s body, and its index in the body."""
    body = loop.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    for i, st in enumerate(stmts):
        if isinstance(st, s_tir.SBlockRealize) and st.block.same_as(block):
            return st, i, stmts
    raise UnrealizableScheduleError(f"schedule: block {block.name_hint} is not directly in its "
                                    "innermost loop")


def _with_predicate(sch, block_rv, cond, ring_axis=None):
    """Conjoin ``cond`` (an expression in the loop variables) to the predicate of ``block_rv``.

    With ``ring_axis``, also keep the ring the block writes allocated outside the stripe loop
    (an opaque write iterator along that axis: ``line_buffer.with_opaque_iterators``)."""
    loop_rv = sch.get_loops(block_rv)[-1]
    loop = sch.get(loop_rv)
    block = sch.get(block_rv)
    realize, i, stmts = _realize_under(loop, block)
    new_block, values = block, list(realize.iter_values)
    if ring_axis is not None:
        try:
            new_block, values = with_opaque_iterators(block, values, [ring_axis])
        except LineBufferScheduleError as err:
            raise UnrealizableScheduleError(f"schedule: {err}") from None
    stmts[i] = s_tir.SBlockRealize(values, tirx.And(realize.predicate, cond), new_block)
    body = tirx.SeqStmt(stmts) if len(stmts) > 1 else stmts[0]
    new_loop = tirx.For(loop.loop_var, loop.min, loop.extent, loop.kind, body,
                        loop.thread_binding, loop.annotations)
    sch.state.replace(sch.get_sref(loop_rv), new_loop, {block: new_block})


def _start_early(sch, step, sink, steps: int) -> None:
    """The lockstep prologue (``planner.lockstep``): the stripe loop ``step`` starts ``steps``
    steps before the sink's first stripe (the loop runs from ``-steps``; the sink's bindings
    are unchanged), and the sink is predicated to its own stripes (``step >= 0``). Done before
    the producers are computed at the loop: ``compute_at`` relaxes the sink's accesses at every
    step, so at the early steps the producers compute the first rows of their windows, a step
    at a time, as the planner's extended windows say."""
    loop = sch.get(step)
    if not (isinstance(loop.min, tirx.IntImm) and int(loop.min) == 0):
        raise UnrealizableScheduleError(f"schedule: stripe loop {loop.loop_var} starts at "
                                        f"{loop.min}, not 0")
    early = tirx.For(loop.loop_var, loop.min - steps,
                     loop.extent + steps, loop.kind, loop.body, loop.thread_binding,
                     loop.annotations)
    sch.state.replace(sch.get_sref(step), early, {})
    _with_predicate(sch, sink, tirx.GE(loop.loop_var, 0))


def _lockstep(sch, mp, step, window, tc, prologue: int = 0) -> None:
    """Realize a lockstep rolling buffer (``planner.lockstep``): Part ``mp``, computed at the
    stripe loop ``step``, computes per step only the rows of its window that the previous step
    did not, into the ring its buffer already is (the ``row % rows`` fold of step 3, with the
    planner's ring rows: ``planner.lockstep.lockstep_ring``).

    After ``compute_at`` the root's binding along the rolling axis is ``a * step + inner + c``
    with ``inner`` spanning the window's ``E`` rows; the previous step's window ended at
    ``a * (step - 1) + c + E``, so the new rows are those with ``inner >= E - a`` (all rows at
    the first step of each sweep). That predicate goes on the root and on its internal stages,
    and the root gets an opaque iterator in its write region (``_with_predicate``), so that the
    ring is allocated outside the stripe loop and keeps its rows from one step to the next.
    ``a`` and ``E`` must
    be the planned window's stride and rows: otherwise the Plan's cost is not what runs, and
    this raises :class:`UnrealizableScheduleError`."""
    axis = getattr(window, "rolling_axis", -1)
    root = sch.get_sblock(mp.root.op.name)
    loops = sch.get_loops(root)
    step_var = sch.get(step).loop_var
    extent = {sch.get(lp).loop_var.name: (sch.get(lp).loop_var, int(sch.get(lp).extent))
              for lp in loops}
    realize, _, _ = _realize_under(sch.get(loops[-1]), sch.get(root))
    aff = to_affine(realize.iter_values[axis]) if 0 <= axis < len(realize.iter_values) else None
    inner = [] if aff is None else \
        [(extent.get(n), c) for n, c in aff.coef if n != step_var.name]
    if aff is None or any(e is None or c.denominator != 1 for e, c in inner):
        raise UnrealizableScheduleError(
            f"schedule: {tc.tensor}: the window of {mp.part.name} along axis {axis} is not "
            "affine in the stripe loop; it cannot roll in lockstep")
    a = aff.get(step_var.name)
    rows = sum(int(c) * (n - 1) for (_, n), c in inner) + 1
    if (a, rows) != (window.strides[axis], window.shape[axis]):
        raise UnrealizableScheduleError(
            f"schedule: {tc.tensor}: TensorIR computes windows of {rows} rows every {a} rows "
            f"along axis {axis}, the Plan {window.shape[axis]} every {window.strides[axis]}")
    offset = None
    for (var, _), c in inner:
        term = var * int(c) if int(c) != 1 else var
        offset = term if offset is None else offset + term
    if offset is None:   # a one-row window: every step's row is new
        return
    new_rows = tirx.GE(offset, int(rows - a))
    if not prologue:     # the first step of a sweep computes the whole (clipped) window
        new_rows = tirx.Or(tirx.LT(step_var, 1), new_rows)
    # a one-row ring (a prologue's steady ring for a one-row window) holds only the row its
    # consumer reads in the same step: nothing outlives the step, no opaque iterator needed
    _with_predicate(sch, root, new_rows, ring_axis=axis if tc.buffer_shape[axis] > 1 else None)
    for s in mp.stages:
        _with_predicate(sch, sch.get_sblock(s.op.name), new_rows)


# ----------------------------------------------------------------------------- measuring
def _measure_passes():
    return tvm.transform.Sequential([
        s_tir.transform.CanonicalizeLoop(),
        s_tir.transform.LowerCrossThreadReduction(),
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.CompactBufferAllocation(),
    ])


def _walk_blocks(stmt, visit, depth=0):
    """Call ``visit(block)`` for every SBlock under ``stmt``."""
    stack = [stmt]
    while stack:
        s = stack.pop()
        if s is None:
            continue
        if isinstance(s, s_tir.SBlockRealize):
            stack.append(s.block)
            continue
        if isinstance(s, s_tir.SBlock):
            visit(s)
            stack.append(s.body)
            if s.init is not None:
                stack.append(s.init)
            continue
        if isinstance(s, tirx.SeqStmt):
            stack.extend(s.seq)
        elif isinstance(s, tirx.IfThenElse):
            stack.extend([s.then_case, s.else_case])
        elif hasattr(s, "body"):
            stack.append(s.body)


def _base(name: str) -> str:
    """A buffer's tensor name without the scope suffix set_scope / cache_read add."""
    for scope in (SRAM_SCOPE, ACC_SCOPE):
        if name.endswith("_" + scope):
            return name[: -len(scope) - 1]
    return name


def _buffer_dtype(buf) -> str:
    return str(buf.dtype)


def analyze(func):
    """Allocations of a scheduled function after compaction, and the buffers each top-level
    statement touches and writes."""
    mod = _measure_passes()(tvm.IRModule({"main": func}))
    f = mod["main"]
    root = f.body.block if isinstance(f.body, s_tir.SBlockRealize) else None
    infos: list[BufferInfo] = []
    if root is None:
        raise CompileError("schedule: unexpected function structure (no root block)")
    for b in root.alloc_buffers:
        infos.append(BufferInfo(b.name, b.scope(), tuple(int(s) for s in b.shape),
                                _buffer_dtype(b), None))
    body = root.body
    stmts = list(body.seq) if isinstance(body, tirx.SeqStmt) else [body]
    touched: list[set] = []
    written: list[set] = []
    for k, st in enumerate(stmts):
        names: set = set()
        wnames: set = set()

        def visit(blk, k=k, names=names, wnames=wnames):
            for b in blk.alloc_buffers:
                infos.append(BufferInfo(b.name, b.scope(), tuple(int(s) for s in b.shape),
                                        _buffer_dtype(b), k))
            for r in list(blk.reads) + list(blk.writes):
                names.add(r.source.name)
            for r in blk.writes:
                wnames.add(r.source.name)

        _walk_blocks(st, visit)
        touched.append(names)
        written.append(wnames)
    return infos, touched, written, mod


def _allocated_bytes(mod) -> dict:
    """TVM's own count (``s_tir.analysis.calculate_allocated_bytes``) per scope."""
    low = tvm.transform.Sequential([
        s_tir.transform.LowerMatchBuffer(),
        s_tir.transform.LowerOpaqueBlock(),
        tirx.transform.FlattenBuffer(),
    ])(mod)
    res = s_tir.analysis.calculate_allocated_bytes(low["main"])
    res = res.get("main", res) if hasattr(res, "get") else res
    return {str(k): int(v) for k, v in dict(res).items()}


def measure(lowered, match, proposal, scheduled_func, device=None,
            tvm_count: bool = True) -> ScheduledSubgraph:
    """Bytes the scheduled TIR allocates, per scope, per Plan, and its peak. ``tvm_count``
    also lowers further for TVM's ``calculate_allocated_bytes`` (informational)."""
    infos, touched, written, mod = analyze(scheduled_func)
    by_scope: dict = {}
    for b in infos:
        by_scope[b.scope] = by_scope.get(b.scope, 0) + b.bytes
    # which Plan each top-level statement belongs to: the Plan of the blocks it holds
    parts = {mp.part.name: mp for mp in match.parts}
    block_plan = {}
    for k, plan in enumerate(proposal.plans):
        for name in plan.parts:
            mp = parts[name]
            for t in [mp.root] + mp.stages:
                block_plan[t.op.name] = k
    written_by = {}
    for k, plan in enumerate(proposal.plans):
        for name in plan.parts:
            written_by[parts[name].root.op.name] = k
    # allocations of each Plan: those inside its statements, plus root-level copies
    # (weight copies are allocated at the root and used by their Plan only)
    stmt_plan: list = []
    for names in written:
        ks = {written_by[_base(n)] for n in names if _base(n) in written_by}
        stmt_plan.append(min(ks) if ks else None)
    for k in range(len(stmt_plan)):  # copy statements (only constants touched) -> the Plan
        if stmt_plan[k] is None:       # that reads the copy (TIR hoists them all to the top)
            later = [j for j in range(k + 1, len(stmt_plan)) if stmt_plan[j] is not None]
            readers = [j for j in later if set(written[k]) & set(touched[j])]
            nxt = readers or later
            stmt_plan[k] = stmt_plan[nxt[0]] if nxt else None
    plan_bytes = [0] * len(proposal.plans)
    io_names = {t.op.name for t in lowered.input_tensors} | {t.op.name for t in lowered.outputs}
    # a reshape Plan that aliases its input: the planner counts its root's bytes, live until
    # the alias's readers, in place of its own copy (``planner.aliases``)
    aliased = aliased_outputs(match.graph, [plan.parts for plan in proposal.plans])
    alias_users: dict = {}
    boundary = {}
    for b in infos:
        if b.scope != SRAM_SCOPE:
            continue
        base = _base(b.name)
        if b.stmt is not None and stmt_plan[b.stmt] is not None:
            plan_bytes[stmt_plan[b.stmt]] += b.bytes
            continue
        users = [k for k, names in enumerate(touched) if b.name in names]
        if base in aliased:
            alias_users.setdefault(aliased[base], []).extend(users)
            continue
        if base in written_by:  # a Plan's output kept for later Plans
            boundary[b.name] = (users, b.bytes)
        else:  # a weight copy at the root: belongs to the Plan that reads it
            ks = sorted({stmt_plan[k] for k in users if stmt_plan[k] is not None})
            if len(ks) != 1:
                raise MemoryMismatchError(f"schedule: buffer {b.name} is used by Plans {ks}")
            plan_bytes[ks[0]] += b.bytes
    # the Parts' working memory (planner.work_memory) is the command stream's: the TIR
    # computes each such operator in one kernel without it, so it is counted as allocated in
    # its Plan and the check compares every other buffer
    # so are an LSTM's persistent states (``<part>:state``, held under every Plan where the
    # network's inputs and outputs live in the feature maps' SRAM): the extern stage keeps
    # them in its own registers
    states_in_sram = device is None or device.io_region == device.fm_region
    for k, plan in enumerate(proposal.plans):
        work = sum(tc.buffer_bytes for tc in plan.tensor_configs if is_work_tensor(tc.tensor)
                   or (states_in_sram and tc.tensor.endswith(":state")))
        plan_bytes[k] += work
        if work:
            by_scope[SRAM_SCOPE] = by_scope.get(SRAM_SCOPE, 0) + work
    # peak: at each Plan, its buffers + the SRAM tensors live across it (as the planner counts)
    nplans = len(proposal.plans)
    live = [0] * nplans
    graph = match.graph
    for b_name, (users, nbytes) in boundary.items():
        users = users + alias_users.get(_base(b_name), [])
        ks = sorted({stmt_plan[k] for k in users if stmt_plan[k] is not None})
        if ks:
            for k in range(ks[0], ks[-1] + 1):
                live[k] += nbytes
    io_region_sram = device is None or device.io_region == device.fm_region
    if io_region_sram:
        out_names = {o.op.name for o in lowered.outputs}
        # an in-place network output is its input's bytes, held to the end
        # (``planner.aliases.in_place``)
        held = {aliased[n] for n in out_names if n in aliased}
        for t in list(lowered.input_tensors) + list(lowered.outputs):
            if t.op.name in aliased:
                continue
            users = sorted({stmt_plan[k] for k, names in enumerate(touched)
                            if t.op.name in names and stmt_plan[k] is not None}
                           | {stmt_plan[k] for k in alias_users.get(t.op.name, [])
                              if stmt_plan[k] is not None})
            if not users:
                continue
            nbytes = graph.tensor(t.op.name).bytes
            if t.op.name in held:
                rng = range(0, nplans)
            elif t.op.name in out_names:
                rng = range(users[0], nplans)
            else:
                rng = range(0, users[-1] + 1)
            for k in rng:
                live[k] += nbytes
    peak = max((plan_bytes[k] + live[k] for k in range(nplans)), default=0)
    del io_names
    plans = []
    for k, plan in enumerate(proposal.plans):
        plans.append({"parts": list(plan.parts), "planned_bytes": plan.memory_bytes,
                      "scheduled_bytes": plan_bytes[k], "stripes": plan.spec.stripe.total_stripes,
                      "buffering": plan.spec.label(), "weights": plan.spec.weights})
    return ScheduledSubgraph(
        symbol=lowered.symbol,
        primfunc=scheduled_func,
        planned_bytes=planned_bytes(match, proposal),
        scheduled_bytes=dict(sorted(by_scope.items())),
        planned_peak=proposal.memory_bytes,
        scheduled_peak=peak,
        plans=plans,
        buffers=infos,
        analysis_bytes=_allocated_bytes(mod) if tvm_count else {},
    )


def check(result: ScheduledSubgraph) -> None:
    """Raise :class:`MemoryMismatchError` unless planned and scheduled bytes agree exactly."""
    problems = []
    if result.planned_bytes != result.scheduled_bytes:
        problems.append(f"bytes per scope: planned {result.planned_bytes}, scheduled "
                        f"{result.scheduled_bytes}")
    if result.planned_peak != result.scheduled_peak:
        problems.append(f"peak: planned {result.planned_peak}, scheduled {result.scheduled_peak}")
    for k, p in enumerate(result.plans):
        if p["planned_bytes"] != p["scheduled_bytes"]:
            problems.append(f"plan {k} {p['parts'][0]}..{p['parts'][-1]}: planned "
                            f"{p['planned_bytes']} B, scheduled {p['scheduled_bytes']} B")
    if problems:
        raise MemoryMismatchError(f"{result.symbol}: scheduled TIR does not allocate what the "
                                  "Proposal predicts: " + "; ".join(problems))
