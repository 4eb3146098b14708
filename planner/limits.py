"""The largest graphs the planner accepts: refused up front, with the limit named.

The search walks stripes, windows and rolling rings along each axis, so its work grows with
the tensors' extents as well as with the number of Parts. These limits bound that work, and
they are no tighter than the NPUs' own: the Ethos-U command stream holds feature-map
heights, widths and depths in 16-bit fields (its kernels and paddings are smaller still),
and no NPU network has a tensor of 2 GiB. The readers (``planner.io``, ``planner.tflite``)
check a graph before it is planned; ``check_graph`` is for graphs built in code.
"""
from __future__ import annotations

import math
from fractions import Fraction
from typing import Iterable

from planner.errors import PlannerError
from planner.graph import Part, PlannerGraph, Tensor

#: The most elements along one axis of any tensor (the Ethos-U's 16-bit dimension fields).
MAX_AXIS = 1 << 16
#: The most bytes of one tensor (as tvm_ethos's front door: 2 GiB).
MAX_TENSOR_BYTES = 1 << 31
#: Operator attributes that are window geometry, bounded by ``MAX_AXIS`` too.
WINDOW_ATTRS = ("kernel", "strides", "dilation", "padding", "pads", "scale")
#: Of those, the ones that must be at least 1 (the others at least 0).
_POSITIVE = ("kernel", "strides", "dilation", "scale")
#: How many numbers each holds (height and width; padding top, left, bottom, right).
_ARITY = {"kernel": 2, "strides": 2, "dilation": 2, "padding": 4, "scale": 2}

_FIX = "the planner plans NPU networks only; split or downscale the tensor"


def check_tensor(t: Tensor, where: str) -> None:
    """PlannerError unless every axis of ``t`` is at most MAX_AXIS and it has at most
    MAX_TENSOR_BYTES bytes (``where`` names its place in the graph or file)."""
    for axis, n in enumerate(t.shape):
        if n > MAX_AXIS:
            raise PlannerError(f"{where}: tensor {t.name!r} has {n:,} elements along axis "
                               f"{axis} of {list(t.shape)}; the limit is {MAX_AXIS:,} per "
                               f"axis ({_FIX})")
    nbytes = math.prod(t.shape) * t.itemsize
    if nbytes > MAX_TENSOR_BYTES:
        raise PlannerError(f"{where}: tensor {t.name!r} of shape {list(t.shape)} {t.dtype} has "
                           f"{nbytes:,} bytes; the limit is {MAX_TENSOR_BYTES:,} ({_FIX})")


def check_part(p: Part) -> None:
    """``check_tensor`` on every tensor of ``p``, then what the stripe search, the
    performance models and the simulator assume of it (a hand-written full-form Part can
    break it; otherwise a Plan may read rows no stripe produces): propagator entries at most
    MAX_AXIS in size, each input axis moved by at most one output axis, forwards, reading at
    least one row per output row; window attributes (kernel, strides, dilation, padding,
    pads, scale) of the right count, integers (the scale: numbers), positive (paddings:
    non-negative) and at most MAX_AXIS."""
    where = f"part {p.name!r} ({p.kind})"
    for t in (*p.inputs, p.output):
        check_tensor(t, where)
    attrs = dict(p.attrs)
    for key in WINDOW_ATTRS:
        if key not in attrs:
            continue
        lowest = 1 if key in _POSITIVE else 0
        value = attrs[key]
        arity = _ARITY.get(key)
        if arity is not None and not (isinstance(value, tuple) and len(value) == arity):
            raise PlannerError(f"{where}: {key} {_show(value)} must be {arity} numbers")
        for v in _numbers(attrs[key]):
            if isinstance(v, bool) or not isinstance(v, (int, Fraction)) or v < lowest:
                raise PlannerError(f"{where}: {key} {_show(attrs[key])} must hold "
                                   f"{'positive' if lowest else 'non-negative'} "
                                   f"{'numbers' if key == 'scale' else 'integers'}, "
                                   f"not {v!r}")
            if key != "scale" and not isinstance(v, int):
                raise PlannerError(f"{where}: {key} {_show(attrs[key])} must hold integers, "
                                   f"not {v!r}")
            if v > MAX_AXIS:
                raise PlannerError(f"{where}: {key} {_show(attrs[key])} has a value of "
                                   f"{v:,}; the limit is {MAX_AXIS:,}")
    for k, prop in enumerate(p.propagators):
        for v in (*(x for row in prop.transform for x in row), *prop.offset):
            if abs(v) > MAX_AXIS:
                raise PlannerError(f"{where}: propagator {k} has an entry {v}; the limit is "
                                   f"{MAX_AXIS:,} (no window is larger than a tensor)")
        for i, row in enumerate(prop.transform[:-1]):
            moving = [x for x in row[:-1] if x != 0]
            if len(moving) > 1 or any(x < 0 for x in moving):
                raise PlannerError(
                    f"{where}: propagator {k}, transform row {i} "
                    f"{[str(x) for x in row]}: an input axis must follow at most one output "
                    "axis, forwards (one positive coefficient; the constant column may be "
                    "anything)")
            if (moving[0] if moving else 0) + row[-1] <= 0:
                raise PlannerError(
                    f"{where}: propagator {k}, transform row {i} "
                    f"{[str(x) for x in row]}: one output row must read at least one input "
                    "row (coefficient + constant > 0)")


def check_graph(graph: PlannerGraph) -> None:
    """PlannerError naming the first tensor or Part over a limit of this module."""
    for t in graph.inputs:
        check_tensor(t, "graph input")
    for p in graph.parts:
        check_part(p)


def _numbers(v) -> Iterable:
    """The leaves of an attribute value (a value, or nested tuples of values)."""
    if isinstance(v, (tuple, list)):
        for x in v:
            yield from _numbers(x)
        return
    yield v


def _show(v) -> str:
    return str(list(v)) if isinstance(v, tuple) else str(v)
