"""Estimated bytes of the Ethos-U command stream a Plan emits: flash the user pays for beside
the weights.

A Plan's stream (``tvm_ethos.backends.ethos_u.stream_cascade``) is one NPU operation per step
of each Part (its work boxes: ``StripeConfig.count_stripes``, empty ones skipped), as many as
the performance model lowers the Part to (``perf.ethos_u.lower_part``), the Plan's staged Part
(the convolution whose weights stream through the staging double buffer) split into slices
of ``staged_slices.SLICE_CHANNELS`` output channels, each after the DMAs of its weight
and bias slices unless a half of the buffer still holds them (``planner.staged_slices``);
copied Parts' weights and biases are two DMAs before the Plan. Vela's register command
generator writes only the registers whose value changed since the operation before, so what
an operation costs depends on what ran before it: the first operation of a Part in its Plan
sets nearly every register, one following the same Part (its next stripe or slice) mostly
addresses and sizes, one following another Part of a cascade most of its settings again.
The constants are fitted to the streams ``stream_cascade`` writes for the shipped models at
their default budget and at the smallest (rfcs/0001, "Stream bytes");
``tests/planner/test_stream_estimate.py`` holds the estimate to them within a stated
tolerance.
"""
from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from ethos_arch.ops import Op
from planner.device_model import Device
from planner.graph import Part, PlannerGraph, Tensor
from planner.perf.ethos_u import lower_part
from planner.plan import Plan
from planner.staged_slices import STAGEABLE_KINDS, slice_count, slice_loads

#: The driver payload's header, the stream's first settings and its final stop (bytes).
STREAM_BASE_BYTES = 64
#: An operation that is its Part's first in the Plan: nearly every register written (the
#: tile and stride registers its boxes do not read keep the operation before's values).
FIRST_OPERATION_BYTES = 102
#: An operation after one of the same Part (its next stripe or weight slice): its feature
#: maps' addresses and sizes.
REPEAT_OPERATION_BYTES = 22
#: An operation after another Part's, in a cascade: the operation, its feature maps'
#: addresses (the ring tiles it reaches), sizes and padding ...
CASCADE_OPERATION_BYTES = 34
#: ... its weight and scale streams' addresses and lengths, where it has weights ...
CASCADE_WEIGHT_BYTES = 32
#: ... its kernel's size and stride, where they differ from the Part's before ...
CASCADE_KERNEL_BYTES = 12
#: ... its output's depth, block depth and strides, where they differ ...
CASCADE_OFM_BYTES = 24
#: ... its input's depth and strides, where they differ ...
CASCADE_IFM_BYTES = 12
#: ... its second input's address, sizes, strides and zero point (elementwise) ...
CASCADE_IFM2_BYTES = 64
#: ... and the precisions, block boundaries and zero points, where an elementwise
#: operation and a convolution or pooling follow each other.
CASCADE_KIND_BYTES = 24
#: An operation after another Part's, in a cascade, where its Part is cut into stripes
#: along the width: the tile registers of its boxes in their rings (the bases of the tiles
#: past a ring's last column, their heights and widths), which differ between the Parts.
CASCADE_WIDTH_TILE_BYTES = 16
#: A staged Part's operation after its previous slice: its weight and scale streams'
#: addresses (their lengths mostly the same).
SLICE_WEIGHT_BYTES = 20
#: A DMA: source, destination, length and start, with the waits before its reader.
DMA_BYTES = 24


class StreamEstimate(NamedTuple):
    """The counts behind an estimated stream and its bytes (estimated, not measured)."""
    operations: int      # NPU operations (kernels: convolution, pooling, elementwise)
    first: int           # of which each Part's first in its Plan
    repeats: int         # of which after an operation of the same Part
    dmas: int            # weight and bias DMAs
    bytes: int


NO_STREAM = StreamEstimate(0, 0, 0, 0, 0)


def has_stream(device: Device) -> bool:
    """Whether ``device`` runs a register command stream the estimate models (Ethos-U)."""
    return device.family == "ethos-u"


def plan_stream(plan: Plan, graph: PlannerGraph, device: Device) -> StreamEstimate:
    """The estimated stream of ``plan`` on ``device`` (NO_STREAM off Ethos-U).

    A Part run alone repeats its operations back to back; in a cascade each step runs every
    Part once, in order, so a Part's next step follows the Part before it (the last Part's
    step is followed by the first's): what differs between the two is written again."""
    if not has_stream(device):
        return NO_STREAM
    staged = staged_part(plan, graph)
    runs = []       # (Part, steps, operations, cut along the width, weight slices) of each
    for ps in plan.part_schedules:          # Part that emits any
        part = graph.part(ps.part)
        slices = slice_count(part.output.shape[-1]) if part.name == staged else 1
        steps = part_ops = 0
        for shape, n in ps.stripe.count_stripes().items():
            if 0 in shape:
                continue
            per_step = _operations(part, shape)
            steps += n * (per_step > 0)
            part_ops += n * per_step * slices
        if part_ops:
            runs.append((part, steps, part_ops, _width_striped(ps.stripe), slices))
    ops = repeats = dmas = nbytes = 0
    for k, (part, steps, part_ops, width_striped, slices) in enumerate(runs):
        # within a step its operations (slices, a multi-operation lowering) follow each
        # other; its steps follow each other only where it runs alone
        rep = part_ops - 1 if len(runs) == 1 else part_ops - steps
        cascaded = part_ops - 1 - rep
        ops += part_ops
        repeats += rep
        nbytes += FIRST_OPERATION_BYTES + REPEAT_OPERATION_BYTES * rep + \
            cascaded * (_cascade_bytes(runs[k - 1][0], part) +
                        CASCADE_WIDTH_TILE_BYTES * width_striped)
        if part.name == staged:    # its slices' DMAs, but none of a slice a half holds
            dmas += slice_loads(slices, part_ops // slices)
            nbytes += SLICE_WEIGHT_BYTES * rep
        if part.name in plan.spec.weights:
            dmas += 2
    nbytes += DMA_BYTES * dmas
    return StreamEstimate(ops, len(runs), repeats, dmas, nbytes)


def _cascade_bytes(before: Part, part: Part) -> int:
    """An operation of ``part`` after one of ``before`` in a cascade's step."""
    nbytes = CASCADE_OPERATION_BYTES
    if part.constant_inputs:
        nbytes += CASCADE_WEIGHT_BYTES
    if _kernel(before) != _kernel(part):
        nbytes += CASCADE_KERNEL_BYTES
    if _fm_geometry(before.output) != _fm_geometry(part.output):
        nbytes += CASCADE_OFM_BYTES
    if _fm_geometry(_ifm(before)) != _fm_geometry(_ifm(part)):
        nbytes += CASCADE_IFM_BYTES
    if len(part.activation_inputs) > 1:
        nbytes += CASCADE_IFM2_BYTES
    if (before.kind == Op.ELEMENTWISE) != (part.kind == Op.ELEMENTWISE):
        nbytes += CASCADE_KIND_BYTES
    return nbytes


def _width_striped(stripe) -> bool:
    """Whether a Part's stripes cut its NHWC output along the width."""
    return len(stripe.shape) == 4 and stripe.stripes[2] > 1


def _kernel(part: Part) -> tuple:
    attrs = dict(part.attrs)
    return attrs.get("kernel"), attrs.get("strides"), attrs.get("dilation")


def _ifm(part: Part) -> Tensor | None:
    return next((t for t in part.inputs if not t.is_constant), None)


def _fm_geometry(t: Tensor | None) -> tuple:
    """What a feature map's strides and depth registers follow: its width and depth."""
    return None if t is None else tuple(t.shape[-2:])


def stream_bytes(plans: tuple[Plan, ...], graph: PlannerGraph, device: Device) -> int:
    """Estimated bytes of the whole stream of ``plans`` (a Proposal's, each built with its
    ``estimated_stream_bytes``): 0 off Ethos-U."""
    if not has_stream(device):
        return 0
    return STREAM_BASE_BYTES + sum(plan.estimated_stream_bytes for plan in plans)


@lru_cache(maxsize=1 << 14)
def _operations(part: Part, shape: tuple[int, ...]) -> int:
    """NPU operations one stripe of ``part`` lowers to, memoised: the estimate is made for
    every Plan built, and at ``--optimise Size`` that is the whole frontier's."""
    return len(lower_part(part, shape))


def clear_caches() -> None:
    """Forget the memo of operation counts, so a benchmark times a cold search."""
    _operations.cache_clear()


def staged_part(plan: Plan, graph: PlannerGraph) -> str | None:
    """The Part of ``graph`` whose weights stream through the Plan's staging double buffer,
    sliced (as ``stream_weights.weight_pool`` picks it): the reader of a double-buffered
    constant held outside its home, when it is a convolution whose weights are not copied
    whole."""
    staged = None
    for tc in plan.tensor_configs:
        if tc.double_buffer and tc.copy_region != tc.home_region:
            staged = graph.constant_reader(tc.tensor) or staged
    if staged is None or staged in plan.spec.weights or \
            graph.part(staged).kind not in STAGEABLE_KINDS:
        return None
    return staged

