"""Estimated bytes the NPU's DMA moves for a Proposal's weights in one inference.

What a Plan's stream copies (``tvm_ethos.backends.ethos_u.stream_cascade``): the weights of
the Parts it holds in SRAM (``spec.weights``) once, before the Plan; the weight slices of its
staged Part (``stream_estimate.staged_part``: the convolution whose weights stream through
the staging double buffer) each time the DMA loads them (``planner.staged_slices``: the
halves keep the slices they hold, so a step after the first reloads all but two); any other
Part reads its weights in place from their home, with no DMA. Feature
maps are not counted: they move by DMA only where the I/O region is not the feature-map
region, and then alike for every Proposal of a model.

The ``smallest`` budget (planner.api) uses the estimate to avoid a Proposal that saves a
little SRAM by re-streaming a Part's weights for every stripe of a deep cascade
(rfcs/0001, "The smallest budget").
"""
from __future__ import annotations

from planner.device_model import Device
from planner.graph import PlannerGraph
from planner.plan import Plan
from planner.staged_slices import SLICE_CHANNELS, channel_loads
from planner.stream_estimate import has_stream, staged_part


def plan_dma_bytes(plan: Plan, graph: PlannerGraph, device: Device) -> int:
    """Estimated weight bytes ``plan``'s DMA commands move (0 off Ethos-U)."""
    if not has_stream(device):
        return 0
    staged = staged_part(plan, graph)
    total = 0
    for ps in plan.part_schedules:
        part = graph.part(ps.part)
        weights = sum(t.bytes for _, t in part.constant_inputs)
        if part.name in plan.spec.weights:
            total += weights
        elif part.name == staged:
            steps = sum(n for shape, n in ps.stripe.count_stripes().items() if 0 not in shape)
            channels = part.output.shape[-1]
            loads = channel_loads(channels, SLICE_CHANNELS, steps)
            total += weights * loads // channels
    return total


def dma_bytes(plans: tuple[Plan, ...], graph: PlannerGraph, device: Device) -> int:
    """Estimated weight bytes the DMA moves for the whole of ``plans`` (a Proposal's)."""
    return sum(plan_dma_bytes(plan, graph, device) for plan in plans)
