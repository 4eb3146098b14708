"""A stripe-by-stripe walk of a Proposal that measures memory independently of the planner.

For every Plan it replays each consumer's stripes in order, works out the exact rows each one
reads (clipped ranges through the propagators), lets the producer compute on demand on its
own chunk grid, and measures how many rows a buffer really has to hold; every read is checked
to lie inside what the buffer holds at that moment. Across Plans it allocates each boundary
tensor when its producer's Plan starts and frees it after its last reader's Plan, then reports
the peak. The planner's numbers come from closed forms and a dynamic programme; this walk
shares only the window definition (planner.windows.window) with them.
"""
from __future__ import annotations

from dataclasses import dataclass

from planner.aliases import aliased_outputs
from planner.device_model import Device
from planner.errors import PlannerError
from planner.graph import PlannerGraph
from planner.memory import BufferMode
from planner.plan import Plan
from planner.proposals import Proposal
from planner.windows import window
from planner.work_memory import stripe_work_bytes, work_tensor


@dataclass(frozen=True)
class SimResult:
    peak_bytes: int
    plan_bytes: tuple[int, ...]        # buffers each Plan needed, as measured
    live_bytes: tuple[int, ...]        # boundary tensors live while each Plan ran


class SimulationError(PlannerError):
    """The schedule is wrong: a read outside its buffer, a Part run twice, a missing input."""


def _chunk_windows(graph: PlannerGraph, plan: Plan, tensor: str, axis: int,
                   stripes: dict, exact: bool = False) -> list[tuple[int, int]]:
    """Windows (along ``axis`` of ``tensor``) of every consumer stripe, in execution order.

    ``exact=False`` gives the window the schedule reads (the propagator applied to the whole
    stripe); ``exact=True`` the rows the operator really needs, the union of the windows of
    its single output rows (exact for every window operator, resize included).
    """
    out = []
    for q_name in plan.parts:
        q = next(p for p in graph.parts if p.name == q_name)
        for t, prop in zip(q.inputs, q.propagators):
            if t.name != tensor:
                continue
            b = prop.driving_axis(axis)
            st = stripes[q_name]
            lin = prop.linear(axis, b) if b is not None else 0
            args = (lin, prop.const(axis), prop.offset[axis], t.shape[axis])
            if b is None:
                out.append(window(0, 1, *args))
                continue
            for c0, c1 in st.work_ranges(b):
                if c1 <= c0:
                    continue
                if not exact:
                    out.append(window(c0, c1, *args))
                else:
                    rows = [window(r, r + 1, *args) for r in range(c0, c1)]
                    rows = [w for w in rows if w[1] > w[0]]
                    if rows:
                        out.append((min(w[0] for w in rows), max(w[1] for w in rows)))
    return out


def _step_windows(graph: PlannerGraph, plan: Plan, tensor: str, axis: int, stripes: dict
                  ) -> list[tuple[int, int]]:
    """What the one consumer of ``tensor`` reads along ``axis`` at each of its steps (an
    empty range where it computes nothing), in order."""
    (q,) = [p for p in graph.parts if p.name in plan.parts and
            any(t.name == tensor for t in p.inputs)]
    k = next(i for i, t in enumerate(q.inputs) if t.name == tensor)
    prop, t = q.propagators[k], q.inputs[k]
    b = prop.driving_axis(axis)
    args = (prop.linear(axis, b), prop.const(axis), prop.offset[axis], t.shape[axis])
    return [window(c0, c1, *args) if c1 > c0 else (0, 0)
            for c0, c1 in stripes[q.name].work_ranges(b)]


def _ring_walk(windows: list[tuple[int, int]], chunks: list[tuple[int, int]]) -> int:
    """Replay on-demand production over ``chunks`` for reads ``windows``; return the rows
    the ring must hold, checking that every read is produced and not yet overwritten."""
    done = 0            # chunks produced
    frontier = chunks[0][0] if chunks else 0
    need = 0
    for a, b in windows:
        if b <= a:
            continue
        while frontier < b:
            if done >= len(chunks):
                raise SimulationError(f"read of rows [{a}, {b}) beyond what the producer "
                                      f"computes (up to {frontier})")
            lo, hi = chunks[done]
            if lo != frontier and hi > lo:
                raise SimulationError(f"producer chunk [{lo}, {hi}) leaves a gap at {frontier}")
            frontier = max(frontier, hi)
            done += 1
        if a < chunks[0][0]:
            raise SimulationError(f"read of row {a} before the producer's first row "
                                  f"{chunks[0][0]}")
        need = max(need, frontier - a)
    return need


def lockstep_walk(reads: list[tuple[int, int]], steps: list[tuple[int, int]],
                  ring: int | None = None) -> int:
    """Replay a lockstep ring step by step and return the rows it must hold.

    ``steps`` are the rows the producer computes at each step of the stripe loop, ``reads``
    the rows its consumer reads at each step (empty where it computes nothing); the two are
    aligned on their last step, which is the sink's last (a prologue gives the producer more
    steps, before the consumer's first). At each step the producer computes first, then the
    consumer reads: a read must lie within what the producer has computed by then, or the
    lockstep order is wrong. With ``ring``, rows are stored in slot ``row % ring`` as a
    schedule would, and a read that finds a slot overwritten by a later row raises."""
    lead = len(steps) - len(reads)
    if lead < 0:
        raise SimulationError(f"the consumer has {len(reads)} steps, its lockstep producer "
                              f"only {len(steps)}")
    slots: dict[int, int] = {}
    frontier = next((lo for lo, hi in steps if hi > lo), 0)
    need = 0
    for j, (lo, hi) in enumerate(steps):
        if hi > lo:
            if lo != frontier:
                raise SimulationError(f"lockstep producer computes rows [{lo}, {hi}) at step "
                                      f"{j}, after row {frontier}: a gap or a row computed twice")
            frontier = hi
            if ring is not None:
                slots.update((r % ring, r) for r in range(lo, hi))
        if j < lead:
            continue
        a, b = reads[j - lead]
        if b <= a:
            continue
        if b > frontier:
            raise SimulationError(f"read of rows [{a}, {b}) at step {j}, before the lockstep "
                                  f"producer computed past row {frontier}")
        need = max(need, frontier - a)
        if ring is not None:
            lost = [r for r in range(a, b) if slots.get(r % ring) != r]
            if lost:
                raise SimulationError(f"read of rows [{a}, {b}) at step {j} finds rows {lost} "
                                      f"overwritten in a ring of {ring} rows")
    return need


def simulate_plan(graph: PlannerGraph, device: Device, plan: Plan) -> int:
    """Measure the buffer bytes ``plan`` needs (intermediates, staging, weight copies, the
    working memory its Parts declare and the persistent bytes of the graph's Parts: an
    LSTM's gate buffers and, where the SRAM holds the network's inputs and outputs, its
    states)."""
    stripes = {ps.part: ps.stripe for ps in plan.part_schedules}
    configs = {tc.tensor: tc for tc in plan.tensor_configs}
    members = set(plan.parts)
    total = 0
    for name in plan.parts[:-1]:
        part = next(p for p in graph.parts if p.name == name)
        t = part.output
        tc = configs.get(t.name)
        if tc is None:
            raise SimulationError(f"plan has no buffer for intermediate {t.name!r}")
        own = stripes[name]
        rolling_axis = None
        if tc.buffer_mode == BufferMode.ROLLING and any(own.order):
            rolling_axis = max(range(len(own.order)), key=lambda a: (own.order[a], -a))
        shape = []
        for a in range(len(t.shape)):
            wins = _chunk_windows(graph, plan, t.name, a, stripes)
            chunks = list(own.axis_ranges(a))
            if a == rolling_axis and getattr(own, "rolling_axis", -1) == a:
                # a lockstep ring: producer and consumer advance one step of one loop
                reads = _step_windows(graph, plan, t.name, a, stripes)
                shape.append(lockstep_walk(reads, list(own.work_ranges(a))))
            elif a == rolling_axis:
                shape.append(_ring_walk(wins, list(own.work_ranges(a))))
            else:
                # recompute: the producer computes each of its stripes whole into the buffer
                # just before the reads it serves; the buffer holds the largest stripe.
                for a_lo, a_hi in _chunk_windows(graph, plan, t.name, a, stripes, exact=True):
                    if a_hi > a_lo and not any(lo <= a_lo and a_hi <= hi for lo, hi in chunks):
                        raise SimulationError(
                            f"{t.name}: read [{a_lo}, {a_hi}) on axis {a} is covered by no "
                            f"producer stripe {chunks}")
                shape.append(max((hi - lo for lo, hi in chunks), default=0))
        # a tensor no stripe reads is still computed, into a buffer of at least one element
        # per axis (PlanGenerator sizes it so)
        total += t.region_bytes([max(1, n) for n in shape])
    for tc in plan.tensor_configs:
        if tc.copy_region != tc.home_region and tc.tensor not in members:
            total += tc.buffer_bytes     # staging and weight copies: sized by the Plan
    for part in graph.parts:
        if device.io_region == device.fm_region:   # else the states live with the network's
            total += int(part.attr("state_bytes", 0))   # inputs and outputs (PlanCosting)
        if part.name in members:
            work = stripe_work_bytes(part, stripes[part.name].shape)
            tc = configs.get(work_tensor(part.name))
            if (0 if tc is None else tc.buffer_bytes) != work:
                raise SimulationError(f"plan lists {0 if tc is None else tc.buffer_bytes} B of "
                                      f"working memory for {part.name!r}, which needs {work} "
                                      f"B over its stripe {stripes[part.name].shape}")
            total += work
    return total


def simulate(graph: PlannerGraph, device: Device, proposal: Proposal) -> SimResult:
    """Replay ``proposal`` and return its measured peak feature-map memory."""
    topo_names = [p.name for p in graph.topological_parts()]
    seen: set[str] = set()
    producer_plan: dict[str, int] = {}
    for k, plan in enumerate(proposal.plans):
        for name in plan.parts:
            if name in seen:
                raise SimulationError(f"part {name!r} is in two plans")
            seen.add(name)
            producer_plan[next(p for p in graph.parts if p.name == name).output.name] = k
    if seen != set(topo_names):
        raise SimulationError(f"parts not covered: {sorted(set(topo_names) - seen)}")
    outputs = {t.name for t in graph.outputs}
    inputs = {t.name for t in graph.inputs}

    def counted(name: str) -> bool:
        home = device.io_region if (name in inputs or name in outputs) else device.fm_region
        return home == device.fm_region

    # when is each boundary tensor last read, in plan index terms
    last_read: dict[str, int] = {}
    for k, plan in enumerate(proposal.plans):
        for name in plan.parts:
            part = next(p for p in graph.parts if p.name == name)
            for t in part.inputs:
                if t.is_constant:
                    continue
                src = producer_plan.get(t.name, -1)
                if src == k and t.name not in inputs:
                    continue
                if src > k:
                    raise SimulationError(f"plan {k} reads {t.name!r} before it is produced")
                last_read[t.name] = max(last_read.get(t.name, -1), k)
    # a reshape Plan that aliases its input adds no bytes: its root lives until its readers
    aliased = aliased_outputs(graph, [plan.parts for plan in proposal.plans])
    for name, root in aliased.items():
        if name in last_read:
            last_read[root] = max(last_read.get(root, -1), last_read[name])
        if name in outputs:     # an in-place network output: its root's bytes to the end
            last_read[root] = len(proposal.plans)
    sizes = {t.name: t.bytes for t in graph.tensors}
    live: set[str] = {t.name for t in graph.inputs if counted(t.name)}
    plan_bytes, live_bytes = [], []
    peak = 0
    for k, plan in enumerate(proposal.plans):
        if counted(plan.output) and plan.output not in aliased:
            live.add(plan.output)
        buffers = simulate_plan(graph, device, plan)
        now = sum(sizes[n] for n in live)
        plan_bytes.append(buffers)
        live_bytes.append(now)
        peak = max(peak, buffers + now)
        for name in list(live):
            if name in outputs:
                continue
            if last_read.get(name, producer_plan.get(name, -1)) <= k:
                live.discard(name)
    return SimResult(peak, tuple(plan_bytes), tuple(live_bytes))
