"""How the compile path runs the planner: its options and its devices, checked up front.

``compile(..., budget=..., memory_pools=..., planner_options=..., plan=True)``:
:func:`planning_options` validates the options before any TVM work, :func:`check_devices`
builds each accelerator's planner Device with the user's memory pools, and
:func:`budget_for` says what each subgraph is planned within. The plan stage itself is
``pipeline.plan``; its scheduled PrimFuncs are handed to ``relax.ext.<npu>``
(``codegen.scheduled_primfuncs``), which builds them instead of the unscheduled ones.
TVM-free, so the CLI reads these options without importing TVM.

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
from dataclasses import dataclass, field

from planner.api import parse_size
from planner.budgets import (
    NONE,
    SIZE,
    SIZE_SOURCE,
    SMALLEST,
    SMALLEST_SOURCE,
    SYSTEM,
    resolve_budget,
)
from planner.errors import PlannerError
from planner.options import PlannerOptionError, PlannerOptions
from tvm_ethos.backends.base import NpuBackend
from tvm_ethos.backends.registry import get_backend
from tvm_ethos.errors import OptionError

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
    enabled = options.pop("plan", True)
    if not isinstance(enabled, bool):
        raise OptionError(f"option 'plan': bad value {enabled!r}; allowed values: True, False")
    budget = options.pop("budget", SYSTEM)
    if isinstance(budget, str) and budget.strip().lower() in (SYSTEM, NONE, SMALLEST, SIZE):
        budget = {NONE: None}.get(budget.strip().lower(), budget.strip().lower())
    elif budget is not None:
        budget = _size(budget, "option 'budget' (a size, 'system', 'smallest', 'size' or "
                               "None)")
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
def budget_for(opts: PlanningOptions, device) -> tuple[int | None, str]:
    """The budget a subgraph is planned within and where it came from: the one given, capped
    by the size of a feature-map memory pool; by default the device's SRAM (pools included,
    planner.budgets)."""
    budget, whence = resolve_budget(opts.budget, device)
    pool = opts.pools.get(device.fm_region, {}) if device is not None else {}
    if whence in (SMALLEST_SOURCE, SIZE_SOURCE):   # within the pool where one is given
        return pool.get("size"), whence
    if "size" in pool and (budget is None or pool["size"] < budget):
        budget, whence = pool["size"], f"the {device.fm_region} memory pool"
    return budget, whence
