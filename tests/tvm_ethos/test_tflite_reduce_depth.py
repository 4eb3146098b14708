"""TFLite's SUM, REDUCE_MAX and REDUCE_MIN over the depth (height, width or both reduced with
it, or kept) through the importer, on the Ethos-U as Vela 5.2 lowers them
(``ops_reduce_depth``: SUM one convolution into one channel, REDUCE_MAX a max pool over each
pixel's channels, REDUCE_MIN the same between NOT tables), exact with TFLite Micro on the
compiled TFLite Micro file and on the ``ethos-u,llvm`` package's generated stream; one Part
of the operator's kind whose propagator reads what TFLite's kernel reads; what one operation
cannot take stays a TFLite operator, naming the limit."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import _opts
from test_part_matchers import lowered_of
from test_solitary_movement import _i32, _like, chain, compiled_on_the_npu
from test_tflite_reduce import CODES, reduce_model

import tvm_ethos
from ethos_arch.ops import Op
from planner.errors import PlannerError
from planner.parts import reduce_over_depth_work_bytes
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite
from planner.work_memory import WORK_ATTR, WorkMemory
from tests.helpers.read_regions import boxes, propagated_region
from tests.helpers.tflite_oracle import compiled_matches, inputs_for, tflm_oracle
from tvm_ethos.backends.ethos_u import ops_reduce_depth
from tvm_ethos.emulator.part_matchers import match_subgraph
from tvm_ethos.patterns import QOp

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

#: the axes over the depth the NPU takes: the depth alone, or with height, width or both
DEPTH_AXES = ((3,), (1, 3), (2, 3), (1, 2, 3))
KINDS = {"SUM": Op.REDUCE_SUM, "REDUCE_MAX": Op.REDUCE_MAX, "REDUCE_MIN": Op.REDUCE_MIN}

_shapes = st.tuples(st.just(1), st.integers(1, 9), st.integers(1, 9), st.integers(2, 40))
_q = st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127))
_out_q = st.tuples(st.floats(0.01, 8.0), st.integers(-128, 127))


#: the commands that start an operation or a DMA (not its waits)
_OPERATIONS = ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL", "NPU_OP_ELEMENTWISE",
               "NPU_OP_DMA_START")


def _stream_ops(cm) -> dict[str, int]:
    """The operations and DMAs of the package's one generated stream, by command."""
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"], entry
    return {k: v for k, v in entry["commands"].items() if k in _OPERATIONS}


def _on_the_npu_exact(name: str, shape, axes, keepdims: bool, in_q, out_q=None, seed=0):
    """The one-operator model compiled for ``ethos-u`` (a TFLite Micro file): its reduction
    one ``ethos-u`` operator, the file's outputs equal to TFLite Micro's on the source."""
    data = reduce_model(name, shape, axes, keepdims, in_q, out_q if name == "SUM" else None)
    cm = compiled_matches(data, "ethos-u", seed)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


@settings(max_examples=3, deadline=None)
@given(shape=_shapes, axes=st.sampled_from(DEPTH_AXES), keepdims=st.booleans(), in_q=_q,
       out_q=_out_q)
def test_sum_over_the_depth_is_one_npu_convolution_exact_with_tflite_micro(
        shape, axes, keepdims, in_q, out_q):
    _on_the_npu_exact("SUM", shape, axes, keepdims, in_q, out_q)


@settings(max_examples=3, deadline=None)
@given(shape=_shapes, axes=st.sampled_from(DEPTH_AXES), keepdims=st.booleans(), in_q=_q,
       name=st.sampled_from(["REDUCE_MAX", "REDUCE_MIN"]))
def test_reduce_max_and_min_over_the_depth_are_npu_max_pools_exact_with_tflite_micro(
        shape, axes, keepdims, in_q, name):
    _on_the_npu_exact(name, shape, axes, keepdims, in_q)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(shape=st.tuples(st.just(1), st.integers(1, 24), st.integers(1, 24),
                       st.integers(1, 300)),
       axes=st.sampled_from(DEPTH_AXES), keepdims=st.booleans(), in_q=_q, out_q=_out_q,
       name=st.sampled_from(sorted(KINDS)))
def test_every_reduction_over_the_depth_is_exact_with_tflite_micro(shape, axes, keepdims, in_q,
                                                                   out_q, name):
    """The sweep: depth 1 too (a reduction of one channel), up to 300 (a pool kernel wider
    than a block)."""
    _on_the_npu_exact(name, shape, axes, keepdims, in_q, out_q)


@pytest.mark.parametrize("name,axes,keepdims,want", [
    ("SUM", (3,), True, {"NPU_OP_CONV": 1}),
    ("REDUCE_MAX", (2, 3), False, {"NPU_OP_POOL": 2}),
    ("REDUCE_MIN", (3,), False, {"NPU_OP_POOL": 2, "NPU_OP_DMA_START": 2}),
])
def test_the_packages_stream_runs_vela_s_operations_exact_with_tflite_micro(name, axes,
                                                                            keepdims, want):
    """``ethos-u,llvm``: the package's stream is generated (not the emulator) with Vela's
    operations (REDUCE_MAX over W too: the pool over the channels, then over the row; the
    two NOT tables of REDUCE_MIN DMAed before their pools)."""
    data = reduce_model(name, (1, 6, 5, 11), axes, keepdims, (0.03, -7),
                        (0.4, 11) if name == "SUM" else None)
    cm = compiled_matches(data, "ethos-u,llvm", seed=3)
    assert cm.partition_summary == {"ethos-u": 1}
    assert _stream_ops(cm) == want


def test_more_than_65536_pixels_are_max_pools_of_at_most_65536_rows():
    """The max pool over the channels reads one IFM row per pixel: 300x250 pixels are two
    pools (Vela 5.2 cuts its ReduceMax so too)."""
    data = reduce_model("REDUCE_MAX", (1, 300, 250, 2), (3,), True, (0.05, 3))
    cm = compiled_matches(data, "ethos-u,llvm", seed=1)
    assert _stream_ops(cm) == {"NPU_OP_POOL": 2}


def _after_an_add(name: str, shape, axes, keepdims: bool) -> bytes:
    q = (0.05, 3)
    x, z, t = (tb.T(list(shape), "int8", scale=q[0], zp=q[1]) for _ in range(3))
    out = [1 if a in axes else d for a, d in enumerate(shape)] if keepdims else \
        [d for a, d in enumerate(shape) if a not in axes]
    y = tb.T(out, "int8", scale=0.7 if name == "SUM" else q[0], zp=q[1])
    ax = tb.T([len(axes)], "int32", data=np.asarray(axes, np.int32))
    otype, ofn = _opts("ReducerOptions", KeepDims=keepdims)
    return tb.serialize([x, z, t, y, ax], [(tb.BO.ADD, 0, None, [0, 1], [2]),
                                           (CODES[name], otype, ofn, [2, 4], [3])], [0, 1], [3])


@pytest.mark.parametrize("name,axes", [("SUM", (3,)), ("REDUCE_MIN", (1, 3))])
def test_a_reduction_after_an_add_in_the_least_memory_plan_is_exact(name, axes):
    """Planned with the ADD in one stream at the least memory: SUM's convolution in stripes
    of the ADD's cascade, REDUCE_MIN over whole tensors with its working memory; the stream
    touches the plan's peak."""
    data = _after_an_add(name, (1, 40, 36, 24), axes, True)
    cm = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False, budget="smallest")
    xs = inputs_for(cm.inputs, np.random.RandomState(0))
    (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"] and entry["realizes_plan"], entry
    if name == "SUM":   # the convolution runs once per stripe of the cascade
        assert entry["commands"]["NPU_OP_CONV"] > 1


def _between_convolutions(name: str, axes, seed: int, shape, convs: int) -> bytes:
    """``convs`` convolutions, ``name`` over ``axes`` (kept 4-D), one more convolution
    (test_solitary_movement's chain)."""

    def middle(g, x):
        out = [1 if a in axes else d for a, d in enumerate(g.shape(x))]
        y = g._add(tb.T(out, "int8", scale=0.9, zp=-3)) if name == "SUM" else \
            _like(g, x, tuple(out))
        otype, ofn = _opts("ReducerOptions", KeepDims=True)
        g.ops.append((CODES[name], otype, ofn, [x, _i32(g, list(axes))], [y]))
        return y

    return chain(middle, seed, shape, 8, convs)


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(name=st.sampled_from(sorted(KINDS)), axes=st.sampled_from(DEPTH_AXES),
       seed=st.integers(0, 2**16), h=st.integers(4, 24), w=st.integers(2, 16),
       c=st.integers(2, 16), convs=st.integers(1, 2),
       budget=st.sampled_from(["smallest", "system", None]))
def test_a_chain_through_a_reduction_over_the_depth_runs_wholly_on_the_npu(name, axes, seed, h,
                                                                            w, c, convs,
                                                                            budget):
    """Convolutions around it, planned at any budget (SUM striped in their cascades,
    REDUCE_MAX / REDUCE_MIN computed whole): one stream realizing the plan and touching its
    peak, exact with TFLite Micro."""
    data = _between_convolutions(name, axes, seed, (1, h, w, c), convs)
    cm, _ = compiled_on_the_npu(data, budget=budget)
    xs = inputs_for(cm.inputs, np.random.RandomState(seed))
    (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)


@pytest.mark.parametrize("name", ["SUM", "REDUCE_MIN",
                                  pytest.param("REDUCE_MAX", marks=pytest.mark.slow)])
def test_the_llvm_hosts_integer_kernel_is_tflite_micros(name):
    """``llvm`` runs the TE kernel (``te_ops.lower_reduce_over_depth``) as the emulator."""
    data = reduce_model(name, (1, 5, 3, 7), (2, 3), False, (0.03, -7),
                        (0.4, 11) if name == "SUM" else None)
    cm = compiled_matches(data, "llvm", seed=1)
    assert set(cm.partition_summary) == {"llvm"}


@settings(max_examples=4, deadline=None)
@given(shape=_shapes, axes=st.sampled_from(DEPTH_AXES), keepdims=st.booleans(),
       name=st.sampled_from(sorted(KINDS)))
def test_both_readers_give_one_part_of_the_operators_kind_reading_the_reduced_axes(
        shape, axes, keepdims, name):
    """The compile path's part matcher (from the TE reads) and the TVM-free TFLite reader
    give one Part of the operator's kind: every output box reads (propagator) its kept axes'
    own rows and columns and the whole reduced axes, the stream's working memory held,
    costed as the stream's operations."""
    data = reduce_model(name, shape, axes, keepdims, (0.05, 3), (0.5, 0) if name == "SUM"
                        else None)
    graphs = [match_subgraph(lw).graph for lw in lowered_of(data)] + [load_tflite(data)]
    assert len(graphs) == 2
    h, w, c = shape[1:]
    spatial = (h if 1 in axes else 1) * (w if 2 in axes else 1) > 1
    for graph in graphs:
        (part,) = graph.parts
        assert part.kind == KINDS[name] and part.attr("axis") == axes
        assert part.attr(WORK_ATTR) == (WorkMemory(reduce_over_depth_work_bytes(
            part.kind, shape, axes)) if name != "SUM" and (spatial or name == "REDUCE_MIN")
            else None)
        for box in boxes(part.output.shape, np.random.RandomState(len(axes)), 6):
            got = propagated_region(part.propagators[0], box, tuple(shape))
            at = dict(zip([a for a in range(4) if keepdims or a not in axes], box))
            want = tuple((0, n) if a in axes else at[a] for a, n in enumerate(shape))
            assert got == want, (box, got, want)
        ops = lower_part(part, part.output.shape)
        if name == "SUM":
            assert [op.op for op in ops] == ["Conv2D"]
            assert ops[0].kernel == (h if 1 in axes else 1, w if 2 in axes else 1)
        else:
            assert [op.op for op in ops] == ["MemoryCopy"] * (name == "REDUCE_MIN") + \
                ["MaxPool"] * (1 + spatial)
            assert ops[name == "REDUCE_MIN"].kernel == (1, c)


@pytest.mark.parametrize("name,shape,axes,why", [
    # past one convolution its pools' int32 sums (ops_reduce_split) would saturate
    ("SUM", (1, 200, 1, 65535), (1, 3),
     "SUM over 13107000 elements, whose sum may leave 32 bits; the NPU's int32 partial sums "
     "take at most 8421504"),
])
def test_a_reduction_over_the_depth_one_operation_cannot_take_stays_naming_the_limit(
        name, shape, axes, why):
    data = reduce_model(name, shape, axes, True, (0.05, 3), (0.5, 0) if name == "SUM" else None)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert why in report, report


def test_the_refusals_name_each_limit_the_checks_apply():
    """``refusals`` alone, past every limit at once (SUM's kernel and weight sum; a max
    pool's window), and nothing at the limits."""
    def q(kind, shape, axis, in_q=(0.05, 0), out_q=(0.05, 0)):
        return QOp(kind, [], [shape], ["int8"], (), "int8", [in_q], out_q, attrs={"axis": axis})

    got = ops_reduce_depth.refusals(q(Op.REDUCE_SUM, (1, 70, 70, 2000), (1, 2, 3)))
    assert [r.split(";")[1] for r in got] == [
        " one convolution's kernel takes at most 64 rows and 4096 taps",
        " one convolution sums at most 8323072"]
    assert ops_reduce_depth.refusals(q(Op.REDUCE_SUM, (1, 64, 64, 2032), (1, 2, 3))) == []
    # past one max pool: bands of rows (ethos_arch.pool_bands), at most 256 of them
    assert ops_reduce_depth.refusals(q(Op.REDUCE_MAX, (1, 300, 1, 7), (1, 3))) == []
    got = ops_reduce_depth.refusals(q(Op.REDUCE_MAX, (1, 300, 65535, 1), (1, 2, 3)))
    assert got == ["REDUCE_MAX over 300x65535 pixels; one max pool takes at most 256 rows "
                   "and 65536 elements, and the 300 bands of rows it is cut into more than 256"]
    assert ops_reduce_depth.refusals(q(Op.REDUCE_MAX, (1, 1, 300, 7), (2, 3))) == []
    assert ops_reduce_depth.refusals(q(Op.REDUCE_MIN, (1, 256, 256, 65535), (1, 2, 3))) == []


def test_the_tflite_reader_refuses_a_reduction_it_has_no_part_for_in_one_line():
    """The TVM-free reader's Parts reduce the depth; over height and width alone (a MEAN
    Part on the compile path) it names the axes and what it takes."""
    data = reduce_model("REDUCE_MAX", (1, 3, 4, 5), (1, 2), True, (0.05, 3))
    with pytest.raises(PlannerError) as err:
        load_tflite(data)
    assert "only a reduction over the depth (with any of H and W) of an NHWC tensor is " \
        "supported, got axes [1, 2] of shape [1, 3, 4, 5]" in str(err.value)
    assert "\n" not in str(err.value)
