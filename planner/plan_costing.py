"""Costing the pieces of a Plan: a Part over the stripes of a StripeConfig, its weights in
their home or copied to SRAM (or prefetched under the previous Plan), and the SRAM staging of
tensors homed in DRAM.

A Part's cycles per stripe are the slower of its compute (the device's PerfModel) and each
memory port's traffic (the MemoryRegion bandwidths), plus the issue overhead of each NPU
operation: a convolution whose weights are staged runs each stripe as one operation per weight
slice (``planner.staged_slices``), so its weights streamed cost more operations than copied
whole. Costs are cached per Part *signature* (everything the costing reads of a Part but its
name), so identical layers under other names share them, and they can be computed ahead of
the walks in other processes (``warm_costs``, ``adopt_cost``).
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from planner import stripe_batch
from planner.device_model import Device
from planner.graph import Part, PlannerGraph, Tensor
from planner.memory import BufferMode, TensorConfig
from planner.options import PlannerOptions
from planner.plan import Buffering, PlanSpec, WeightPlacement
from planner.propagator import Propagator
from planner.staged_slices import SLICE_CHANNELS, STAGEABLE_KINDS, slice_count
from planner.stripes import StripeConfig, _axis_ranges
from planner.windows import ring_rows, window
from planner.work_memory import stripe_work_bytes, work_tensor

# Members bound once: read through their Enum class, each costs a Python-level lookup, and
# these are read on the hot paths.
_FLASH, _SRAM = WeightPlacement.FLASH, WeightPlacement.SRAM

#: ``_batched_shapes``' table of a signature none of whose shapes were batched (read only)
_NO_SHAPES: dict = {}


class PlanCosting:
    """Costs Parts, their weights and their staging for one graph on one device, with the
    per-Part stripe costs cached (the half of PlanGenerator that knows no interval)."""

    def __init__(self, graph: PlannerGraph, device: Device, options: PlannerOptions) -> None:
        self.graph = graph
        self.device = device
        self.options = options
        self.topo = graph.topological_parts()
        self.output_names = {t.name for t in graph.outputs}
        self.input_names = {t.name for t in graph.inputs}
        self.fm = device.region(device.fm_region)
        self.weight_home = device.region(device.weight_region)
        self.io = device.region(device.io_region)
        #: bytes that persist from one invocation to the next (an LSTM's states): every
        #: Plan holds them, whatever it runs, where the network's inputs and outputs live
        #: (TFLite Micro's arena keeps its variable tensors there; a feature-map region apart
        #: from it, an Ethos-U65's fast scratch, is a cache that keeps nothing between
        #: invocations), so they count in a Plan's memory only where that is the SRAM
        self.persistent = tuple((p.name, int(p.attr("state_bytes"))) for p in self.topo
                                if p.attr("state_bytes"))
        self.persistent_bytes = sum(n for _, n in self.persistent) \
            if device.io_region == device.fm_region else 0
        self._cost_cache: dict = {}
        self._sig_cache: dict = {}
        self._sig_ids: dict = {}
        self._shape_cache: dict = {}
        self._idle_cache: dict = {}
        self._fill_cache: dict = {}      # (signature, stripe shape): fill/drain cycles
        #: (signature, back to back): {stripe shape: (streamed, copied, fill/drain cycles,
        #: weight fetches or 0 where not known)} of the shapes ``_batch_stripe_cycles``
        #: costed, for ``_warm_summed``'s sums and ``_reads_weights_once``
        self._batched_shapes: dict = {}
        self._copy_cache: dict = {}      # signature: cycles of copying its weights to SRAM
        self._stage_cache: dict = {}     # (signature, stripe) or signature: staging bytes
        self._inputs_cache: dict = {}    # signature: _stripe_inputs
        self._output_cache: dict = {}    # signature: _stripe_output
        self._fetch_cache: dict = {}     # (signature, stripe shape): perf.weight_fetches
        self._staged_cache: dict = {}    # tensor name: staged
        self._staged_inputs: dict = {}   # Part name: its (input, propagator) pairs staged
        self._weight_bytes_of: dict = {}  # Part name: bytes of its constants

    # ----- where tensors live --------------------------------------------------------------
    def home_of(self, t: Tensor) -> str:
        if t.is_constant:
            return self.device.weight_region
        if t.name in self.input_names or t.name in self.output_names:
            return self.device.io_region
        return self.device.fm_region

    def staged(self, t: Tensor) -> bool:
        """A boundary tensor homed outside the feature-map region is streamed through SRAM,
        unless the device reads it in place (``Device.io_read_in_place``). Memoised per
        tensor: every Plan costed asks for each of its Parts' inputs."""
        hit = self._staged_cache.get(t.name)
        if hit is None:
            hit = self._staged_cache[t.name] = not t.is_constant and \
                self.home_of(t) != self.device.fm_region and not self.device.io_read_in_place
        return hit

    def _fm_port(self, t: Tensor):
        """The memory a feature map's bytes cross when the NPU reads or writes it: its home
        when that is read in place, else the feature-map region."""
        if self.device.io_read_in_place and not t.is_constant and \
                self.home_of(t) != self.device.fm_region:
            return self.io
        return self.fm

    # ----- costing one Part ----------------------------------------------------------------
    def part_cost(self, part: Part, stripe: StripeConfig, weights: WeightPlacement) -> int:
        """Cycles of running ``part`` over every stripe of ``stripe`` (weights streamed from
        their home, or copied once to SRAM when ``weights`` is SRAM and it runs more than
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
            streamed += fill + self._slice_cycles(part, stripe,
                                                  self.weight_stage_bytes(part, stripe))
            copied += fill + self._copy_cycles(part, sig)
            both = self._cost_cache[key] = (streamed, copied)
        return both[1] if weights == _SRAM and stripe.total_stripes > 1 else both[0]

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
        for t, prop, staged_in, m in self._stripe_inputs(part, sig):
            win = tuple(min(max(1, math.ceil(x)), e)
                        for x, e in zip(prop.apply_shape(shape), t.shape))
            nbytes = t.region_bytes(win)
            if m is None:
                weights.append(nbytes)   # one encoded stream, placed below
                continue
            # a feature-map window is as many bursts as it has contiguous runs
            rows = contiguous_runs(win, t.shape)
            if staged_in:
                d = self.io
                ports[d.port_name] = ports.get(d.port_name, 0) + d.read_cycles(nbytes, rows)
            ports[m.port_name] = ports.get(m.port_name, 0) + m.read_cycles(nbytes, rows)
        out_bytes = part.output.region_bytes(shape)
        out_rows = contiguous_runs(shape, part.output.shape)
        m, staged_out = self._stripe_output(part, sig)
        ports[m.port_name] = ports.get(m.port_name, 0) + m.write_cycles(out_bytes, out_rows)
        if staged_out:
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
        fm_access = self.device.perf.fm_access_cycles(part, shape)
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

    def _stripe_inputs(self, part: Part, sig: int) -> tuple[stripe_batch.InputSide, ...]:
        """Per input of ``part``: the tensor, its propagator, whether it is staged through
        SRAM from its home, the region whose port reads it (None for a constant), once per
        signature: ``_stripe_cycles`` asks for every stripe shape."""
        hit = self._inputs_cache.get(sig)
        if hit is None:
            hit = self._inputs_cache[sig] = tuple(
                stripe_batch.InputSide(t, prop, self.staged(t),
                                       None if t.is_constant else self._fm_port(t))
                for t, prop in zip(part.inputs, part.propagators))
        return hit

    def _batch_stripe_cycles(self, part: Part, alone: set[tuple[int, ...]],
                             back_to_back: set[tuple[int, ...]]) -> None:
        """Fill ``_stripe_cycles``' memos for the stripe shapes run alone and those run back
        to back with others not costed yet, the memory side of all of them on arrays
        (planner.stripe_batch, the same values); where the arrays could not be exact, left
        for ``_stripe_cycles`` to cost one by one."""
        sig = self._signature(part)
        perf = self.device.perf
        for b2b, wanted in ((False, alone), (True, back_to_back)):
            shapes = sorted(s for s in wanted if 0 not in s and
                            (sig, s, b2b) not in self._shape_cache)
            if not shapes:
                continue
            out_port, out_staged = self._stripe_output(part, sig)
            moved = stripe_batch.transfers(self._stripe_inputs(part, sig), part.output,
                                           out_port, out_staged, self.io, shapes)
            if moved is None:
                return
            terms = perf.stripe_terms(part, shapes, b2b)
            compute = np.array(terms.compute)
            fills = np.array(terms.fill_drain) if b2b else np.zeros(len(shapes), np.int64)
            fm_access = np.array(terms.fm_access)
            fetches = np.array(terms.weight_fetches) if moved.weights \
                else np.ones(len(shapes), np.int64)
            overhead = perf.stripe_overhead_cycles(part)
            if any(a.dtype != np.int64 for a in (compute, fills, fm_access, fetches)) or \
                    type(overhead) is not int:
                return
            got = stripe_batch.stripe_cycles(moved, compute - fills, overhead, fm_access,
                                             fetches, self.weight_home, self.fm)
            if got is None:
                return
            table = self._batched_shapes.setdefault((sig, b2b), {})
            weight_fetches = fetches.tolist() if moved.weights else [0] * len(shapes)
            for shape, cycles, idle, fill, fetch in zip(shapes, got[0], got[1], fills.tolist(),
                                                        weight_fetches):
                self._shape_cache[sig, shape, b2b] = cycles
                self._idle_cache[sig, shape, b2b] = idle
                if b2b:
                    self._fill_cache[sig, shape] = fill
                table[shape] = (cycles[0], cycles[1], fill if b2b else 0, fetch)
            if moved.weights:
                self._fetch_cache.update(zip(((sig, s) for s in shapes), weight_fetches))

    def _stripe_output(self, part: Part, sig: int) -> tuple:
        """(the region whose port writes ``part``'s output, whether it is staged out through
        SRAM), once per signature."""
        hit = self._output_cache.get(sig)
        if hit is None:
            hit = self._output_cache[sig] = (self._fm_port(part.output),
                                             self.staged(part.output))
        return hit

    def _copy_cycles(self, part: Part, sig: int) -> int:
        """``weight_copy_cycles(part)`` once per signature: part_cost adds it to every
        request of the Part."""
        hit = self._copy_cache.get(sig)
        if hit is None:
            hit = self._copy_cache[sig] = self.weight_copy_cycles(part)
        return hit

    def operations_per_stripe(self, part: Part, staging: int) -> int:
        """The operations the costing charges each stripe of ``part`` with its weights
        streamed, ``staging`` bytes of SRAM staging them: one per weight slice where the
        device runs a staged convolution slice by slice, else one. (In a Plan of several
        such Parts the stream stages only the one it sized the buffer for, and the others
        read their weights in place, one operation per stripe; the costing charges each as
        if staged, as it does their weights' reads.)"""
        if not staging or not self.device.sliced_staging or part.kind not in STAGEABLE_KINDS:
            return 1
        return slice_count(part.output.shape[-1])

    def _slice_cycles(self, part: Part, stripe: StripeConfig, staging: int,
                      stripes: int | None = None) -> int:
        """The issue overhead of the operations ``part`` runs beyond one per stripe with its
        weights streamed (``operations_per_stripe``); copied whole, a stripe is one
        operation. ``stripes``: how many stripes of ``stripe`` compute anything, where the
        caller has counted them already (``_warm_summed``)."""
        extra = self.operations_per_stripe(part, staging) - 1
        if not extra:
            return 0
        if stripes is None:
            stripes = sum(n for shape, n in stripe.count_stripes().items() if 0 not in shape)
        return stripes * extra * self.device.perf.stripe_overhead_cycles(part)

    def _signature(self, part: Part) -> int:
        """Parts that cost the same whatever their names (repeated blocks share costs) share
        a signature; it is a small int so that the cost caches' keys hash cheaply."""
        sig = self._sig_cache.get(part.name)
        if sig is None:
            full = (part.kind, part.attrs, tuple((t.shape, t.dtype, t.is_constant,
                                                  t.compression_ratio, self.staged(t),
                                                  self.home_of(t))
                                                 for t in part.inputs),
                    part.output.shape, part.output.dtype, self.staged(part.output),
                    self.home_of(part.output), part.propagators)
            sig = self._sig_cache[part.name] = self._sig_ids.setdefault(full, len(self._sig_ids))
        return sig

    def weight_copy_bytes(self, part: Part, stripe: StripeConfig, weights: WeightPlacement
                          ) -> int:
        if weights != _SRAM or stripe.total_stripes <= 1:
            return 0
        return sum(t.bytes for _, t in part.constant_inputs)

    def weight_stages(self, part: Part, stripe: StripeConfig | None = None
                      ) -> list[tuple[Tensor, tuple[int, ...], int]]:
        """(constant, slice shape, bytes) staged in SRAM for a Part whose weights stream from
        outside the feature-map region: two slices of ``SLICE_CHANNELS`` output channels (or
        of all of them, if fewer). A Plan has one staging double buffer, sized for its largest
        slice pair: the NPU runs one command at a time, and the DMA fills one half with the
        next command's slice while the other half is read. It is counted whatever the weight
        placement chosen (a Part whose weights are copied needs no slice; counting it anyway
        keeps the term a function of the Plan's stripes, which the search keeps in the key of
        its groups of walks so the DP stays exact).

        None when the NPU reads the weight stream in place (``Device.weights_read_in_place``)
        and every stripe of ``stripe`` reads it once (``perf.weight_fetches`` = 1: one OFM
        block in H x W): staging only saves re-reading the weights from their home for every
        OFM block, which is what Vela's unbuffered weights cost ("Weight buffer = 0 bytes
        (None)": flash read per OFM block, no SRAM)."""
        if not part.constant_inputs or self.device.weight_region == self.device.fm_region:
            return []
        if self.device.weights_read_in_place and stripe is not None and \
                self._reads_weights_once(part, stripe):
            return []
        oc = part.output.shape[-1]
        share = min(oc, SLICE_CHANNELS) / oc
        out = []
        for _, t in part.constant_inputs:
            shape = list(t.shape)   # the output-channel axis: first (OHWI), last (depthwise)
            axis = 0 if t.shape[0] == oc else (len(shape) - 1 if t.shape[-1] == oc else None)
            if axis is not None:
                shape[axis] = min(oc, SLICE_CHANNELS)
            out.append((t, tuple(shape), 2 * math.ceil(t.bytes * share)))
        return out

    def weight_stage_bytes(self, part: Part, stripe: StripeConfig | None = None) -> int:
        """Bytes of ``weight_stages``, memoised on the Part's signature (which holds its
        constants and output depth) and the stripe: the walks ask for every extension."""
        sig = self._signature(part)
        key = (sig, stripe)
        hit = self._stage_cache.get(key)
        if hit is None:
            hit = self._stage_cache[key] = self._stage_bytes(
                part, sig, stripe is not None and self._weights_in_place(part) and
                self._reads_weights_once(part, stripe))
        return hit

    def _stage_bytes(self, part: Part, sig: int, reads_once: bool) -> int:
        """``weight_stage_bytes`` once it is known whether every stripe of the config reads
        the weights in place once (``reads_once``: then none are staged). The stages depend
        on the config only through that, so their bytes are found once per signature."""
        if reads_once:
            return 0
        hit = self._stage_cache.get(sig)
        if hit is None:
            hit = self._stage_cache[sig] = sum(n for _, _, n in self.weight_stages(part))
        return hit

    def _weights_in_place(self, part: Part) -> bool:
        """Whether ``weight_stage_bytes`` asks ``_reads_weights_once`` of ``part``'s
        stripes: it has weights, homed outside the feature-map region and read in place."""
        return bool(self.device.weights_read_in_place and part.constant_inputs and
                    self.device.weight_region != self.device.fm_region)

    def _reads_weights_once(self, part: Part, stripe: StripeConfig) -> bool:
        sig = self._signature(part)
        key = ("once", sig, stripe)
        hit = self._cost_cache.get(key)
        if hit is None:
            # the fetches of the shapes _batch_stripe_cycles costed (its table for this
            # signature first: one lookup keyed by the shape alone), else the model's
            fetches, perf = self._fetch_cache, self.device.perf
            table = self._batched_shapes.get((sig, stripe.total_stripes > 1), _NO_SHAPES)
            hit = True
            for shape in stripe.count_stripes():
                row = table.get(shape)
                if row is None:
                    if 0 in shape:
                        continue
                    fetch = fetches.get((sig, shape))
                else:
                    fetch = row[3]
                if (fetch or perf.weight_fetches(part, shape)) > 1:
                    hit = False
                    break
            self._cost_cache[key] = hit
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
                and _SRAM in self.options.weight_placements
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
        plain = PlanSpec(whole, Buffering.RECOMPUTE, 0)
        stage = self._placements(p, whole, plain, True, 0, 0, ())[0][0]
        key = (self._signature(p), whole.shape, False)
        flash, sram = self._stripe_cycles(p, key[0], whole.shape)
        idle = self._idle_cache[key][1 if prefetched else 0]
        if prefetched:
            memory = stage + self._constant_bytes(p)
            cycles = sram + self.weight_copy_cycles(p)
        else:
            staging = self.weight_stage_bytes(p, whole)
            memory = stage + staging
            slicing = self._slice_cycles(p, whole, staging)   # the weight port idle meanwhile
            cycles, idle = flash + slicing, idle + slicing
        credit = 0
        if prefetch_next:
            nxt = self.topo[j + 1]
            credit = min(max(idle, 0), self.weight_copy_cycles(nxt))
            memory += self._constant_bytes(nxt)
        return memory, cycles - credit, credit

    @staticmethod
    def _constant_bytes(part: Part) -> int:
        return sum(t.bytes for _, t in part.constant_inputs)

    def staged_inputs(self, p: Part) -> tuple[tuple[Tensor, Propagator], ...]:
        """(input, propagator) of each of ``p``'s inputs staged through SRAM from its home
        (``staged``); most Parts have none: found once per Part."""
        staged = self._staged_inputs.get(p.name)
        if staged is None:
            staged = self._staged_inputs[p.name] = tuple(
                (t, prop) for t, prop in zip(p.inputs, p.propagators)
                if not t.is_constant and self.staged(t))
        return staged

    def _input_staging(self, p: Part, stripe: StripeConfig, spec: PlanSpec, build: bool
                       ) -> tuple[int, list[TensorConfig]]:
        """SRAM staging for ``p``'s inputs homed in DRAM (network inputs, so always at the
        Plan's boundary): a ring of the rows ``p`` reads, plus one chunk in flight so the DMA
        of the next rows overlaps compute (double buffering)."""
        total, cfgs = 0, []
        for t, prop in self.staged_inputs(p):
            win = stripe.propagate(prop, t.shape)
            buf = [max(1, n) for n in win.max_spans()]   # see plans.py: none read, one held
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

    def held_memory(self, p: Part, stripe: StripeConfig, is_sink: bool) -> list[TensorConfig]:
        """The buffers that are no tensor of the graph which a Plan holds for ``p``: its
        working memory while it computes stripes of ``stripe`` (``planner.work_memory``,
        listed under ``work_tensor``) and, for the Plan's sink (once per Plan), the
        persistent bytes (every LSTM's states, homed with the network's inputs and
        outputs)."""
        fm, io = self.device.fm_region, self.device.io_region
        work = stripe_work_bytes(p, stripe.shape)
        held = [(work_tensor(p.name), work, fm)] if work else []
        if is_sink:
            held += [(f"{name}:state", n, io) for name, n in self.persistent]
        return [TensorConfig(name, home, home, BufferMode.RECOMPUTE, (n,), n)
                for name, n, home in held]

    def cost_key(self, part: Part, stripe: StripeConfig) -> tuple:
        """Requests with equal keys cost the same (same Part signature and stripe)."""
        return self._signature(part), stripe

    def least_cycles(self) -> list[int]:
        """Per position of the topological order: the fewest cycles, in either weight
        placement, of any stripe its Part's signature has been costed in (0 where none):
        once every request of the walks is costed (``warm_costs``), no extension over that
        Part costs fewer (``walk_bound``)."""
        least: dict[int, int] = {}
        for key, both in self._cost_cache.items():
            if len(key) == 2:           # (signature, stripe): (streamed, copied) cycles
                low = min(both)
                if low < least.get(key[0], low + 1):
                    least[key[0]] = low
        return [least.get(self._signature(p), 0) for p in self.topo]

    def warm_cost(self, part: Part, stripe: StripeConfig) -> tuple:
        """Cost one request (both weight placements, and whether every stripe reads the
        weights once) and return the values for ``adopt_cost`` of another generator."""
        self.part_cost(part, stripe, _FLASH)
        self.weight_stage_bytes(part, stripe)
        sig = self._signature(part)
        return self._cost_cache[(sig, stripe)], self._cost_cache.get(("once", sig, stripe))

    def warm_costs(self, requests: list[tuple[Part, StripeConfig]]) -> list[tuple]:
        """``warm_cost`` of each request, in order, with every stripe shape they need
        summarised first, Part by Part, by the performance model in one batch where it can
        (``perf.summarise_stripes``: the Ethos-U block searches vectorised over stripes)."""
        # per Part, the stripe shapes of its requests of one stripe and of several (the
        # counts' keys added in C, not a (shape, back to back) pair built per shape)
        runs: dict[Part, tuple[set, set]] = {}
        for p, stripe in requests:
            sets = runs.get(p)
            if sets is None:
                sets = runs[p] = (set(), set())
            sets[stripe.total_stripes > 1].update(stripe.count_stripes())
        for p, (alone, b2b) in runs.items():
            self.device.perf.summarise_stripes(p, alone | b2b)
            self._batch_stripe_cycles(p, alone, b2b)
        return [self._warm_summed(p, stripe) for p, stripe in requests]

    def _warm_summed(self, part: Part, stripe: StripeConfig) -> tuple:
        """``warm_cost`` once the stripe shapes it needs are costed (``_batch_stripe_cycles``):
        ``part_cost``'s sums taken straight from the per-shape memos, where every shape is
        there; otherwise (a shape the arrays could not cost) ``warm_cost`` itself. The
        costing runs this once per request, thousands of times, so it skips the calls
        that part_cost makes per stripe shape."""
        sig = self._signature(part)
        key = (sig, stripe)
        both = self._cost_cache.get(key)
        if both is None:
            b2b = stripe.total_stripes > 1
            # one lookup per shape, keyed by the shape alone (``_batched_shapes``); where
            # weight_stage_bytes will ask whether every stripe reads the weights once
            # (``_reads_weights_once``), that is found in the same pass
            table = self._batched_shapes.get((sig, b2b), _NO_SHAPES)
            once = in_place = self._weights_in_place(part)
            perf = self.device.perf
            streamed = copied = fill = computed = 0
            for shape, n in stripe.count_stripes().items():
                hit = table.get(shape)
                if hit is None:
                    if 0 in shape:
                        continue
                    return self.warm_cost(part, stripe)
                f, c, d, fetch = hit
                streamed += n * f
                copied += n * c
                computed += n
                if d > fill:
                    fill = d
                if once and (fetch or perf.weight_fetches(part, shape)) > 1:
                    once = False
            if in_place:
                self._cost_cache.setdefault(("once", sig, stripe), once)
            # warm_cost's other half: the staging bytes, read off what was just found of the
            # weights' fetches
            staging = self._stage_cache.get(key)
            if staging is None:
                staging = self._stage_cache[key] = self._stage_bytes(part, sig,
                                                                     in_place and once)
            both = self._cost_cache[key] = (
                streamed + fill + self._slice_cycles(part, stripe, staging, computed),
                copied + fill + self._copy_cycles(part, sig))
        once = self._cost_cache.get(("once", sig, stripe))
        if key not in self._stage_cache:      # part_cost found ``both`` without the staging
            self.weight_stage_bytes(part, stripe)
            once = self._cost_cache.get(("once", sig, stripe))
        return both, once

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
        worth considering for it; its memory holds ``p``'s working memory
        (``planner.work_memory``)."""
        stage, _ = self._input_staging(p, stripe, spec, False)
        if is_sink:
            stage += self.persistent_bytes
        stage += stripe_work_bytes(p, stripe.shape)
        if is_sink and self.staged(p.output):
            biggest = max(stripe.count_stripes(), key=lambda s: (math.prod(s), s))
            stage += 2 * p.output.region_bytes(biggest)
        allowed = self.options.weight_placements
        copyable = stripe.total_stripes > 1 and bool(p.constant_inputs)
        streamed = self.part_cost(p, stripe, _FLASH)
        out = []
        if _FLASH in allowed or not copyable:
            out.append((mem0 + stage, cyc0 + streamed, copied))
        if _SRAM in allowed and copyable:
            # part_cost(p, stripe, SRAM) and weight_copy_bytes(p, stripe, SRAM), read off
            # their memos: the stripe runs several stripes, so its weights copy once
            out.append((mem0 + stage + self._weight_bytes(p),
                        cyc0 + self._cost_cache[self._signature(p), stripe][1],
                        copied + (p.name,)))
        return out

    def _weight_bytes(self, part: Part) -> int:
        """Bytes of ``part``'s constants, once per Part: every extension over a Part that
        may copy its weights asks."""
        hit = self._weight_bytes_of.get(part.name)
        if hit is None:
            hit = self._weight_bytes_of[part.name] = self._constant_bytes(part)
        return hit



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
    """Forget this module's memo of rolling-buffer rings, so a benchmark times a cold
    search."""
    _rolled_axis_of.cache_clear()
