"""Plan generation: every way to run a group of Parts as one cascade, costed exactly.

A Plan covers an interval ``[start, end]`` of the graph's topological order whose last Part
(the sink) is the only one whose output leaves the interval. The sink's output is cut into
stripes (a StripeConfig); walking the interval backwards, each intermediate tensor is held
either as a RECOMPUTE buffer (the window its consumer reads per stripe) or as a ROLLING ring
along the innermost striped axis, whose producer computes rows on demand in chunks
(``rolling_granules``: 1 row at a time gives the smallest rings; 0 gives the chunk its
consumer advances per stripe). Because extending an interval backwards never changes what is
downstream, all intervals with the same sink and stripe config are costed in one backward walk.

Memory of a Plan counts what it allocates beyond its boundary tensors (which the Proposal
accounts as live tensors): intermediate buffers, staging buffers for tensors homed in DRAM,
and weights copied to SRAM.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Iterator

from planner.device import Device
from planner.errors import PlannerError
from planner.graph import Part, PlannerGraph, Tensor
from planner.lockstep import (aligned_windows, lockstep_config, lockstep_ring, prologue_of,
                              with_prologue)
from planner.memory import BufferMode, TensorConfig
from planner.options import PlannerOptions
from planner.pareto import frontier
from planner.stripes import StripeConfig, _axis_ranges, unchecked_config
from planner.windows import ring_rows, window


@dataclass(frozen=True)
class PartSchedule:
    """How one Part of a Plan runs: the stripes of its output it computes, and their cost."""
    part: str
    stripe: StripeConfig
    executions: int
    cycles: int
    weights_region: str

    def to_json(self) -> dict:
        return {"part": self.part, "stripe": self.stripe.to_json(),
                "executions": self.executions, "cycles": self.cycles,
                "weights_region": self.weights_region}


@dataclass(frozen=True)
class PlanSpec:
    """The choices that define a Plan for a given interval (enough to rebuild it)."""
    stripe: StripeConfig
    mode: str            # "rolling", "lockstep" (planner.lockstep) or "recompute"
    granule: int         # rolling chunk rows; 0 = natural
    weights: tuple[str, ...] = ()   # Parts whose weights are copied to SRAM once
    #: Cross-Plan weight prefetch (one-Part unstriped Plans, PlanGenerator.prefetch_cost):
    #: this Plan's Part finds its weights already in SRAM, copied during the previous Plan;
    #: this Plan copies the next Part's weights to SRAM while its own Part runs.
    prefetched: bool = False
    prefetch_next: bool = False

    def label(self) -> str:
        if self.mode == "rolling":
            return f"rolling(g={self.granule or 'natural'})"
        if self.mode == "lockstep":
            return "lockstep"
        return "recompute"

    def weights_for(self, part: str) -> str:
        return "sram" if part in self.weights else "flash"


@dataclass(frozen=True)
class Plan:
    start: int
    end: int
    parts: tuple[str, ...]
    output: str
    spec: PlanSpec
    tensor_configs: tuple[TensorConfig, ...]
    part_schedules: tuple[PartSchedule, ...]
    memory_bytes: int
    cycles: int
    #: Cycles of the next Part's weight copy hidden under this Plan (``spec.prefetch_next``);
    #: already taken off ``cycles``.
    prefetch_credit: int = 0

    def to_json(self) -> dict:
        out = {
            "parts": list(self.parts), "output": self.output,
            "output_stripe": self.spec.stripe.to_json(), "buffering": self.spec.label(),
            "weights_in_sram": list(self.spec.weights), "memory_bytes": self.memory_bytes,
            "cycles": self.cycles,
            "tensors": [tc.to_json() for tc in self.tensor_configs],
            "schedule": [ps.to_json() for ps in self.part_schedules],
        }
        if self.spec.prefetched or self.spec.prefetch_next:
            out["prefetch"] = {"weights_prefetched": self.spec.prefetched,
                               "prefetches_next": self.spec.prefetch_next,
                               "credit_cycles": self.prefetch_credit}
        return out


def _distinct_sizes(extent: int, granule: int, factors: int) -> list[int]:
    """Stripe sizes along one axis: one per distinct stripe count, aligned to ``granule``,
    thinned to ``factors`` values spread evenly (so not only powers of two)."""
    sizes = set()
    for n in range(1, extent + 1):
        s = -(-extent // n)
        s = min(extent, -(-s // granule) * granule)
        sizes.add(s)
    ordered = sorted(sizes)
    if len(ordered) <= factors:
        return ordered
    if factors == 1:          # one size: the whole axis (no striping along it)
        return [ordered[-1]]
    picks = {ordered[round(k * (len(ordered) - 1) / (factors - 1))] for k in range(factors)}
    return sorted(picks)


class PlanGenerator:
    """Costs candidate Plans for one graph on one device; caches per-Part stripe costs."""

    def __init__(self, graph: PlannerGraph, device: Device, options: PlannerOptions) -> None:
        self.graph = graph
        self.device = device
        self.options = options
        self.topo = graph.topological_parts()
        self.position = {p.name: i for i, p in enumerate(self.topo)}
        self.output_names = {t.name for t in graph.outputs}
        self.input_names = {t.name for t in graph.inputs}
        self.fm = device.region(device.fm_region)
        self.weight_home = device.region(device.weight_region)
        self.io = device.region(device.io_region)
        self._cost_cache: dict = {}
        self._sig_cache: dict = {}
        self._sig_ids: dict = {}
        self._shape_cache: dict = {}
        self._step_cache: dict = {}
        self._idle_cache: dict = {}
        self._specs_cache: dict[int, list[PlanSpec]] = {}
        self._fill_cache: dict = {}      # (signature, stripe shape): fill/drain cycles
        self._copy_cache: dict = {}      # signature: cycles of copying its weights to SRAM
        self._stage_cache: dict = {}     # (signature, stripe): weight staging bytes
        self._interior_cache: dict = {}

    # ----- where tensors live --------------------------------------------------------------
    def home_of(self, t: Tensor) -> str:
        if t.is_constant:
            return self.device.weight_region
        if t.name in self.input_names or t.name in self.output_names:
            return self.device.io_region
        return self.device.fm_region

    def staged(self, t: Tensor) -> bool:
        """A boundary tensor homed outside the feature-map region is streamed through SRAM."""
        return not t.is_constant and self.home_of(t) != self.device.fm_region

    # ----- stripe candidates ---------------------------------------------------------------
    def sink_configs(self, t: Tensor) -> list[StripeConfig]:
        shape = t.shape
        configs = [StripeConfig.whole(shape)]
        if len(shape) != 4:
            return configs
        mh, mw, _ = self.device.perf.micro_block
        _, h, w, _ = shape
        heights = _distinct_sizes(h, mh, self.options.stripe_factors)
        widths = [w]
        if self.options.multi_dimensional and w > 1:
            for n in range(2, self.options.max_width_tiles + 1):
                tile = min(w, -(-(-(-w // n)) // mw) * mw)
                if tile < w and tile not in widths:
                    widths.append(tile)
        for tw in widths:
            for th in heights:
                if th == h and tw == w:
                    continue
                order = (0, 2 if tw < w else 1, 1, 0) if th < h else (0, 0, 1, 0)
                configs.append(StripeConfig.tiled(shape, (shape[0], th, tw, shape[3]), order))
        return configs

    def modes(self) -> list[tuple[str, int]]:
        out = [("rolling", g) for g in self.options.rolling_granules]
        out.extend(self._windowed_modes())
        return out

    def _windowed_modes(self) -> list[tuple[str, int]]:
        """Modes whose buffers are the windows: lockstep rolling (planner.lockstep) holds the
        same windows as recompute with each row computed once, so it replaces recompute."""
        if self.options.lockstep_rolling:
            return [("lockstep", 0)]
        return [("recompute", 0)] if self.options.allow_recompute else []

    # ----- costing one Part ----------------------------------------------------------------
    def part_cost(self, part: Part, stripe: StripeConfig, weights: str) -> int:
        """Cycles of running ``part`` over every stripe of ``stripe`` (weights streamed from
        their home, or copied once to SRAM when ``weights == "sram"`` and it runs more than
        one stripe)."""
        sig = self._signature(part)
        key = (sig, stripe)
        both = self._cost_cache.get(key)
        if both is None:
            # Several stripes run back to back: the pipeline fills and drains once per Part,
            # not once per stripe (perf.fill_drain_cycles).
            b2b = stripe.total_stripes > 1
            streamed = copied = fill = 0
            for shape, n in sorted(stripe.count_stripes().items()):
                if 0 not in shape:
                    f, c = self._stripe_cycles(part, sig, shape, b2b)
                    streamed += n * f
                    copied += n * c
                    if b2b:     # found by _stripe_cycles(b2b=True) just now, or before
                        fill = max(fill, self._fill_cache[sig, shape])
            streamed += fill
            copied += fill + self._copy_cycles(part, sig)
            both = self._cost_cache[key] = (streamed, copied)
        return both[1] if weights == "sram" and stripe.total_stripes > 1 else both[0]

    def _stripe_cycles(self, part: Part, sig: int, shape: tuple[int, ...], b2b: bool = False
                       ) -> tuple[int, int]:
        """One stripe with weights streamed from their home and with weights in SRAM: compute
        overlapped with the transfers on each memory port (the NPU's DMA runs beside its
        MACs), whichever is longer, plus the per-stripe overhead. ``b2b``: the stripe runs
        back to back with others, its fill and drain hidden (charged once by part_cost)."""
        key = (sig, shape, b2b)
        hit = self._shape_cache.get(key)
        if hit is not None:
            return hit
        ports: dict[str, int] = {}
        weights = []
        for t, prop in zip(part.inputs, part.propagators):
            win = tuple(min(max(1, math.ceil(x)), e)
                        for x, e in zip(prop.apply_shape(shape), t.shape))
            nbytes = t.region_bytes(win)
            if t.is_constant:
                weights.append(nbytes)   # one encoded stream, placed below
                continue
            # a feature-map window is as many bursts as it has contiguous runs
            rows = contiguous_runs(win, t.shape)
            if self.staged(t):
                d = self.io
                ports[d.port_name] = ports.get(d.port_name, 0) + d.read_cycles(nbytes, rows)
            ports[self.fm.port_name] = ports.get(self.fm.port_name, 0) + \
                self.fm.read_cycles(nbytes, rows)
        out_bytes = part.output.region_bytes(shape)
        out_rows = contiguous_runs(shape, part.output.shape)
        ports[self.fm.port_name] = ports.get(self.fm.port_name, 0) + \
            self.fm.write_cycles(out_bytes, out_rows)
        if self.staged(part.output):
            ports[self.io.port_name] = ports.get(self.io.port_name, 0) + \
                self.io.write_cycles(out_bytes, out_rows)
        compute = part.performance(self.device.perf, shape)
        if b2b:
            fill = self._fill_cache[sig, shape] = self.device.perf.fill_drain_cycles(part, shape)
            compute -= fill
        overhead = self.device.perf.stripe_overhead_cycles(part)
        # The NPU's block fetches, as the hardware makes them: IFM blocks re-read per OFM
        # block (halos, depth blocks) and weights held in SRAM re-read per OFM block in H x W
        # (perf.fm_access_cycles, perf.weight_fetches). They bound the feature-map port when
        # they exceed the windows moved once.
        access = getattr(self.device.perf, "fm_access_cycles", None)
        fm_access = access(part, shape) if access is not None else 0
        fetches = self.device.perf.weight_fetches(part, shape) if weights else 1
        out, idle = [], []
        for region in (self.weight_home, self.fm):
            p = dict(ports)
            for nbytes in weights:
                p[region.port_name] = p.get(region.port_name, 0) + region.read_cycles(nbytes)
            if fm_access:
                in_sram = region is self.fm or fetches > 1
                rereads = sum(weights) * fetches if in_sram else 0
                bound = fm_access + (self.fm.read_cycles(rereads) if rereads else 0)
                p[self.fm.port_name] = max(p.get(self.fm.port_name, 0), bound)
            out.append(max(compute, max(p.values())) + overhead)
            idle.append(out[-1] - p.get(self.weight_home.port_name, 0))
        self._shape_cache[key] = hit = (out[0], out[1])
        self._idle_cache[key] = (idle[0], idle[1])
        return hit

    def _copy_cycles(self, part: Part, sig: int) -> int:
        """``weight_copy_cycles(part)`` once per signature: part_cost adds it to every
        request of the Part."""
        hit = self._copy_cache.get(sig)
        if hit is None:
            hit = self._copy_cache[sig] = self.weight_copy_cycles(part)
        return hit

    def _signature(self, part: Part) -> int:
        """Parts that cost the same whatever their names (repeated blocks share costs) share
        a signature; it is a small int so that the cost caches' keys hash cheaply."""
        sig = self._sig_cache.get(part.name)
        if sig is None:
            full = (part.kind, part.attrs, tuple((t.shape, t.dtype, t.is_constant,
                                                  t.compression_ratio, self.staged(t))
                                                 for t in part.inputs),
                    part.output.shape, part.output.dtype, self.staged(part.output),
                    part.propagators)
            sig = self._sig_cache[part.name] = self._sig_ids.setdefault(full, len(self._sig_ids))
        return sig

    def weight_copy_bytes(self, part: Part, stripe: StripeConfig, weights: str) -> int:
        if weights != "sram" or stripe.total_stripes <= 1:
            return 0
        return sum(t.bytes for _, t in part.constant_inputs)

    #: Output channels per streamed weight slice: the NPU consumes weights in OFM-depth
    #: slices (Vela's block depths are multiples of 16) staged in SRAM. A Plan has one staging
    #: double buffer, sized for its largest slice pair: the NPU runs one command at a time, and
    #: the DMA fills one half with the next command's slice while the other half is read.
    #: It is counted whatever the weight placement chosen (a Part whose weights are copied
    #: needs no slice; counting it anyway keeps the term a function of the Plan's stripes,
    #: which the search keeps in the key of its groups of walks so the DP stays exact).
    WEIGHT_SLICE_CHANNELS = 16

    def weight_stages(self, part: Part, stripe: StripeConfig | None = None
                      ) -> list[tuple[Tensor, tuple[int, ...], int]]:
        """(constant, slice shape, bytes) staged in SRAM for a Part whose weights stream from
        outside the feature-map region: two slices of WEIGHT_SLICE_CHANNELS output channels
        (or of all of them, if fewer). None when the NPU reads the weight stream in place
        (``Device.weights_read_in_place``) and every stripe of ``stripe`` reads it once
        (``perf.weight_fetches`` = 1: one OFM block in H x W): staging only saves re-reading
        the weights from their home for every OFM block, which is what Vela's unbuffered
        weights cost ("Weight buffer = 0 bytes (None)": flash read per OFM block, no SRAM)."""
        if not part.constant_inputs or self.device.weight_region == self.device.fm_region:
            return []
        if self.device.weights_read_in_place and stripe is not None and \
                self._reads_weights_once(part, stripe):
            return []
        oc = part.output.shape[-1]
        share = min(oc, self.WEIGHT_SLICE_CHANNELS) / oc
        out = []
        for _, t in part.constant_inputs:
            shape = list(t.shape)   # the output-channel axis: first (OHWI), last (depthwise)
            axis = 0 if t.shape[0] == oc else (len(shape) - 1 if t.shape[-1] == oc else None)
            if axis is not None:
                shape[axis] = min(oc, self.WEIGHT_SLICE_CHANNELS)
            out.append((t, tuple(shape), 2 * math.ceil(t.bytes * share)))
        return out

    def weight_stage_bytes(self, part: Part, stripe: StripeConfig | None = None) -> int:
        """Bytes of ``weight_stages``, memoised on the Part's signature (which holds its
        constants and output depth) and the stripe: the walks ask for every extension."""
        key = (self._signature(part), stripe)
        hit = self._stage_cache.get(key)
        if hit is None:
            hit = self._stage_cache[key] = sum(n for _, _, n in self.weight_stages(part, stripe))
        return hit

    def _reads_weights_once(self, part: Part, stripe: StripeConfig) -> bool:
        key = ("once", self._signature(part), stripe)
        hit = self._cost_cache.get(key)
        if hit is None:
            hit = self._cost_cache[key] = all(
                self.device.perf.weight_fetches(part, shape) <= 1
                for shape in stripe.count_stripes() if 0 not in shape)
        return hit

    # ----- weights prefetched across Plans -------------------------------------------------
    # The weight DMA runs ahead by one operation (Vela's weight pre-buffering: the copy of an
    # operation's weights into SRAM overlaps the previous operation, whose idle weight-memory
    # cycles hide it; legacy core ``npu_performance.py: estimate_full_op_performance``,
    # ``slack_cycles``). Only between one-Part unstriped Plans, as Vela pre-buffers only
    # operations outside cascades: then "the previous Plan" is known from the position alone
    # (Plans cover contiguous intervals), the credit min(idle of Plan A, copy of Part B) is a
    # function of Plan A and of the Part after it, and the DP carries one bit (were the next
    # Part's weights prefetched?) and stays exact (planner/proposals.py).

    def can_prefetch(self, part: Part) -> bool:
        """Whether ``part``'s weights may be copied to SRAM under the previous Plan."""
        return (self.options.weight_prefetch and self.device.weight_prefetch
                and bool(part.constant_inputs)
                and "sram" in self.options.weight_placements
                and self.device.weight_region != self.device.fm_region)

    def weight_copy_cycles(self, part: Part) -> int:
        """Cycles of copying all of ``part``'s constants from their home to SRAM."""
        return sum(self.weight_home.read_cycles(t.bytes) for _, t in part.constant_inputs)

    def prefetch_cost(self, j: int, prefetched: bool, prefetch_next: bool
                      ) -> tuple[int, int, int]:
        """(memory, cycles, credit) of the one-Part unstriped Plan [j, j].

        ``prefetched``: its weights were copied to SRAM under the previous Plan; it holds them
        (their bytes) and runs with them in SRAM, paying the copy (``weight_copy_cycles``), of
        which the previous Plan's credit takes off what that Plan's idle port hid.
        ``prefetch_next``: it copies the next Part's weights while it runs: it holds them too,
        and takes credit = min(its weight-port idle cycles, the next Part's copy) off its
        cycles (the hidden part of the copy, which the next Plan charges in full).
        """
        p = self.topo[j]
        whole = StripeConfig.whole(p.output.shape)
        stage = self._placements(p, whole, PlanSpec(whole, "recompute", 0), True, 0, 0, ())[0][0]
        key = (self._signature(p), whole.shape, False)
        flash, sram = self._stripe_cycles(p, key[0], whole.shape)
        idle = self._idle_cache[key][1 if prefetched else 0]
        if prefetched:
            memory = stage + self._constant_bytes(p)
            cycles = sram + self.weight_copy_cycles(p)
        else:
            memory = stage + self.weight_stage_bytes(p, whole)
            cycles = flash
        credit = 0
        if prefetch_next:
            nxt = self.topo[j + 1]
            credit = min(max(idle, 0), self.weight_copy_cycles(nxt))
            memory += self._constant_bytes(nxt)
        return memory, cycles - credit, credit

    @staticmethod
    def _constant_bytes(part: Part) -> int:
        return sum(t.bytes for _, t in part.constant_inputs)

    def prefetch_variants(self, j: int) -> list[tuple[bool, bool, int, int, tuple]]:
        """(prefetched, prefetch_next, memory, cycles, raw spec) of the Plan [j, j] run whole
        with cross-Plan prefetch, beside its plain candidate (``interval_frontiers``). A
        prefetch that hides nothing (credit 0) is not offered."""
        p = self.topo[j]
        ins = [False, True] if self.can_prefetch(p) else [False]
        outs = [False, True] if j + 1 < len(self.topo) and \
            self.can_prefetch(self.topo[j + 1]) else [False]
        whole = StripeConfig.whole(p.output.shape)
        out = []
        for pre in ins:
            for nxt in outs:
                if not (pre or nxt):
                    continue
                mem, cyc, credit = self.prefetch_cost(j, pre, nxt)
                if nxt and credit <= 0:
                    continue
                spec = PlanSpec(whole, "recompute", 0, (), pre, nxt)
                out.append((pre, nxt, mem, cyc, (spec, (p.name,) if pre else ())))
        return out

    def _build_prefetch(self, j: int, spec: PlanSpec) -> Plan:
        """The Plan [j, j] of a prefetch variant: the plain unstriped Plan with its Part's
        weights held in SRAM (``prefetched``: no staging buffer then) and/or the next Part's
        weights held while they are copied (``prefetch_next``)."""
        plain = self.build(j, j, replace(spec, weights=(), prefetched=False, prefetch_next=False))
        memory, cycles, credit = self.prefetch_cost(j, spec.prefetched, spec.prefetch_next)
        p = self.topo[j]
        configs = list(plain.tensor_configs)
        schedules = list(plain.part_schedules)

        def held(part: Part) -> list[TensorConfig]:
            return [TensorConfig(t.name, self.device.weight_region, self.device.fm_region,
                                 BufferMode.RECOMPUTE, t.shape, t.bytes)
                    for _, t in part.constant_inputs]

        if spec.prefetched:
            consts = {t.name for _, t in p.constant_inputs}
            configs = [tc for tc in configs if tc.tensor not in consts] + held(p)
            ps = schedules[0]
            schedules[0] = PartSchedule(ps.part, ps.stripe, ps.executions,
                                        cycles + credit, self.device.fm_region)
        if spec.prefetch_next:
            configs += held(self.topo[j + 1])
        return replace(plain, spec=spec, tensor_configs=tuple(configs),
                       part_schedules=tuple(schedules), memory_bytes=memory, cycles=cycles,
                       prefetch_credit=credit)

    # ----- one Plan in full --------------------------------------------------------------
    def build(self, start: int, end: int, spec: PlanSpec) -> Plan:
        """The Plan for interval [start, end] under ``spec``, with every buffer and schedule.

        Walks backwards like ``generate`` and costs with the same ``_placements`` and
        ``_interior``, so a built Plan always has the memory and cycles its candidate had.
        """
        if spec.prefetched or spec.prefetch_next:
            return self._build_prefetch(start, spec)
        sink = self.topo[end]
        compute: dict[str, StripeConfig] = {sink.name: spec.stripe}
        memory = cycles = 0
        configs: list[TensorConfig] = []
        schedules: list[PartSchedule] = []

        def add(p: Part, is_sink: bool) -> None:
            nonlocal memory, cycles
            st = compute[p.name]
            wp = spec.weights_for(p.name)
            options = self._placements(p, st, spec, is_sink, 0, 0, ())
            mem, cyc, _ = next(o for o in options if (p.name in o[2]) == (wp == "sram"))
            memory += mem
            cycles += cyc
            wbytes = self.weight_copy_bytes(p, st, wp)
            schedules.append(PartSchedule(
                p.name, st, st.total_stripes, cyc,
                self.device.fm_region if wbytes else self.device.weight_region))
            configs.extend(self._input_staging(p, st, spec, True)[1])
            if wbytes:
                for _, t in p.constant_inputs:
                    configs.append(TensorConfig(t.name, self.device.weight_region,
                                                self.device.fm_region, BufferMode.RECOMPUTE,
                                                t.shape, t.bytes))

        out = sink.output
        if self.staged(out):
            biggest = max(spec.stripe.count_stripes(), key=lambda s: (math.prod(s), s))
            configs.append(TensorConfig(out.name, self.home_of(out), self.device.fm_region,
                                        BufferMode.RECOMPUTE, biggest,
                                        2 * out.region_bytes(biggest), double_buffer=True))
        else:
            configs.append(TensorConfig(out.name, self.home_of(out), self.home_of(out),
                                        BufferMode.RECOMPUTE, out.shape, out.bytes))
        add(sink, True)
        for i in range(end - 1, start - 1, -1):
            p = self.topo[i]
            res = self._interior(p.output, self.graph.consumers(p.output), compute,
                                 spec.mode == "rolling", spec.granule,
                                 lockstep=spec.mode == "lockstep")
            if res is None:
                raise PlannerError(f"internal: interval [{start}, {end}] cannot be built "
                                   f"with {spec}")
            cfg, buf_shape, nbytes, mode = res
            compute[p.name] = cfg
            memory += nbytes
            configs.append(TensorConfig(p.output.name, self.device.fm_region,
                                        self.device.fm_region, mode, buf_shape, nbytes))
            add(p, False)
        parts = self.topo[start:end + 1]
        widest = max(parts, key=lambda p: (self.weight_stage_bytes(p, compute[p.name]),
                                           -parts.index(p)))
        for t, shape, nbytes in self.weight_stages(widest, compute[widest.name]):
            # the Plan's one weight staging double buffer, sized by its widest slice pair
            configs.append(TensorConfig(t.name, self.device.weight_region, self.device.fm_region,
                                        BufferMode.RECOMPUTE, shape, nbytes, double_buffer=True))
            memory += nbytes
        return Plan(start, end, tuple(p.name for p in parts), out.name, spec,
                    tuple(configs), tuple(reversed(schedules)), memory, cycles)

    def _windows(self, t: Tensor, cons: tuple[Part, ...], compute: dict
                 ) -> list[tuple[Part, int, StripeConfig]]:
        out = []
        for q in cons:
            for k, (inp, prop) in enumerate(zip(q.inputs, q.propagators)):
                if inp.name == t.name:
                    out.append((q, k, compute[q.name].propagate(prop, t.shape)))
        return out

    def _interior(self, t: Tensor, cons: tuple[Part, ...], compute: dict, rolling: bool,
                  granule: int, lockstep: bool = False):
        """Compute config and buffer of an intermediate tensor; None if it cannot be held."""
        wins = self._windows(t, cons, compute)
        prologue = None
        if lockstep and self.options.lockstep_rolling == "prologue":
            # lockstep with a prologue: consumers' steps aligned on the sink's
            ws, prologue = aligned_windows([w for _, _, w in wins],
                                           [prologue_of(compute[q.name]) for q, _, _ in wins])
            wins = [(q, k, w) for (q, k, _), w in zip(wins, ws)]
        first = wins[0][2]
        for _, _, w in wins[1:]:
            if (w.strides, w.stripes, w.order) != (first.strides, first.stripes, first.order):
                return None   # consumers step through the tensor differently
        rank = len(t.shape)
        if len(wins) == 1:
            union = first
        else:
            offset = tuple(min(w.offset[a] for _, _, w in wins) for a in range(rank))
            shape = tuple(math.ceil(max(w.offset[a] + w.shape[a] for _, _, w in wins)
                                    - offset[a]) for a in range(rank))
            union = StripeConfig(shape, t.shape, first.strides, first.order, first.stripes,
                                 offset)
        buf = list(union.max_spans())
        if lockstep and len(wins) == 1:
            cfg = lockstep_config(union, prologue)
            if cfg is not None:
                q, k, _ = wins[0]
                buf[cfg.rolling_axis] = lockstep_ring(cfg, compute[q.name], q.propagators[k],
                                                      t.shape[cfg.rolling_axis])
                return cfg, tuple(buf), t.region_bytes(buf), BufferMode.ROLLING
        axis = None
        if rolling and len(wins) == 1 and any(union.order):
            inner = max(union.order)
            cand = [a for a in range(rank) if union.order[a] == inner and union.stripes[a] > 1]
            if len(cand) == 1:
                axis = cand[0]
        if axis is None:
            if rolling and not self.options.rolling_mixed:
                return None
            if prologue is not None:   # windows held whole, stepping with the prologue
                union = with_prologue(union, prologue)
            return union, tuple(buf), t.region_bytes(buf), BufferMode.RECOMPUTE
        q, k, _ = wins[0]
        prop = q.propagators[k]
        b = prop.driving_axis(axis)
        lin = prop.linear(axis, b)
        if not self.options.rolling_mixed and (lin <= 0 or lin != int(lin)):
            return None
        if lin <= 0:
            return union, tuple(buf), t.region_bytes(buf), BufferMode.RECOMPUTE
        h, rows, lo, hi = _rolled_axis(compute[q.name], b, lin, prop.const(axis),
                                       prop.offset[axis], t.shape[axis],
                                       granule or max(1, math.floor(union.strides[axis])))
        if hi <= lo:          # the consumer's windows all fall in padding: nothing to roll
            if not self.options.rolling_mixed:
                return None
            return union, tuple(buf), t.region_bytes(buf), BufferMode.RECOMPUTE
        n = -(-(hi - lo) // h)
        shape, strides, stripes, offset = (list(union.shape), list(union.strides),
                                           list(union.stripes), list(union.offset))
        shape[axis] = strides[axis] = h
        stripes[axis] = n
        offset[axis] = lo
        cfg = unchecked_config(tuple(shape), t.shape, tuple(strides), union.order,
                               tuple(stripes), tuple(offset))
        buf[axis] = rows
        return cfg, tuple(buf), t.region_bytes(buf), BufferMode.ROLLING

    def _input_staging(self, p: Part, stripe: StripeConfig, spec: PlanSpec, build: bool
                       ) -> tuple[int, list[TensorConfig]]:
        """SRAM staging for ``p``'s inputs homed in DRAM (network inputs, so always at the
        Plan's boundary): a ring of the rows ``p`` reads, plus one chunk in flight so the DMA
        of the next rows overlaps compute (double buffering)."""
        total, cfgs = 0, []
        for t, prop in zip(p.inputs, p.propagators):
            if t.is_constant or not self.staged(t):
                continue
            win = stripe.propagate(prop, t.shape)
            buf = list(win.max_spans())
            if any(win.order):
                inner = max(win.order)
                axes = [a for a in range(len(t.shape))
                        if win.order[a] == inner and win.stripes[a] > 1]
                if len(axes) == 1:
                    a = axes[0]
                    b = prop.driving_axis(a)
                    h, rows, _, _ = _rolled_axis(
                        stripe, b, prop.linear(a, b), prop.const(a), prop.offset[a],
                        t.shape[a], max(1, spec.granule or math.floor(win.strides[a])))
                    buf[a] = min(t.shape[a], rows + h)
            nbytes = t.region_bytes(buf)
            total += nbytes
            if build:
                cfgs.append(TensorConfig(t.name, self.home_of(t), self.device.fm_region,
                                         BufferMode.ROLLING, tuple(buf), nbytes,
                                         double_buffer=True))
        return total, cfgs

    def specs(self, end: int) -> list[PlanSpec]:
        """The stripe and buffering choices tried for intervals ending at ``end``.

        Width tiling only pays in memory (its halos are recomputed), so it is paired with the
        smallest-ring buffering only (and with the windowed mode too where rolling Plans may
        not hold a window, ``rolling_mixed=False``: otherwise no tile would cross a residual
        fork); height striping is tried with every mode.

        Memoised per sink: the costing pre-walk (``cost_requests``) and the walk both ask,
        and with the same StripeConfig objects the cost and config memos they fill find each
        other's keys by identity (no field-by-field comparison).
        """
        hit = self._specs_cache.get(end)
        if hit is None:
            hit = self._specs_cache[end] = list(self._specs(end))
        return hit

    def _specs(self, end: int) -> Iterator[PlanSpec]:
        sink = self.topo[end]
        positive = [g for g in self.options.rolling_granules if g > 0]
        smallest = min(positive) if positive else (0 if self.options.rolling_granules else None)
        for stripe in self.sink_configs(sink.output):
            if stripe.total_stripes == 1:
                modes = [("recompute", 0)]
            elif len(stripe.shape) == 4 and stripe.stripes[2] > 1 and stripe.stripes[1] > 1:
                modes = [("rolling", smallest)] if smallest is not None else \
                    self._windowed_modes()[:1] or [("recompute", 0)]
                if smallest is not None and not self.options.rolling_mixed:
                    modes += self._windowed_modes()[:1]
            else:
                modes = self.modes()
            for mode, g in modes:
                yield PlanSpec(stripe, mode, g, ())

    def generate(self, end: int) -> Iterator[tuple[int, int, int, PlanSpec]]:
        """Every useful (start, memory, cycles, spec) candidate for intervals ending at ``end``
        (see ``candidates``)."""
        for start, mem, cyc, raw in self.candidates(end):
            yield start, mem, cyc, make_spec(raw)

    def candidates(self, end: int) -> Iterator[tuple[int, int, int, tuple]]:
        """Like ``generate`` but with the spec left raw (``make_spec`` builds it): most
        candidates are culled at once, so building their PlanSpec would be wasted."""
        for start, point_sets in self._walk(end):
            for stage, points in point_sets:
                for mem, cyc, spec, copied in points:
                    yield start, mem + stage, cyc, (spec, copied)

    def interval_frontiers(self, end: int) -> tuple[int, dict[int, list]]:
        """(candidate count, {start: Pareto frontier of (memory, cycles, raw spec)}) for every
        interval ending at ``end``: the frontiers of ``candidates`` culled per interval, with
        the same points and tie-breaks, but built for the survivors only."""
        count = 0
        by_start: dict[int, list] = {}
        for start, point_sets in self._walk(end):
            count += sum(len(points) for _, points in point_sets)
            if len(point_sets) == 1:        # one group: already a Pareto set, shifted
                stage, points = point_sets[0]
                by_start[start] = [(mem + stage, cyc, (spec, copied))
                                   for mem, cyc, spec, copied in points]
            else:
                by_start[start] = _pareto([(mem + stage, cyc, (spec, copied))
                                           for stage, points in point_sets
                                           for mem, cyc, spec, copied in points])
        return count, by_start

    def _walk(self, end: int) -> Iterator[tuple[int, list[tuple[int, list[tuple]]]]]:
        """(start, [(weight staging bytes, Pareto set) of each group]) for the intervals
        ``[start, end]``, start descending; a point is (memory, cycles, spec, Parts copied)
        without the group's staging buffer.

        All specs are walked backwards in lockstep. What a walk adds when it extends depends
        only on its buffering mode and on the compute stripes of the Parts that still read
        from outside the interval (the open Parts), so walks that agree on those form a group
        with one future: each extension is costed once per group, and the group keeps a single
        Pareto set of (memory, cycles) points over its members and their weight placements. A
        dropped point is dominated now and, its future being the same, forever: the frontier
        stays exact. A group remembers the stripes of its open Parts only: every later
        interior tensor is read by open Parts alone.

        Weight placement is chosen per Part: streaming a Part's weights from their home on
        every stripe, or copying them to SRAM once (when the Part runs several stripes and
        both placements are allowed). That knapsack is carried exactly by the Pareto sets.
        """
        sink = self.topo[end]
        groups: dict = {}
        for spec in self.specs(end):
            pts = [(m, c, spec, copied) for m, c, copied in
                   self._placements(sink, spec.stripe, spec, True, 0, 0, ())]
            # the staging buffer (a max over the Parts) is part of the group: equal in it
            key = (spec.mode, spec.granule, spec.stripe,
                   self.weight_stage_bytes(sink, spec.stripe))
            groups.setdefault(key, ({sink.name: spec.stripe}, []))[1].extend(pts)
        groups = {k: (c, _pareto(p)) for k, (c, p) in groups.items()}
        steps = self._steps(end)
        i = end
        while groups:
            yield i, [(stage, points) for (_, _, _, stage), (_, points) in groups.items()]
            step = next(steps, None)
            if step is None:
                return
            i, p, cons, readers, open_parts = step
            grown: dict = {}
            for (mode, granule, _, stage), (compute, points) in groups.items():
                reads = tuple(compute[q] for q in readers)
                cfg = self._interior_config(i, mode, granule, reads, cons, compute)
                if cfg is None:
                    continue
                options, cfg_stage = self._extension(i, mode, granule, reads, cfg,
                                                     points[0][2])
                new_compute = {q: cfg[0] if q == p.name else compute[q] for q in open_parts}
                key = (mode, granule, tuple(new_compute.values()), max(stage, cfg_stage))
                grow = _extended(points, options)
                slot = grown.get(key)
                if slot is None:        # already a Pareto set
                    grown[key] = [new_compute, grow, True]
                else:
                    slot[1].extend(grow)
                    slot[2] = False
            groups = {k: (c, pts if culled else _pareto(pts))
                      for k, (c, pts, culled) in grown.items()}

    def _steps(self, end: int) -> Iterator[tuple[int, Part, tuple, list, list]]:
        """(position, Part, its consumers, their names, the open Parts after it) for each Part
        a backward walk from ``end`` may extend over, nearest first; it stops at the plan size
        limit and at a Part whose output leaves the interval (read later, or a network
        output). Open Parts: those still reading from outside the interval."""
        min_start = max(0, end - self.options.max_plan_size + 1)
        members = [self.topo[end]]
        for i in range(end - 1, min_start - 1, -1):
            p = self.topo[i]
            t = p.output
            cons = self.graph.consumers(t)
            if t.name in self.output_names or not cons or \
                    any(self.position[q.name] > end for q in cons):
                return
            members.append(p)
            open_parts = [q.name for q in members if any(
                not x.is_constant and (self.graph.producer(x) is None or
                                       self.position[self.graph.producer(x).name] < i)
                for x in q.inputs)]
            yield i, p, cons, [q.name for q in cons], open_parts

    def _interior_config(self, i: int, mode: str, granule: int, reads: tuple, cons: tuple,
                         compute: dict):
        """(compute stripe of the Part at ``i``, its interior buffer bytes) when a group whose
        readers of that Part's output compute ``reads`` extends over it; None if it cannot.
        Memoised: the answer depends on nothing else (no cost), and walks from many sinks,
        and the costing pre-walk (``cost_requests``), repeat it."""
        key = (i, mode, granule, reads)
        hit = self._interior_cache.get(key, self)
        if hit is self:
            res = self._interior(self.topo[i].output, cons, compute, mode == "rolling",
                                 granule, lockstep=mode == "lockstep")
            hit = self._interior_cache[key] = None if res is None else (res[0], res[2])
        return hit

    def _extension(self, i: int, mode: str, granule: int, reads: tuple, cfg: tuple,
                   spec: PlanSpec):
        """(placement options, weight staging bytes) of the Part at ``i`` under its interior
        config ``cfg`` (from ``_interior_config``, which the memo key determines).
        Memoised: the answer depends on nothing else, and walks from many sinks repeat it."""
        key = (i, mode, granule, reads)
        hit = self._step_cache.get(key)
        if hit is None:
            p = self.topo[i]
            stripe, nbytes = cfg
            hit = self._step_cache[key] = (
                self._placements(p, stripe, spec, False, nbytes, 0, ()),
                self.weight_stage_bytes(p, stripe))
        return hit

    # ----- costing ahead of the walk (to spread it over processes) ----------------------------
    def cost_requests(self, end: int) -> list[tuple[Part, StripeConfig]]:
        """Every (Part, compute stripe) whose cost the walk of ``end`` asks for, found
        without costing anything: which Parts a walk reaches and with which stripes depends
        on the modes and the open Parts' stripes only, never on costs (costs decide only
        which points survive). Once ``warm_cost`` (or ``adopt_cost``) has seen them all,
        the walk asks the performance model nothing."""
        sink = self.topo[end]
        out = []
        fronts: dict = {}
        for spec in self.specs(end):
            out.append((sink, spec.stripe))
            fronts.setdefault((spec.mode, spec.granule, spec.stripe), {sink.name: spec.stripe})
        for i, p, cons, readers, open_parts in self._steps(end):
            if not fronts:
                break
            grown: dict = {}
            for (mode, granule, _), compute in fronts.items():
                cfg = self._interior_config(i, mode, granule,
                                            tuple(compute[q] for q in readers), cons, compute)
                if cfg is None:
                    continue
                out.append((p, cfg[0]))
                new_compute = {q: cfg[0] if q == p.name else compute[q] for q in open_parts}
                grown.setdefault((mode, granule, tuple(new_compute.values())), new_compute)
            fronts = grown
        return out

    def cost_key(self, part: Part, stripe: StripeConfig) -> tuple:
        """Requests with equal keys cost the same (same Part signature and stripe)."""
        return self._signature(part), stripe

    def warm_cost(self, part: Part, stripe: StripeConfig) -> tuple:
        """Cost one request (both weight placements, and whether every stripe reads the
        weights once) and return the values for ``adopt_cost`` of another generator."""
        self.part_cost(part, stripe, "flash")
        self.weight_stage_bytes(part, stripe)
        sig = self._signature(part)
        return self._cost_cache[(sig, stripe)], self._cost_cache.get(("once", sig, stripe))

    def warm_costs(self, requests: list[tuple[Part, StripeConfig]]) -> list[tuple]:
        """``warm_cost`` of each request, in order, with every stripe shape they need
        summarised first, Part by Part, by the performance model in one batch where it can
        (``perf.summarise_stripes``: the Ethos-U block searches vectorised over stripes)."""
        summarise = getattr(self.device.perf, "summarise_stripes", None)
        if summarise is not None:
            shapes: dict[Part, set] = {}
            for p, stripe in requests:
                shapes.setdefault(p, set()).update(stripe.count_stripes())
            for p, wanted in shapes.items():
                summarise(p, wanted)
        return [self.warm_cost(p, stripe) for p, stripe in requests]

    def adopt_cost(self, part: Part, stripe: StripeConfig, value: tuple) -> None:
        """Take what ``warm_cost(part, stripe)`` returned in another process (forked from
        this one, so that the two agree on the graph, device and options)."""
        both, once = value
        sig = self._signature(part)
        self._cost_cache[(sig, stripe)] = both
        if once is not None:
            self._cost_cache[("once", sig, stripe)] = once

    def _placements(self, p: Part, stripe: StripeConfig, spec: PlanSpec, is_sink: bool,
                    mem0: int, cyc0: int, copied: tuple[str, ...]
                    ) -> list[tuple[int, int, tuple[str, ...]]]:
        """(memory, cycles, Parts copied) that adding ``p`` costs, one per weight placement
        worth considering for it."""
        stage, _ = self._input_staging(p, stripe, spec, False)
        if is_sink and self.staged(p.output):
            biggest = max(stripe.count_stripes(), key=lambda s: (math.prod(s), s))
            stage += 2 * p.output.region_bytes(biggest)
        allowed = self.options.weight_placements
        copyable = stripe.total_stripes > 1 and bool(p.constant_inputs)
        out = []
        if "flash" in allowed or not copyable:
            out.append((mem0 + stage, cyc0 + self.part_cost(p, stripe, "flash"), copied))
        if "sram" in allowed and copyable:
            out.append((mem0 + stage + self.weight_copy_bytes(p, stripe, "sram"),
                        cyc0 + self.part_cost(p, stripe, "sram"), copied + (p.name,)))
        return out


def _extended(points: list, options: list) -> list:
    """The Pareto set of ``points`` (a Pareto set of (memory, cycles, spec, Parts copied),
    memory ascending) after adding one Part under each of its placement ``options``
    ((memory, cycles, Parts copied), one or two): equal to culling every point x option
    pair, listed point by point, with ``_pareto``, but building the survivors only."""
    if len(options) == 2:
        # One option no worse in memory and cycles than the other (two walks in three on
        # MobileNetV1): the points are strictly ascending in memory and descending in
        # cycles, so each point under the worse option comes after, and no faster than, the
        # same point under the better one, and the merge below would keep exactly the
        # better option's shift (the first option on a tie, as its listing comes first).
        (dm1, dc1, _), (dm2, dc2, _) = options
        if dm1 <= dm2 and dc1 <= dc2:
            options = options[:1]
        elif dm2 <= dm1 and dc2 <= dc1:
            options = options[1:]
    if len(options) == 1:           # a shift keeps a Pareto set one
        dm, dc, extra = options[0]
        return [(mem + dm, cyc + dc, spec, copied + extra) for mem, cyc, spec, copied in points]
    if len(options) != 2:
        grow = [(mem + dm, cyc + dc, spec, copied + extra)
                for mem, cyc, spec, copied in points for dm, dc, extra in options]
        return _pareto(grow)
    # Both shifted copies are sorted by (memory, cycles, position in the listing): merge them
    # in that order and keep each point faster than all before it, as _pareto would.
    (dm1, dc1, e1), (dm2, dc2, e2) = options
    n = len(points)
    ma = [pt[0] + dm1 for pt in points] + [math.inf]     # the sentinel ends a run
    ca = [pt[1] + dc1 for pt in points]
    mb = [pt[0] + dm2 for pt in points] + [math.inf]
    cb = [pt[1] + dc2 for pt in points]
    out = []
    best = math.inf
    a = b = 0
    while a < n or b < n:
        if ma[a] < mb[b] or (ma[a] == mb[b] and (ca[a] < cb[b] or (ca[a] == cb[b] and a <= b))):
            if ca[a] < best:
                _, _, spec, copied = points[a]
                out.append((ma[a], ca[a], spec, copied + e1))
                best = ca[a]
            a += 1
        else:
            if cb[b] < best:
                _, _, spec, copied = points[b]
                out.append((mb[b], cb[b], spec, copied + e2))
                best = cb[b]
            b += 1
    return out


def make_spec(raw: tuple) -> PlanSpec:
    """The PlanSpec of a raw candidate from ``PlanGenerator.candidates``."""
    base, copied = raw
    return replace(base, weights=copied)


_pareto = frontier


def contiguous_runs(block: tuple[int, ...], shape: tuple[int, ...]) -> int:
    """How many contiguous runs a sub-block of a row-major tensor is made of: trailing axes
    the block covers whole merge with the first partial axis before them into one run."""
    k = len(shape) - 1
    while k > 0 and block[k] == shape[k]:
        k -= 1
    return math.prod(block[:k]) if k > 0 else 1


def _rolled_axis(reader: StripeConfig, b: int, lin, const, off, extent: int, h: int
                 ) -> tuple[int, int, int, int]:
    """(chunk rows, ring rows, lo, hi: ``windows.ring_rows``) of a rolling buffer along an
    axis of ``extent`` rows read through one propagator row (``lin``, ``const``, ``off``) by
    ``reader``'s stripes along its axis ``b``, the producer computing chunks of ``h`` rows,
    or fewer when the windows span fewer. Memoised on the reader's scalars of that axis:
    keyed on the windows themselves, every lookup would hash a tuple as long as the stripe
    count."""
    return _rolled_axis_of(reader.offset[b], reader.strides[b], reader.shape[b],
                           reader.stripes[b], reader.extent[b], lin, const, off, extent, h)


@lru_cache(maxsize=200_000)
def _rolled_axis_of(r_off, r_stride, r_shape: int, r_stripes: int, r_extent: int, lin, const,
                    off, extent: int, h: int) -> tuple[int, int, int, int]:
    windows = tuple(window(c0, c1, lin, const, off, extent)
                    for c0, c1 in _axis_ranges(r_off, r_stride, r_shape, r_stripes, r_extent)
                    if c1 > c0)
    h = min(h, _span(windows))
    rows, lo, hi = ring_rows(windows, h, extent)
    return h, rows, lo, hi


def _span(windows: tuple[tuple[int, int], ...]) -> int:
    ws = [w for w in windows if w[1] > w[0]]
    if not ws:
        return 1
    return max(1, max(w[1] for w in ws) - min(w[0] for w in ws))


def clear_caches() -> None:
    """Forget every module-level memo (stripe ranges, propagations, windows, rings), so a
    benchmark times a cold search rather than one warmed by the run before it."""
    from planner import stripes
    from planner.perf import ethos_u
    for fn in (stripes._axis_ranges, stripes._axis_max_span, stripes._axis_sizes,
               stripes._count_stripes, stripes._propagate, _rolled_axis_of,
               ethos_u._block_axis, ethos_u._depth_axis, ethos_u._fitting_blocks,
               ethos_u._depth_candidates, ethos_u._dpu_cycles_of, ethos_u._window_op):
        fn.cache_clear()
