"""Budget sweeps of the cascading planner, with reference points from a naive schedule and Vela.

Plain functions with no TVM import, shared by ``tvmc plan --sweep-budget`` and the notebooks:

* :func:`parse_sweep` / :func:`log_budgets`: ``"128KiB:2MiB:16"`` -> 16 log-spaced budgets.
* :func:`run_sweep`: models x accelerator configs, each planned once (the Pareto frontier does
  not depend on the budget), then the fastest Proposal within every budget is selected, exactly
  as ``planner.api.plan(budget=...)`` does. The naive layer-by-layer schedule
  (``PlannerOptions(max_plan_size=1)``) and, when ``ethos-u-vela`` is importable, Vela's
  ``--optimise Size`` / ``Performance`` results (``planner.vela_run.vela_point``) are
  computed alongside as separate tasks.
  Tasks run in-process (``executor="serial"``), on a local pool of processes (``"local"``), or
  on a Dask cluster (a scheduler address or a ``dask.distributed.Client``).
* :func:`write_sweep_csv`, :func:`write_points_csv`, :func:`plot_sweep`, :func:`save_figure`,
  :func:`summary`: the outputs.

Every task function takes and returns plain picklable values, so it runs unchanged in another
process or on a Dask worker (which must have tvm-ethos installed).
"""
from __future__ import annotations

import bisect
import concurrent.futures as cf
import csv
import inspect
import math
import multiprocessing
import os
import time
from dataclasses import dataclass, field

from planner.api import load_graph, parse_size
from planner.devices import get_device
from planner.errors import PlannerError
from planner.options import PlannerOptions
from planner.progress import Progress
from planner.proposals import ProposalSearch
from planner.vela_run import VELA_MODES, vela_available, vela_point

__all__ = [
    "SweepResult", "parse_sweep", "log_budgets", "run_sweep", "frontier_task", "naive_task",
    "vela_available", "write_sweep_csv", "write_points_csv", "plot_sweep",
    "save_figure", "summary", "Progress",
]

#: Columns of ``sweep.csv``, one row per (model, accelerator config, budget).
SWEEP_COLUMNS = ("model", "accelerator_config", "io_region", "budget_bytes", "feasible",
                 "peak_bytes", "cycles", "cascades")
#: Columns of ``points.csv``: the whole frontier and the reference points.
POINT_COLUMNS = ("model", "accelerator_config", "io_region", "kind", "memory_bytes", "cycles")


# ---------------------------------------------------------------------------------------------
# Budgets


def parse_sweep(text: str) -> tuple[int, int, int]:
    """``"LO:HI:N"`` (sizes as :func:`planner.api.parse_size` reads them) -> (lo, hi, n)."""
    parts = str(text).split(":")
    hint = f"cannot read budget sweep {text!r}; write LO:HI:N, e.g. 128KiB:2MiB:16"
    if len(parts) != 3:
        raise PlannerError(hint)
    try:
        lo, hi = parse_size(parts[0]), parse_size(parts[1])
        n = int(parts[2])
    except (PlannerError, ValueError):
        raise PlannerError(hint) from None
    if lo <= 0:
        raise PlannerError(f"budget sweep {text!r}: LO must be > 0 bytes (budgets are "
                           "log-spaced)")
    if hi < lo:
        raise PlannerError(f"budget sweep {text!r}: HI ({hi} bytes) is below LO ({lo} bytes)")
    if not 1 <= n <= 10000:
        raise PlannerError(f"budget sweep {text!r}: N must be from 1 to 10000, got {n}")
    return lo, hi, n


def log_budgets(lo: int, hi: int, n: int) -> list[int]:
    """``n`` budgets in bytes, log-spaced from ``lo`` to ``hi`` inclusive, ascending."""
    if n == 1:
        return [int(lo)]
    ratio = hi / lo
    out = [int(round(lo * ratio ** (i / (n - 1)))) for i in range(n)]
    out[0], out[-1] = int(lo), int(hi)
    return out


# ---------------------------------------------------------------------------------------------
# Tasks (module level, picklable arguments and results)


def _options(options: dict | None):
    return PlannerOptions(**(options or {}))


def _where(model: str, config: str) -> str:
    return f"{os.path.basename(model)} on {config}"


def _search(graph, device, options, planner_workers):
    """ProposalSearch, with ``workers`` when this planner version parallelises internally."""
    if planner_workers is not None and \
            "workers" in inspect.signature(ProposalSearch).parameters:
        return ProposalSearch(graph, device, options, workers=planner_workers)
    return ProposalSearch(graph, device, options)


def frontier_task(model: str, config: str, io_region: str, budgets: list[int],
                  options: dict | None = None, planner_workers: int | None = None) -> dict:
    """Plan ``model`` once and select the fastest Proposal within each budget.

    Returns ``{"frontier": [(bytes, cycles)...], "rows": [...], "plan_candidates", "seconds",
    "graph", "parts"}``; a row has the :data:`SWEEP_COLUMNS` values of one budget plus
    ``frontier_index`` (None where no Proposal fits). ``planner_workers``: processes the
    planner itself may use (None: its default; 1 inside a pool or on a Dask worker, whose
    daemonic processes cannot have children and whose cores the sweep already uses).
    """
    t0 = time.perf_counter()
    try:
        graph = load_graph(model)
        search = _search(graph, get_device(config, io_region=io_region), _options(options),
                         planner_workers)
    except PlannerError as e:
        raise PlannerError(f"{_where(model, config)}: {e}") from None
    front = search.frontier
    memories = [m for m, _ in front]
    built: dict[int, object] = {}
    rows = []
    for budget in budgets:
        row = {"budget_bytes": int(budget), "feasible": False, "peak_bytes": None,
               "cycles": None, "cascades": None, "frontier_index": None}
        # The fastest frontier point within the budget: what search.select(budget) returns
        # (the frontier is sorted by memory, cycles falling), each Proposal rebuilt once.
        k = bisect.bisect_right(memories, int(budget)) - 1
        if k >= 0:
            if k not in built:
                built[k] = search.proposal(k)
            chosen = built[k]
            row.update(feasible=True, peak_bytes=chosen.memory_bytes, cycles=chosen.cycles,
                       cascades=len(chosen.plans), frontier_index=k)
        rows.append(row)
    return {"frontier": [tuple(p) for p in front], "rows": rows,
            "plan_candidates": search.plan_candidates, "graph": graph.name,
            "parts": len(graph.parts), "seconds": time.perf_counter() - t0}


def naive_task(model: str, config: str, io_region: str, options: dict | None = None,
               planner_workers: int | None = None) -> dict:
    """The naive layer-by-layer schedule: the fastest Proposal with one Part per Plan."""
    opts = dict(options or {})
    opts["max_plan_size"] = 1
    try:
        search = _search(load_graph(model), get_device(config, io_region=io_region),
                         _options(opts), planner_workers)
    except PlannerError as e:
        raise PlannerError(f"{_where(model, config)} (naive schedule): {e}") from None
    chosen = search.select(None)
    return {"memory_bytes": chosen.memory_bytes, "cycles": chosen.cycles,
            "cascades": len(chosen.plans)}


# ---------------------------------------------------------------------------------------------
# Results


@dataclass
class SweepResult:
    """One (model, accelerator config) of a sweep."""
    model: str
    config: str
    io_region: str
    budgets: list[int]
    frontier: list[tuple[int, int]] = field(default_factory=list)
    rows: list[dict] = field(default_factory=list)
    naive: dict | None = None
    vela: dict[str, dict] = field(default_factory=dict)
    plan_candidates: int = 0
    seconds: float = 0.0

    @property
    def name(self) -> str:
        return os.path.splitext(os.path.basename(self.model))[0]

    @property
    def min_memory(self) -> int:
        return self.frontier[0][0]

    def vela_points(self) -> dict[str, tuple[int, int]]:
        """``{"Size": (sram bytes, cycles), ...}`` for the Vela runs that succeeded."""
        return {k: (v["sram_bytes"], v["cycles"]) for k, v in self.vela.items()
                if "error" not in v}


def _is_dask_client(obj) -> bool:
    return type(obj).__name__ == "Client" and type(obj).__module__.startswith("distributed")


def _connect(scheduler):
    """A dask.distributed Client for a scheduler address (or the Client given)."""
    if _is_dask_client(scheduler):
        return scheduler, False
    try:
        from dask.distributed import Client  # lazy: optional extra (dask)
    except ImportError:
        raise PlannerError("--scheduler needs dask.distributed, which is not installed: "
                           "pip install 'dask[distributed]'") from None
    try:
        return Client(scheduler, timeout=10), True
    except (OSError, TimeoutError, ValueError) as e:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise PlannerError(f"cannot connect to the Dask scheduler at {scheduler!r}: "
                           f"{msg}") from None


def run_sweep(models, configs, budgets, *, io_region: str = "sram",
              options: dict | None = None, naive: bool = True, vela: bool | None = None,
              executor="local", workers: int = 2, progress: bool = True) -> list[SweepResult]:
    """Sweep ``budgets`` (bytes, or sizes such as "300KiB") over models x accelerator configs.

    ``vela``: None runs Vela where it is importable and the config is an Ethos-U; True requires
    it; False skips it. ``executor``: ``"serial"`` (in this process), ``"local"`` (a process
    pool of ``workers``), a Dask scheduler address such as ``"tcp://host:8786"``, or a
    ``dask.distributed.Client``. Results come back in models x configs order.
    Raises :class:`PlannerError` for bad input or a model the planner cannot plan.
    """
    models = [models] if isinstance(models, str) else list(models)
    configs = [configs] if isinstance(configs, str) else list(configs)
    budgets = sorted(parse_size(b) for b in budgets)
    if not models or not configs or not budgets:
        raise PlannerError("a sweep needs at least one model, one config and one budget")
    for c in configs:
        get_device(c, io_region=io_region)  # validates the name and io_region
    for m in models:
        if not os.path.isfile(m):
            raise PlannerError(f"model file {m!r} does not exist")
    _options(options)  # validates
    if vela is None:
        vela = vela_available()
    elif vela and not vela_available():
        raise PlannerError("Vela reference points need ethos-u-vela: pip install "
                           "'ethos-u-vela==5.2.0'")

    serial = executor == "serial" or (executor == "local" and workers <= 1)
    # In a pool or on Dask the sweep's tasks use the cores; in-process the planner may.
    pw = None if serial else 1
    results = {(m, c): SweepResult(m, c, io_region, budgets) for m in models for c in configs}
    tasks = []   # (key, what, fn, args); heaviest first so the pool stays busy
    by_size = sorted(results, key=lambda mc: -os.path.getsize(mc[0]))
    here = {m: os.path.abspath(m) for m in models}  # workers may run in another directory
    for m, c in by_size:
        tasks.append(((m, c), "frontier", frontier_task,
                      (here[m], c, io_region, budgets, options, pw)))
    for m, c in by_size:
        if vela and c.startswith("ethos-u") and m.endswith(".tflite"):
            for mode in VELA_MODES:
                tasks.append(((m, c), f"vela {mode}", vela_point, (here[m], c, mode)))
        if naive:
            tasks.append(((m, c), "naive", naive_task, (here[m], c, io_region, options, pw)))

    def store(key, what, value):
        r = results[key]
        if what == "frontier":
            r.frontier, r.rows = value["frontier"], value["rows"]
            r.plan_candidates, r.seconds = value["plan_candidates"], value["seconds"]
        elif what == "naive":
            r.naive = value
        else:
            r.vela[what.split()[1]] = value

    label = lambda key, what: f"{os.path.basename(key[0])} {key[1]} {what}"  # noqa: E731
    with Progress(len(tasks), "plan sweep", enabled=progress) as bar:
        if serial:
            for key, what, fn, args in tasks:
                store(key, what, fn(*args))
                bar.update(1, label(key, what))
        elif executor == "local":
            ctx = multiprocessing.get_context("spawn")
            pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
            try:
                futs = {pool.submit(fn, *args): (key, what) for key, what, fn, args in tasks}
                for fut in cf.as_completed(futs):
                    key, what = futs[fut]
                    store(key, what, fut.result())
                    bar.update(1, label(key, what))
            finally:
                pool.shutdown(wait=True, cancel_futures=True)
        else:
            client, owned = _connect(executor)
            try:
                from dask.distributed import as_completed  # lazy: optional extra (dask)
                futs = {}
                for key, what, fn, args in tasks:
                    futs[client.submit(fn, *args, pure=False)] = (key, what)
                try:
                    for fut in as_completed(list(futs)):
                        key, what = futs[fut]
                        store(key, what, fut.result())
                        bar.update(1, label(key, what))
                finally:
                    client.cancel(list(futs))
            finally:
                if owned:
                    client.close()
    return [results[(m, c)] for m in models for c in configs]


# ---------------------------------------------------------------------------------------------
# Outputs


def write_sweep_csv(results: list[SweepResult], path: str) -> None:
    """One row per (model, config, budget): :data:`SWEEP_COLUMNS`; empty cells where infeasible."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(SWEEP_COLUMNS)
        for r in results:
            for row in r.rows:
                w.writerow([r.name, r.config, r.io_region, row["budget_bytes"],
                            int(row["feasible"]),
                            *("" if row[k] is None else row[k]
                              for k in ("peak_bytes", "cycles", "cascades"))])


def write_points_csv(results: list[SweepResult], path: str) -> None:
    """The whole frontier (kind ``frontier``) and the reference points (``naive``,
    ``vela_size``, ``vela_performance``) of every (model, config)."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(POINT_COLUMNS)
        for r in results:
            head = [r.name, r.config, r.io_region]
            for m, c in r.frontier:
                w.writerow(head + ["frontier", m, c])
            if r.naive:
                w.writerow(head + ["naive", r.naive["memory_bytes"], r.naive["cycles"]])
            for mode, (m, c) in r.vela_points().items():
                w.writerow(head + [f"vela_{mode.lower()}", m, c])


def plot_sweep(result: SweepResult, ax=None, *, title: str | None = None):
    """Peak memory (KiB, log) against estimated cycles on ``ax`` (a new pyplot figure if None):
    the frontier as a step line, the Proposal chosen at each budget, the budgets that fit
    nothing, the naive schedule and Vela's points. Returns the axes."""
    if ax is None:
        import matplotlib.pyplot as plt  # lazy: optional extra (matplotlib)
        _, ax = plt.subplots(figsize=(7, 4.5))
    kib = 1024.0
    front = result.frontier
    xs = [m / kib for m, _ in front]
    ys = [c for _, c in front]
    right = max([xs[-1]] + [b / kib for b in result.budgets]
                + ([result.naive["memory_bytes"] / kib] if result.naive else [])
                + [m / kib for m, _ in result.vela_points().values()]) * 1.05
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.step(xs + [right], ys + [ys[-1]], where="post", color="tab:blue", lw=1.5,
            label=f"planner frontier ({len(front)} proposals)")
    ax.plot(xs, ys, ".", color="tab:blue", ms=3)
    feas = [r for r in result.rows if r["feasible"]]
    if feas:
        ax.scatter([r["peak_bytes"] / kib for r in feas], [r["cycles"] for r in feas],
                   s=60, facecolors="none", edgecolors="tab:orange", lw=1.5, zorder=3,
                   label=f"chosen within a budget ({len(feas)} of {len(result.rows)} fit)")
    for b in result.budgets:
        ax.axvline(b / kib, color="0.85", lw=0.6, zorder=0)
    bad = [r["budget_bytes"] / kib for r in result.rows if not r["feasible"]]
    if bad:
        ax.plot(bad, [ys[0]] * len(bad), "x", color="tab:red", ms=6,
                label=f"budget below the minimum ({len(bad)})")
    if result.naive:
        ax.plot(result.naive["memory_bytes"] / kib, result.naive["cycles"], "s",
                color="tab:green", ms=8, label="naive layer-by-layer")
    marks = {"Size": ("^", "tab:purple"), "Performance": ("D", "tab:brown")}
    for mode, (m, c) in result.vela_points().items():
        ax.plot(m / kib, c, marks[mode][0], color=marks[mode][1], ms=8,
                label=f"Vela --optimise {mode}")
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # lazy: optional extra
    plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("peak SRAM (KiB, network input/output included)")
    ax.set_ylabel("estimated cycles")
    ax.set_title(title or f"{result.name} on {result.config}"
                 + ("" if result.io_region == "sram" else f" (io in {result.io_region})"))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=7)
    return ax


def save_figure(results: list[SweepResult], path: str) -> None:
    """One panel per (model, config), written with the Agg canvas (no display needed)."""
    from matplotlib.figure import Figure  # lazy: optional extra (matplotlib)
    n = len(results)
    cols = min(n, 2)
    rows = math.ceil(n / cols)
    fig = Figure(figsize=(7 * cols, 4.5 * rows))
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax, r in zip(axes.flat, results):
        plot_sweep(r, ax)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def summary(result: SweepResult) -> str:
    """The text a sweep prints for one (model, config)."""
    out = [f"{result.name} on {result.config} (io in {result.io_region}): "
           f"{len(result.frontier)} frontier proposals from "
           f"{result.frontier[0][0] / 1024:.1f} KiB ({result.frontier[0][1]:,} cycles) to "
           f"{result.frontier[-1][0] / 1024:.1f} KiB ({result.frontier[-1][1]:,} cycles); "
           f"planned in {result.seconds:.2f} s",
           f"{'budget KiB':>11} {'fits':>4} {'peak KiB':>10} {'cycles':>13} {'cascades':>8}"]
    for row in result.rows:
        if row["feasible"]:
            out.append(f"{row['budget_bytes'] / 1024:>11.1f} {'yes':>4} "
                       f"{row['peak_bytes'] / 1024:>10.1f} {row['cycles']:>13,} "
                       f"{row['cascades']:>8}")
        else:
            out.append(f"{row['budget_bytes'] / 1024:>11.1f} {'no':>4} {'-':>10} {'-':>13} "
                       f"{'-':>8}")
    if result.naive:
        n = result.naive
        out.append(f"naive layer-by-layer: {n['memory_bytes'] / 1024:.1f} KiB, "
                   f"{n['cycles']:,} cycles")
    for mode in VELA_MODES:
        v = result.vela.get(mode)
        if v is None:
            continue
        if "error" in v:
            out.append(f"vela --optimise {mode}: not available ({v['error']})")
        else:
            out.append(f"vela --optimise {mode}: {v['sram_bytes'] / 1024:.1f} KiB SRAM used, "
                       f"{v['cycles']:,} cycles")
    return "\n".join(out)
