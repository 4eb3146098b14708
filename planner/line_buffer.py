"""Line-buffer timing: when each chunk of a demand-driven rolling Plan runs in one step loop.

The planner's demand-driven rolling buffers (``rolling_granules``, ``plans.py``) let every
producer compute its own chunks (one row each for granule 1) just before its consumer needs
them. One loop realizes that order when its steps are finer than the sink's stripes: a *line
buffer* pipeline. Every Part runs one chunk every ``period`` steps, from step ``offset`` on,
so a level above a stride-2 layer runs twice as often as the layer, and the ring between two
levels holds about a kernel's height of rows, not the rows a whole sink stripe reads
(lockstep, ``planner.lockstep``).

``line_timing`` derives the periods (rates matched along the chain: a consumer chunk moves
its window by ``A`` producer rows, so the producer runs ``A`` times as often) and the offsets
(each producer as late as its consumer's first use of every row allows), then replays the
steps with each ring stored at ``row % ring_rows`` and checks that every row a consumer reads
is still in its slot. So a timing it returns is one whose planned rings are enough; a Plan
it cannot time raises ``LineBufferError`` naming why. ``tvm_ethos.emulator.line_buffer`` binds
each Part's rows to ``offset + period * chunk`` in TensorIR.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from planner.errors import PlannerError
from planner.graph import PlannerGraph
from planner.lockstep import stepping_axis
from planner.memory import BufferMode
from planner.windows import window


class LineBufferError(PlannerError):
    """A Plan has no line-buffer timing (or its rings are too small for the one it has)."""


@dataclass(frozen=True)
class PartTiming:
    """Part ``part`` computes chunk ``j`` (``chunks[j]``, a [lo, hi) range of its output along
    ``axis``) at step ``offset + period * j``."""
    part: str
    axis: int
    chunks: tuple[tuple[int, int], ...]
    period: int
    offset: int
    #: some row of its output is read at a later step than the one that computes it (so its
    #: buffer must outlive a step of the loop)
    held: bool = False

    def step_of(self, j: int) -> int:
        return self.offset + self.period * j


@dataclass(frozen=True)
class LineTiming:
    """Every Part of a Plan on one step loop ``[first_step, first_step + steps)``, in the
    Plan's (topological) order: within a step, producers run before their consumers."""
    parts: tuple[PartTiming, ...]
    first_step: int
    steps: int

    def of(self, name: str) -> PartTiming:
        return next(p for p in self.parts if p.part == name)


def _reads(graph: PlannerGraph, plan, compute: dict, by_name: dict) -> dict:
    """{producer: (consumer, input index, axis)} for every intermediate tensor of ``plan``."""
    members = set(plan.parts)
    configs = {tc.tensor: tc for tc in plan.tensor_configs}
    out = {}
    for name in plan.parts[:-1]:
        t = by_name[name].output
        readers = [(q, k) for q in graph.consumers(t) if q.name in members
                   for k, x in enumerate(q.inputs) if x.name == t.name]
        tc = configs.get(t.name)
        if len(readers) != 1 or tc is None or tc.buffer_mode != BufferMode.ROLLING:
            raise LineBufferError(
                f"line buffer: {t.name} is not a rolling buffer with one reader in the Plan "
                f"({len(readers)} readers, {tc.buffer_mode.value if tc else 'no config'})")
        q, k = readers[0]
        win = compute[q.name].propagate(q.propagators[k], t.shape)
        axis = stepping_axis(win)
        if axis is None:
            raise LineBufferError(f"line buffer: {q.name}'s windows over {t.name} do not step "
                                  "along one axis")
        out[name] = (q, k, axis)
    return out


def line_timing(graph: PlannerGraph, plan) -> LineTiming:
    """The line-buffer timing of a demand-driven rolling ``plan`` (see the module docstring)."""
    compute = {ps.part: ps.stripe for ps in plan.part_schedules}
    sink = plan.parts[-1]
    sink_axis = stepping_axis(compute[sink])
    if sink_axis is None:
        raise LineBufferError(f"line buffer: the sink {sink} does not step along one axis")
    by_name = {p.name: p for p in graph.parts}
    reads = _reads(graph, plan, compute, by_name)
    axis = {sink: sink_axis}
    chunks = {sink: compute[sink].axis_ranges(sink_axis)}
    period = {sink: Fraction(1)}
    need = {}        # producer -> the window of each consumer chunk, along the producer's axis
    for name in reversed(plan.parts[:-1]):
        q, k, a = reads[name]
        prop = q.propagators[k]
        b = prop.driving_axis(a)
        if b != axis[q.name]:
            raise LineBufferError(f"line buffer: {name}'s rows move with axis {b} of {q.name}, "
                                  f"which steps along axis {axis[q.name]}")
        t = by_name[name].output
        wins = tuple(window(c0, c1, prop.linear(a, b), prop.const(a), prop.offset[a],
                            t.shape[a]) for c0, c1 in chunks[q.name])
        mine = compute[name].axis_ranges(a)
        advance = Fraction(prop.linear(a, b)) * Fraction(compute[q.name].strides[b])
        rows = Fraction(compute[name].strides[a])
        if advance <= 0 or rows <= 0:
            raise LineBufferError(f"line buffer: {q.name}'s window over {t.name} does not move")
        axis[name], chunks[name], need[name] = a, mine, wins
        period[name] = period[q.name] * rows / advance
    scale = math.lcm(*(p.denominator for p in period.values()))
    steps = {n: int(p * scale) for n, p in period.items()}
    offset = {sink: 0}
    for name in reversed(plan.parts[:-1]):
        q = reads[name][0].name
        lo_chunks = chunks[name]
        latest = None
        for i, (w0, w1) in enumerate(need[name]):
            if w1 <= w0:
                continue
            last = _chunk_holding(lo_chunks, w1 - 1, name)
            bound = offset[q] + steps[q] * i - steps[name] * last
            latest = bound if latest is None else min(latest, bound)
        if latest is None:
            raise LineBufferError(f"line buffer: {q} reads nothing of {name}'s output")
        offset[name] = latest
    timings = tuple(PartTiming(n, axis[n], tuple(chunks[n]), steps[n], offset[n])
                    for n in plan.parts)
    first = min(p.offset for p in timings)
    last = max(p.step_of(len(p.chunks) - 1) for p in timings)
    timing = LineTiming(timings, first, last - first + 1)
    held = _check_rings(plan, timing, reads, need, by_name)
    return LineTiming(tuple(replace(p, held=p.part in held) for p in timings), first,
                      last - first + 1)


def _chunk_holding(chunks, row: int, name: str) -> int:
    for j, (c0, c1) in enumerate(chunks):
        if c0 <= row < c1:
            return j
    raise LineBufferError(f"line buffer: no chunk of {name} computes row {row}")


def _check_rings(plan, timing: LineTiming, reads: dict, need: dict, by_name: dict) -> set:
    """Replay the steps with each ring stored at ``row % ring rows``: every row a consumer
    chunk reads must be in its slot when the chunk runs (producers run first in a step).
    Returns the producers some row of which is read at a later step than it was written."""
    configs = {tc.tensor: tc for tc in plan.tensor_configs}
    out = {name: p.output.name for name, p in by_name.items()}
    events = []      # (step, position in the Plan, part, chunk index)
    for pos, pt in enumerate(timing.parts):
        events.extend((pt.step_of(j), pos, pt.part, j) for j in range(len(pt.chunks)))
    events.sort()
    slots = {name: {} for name in reads}
    ring = {name: configs[out[name]].buffer_shape[reads[name][2]]
            for name in reads}
    readers = {reads[name][0].name: [] for name in reads}
    for name in reads:
        readers[reads[name][0].name].append(name)
    written = {name: {} for name in reads}
    held = set()
    for step, _, name, j in events:
        for producer in readers.get(name, ()):
            w0, w1 = need[producer][j]
            slot = slots[producer]
            for row in range(w0, w1):
                if written[producer].get(row) != step:
                    held.add(producer)
                if slot.get(row % ring[producer]) != row:
                    raise LineBufferError(
                        f"line buffer: at step {step} {name} reads row {row} of "
                        f"{out[producer]}, which a ring of "
                        f"{ring[producer]} rows no longer (or does not yet) hold")
        if name in slots:
            c0, c1 = timing.of(name).chunks[j]
            for row in range(c0, c1):
                slots[name][row % ring[name]] = row
                written[name][row] = step
    return held
