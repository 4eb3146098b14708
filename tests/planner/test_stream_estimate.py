"""The planner's estimate of a Plan's command-stream bytes (planner.stream_estimate): held to
the streams tvm_ethos writes (its oracle), counted per operation as the written streams are,
reported on every Plan and Proposal and never changing which Proposals the search finds."""
import math

import numpy as np
import pytest
from graph_builder import Graph
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from planner import parts, staged_slices, stream_estimate
from planner.devices import get_device
from planner.graph import GraphBuilder
from planner.options import PlannerOptions
from planner.perf.ethos_u import lower_part
from planner.plan import Buffering, PlanSpec
from planner.plans import PlanGenerator
from planner.proposals import ProposalSearch
from planner.stripes import StripeConfig
from tests.helpers.models import model_path
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs

#: How far the estimate may be from the bytes of the stream written for the same Proposal
#: (relative); the constants are within -11 % .. +10 % on every case below.
TOLERANCE = 0.15

SMALL = PlannerOptions(stripe_factors=3, max_width_tiles=2)

#: (model, accelerator, budget) compiled and compared; the first two in the default suite
#: (the second a Size plan: a cascade striped along the width, its layers alternating).
CASES = [("resnet8_cifar", "ethos-u55-128", None),
         ("resnet8_cifar", "ethos-u55-128", "smallest")] + [
    pytest.param(*case, marks=pytest.mark.slow) for case in (
        ("resnet8_cifar", "ethos-u65-256", None),
        ("resnet8_cifar", "ethos-u65-256", "smallest"),
        ("tflite-micro/person_detect", "ethos-u65-256", "smallest"),
        ("ds_cnn_kws", "ethos-u55-128", None),
        ("ds_cnn_kws", "ethos-u55-128", "smallest"),
        ("mobilenet_v1_0.25_96", "ethos-u55-128", "smallest"),
        ("mobilenet_v1_0.25_96", "ethos-u65-256", "smallest"),
        ("tflite-micro/person_detect", "ethos-u55-128", "smallest"),
        ("mobilenet_v1_1.0_224", "ethos-u55-128", None),
        # fastest plans whose staged Parts run many stripes: the estimate counts only the
        # slices neither half of the staging buffer holds (planner.staged_slices)
        ("mobilenet_v1_0.25_96", "ethos-u55-128", None),
        ("tflite-micro/person_detect", "ethos-u55-128", None),
    )]


@pytest.mark.parametrize("model,accelerator,budget", CASES)
def test_the_estimate_is_near_the_stream_written(model, accelerator, budget, monkeypatch):
    """Compile to a .tflite, catch each planned subgraph's Proposal and the stream written
    for it: the estimate is within TOLERANCE of its bytes, and counts its NPU operations
    within two."""
    pytest.importorskip("ethosu.vela")
    import tvm_ethos
    from ethosu_stream.registers import decode_stream
    from ethosu_stream.tflite_custom_op import command_words
    from tvm_ethos.backends.ethos_u import stream_cascade

    written = []
    generate = stream_cascade.generate_planned

    def catch(lw, acc, match, proposal, device=None):
        payload = generate(lw, acc, match, proposal, device)
        written.append((match.graph, proposal, command_words(payload.driver_payload)))
        return payload

    monkeypatch.setattr(stream_cascade, "generate_planned", catch)
    options = {"accelerator_config": accelerator}
    if budget is not None:
        options["budget"] = budget
    tvm_ethos.compile_tflite(model_path(model).read_bytes(), "ethos-u", **options)
    assert written, "no planned stream was written"
    device = get_device(accelerator)
    kernels = {"NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL", "NPU_OP_ELEMENTWISE"}
    for graph, proposal, words in written:
        real = 4 * len(words)
        estimate = stream_estimate.stream_bytes(proposal.plans, graph, device)
        assert abs(estimate - real) <= TOLERANCE * real, (estimate, real)
        operations = sum(stream_estimate.plan_stream(p, graph, device).operations
                         for p in proposal.plans)
        real_ops = sum(c.name in kernels for c in decode_stream(words))
        assert abs(operations - real_ops) <= 2, (operations, real_ops)


def _one_conv(height: int, channels: int):
    b = GraphBuilder("one")
    t = b.input("in", (1, height, 8, 8))
    return b.build([b.add(parts.conv2d("c", t, channels, (3, 3), padding=(1, 1, 1, 1)))])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(height=st.integers(2, 40), rows=st.integers(1, 40), channels=st.sampled_from([8, 16]))
def test_a_part_alone_pays_its_first_operation_then_one_repeat_per_stripe(height, rows,
                                                                           channels):
    """A one-Part Plan run alone (16 output channels or fewer: one slice): its first
    operation, then a repeat per further stripe; where its weights are staged, its one
    slice is DMAd once (a half holds it for every later stripe) and each operation reads
    its weight addresses. Unstaged, more stripes cost more bytes."""
    g = _one_conv(height, channels)
    gen = PlanGenerator(g, get_device("ethos-u55-128"), PlannerOptions())
    shape = g.parts[0].output.shape

    def estimate(r: int):
        stripe = StripeConfig.tiled(shape, (1, min(r, height), 8, channels), (0, 1, 0, 0))
        plan = gen.build(0, 0, PlanSpec(stripe, Buffering.RECOMPUTE, 0))
        assert plan.estimated_stream_bytes == stream_estimate.plan_stream(
            plan, g, gen.device).bytes
        return stream_estimate.plan_stream(plan, g, gen.device)

    est = estimate(rows)
    stripes = math.ceil(height / min(rows, height))
    assert est.operations == stripes and est.first == 1 and est.repeats == stripes - 1
    assert est.dmas in (0, 1)
    repeat = stream_estimate.REPEAT_OPERATION_BYTES + \
        (stream_estimate.SLICE_WEIGHT_BYTES if est.dmas else 0)
    assert est.bytes == stream_estimate.FIRST_OPERATION_BYTES + (stripes - 1) * repeat + \
        stream_estimate.DMA_BYTES * est.dmas
    whole = estimate(height)
    if stripes > 1 and not whole.dmas and not est.dmas:
        assert whole.bytes < est.bytes     # the same Part in one stripe: fewer bytes


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=4))
def test_a_proposal_counts_its_plans_and_every_work_box(g):
    """Every frontier Proposal on an Ethos-U: the stream's header plus its Plans' estimates,
    each Plan's operations one per non-empty work box of each Part and lowered operation (as
    many again per further 16-channel slice for the one staged Part), its DMAs two per
    copied Part and one per slice the staged Part loads (``staged_slices.slice_loads``)."""
    device = get_device("ethos-u55-128")
    search = ProposalSearch(g, device, SMALL)
    by_name = {p.name: p for p in g.parts}
    for k in range(len(search.frontier)):
        proposal = search.proposal(k)
        assert proposal.estimated_stream_bytes == stream_estimate.STREAM_BASE_BYTES + \
            sum(p.estimated_stream_bytes for p in proposal.plans)
        for plan in proposal.plans:
            ops = {ps.part: sum(n * len(lower_part(by_name[ps.part], shape))
                                for shape, n in ps.stripe.count_stripes().items()
                                if 0 not in shape)
                   for ps in plan.part_schedules}
            est = stream_estimate.plan_stream(plan, g, device)
            copies = 2 * sum(bool(n) for part, n in ops.items() if part in plan.spec.weights)
            staged = stream_estimate.staged_part(plan, g)
            slices = 1 if staged is None else \
                staged_slices.slice_count(by_name[staged].output.shape[-1])
            extra = 0 if staged is None else (slices - 1) * ops[staged]
            assert est.operations == sum(ops.values()) + extra
            assert est.dmas == copies + (0 if staged is None else
                                         staged_slices.slice_loads(slices, ops[staged]))
            assert est.bytes >= stream_estimate.FIRST_OPERATION_BYTES * est.first


def test_a_device_without_a_command_stream_reports_none():
    """Off Ethos-U (the test device, an Ethos-N) no stream is estimated: 0, not a guess."""
    g = _one_conv(16, 8)
    for device in (simple_device(), get_device("ethos-n78-1tops")):
        proposal = ProposalSearch(g, device, SMALL).select(None)
        assert proposal.estimated_stream_bytes == 0
        assert all(p.estimated_stream_bytes == 0 for p in proposal.plans)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(height=st.integers(2, 32), rows=st.integers(1, 32), width=st.sampled_from([2, 4, 8]),
       channels=st.integers(1, 80), copied=st.booleans(),
       device=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_the_costing_charges_the_operations_the_stream_runs(height, rows, width, channels,
                                                             copied, device):
    """The issue overhead the costing charges a one-convolution Plan is for as many NPU
    operations as its stream runs (the estimate's count, which the tests above hold to the
    streams written): one per stripe, times its weight slices where they are staged; copied
    whole, one per stripe."""
    g = _one_conv(height, channels)
    dev = get_device(device)
    gen = PlanGenerator(g, dev, PlannerOptions())
    conv = g.parts[0]
    stripe = StripeConfig.tiled(conv.output.shape, (1, min(rows, height), width, channels),
                                (0, 1, 1, 0))
    copied = copied and stripe.total_stripes > 1       # (one stripe never copies)
    plan = gen.build(0, 0, PlanSpec(stripe, Buffering.RECOMPUTE, 0,
                                    weights=(conv.name,) if copied else ()))
    per = 1 if copied else \
        gen.operations_per_stripe(conv, gen.weight_stage_bytes(conv, stripe))
    assert stream_estimate.plan_stream(plan, g, dev).operations == stripe.total_stripes * per
    assert (per > 1) == (not copied and channels > staged_slices.SLICE_CHANNELS and
                         gen.weight_stage_bytes(conv, stripe) > 0)


def test_the_estimate_is_reported_and_leaves_the_frontier_as_it_was(monkeypatch):
    """The estimate is reported (JSON of Plans, Proposals, the plan result) and is not part of
    the objective: the frontier is the one found when every Plan's estimate is left out."""
    from planner.api import plan
    g = _one_conv(24, 32)
    result = plan(g, "ethos-u55-128", budget="smallest")
    js = result.to_json()
    assert js["estimated_stream_bytes"] == result.chosen.estimated_stream_bytes > 0
    assert all("estimated_stream_bytes" in p for p in js["plans"])
    assert "estimated_stream_bytes" in result.chosen.to_json()
    monkeypatch.setattr(stream_estimate, "plan_stream", lambda *_: stream_estimate.NO_STREAM)
    search = ProposalSearch(g, get_device("ethos-u55-128"))
    assert all(p.estimated_stream_bytes == 0 for p in search.select(None).plans)   # left out
    assert search.frontier == result.frontier


def _conv_chain(seed: int, h: int, w: int, cin: int, couts: list[int], spread: int):
    """A chain of 3x3 convolutions with random int8 weights in [-spread, spread] (a TFLite
    flatbuffer): small ones encode (compress) to fewer bytes than they hold raw."""
    rs = np.random.RandomState(seed)
    g = Graph(rs)
    x = g.input((1, h, w, cin))
    for cout in couts:
        x = g.conv2d(x, cout, act="relu")
        weights = g.tensors[x - 2]      # the convolution's weights, bias, then its output
        weights.data = rs.randint(-spread, spread + 1, size=weights.shape).astype(np.int8)
    return g.build([x])


@given(seed=st.integers(0, 2**16), h=st.integers(16, 28), w=st.integers(16, 28),
       cin=st.sampled_from([4, 8]), couts=st.lists(st.integers(17, 64), min_size=1, max_size=2),
       spread=st.sampled_from([3, 127]))
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_the_estimate_counts_the_slice_loads_the_stream_makes(seed, h, w, cin, couts, spread):
    """Any small chain of convolutions compiled at its fastest Plan (which stages a Part's
    weights over several stripes): the staged slices the estimate counts DMAd
    (``plan_stream``'s DMAs less its copies', ``planner.staged_slices``) are the slices the
    stream loads into the staging buffer, Plan by Plan; where the stream reads a slice
    encoded past its half in place from flash (the estimate does not know encoded lengths)
    it loads fewer."""
    pytest.importorskip("ethosu.vela")
    import tvm_ethos
    from tvm_ethos.backends.ethos_u import stream_cascade, stream_weights
    from tvm_ethos.backends.ethos_u.stream_base import FLASH_REGION

    caught, loads = [], {}     # loads: (subgraph, Plan) -> [slices loaded, read from flash]
    generate, slices = stream_cascade.generate_planned, stream_weights.Stager.slices

    def catch(lw, acc, match, proposal, device=None, **kwargs):
        caught.append((match.graph, proposal))
        return generate(lw, acc, match, proposal, device, **kwargs)

    def count(self, npu, q, step, channels, block_config):
        out = slices(self, npu, q, step, channels, block_config)
        mine = loads.setdefault((len(caught) - 1, self.halves[step][0]), [0, 0])
        for k, op in enumerate(out):
            if isinstance(op, self.api.NpuDmaOperation):    # a slice's first DMA
                mine[0] += not (k and isinstance(out[k - 1], self.api.NpuDmaOperation))
            elif op.weights[0].region == FLASH_REGION:
                mine[1] += 1
        return out

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(stream_cascade, "generate_planned", catch)
        mp.setattr(stream_weights.Stager, "slices", count)
        tvm_ethos.compile(_conv_chain(seed, h, w, cin, couts, spread),
                          "ethos-u -accelerator_config=ethos-u55-128,llvm",
                          npu_runtime="stream", cache_dir=False, budget=None)
    device = get_device("ethos-u55-128")
    staged = 0
    for i, (graph, proposal) in enumerate(caught):
        for k, plan in enumerate(proposal.plans):
            copies = 2 * sum(p in plan.spec.weights for p in plan.parts)
            estimated = stream_estimate.plan_stream(plan, graph, device).dmas - copies
            stream, in_flash = loads.get((i, k), [0, 0])
            if stream_estimate.staged_part(plan, graph) is None:
                assert estimated == stream == 0
                continue
            staged += 1
            if in_flash:
                assert stream < estimated
            else:
                assert stream == estimated > 0
    assume(staged)
