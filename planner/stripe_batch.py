"""The memory side of a Part's per-stripe costs over many stripe shapes at once, on arrays.

``PlanCosting._stripe_cycles`` costs one stripe shape: the window each input is read in (its
propagator applied to the shape, clipped), its bytes and contiguous runs, the cycles of every
transfer on each memory port, then the slower of compute and each port. A Part is costed at
hundreds of shapes, and that arithmetic, one shape at a time, is most of the costing's time.
Here it runs on int64 and float64 arrays, one row per shape, with the same operations in the
same order (integer products, then the one float division and ceiling each transfer has), so
each value equals the scalar one: where it could not (a fractional propagator, a Fraction
compression ratio, values past 2**50) the batch is refused and the caller costs shape by
shape.
"""
from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np

from planner.graph import Tensor
from planner.memory import MemoryRegion
from planner.propagator import Propagator

#: The largest integer any intermediate may reach for the float64 steps to stay exact (below
#: 2**53, with room for the bursts' rounding up).
EXACT_LIMIT = 2 ** 50


class InputSide(NamedTuple):
    """One input of the Part as the batch reads it."""
    tensor: Tensor
    propagator: Propagator
    staged: bool                    # streamed through SRAM from its home region
    port: MemoryRegion | None       # the region whose port reads it; None for a constant


class Transfers(NamedTuple):
    """Per shape (rows of the arrays): cycles on each memory port of the feature maps' reads
    and writes, and the bytes of each constant's window (its weights, placed by the caller)."""
    ports: dict[str, np.ndarray]
    weights: list[np.ndarray]


def _exact_number(x) -> bool:
    return type(x) is int or type(x) is float


def _region_bytes(t: Tensor, blocks: np.ndarray) -> np.ndarray:
    """``Tensor.region_bytes`` of each row of ``blocks``."""
    raw = np.prod(blocks, axis=1) * t.itemsize
    return np.ceil(raw * t.compression_ratio).astype(np.int64)


def _contiguous_runs(blocks: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """``plan_costing.contiguous_runs`` of each row of ``blocks``: the product of the axes
    before the last one that a block does not cover whole (1 if only axis 0 is partial)."""
    n, rank = blocks.shape
    prefix = np.ones((n, rank), np.int64)       # prefix[:, k]: product of axes 0 .. k-1
    if rank > 1:
        prefix[:, 1:] = np.cumprod(blocks[:, :-1], axis=1)
    partial = blocks != np.asarray(shape, np.int64)
    partial[:, 0] = True                        # k stops at 0, whose run count is 1
    last = rank - 1 - np.argmax(partial[:, ::-1], axis=1)
    return np.where(last > 0, prefix[np.arange(n), last], 1)


def transfer_cycles(region: MemoryRegion, nbytes: np.ndarray, rows: np.ndarray | int,
                    write: bool = False) -> np.ndarray:
    """``region.read_cycles`` (or ``write_cycles``) of each (bytes, runs) pair."""
    rows = np.maximum(1, rows)
    per_row = np.ceil(nbytes / rows).astype(np.int64)
    bursted = rows * np.ceil(per_row / region.burst).astype(np.int64) * region.burst
    if write:
        latency, rate = region.write_latency, region.write_bytes_per_cycle
    else:
        latency, rate = region.read_latency, region.read_bytes_per_cycle
    cycles = latency + np.ceil(bursted / rate).astype(np.int64)
    return np.where(nbytes > 0, cycles, 0)


def _windows(t: Tensor, prop: Propagator, shapes: np.ndarray) -> np.ndarray | None:
    """The clipped window of ``t`` each row of ``shapes`` reads (``min(max(1, need), e)`` per
    axis), or None for a propagator with a fractional entry."""
    rows = prop.transform[:-1]
    if not all(type(v) is int for r in rows for v in r):
        return None
    coeffs = np.array([r[:-1] for r in rows], np.int64)        # input axes x output axes
    const = np.array([r[-1] for r in rows], np.int64)
    need = shapes @ coeffs.T + const
    return np.minimum(np.maximum(need, 1), np.asarray(t.shape, np.int64))


def _within_limits(tensors: Sequence[Tensor]) -> bool:
    return all(_exact_number(t.compression_ratio) and
               math.prod(t.shape) * t.itemsize < EXACT_LIMIT for t in tensors)


def transfers(inputs: Sequence[InputSide], output: Tensor, out_port: MemoryRegion,
              out_staged: bool, io: MemoryRegion, shapes: Sequence[tuple[int, ...]]
              ) -> Transfers | None:
    """The feature-map transfers and weight windows of one Part over ``shapes`` (what
    ``_stripe_cycles`` computes before the weights and compute), or None where the arrays
    could not be exact (the caller then costs shape by shape)."""
    if not _within_limits([s.tensor for s in inputs] + [output]) or \
            not all(_exact_number(x) for r in (io, out_port, *(s.port for s in inputs if s.port))
                    for x in (r.read_bytes_per_cycle, r.write_bytes_per_cycle)):
        return None
    out_shapes = np.array(shapes, np.int64)
    ports: dict[str, np.ndarray] = {}

    def add(region: MemoryRegion, cycles: np.ndarray) -> None:
        name = region.port_name
        ports[name] = ports[name] + cycles if name in ports else cycles

    weights = []
    for t, prop, staged, port in inputs:
        win = _windows(t, prop, out_shapes)
        if win is None:
            return None
        nbytes = _region_bytes(t, win)
        if port is None:
            weights.append(nbytes)
            continue
        runs = _contiguous_runs(win, t.shape)
        if staged:
            add(io, transfer_cycles(io, nbytes, runs))
        add(port, transfer_cycles(port, nbytes, runs))
    out_bytes = _region_bytes(output, out_shapes)
    out_runs = _contiguous_runs(out_shapes, output.shape)
    add(out_port, transfer_cycles(out_port, out_bytes, out_runs, write=True))
    if out_staged:
        add(io, transfer_cycles(io, out_bytes, out_runs, write=True))
    return Transfers(ports, weights)


def stripe_cycles(moved: Transfers, compute: np.ndarray, overhead: int, fm_access: np.ndarray,
                  fetches: np.ndarray, weight_home: MemoryRegion, fm: MemoryRegion
                  ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """Per shape: (cycles with weights streamed from their home, with weights in SRAM) and
    the idle cycles of the weight home's port in each case, as ``_stripe_cycles`` combines
    them: each port's transfers (the weights read from ``weight_home`` or ``fm``), the
    feature-map port at least its block fetches (``fm_access``, with the weights re-read
    from SRAM ``fetches`` times where they are there), the slowest port or the compute, plus
    the per-stripe overhead. None where a value could pass ``EXACT_LIMIT``."""
    out, idle = [], []
    total_weights = sum(moved.weights) if moved.weights else 0
    if moved.weights and int((total_weights * fetches).max()) >= EXACT_LIMIT:
        return None
    for region in (weight_home, fm):
        p = dict(moved.ports)
        for nbytes in moved.weights:
            name = region.port_name
            cycles = transfer_cycles(region, nbytes, 1)
            p[name] = p[name] + cycles if name in p else cycles
        if fm_access.any():
            in_sram = True if region is fm else fetches > 1
            rereads = np.where(in_sram, total_weights * fetches, 0) if moved.weights else \
                np.zeros_like(fm_access)
            bound = fm_access + transfer_cycles(fm, rereads, 1)
            current = p.get(fm.port_name, 0)
            p[fm.port_name] = np.where(fm_access != 0, np.maximum(current, bound), current)
        busiest = np.max(np.stack(list(p.values())), axis=0)
        cycles = np.maximum(compute, busiest) + overhead
        out.append(cycles)
        idle.append(cycles - p.get(weight_home.port_name, 0))
    return (list(zip(out[0].tolist(), out[1].tolist())),
            list(zip(idle[0].tolist(), idle[1].tolist())))
