"""Command streams side by side: Vela's own ``.tflite`` against tvm-ethos's generated stream,
both run on the functional Ethos-U model (``ethosu_stream``), for one model on one accelerator.

What each row measures comes from running the stream, not from an estimate:

* ``arena KiB`` / ``fast KiB``: the highest byte touched in the scratch arena (region 1) and in
  the fast scratch (region 2). Vela's default Ethos-U55 system keeps the arena in SRAM; its
  default Ethos-U65 system keeps the arena in DRAM and uses the SRAM as the fast scratch, so
  there "SRAM touched" is the fast column. tvm-ethos's planned streams do the same: the plan
  in the arena on an Ethos-U55, in the fast scratch on an Ethos-U65, whose arena holds only
  the network's input and output (rfcs/0007, Part 2);
* ``flash KiB``: the constant data the stream reads (encoded weights, bias/scale streams,
  LUTs, constant operands);
* ``DMA KiB``: every byte the stream's DMA commands move;
* ``ops`` / ``cmds``: NPU operations (``NPU_OP_*`` but STOP) and all commands;
* ``compile s``: Vela's wall time, or ``tvm_ethos.compile``'s;
* ``exact``: the outputs equal LiteRT's for one seeded random input (reference kernels; the
  optimized ones without XNNPack for 224x224 models, which the reference kernels take minutes
  on).

A side that cannot produce a stream (Vela failed; tvm-ethos kept the emulator for an
operator, see ``plan_report["streams"]``) is a row with the reason, never fatal.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StreamRow:
    """One stream's measured figures (``reason`` set, figures None, when there is none)."""

    model: str
    config: str
    who: str
    arena_bytes: int | None = None
    fast_bytes: int | None = None
    flash_bytes: int | None = None
    dma_bytes: int | None = None
    operations: int | None = None
    commands: int | None = None
    compile_seconds: float | None = None
    exact: bool | None = None
    reason: str = ""


def oracle_case(model_path: str, seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """(inputs, LiteRT's outputs) every stream of a model is checked against."""
    from tests.helpers.tflite_oracle import oracle, random_inputs

    xs = random_inputs(model_path, np.random.RandomState(seed))
    large = "224" in os.path.basename(model_path)
    return xs, oracle(model_path, xs, reference=not large)


def _same(got: list[np.ndarray], ref: list[np.ndarray]) -> bool:
    return len(got) == len(ref) and all(
        g.size == r.size and np.array_equal(g.reshape(r.shape), r) for g, r in zip(got, ref))


def _counts(commands: dict[str, int]) -> tuple[int, int]:
    from ethosu_stream.run import operation_count

    return operation_count(commands), sum(commands.values())


def vela_stream(model_path: str, config: str, optimise: str, case=None) -> StreamRow:
    """Vela ``--optimise optimise`` (its default system config), its stream run on the
    functional model and checked on ``case`` (:func:`oracle_case`)."""
    from ethosu_stream.tflite_custom_op import read_ethos_u_ops
    from ethosu_stream.tflite_graph import run_vela_model
    from planner.vela_run import VelaError, run_vela

    name = os.path.splitext(os.path.basename(model_path))[0]
    who = f"vela {optimise}"
    try:
        run = run_vela(model_path, config, "--optimise", optimise)
        ops = read_ethos_u_ops(run.tflite)
        xs, ref = case or oracle_case(model_path)
        outs, stats = run_vela_model(run.tflite, xs, config)
    except (VelaError, ValueError) as e:
        return StreamRow(name, config, who, reason=str(e).splitlines()[0][:100])
    n_ops, n_cmds = _counts(stats.commands)
    return StreamRow(name, config, who, stats.high_water.get(1, 0), stats.high_water.get(2, 0),
                     sum(len(op.flash) for op in ops), sum(stats.dma_bytes.values()), n_ops,
                     n_cmds, run.seconds, _same(outs, ref))


def tvm_ethos_stream(model_path: str, config: str, case=None, who: str = "tvm-ethos",
                     **options) -> StreamRow:
    """``tvm_ethos.compile`` for ``ethos-u`` on ``config`` (by default within the system
    config's SRAM; ``budget=`` in ``options`` plans within another) run with
    ``npu_runtime="stream"`` and checked on ``case`` (:func:`oracle_case`); the figures are
    the compile-time stream report's (the same functional model), summed over the NPU
    subgraphs. The stream executes the plan: its stripes, rings and arena layout."""
    import tvm_ethos

    name = os.path.splitext(os.path.basename(model_path))[0]
    t0 = time.perf_counter()
    cm = tvm_ethos.compile(model_path, target=f"ethos-u -accelerator_config={config},llvm",
                           npu_runtime="stream", cache_dir=False, **options)
    seconds = time.perf_counter() - t0
    streams = (cm.plan_report or {}).get("streams") or {}
    missing = [f"{sym}: {e.get('reason', 'no stream')}" for sym, e in sorted(streams.items())
               if not e.get("generated")]
    if not streams or missing:
        return StreamRow(name, config, who, compile_seconds=seconds,
                         reason=("; ".join(missing) or "no NPU subgraph")[:100])
    entries = [streams[s] for s in sorted(streams)]
    commands: dict[str, int] = {}
    for e in entries:
        for k, n in e["commands"].items():
            commands[k] = commands.get(k, 0) + n
    n_ops, n_cmds = _counts(commands)
    xs, ref = case or oracle_case(model_path)
    return StreamRow(name, config, who,
                     max(e["scratch_high_water_bytes"] for e in entries),
                     max(e.get("fast_scratch_high_water_bytes", 0) for e in entries),
                     sum(e["flash_bytes"] for e in entries),
                     sum(sum(e["dma_bytes"].values()) for e in entries), n_ops, n_cmds, seconds,
                     _same(cm.run(*xs), ref))


def sram_bytes(row: StreamRow) -> int | None:
    """The SRAM a stream touched: the fast scratch where it has one (an Ethos-U65), else the
    arena."""
    return row.fast_bytes or row.arena_bytes


def compare(model_path: str, config: str, budget: str | None = None) -> list[StreamRow]:
    """Vela Size, Vela Performance and tvm-ethos for one model on one accelerator, all checked
    on the same inputs and LiteRT outputs; with ``budget`` (e.g. ``"300KiB"``) also
    tvm-ethos planned within it where its default stream touches more."""
    case = oracle_case(model_path)
    rows = [vela_stream(model_path, config, "Size", case),
            vela_stream(model_path, config, "Performance", case),
            tvm_ethos_stream(model_path, config, case)]
    if budget is not None:
        from planner.api import parse_size

        if rows[-1].arena_bytes is None or sram_bytes(rows[-1]) > parse_size(budget):
            rows.append(tvm_ethos_stream(model_path, config, case, f"tvm-ethos {budget}",
                                         budget=budget))
    return rows


def _kib(n: int | None) -> str:
    return "-" if n is None else f"{n / 1024:.1f}"


def stream_table(rows: list[StreamRow]) -> str:
    head = (f"{'model':<22} {'config':<14} {'stream':<17} {'arena KiB':>9} {'fast KiB':>8} "
            f"{'flash KiB':>9} {'DMA KiB':>8} {'ops':>5} {'cmds':>6} {'compile s':>9} "
            f"{'exact':>5}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.reason:
            lines.append(f"{r.model:<22} {r.config:<14} {r.who:<17} no stream: {r.reason}")
            continue
        lines.append(
            f"{r.model:<22} {r.config:<14} {r.who:<17} {_kib(r.arena_bytes):>9} "
            f"{_kib(r.fast_bytes):>8} {_kib(r.flash_bytes):>9} {_kib(r.dma_bytes):>8} "
            f"{r.operations:>5} {r.commands:>6} {r.compile_seconds:>9.1f} "
            f"{'yes' if r.exact else 'NO':>5}")
    return "\n".join(lines)


def goal_lines(rows: list[StreamRow]) -> list[str]:
    """Issue 15's goal for MobileNetV1-224 on ethos-u55-128: at most 300 KiB of SRAM touched at
    no more DMA bytes than Vela Size's stream."""
    pick = {r.who: r for r in rows
            if r.model == "mobilenet_v1_1.0_224" and r.config == "ethos-u55-128"}
    budgeted = [r for who, r in pick.items() if who.startswith("tvm-ethos ")]
    ours, size = (budgeted or [pick.get("tvm-ethos")])[0], pick.get("vela Size")
    if ours is None or size is None:
        return []
    if ours.reason or size.reason:
        return [f"goal not judged: {ours.reason or size.reason}"]
    touched_ok = ours.arena_bytes <= 300 * 1024
    dma_ok = ours.dma_bytes <= size.dma_bytes
    return [f"SRAM touched {_kib(ours.arena_bytes)} KiB (goal <= 300 KiB): "
            f"{'met' if touched_ok else 'NOT met'}",
            f"DMA {_kib(ours.dma_bytes)} KiB vs Vela Size {_kib(size.dma_bytes)} KiB: "
            f"{'met' if dma_ok else 'NOT met'}"]
