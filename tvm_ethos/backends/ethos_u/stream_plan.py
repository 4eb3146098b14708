"""What a planner Proposal asks the NPU to do, in order, and where every buffer of it lives.

The command-stream generator (``stream_gen``) executes the same schedule as the "tir"
emulator (``emulator.schedule``): for each Plan, the Parts run stripe by stripe, each computing
per step the box of its output the planner gives it. :func:`plan_steps` lists those boxes in
execution order for the three cascade forms the compile path realizes:

* RECOMPUTE: per sink stripe, every Part computes its whole window (``axis_ranges``);
* lockstep rings (``planner.lockstep``): along the rolling axis a producer computes only the
  rows past its previous window (``work_ranges``); with a prologue the step loop starts
  ``prologue`` steps before the sink's first stripe, the steps aligned on their last one;
* line buffers (``planner.line_buffer``): one finer step loop on which Part ``p`` computes
  chunk ``j`` at step ``offset + period * j``, producers before consumers within a step.

Axes striped outside the innermost stripe loop (the width tiles of 2-D stripes) repeat the
inner loop once per tile. A Plan may run in blocks of steps instead (``run``, the emulator's
loop reordered, the same boxes): each Part computes its steps of a block in a row, so that
consecutive NPU operations are one layer's and write only the addresses that change. A
producer then runs up to a block ahead of its consumer, so the rings grow for it
(:func:`run_buffer_shapes`); :func:`longest_runs` takes, per Plan, the longest run whose grown
rings still fit the plan's peak, so the arena, the weight DMA and the outputs stay the
plan's. :func:`arena_layout` places every buffer the Proposal counts in the
scratch arena: the tensors between Plans (network inputs until their last reader, outputs to
the end), and per Plan its intermediates (the planned buffer shape, a ring along every axis
the buffer is shorter on), its weight copies and staging buffers (one block per Plan, which
``stream_weights`` fills by DMA) and working memory the stream needs beyond the plan
(SOFTMAX's intermediates). The layout is first fit by Plan lifetime, else a bounded search
(``arena_packing``); it must fit the plan's peak exactly, else :class:`LayoutError`.

Nothing here imports TVM or Vela: the inputs are the planner's graph and Proposal.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from planner.line_buffer import LineBufferError, line_timing
from planner.lockstep import prologue_of
from planner.memory import BufferMode
from planner.windows import window
from tvm_ethos.backends.ethos_u.arena_packing import packed_offsets

Box = tuple[tuple[int, int], ...]


class ScheduleFormError(Exception):
    """The Proposal uses a form :func:`plan_steps` does not list (the message says which)."""


class LayoutError(Exception):
    """No first-fit layout of the Proposal's buffers fits its peak."""


@dataclass(frozen=True)
class Step:
    """Part ``part`` of Plan ``plan`` computes ``box`` (a [lo, hi) range per output axis)."""

    plan: int
    part: str
    box: Box


def _line_timing(graph, plan):
    """The line-buffer timing of a demand-driven rolling Plan, None for other Plans (the
    test ``emulator.schedule`` applies)."""
    configs = {tc.tensor: tc for tc in plan.tensor_configs}
    by_name = {p.name: p for p in graph.parts}
    if plan.spec.mode != "rolling" or not any(
            configs.get(by_name[n].output.name) is not None
            and configs[by_name[n].output.name].buffer_mode == BufferMode.ROLLING
            for n in plan.parts[:-1]):
        return None
    if plan.spec.granule != 1:
        raise ScheduleFormError(f"a {plan.spec.label()} Plan (only granule 1 is realized)")
    try:
        return line_timing(graph, plan)
    except LineBufferError as err:
        raise ScheduleFormError(str(err)) from None


def plan_steps(graph, plan, index: int = 0, run: int = 1) -> list[Step]:
    """Every (Part, output box) of ``plan`` in the order the schedule runs them; ``run``:
    the step loop's iterations taken in blocks of that many, in which each Part runs its
    steps of the block in a row before the next Part (producers still before their
    consumers, but ahead by up to a block: its rings must be :func:`run_buffer_shapes`')."""
    return [s for tile in plan_tiles(graph, plan, index, run) for s in tile]


def plan_tiles(graph, plan, index: int = 0, run: int = 1) -> list[list[Step]]:
    """:func:`plan_steps` per pass of the inner step loop (one per width tile): a pass
    refills every ring along the inner axis from its first row."""
    compute = {ps.part: ps.stripe for ps in plan.part_schedules}
    sink = compute[plan.parts[-1]]
    rank = len(sink.shape)
    striped = sorted((a for a in range(rank) if sink.stripes[a] > 1),
                     key=lambda a: sink.order[a])
    timing = _line_timing(graph, plan)

    def fixed(name, a, outer_index):
        cfg = compute[name]
        ranges = cfg.axis_ranges(a)
        if a in outer_index:
            if cfg.stripes[a] != sink.stripes[a]:
                raise ScheduleFormError(f"{name} has {cfg.stripes[a]} stripes along axis {a}, "
                                        f"its Plan's sink {sink.stripes[a]}")
            return ranges[outer_index[a]]
        if len(ranges) != 1:
            raise ScheduleFormError(f"{name} is striped along axis {a}, its sink is not")
        return ranges[0]

    def box(name, outer_index, inner_axis=None, inner=None):
        cfg = compute[name]
        return tuple(inner if a == inner_axis else fixed(name, a, outer_index)
                     for a in range(len(cfg.shape)))

    if not striped:
        return [[Step(index, name, box(name, {})) for name in plan.parts]]
    tiles: list[list[Step]] = []
    inner_axis, outer_axes = striped[-1], striped[:-1]
    for combo in itertools.product(*(range(sink.stripes[a]) for a in outer_axes)):
        outer_index = dict(zip(outer_axes, combo))
        steps: list[Step] = []
        tiles.append(steps)
        if timing is not None:
            loop = range(timing.first_step, timing.first_step + timing.steps)
            for block in _blocks(loop, run):
                for pt in timing.parts:
                    for t in block:
                        j, r = divmod(t - pt.offset, pt.period)
                        if r or not 0 <= j < len(pt.chunks):
                            continue
                        lo, hi = pt.chunks[j]
                        if hi > lo:
                            steps.append(Step(index, pt.part,
                                              box(pt.part, outer_index, pt.axis, (lo, hi))))
            continue
        lead = max(prologue_of(compute[n]) for n in plan.parts)
        for block in _blocks(range(-lead, sink.stripes[inner_axis]), run):
            for name in plan.parts:
                for j in block:
                    cfg = compute[name]
                    k = j + prologue_of(cfg)
                    ranges = cfg.work_ranges(inner_axis)
                    if k < 0:
                        continue
                    if k >= len(ranges):
                        raise ScheduleFormError(f"{name} has {len(ranges)} stripes along axis "
                                                f"{inner_axis}, its step loop more")
                    lo, hi = ranges[k]
                    if hi > lo:
                        steps.append(Step(index, name,
                                          box(name, outer_index, inner_axis, (lo, hi))))
    return tiles


def _blocks(loop: range, run: int) -> list[range]:
    """``loop`` cut into consecutive blocks of ``run`` iterations (the last may be shorter)."""
    if run < 1:
        raise ValueError(f"a run of {run} steps: a run is at least one step")
    return [loop[i:i + run] for i in range(0, len(loop), run)]


def step_loop_length(graph, plan) -> int:
    """Iterations of ``plan``'s inner step loop (per width tile): what :func:`plan_steps`'s
    ``run`` cuts into blocks; 1 for a Plan whose sink is not striped."""
    compute = {ps.part: ps.stripe for ps in plan.part_schedules}
    sink = compute[plan.parts[-1]]
    striped = sorted((a for a in range(len(sink.shape)) if sink.stripes[a] > 1),
                     key=lambda a: sink.order[a])
    if not striped:
        return 1
    timing = _line_timing(graph, plan)
    if timing is not None:
        return timing.steps
    return max(prologue_of(compute[n]) for n in plan.parts) + sink.stripes[striped[-1]]


def run_buffer_shapes(graph, plan, run: int) -> dict[str, tuple[int, ...]] | None:
    """The buffer shape of each of ``plan``'s intermediate tensors when its steps run in
    blocks of ``run`` (:func:`plan_steps`): the planned shape, each ring axis grown until every
    read in that order finds the rows it reads still in their slots (a producer ahead by a
    block overwrites the slots of rows its consumer has not read yet in a ring sized for
    lockstep). None where the planned rings fail that check in the planned order (the check
    reads whole windows; the planner may size a ring for the rows an operator really reads):
    such a Plan keeps its order."""
    by_part = {p.name: p for p in graph.parts}
    configs = {tc.tensor: tc for tc in plan.tensor_configs}
    planned = plan_tiles(graph, plan, 0, 1)
    tiles = planned if run == 1 else plan_tiles(graph, plan, 0, run)
    shapes = {}
    for name in plan.parts[:-1]:
        tensor = by_part[name].output
        shape = list(configs[tensor.name].buffer_shape)
        readers = {q: [(prop, t) for t, prop in
                       zip(by_part[q].inputs, by_part[q].propagators) if t.name == tensor.name]
                   for q in plan.parts}
        readers = {q: r for q, r in readers.items() if r}
        for axis, extent in enumerate(int(n) for n in tensor.shape):
            if shape[axis] >= extent:
                continue
            before = [_ring_events(steps, name, readers, axis) for steps in planned]
            after = before if run == 1 else \
                [_ring_events(steps, name, readers, axis) for steps in tiles]
            if not all(_ring_holds(events, shape[axis]) for events in before):
                return None
            # no ring shorter than from a read's first row to the last row written by then
            # holds it: start there
            rows = max([shape[axis]] + [_span(events) for events in after])
            while not all(_ring_holds(events, rows) for events in after):
                if rows >= extent:
                    return None
                rows += 1
            shape[axis] = rows
        shapes[tensor.name] = tuple(shape)
    return shapes


class _Access(NamedTuple):
    """Rows ``[lo, hi)`` along a ring's axis, written (``write``) or read, in step order."""

    write: bool
    lo: int
    hi: int


def _ring_events(steps: list[Step], producer: str, readers: dict, axis: int) -> list[_Access]:
    """The rows along ``axis`` of ``producer``'s output that ``steps`` write and that its
    ``readers`` (Part -> [(propagator, tensor)]) read, in order."""
    out = []
    for s in steps:
        if s.part == producer:
            out.append(_Access(True, *s.box[axis]))
        for prop, tensor in readers.get(s.part, ()):
            b = prop.driving_axis(axis)
            args = (prop.linear(axis, b) if b is not None else 0, prop.const(axis),
                    prop.offset[axis], int(tensor.shape[axis]))
            out.append(_Access(False, *(window(0, 1, *args) if b is None
                                        else window(*s.box[b], *args))))
    return out


def _span(events: list[_Access]) -> int:
    """The most rows from a read's first row to the last row written before it."""
    top, span = None, 0
    for e in events:
        if e.write:
            top = e.hi if top is None else max(top, e.hi)
        elif top is not None and e.hi > e.lo:
            span = max(span, top - e.lo)
    return span


def _ring_holds(events: list[_Access], rows: int) -> bool:
    """Whether a ring of ``rows``, row ``r`` in slot ``r % rows``, still holds every row each
    read of ``events`` reads when they happen in order."""
    slots: dict[int, int] = {}
    for e in events:
        if e.write:
            slots.update((r % rows, r) for r in range(e.lo, e.hi))
        elif any(slots.get(r % rows) != r for r in range(e.lo, e.hi)):
            return False
    return True


# ----------------------------------------------------------------------------- memory
@dataclass(frozen=True)
class Buffer:
    """One block of the arena: ``name`` (a tensor, a reservation or a working block), its
    bytes, element alignment and the Plans it is live across (inclusive)."""

    name: str
    nbytes: int
    align: int
    first: int
    last: int
    #: "tensor" (written by the stream), "input" (written by the host; the stream may read
    #: only part of it), "weights" (a Plan's weight block: DMAs may fill part of it) or "work"
    kind: str = "tensor"


@dataclass
class ArenaLayout:
    offsets: dict = field(default_factory=dict)      # buffer name -> byte offset
    buffers: list = field(default_factory=list)      # every Buffer placed
    size: int = 0                                    # the highest byte + 1 of any buffer

    def mirrored(self) -> "ArenaLayout":
        """The same layout upside down (still valid: nothing live at once overlaps), so that
        what was at the bottom ends at the top."""
        sizes = {b.name: b.nbytes for b in self.buffers}
        return ArenaLayout({n: self.size - o - sizes[n] for n, o in self.offsets.items()},
                           list(self.buffers), self.size)

    def aligned(self) -> bool:
        """Every buffer on its alignment (an upside-down layout may move them off it)."""
        return all(self.offsets[b.name] % b.align == 0 for b in self.buffers)

    def top(self, kinds=("tensor", "work")) -> int:
        """The highest byte + 1 of the buffers of ``kinds`` (what the stream writes, so
        touches whole)."""
        return max((self.offsets[b.name] + b.nbytes for b in self.buffers
                    if b.kind in kinds and b.nbytes), default=0)


def _first_fit(ordered: list[Buffer], lowest=None, placed=()) -> tuple[dict, int]:
    """First fit in the order of ``ordered``; ``lowest(b)``: the lowest offset ``b`` may take;
    ``placed``: (offset, bytes, first, last) blocks already there."""
    placed = list(placed)
    offsets: dict = {}
    for b in ordered:
        live = sorted((o, s) for o, s, lo, hi in placed if not (hi < b.first or lo > b.last))
        off = lowest(b) if lowest else 0
        for o, s in live:
            if off + b.nbytes <= o:
                break
            if o + s <= off:
                continue
            off = max(off, -(-(o + s) // b.align) * b.align)
        placed.append((off, b.nbytes, b.first, b.last))
        offsets[b.name] = off
    size = max((o + s for o, s, _, _ in placed), default=0)
    return offsets, size


def _names(ordered: list[Buffer]) -> tuple[str, ...]:
    return tuple(b.name for b in ordered)


def arena_layout(buffers: list[Buffer], peak: int | None, search: bool = True) -> ArenaLayout:
    """A first-fit placement of ``buffers`` within ``peak`` bytes that ends, where it can,
    with a byte the stream touches (the reserved weights below the feature maps). Tried in
    turn: the touched buffers placed down from the peak, the weights into the holes left;
    each Plan's weights at the bottom and every other buffer above the weights of the Plans
    it lives across and of the next one or two (room its successors can share); all weights
    in one floor; the weights among the rest; each in several orders (by first Plan,
    lifetime, size), each also upside down; where none fits, the same orders with the aligned
    blocks first. The first that fits the peak and ends with a touched byte is taken, else
    the first that fits; where none fits, ``arena_packing.packed_offsets``'s placement
    within the peak (upside down where only that ends with a touched byte), unless
    ``search`` is False (a trial that may fail cheaply); :class:`LayoutError` when none.
    ``peak`` None: the smallest layout, whatever its size."""
    rank = {"weights": 0, "tensor": 1, "work": 2, "input": 3}
    touched_first = {"tensor": 0, "work": 0, "input": 0, "weights": 1}
    plans = range(min((b.first for b in buffers), default=0),
                  max((b.last for b in buffers), default=0) + 1)
    live = {k: sum(b.nbytes for b in buffers if b.first <= k <= b.last) for k in plans}
    fullest = {k for k, n in live.items() if n == max(live.values(), default=0)}

    def bottom(b):  # the fullest Plans' reserved weights at the bottom, under what they touch
        return 0 if b.kind == "weights" and b.first in fullest else 1

    orders = (
        lambda b: (bottom(b), b.first, rank[b.kind], -b.nbytes, b.name),
        lambda b: (b.first, rank[b.kind], -b.nbytes, b.name),
        lambda b: (touched_first[b.kind], b.first, -b.nbytes, b.name),
        lambda b: (touched_first[b.kind], -(b.last - b.first), -b.nbytes, b.name),
        lambda b: (-(b.last - b.first), -b.nbytes, b.name),
        lambda b: (-b.nbytes, b.first, b.name),
    )
    fitting = []
    smallest = None
    best = None
    weights = [b for b in buffers if b.kind == "weights"]
    floor_bytes = max((sum(b.nbytes for b in weights if b.first <= k <= b.last) for k in plans),
                      default=0)
    touched = [b for b in buffers if b.kind != "weights"]
    if weights and peak is not None:
        # the touched buffers first fit down from the peak (their highest byte is the peak),
        # then the reserved weights first fit into what they leave
        pairs: set = set()   # (touched order, weights order) of every key tried
        for key in orders[1:]:
            ordered, weights_order = sorted(touched, key=key), sorted(weights, key=key)
            pair = (_names(ordered), _names(weights_order))
            if pair in pairs:   # an order met again places every block as before
                continue
            pairs.add(pair)
            down, span = _first_fit(ordered)
            if span > peak:
                continue
            offsets = {n: peak - o - b.nbytes for b in touched for n, o in [(b.name, down[b.name])]}
            blocks = [(offsets[b.name], b.nbytes, b.first, b.last) for b in touched]
            low, size = _first_fit(weights_order, placed=blocks)
            layout = ArenaLayout(dict(offsets, **low), list(buffers), peak)
            if size <= peak and layout.top() == peak and layout.aligned():
                return layout
    attempts = []
    if weights:
        # each Plan's reserved weights at the bottom, every buffer above the weights of the
        # Plans it lives across
        per_plan = {k: sum(b.nbytes for b in weights if b.first == k) for k in plans}
        for ahead in (1, 0, 2):
            def above(b, ahead=ahead):  # over its Plans, and ``ahead`` more
                return max(per_plan.get(k, 0) for k in range(b.first, b.last + 1 + ahead))

            attempts += [(touched, key, above) for key in orders]
        # every Plan's reserved weights in one floor under everything else: the feature maps
        # above it then end at the peak wherever they fit
        floor = Buffer("__weights_floor", floor_bytes, 1, plans.start, plans.stop - 1)
        rest = [b for b in buffers if b.kind != "weights"] + [floor]
        attempts += [(rest, key, None) for key in orders[:1] + orders[3:]]
    attempts += [(buffers, key, None) for key in orders]

    def tried():
        yield from attempts
        if peak is not None and not fitting:
            # the aligned blocks (working memory, weights the DMA fills) first, from the
            # bottom: the byte-aligned tensors above them then take no padding, which the
            # plan's peak does not count
            yield from ((buffers, lambda b, key=key: (-b.align, key(b)), None) for key in orders)

    fitted: set = set()   # (lowest, order) of every attempt made
    for group, key, lowest in tried():
        ordered = sorted(group, key=key)
        attempt = (lowest, _names(ordered))
        if attempt in fitted:   # the same layout as before: it neither fitted better nor ended
            continue
        fitted.add(attempt)
        offsets, size = _first_fit(ordered, lowest)
        if lowest is not None or "__weights_floor" in offsets:
            base = offsets.pop("__weights_floor", 0)
            stacked: dict = {}
            for b in sorted(weights, key=lambda b: (b.first, b.name)):
                offsets[b.name] = base + stacked.get(b.first, 0)
                stacked[b.first] = stacked.get(b.first, 0) + b.nbytes
                size = max(size, offsets[b.name] + b.nbytes)
        layout = ArenaLayout(offsets, list(buffers), size)
        smallest = size if smallest is None else min(smallest, size)
        if best is None or (size, size - layout.top()) < (best.size, best.size - best.top()):
            best = layout
        if peak is None:
            continue
        if size > peak:
            continue
        for candidate in (layout, layout.mirrored()):
            if candidate.top() == size and candidate.aligned():
                return candidate
        fitting.append(layout)
    if peak is None:
        return best
    if not fitting:
        # blocks living across several Plans left holes no first fit fills: search for
        # a placement within the peak, the least any layout takes
        packed = packed_offsets(buffers, peak) if search else None
        if packed is not None:
            layout = ArenaLayout(packed, list(buffers), max(
                (packed[b.name] + b.nbytes for b in buffers), default=0))
            mirrored = layout.mirrored()
            if layout.top() != layout.size and mirrored.aligned() and \
                    mirrored.top() == mirrored.size:
                return mirrored
            return layout
        raise LayoutError(f"the first-fit arena layout needs {smallest:,} B, the plan's peak "
                          f"is {peak:,} B")
    return fitting[0]


# ----------------------------------------------------------------------------- runs
def _run_lengths(loop: int) -> list[int]:
    """The runs tried for a step loop of ``loop`` iterations, longest first: the whole loop
    (each Part's stripes all in a row), half of it, then a few short ones."""
    return sorted({r for r in (loop, -(-loop // 2), 8, 4, 3, 2) if 2 <= r <= loop},
                  reverse=True)


def longest_runs(graph, proposal, buffers: list[Buffer], shapes: dict, peak: int,
                 fixed=frozenset(), layout: ArenaLayout | None = None
                 ) -> tuple[dict[int, int], list[Buffer], dict, ArenaLayout]:
    """Each Plan's longest run (:func:`plan_steps`) whose rings, grown for it
    (:func:`run_buffer_shapes`), still leave a first-fit layout of ``buffers`` within ``peak``
    bytes; Plans in order, each keeping the room the ones before it took. A run makes
    consecutive operations the same layer's, which write only the addresses that change: a
    shorter stream, in the memory the plan already has. ``fixed``: Plans kept in their order
    (run 1); ``layout``: ``arena_layout(buffers, peak)``, where the caller has made it.
    Returns the runs, the buffers and buffer shapes grown for them and their layout."""
    if layout is None:
        layout = arena_layout(buffers, peak)
    runs: dict[int, int] = {}
    shapes = dict(shapes)
    for k, plan in enumerate(proposal.plans):
        runs[k] = 1
        if k in fixed:
            continue
        for run in _run_lengths(step_loop_length(graph, plan)):
            grown = run_buffer_shapes(graph, plan, run)
            if grown is None:
                break
            trial = _grown(buffers, shapes, k, grown)
            if trial is None:
                break
            try:
                trial_layout = arena_layout(trial, peak, search=False)
            except LayoutError:
                continue
            runs[k], buffers, layout = run, trial, trial_layout
            shapes.update(grown)
            break
    return runs, buffers, shapes, layout


def _grown(buffers: list[Buffer], shapes: dict, plan: int, grown: dict) -> list[Buffer] | None:
    """``buffers`` with Plan ``plan``'s intermediate tensors at their ``grown`` shapes (their
    bytes scaled with the elements); None where one's bytes are not whole elements of its
    shape (a block the stream does not lay out as that shape)."""
    out = []
    for b in buffers:
        if b.name in grown and b.first == plan == b.last and grown[b.name] != shapes[b.name]:
            old, new = math.prod(shapes[b.name]), math.prod(grown[b.name])
            if b.nbytes % old:
                return None
            b = replace(b, nbytes=b.nbytes // old * new)
        out.append(b)
    return out
