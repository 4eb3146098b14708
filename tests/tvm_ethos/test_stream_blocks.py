"""Where a planned stream's block configs and memory regions come from: each operation runs
the OFM block the planner's performance model costed its stripe with, where Vela takes it
(``npu_ops.chosen_block``), or the block height and width of the operation before where
that is estimated no slower (``stream_block_agreement``), and on an Ethos-U65 the plan's
SRAM is the fast scratch (region 2), the network's inputs and outputs in the arena
(region 1) as TFLite Micro places them."""

import numpy as np
import pytest
from graph_builder import Graph
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from planner.errors import PlannerError
from planner.perf.ethos_u_npu import ACCELERATORS, find_block_config
from tests.helpers.perf_strategies import PROPS, npu_ops
from tests.helpers.tflite_oracle import oracle, random_inputs
from tests.tvm_ethos.test_stream_cascade import LAYERS, _chain, _two_convs, compile_on_frontier
from tvm_ethos.backends.ethos_u.stream_block_agreement import AGREED_BLOCK, config_with_block
from tvm_ethos.backends.ethos_u.stream_cascade import _Emitter
from tvm_ethos.backends.ethos_u.stream_run import run_payload

pytest.importorskip("ethosu.vela")

ACC_NAME = "ethos-u55-128"


def _conv(oh, ow, cin, cout, k, rs):
    """A hand-built convolution (SAME, stride 1) over an IFM at 0 and an OFM at 8192, its
    weights to be encoded for whatever block it gets."""
    from ethosu.vela import api

    def fm(h, w, c, address):
        f = api.NpuFeatureMap()
        f.data_type = api.NpuDataType.INT8
        f.shape = api.NpuShape3D(h, w, c)
        f.layout = api.NpuLayout.NHWC
        f.region = 1
        f.quantization = api.NpuQuantization(scale_f32=0.05, zero_point=3)
        f.tiles = api.NpuTileBox(h, 0, w, [address, 0, 0, 0])
        return f

    op = api.NpuConv2DOperation()
    op.ifm, op.ofm = fm(oh, ow, cin, 0), fm(oh, ow, cout, 8192)
    op.kernel = api.NpuKernel(k, k)
    op.padding = api.NpuPadding(k // 2, k // 2, k - 1 - k // 2, k - 1 - k // 2)
    op.block_traversal = api.NpuBlockTraversal.DEPTH_FIRST
    op.rounding_mode = api.NpuRoundingMode.TFL
    op.activation = None
    weights = rs.randint(-127, 128, (cout, k, k, cin)).astype(np.int16)
    return op, weights


def _run_conv(op, weights, block, x):
    """Encode the weights for ``block``'s depth, generate, run; the OFM bytes."""
    from ethosu.vela import api

    from ethosu_stream import Memory, run_stream

    acc = api.NpuAccelerator.Ethos_U55_128
    op.block_config = block
    enc = bytes(api.npu_encode_weights(acc, weights, (1, 1), 8, block.depth, False,
                                       api.NpuBlockTraversal.DEPTH_FIRST))
    bias = b"".join(bytes(api.npu_encode_bias(np.int64(7 * i), 1 << 30, 36))
                    for i in range(weights.shape[0]))
    enc += bytes(-len(enc) % 16)
    bias += bytes(-len(bias) % 16)   # whole 16-byte bursts
    flash = enc + bias
    op.weights = [api.NpuAddressRange(0, 0, len(enc))]
    op.biases = [api.NpuAddressRange(0, len(enc), len(bias))]
    mem = Memory({0: flash, 1: 8192 + x.size // x.shape[2] * weights.shape[0]})
    mem.regions[1][: x.size] = x.reshape(-1).view(np.uint8)
    run_stream(api.npu_generate_register_command_stream([op], acc), mem, ACC_NAME)
    return bytes(mem.regions[1][8192:])


@given(oh=st.integers(1, 12), ow=st.integers(1, 12), cin=st.integers(1, 24),
       cout=st.integers(1, 40), k=st.sampled_from([1, 3]), h=st.integers(1, 40),
       w=st.integers(1, 70), d=st.integers(1, 140), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_any_wanted_block_is_taken_where_legal_and_computes_the_same(
        oh, ow, cin, cout, k, h, w, d, seed):
    """Whatever block is asked for: the operation runs it when Vela's list has it, else
    (1-high blocks the list omits) when the generator's own check takes it and its depth
    splits the OFM in 16s, else Vela's largest; and the OFM is the same byte for byte as
    with Vela's largest block (the weights encoded for each block's depth)."""
    from tvm_ethos.backends.ethos_u import npu_ops
    from tvm_ethos.backends.ethos_u.stream_base import npu_accelerator

    rs = np.random.RandomState(seed)
    acc = npu_accelerator(ACC_NAME)
    op, weights = _conv(oh, ow, cin, cout, k, rs)
    legal = {(c.height, c.width, c.depth) for c in npu_ops.legal_blocks(op, acc)}
    largest = npu_ops.block_config(op, acc)
    block, why = npu_ops.chosen_block(op, acc, (h, w, d))
    got = (block.height, block.width, block.depth)
    if (h, w, d) in legal:
        assert (got, why) == ((h, w, d), npu_ops.PLANNER_BLOCK)
    elif why == npu_ops.PLANNER_BLOCK_UNLISTED:
        assert got == (h, w, d) and npu_ops.generator_accepts(op, acc, got)
        assert d % 16 == 0 or d >= min(cout, 128)
    else:
        assert why == npu_ops.NOT_LEGAL and block == largest
    assert npu_ops.chosen_block(op, acc, None) == (largest, npu_ops.NO_PLANNER_BLOCK)
    x = rs.randint(-128, 128, (oh, ow, cin)).astype(np.int8)
    assert _run_conv(op, weights, block, x) == _run_conv(op, weights, largest, x)


def test_a_one_high_block_outside_velas_list_is_taken():
    """``npu_find_block_configs`` never lists 1-high blocks, which the Ethos-U55-128's
    micro-block allows and the planner's search (regor's) picks; the generator takes them."""
    from tvm_ethos.backends.ethos_u import npu_ops
    from tvm_ethos.backends.ethos_u.stream_base import npu_accelerator

    acc = npu_accelerator(ACC_NAME)
    op, _ = _conv(5, 6, 8, 16, 3, np.random.RandomState(0))
    assert min(c.height for c in npu_ops.legal_blocks(op, acc)) == 2
    block, why = npu_ops.chosen_block(op, acc, (1, 6, 16))
    assert (block.height, block.width, block.depth) == (1, 6, 16)
    assert why == npu_ops.PLANNER_BLOCK_UNLISTED
    # more than the shared buffer holds: Vela's largest
    op, _ = _conv(12, 12, 24, 40, 3, np.random.RandomState(0))
    assert npu_ops.chosen_block(op, acc, (32, 64, 128))[1] == npu_ops.NOT_LEGAL


def _blocks_run(payload, x):
    """(outputs, [(operation, OFM block (h, w, d), IFM region, OFM region, OFM shape)])."""
    seen = []

    def keep(cmd, state, mem):
        if cmd.name not in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL",
                            "NPU_OP_ELEMENTWISE"):
            return
        seen.append((cmd.name, tuple(state.param(f"OFM_BLK_{a}_M1") + 1
                                     for a in ("HEIGHT", "WIDTH", "DEPTH")),
                     state.param("IFM_REGION"), state.param("OFM_REGION"),
                     tuple(state.param(f"OFM_{a}_M1") + 1 for a in ("HEIGHT", "WIDTH",
                                                                     "DEPTH"))))

    outs, _ = run_payload(payload, [x], keep)
    return outs, seen


def test_operations_run_the_block_the_planner_costed(monkeypatch):
    """The stream's block registers are the planner's (here a performance model whose every
    operation is costed with a 2 x 4 x 16 block), the report counts them, and the outputs
    stay bit-exact with LiteRT."""
    from planner.perf.ethos_u import EthosUPerfModel

    real = EthosUPerfModel.breakdown

    def fixed(self, part, out_shape):
        import dataclasses

        return [dataclasses.replace(b, config=dataclasses.replace(b.config,
                                                                  ofm_block=(2, 4, 16)))
                for b in real(self, part, out_shape)]

    monkeypatch.setattr(EthosUPerfModel, "breakdown", fixed)
    model = _two_convs()
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={ACC_NAME},llvm",
                           npu_runtime="stream", cache_dir=False, budget="3KiB")
    ((sym, entry),) = cm.plan_report["streams"].items()
    assert entry["schedule"] == "plan"
    (x,) = random_inputs(model, np.random.RandomState(2))
    outs, seen = _blocks_run(cm.program.payloads[sym], x)
    ref = oracle(model, [x])[0]
    np.testing.assert_array_equal(outs[0].reshape(ref.shape), ref)
    convs = [(blk, ofm) for name, blk, _, _, ofm in seen if name == "NPU_OP_CONV"]
    assert len(convs) > 2
    for blk, ofm in convs:   # clipped to the OFM, rounded up to the 1 x 2 x 8 micro-block
        assert blk == tuple(-(-min(b, o) // u) * u for b, o, u in zip((2, 4, 16), ofm,
                                                                        (1, 2, 8)))
    # (Vela's largest block for these 1-high stripes is 2 high: npu_find_block_configs
    # lists none lower)
    assert all(blk[0] == 1 for blk, ofm in convs if ofm[0] == 1)
    assert sum(entry["block_configs"].values()) == len(seen)
    assert sum(n for why, n in entry["block_configs"].items()
               if why.startswith("planner")) == len(convs)


def test_shipped_sized_plan_counts_its_blocks():
    """With the real performance model: every operation is counted once, most run the
    planner's block, and the planner's estimate of the stream stands beside them."""
    model = _two_convs()
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={ACC_NAME},llvm",
                           npu_runtime="stream", cache_dir=False, budget="3KiB")
    ((sym, entry),) = cm.plan_report["streams"].items()
    counts = entry["block_configs"]
    _, seen = _blocks_run(cm.program.payloads[sym], np.zeros((1, 20, 9, 8), np.int8))
    assert sum(counts.values()) == len(seen)
    planner = counts.get("planner", 0) + counts.get(
        "planner, not in npu_find_block_configs' list", 0) + counts.get(AGREED_BLOCK, 0)
    assert planner == len(seen)


@PROPS
@given(op=npu_ops(), accelerator=st.sampled_from(sorted(ACCELERATORS)))
def test_a_block_config_rebuilt_from_its_ofm_block_is_the_searchs(op, accelerator):
    """Oracle: the planner's block search. The IFM block, traversal and accumulator width
    ``config_with_block`` gives an operation's OFM block are those the search chose with it,
    so the cycles an agreeing block is estimated at are the search's own formula's."""
    acc = ACCELERATORS[accelerator]
    try:
        found = find_block_config(acc, op)
    except PlannerError:
        return
    assert config_with_block(acc, op, found.ofm_block) == found


def _kernel_blocks(payload, x):
    """The (height, width) block every kernel operation of ``payload`` ran, in order."""
    _, seen = _blocks_run(payload, x)
    return [blk[:2] for _, blk, _, _, _ in seen]


def test_an_operation_keeps_the_block_before_where_that_is_no_slower(monkeypatch):
    """A cascade whose layers alternate: where the block of the operation before is legal
    and estimated no slower, the operation runs it (counted as such), fewer operations change
    the block's height or width than with each layer's own block, the stream is shorter and
    the output stays bit-exact with LiteRT."""
    model = _chain(0, 24, 24, 8, ["conv3", "dw3", "conv1", "conv3"])

    def build():
        cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={ACC_NAME},llvm",
                               npu_runtime="stream", cache_dir=False, budget="smallest")
        ((sym, entry),) = cm.plan_report["streams"].items()
        return cm.program.payloads[sym], entry["block_configs"]

    (x,) = random_inputs(model, np.random.RandomState(3))
    agreeing, counts = build()
    assert counts.get(AGREED_BLOCK, 0) > 0
    outs, _ = _blocks_run(agreeing, x)
    ref = oracle(model, [x])[0]
    np.testing.assert_array_equal(outs[0].reshape(ref.shape), ref)
    monkeypatch.setattr(_Emitter, "agreeing_block", lambda self, npu, cfg: None)
    own, own_counts = build()
    assert AGREED_BLOCK not in own_counts
    assert sum(own_counts.values()) == sum(counts.values())

    def changes(blocks):
        return sum(a != b for a, b in zip(blocks, blocks[1:]))

    assert changes(_kernel_blocks(agreeing, x)) < changes(_kernel_blocks(own, x))
    assert len(agreeing.driver_payload) < len(own.driver_payload)


@pytest.mark.parametrize("budget", [None, "4KiB"])
def test_ethos_u65_keeps_the_plan_in_the_fast_scratch(budget):
    """On an Ethos-U65 the plan's buffers are region 2 (the SRAM), touched up to exactly the
    plan's peak; the arena (region 1, DRAM) holds only the input and the output, which one
    copy at each end moves; bit-exact with LiteRT."""
    model = _two_convs()
    cm = tvm_ethos.compile(model, "ethos-u -accelerator_config=ethos-u65-256,llvm",
                           npu_runtime="stream", cache_dir=False, budget=budget)
    ((sym, entry),) = cm.plan_report["streams"].items()
    payload = cm.program.payloads[sym]
    assert entry["schedule"] == "plan" and entry["realizes_plan"]
    assert entry["sram_region"] == 2 == payload.sram_region
    assert entry["sram_high_water_bytes"] == entry["fast_scratch_high_water_bytes"] \
        == entry["planned_peak_bytes"] == payload.fast_scratch_bytes
    io = 20 * 9 * 8 + 20 * 9 * 8   # input, then the output on 16 bytes
    assert entry["scratch_high_water_bytes"] == io == payload.scratch_bytes
    assert [a.offset for a in payload.inputs + payload.outputs] == [0, 20 * 9 * 8]
    (x,) = random_inputs(model, np.random.RandomState(5))
    outs, seen = _blocks_run(payload, x)
    ref = oracle(model, [x])[0]
    np.testing.assert_array_equal(outs[0].reshape(ref.shape), ref)
    regions = [(i, o) for _, _, i, o, _ in seen]
    assert regions[0] == (1, 2) and regions[-1] == (2, 1)
    assert all(r == (2, 2) for r in regions[1:-1])
    np.testing.assert_array_equal(cm.run(x)[0], outs[0].reshape(cm.run(x)[0].shape))


def test_ethos_u55_keeps_the_plan_in_the_arena():
    model = _two_convs()
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={ACC_NAME},llvm",
                           npu_runtime="stream", cache_dir=False, budget="3KiB")
    ((sym, entry),) = cm.plan_report["streams"].items()
    assert entry["sram_region"] == 1 and cm.program.payloads[sym].fast_scratch_bytes == 0
    assert entry["sram_high_water_bytes"] == entry["scratch_high_water_bytes"] \
        == entry["planned_peak_bytes"]
    assert entry["fast_scratch_high_water_bytes"] == 0


@given(seed=st.integers(0, 2**16), h=st.integers(8, 20), w=st.integers(3, 10),
       c=st.integers(1, 8), where=st.floats(0, 1), data=st.data())
@settings(max_examples=3, deadline=None)
def test_any_chain_at_any_budget_keeps_its_plan_in_the_u65_fast_scratch(seed, h, w, c, where,
                                                                        data):
    """Any small chain planned anywhere on its frontier for an Ethos-U65: the fast scratch's
    high-water mark is the plan's peak (wherever the layout puts the input, which the copy
    touches whole), and the outputs are bit-exact with LiteRT."""
    model = _chain(seed, h, w, c, data.draw(st.lists(LAYERS, min_size=2, max_size=3)))
    target = "ethos-u -accelerator_config=ethos-u65-256,llvm"
    cm, budget, entry = compile_on_frontier(model, target, where)
    assert entry["sram_region"] == 2
    assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
        == entry["planned_peak_bytes"] <= budget
    xs = random_inputs(model, np.random.RandomState(seed))
    ref = oracle(model, xs)[0]
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)


def test_a_convolution_runs_the_traversal_the_planner_costed():
    """A 3x3 convolution over 16 channels is costed part-kernel-first (it fills the MAC
    array better, as Vela chooses), a 1x1 over 32 depth-first: the stream programs each
    (KERNEL_STRIDE bit 2), its weights encoded in that order, bit-exact with LiteRT."""
    g = Graph(np.random.RandomState(3))
    x = g.input((1, 10, 8, 16))
    a = g.conv2d(x, 32, act="relu")
    model = g.build([g.conv2d(a, 8, kernel=(1, 1))])
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={ACC_NAME},llvm",
                           npu_runtime="stream", cache_dir=False)
    ((sym, payload),) = cm.program.payloads.items()
    order = []

    def keep(cmd, state, mem):
        if cmd.name == "NPU_OP_CONV":
            order.append((state.param("KERNEL_HEIGHT_M1") + 1,
                          (state.param("KERNEL_STRIDE") >> 2) & 1))

    (xv,) = random_inputs(model, np.random.RandomState(8))
    outs, _ = run_payload(payload, [xv], keep)
    assert {k: pk for k, pk in order} == {3: 1, 1: 0}
    ref = oracle(model, [xv])[0]
    np.testing.assert_array_equal(outs[0].reshape(ref.shape), ref)
