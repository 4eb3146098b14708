"""The NPU emulator's stripe kernels: the checked cascading schedule (``schedule.apply_proposal``)
made fast on the host without changing what any stripe computes or allocates.

:func:`schedule_stripes` is what ``relax.ext.<npu>`` builds: ``cpu_schedule.vectorize_stripes``
(each Part's accumulator on vectors of a stripe's channels), then, on a host with AVX-512 VNNI,
every int8 convolution's accumulator on ``vpdpbusd`` (:func:`conv_acc_to_vnni`). The stripe
loops, the SRAM buffers (shapes, scopes, rings), the weight staging and every predicate stay as
``schedule.check`` verified them; only the innermost loops of a Part's accumulator change.
Why and how, and what it measures: rfcs/0008-host-kernels.md section 3.
"""
from __future__ import annotations

import tvm
from tvm import s_tir, tirx
from tvm.ir.expr import Call, TensorLoad
from tvm.sym import Analyzer

from tvm_ethos.emulator.line_buffer import LineBufferScheduleError, _subst
from tvm_ethos.host.cpu import cpu_schedule, x86_dot
from tvm_ethos.host.cpu.tir_subst import UnreadableExpression

_LANES, _DEPTH = x86_dot.VNNI_LANES, x86_dot.VNNI_DEPTH
_FLIP_SIGN_BITS = -0x7F7F7F80  # 0x80808080 as int32: the top bit of each of four bytes


_REFUSED = (ValueError, LineBufferScheduleError, UnreadableExpression,
            s_tir.schedule.ScheduleError, tvm.error.InternalError)


def schedule_stripes(prim):
    """``prim`` (a checked cascading schedule) with each stripe's accumulators on vectors
    (``cpu_schedule.vectorize_stripes``), then per accumulator the first of these that applies:
    a 1x1 convolution on ``vpdpbusd`` over a tile of output columns, the same one column at a
    time (where the host has AVX-512 VNNI), or the int32 form over a tile of columns
    (:func:`tile_columns`); then its rows in parallel where a stripe holds enough work
    (:func:`parallel_rows`); then every copy block (weight and bias staging) on vectors
    (:func:`vectorize_copy`). A block where a step is refused keeps the form before it."""
    prim = cpu_schedule.vectorize_stripes(prim)
    forms = [_int32_tile]
    if x86_dot.has_vnni(cpu_schedule.host_target()):
        forms = [_vnni_tile, conv_acc_to_vnni, *forms]
    sch = s_tir.Schedule(prim)
    for blk in list(sch.get_child_blocks(sch.get_sblock("root"))):
        if not cpu_schedule.is_reduction(sch, blk):
            continue
        try:
            rows = parallel_rows(sch, blk)
        except _REFUSED:
            rows = None
        sch = _first_that_applies(sch, blk, forms, rows)
    for blk in list(sch.get_child_blocks(sch.get_sblock("root"))):
        trial = sch.copy()
        try:
            vectorize_copy(trial, blk)
        except _REFUSED:
            continue
        sch = trial
    return sch.mod["main"]


#: bytes per vector of a copy loop (one AVX-512 register)
COPY_BYTES = 64


def vectorize_copy(sch, block) -> None:
    """A copy block (a weight slice staged into SRAM, its double buffer, a bias slice: the
    value is a load of another buffer) with its innermost loop on vectors. Raises ValueError
    where the block is not a copy or no vector width divides its innermost loop."""
    realize = cpu_schedule._realize(sch, block)
    store = realize.block.body if realize is not None else None
    if not (isinstance(store, tirx.BufferStore) and isinstance(store.value, TensorLoad)):
        raise ValueError("not a copy")
    loops = sch.get_loops(block)
    if not loops or sch.get(loops[-1]).kind != tirx.ForKind.SERIAL:
        raise ValueError("no serial loop")
    lanes = COPY_BYTES // max(tvm.runtime.DataType(str(store.buffer.dtype)).bits // 8, 1)
    if not cpu_schedule._lanes(_extent(sch, loops[-1]), lanes):
        raise ValueError("no vector width divides the loop")
    cpu_schedule._vectorize_last(sch, loops[-1], lanes)


def _first_that_applies(sch, blk, forms, rows):
    """``sch`` with the first of ``forms`` that ``blk`` takes, with ``rows`` parallel where
    that is accepted too (a copy; ``sch`` itself where nothing applies)."""
    for form in [*forms, None]:
        for par in ([rows, None] if rows is not None else [None]):
            if form is None and par is None:
                return sch
            trial = sch.copy()
            try:
                if form is not None:
                    form(trial, blk)
                if par is not None:
                    trial.parallel(par)
            except _REFUSED:
                continue
            return trial
    return sch


def _vnni_tile(sch, block) -> None:
    at = tile_columns(sch, block)
    loops = sch.get_loops(block)
    between = loops[at + 1:_window_start(sch, block, loops)]  # an unsliced channel loop
    if between:
        sch.reorder(*between, loops[at])
        at += len(between)
    conv_acc_to_vnni(sch, block, tile_at=at)


def _int32_tile(sch, block) -> None:
    """The int32 accumulator over a tile of columns: its reduction loops outside the tile, the
    columns unrolled, the channels a vector, so each weight vector loaded serves the tile."""
    at = tile_columns(sch, block)
    loops = sch.get_loops(block)
    tile = loops[at]
    kinds = cpu_schedule._loop_kinds(sch, block, loops)
    reds = [lp for lp, red in zip(loops, kinds) if red]
    if not reds or not sch.get(loops[-1]).kind == tirx.ForKind.VECTORIZED:
        raise ValueError("not a vectorized accumulator")
    sch.reorder(*reds, tile)
    sch.unroll(tile)


#: fewest products a parallel loop of a stripe must hold: below it TVM's thread-pool launch
#: costs more than the second core gains (a 16-channel slice of a 14x4 depthwise stripe is
#: 8,064 products)
PARALLEL_MIN_PRODUCTS = 1 << 17


def _part_blocks(sch, block) -> set:
    """The names of an accumulator update's blocks: its init, itself and its one consumer."""
    consumers = sch.get_consumers(block)
    if len(consumers) != 1:
        raise ValueError("not one consumer")
    name = sch.get(block).name_hint
    return {name, name.removesuffix("_update") + "_init", sch.get(consumers[0]).name_hint}


def _channel_loop_vars(sch, block) -> set:
    """The loop variables that drive the output channel of an accumulator update."""
    realize = cpu_schedule._realize(sch, block)
    store = realize.block.body if realize is not None else None
    if not isinstance(store, tirx.BufferStore):
        raise ValueError("not an accumulator update")
    used = set(tirx.analysis.undefined_vars(store.indices[-1]))
    out = set()
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if iv.var in used:
            out |= set(tirx.analysis.undefined_vars(val))
    return out


def _pixel_index(sch, block, loops) -> int:
    """The index in ``loops`` (``block``'s) of its pixel loop: the innermost loop over output
    pixels (not channels) that holds the Part's init, update and output blocks, and nothing
    else."""
    part = _part_blocks(sch, block)
    channels = _channel_loop_vars(sch, block)
    for i in range(len(loops) - 1, -1, -1):
        inside = {sch.get(b).name_hint for b in sch.get_child_blocks(loops[i])}
        if inside == part and sch.get(loops[i]).loop_var not in channels:
            return i
        if not inside <= part:
            break
    raise ValueError("no pixel loop holds just this Part's blocks")


def parallel_rows(sch, block):
    """The loop of a stripe to run in parallel for accumulator ``block`` (an update in the form
    ``vectorize_stripes`` leaves): the outermost loop above its pixel loop that holds only
    this Part's init, update and output blocks and more than one iteration, where it holds
    at least :data:`PARALLEL_MIN_PRODUCTS` products. Each iteration computes its own pixels
    (its own accumulator, allocated inside the loop, and its own output elements), so no value
    changes; stripes still run one after the other. The loop is above every loop the forms
    change, so it is found before them. Raises ValueError where there is none."""
    loops = sch.get_loops(block)
    pixel = _pixel_index(sch, block, loops)
    part = _part_blocks(sch, block)
    chosen = None
    for i in range(pixel - 1, -1, -1):
        if {sch.get(b).name_hint for b in sch.get_child_blocks(loops[i])} != part:
            break
        if _extent(sch, loops[i]) > 1:
            chosen = i
    if chosen is None:
        raise ValueError("no loop of this Part alone")
    products = 1
    for lp in loops[chosen:]:
        products *= max(_extent(sch, lp), 1)
    if products < PARALLEL_MIN_PRODUCTS:
        raise ValueError("too little work for a second thread")
    return loops[chosen]


#: output columns of a 1x1 conv's VNNI tile, at most: each weight vector built (4 rows
#: interleaved) serves every column, so wider tiles load and interleave less per product;
#: 8 zmm accumulators of 32 (rfcs/0008 section 3)
TILE_COLUMNS = 8


def _rebuild(stmt, env: dict):
    """``stmt`` (loops and block realizes) with the loop variables of ``env`` replaced; the
    blocks themselves are kept (their bodies read only their own iterators)."""
    if isinstance(stmt, tirx.SeqStmt):
        return tirx.SeqStmt([_rebuild(x, env) for x in stmt.seq])
    if isinstance(stmt, tirx.For):
        return tirx.For(stmt.loop_var, _subst(stmt.min, env), _subst(stmt.extent, env),
                        stmt.kind, _rebuild(stmt.body, env), stmt.thread_binding,
                        stmt.annotations)
    if isinstance(stmt, s_tir.SBlockRealize):
        return s_tir.SBlockRealize([_subst(v, env) for v in stmt.iter_values],
                                   _subst(stmt.predicate, env), stmt.block)
    raise ValueError(f"unexpected {type(stmt).__name__} in a pixel loop")


def tile_columns(sch, block, columns: int = TILE_COLUMNS) -> int:
    """The pixel loop of a stripe's accumulator ``block`` (its loop above the unit loops
    ``compute_at`` left) split into tiles of up to ``columns`` pixels (the widest that divides
    it), and the tile loop fissioned: all the tile's accumulator inits, then its updates, then
    its outputs. Each pixel keeps its own accumulator element and output, so no value changes;
    the ``local`` accumulator then holds a tile (registers). Only where the pixel loop holds
    nothing but this Part's init, update and output, so no SRAM buffer grows. Raises
    ValueError otherwise. Returns the index of the tile loop among ``block``'s loops."""
    loops = sch.get_loops(block)
    at = _pixel_index(sch, block, loops)
    pixel = loops[at]
    inner_loop = sch.get(pixel).body
    if isinstance(inner_loop, tirx.For) and inner_loop.loop_var in _channel_loop_vars(sch, block):
        # vectors of an unsliced channel loop inside the pixel loop: move them outside
        sch.reorder(loops[at + 1], pixel)
        loops = sch.get_loops(block)
        at += 1
        pixel = loops[at]
    ext = _extent(sch, pixel)
    tile = next((t for t in range(min(columns, ext), 1, -1) if ext % t == 0), 0)
    if tile < 2:
        raise ValueError("no column tile divides the pixel loop")
    if tile < ext:
        outer, inner = sch.split(pixel, [None, tile])
    else:
        outer, inner = None, pixel
    loop = sch.get(inner)
    kids = list(loop.body.seq) if isinstance(loop.body, tirx.SeqStmt) else [loop.body]
    if len(kids) < 2:
        raise ValueError("nothing to fission")
    pieces = []
    for i, kid in enumerate(kids):
        var = loop.loop_var if i == len(kids) - 1 else tirx.Var(
            f"{loop.loop_var.name}_{i}", loop.loop_var.ty)
        pieces.append(tirx.For(var, loop.min, loop.extent, loop.kind,
                               _rebuild(kid, {loop.loop_var: var}), loop.thread_binding,
                               loop.annotations))
    if outer is None:  # the whole loop is the tile: put the pieces in its parent
        parent_sref = sch.get_sref(inner).parent
        parent = parent_sref.stmt
        if not isinstance(parent, tirx.For):
            raise ValueError("the pixel loop is not inside a loop")
        siblings = list(parent.body.seq) if isinstance(parent.body, tirx.SeqStmt) else [
            parent.body]
        body = []
        for sib in siblings:
            body.extend(pieces if sib.same_as(loop) else [sib])
        sch.state.replace(parent_sref, tirx.For(
            parent.loop_var, parent.min, parent.extent, parent.kind, tirx.SeqStmt(body),
            parent.thread_binding, parent.annotations), {})
    else:
        parent = sch.get(outer)
        sch.state.replace(sch.get_sref(outer), tirx.For(
            parent.loop_var, parent.min, parent.extent, parent.kind, tirx.SeqStmt(pieces),
            parent.thread_binding, parent.annotations), {})
    tile_vars = [p.loop_var for p in pieces]
    return next(i for i, lp in enumerate(sch.get_loops(block))
                if any(sch.get(lp).loop_var.same_as(v) for v in tile_vars))


def _terms(expr) -> list:
    """Every sub-expression of an accumulator update (through adds, subtractions, products,
    casts and calls such as ``if_then_else``)."""
    out = [expr]
    if isinstance(expr, (tirx.Add, tirx.Sub, tirx.Mul)):
        out += _terms(expr.a) + _terms(expr.b)
    elif isinstance(expr, tirx.Cast):
        out += _terms(expr.value)
    elif isinstance(expr, Call):
        for arg in expr.args:
            out += _terms(arg)
    return out


def _extent(sch, loop) -> int:
    ext = sch.get(loop).extent
    return int(ext) if isinstance(ext, tirx.IntImm) else -1


def _outer_predicate(sch, block, loops) -> tirx.PrimExpr:
    """The predicate of ``block``'s realize with the unit loops among ``loops`` (those
    ``blockize`` is about to fold away) at their only value. ``blockize`` does not keep every
    predicate: a lower bound on a loop outside it (the prologue's ``0 <= step``, a
    ``for step in [-D, n)`` loop) is dropped when the iterator's domain already starts at 0,
    so the caller puts it back on the new block. Raises ValueError where it depends on a loop
    that is not a unit loop (the reduction or the channels)."""
    pred = cpu_schedule._realize(sch, block).predicate
    used = set(tirx.analysis.undefined_vars(pred))
    at = {}
    for lp in loops:
        stmt = sch.get(lp)
        if stmt.loop_var in used:
            if _extent(sch, lp) != 1:
                raise ValueError("a predicate on the reduction or the channels")
            at[stmt.loop_var] = stmt.min
    return _subst(pred, at) if at else pred


def _put_block(sch, step, old, new, predicate) -> None:
    """Replace block ``old`` (``step``) by ``new`` and AND ``predicate`` into its realize.
    The realize belongs to the parent loop, so that loop is rebuilt (the state replaces a
    loop by a loop)."""
    parent_sref = sch.get_sref(step).parent
    parent = parent_sref.stmt if parent_sref is not None else None
    if not isinstance(parent, tirx.For):
        raise ValueError("the accumulator is not inside a loop")
    kids = list(parent.body.seq) if isinstance(parent.body, tirx.SeqStmt) else [parent.body]
    found = False

    def with_predicate(kid):
        nonlocal found
        if isinstance(kid, s_tir.SBlockRealize) and kid.block.same_as(old):
            found = True
            pred = Analyzer().simplify(tirx.And(kid.predicate, predicate))
            return s_tir.SBlockRealize(kid.iter_values, pred, new)
        return kid

    kids = [with_predicate(k) for k in kids]
    if not found:
        raise ValueError("the accumulator's realize is not a child of its loop")
    body = tirx.SeqStmt(kids) if len(kids) > 1 else kids[0]
    sch.state.replace(parent_sref, tirx.For(parent.loop_var, parent.min, parent.extent,
                                            parent.kind, body, parent.thread_binding,
                                            parent.annotations), {old: new})


def _window_start(sch, block, loops) -> int:
    """The index of the first of the loops ``compute_at`` left above an accumulator's channel
    vector: unit loops and reduction loops (kernel rows and columns, input channels)."""
    kinds = cpu_schedule._loop_kinds(sch, block, loops)
    i = len(loops) - 1
    while i > 0 and (kinds[i - 1] or _extent(sch, loops[i - 1]) == 1):
        i -= 1
    return i


def _byte_word(code: int) -> int:
    """The int32 whose four bytes are the int8 ``code``."""
    v = (code & 0xFF) * 0x01010101
    return v - (1 << 32) if v >= 1 << 31 else v


def conv_acc_to_vnni(sch, block, tile_at: int | None = None) -> None:
    """A stripe's conv accumulator (``vectorize_stripes``: per output pixel, a reduction over
    the kernel window and ``K`` input channels outside a vector of 16 output channels, the
    weights a staged HWIO slice) on ``vpdpbusd``, its operands built in registers: the four
    activation bytes of each step broadcast with their top bits flipped (``x + 128``), the
    weight rows ``k .. k+3`` of the 16 channels interleaved into one 64-byte vector (a
    shuffle), and ``sum(w)`` over the whole window accumulated alongside with a broadcast of
    ones, so after the reduction ``acc - (128 + x_zp) * sum(w)`` is TFLite's
    ``sum((x - x_zp) * w)`` (exact in int32). A read in the padding (the update's guard false)
    takes the word of four ``x_zp`` bytes instead, whose products the correction cancels, as
    TFLite's padded ``x - x_zp = 0``; the load itself stays under the guard.

    The NPU's TE and constants stay as they are (the planner, the part matchers and the
    command streams read them), hence the interleave in registers rather than a re-laid-out
    weight. The block keeps its predicate (:func:`_outer_predicate`): without it the prologue
    steps of a lockstep cascade would accumulate into rows outside the compacted accumulator.
    With ``tile_at`` (after :func:`tile_columns`: the index of its tile loop, right above the
    window loops) the accumulator is computed for a tile of output columns: each weight vector
    built serves every column, and ``sum(w)`` is taken once per tile. Raises ValueError (the
    caller keeps its schedule) where the block is not that."""
    loops = sch.get_loops(block)
    if len(loops) < 2:
        raise ValueError("not an accumulator update")
    # the loops compute_at left: unit and window loops, the reduction over K, the channels
    if _extent(sch, loops[-1]) != _LANES:
        raise ValueError("not 16 channels")
    k = _extent(sch, loops[-2])
    if k % _DEPTH:
        raise ValueError("reduction not whole groups of 4")
    tiled = tile_at is not None
    first = _window_start(sch, block, loops) - (1 if tiled else 0)
    if first < 0 or (tiled and first != tile_at):
        raise ValueError("loops between the column tile and the reduction")
    columns = _extent(sch, loops[first]) if tiled else 1
    predicate = _outer_predicate(sch, block, loops[first + (1 if tiled else 0):])
    if tiled and sch.get(loops[first]).loop_var in set(tirx.analysis.undefined_vars(predicate)):
        raise ValueError("a predicate on the column tile")
    step = sch.blockize(loops[first])
    outer = sch.get(step)
    # walk the loops blockize left inside to the update block
    stmt, loop_vars, extents = outer.body, [], []
    while isinstance(stmt, tirx.For):
        if not (isinstance(stmt.min, tirx.IntImm) and int(stmt.min) == 0):
            raise ValueError("a loop not from 0")
        if not isinstance(stmt.extent, tirx.IntImm):
            raise ValueError("a loop of unknown extent")
        loop_vars.append(stmt.loop_var)
        extents.append(int(stmt.extent))
        stmt = stmt.body
    if not isinstance(stmt, s_tir.SBlockRealize) or outer.init is not None:
        raise ValueError("blockize did not leave one update block")
    inner = stmt
    store = inner.block.body
    if not isinstance(store, tirx.BufferStore):
        raise ValueError("not an accumulator update")
    # the window loops (kernel rows, columns) stay loops, on their own variables
    window = [(v, e) for i, (v, e) in enumerate(zip(loop_vars, extents))
              if e > 1 and not (tiled and i == 0) and i < len(loop_vars) - 2]
    terms = _terms(store.value)
    loads = [t for t in terms if isinstance(t, TensorLoad)]
    # ``(x - zp) * w`` with the input read guarded: after simplification ``x + (-zp)``
    offsets = [t for t in terms if isinstance(t, (tirx.Add, tirx.Sub))
               and isinstance(t.a, tirx.Cast) and isinstance(t.a.value, TensorLoad)
               and isinstance(t.b, tirx.IntImm)]
    if len(loads) != 3 or len(offsets) > 1:
        raise ValueError("not (x - zp) * w")
    products = [t for t in terms if isinstance(t, tirx.Mul) and isinstance(t.b, tirx.Cast)
                and isinstance(t.b.value, TensorLoad)]
    if len(products) != 1:
        raise ValueError("not (x - zp) * w")
    weights = products[0].b.value
    acts = next(ld for ld in loads
                if not ld.source.same_as(store.buffer) and not ld.source.same_as(weights.source))
    x_zp = 0
    if offsets:
        if not offsets[0].a.value.same_as(acts):
            raise ValueError("not (x - zp) * w")
        x_zp = int(offsets[0].b.value) * (1 if isinstance(offsets[0], tirx.Sub) else -1)
    if str(acts.source.dtype) != "int8" or str(weights.source.dtype) != "int8":
        raise ValueError("not int8 x int8")
    wshape = [int(d) for d in weights.source.shape]
    if len(wshape) != 4 or wshape[2] != k:
        raise ValueError("not an HWIO convolution weight over the reduction")
    k4 = tirx.Var("k4", "int32")
    zero = tirx.const(0, "int32")
    ana = Analyzer()
    for iv in outer.iter_vars:
        ana.bind(iv.var, iv.dom)
    ana.bind(k4, tvm.ir.Range(zero, tirx.const(k // _DEPTH, "int32")))
    for v, e in window:
        ana.bind(v, tvm.ir.Range(zero, tirx.const(e, "int32")))
    fixed = [v for v in loop_vars if not any(v.same_as(wv) for wv, _ in window)]

    def at_point(load_or_store, j: int, c: int, col: int = 0) -> list:
        """The indices of a load or store at reduction element ``4 * k4 + j``, channel ``c``,
        column ``col`` of the tile."""
        at = {v: zero for v in fixed}
        at[loop_vars[-2]] = k4 * _DEPTH + j  # the reduction loop
        at[loop_vars[-1]] = tirx.const(c, "int32")  # the channel loop
        if tiled:
            at[loop_vars[0]] = tirx.const(col, "int32")
        env = {iv.var: _subst(val, at)
               for iv, val in zip(inner.block.iter_vars, inner.iter_values)}
        return [ana.simplify(_subst(e, env)) for e in load_or_store.indices]

    def steps(load_or_store, j: int, c: int, col: int = 0) -> list:
        base = at_point(load_or_store, 0, 0)
        return [int(ana.simplify(b - a)) if isinstance(ana.simplify(b - a), tirx.IntImm)
                else None for a, b in zip(base, at_point(load_or_store, j, c, col))]

    def indices(load_or_store, j: int, lanes: int, col: int = 0):
        base = at_point(load_or_store, j, 0, col)
        return base[:-1] + [tirx.Ramp(base[-1], 1, lanes)]

    # the vectors built below must be what the scalar loops read: channels contiguous in the
    # accumulator and the weights, reduction elements contiguous in the input, no other use
    def unit(n: int) -> list:
        return [0] * (n - 1) + [1]

    if (steps(store, 0, 1) != unit(len(store.indices))
            or steps(weights, 0, 1) != unit(len(weights.indices))
            or steps(acts, 1, 0) != unit(len(acts.indices))
            or steps(acts, 0, 1) != [0] * len(acts.indices)
            or steps(store, 1, 0) != [0] * len(store.indices)
            or any(steps(weights, 0, 0, col) != [0] * len(weights.indices)
                   for col in range(1, columns))):
        raise ValueError("operands not contiguous along channels / the reduction")
    if not ana.can_prove(inner.predicate):
        raise ValueError("a predicate inside the blockized loops")
    # the input read's guard (padding): per column and window position, the same for the
    # four reduction elements of a step
    calls = [t for t in terms if isinstance(t, Call) and len(t.args) == 3]
    if len(calls) > 1 or any(not str(c.op.name).endswith("if_then_else") for c in calls):
        raise ValueError("not one guarded read")
    if calls and not (isinstance(calls[0].args[2], tirx.IntImm) and int(calls[0].args[2]) == 0):
        raise ValueError("a guard that does not give 0")
    guards = [None] * columns
    for col in range(columns):
        for guard in [c.args[0] for c in calls]:
            at = {v: zero for v in fixed}
            at[loop_vars[-2]] = k4 * _DEPTH
            if tiled:
                at[loop_vars[0]] = tirx.const(col, "int32")
            env = {iv.var: _subst(val, at)
                   for iv, val in zip(inner.block.iter_vars, inner.iter_values)}
            cond = ana.simplify(_subst(guard, env))
            if any(v.same_as(k4) for v in tirx.analysis.undefined_vars(cond)):
                raise ValueError("a guard inside a step of four")
            if not ana.can_prove(cond):
                guards[col] = cond
    acc_index = [indices(store, 0, _LANES, col) for col in range(columns)]
    rows = [tirx.BufferLoad(weights.source, indices(weights, j, _LANES)) for j in range(_DEPTH)]
    order = [tirx.const(j * _LANES + c, "int32") for c in range(_LANES) for j in range(_DEPTH)]
    w = tirx.Var("w", "int8x64")
    ones = tirx.reinterpret("int8x64", tirx.Broadcast(tirx.const(0x01010101, "int32"), _LANES))
    sums = tirx.decl_buffer((_LANES,), "int32", name="weight_sums", scope="local")
    sums_index = [tirx.Ramp(zero, 1, _LANES)]

    def dpbusd(src, u8, s8):
        return tirx.call_llvm_pure_intrin("int32x16", "llvm.x86.avx512.vpdpbusd.512", src, u8, s8)

    def word(col: int):
        """Column ``col``'s four input bytes of the step, top bits flipped, in every lane."""
        a = tirx.reinterpret("int32", tirx.BufferLoad(acts.source, indices(acts, 0, _DEPTH, col)))
        if guards[col] is not None:  # in the padding: four x_zp bytes, never loaded
            a = tirx.if_then_else(guards[col], a, tirx.const(_byte_word(x_zp), "int32"))
        a = tirx.bitwise_xor(a, tirx.const(_FLIP_SIGN_BITS, "int32"))
        return tirx.reinterpret("int8x64", tirx.Broadcast(a, _LANES))

    step_body = [tirx.BufferStore(store.buffer, dpbusd(
        tirx.BufferLoad(store.buffer, acc_index[col]), word(col), w), acc_index[col])
        for col in range(columns)]
    step_body.append(tirx.BufferStore(sums, dpbusd(tirx.BufferLoad(sums, sums_index), ones, w),
                                      sums_index))
    reduction = tirx.For(k4, zero, tirx.const(k // _DEPTH, "int32"), tirx.ForKind.SERIAL,
                         tirx.SeqStmt([tirx.Bind(w, tirx.Shuffle(rows, order)), *step_body]))
    for v, e in reversed(window):
        reduction = tirx.For(v, zero, tirx.const(e, "int32"), tirx.ForKind.SERIAL, reduction)
    body = tirx.SeqStmt([
        tirx.BufferStore(sums, tirx.Broadcast(zero, _LANES), sums_index),
        reduction,
        *[tirx.BufferStore(store.buffer, tirx.BufferLoad(store.buffer, acc_index[col])
                           - tirx.BufferLoad(sums, sums_index)
                           * tirx.Broadcast(tirx.const(128 + x_zp, "int32"), _LANES),
                           acc_index[col]) for col in range(columns)],
    ])
    new = s_tir.SBlock(outer.iter_vars, outer.reads, outer.writes, outer.name_hint, body, None,
                       list(outer.alloc_buffers) + [sums], outer.match_buffers,
                       outer.annotations)
    _put_block(sch, step, outer, new, predicate)
