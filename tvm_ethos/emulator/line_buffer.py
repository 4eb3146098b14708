"""Line-buffer cascades in TensorIR: a demand-driven rolling Plan on one finer step loop.

``planner.line_buffer.line_timing`` says at which step of one loop each Part of a rolling Plan
(granule 1: every producer computes one row at a time) computes each of its chunks:
chunk ``j`` at step ``offset + period * j``. This module turns the scheduled loop nest of such
a Plan (``schedule.apply_proposal`` has split the sink into its stripes, ``compute_at``-ed the
producers into the stripe loop and folded their buffers into rings of the planned rows) into
that loop:

* the stripe loop ``s`` becomes the step loop ``t`` over ``LineTiming.steps`` steps;
* the sink's stripe is ``s = floordiv(t - offset, period)``, at the steps where that division
  is exact;
* each producer's row loop (the window ``compute_at`` gave it, ``a * s + u + c``) goes: its
  row is bound to its own chunk ``lo + floordiv(t - offset, period)`` and it runs at the steps
  its period says. Its other axes (the width window of a 2-D tile, the channels) keep the
  bindings ``compute_at`` derived;
* a ring some row of which is read at a later step than it is written gets an opaque block
  iterator in its write region (as lockstep rings do, ``schedule._with_predicate``), so that
  TVM allocates it outside the step loop.

Nothing here decides sizes: the rings are the planner's (``transform_layout`` already folded
them), and ``schedule.measure`` checks that what TVM allocates is what the Plan predicts.
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.ir.expr import TensorRegion
from tvm.sym import Analyzer

from planner.line_buffer import LineBufferError, LineTiming
from tvm_ethos.errors import CompileError
from tvm_ethos.host.cpu.tir_subst import BINARY, UnreadableExpression, subst

OPAQUE_ITER = 4  # tvm IterVar kOpaque


class LineBufferScheduleError(CompileError):
    """The loop nest of a rolling Plan is not the shape this rewrite expects."""


# ----------------------------------------------------------------------------- expressions
_BINARY = BINARY


def _subst(e, env: dict):
    """``e`` with the variables of ``env`` (keyed by the Var objects) replaced; an expression
    the substitution does not read is a :class:`LineBufferScheduleError`."""
    try:
        return subst(e, env)
    except UnreadableExpression as err:
        raise LineBufferScheduleError(f"line buffer: {err}") from None


def _uses(e, names) -> bool:
    """Whether ``e`` mentions one of the variables ``names``."""
    return any(v.same_as(n) for v in _vars(e) for n in names)


def _conjuncts(e):
    if isinstance(e, tirx.And):
        return _conjuncts(e.a) + _conjuncts(e.b)
    if isinstance(e, tirx.IntImm) and int(e) == 1:
        return []
    return [e]


def _conjoin(terms):
    out = None
    for c in terms:
        out = c if out is None else tirx.And(out, c)
    return out if out is not None else tirx.IntImm("bool", 1)


def _vars(e) -> list:
    """The variables ``e`` mentions (each Var object once)."""
    out = []

    def walk(x):
        if isinstance(x, tirx.Var):
            if not any(x.same_as(v) for v in out):
                out.append(x)
        elif isinstance(x, _BINARY):
            walk(x.a)
            walk(x.b)
        elif isinstance(x, tirx.Not):
            walk(x.a)
        elif isinstance(x, tirx.Cast):
            walk(x.value)
        elif isinstance(x, tirx.Select):
            for y in (x.condition, x.true_value, x.false_value):
                walk(y)
        elif not isinstance(x, (tirx.IntImm, tirx.FloatImm)):
            raise LineBufferScheduleError(f"line buffer: cannot read {type(x).__name__} {x}")
    walk(e)
    return out


# ----------------------------------------------------------------------------- statements
def _realizes(stmt):
    """Every SBlockRealize in a loop nest (not inside blocks: compute_at nests loops only)."""
    if isinstance(stmt, tirx.SeqStmt):
        for s in stmt.seq:
            yield from _realizes(s)
    elif isinstance(stmt, tirx.For):
        yield from _realizes(stmt.body)
    elif isinstance(stmt, s_tir.SBlockRealize):
        yield stmt
    else:
        raise LineBufferScheduleError(f"line buffer: unexpected {type(stmt).__name__} in the "
                                      "stripe loop")


def _unit_loops(stmt) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        return [v for x in stmt.seq for v in _unit_loops(x)]
    if isinstance(stmt, tirx.For):
        here = [stmt.loop_var] if isinstance(stmt.extent, tirx.IntImm) and \
            int(stmt.extent) == 1 else []
        return here + _unit_loops(stmt.body)
    return []


def realize_line_buffer(sch, step, plan, parts, timing: LineTiming, sram_scope: str) -> None:
    """Rewrite the stripe loop ``step`` of ``plan`` into ``timing``'s step loop (module
    docstring). ``parts``: the matched Parts by name (root and stage TE ops); ``sram_scope``:
    the scope of the Plan's SRAM buffers."""
    loop = sch.get(step)
    s_var = loop.loop_var
    t_var = tirx.Var(s_var.name + "_line", "int32")
    ana = Analyzer()
    owner, root_of = {}, {}
    for name in plan.parts:
        mp = parts[name]
        owner[mp.root.op.name] = name
        root_of[name] = mp.root.op.name
        for st in mp.stages:
            owner[st.op.name] = name
    # unit loops (compute_at keeps them) bind nothing: read them as 0, so that a stage whose
    # binding names its own unit loop and its root's name the same row
    unit = {v: tirx.IntImm("int32", 0) for v in _unit_loops(loop.body)}
    by_block = {}
    for r in _realizes(loop.body):
        by_block[r.block.name_hint] = s_tir.SBlockRealize(
            [ana.simplify(_subst(v, unit)) for v in r.iter_values],
            ana.simplify(_subst(r.predicate, unit)), r.block)

    def chunk(pt):
        return tirx.floordiv(t_var - pt.offset, pt.period)

    def fires(pt):
        j = chunk(pt)
        return _conjoin([tirx.EQ(tirx.floormod(t_var - pt.offset, pt.period), 0),
                         tirx.GE(j, 0), tirx.LT(j, len(pt.chunks))])

    sink = plan.parts[-1]
    configs = {tc.tensor: tc for tc in plan.tensor_configs}
    inner_loops = _loop_vars(loop.body)
    # block name -> (new iter values, new predicate, axes whose buffer must outlive a loop)
    rewrite = {}
    drop_loops = []
    for name in plan.parts:
        pt = timing.of(name)
        blocks = [b for b, o in owner.items() if o == name]
        if name == sink:
            env = {s_var: chunk(pt)}
            for b in blocks:
                r = by_block[b]
                rewrite[b] = ([ana.simplify(_subst(v, env)) for v in r.iter_values],
                              _conjoin([_subst(r.predicate, env), fires(pt)]), [])
            continue
        root = by_block.get(root_of[name])
        if root is None:
            raise LineBufferScheduleError(f"line buffer: {name} is not computed in the stripe "
                                          "loop")
        rows = root.iter_values[pt.axis]
        inner = [v for v in _vars(rows) if not v.same_as(s_var)]
        lo = pt.chunks[0][0]
        if any(c != (lo + j, lo + j + 1) for j, c in enumerate(pt.chunks)):
            raise LineBufferScheduleError(f"line buffer: {name} computes chunks {pt.chunks[:3]}"
                                          "..., not one row at a time")
        row = chunk(pt) + lo
        gone = inner + [s_var]
        for b in blocks:
            r = by_block[b]
            values = []
            for v in r.iter_values:
                if _uses(v, gone):
                    rest = ana.simplify(v - rows)
                    if _uses(rest, gone):
                        raise LineBufferScheduleError(
                            f"line buffer: {b} is bound to {v}, not to {name}'s row {rows} "
                            "plus a constant")
                    v = ana.simplify(row + rest)
                values.append(v)
            keep = [c for c in _conjuncts(r.predicate) if not _uses(c, gone)]
            hoist = []
            if b == root_of[name]:
                hoist = ([pt.axis] if pt.held else []) + [
                    a for a in _whole_axes(configs[parts[name].part.output.name],
                                           parts[name].part.output.shape)
                    if a != pt.axis and any(not _uses(v, inner_loops)
                                            for v in _vars(values[a]))]
            rewrite[b] = (values, _conjoin(keep + [fires(pt)]), hoist)
        drop_loops += inner

    reuse = {}

    def rebuild(stmt):
        if isinstance(stmt, tirx.SeqStmt):
            return tirx.SeqStmt([rebuild(x) for x in stmt.seq])
        if isinstance(stmt, tirx.For):
            body = rebuild(stmt.body)
            if _uses(stmt.loop_var, drop_loops):
                return body
            if _uses(stmt.min, drop_loops + [s_var]) or \
                    _uses(stmt.extent, drop_loops + [s_var]):
                raise LineBufferScheduleError(f"line buffer: loop {stmt.loop_var} depends on "
                                              "the stripe loop")
            return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, body,
                            stmt.thread_binding, stmt.annotations)
        r = stmt
        name = r.block.name_hint
        if name not in rewrite:
            if any(_uses(v, drop_loops + [s_var]) for v in r.iter_values) or \
                    _uses(r.predicate, drop_loops + [s_var]):
                raise LineBufferScheduleError(f"line buffer: block {name} of no Part of the "
                                              "Plan depends on the stripe loop")
            return r
        values, pred, hoist = rewrite[name]
        block = _clamped_reads(r.block, ana, sram_scope)
        if hoist:
            block, values = with_opaque_iterators(block, values, hoist)
        if not block.same_as(r.block):
            reuse[r.block] = block
        return s_tir.SBlockRealize(values, ana.simplify(pred), block)

    body = rebuild(loop.body)
    new_loop = tirx.For(t_var, timing.first_step, timing.steps, loop.kind, body,
                        loop.thread_binding, loop.annotations)
    sch.state.replace(sch.get_sref(step), new_loop, reuse)


def _clamped_reads(block, ana, scope: str):
    """``block`` with its declared reads of SRAM buffers clipped to the buffers' shapes.

    A consumer's window reaches into the padding (reads TVM guards with ``if_then_else``).
    While a ring lived inside the stripe loop, TVM sized it from one step's accesses; above
    the step loop it relaxes them over every step and width tile, and a window wider than the
    tensor (a 6-column window of a 5-column tensor) would then size the ring past the tensor.
    The clipped region still covers every access that runs."""
    reads, changed = [], False
    for r in block.reads:
        if r.source.scope() != scope:
            reads.append(r)
            continue
        region = []
        for rng, n in zip(r.region, r.source.shape):
            lo = ana.simplify(tirx.max(rng.min, 0))
            hi = ana.simplify(tirx.min(rng.min + rng.extent, n))
            region.append(tvm.ir.Range.from_min_extent(lo, ana.simplify(hi - lo)))
        reads.append(TensorRegion(r.source, region, r.ty))
        changed = True
    if not changed:
        return block
    return s_tir.SBlock(block.iter_vars, reads, block.writes, block.name_hint, block.body,
                        block.init, block.alloc_buffers, block.match_buffers,
                        block.annotations)


def _whole_axes(tc, shape) -> list:
    """Axes along which the planned buffer is the whole tensor (not folded)."""
    return [a for a, (b, n) in enumerate(zip(tc.buffer_shape, shape)) if b == n and n > 1]


def _loop_vars(stmt) -> list:
    if isinstance(stmt, tirx.SeqStmt):
        return [v for x in stmt.seq for v in _loop_vars(x)]
    if isinstance(stmt, tirx.For):
        return [stmt.loop_var] + _loop_vars(stmt.body)
    return []


def with_opaque_iterators(block, values, axes):
    """``block`` with, for each of ``axes``, an opaque iterator bound like that axis's
    iterator and used only in its write region. TVM allocates a buffer above every loop that
    an opaque iterator of an access region depends on (``DetectBufferAccessLCA``, what
    ``rolling_buffer`` relies on), while the accumulator the block reads stays a single
    element inside the loops: along the ring's axis that keeps the ring alive from one step
    to the next (lockstep rings, ``schedule._with_predicate``, and line buffers); along a width the
    buffer holds whole, it puts the buffer above the width tiles, where TVM sizes it by the
    tensor rather than by a bound of one tile's clipped window (7 columns of a 5-column
    tensor on ds_cnn)."""
    write = block.writes[0]
    region = list(write.region)
    iters, values = list(block.iter_vars), list(values)
    for axis in axes:
        iv = block.iter_vars[axis]
        var = tirx.Var(iv.var.name + "_ring", "int32")
        lo = region[axis].min
        if isinstance(lo, tirx.FloorMod) and lo.a.same_as(iv.var):
            lo = tirx.FloorMod(var, lo.b)
        elif lo.same_as(iv.var):
            lo = var
        else:
            raise LineBufferScheduleError(f"{block.name_hint} writes axis {axis} of its buffer "
                                          f"at {lo}, not at its own (folded) index")
        region[axis] = tvm.ir.Range.from_min_extent(lo, region[axis].extent)
        iters.append(tirx.IterVar(iv.dom, var, OPAQUE_ITER))
        values.append(values[axis])
    writes = [TensorRegion(write.source, region, write.ty)] + list(block.writes[1:])
    new_block = s_tir.SBlock(iters, block.reads, writes, block.name_hint, block.body,
                             block.init, block.alloc_buffers, block.match_buffers,
                             block.annotations)
    return new_block, values


__all__ = ["LineBufferError", "LineBufferScheduleError", "realize_line_buffer",
           "with_opaque_iterators"]
