"""An SVDF planned alone: the planner's Part (``planner.parts.svdf``) in a graph of its own,
planned as the compile path plans (the stream table's solitary and whole-output operators,
the SVDF computed whole), so that the SVDF's plan report carries the planner's estimates
(cycles, MACs, memory) as every planned NPU subgraph's does. The stream itself is laid out by
``stream_svdf.SvdfArena`` beside the ethos-u operators it shares tensors with; the Part
holds the state and the working buffers that layout gives the stream.
"""
from __future__ import annotations

from typing import NamedTuple

from ethos_arch.ops import Op
from planner import parts as planner_parts
from planner.graph import GraphBuilder
from planner.proposals import ProposalSearch
from tvm_ethos.backends.ethos_u.ops_svdf import KIND, Svdf
from tvm_ethos.backends.ethos_u.stream_ops import SOLITARY_OPS, WHOLE_OUTPUT_OPS
from tvm_ethos.backends.planner_device import planning_device

#: the SVDF's Part in its planner graph
PART = "svdf"


class SvdfEstimate(NamedTuple):
    """The planner's least-memory Plan of the SVDF alone on ``device``: its cycles and MACs
    and that proposal's peak (estimated), and whether the plan's SRAM is the arena (else an
    Ethos-U65's fast scratch, where the plan holds only the working buffers: the input,
    output and state live with the network's inputs and outputs in the arena, and the
    stream keeps its working buffers there too)."""

    device: str
    cycles: int
    macs: int
    memory_bytes: int
    sram_is_arena: bool


def plan_svdf(svdf: Svdf, accelerator: str) -> SvdfEstimate:
    """``svdf`` planned alone for ``accelerator``: one Plan, the least memory."""
    device = planning_device(accelerator, solitary=SOLITARY_OPS,
                             whole_output=WHOLE_OUTPUT_OPS | {Op.SVDF})
    graph = GraphBuilder(KIND.lower())
    x = graph.input("input", (svdf.batches, svdf.input_size))
    part = planner_parts.svdf(PART, x, svdf.units, svdf.rank, svdf.memory)
    graph.add(part)
    proposal = ProposalSearch(graph.build(), device).proposal(0)
    (plan,) = proposal.plans
    macs = sum(s.executions * device.perf.macs(part, s.stripe.shape)
               for s in plan.part_schedules)
    return SvdfEstimate(accelerator, proposal.cycles, macs, proposal.memory_bytes,
                        device.io_region == device.fm_region)
