"""The feature-map layouts Vela gives a network's tensors, as Part attrs: the planner's Ethos-U
performance model reads them, and every path that builds a ``PlannerGraph`` from a network
(``planner.tflite``, and the TVM side's graphs of a lowered group) marks them the same way."""
from __future__ import annotations

from typing import Sequence

from ethos_arch.ops import Op
from planner.graph import Part, Tensor


def vela_layouts(parts: Sequence[Part], inputs: Sequence[Tensor],
                 outputs: Sequence[Tensor]) -> tuple[Part, ...]:
    """``parts`` with the feature maps Vela keeps in NHWC marked (Part attrs ``ifm_format``,
    ``ifm2_format``, ``ofm_format`` = ``"NHWC"``); the rest are NHCWB16, Vela's intermediate
    layout.

    As Vela 5.2.0 lays them out (``--verbose-allocation``, "Format" column, on the shipped
    models): the network's ``inputs`` and ``outputs`` (the CPU reads and writes them); both
    sides of a RESHAPE/SQUEEZE, which Vela turns into an alias of the same bytes; the outputs
    of FULLY_CONNECTED and the input of SOFTMAX (1-D rows). The flatten a FULLY_CONNECTED
    does implicitly (the ``<part>/reshape`` Part) is folded into the FC's read and keeps the
    NHCWB16 of the map it flattens. The layout changes burst efficiency, hence NPU cycles
    (``planner/perf/ethos_u.py``); the Ethos-N model ignores these attrs.
    """
    nhwc = {t.name for t in inputs} | {t.name for t in outputs}
    consumers: dict[str, list[Part]] = {}
    for p in parts:
        for t in p.inputs:
            consumers.setdefault(t.name, []).append(p)
    for p in parts:
        if p.kind == Op.RESHAPE:
            users = consumers.get(p.output.name, [])
            if users and all(q.kind == Op.FULLY_CONNECTED for q in users):
                continue
            nhwc.update((p.inputs[0].name, p.output.name))
        elif p.kind == Op.FULLY_CONNECTED:
            nhwc.add(p.output.name)
        elif p.kind == Op.SOFTMAX:
            nhwc.add(p.inputs[0].name)
    out = []
    for p in parts:
        extra = {}
        for key, k in (("ifm_format", 0), ("ifm2_format", 1)):
            if k < len(p.inputs) and not p.inputs[k].is_constant and p.inputs[k].name in nhwc:
                extra[key] = "NHWC"
        if p.output.name in nhwc:
            extra["ofm_format"] = "NHWC"
        out.append(p.with_attrs(**extra) if extra else p)
    return tuple(out)
