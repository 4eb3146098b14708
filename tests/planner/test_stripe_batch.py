"""The batched stripe costing (planner.stripe_batch, through PlanCosting.warm_costs) fills
the stripe-cycle memos with exactly what costing one shape at a time gives: the same cycles
with weights streamed and in SRAM, the same idle weight-port cycles, the same fill/drain."""
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner import devices
from planner.options import PlannerOptions
from planner.plans import PlanGenerator
from planner.tflite import load_tflite
from tests.helpers.models import MODELS_DIR
from tests.helpers.simple_device import simple_device
from tests.helpers.strategies import graphs


def _batched_equals_scalar(g, device) -> tuple[int, int]:
    """Cost the stripe shapes of every request of ``g``'s walks batched, Part by Part as
    ``warm_costs`` does, then each (shape, back to back) the batch memoised again one at a
    time on a fresh generator; returns (how many were batched, how many were asked)."""
    gen = PlanGenerator(g, device, PlannerOptions())
    requests = [r for j in range(len(gen.topo)) for r in gen.cost_requests(j)]
    runs: dict = {}
    for p, stripe in requests:
        runs.setdefault(p, set()).update((shape, stripe.total_stripes > 1)
                                         for shape in stripe.count_stripes() if 0 not in shape)
    for p, wanted in runs.items():
        gen.device.perf.summarise_stripes(p, {shape for shape, _ in wanted})
        gen._batch_stripe_cycles(p, {shape for shape, b2b in wanted if not b2b},
                                 {shape for shape, b2b in wanted if b2b})
    asked = {(gen._signature(p), shape, b2b) for p, wanted in runs.items() for shape, b2b in wanted}
    scalar = PlanGenerator(g, device, PlannerOptions())
    by_sig = {gen._signature(p): p for p, _ in requests}
    for (sig, shape, b2b), cycles in gen._shape_cache.items():
        p = by_sig[sig]
        own = scalar._signature(p)
        assert scalar._stripe_cycles(p, own, shape, b2b) == cycles, (p.name, shape, b2b)
        assert scalar._idle_cache[own, shape, b2b] == gen._idle_cache[sig, shape, b2b]
        if b2b:
            assert scalar._fill_cache[own, shape] == gen._fill_cache[sig, shape]
    return len(gen._shape_cache), len(asked)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=5), st.sampled_from(["simple-sram", "simple-dram", "ethos-u55-128",
                                              "ethos-u65-256"]))
def test_batched_stripe_costs_equal_one_at_a_time(g, name):
    if name.startswith("simple-"):
        device = simple_device(name.split("-")[1])
    else:
        device = devices.get_device(name, io_region="dram")
    _batched_equals_scalar(g, device)


@pytest.mark.parametrize("name", ["ethos-u55-128", "ethos-u65-256"])
def test_batched_stripe_costs_on_resnet8(name):
    path = MODELS_DIR / "resnet8_cifar.tflite"
    if not path.exists():
        pytest.skip(f"{path} is not here (TVM_ETHOS_MODELS names the models folder)")
    batched, asked = _batched_equals_scalar(load_tflite(str(path)), devices.get_device(name))
    assert batched == asked > 100      # every shape of resnet8 is costed on arrays


def _requests(gen):
    return [r for j in range(len(gen.topo)) for r in gen.cost_requests(j)]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=5), st.sampled_from(["simple-sram", "simple-dram", "ethos-u55-128",
                                              "ethos-u65-256", "ethos-n78-1tops"]),
       st.sampled_from(["sram", "dram"]))
def test_warm_costs_equal_costing_each_request_alone(g, name, io_region):
    """``warm_costs`` (the requests' sums taken from the batched per-shape memos, the weight
    fetches those memos recorded) gives each request the values, and the weight staging
    bytes, that a fresh generator costing that request alone gives."""
    device = simple_device(io_region) if name.startswith("simple-") else \
        devices.get_device(name, io_region=io_region)
    batched = PlanGenerator(g, device, PlannerOptions())
    requests = list(dict.fromkeys(_requests(batched)))
    values = batched.warm_costs(requests)
    for (p, stripe), value in zip(requests, values):
        alone = PlanGenerator(g, device, PlannerOptions())
        assert alone.warm_cost(p, stripe) == value, (p.name, stripe)
        assert alone.weight_stage_bytes(p, stripe) == batched.weight_stage_bytes(p, stripe)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(graphs(max_parts=5), st.sampled_from(["ethos-u55-128", "ethos-u65-256",
                                              "ethos-n78-1tops"]), st.booleans())
def test_stripe_terms_equal_the_four_methods(g, name, back_to_back):
    """A model's ``stripe_terms`` (Ethos-U: read off one stripe summary per shape) equals
    asking ``compute_cycles``, ``fill_drain_cycles``, ``fm_access_cycles`` and
    ``weight_fetches`` shape by shape (``PerfModel.stripe_terms``), batched summaries or
    not."""
    from planner.perf.base import PerfModel
    gen = PlanGenerator(g, devices.get_device(name), PlannerOptions())
    shapes: dict = {}
    for p, stripe in _requests(gen):
        shapes.setdefault(p, set()).update(s for s in stripe.count_stripes() if 0 not in s)
    perf = gen.device.perf
    for k, (p, wanted) in enumerate(shapes.items()):
        ordered = sorted(wanted)
        if k % 2:
            perf.summarise_stripes(p, wanted)
        got = perf.stripe_terms(p, ordered, back_to_back)
        assert got == PerfModel.stripe_terms(perf, p, ordered, back_to_back), p.name
        assert not back_to_back or got.fill_drain == [perf.fill_drain_cycles(p, s)
                                                      for s in ordered]
