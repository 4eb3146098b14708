"""Human-readable tables of a planning result, in the spirit of Vela's --verbose-schedule."""
from __future__ import annotations

import math

from planner.graph import PlannerGraph
from planner.proposals import Proposal


def kib(n: int) -> str:
    return f"{n / 1024:.1f}"


def layer_rows(graph: PlannerGraph, proposal: Proposal) -> list[dict]:
    """One row per Part: its cascade, its largest (clipped) stripe and how many it runs, the
    buffer holding its output, cycles."""
    parts = {p.name: p for p in graph.parts}
    rows = []
    for cid, plan in enumerate(proposal.plans):
        configs = {tc.tensor: tc for tc in plan.tensor_configs}
        for ps in plan.part_schedules:
            part = parts[ps.part]
            tc = configs.get(part.output.name)
            rows.append({
                "cascade": cid, "part": ps.part, "operator": part.kind,
                "stripe": list(max(ps.stripe.count_stripes(),
                                   key=lambda shp: (math.prod(shp), shp))),
                "stripes": ps.executions,
                "buffer": (tc.buffer_mode.value if ps.part != plan.parts[-1] else "output")
                if tc else "-",
                "region": tc.copy_region if tc else "-",
                "bytes": tc.buffer_bytes if tc else 0,
                "weights": ps.weights_region, "cycles": ps.cycles,
            })
    return rows


#: The per-layer table's columns: the plan table (``tvmc plan``, ``python -m planner``) and the
#: compile table (``tvmc compile``, ``CompiledModel.plan_table``) both print these.
TABLE_HEAD = (f"{'casc':>4} {'part':<24} {'operator':<17} {'stripe':<16} {'#str':>5} "
              f"{'buffer':<9} {'region':<6} {'bytes':>9} {'weights':<7} {'cycles':>11}")


def table_lines(rows: list[dict]) -> list[str]:
    """The head, one line per :func:`layer_rows` row, and the rules around them."""
    out = [TABLE_HEAD, "-" * len(TABLE_HEAD)]
    for r in rows:
        out.append(f"{r['cascade']:>4} {str(r['part'])[:24]:<24} {str(r['operator'])[:17]:<17} "
                   f"{'x'.join(map(str, r['stripe'])):<16} {r['stripes']:>5} "
                   f"{str(r['buffer']):<9} {str(r['region']):<6} {r['bytes']:>9,} "
                   f"{str(r['weights']):<7} {r['cycles']:>11,}")
    out.append("-" * len(TABLE_HEAD))
    return out


def total_line(label: str, cascades: int, peak_bytes: int, cycles: int) -> str:
    """A table's total: peak SRAM in KiB and bytes, estimated cycles."""
    return (f"{label}: {cascades} cascades, peak {kib(peak_bytes)} KiB ({peak_bytes:,} B), "
            f"{cycles:,} cycles (estimated)")


def layer_table(graph: PlannerGraph, proposal: Proposal) -> str:
    out = table_lines(layer_rows(graph, proposal))
    out.append(total_line("total", len(proposal.plans), proposal.memory_bytes, proposal.cycles))
    if proposal.estimated_stream_bytes:
        out.append(f"command stream: {proposal.estimated_stream_bytes:,} B of flash beside the "
                   "weights (estimated)")
    return "\n".join(out)


def frontier_table(frontier: list[tuple[int, int]], chosen: int | None = None,
                   max_rows: int | None = None) -> str:
    """The frontier, memory ascending; with ``max_rows``, evenly spaced rows (both ends and
    the chosen point always shown)."""
    keep = range(len(frontier))
    if max_rows and len(frontier) > max_rows:
        step = (len(frontier) - 1) / (max_rows - 1)
        keep = sorted({round(k * step) for k in range(max_rows)} |
                      ({chosen} if chosen is not None else set()))
    out = [f"{'#':>3} {'peak KiB':>10} {'cycles':>13}", "-" * 28]
    for k in keep:
        m, c = frontier[k]
        mark = "  <- chosen" if k == chosen else ""
        out.append(f"{k:>3} {kib(m):>10} {c:>13,}{mark}")
    if len(keep) < len(frontier):
        out.append(f"({len(frontier)} points; {len(keep)} shown)")
    return "\n".join(out)
