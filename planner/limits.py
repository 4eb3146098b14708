"""The largest graphs the planner accepts: refused up front, with the limit named.

The search walks stripes, windows and rolling rings along each axis, so its work grows with
the tensors' extents as well as with the number of Parts. These limits keep every accepted
graph within seconds of planning, and they are the NPUs' own: the Ethos-U command stream
holds feature-map heights, widths and depths, kernel sizes and paddings in 16-bit fields,
and no NPU network has a tensor of 2 GiB. The readers (``planner.io``, ``planner.tflite``)
check a graph before it is planned; ``check_graph`` is for graphs built in code.
"""
from __future__ import annotations

import math
from typing import Iterable

from planner.errors import PlannerError
from planner.graph import Part, PlannerGraph, Tensor

#: The most elements along one axis of any tensor (the Ethos-U's 16-bit dimension fields).
MAX_AXIS = 1 << 16
#: The most bytes of one tensor (as tvm_ethos's front door: 2 GiB).
MAX_TENSOR_BYTES = 1 << 31
#: Operator attributes that are window geometry, bounded by ``MAX_AXIS`` too.
WINDOW_ATTRS = ("kernel", "strides", "dilation", "padding", "pads", "scale")

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
    """``check_tensor`` on every tensor of ``p``; its propagators' entries and its window
    attributes (kernel, strides, dilation, padding, scale) at most MAX_AXIS in size."""
    where = f"part {p.name!r} ({p.kind})"
    for t in (*p.inputs, p.output):
        check_tensor(t, where)
    for k, prop in enumerate(p.propagators):
        for v in (*(x for row in prop.transform for x in row), *prop.offset):
            if abs(v) > MAX_AXIS:
                raise PlannerError(f"{where}: propagator {k} has an entry {v}; the limit is "
                                   f"{MAX_AXIS:,} (no window is larger than a tensor)")
    attrs = dict(p.attrs)
    for key in WINDOW_ATTRS:
        for v in _numbers(attrs.get(key)):
            if abs(v) > MAX_AXIS:
                raise PlannerError(f"{where}: {key} {_show(attrs[key])} has a value of "
                                   f"{v:,}; the limit is {MAX_AXIS:,}")


def check_graph(graph: PlannerGraph) -> None:
    """PlannerError naming the first tensor or Part over a limit of this module."""
    for t in graph.inputs:
        check_tensor(t, "graph input")
    for p in graph.parts:
        check_part(p)


def _numbers(v) -> Iterable:
    """The numbers in an attribute value (a number, or nested tuples of numbers)."""
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return
    if isinstance(v, (tuple, list)):
        for x in v:
            yield from _numbers(x)
        return
    try:
        yield float(v) if not isinstance(v, int) else v
    except (TypeError, ValueError):
        return


def _show(v) -> str:
    return str(list(v)) if isinstance(v, tuple) else str(v)
