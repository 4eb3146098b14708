"""Weights a Plan copies to SRAM (``stream_weights``): DMAs of their encoded streams into the
Plan's weight block, the copied Parts' operations reading them there, bit-exact."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from planner.options import PlannerOptions
from planner.staged_slices import SLICE_CHANNELS, slice_loads
from tests.helpers.models import model_path
from tvm_ethos.backends.ethos_u.stream_run import run_payload

pytest.importorskip("ethosu.vela")


def _api():
    from tvm_ethos.backends.ethos_u.stream_base import vela_api

    return vela_api()


@given(parts=st.lists(st.tuples(st.integers(1, 40), st.integers(1, 12), st.integers(1, 4)),
                      min_size=1, max_size=5),
       room=st.integers(0, 1200), base=st.integers(0, 20).map(lambda n: 16 * n))
@settings(max_examples=60, deadline=None)
def test_the_block_holds_what_it_can_and_every_reader_reads_its_copy(parts, room, base):
    """Whatever the streams and the block: the DMAs land 16-aligned inside the block without
    overlapping, copy each stream whole from flash, come before the Plan's first operation;
    a reader of a copied stream reads its copy; weights are copied before any bias; copied
    and left-in-flash bytes add up to every copied Part's streams."""
    from tvm_ethos.backends.ethos_u.stream_weights import WeightPool, copy_weights, pool_key

    api = _api()
    ops, part_ops, flash, streams = [SimpleNamespace(weights=[], biases=[])], {}, 0, {}
    for j, (w16, b16, n) in enumerate(parts):
        w = api.NpuAddressRange(0, flash, 16 * w16)
        b = api.NpuAddressRange(0, flash + 16 * w16, 16 * b16)
        flash += 16 * (w16 + b16)
        streams[f"p{j}"] = (w, b)
        mine = [SimpleNamespace(weights=[w], biases=[b]) for _ in range(n)]
        part_ops[(3, f"p{j}")] = mine
        ops += mine
    pool = WeightPool(room, tuple(streams))
    out, rep = copy_weights(api, ops, {3: 1}, part_ops, {3: pool}, {pool_key(3): base})
    dmas = [op for op in out if isinstance(op, api.NpuDmaOperation)]
    assert out[0] is ops[0] and out[1:1 + len(dmas)] == dmas and out[1 + len(dmas):] == ops[1:]
    spans = sorted((d.dest.address, d.dest.address + d.dest.length) for d in dmas)
    assert all(a % 16 == 0 and base <= a and e <= base + room for a, e in spans)
    assert all(x[1] <= y[0] for x, y in zip(spans, spans[1:]))
    assert rep.dma_bytes == sum(d.src.length for d in dmas)
    total = sum(w.length + b.length for w, b in streams.values())
    assert rep.dma_bytes + rep.left_in_flash == total
    by_src = {d.src.address: d for d in dmas}
    for name, (w, b) in streams.items():
        for op in part_ops[(3, name)]:
            for what, src in (("weights", w), ("biases", b)):
                got = getattr(op, what)[0]
                d = by_src.get(src.address)
                if d is None:
                    assert got is src
                else:
                    assert d.src.length == src.length == d.dest.length
                    assert (got.region, got.address, got.length) == (1, d.dest.address,
                                                                      src.length)
            if b.address in by_src:
                assert w.address in by_src
    # weights first: a bias is copied only where no weight stream was left out for want of room
    kinds = ["weights" if any(d.src.address == w.address for w, _ in streams.values())
             else "biases" for d in dmas]
    assert kinds == sorted(kinds, key=lambda k: k != "weights")


def test_a_plan_prefetching_across_plans_is_refused_by_name():
    from tvm_ethos.backends.ethos_u.stream_weights import PrefetchFormError, weight_pool

    plan = SimpleNamespace(spec=SimpleNamespace(prefetched=True, prefetch_next=False, weights=()),
                           tensor_configs=(), parts=("a",))
    with pytest.raises(PrefetchFormError, match="weight_prefetch=False"):
        weight_pool(plan, set())


def _weight_traffic(payload, x):
    """(outputs, DMAs into the arena as (src, dst, length), (region, base, length) of every
    weight and bias/scale stream an operation reads)."""
    dmas, reads = [], []

    def keep(cmd, state, mem):
        if cmd.name == "NPU_OP_DMA_START":
            if state.param("DMA0_DST_REGION") == 1:
                dmas.append((state.address("DMA0_SRC"), state.address("DMA0_DST"),
                             state.address("DMA0_LEN")))
        elif cmd.name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            for reg in ("WEIGHT", "SCALE"):
                reads.append((state.param(f"{reg}_REGION"), state.address(f"{reg}_BASE"),
                              state.address(f"{reg}_LENGTH")))

    outs, _ = run_payload(payload, [x], keep)
    return outs, dmas, reads


def test_copied_weights_are_dmas_of_their_encoded_streams_into_the_plan():
    """resnet8_cifar within 40 KiB, every striped Part's weights copied to SRAM: the stream
    DMAs encoded streams from flash into the arena (the bytes the report counts), the copied
    operations read them there, the high-water mark is still the plan's peak and the output
    bit-exact with BUILTIN_REF."""
    from tests.tvm_ethos.test_stream_models import _streams_its_plan

    name = "resnet8_cifar"
    cm = tvm_ethos.compile(str(model_path(name)), "ethos-u -accelerator_config=ethos-u55-128,llvm",
                           budget="40KiB", npu_runtime="stream", cache_dir=False,
                           planner_options=PlannerOptions(weight_placements=("sram",)))
    (sub,) = cm.plan_report["subgraphs"].values()
    assert any(p["weights"] for p in sub["plans"])
    entry = _streams_its_plan(cm, name)
    (sym, _), = cm.plan_report["streams"].items()
    payload = cm.program.payloads[sym]
    x = np.zeros([int(s) for s in cm.inputs[0].shape], np.int8)
    _, dmas, reads = _weight_traffic(payload, x)
    assert dmas and sum(n for _, _, n in dmas) == entry["weight_dma_bytes"] == \
        entry["dma_bytes"]["0->1"]
    assert all(src + n <= len(payload.flash) for src, _, n in dmas)
    # every copy is read, every weight read from the arena is a copy, whole
    in_sram = [r for r in reads if r[0] == 1]
    assert {(1, dst, n) for _, dst, n in dmas} == set(in_sram)


@given(h=st.integers(1, 5), w=st.integers(1, 5), c=st.integers(1, 40), data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_channel_slice_addresses_its_channels_of_the_tensor(h, w, c, data):
    """Channels [c0, c0 + n) of any feature map (ring tiles included) address element
    (y, x, ch) where the whole map has (y, x, c0 + ch)."""
    from ethosu_stream.feature_map import FeatureMap
    from tvm_ethos.backends.ethos_u.stream_cascade import _Storage, feature_map
    from tvm_ethos.backends.ethos_u.stream_weights import channel_slice

    c0 = data.draw(st.integers(0, c - 1))
    n = data.draw(st.integers(1, c - c0))
    y0, x0 = data.draw(st.integers(0, 9)), data.draw(st.integers(0, 9))
    st_ = _Storage(512, (h, w, c), (30, 30, c), "int8")
    whole = feature_map(_api(), st_, (y0, y0 + h), (x0, x0 + w), 1, None, 0)

    def grid(fm, depth):
        t = fm.tiles
        return FeatureMap(1, tuple(t.addresses), t.height_0, t.height_1, t.width_0,
                          fm.strides.width, fm.strides.height, fm.strides.depth, False,
                          np.dtype(np.int8), 0).grid(h, w, depth)

    part = channel_slice(whole, c0, n)
    assert part.shape.depth == n
    np.testing.assert_array_equal(grid(part, n), grid(whole, c)[:, :, c0:c0 + n])


def test_staged_weights_are_dmad_slice_by_slice_into_the_staging_buffer():
    """ds_cnn_kws's fastest plan stages its pointwise convolutions' weights: each is run in
    slices of 16 output channels, each slice reading the encoded weights the DMA just before
    it put in the arena (the bytes the report counts), the high-water mark still the plan's
    peak and the output bit-exact with BUILTIN_REF."""
    from tests.tvm_ethos.test_stream_models import _streams_its_plan

    name = "ds_cnn_kws"
    cm = tvm_ethos.compile(str(model_path(name)), "ethos-u -accelerator_config=ethos-u55-128,llvm",
                           npu_runtime="stream", cache_dir=False, budget=None)
    entry = _streams_its_plan(cm, name)
    (sym, _), = cm.plan_report["streams"].items()
    payload = cm.program.payloads[sym]
    last, dma_bytes, sram_reads = {}, 0, 0

    def keep(cmd, state, mem):
        nonlocal dma_bytes, sram_reads
        if cmd.name == "NPU_OP_DMA_START" and state.param("DMA0_DST_REGION") == 1:
            n = state.address("DMA0_LEN")
            last[state.address("DMA0_DST")] = (n, state.address("DMA0_SRC"))
            dma_bytes += n
        elif cmd.name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            for reg in ("WEIGHT", "SCALE"):
                if state.param(f"{reg}_REGION") == 1:
                    base, n = state.address(f"{reg}_BASE"), state.address(f"{reg}_LENGTH")
                    assert last[base][0] == n        # what the last DMA there wrote, whole
                    src = last[base][1]
                    assert mem.read_bytes(1, base, n).tobytes() == payload.flash[src:src + n]
                    assert state.param("OFM_DEPTH_M1") + 1 <= SLICE_CHANNELS
                    sram_reads += 1

    run_payload(payload, [np.zeros([int(s) for s in cm.inputs[0].shape], np.int8)], keep)
    assert sram_reads and dma_bytes == entry["weight_dma_bytes"] == entry["dma_bytes"]["0->1"]


@given(slices=st.integers(1, 5), stripes=st.integers(1, 6), last=st.integers(1, 16))
@settings(max_examples=40, deadline=None)
def test_staged_stripes_reload_only_the_slices_the_halves_do_not_hold(slices, stripes, last):
    """A staged Part of any number of 16-channel slices over any number of stripes: every
    stripe runs each slice once, every slice reads the half the last DMA into it filled with
    that slice, and after the first stripe only the slices neither half holds are DMAd (every
    other stripe runs backwards, so it starts with the two slices the halves hold): none
    again for one or two slices, ``slices - 2`` per stripe for more, the loads the planner's
    estimates count (``planner.staged_slices.slice_loads``)."""
    from ethos_arch.ops import Op
    from tvm_ethos.backends.ethos_u.stream_cascade import _Storage, feature_map
    from tvm_ethos.backends.ethos_u.stream_weights import Stager

    api = _api()
    channels = 16 * (slices - 1) + last
    half_a, half_b, half = 4096, 8192, 4096
    stager = Stager(api, None, None, {7: (0, (half_a, half_b), half)})
    stager.constants[7] = (None, None)
    src = {}
    for j, c0 in enumerate(range(0, channels, 16)):
        n = min(16, channels - c0)
        w = api.NpuAddressRange(0, 1000 * j, 96 + j)
        b = api.NpuAddressRange(0, 1000 * j + 512, 10 * n)
        stager.encoded[(7, c0, n, 16)] = ([w], [b])
        src[c0] = w.address
    st_ = _Storage(0, (4, 4, channels), (4, 4, channels), "int8")
    fm = feature_map(api, st_, (0, 4), (0, 4), 1, None, 0)
    npu = SimpleNamespace(ofm=fm, ifm=fm,
                          padding=SimpleNamespace(top=0, left=0, bottom=0, right=0))
    q = SimpleNamespace(kind=Op.CONV2D)
    held, dmas = {}, 0
    for _ in range(stripes):
        ran = []
        for op in stager.slices(npu, q, 7, channels, lambda op, key: SimpleNamespace(depth=16)):
            if isinstance(op, api.NpuDmaOperation):
                held[op.dest.address] = op.src.address
                dmas += 1
                continue
            c0 = (op.ofm.tiles.addresses[0] - npu.ofm.tiles.addresses[0])
            ran.append(c0)
            w, b = op.weights[0], op.biases[0]
            assert w.address in (half_a, half_b) and held[w.address] == src[c0]
            assert held[b.address] == src[c0] + 512
        assert sorted(ran) == list(range(0, channels, 16))
    # weights and biases: two DMAs per slice loaded
    assert dmas == 2 * slice_loads(slices, stripes)


def test_a_half_still_holding_a_slice_is_read_again_without_a_dma():
    """person_detect at the ``size`` budget stages Parts of one and two slices through a
    cascade of many stripes: a slice is DMAd into a half once and its later stripes read it
    there (no DMA writes a half the bytes it already holds), every staged read still reads
    what the last DMA there wrote, whole, and the output is bit-exact with TFLite Micro's."""
    from tests.helpers.tflite_oracle import TflmOracle

    source = model_path("tflite-micro/person_detect").read_bytes()
    cm = tvm_ethos.compile_tflite(source, "ethos-u", accelerator_config="ethos-u55-128",
                                  budget="size")
    (entry,) = cm.plan_report["streams"].values()
    (payload,) = cm.program.payloads.values()
    assert entry["generated"] and entry["schedule"] == "plan" and entry["realizes_plan"], entry
    assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
        == entry["planned_peak_bytes"], entry
    x = np.random.RandomState(7).randint(
        -128, 128, [int(s) for s in cm.inputs[0].shape]).astype(np.int8)
    held, dma_bytes, sram_reads, reads_since_dma = {}, 0, 0, {}

    def keep(cmd, state, mem):
        nonlocal dma_bytes, sram_reads
        if cmd.name == "NPU_OP_DMA_START" and state.param("DMA0_DST_REGION") == 1:
            dst, n = state.address("DMA0_DST"), state.address("DMA0_LEN")
            assert held.get(dst) != (n, state.address("DMA0_SRC")), "a DMA of what is there"
            held[dst] = (n, state.address("DMA0_SRC"))
            reads_since_dma[dst] = 0
            dma_bytes += n
        elif cmd.name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            for reg in ("WEIGHT", "SCALE"):
                if state.param(f"{reg}_REGION") == 1:
                    base, n = state.address(f"{reg}_BASE"), state.address(f"{reg}_LENGTH")
                    assert held[base][0] == n
                    src = held[base][1]
                    assert mem.read_bytes(1, base, n).tobytes() == payload.flash[src:src + n]
                    reads_since_dma[base] += 1
                    sram_reads += 1

    (got,), _ = run_payload(payload, [x], keep)
    want = TflmOracle(source).run([x])[0]
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    assert dma_bytes == entry["weight_dma_bytes"] == entry["dma_bytes"]["0->1"]
    # a staged slice read by several stripes after one DMA
    assert max(reads_since_dma.values()) > 2 and sram_reads > len(reads_since_dma)


def test_where_no_aligned_weight_block_fits_the_weights_stay_in_flash(monkeypatch):
    """A weight block a DMA fills is 16-byte aligned; where no layout with aligned blocks
    fits the plan's peak, the stream keeps its plan with the blocks reserved and every
    weight read in place from flash (no weight DMA), bit-exact."""
    from tests.tvm_ethos.test_stream_models import _streams_its_plan
    from tvm_ethos.backends.ethos_u import stream_cascade
    from tvm_ethos.backends.ethos_u.stream_plan import LayoutError

    real = stream_cascade.arena_layout

    def no_aligned_weights(buffers, peak):
        if any(b.kind == "weights" and b.align == 16 for b in buffers):
            raise LayoutError("no aligned weight block fits (test)")
        return real(buffers, peak)

    monkeypatch.setattr(stream_cascade, "arena_layout", no_aligned_weights)
    name = "ds_cnn_kws"
    cm = tvm_ethos.compile(str(model_path(name)), "ethos-u -accelerator_config=ethos-u55-128,llvm",
                           npu_runtime="stream", cache_dir=False, budget=None)
    entry = _streams_its_plan(cm, name)
    assert entry["weight_dma_bytes"] == 0 and "0->1" not in entry["dma_bytes"]
