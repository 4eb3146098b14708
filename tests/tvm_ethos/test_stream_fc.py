"""FULLY_CONNECTED of any batch and reduction length on the Ethos-U, in its command stream, run
on the functional model (``ethosu_stream``) and exact against TFLite Micro, the Ethos-U's
oracle: Hypothesis over the input's rank and shape (TFLite reads it as rows of the weights'
depth), the reduction length, the units, per-tensor and per-axis quantization and the fused
activation. TFLite Micro rounds FULLY_CONNECTED twice (``MultiplyByQuantizedMultiplier``); a
case with ties between that and LiteRT's single rounding pins the stream to TFLite Micro's."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import tflm_oracle, tflm_random_inputs
from tvm_ethos.backends.ethos_u.ops_fc import MAX_EXTENT, row_plane
from tvm_ethos.backends.ethos_u.stream_gen import generate
from tvm_ethos.backends.ethos_u.stream_run import run_payload
from tvm_ethos.compute.quant import f32, mbqm_np, quantize_multiplier
from tvm_ethos.partition import partition
from tvm_ethos.pipeline.npu_subgraphs import attach_npu_constants, lower_npu_subgraphs
from tvm_ethos.targets import parse_targets

pytest.importorskip("ethosu.vela")

ACCELERATORS = ("ethos-u55-128", "ethos-u55-256", "ethos-u65-256")


def fc_model(rs, in_shape, n, per_channel=False, act=None, keep_num_dims=False) -> bytes:
    """One int8 FULLY_CONNECTED over an input of ``in_shape`` whose last dimension is the
    reduction length; the output has one row per input row (``keep_num_dims``: the input's
    leading dimensions)."""
    k = in_shape[-1]
    x = tb.T(in_shape, "int8", scale=rs.uniform(0.01, 0.1), zp=int(rs.randint(-30, 30)))
    wsc = rs.uniform(0.002, 0.02, size=n if per_channel else 1).astype(np.float32)
    w = tb.T([n, k], "int8", scale=wsc, zp=np.zeros(wsc.size, np.int64),
             data=rs.randint(-127, 128, size=(n, k)).astype(np.int8))
    bias = tb.T([n], "int32", scale=np.broadcast_to(x.scale[0] * wsc, (n,)).astype(np.float32),
                zp=np.zeros(n, np.int64), data=rs.randint(-3000, 3000, size=n).astype(np.int32))
    rows = int(np.prod(in_shape)) // k
    out_shape = list(in_shape[:-1]) + [n] if keep_num_dims else [rows, n]
    y = tb.T(out_shape, "int8", scale=rs.uniform(0.05, 0.3), zp=int(rs.randint(-30, 30)))

    def opts(b):
        tflite.FullyConnectedOptionsStart(b)
        tflite.FullyConnectedOptionsAddFusedActivationFunction(b, tb.ACT[act])
        tflite.FullyConnectedOptionsAddKeepNumDims(b, keep_num_dims)
        return tflite.FullyConnectedOptionsEnd(b)

    return tb.build([x, w, bias, y], [0], [3], tb.BO.FULLY_CONNECTED,
                    tb.BOPT.FullyConnectedOptions, opts, op_inputs=[0, 1, 2])


def lowered(model: bytes, accelerator: str):
    """The model's one lowered Ethos-U subgraph (it must be wholly on the NPU)."""
    mod = tvm_ethos.load_model(model)
    tl = parse_targets(f"ethos-u -accelerator_config={accelerator},llvm", {})
    pmod, _ = partition(mod, tl)
    (lw,) = lower_npu_subgraphs(attach_npu_constants(pmod, {"ethos-u"})).values()
    kinds = [q.kind for q in lw.layers]   # rows of a 3-D or 4-D input read as 2-D, and
    # keep_num_dims reshapes them back
    assert kinds.count("fully_connected") == 1 and set(kinds) <= {"fully_connected",
                                                                  "reshape"}, kinds
    return lw


def assert_stream_is_tflite_micro(model: bytes, accelerator: str, seeds=(0, 1)) -> None:
    payload = generate(lowered(model, accelerator), accelerator)
    outs = []
    for seed in seeds:
        xs = tflm_random_inputs(model, np.random.RandomState(seed))
        (ref,) = tflm_oracle(model, xs)
        got, stats = run_payload(payload, xs)
        np.testing.assert_array_equal(got[0].reshape(ref.shape), ref)
        assert stats.macs > 0
        outs.append(ref)
    if outs[0].size > 1:
        assert any(not np.array_equal(outs[0], o) for o in outs[1:]) or np.ptp(outs[0]) > 0


@st.composite
def fc_cases(draw):
    rank = draw(st.sampled_from([2, 3, 4]))
    k = draw(st.one_of(st.integers(1, 40), st.integers(41, 5000)))
    lead = [draw(st.integers(1, 4)) for _ in range(rank - 1)]
    if rank == 4 and lead[0] > 1:
        lead[1:] = [1, 1]   # a batch of one-row inputs (Vela's and our NPU's FC)
    keep = rank > 2 and draw(st.booleans())
    return dict(
        in_shape=tuple(lead) + (k,),
        n=draw(st.integers(1, 80)),
        per_channel=draw(st.booleans()),
        act=draw(st.sampled_from([None, "relu", "relu6", "relu_n1_to_1"])),
        keep_num_dims=keep,
        seed=draw(st.integers(0, 2**16)),
        accelerator=draw(st.sampled_from(ACCELERATORS)),
    )


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fc_cases())
def test_fully_connected_stream_is_tflite_micro_for_any_shape(case):
    accelerator = case.pop("accelerator")
    model = fc_model(np.random.RandomState(case.pop("seed")), **case)
    assert_stream_is_tflite_micro(model, accelerator)


@pytest.mark.parametrize("in_shape, n", [
    ((1, 1), 1),            # one multiply
    ((1, 9000), 3),         # a long reduction (Vela's depth-first traversal in IFM blocks)
    ((6, 300), 33),         # batch 6
    ((1, 25, 20, 8), 4),    # micro_speech's: 500 rows of depth 8
    ((3, 1, 1, 16), 4),     # a batch of 3 (Vela takes it; the NPU reads 3 rows)
    ((70000, 8), 3),        # more rows than a feature map's width: a 2 x 35000 plane
])
def test_fully_connected_shapes_vela_meets(in_shape, n):
    assert_stream_is_tflite_micro(fc_model(np.random.RandomState(5), in_shape, n),
                                  "ethos-u55-128")


def _ties(model: bytes, xs) -> int:
    """How many outputs LiteRT's single rounding gives differently from TFLite Micro's double
    rounding (the accumulators recomputed in numpy)."""
    m = tflite.Model.GetRootAsModel(model, 0)
    g = m.Subgraphs(0)

    def q(i):
        t = g.Tensors(i).Quantization()
        return float(t.ScaleAsNumpy()[0]), int(t.ZeroPointAsNumpy()[0])

    def data(i):
        return m.Buffers(g.Tensors(i).Buffer()).DataAsNumpy()

    (xs_, xz), (ws, _), (ys, _) = q(0), q(1), q(3)
    n = int(g.Tensors(1).ShapeAsNumpy()[0])
    w = data(1).view(np.int8).reshape(n, -1).astype(np.int64)
    x = xs[0].reshape(-1, w.shape[1]).astype(np.int64) - xz
    acc = x @ w.T + data(2).view(np.int32)
    mult, shift = quantize_multiplier(float(np.float32(f32(xs_)) * np.float32(f32(ws))) / ys)
    once = (acc * mult + (1 << (30 - shift))) >> (31 - shift)
    twice = mbqm_np(acc, mult, shift)
    return int((once != twice).sum())


def test_a_rounding_tie_gives_tflite_micros_output_on_the_npu():
    """A 1 -> 70 layer whose input lands some outputs on a tie of the two roundings: the
    stream and the .tflite compiled for ethos-u give TFLite Micro's values, not LiteRT's."""
    model = fc_model(np.random.RandomState(1), (2, 1), 70)
    rs = np.random.RandomState(1)
    inputs = [tflm_random_inputs(model, rs) for _ in range(4)]
    assert sum(_ties(model, xs) for xs in inputs) >= 1
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"]
    for xs in inputs:
        (ref,) = tflm_oracle(model, xs)
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)


def fc_chain(rs, rows: int, k: int, units: tuple[int, int], act=None) -> bytes:
    """Two FULLY_CONNECTED, ``rows x k -> rows x units[0] -> rows x units[1]``: a planned
    NPU group (hello_world's form)."""
    x = tb.T([rows, k], "int8", scale=rs.uniform(0.01, 0.1), zp=int(rs.randint(-30, 30)))
    tensors, ops, prev = [x], [], 0
    for n in units:
        kk = tensors[prev].shape[-1]
        w = tb.T([n, kk], "int8", scale=rs.uniform(0.002, 0.02), zp=0,
                 data=rs.randint(-127, 128, size=(n, kk)).astype(np.int8))
        b = tb.T([n], "int32", scale=float(tensors[prev].scale[0] * w.scale[0]), zp=0,
                 data=rs.randint(-3000, 3000, size=n).astype(np.int32))
        y = tb.T([rows, n], "int8", scale=rs.uniform(0.05, 0.3), zp=int(rs.randint(-30, 30)))
        base = len(tensors)
        tensors += [w, b, y]

        def opts(bld, act=act):
            tflite.FullyConnectedOptionsStart(bld)
            tflite.FullyConnectedOptionsAddFusedActivationFunction(bld, tb.ACT[act])
            return tflite.FullyConnectedOptionsEnd(bld)

        ops.append((tb.BO.FULLY_CONNECTED, tb.BOPT.FullyConnectedOptions, opts,
                    [prev, base, base + 1], [base + 2]))
        prev = base + 2
    return tb.serialize(tensors, ops, [0], [prev])


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.integers(1, 5), k=st.integers(1, 300), n1=st.integers(1, 64),
       n2=st.integers(1, 16), act=st.sampled_from([None, "relu"]), seed=st.integers(0, 999),
       accelerator=st.sampled_from(ACCELERATORS))
def test_planned_fully_connected_chain_in_the_tflite_is_tflite_micro(rows, k, n1, n2, act, seed,
                                                                      accelerator):
    """The .tflite compiled for ethos-u (the planner's schedule, stream_cascade) keeps no
    FULLY_CONNECTED on the CPU and gives TFLite Micro's outputs."""
    model = fc_chain(np.random.RandomState(seed), rows, k, (n1, n2), act)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}",
                           cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u", "ethos-u"], cm.placement_table
    assert cm.plan_reports   # planned, not layer by layer
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = tflm_random_inputs(model, rs)
        (ref,) = tflm_oracle(model, xs)
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)


@pytest.mark.parametrize("in_shape", [(3, 1, 1, 16), (70000, 8)])
def test_a_batch_of_fully_connected_rows_is_on_the_npu_in_the_tflite(in_shape):
    """Three 1 x 1 x 16 rows, or 70000 rows (Vela runs both on the NPU): the planned .tflite
    keeps no operator on the CPU and gives TFLite Micro's outputs."""
    model = fc_model(np.random.RandomState(2), in_shape, 4)
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement_table
    xs = tflm_random_inputs(model, np.random.RandomState(3))
    (ref,) = tflm_oracle(model, xs)
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)


def test_a_batch_of_planes_goes_to_the_npu_and_is_exact():
    """A 2 x 2 x 1 x 8 input (a batch of 2-row planes): TVM's converter multiplied it as it
    is, a batch the NPU does not take, so it stayed on the host (and on TFLite Micro); its 4
    rows read as a 2-D layer, it is one NPU FULLY_CONNECTED on both hosts, TFLite Micro's
    outputs."""
    model = fc_model(np.random.RandomState(4), (2, 2, 1, 8), 5)
    xs = tflm_random_inputs(model, np.random.RandomState(5))
    (ref,) = tflm_oracle(model, xs)
    cm = tvm_ethos.compile(model, "ethos-u,llvm", cache_dir=False)
    fcs = [op for op in cm.partition_report.operators if op.tflite_name == "FULLY_CONNECTED"]
    assert [op.placed_on for op in fcs] == ["ethos-u"], fcs
    np.testing.assert_array_equal(cm.run(*xs)[0].reshape(ref.shape), ref)
    tfl = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert [p.placed_on for p in tfl.placement] == ["ethos-u"]
    np.testing.assert_array_equal(tfl.run(*xs)[0].reshape(ref.shape), ref)


@given(st.one_of(st.integers(1, 3 * MAX_EXTENT),
                 st.integers(1, MAX_EXTENT).map(lambda h: h * 65521)))   # 65521: a prime
def test_row_plane_holds_the_rows_in_the_npus_extent(rows):
    """Every count of rows folds into a plane of the same count within the NPU's height and
    width, one row where it fits, the lowest height otherwise; none only when no height does."""
    plane = row_plane(rows)
    divisors = [h for h in range(1, MAX_EXTENT + 1) if rows % h == 0 and rows // h <= MAX_EXTENT]
    if plane is None:
        assert not divisors
        return
    h, w = plane
    assert h * w == rows and 1 <= h <= MAX_EXTENT and 1 <= w <= MAX_EXTENT
    assert h == divisors[0]
