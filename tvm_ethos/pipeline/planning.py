"""The planner in the compile path: plan every NPU subgraph, schedule it, check its memory.

``compile(..., budget=..., memory_pools=..., planner_options=..., plan=True)``:

1. :func:`planning_options` validates the options up front (before any TVM work);
2. :func:`plan_subgraphs`, for every NPU subgraph of the partitioned module (after its constants
   became parameters, so that its PrimFunc is the one the emulator build sees): TE graph ->
   ``PlannerGraph`` (``part_matchers``) -> ``ProposalSearch`` on the target's device (the
   accelerator config / variant, memory regions overridden by ``memory_pools``) -> the fastest
   Proposal within the budget -> ``schedule.apply_proposal`` -> ``schedule.measure`` and
   ``schedule.check`` (planned == scheduled bytes per scope, per Plan, and the peak; a mismatch
   is a :class:`~tvm_ethos.emulator.schedule.MemoryMismatchError`);
3. the scheduled PrimFuncs are handed to ``relax.ext.<npu>`` (``codegen.scheduled_primfuncs``),
   which builds them instead of the unscheduled ones.

Which planner modes are realized: RECOMPUTE cascades (any stripe shape, 2-D tiles, multi-reader
tensors), lockstep rolling buffers (``planner.lockstep``: RECOMPUTE's windows held as rings,
each row computed once; on by default with a prologue, ``lockstep_rolling="prologue"``: the
stripe loop starts before the sink's first stripe so that every ring is the steady one;
``True`` plans without it, ``False`` without rings), weight copies to SRAM and the
weight staging double buffer, and the planner's demand-driven rolling buffers filled one row
at a time (``rolling_granules=(1,)``, on by default) as line-buffer cascades
(``planner.line_buffer``, ``tvm_ethos.emulator.line_buffer``: one step loop finer than the sink's
stripes, each Part computing its next row when its period comes round). Other granules, and
rolling Plans that keep a tensor which cannot roll as a RECOMPUTE window, are not realized:
the compile path fixes ``rolling_mixed=False`` (rfcs/0005-planner-in-compile-path.md).
Network inputs and outputs live where Vela's default memory mode puts them
(``backends.planner_device.network_io_region``): in SRAM on an Ethos-U55 (Shared_Sram) and
an Ethos-N, in the DRAM arena on an Ethos-U65 (Dedicated_Sram), where the NPU reads and
writes them in place (``Device.io_read_in_place``): the plan's SRAM holds only what the
cascades keep between them.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field

from planner.budgets import NONE, SMALLEST, SMALLEST_SOURCE, SYSTEM
from tvm_ethos.errors import CompileError, MemoryBudgetError, OptionError

#: The planner options whose other values only planner studies use: field -> (the values the
#: compile path realizes, why). The planner's defaults are among them (planner.options).
REALIZED_PLANNER_OPTIONS = {
    "rolling_granules": (((1,), ()), "the compile path realizes rolling buffers filled one row "
                         "at a time, as line-buffer cascades (rfcs/0005)"),
    "rolling_mixed": ((False,), "the compile path's line-buffer cascades need every "
                      "intermediate tensor of a rolling Plan to roll"),
    "weight_prefetch": ((False,), "TensorIR has no form for a weight copy that crosses Plans "
                        "(a copy is realized in the Plan that reads it)"),
}
POOL_KEYS = {
    "size": "size", "read_bandwidth": "read_bytes_per_cycle", "read_bw": "read_bytes_per_cycle",
    "write_bandwidth": "write_bytes_per_cycle", "write_bw": "write_bytes_per_cycle",
    "read_latency": "read_latency", "write_latency": "write_latency", "burst": "burst",
}


@dataclass
class PlanningOptions:
    enabled: bool = True
    budget: int | str | None = "system"                # bytes, "system" or None (fastest)
    pools: dict = field(default_factory=dict)        # region name -> {field: value}
    planner: object = None                            # planner.options.PlannerOptions

    def key(self) -> dict:
        """A JSON-able description (compiled-model cache key, report)."""
        return {"plan": self.enabled, "budget": self.budget,
                "memory_pools": {k: dict(sorted(v.items())) for k, v in sorted(self.pools.items())},
                "planner_options": _options_json(self.planner)}


def _options_json(opts) -> dict:
    if opts is None:
        return {}
    return {
        k: (list(v) if isinstance(v, tuple) else v) for k, v in dataclasses.asdict(opts).items()
    }


def _size(value, what: str) -> int:
    from planner.api import parse_size
    from planner.errors import PlannerError

    if isinstance(value, bool):
        raise OptionError(f"{what}: {value!r} is not a memory size; write e.g. 300KiB or 307200")
    try:
        return parse_size(value)
    except (PlannerError, TypeError, ValueError) as err:
        raise OptionError(f"{what}: {err}") from None


def _number(value, what: str, integer: bool) -> float | int:
    """A non-negative int (``integer``) or number from an int, float or string."""
    kind = "a non-negative integer" if integer else "a positive number"
    v = None
    if not isinstance(value, bool):
        try:
            if integer:
                v = int(value, 0) if isinstance(value, str) else value
                v = v if isinstance(v, int) else None
            else:
                v = float(value) if isinstance(value, (str, int, float)) else None
        except (TypeError, ValueError):
            v = None
    if v is None or v < 0:
        raise OptionError(f"{what}: bad value {value!r}; expected {kind}")
    return v


def parse_memory_pools(pools) -> dict:
    """tvmc-style memory pools -> {name: {MemoryRegion field: value}}.

    Accepted: ``"sram:300KiB"``, ``"sram:300KiB:read_bw=8:write_bw=8:read_latency=32:
    write_latency=32:burst=32"``, a dict ``{"name": "sram", "size": "300KiB", ...}``, a list
    of those, or a mapping ``{"sram": {"size": ..., ...}}``. Bandwidths are bytes per NPU
    cycle, latencies cycles, burst bytes."""
    if pools is None:
        return {}
    if isinstance(pools, dict) and "name" not in pools:
        items = [dict(v, name=k) if isinstance(v, dict) else {"name": k, "size": v}
                 for k, v in pools.items()]
    elif isinstance(pools, (str, dict)):
        items = [pools]
    elif isinstance(pools, (list, tuple)):
        items = list(pools)
    else:
        raise OptionError(f"memory_pools: expected a string such as 'sram:300KiB', a dict or a "
                          f"list of them, not {type(pools).__name__}")
    out: dict = {}
    for item in items:
        if isinstance(item, str):
            fields = item.split(":")
            if len(fields) < 2 or not fields[0]:
                raise OptionError(f"memory_pools: cannot read {item!r}; write name:size"
                                  "[:key=value...], e.g. 'sram:300KiB:read_bw=8:burst=32'")
            d = {"name": fields[0], "size": fields[1]}
            for kv in fields[2:]:
                k, sep, v = kv.partition("=")
                if not sep:
                    raise OptionError(f"memory_pools: cannot read {kv!r} in {item!r}; write "
                                      "key=value")
                d[k.strip()] = v.strip()
            item = d
        if not isinstance(item, dict) or "name" not in item:
            raise OptionError(f"memory_pools: each pool needs a name, got {item!r}")
        name = str(item["name"])
        spec = {}
        for k, v in item.items():
            if k == "name":
                continue
            if k not in POOL_KEYS:
                raise OptionError(f"memory_pools: pool {name!r}: unknown key {k!r}; allowed: "
                                  f"{', '.join(sorted(POOL_KEYS))}")
            field_name = POOL_KEYS[k]
            what = f"memory_pools: pool {name!r} {k}"
            if field_name == "size":
                spec[field_name] = _size(v, what)
            elif field_name.endswith("bytes_per_cycle"):
                x = _number(v, what, integer=False)
                if x <= 0:
                    raise OptionError(f"{what}: bad value {v!r}; expected a positive number")
                spec[field_name] = float(x)
            else:
                x = _number(v, what, integer=True)
                if field_name == "burst" and x < 1:
                    raise OptionError(f"{what}: bad value {v!r}; expected an integer >= 1")
                spec[field_name] = int(x)
        if name in out:
            raise OptionError(f"memory_pools: pool {name!r} is given twice")
        out[name] = spec
    return out


def planning_options(options: dict) -> PlanningOptions:
    """Pop and validate the planning options of a ``compile`` call."""
    from planner.errors import PlannerError
    from planner.options import PlannerOptionError, PlannerOptions

    enabled = options.pop("plan", True)
    if not isinstance(enabled, bool):
        raise OptionError(f"option 'plan': bad value {enabled!r}; allowed values: True, False")
    budget = options.pop("budget", SYSTEM)
    if isinstance(budget, str) and budget.strip().lower() in (SYSTEM, NONE, SMALLEST):
        budget = {NONE: None}.get(budget.strip().lower(), budget.strip().lower())
    elif budget is not None:
        budget = _size(budget, "option 'budget' (a size, 'system', 'smallest' or None)")
    pools = parse_memory_pools(options.pop("memory_pools", None))
    raw = options.pop("planner_options", None)
    if raw is None:
        raw = {}
    if isinstance(raw, PlannerOptions):
        raw = dataclasses.asdict(raw)
    if not isinstance(raw, dict):
        raise OptionError(f"option 'planner_options': expected a dict or PlannerOptions, not "
                          f"{type(raw).__name__}")
    try:
        popts = PlannerOptions.from_mapping(raw)
    except PlannerOptionError as err:
        raise OptionError(f"planner option {err.option}={err.value!r} is invalid; allowed: "
                          f"{err.allowed}") from None
    except (PlannerError, TypeError) as err:
        raise OptionError(f"option 'planner_options': {err}") from None
    for name, (realized, why) in REALIZED_PLANNER_OPTIONS.items():
        if getattr(popts, name) not in realized:
            raise OptionError(
                f"planner option {name}={raw[name]!r} is a planner study setting: {why}; "
                f"compile takes {' or '.join(map(repr, realized))} (the default is "
                f"{getattr(PlannerOptions(), name)!r})")
    if not enabled and (isinstance(budget, int) or pools):
        raise OptionError("options 'budget' and 'memory_pools' need plan=True")
    return PlanningOptions(enabled, budget, pools, popts)


# ------------------------------------------------------------------------------- devices
def make_device(spec, opts: PlanningOptions):
    """The planner Device for a target, with the user's memory pools (its backend's
    ``NpuBackend.planner_device``), or None: a host target, or no performance model."""
    from tvm_ethos.backends.base import NpuBackend
    from tvm_ethos.backends.registry import get_backend

    backend = get_backend(spec.backend_id)
    if not isinstance(backend, NpuBackend):
        return None
    return backend.planner_device(spec.options, opts.pools)


def check_devices(tl, opts: PlanningOptions) -> dict:
    """Devices per accelerator target, built up front (option errors before any work)."""
    devices = {}
    for spec in tl.accelerators:
        dev = make_device(spec, opts) if opts.enabled else None
        if dev is None and opts.enabled and (isinstance(opts.budget, int) or opts.pools):
            raise OptionError(f"target {spec}: the planner has no model of this accelerator, so "
                              "'budget' and 'memory_pools' cannot be honoured")
        devices[spec.backend_id] = dev
    return devices


# ------------------------------------------------------------------------------- planning
def _budget(opts: PlanningOptions, device) -> tuple[int | None, str]:
    """The budget a subgraph is planned within and where it came from: the one given, capped
    by the size of a feature-map memory pool; by default the device's SRAM (pools included,
    planner.budgets)."""
    from planner.budgets import resolve_budget

    budget, whence = resolve_budget(opts.budget, device)
    pool = opts.pools.get(device.fm_region, {}) if device is not None else {}
    if whence == SMALLEST_SOURCE:   # the least memory, within the pool where one is given
        return pool.get("size"), whence
    if "size" in pool and (budget is None or pool["size"] < budget):
        budget, whence = pool["size"], f"the {device.fm_region} memory pool"
    return budget, whence


def plan_subgraphs(pmod, report, tl, opts: PlanningOptions, devices: dict,
                   lowered: dict | None = None, proposals_out: dict | None = None):
    """Plan and schedule every NPU subgraph of ``pmod`` (constants attached). ``lowered``: the
    subgraphs already lowered by ``attach_npu_constants(..., lowered_out=...)``, by symbol.
    ``proposals_out``, when given, receives ``(match, proposal, device)`` per planned symbol:
    what a command-stream generator executes (``Backend.command_stream``) and the Device
    whose performance model costed it.

    Returns (plan report dict, {symbol: scheduled PrimFunc})."""
    from planner.api import select
    from planner.errors import PlannerError
    from planner.proposals import ProposalSearch
    from planner.report import layer_rows
    from tvm_ethos.emulator import schedule as S
    from tvm_ethos.emulator.part_matchers import match_subgraph
    from tvm_ethos.pipeline.codegen import lower_npu_subgraphs, npu_functions

    rep = {"planned": opts.enabled, "options": opts.key(), "subgraphs": {}, "layers": [],
           "peak_memory_bytes": None, "cycles": None, "devices": {}}   # None: not planned
    scheduled = {}
    if not opts.enabled:
        return rep, scheduled
    cascade = 0
    for spec in tl.accelerators:
        device = devices.get(spec.backend_id)
        fns = npu_functions(pmod, {spec.backend_id})
        if not fns:
            continue
        if device is None:
            rep["devices"][spec.backend_id] = None
            for gv, f in fns:
                rep["subgraphs"][str(f.attrs["global_symbol"])] = {
                    "backend": spec.backend_id, "planned": False,
                    "reason": f"the planner has no model of {spec}"}
            continue
        rep["devices"][spec.backend_id] = device.name
        budget, whence = _budget(opts, device)
        syms = {str(f.attrs["global_symbol"]) for _, f in fns}
        have = {k: v for k, v in (lowered or {}).items() if k in syms}
        if set(have) != syms:
            have = lower_npu_subgraphs(pmod, {spec.backend_id})
        for sym in sorted(have, key=_natural):
            lw = have[sym]
            match = match_subgraph(lw, sym)
            try:
                search = ProposalSearch(match.graph, device, opts.planner)
            except PlannerError as err:
                raise CompileError(f"planning NPU subgraph {sym} ({spec.backend_id}, "
                                   f"{device.name}) failed: {err}") from None
            try:
                proposal = select(search, budget, whence)
            except PlannerError as err:
                raise MemoryBudgetError(f"NPU subgraph {sym} ({spec.backend_id}, {device.name}): "
                                        f"{err}", budget, search.frontier[0][0], sym) from None
            func = S.apply_proposal(lw, match, proposal, device)
            result = S.measure(lw, match, proposal, func, device, tvm_count=False)
            S.check(result)
            scheduled[sym] = func
            if proposals_out is not None:
                proposals_out[sym] = (match, proposal, device)
            front = search.frontier
            sub = {
                "backend": spec.backend_id, "device": device.name, "planned": True,
                "budget_bytes": budget, "budget_source": whence,
                "peak_memory_bytes": proposal.memory_bytes, "cycles": proposal.cycles,
                "smallest_memory_bytes": front[0][0], "fastest_cycles": front[-1][1],
                "frontier": [{"memory_bytes": m, "cycles": c} for m, c in front],
            }   # no timings here: the report is saved and must be byte-identical run to run
            sub.update(result.to_json())
            rep["subgraphs"][sym] = sub
            for row in layer_rows(match.graph, proposal):
                row = dict(row)
                row["cascade"] = cascade + row["cascade"]
                row["subgraph"] = sym
                rep["layers"].append(_jsonable(row))
            cascade += len(proposal.plans)
            rep["peak_memory_bytes"] = max(rep["peak_memory_bytes"] or 0, proposal.memory_bytes)
            rep["cycles"] = (rep["cycles"] or 0) + proposal.cycles
    del report
    # exactly what save / load round-trips (lists, not tuples; str keys)
    return json.loads(json.dumps(_jsonable(rep))), scheduled


def _natural(sym: str):
    import re

    return [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", sym)]


def _jsonable(v):
    from fractions import Fraction

    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, Fraction):
        return f"{v.numerator}/{v.denominator}" if v.denominator != 1 else int(v)
    if hasattr(v, "value") and not isinstance(v, (int, float, str)):
        return v.value
    return v


# ------------------------------------------------------------------------------- report
def format_table(rep: dict) -> str:
    """The per-layer plan table, in the spirit of Vela's --verbose-schedule /
    --verbose-performance: one row per Part, totals per subgraph and for the network. Its
    columns and units are the plan table's (planner.report); a subgraph or a network the
    planner did not plan says "not planned", never 0 cycles."""
    from planner.budgets import budget_line
    from planner.report import kib, table_lines, total_line
    from tvm_ethos.backends.registry import get_backend

    if not rep or not rep.get("planned"):
        return "planner: off (compile(..., plan=False)): not planned"
    out = []
    planned = 0
    for sym, sub in rep.get("subgraphs", {}).items():
        if not sub.get("planned"):
            out.append(f"{sym} on {sub.get('backend', '?')}: not planned "
                       f"({sub.get('reason', 'no planner')})")
            continue
        planned += 1
        out.append(f"{sym} on {sub['device']}")
        out.append(budget_line(sub["budget_bytes"], sub.get("budget_source", "given")))
        out.extend(table_lines([r for r in rep["layers"] if r.get("subgraph") == sym]))
        out.append(total_line(sym, len(sub["plans"]), sub["peak_memory_bytes"], sub["cycles"]))
        given = ", ".join(f"{k} {v:,} B" for k, v in sub["planned_bytes"].items())
        sched = ", ".join(f"{k} {v:,} B" for k, v in sub["scheduled_bytes"].items())
        out.append(f"   allocated per scope (every buffer of every cascade summed; the peak "
                   f"above sizes the arena): planned {given}; scheduled {sched} (scheduled TIR "
                   f"peak {sub['scheduled_peak_bytes']:,} B)")
        if sym in rep.get("streams", {}):
            out.extend(get_backend(sub["backend"]).stream_report_lines(rep["streams"][sym]))
    if not planned:
        out.append("network: not planned (no NPU subgraph on an accelerator the planner models)")
    else:
        out.append(f"network NPU peak {kib(rep['peak_memory_bytes'])} KiB "
                   f"({rep['peak_memory_bytes']:,} B), {rep['cycles']:,} NPU cycles (estimated)")
    return "\n".join(out)
