"""The SVDF's planner Part (``planner.parts.svdf``) against the stream ``stream_svdf`` writes:
the Part holds the bytes the stream writes of its own buffers (its state and working
buffers, emulated: the functional model's record of the stream's writes), the perf model
prices the operations the stream runs and counts the MACs the functional model counts, and
the SVDF's plan report carries its plan (``svdf_plan``), estimated."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from svdf_models import svdf_cases, svdf_model

from planner import parts
from planner.graph import Tensor
from planner.perf.ethos_u import lower_part
from planner.work_memory import WORK_ATTR
from tvm_ethos.backends.ethos_u import stream_svdf
from tvm_ethos.backends.ethos_u.ops_svdf import read_svdf
from tvm_ethos.backends.ethos_u.stream_run import arena_writes, stream_report
from tvm_ethos.backends.ethos_u.svdf_plan import plan_svdf
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph, read_source

pytest.importorskip("ethosu.vela")

_KERNEL_OPS = ("NPU_OP_CONV", "NPU_OP_POOL")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=svdf_cases(input_size=40, units=12, memory=40),
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_the_part_holds_what_the_stream_writes_and_prices_what_it_runs(case, accelerator):
    """Any SVDF of the stream's: the bytes its stream writes (emulated) are its state and
    its working buffers, as many as the Part's state_bytes and work; the Part lowers to as
    many NPU operations as the stream runs; its MACs, those of the plan of it alone, are
    the MACs the functional model counts running the stream, and that plan's peak holds
    the Part's buffers where they live in the plan's SRAM."""
    svdf = read_svdf(SourceGraph(read_source(svdf_model(case))), 0)
    arena = stream_svdf.SvdfArena.of(svdf)
    payload = stream_svdf.svdf_payload(svdf, accelerator, ("x", "state", "y"), arena)
    part = parts.svdf("svdf", Tensor("x", (svdf.batches, svdf.input_size)), svdf.units,
                      svdf.rank, svdf.memory)
    state, work = part.attr("state_bytes"), part.attr(WORK_ATTR).fixed
    assert arena_writes(payload) == ((arena.state, arena.state + state),
                                     (arena.column, arena.column + work))
    report = stream_report(payload, None)
    assert len(lower_part(part, part.output.shape)) == \
        sum(report["commands"].get(k, 0) for k in _KERNEL_OPS)
    estimate = plan_svdf(svdf, accelerator)
    assert estimate.macs == report["macs"]
    assert estimate.cycles > 0
    # the plan's SRAM: the arena on an Ethos-U55 (input, output, state, working buffers);
    # an Ethos-U65's fast scratch, the input, output and state in the arena
    assert estimate.sram_is_arena == accelerator.startswith("ethos-u55")
    io = svdf.batches * (svdf.input_size + svdf.units)
    assert estimate.memory_bytes == (io + state + work if estimate.sram_is_arena else work)
