"""CPU (llvm) schedules for the exact integer kernels of ``te_ops``, applied with
``s_tir.Schedule``.

The kernels are TE graphs of NHWC stages: int32 accumulators (``te.sum`` / ``te.max`` stages)
followed by injective requantization stages. Unscheduled, each stage is a scalar loop nest over
the whole tensor, and every accumulator a full-size int32 tensor written once and read back.
The rule here, per stage, by its shape rather than by operator name:

* an injective stage runs its leading axes fused into one parallel loop (serial: left as
  they are, so a padding stage's bounds test reads its row and column without dividing a
  fused index) and its last axis (channels, contiguous in NHWC) in vector lanes;
* an accumulator read only by the injective stage after it, at the same index (conv2d,
  depthwise, pooling), is computed inside that stage's loops (rows or, for deep layers,
  channel blocks in parallel) one register tile at a time
  (``COLUMN_TILE`` output columns x ``VECTOR_LANES`` channels): its reduction loops outside the
  tile, the columns unrolled, the channels vectorized, so every multiply-add is a vector over
  output channels (HWIO weights are contiguous along them) with the input code broadcast, and
  each weight vector loaded serves a whole tile;
* any other accumulator (fully connected, mean, softmax's row max and integer sum) runs its
  spatial axes in parallel and its reduction loops innermost in their original order.

No expression changes: the same int32 products are summed (integer addition is associative,
so the order across channels does not matter) and the same requantization applied, so results
stay bit-exact with TFLite's reference kernels (tests/tvm_ethos/test_cpu_schedule.py and every
operator and model test). :func:`vectorize_stripes` does the same for the NPU emulator inside
each stripe.

On CPUs with AVX-512 VNNI, ``te_ops`` lays the conv (1x1, KxK, depthwise) and fully
connected accumulators out for ``vpdpbusd`` (``x86_dot``); their tiles here are wider and each
16 x 4 reduction step becomes one instruction (:func:`_tensorize_dot`,
:func:`_schedule_standalone_dot`); on CPUs with AVX2 and no VNNI, the full conv and fully
connected accumulators take ``x86_avx2``'s ``vpmaddwd`` form the same way (8 x 2 steps, its
tile by output width). A stage with less work than ``PARALLEL_MIN_WORK`` gets no
parallel loop. Which kernels, tiles and CPUs, and why: rfcs/0008-host-kernels.md.
"""
from __future__ import annotations

import math

import tvm
from tvm import s_tir, tirx

from tvm_ethos.host.cpu import host_cpu, x86_avx2, x86_dot, x86_requant
from tvm_ethos.host.cpu.tir_subst import UnreadableExpression, subst

#: int32 lanes per vector loop: two AVX2 registers, so LLVM can interleave two multiply-adds
VECTOR_LANES = 16
#: output columns per accumulator tile (2 x 16 int32: 4 AVX2 registers; each weight vector
#: loaded serves both columns). Wider tiles ran slower on MobileNetV1-224 (rfcs/0008)
COLUMN_TILE = 2
#: the int32 tile on CPUs with AVX-512 (32 zmm registers): 4 columns x 32 channels, 8
#: registers (rfcs/0008)
AVX512_COLUMN_TILE = 4
AVX512_VECTOR_LANES = 32
#: a stage whose loops (times its attached accumulators' reductions) do fewer iterations
#: than this runs on the calling thread: starting the thread pool and joining it costs more
#: than the work (DS-CNN's and ResNet-8's layers; rfcs/0008 section 5)
PARALLEL_MIN_WORK = 1 << 22
_REDUCE = 2  # IterVar.CommReduce


def host_target() -> dict:
    """The llvm target of this machine's CPU. Plain ``"llvm"`` means generic x86-64 (SSE2:
    no 32-bit vector multiply, no AVX), which leaves the vector loops here scalar in effect; the
    compiled host code is for the CPU that compiles it, as the NPU emulator is, less any
    extension this machine's kernel hides, or for the ``-mcpu`` of the llvm target being
    compiled (``host_cpu``)."""
    return host_cpu.current_target()


def host_tile(target) -> tuple[int, int]:
    """``(lanes, columns)`` of the int32 kernels for the llvm ``target``: AVX-512's 32
    registers hold a wider tile than AVX2's 16."""
    from tvm.target import codegen

    tgt = tvm.target.Target(target)
    if tgt.kind.name == "llvm" and codegen.target_has_features("avx512f", tgt):
        return AVX512_VECTOR_LANES, AVX512_COLUMN_TILE
    return VECTOR_LANES, COLUMN_TILE


def _realize(sch, block):
    """The SBlockRealize of ``block`` (the body of its innermost loop)."""
    loops = sch.get_loops(block)
    stmt = sch.get(loops[-1]).body if loops else None
    while stmt is not None and not isinstance(stmt, s_tir.SBlockRealize):
        stmt = getattr(stmt, "body", None) or getattr(stmt, "then_case", None)
    return stmt


def _vars_of(expr) -> set:
    return set(tirx.analysis.undefined_vars(expr))


def _loop_kinds(sch, block, loops) -> list[bool]:
    """For each loop, whether it drives a reduction iterator of ``block``."""
    realize = _realize(sch, block)
    red_vars = set()
    for iv, val in zip(realize.block.iter_vars, realize.iter_values):
        if int(iv.iter_type) == _REDUCE:
            red_vars |= _vars_of(val)
    return [sch.get(lp).loop_var in red_vars for lp in loops]


def is_reduction(sch, block) -> bool:
    return any(int(iv.iter_type) == _REDUCE for iv in sch.get(block).iter_vars)


def _extent(sch, loop) -> int:
    ext = sch.get(loop).extent
    return int(ext) if isinstance(ext, tirx.IntImm) else -1


def _lanes(extent: int, lanes: int) -> int:
    """The widest vector (a power of two, at most ``lanes``, at least 4) dividing ``extent``."""
    v = lanes
    while v >= 4:
        if extent % v == 0:
            return v
        v //= 2
    return 0


def _vectorize_last(sch, loop, lanes: int) -> None:
    """Vectorize ``loop``, split into vectors when longer (left scalar when none divides it)."""
    ext = _extent(sch, loop)
    v = _lanes(ext, lanes)
    if v and ext == v:
        sch.vectorize(loop)
    elif v:
        sch.vectorize(sch.split(loop, [None, v])[1])


def _parallel_outer(sch, loops, parallel: bool = True):
    """Fuse the leading loops into one and (``parallel``) run it in parallel; returns it (None
    when none)."""
    if not loops:
        return None
    outer = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    if parallel:
        sch.parallel(outer)
    return outer


def _work(sch, block, producers=()) -> int:
    """Iterations of ``block``'s loops times the reduction extents of ``producers`` (the
    accumulators computed inside it): what decides whether a parallel loop pays."""
    work = 1
    for lp in sch.get_loops(block):
        work *= max(_extent(sch, lp), 1)
    for prod in producers:
        for lp, red in zip(sch.get_loops(prod), _loop_kinds(sch, prod, sch.get_loops(prod))):
            if red:
                work *= max(_extent(sch, lp), 1)
    return work


def sole_same_shape_consumer(sch, producer, consumer) -> bool:
    """Whether ``consumer`` is the only reader of ``producer`` and writes its shape."""
    if len(sch.get_consumers(producer)) != 1:
        return False
    pw = sch.get(producer).writes
    cw = sch.get(consumer).writes
    if len(pw) != 1 or len(cw) != 1:
        return False
    return [int(x) for x in pw[0].source.shape] == [int(x) for x in cw[0].source.shape]


def _schedule_inner_reduction(sch, block, at, lanes: int) -> None:
    """An accumulator computed per tile of output columns x vector of channels: reductions
    outside, the columns unrolled and the channels vectorized inside, kept in registers."""
    loops = sch.get_loops(block)
    kinds = _loop_kinds(sch, block, loops)
    first = next((i for i, k in enumerate(kinds) if k), None)
    if first is None:
        return
    reds = [lp for lp, k in zip(loops, kinds) if k]
    start = next(i for i, lp in enumerate(loops) if sch.get(lp).same_as(sch.get(at))) + 1
    # the loops compute_at made: at most (columns, channels); anything longer is left scalar
    inner = [lp for lp in loops[start:first] if _extent(sch, lp) > 1]
    if not inner or len(inner) > 2:
        return
    intrin = _dot_intrinsic(sch, block)
    if intrin is not None and _tensorize_dot(sch, block, reds, inner, intrin):
        return
    sch.reorder(*reds, *inner)
    channel = inner[-1]
    v = _lanes(_extent(sch, channel), lanes)
    if v == _extent(sch, channel):
        # vectorized while the block still has its init (a reduction block); the init is then
        # split off above the reduction loops so the vector loop holds only the update
        sch.vectorize(channel)
    if len(inner) == 2:
        sch.unroll(inner[0])
    sch.set_scope(block, 0, "local")
    sch.decompose_reduction(block, reds[0])


def _dot_intrinsic(sch, block) -> str | None:
    """The ``x86_dot`` intrinsic a conv accumulator was laid out for (te_ops), or None."""
    ann = sch.get(block).annotations
    return str(ann[x86_dot.DOT_ANNOTATION]) if x86_dot.DOT_ANNOTATION in ann else None


def _dot_form(intrin: str):
    """``(lanes, depth, replace)`` of a dot-product form: the int32 lanes and reduction
    elements of one instruction step, and the function that makes a blockized step that
    instruction (``x86_dot``'s VNNI forms, ``x86_avx2``'s multiply-add)."""
    if intrin in x86_avx2.FORMS:
        return x86_avx2.MADD_LANES, x86_avx2.MADD_DEPTH, x86_avx2.replace_with_madd
    return x86_dot.VNNI_LANES, x86_dot.VNNI_DEPTH, x86_dot.replace_with_vnni


def _dot_steps(sch, block) -> list[int]:
    """The nested extents (steps of 4) a window conv's reduction is split into (``te_ops``
    annotates them), extents of 1 left out; empty where there are none. Split so, the
    source address of each step is affine in the loops instead of a division per step."""
    ann = sch.get(block).annotations
    if x86_dot.DOT_STEPS not in ann:
        return []
    steps = [int(s) for s in ann[x86_dot.DOT_STEPS]]
    sch.unannotate(block, x86_dot.DOT_STEPS)
    return [s for s in steps if s > 1]


def _tensorize_dot(sch, block, reds, inner, intrin: str) -> bool:
    """An accumulator tile on a dot-product instruction (``vpdpbusd``: 16 channels x 4;
    ``vpmaddwd``: 8 x 2): the reduction in steps of its depth outside the tile, the columns
    unrolled, each step one instruction. False (nothing changed) where the tile is not whole
    vectors of its lanes."""
    lanes, depth, replace = _dot_form(intrin)
    channels = _extent(sch, inner[-1])
    if len(reds) != 1 or channels % lanes:
        return False
    if _extent(sch, reds[0]) % depth:
        return False
    steps = _dot_steps(sch, block)
    sch.unannotate(block, x86_dot.DOT_ANNOTATION)
    r_o, r_i = sch.split(reds[0], [None, depth])
    outer = [r_o]
    if steps and _extent(sch, r_o) == math.prod(steps):
        outer = list(sch.split(r_o, steps))
    tile = list(inner)
    if channels > lanes:
        tile[-1:] = sch.split(inner[-1], [None, lanes])
    sch.reorder(*outer, *tile, r_i)
    sch.set_scope(block, 0, "local")
    init = sch.decompose_reduction(block, outer[0])
    sch.vectorize(sch.get_loops(init)[-1])
    step = sch.blockize(tile[-1])
    replace(sch, step, intrin)
    for loop in tile[:-1]:
        sch.unroll(loop)
    return True


def _tile_pixels(sch, loops, lanes: int, columns: int = COLUMN_TILE, parallel: bool = True):
    """NHWC output loops ``(n, h, w, c)``: columns in tiles of ``columns`` (a width it does
    not divide gets a last tile whose extra column is predicated off, rather than single-column
    tiles throughout, which reuse each weight vector only once; a wider tile, VNNI's, takes
    the widest of at least 4 that divides the width instead, where one does), channels in
    vectors of ``lanes``. Rows run
    in parallel, or, where an image has fewer pixels than output channels (the deep layers,
    whose weights outgrow the caches), blocks of channels run in parallel outside the rows, so
    each block's weights stay cached while every pixel uses them. Returns the loop an
    accumulator is computed at (per column tile and channel vector), or None when the channels
    do not split into vectors."""
    n, h, w, c = loops
    v = _lanes(_extent(sch, c), lanes)
    if not v:
        return None
    tile = min(columns, _extent(sch, w))
    if columns > COLUMN_TILE:  # a wide tile: the widest (at least 4) that divides the width
        tile = next((t for t in range(tile, 3, -1) if _extent(sch, w) % t == 0), tile)
    w_o, w_i = sch.split(w, [None, tile])
    c_o, c_i = sch.split(c, [None, v])
    if _extent(sch, h) * (_extent(sch, w_o) * tile) < _extent(sch, c_o) * v:
        sch.reorder(c_o, n, h, w_o, w_i, c_i)
        if parallel:
            sch.parallel(c_o)
        at = w_o
    else:
        outer = _parallel_outer(sch, [n, h], parallel)
        sch.reorder(outer, w_o, c_o, w_i, c_i)
        at = c_o
    sch.vectorize(c_i)
    return at


def _schedule_standalone_dot(sch, block, spatial, reds, intrin: str) -> bool:
    """A VNNI accumulator not computed inside its consumer (fully connected; a conv whose
    output channels were padded to whole vectors): its pixels or rows and vectors of outputs
    (16 for vpdpbusd, 8 for vpmaddwd) in parallel, the reduction in steps of the form's depth,
    each step one instruction. False (nothing changed) where the loops are not
    ``(spatial..., outputs, reduction)``."""
    lanes, depth, replace = _dot_form(intrin)
    if len(reds) != 1 or _extent(sch, spatial[-1]) % lanes or _extent(sch, reds[0]) % depth:
        return False
    steps = _dot_steps(sch, block)
    sch.unannotate(block, x86_dot.DOT_ANNOTATION)
    o_o, o_i = sch.split(spatial[-1], [None, lanes])
    r_o, r_i = sch.split(reds[0], [None, depth])
    outer = [r_o]
    if steps and _extent(sch, r_o) == math.prod(steps):
        outer = list(sch.split(r_o, steps))
    sch.reorder(o_o, *outer, o_i, r_i)
    _parallel_outer(sch, [*spatial[:-1], o_o], _work(sch, block) >= PARALLEL_MIN_WORK)
    init = sch.decompose_reduction(block, outer[0])
    sch.vectorize(sch.get_loops(init)[-1])
    replace(sch, sch.blockize(o_i), intrin)
    return True


def _schedule_standalone_reduction(sch, block) -> None:
    loops = sch.get_loops(block)
    kinds = _loop_kinds(sch, block, loops)
    spatial = [lp for lp, k in zip(loops, kinds) if not k]
    reds = [lp for lp, k in zip(loops, kinds) if k]
    intrin = _dot_intrinsic(sch, block)
    if intrin is not None and loops == spatial + reds:
        if _schedule_standalone_dot(sch, block, spatial, reds, intrin):
            return
    if spatial and spatial == loops[: len(spatial)]:
        _parallel_outer(sch, spatial, _work(sch, block) >= PARALLEL_MIN_WORK)


def schedule_for_cpu(prim, lanes: int = VECTOR_LANES, columns: int = COLUMN_TILE):
    """``prim`` (an unscheduled exact integer kernel) with the CPU schedule of the module doc:
    vectors of ``lanes``, accumulator tiles of ``columns`` x ``lanes`` (:func:`host_tile`)."""
    sch = s_tir.Schedule(prim)
    blocks = list(sch.get_child_blocks(sch.get_sblock("root")))
    names = [sch.get(blk).name_hint for blk in blocks]
    attached = set()  # accumulators computed inside their consumers (some replaced: x86_dot)
    requants = [name for name, blk in zip(names, blocks)
                if x86_requant.REQUANT_ANNOTATION in sch.get(blk).annotations]
    for name, blk in reversed(list(zip(names, blocks))):
        if name in attached or is_reduction(sch, blk):
            continue
        loops = sch.get_loops(blk)
        if not loops:
            continue
        prods = [p for p in sch.get_producers(blk)
                 if is_reduction(sch, p) and sole_same_shape_consumer(sch, p, blk)]
        tile = (lanes, columns)
        forms = {_dot_intrinsic(sch, p) for p in prods} - {None}
        if forms & set(x86_avx2.FORMS):
            tile = x86_avx2.madd_tile(_extent(sch, loops[-2]) if len(loops) == 4 else 0)
        elif forms:
            tile = (x86_dot.VNNI_TILE_CHANNELS, x86_dot.VNNI_TILE_COLUMNS)
        parallel = _work(sch, blk, prods) >= PARALLEL_MIN_WORK
        at = _tile_pixels(sch, loops, *tile, parallel) if prods and len(loops) == 4 else None
        if at is None:
            if parallel or prods:
                at = _parallel_outer(sch, loops[:-1], parallel)
            _vectorize_last(sch, loops[-1], lanes)
        if at is None:
            continue
        for prod in prods:
            attached.add(sch.get(prod).name_hint)
            sch.compute_at(prod, at, preserve_unit_loops=True)
            _schedule_inner_reduction(sch, prod, at, lanes)
    for name, blk in zip(names, blocks):
        if name not in attached and is_reduction(sch, blk):
            _schedule_standalone_reduction(sch, blk)
    for name in requants:
        _vector_requant(sch, sch.get_sblock(name))
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)


def _vector_requant(sch, block) -> None:
    """An output stage in ``mbqm_one_shift``'s form (te_ops) with its vector loop over the
    channels in steps of 16, each step :func:`x86_requant.requant_vector` (``vpmuldq`` on even
    and odd lanes, no int64 widening). Left as it is where the last loop is not whole vectors
    of 16."""
    value = str(sch.get(block).annotations[x86_requant.REQUANT_ANNOTATION])
    sch.unannotate(block, x86_requant.REQUANT_ANNOTATION)
    loop = sch.get_loops(block)[-1]
    ext = _extent(sch, loop)
    if ext <= 0 or ext % x86_requant.LANES or not x86_requant.applies(sch, block, value):
        return
    if ext > x86_requant.LANES:
        loop = sch.split(loop, [None, x86_requant.LANES])[1]
    x86_requant.replace_with_vector_requant(sch, sch.blockize(loop), value)


def _split_channel_loop(sch, parent_loop, loop) -> bool:
    """Loop fission of ``loop`` (a stripe's channel loop holding a Part's stages, then its
    output block) into two loops over the same channels: the stages first, then the output.
    Each stage element is in its own place of its ``local`` buffer, so computing all channels'
    stages before any output reads them changes no value. False where the body is not that."""
    stmt = sch.get(loop)
    body = stmt.body
    if not isinstance(body, tirx.SeqStmt) or len(body.seq) < 2:
        return False
    *stages, out = list(body.seq)
    if not isinstance(out, s_tir.SBlockRealize) or not all(isinstance(s, tirx.For) for s in stages):
        return False
    var = tirx.Var(f"{stmt.loop_var.name}_stages", stmt.loop_var.ty)
    env = {stmt.loop_var: var}

    def rebuild(s):
        if isinstance(s, tirx.SeqStmt):
            return tirx.SeqStmt([rebuild(x) for x in s.seq])
        if isinstance(s, tirx.For):
            return tirx.For(s.loop_var, subst(s.min, env), subst(s.extent, env), s.kind,
                            rebuild(s.body), s.thread_binding, s.annotations)
        if isinstance(s, s_tir.SBlockRealize):
            return s_tir.SBlockRealize([subst(v, env) for v in s.iter_values],
                                       subst(s.predicate, env), s.block)
        raise UnreadableExpression(f"unexpected {type(s).__name__} in a stage loop")

    try:
        first = tirx.For(
            var,
            stmt.min,
            stmt.extent,
            stmt.kind,
            tirx.SeqStmt([rebuild(s) for s in stages]) if len(stages) > 1 else rebuild(stages[0]),
            stmt.thread_binding,
            stmt.annotations,
        )
    except UnreadableExpression:  # an expression subst does not read: leave the loop whole
        return False
    second = tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, out,
                      stmt.thread_binding, stmt.annotations)
    # the state replaces loops by loops: rebuild the parent loop with the two in place of one
    parent = sch.get(parent_loop)
    kids = list(parent.body.seq) if isinstance(parent.body, tirx.SeqStmt) else [parent.body]
    if not any(k.same_as(stmt) for k in kids):
        return False
    new_kids = []
    for k in kids:
        new_kids.extend([first, second] if k.same_as(stmt) else [k])
    new_parent = tirx.For(parent.loop_var, parent.min, parent.extent, parent.kind,
                          tirx.SeqStmt(new_kids), parent.thread_binding, parent.annotations)
    sch.state.replace(sch.get_sref(parent_loop), new_parent, {})
    return True


def vectorize_stripes(prim, lanes: int = VECTOR_LANES):
    """The NPU emulator's scheduled TIR (``schedule.apply_proposal``) with its accumulators and
    output channel loops run on vectors.

    The cascading schedule computes a Part's stages (int32 accumulators) one element at a time
    inside the innermost loop of its output, a stripe's channels. That loop is split in two
    (:func:`_split_channel_loop`): all channels' stages, then all channels' outputs. The stage
    loop then runs its reduction loops outside the channels, which are vectorized
    (:func:`_schedule_inner_reduction`), and the output loop is vectorized too. Stripe loops,
    SRAM buffers and what every stripe computes stay as planned and checked (the ``local``
    accumulator holds one pixel's channels of the stripe instead of one element: a register
    file, not memory the planner places; rfcs/0008-host-kernels.md). A block where a step
    refuses is left as it was."""
    sch = s_tir.Schedule(prim)
    for blk in list(sch.get_child_blocks(sch.get_sblock("root"))):
        if is_reduction(sch, blk):
            continue
        loops = sch.get_loops(blk)
        v = _lanes(_extent(sch, loops[-1]), lanes) if loops else 0
        accs = [p for p in sch.get_producers(blk)
                if is_reduction(sch, p) and len(sch.get_consumers(p)) == 1]
        if len(loops) < 2 or not v or not accs:
            continue
        trial = sch.copy()
        try:
            parent, channel = loops[-2], loops[-1]
            if v < _extent(trial, channel):  # whole vectors of channels, one after the other
                parent, channel = trial.split(channel, [None, v])
            if not _split_channel_loop(trial, parent, channel):
                continue
            for acc in accs:
                _schedule_inner_reduction(trial, acc, parent, lanes)
            trial.vectorize(trial.get_loops(blk)[-1])
        except (s_tir.schedule.ScheduleError, tvm.error.InternalError):
            continue
        sch = trial
    return sch.mod["main"]
