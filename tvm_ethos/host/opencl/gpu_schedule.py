"""GPU (OpenCL) schedules for the exact integer kernels of ``te_ops``, applied with
``s_tir.Schedule``.

Why hand-written rather than dlight: dlight's rules inline every injective stage into its
consumer, and the requantization stages read their input several times (rounding nudge,
saturation test), so the inlined expression grows exponentially along a chain
(``network_build.schedule_stages_for_gpu`` says more). The stages stay separate kernels here, and
the one structure that carries nearly all the work, an accumulator read only by the requantization
after it at the same index (conv2d, depthwise, pooling), gets a register tile per thread:

* the output's NHWC loops become ``work-groups x threads x (columns x channels)``: each thread
  owns ``columns`` output columns x ``lanes`` output channels, and consecutive threads own
  consecutive channel groups, so a work-group's weight and output accesses are contiguous along
  channels (coalesced on a GPU; PoCL's work-group vectorizer makes the work-items vector lanes);
* the accumulator is computed at the thread, in ``local`` scope (registers), its tile loops
  unrolled: its reduction loops run outside the tile, so each weight byte (HWIO: contiguous
  along output channels) is loaded once and serves every column of the tile, and each input
  byte serves every lane (not OpenCL vector loads: rfcs/0008 section 4 says why);
* the requantization of the tile runs in the same thread straight from the registers.

Every other stage (injective ops, fully connected and mean accumulators, softmax's row max and
integer sum) keeps one thread per output element in work-groups of ``threads``: reductions stay
serial per thread.

No expression changes: the same int32 products are summed (integer addition is associative) and
the same requantization applied per element, so results are bit-exact with the unscheduled
kernels and TFLite (tests/tvm_ethos/test_gpu_schedule.py, the OpenCL operator and model tests).
Tile sizes and why: rfcs/0008-host-kernels.md.
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import s_tir

from tvm_ethos.host.cpu.cpu_schedule import (
    _extent,
    _loop_kinds,
    is_reduction,
    sole_same_shape_consumer,
)


@dataclass(frozen=True)
class GpuTiling:
    """Work-group and register-tile sizes of :func:`schedule_for_gpu`.

    ``threads``: work-items per work-group (the largest of ``threads``, its halves down to 32
    that divides the tiled output, so no work-item is idle); ``columns``: output columns per
    work-item (fewer where it does not divide the width); ``lanes``: output channels per
    work-item, one OpenCL vector (scalar where it does not divide the channels).
    """

    threads: int = 64
    columns: int = 2
    lanes: int = 4

    def __post_init__(self) -> None:
        for name in ("threads", "columns", "lanes"):
            v = getattr(self, name)
            if not isinstance(v, int) or v < 1 or v & (v - 1):
                raise ValueError(f"GpuTiling.{name} must be a power of two >= 1, got {v!r}")


DEFAULT_TILING = GpuTiling()


def parse_tiling(value) -> GpuTiling:
    """A :class:`GpuTiling` from the opencl target's ``tiling`` option: ``"THREADSxCOLUMNSxLANES"``
    (``"64x2x4"``), a GpuTiling, or None/"" for the default."""
    if isinstance(value, GpuTiling):
        return value
    if value is None or value == "":
        return DEFAULT_TILING
    try:
        threads, columns, lanes = (int(v) for v in str(value).lower().split("x"))
        return GpuTiling(threads, columns, lanes)
    except ValueError:
        raise ValueError(
            f"tiling {value!r} is not THREADSxCOLUMNSxLANES of powers of two (e.g. 64x2x4)"
        ) from None


def _divisor(extent: int, want: int) -> int:
    """The largest power of two at most ``want`` that divides ``extent``."""
    v = want
    while v > 1 and extent % v:
        v //= 2
    return v


def _bind(sch, loops, threads: int) -> None:
    """Fuse ``loops`` and split them over work-groups of ``threads`` work-items (fewer, down
    to 32, where that divides the extent exactly)."""
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    ext = _extent(sch, fused)
    t = threads
    if ext > 0 and ext % t:
        d = _divisor(ext, threads)
        t = d if d >= 32 else threads
    bx, tx = sch.split(fused, [None, t])
    sch.bind(bx, "blockIdx.x")
    sch.bind(tx, "threadIdx.x")
    return tx


def _bind_flat(sch, block, threads: int) -> None:
    """One work-item per element of the block's leading spatial loops, reductions serial."""
    loops = sch.get_loops(block)
    kinds = _loop_kinds(sch, block, loops)
    spatial = []
    for loop, red in zip(loops, kinds):
        if red:
            break
        spatial.append(loop)
    if not spatial:
        spatial = [sch.add_unit_loop(block)]
        if loops:
            sch.reorder(spatial[0], *loops)
    _bind(sch, spatial, threads)


def _tile_output(sch, block, tiling: GpuTiling):
    """NHWC output loops as work-groups x threads x (columns x lanes); returns the thread loop
    and the two tile loops."""
    n, h, w, c = sch.get_loops(block)
    cols = _divisor(_extent(sch, w), tiling.columns)
    lanes = _divisor(_extent(sch, c), tiling.lanes)
    w_o, w_i = sch.split(w, [None, cols])
    c_o, c_i = sch.split(c, [None, lanes])
    sch.reorder(n, h, w_o, c_o, w_i, c_i)
    tx = _bind(sch, [n, h, w_o, c_o], tiling.threads)
    return tx, w_i, c_i


def _register_tile(sch, acc, at) -> None:
    """The accumulator computed at thread loop ``at``: reductions outside the tile, the column
    and channel loops unrolled, the whole tile in registers."""
    sch.compute_at(acc, at, preserve_unit_loops=True)
    loops = sch.get_loops(acc)
    kinds = _loop_kinds(sch, acc, loops)
    start = next(i for i, lp in enumerate(loops) if sch.get(lp).same_as(sch.get(at))) + 1
    reds = [lp for lp, k in zip(loops, kinds) if k]
    tile = [lp for lp, k in zip(loops[start:], kinds[start:]) if not k]
    sch.set_scope(acc, 0, "local")
    if not reds:
        return
    sch.reorder(*reds, *tile)
    for lp in tile:
        sch.unroll(lp)
    try:
        # the init as its own loop before the reductions, not a branch inside them
        sch.decompose_reduction(acc, reds[0])
    except s_tir.ScheduleError:
        pass  # bindings not quasi-affine after the fuse: the init stays a first-iteration branch


def schedule_for_gpu(prim, tiling: GpuTiling = DEFAULT_TILING):
    """``prim`` (an unscheduled exact integer kernel) with the GPU schedule of the module doc."""
    sch = s_tir.Schedule(prim)
    blocks = list(sch.get_child_blocks(sch.get_sblock("root")))
    tiled: dict[str, object] = {}  # accumulator name -> the thread loop it is computed at
    for blk in reversed(blocks):
        if is_reduction(sch, blk) or not sch.get_loops(blk):
            continue
        prods = [
            p
            for p in sch.get_producers(blk)
            if is_reduction(sch, p) and sole_same_shape_consumer(sch, p, blk)
        ]
        if prods and len(sch.get_loops(blk)) == 4:
            tx, _w, _c = _tile_output(sch, blk, tiling)
            for p in prods:
                tiled[sch.get(p).name_hint] = tx
    for blk in blocks:
        name = sch.get(blk).name_hint
        if name in tiled:
            _register_tile(sch, blk, tiled[name])
        elif not _is_bound(sch, blk):
            _bind_flat(sch, blk, tiling.threads)
    return sch.mod["main"].with_attr("tirx.is_scheduled", True)


def _is_bound(sch, block) -> bool:
    return any(sch.get(lp).thread_binding is not None for lp in sch.get_loops(block))
