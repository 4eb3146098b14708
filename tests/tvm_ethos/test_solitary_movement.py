"""Data-movement operators the Ethos-U stream emits only over tensors held whole
(``stream_ops.SOLITARY_OPS``) are never cascaded by the planner (``Device.solitary``): a
CONV_2D -> X -> CONV_2D chain planned for the least memory stays wholly on the NPU (before,
the cascade held X's operands in rings, which the stream refused, and the whole subgraph went
back to TFLite Micro), X in a Plan of its own, and every output is TFLite Micro's (LiteRT's
reference kernels' for TILE, which TFLite Micro lacks)."""
from __future__ import annotations

import numpy as np
import operator_models
import pytest
import tflite
from graph_builder import Graph
from hypothesis import given, settings
from hypothesis import strategies as st
from test_operator_table import read_table
from test_part_matchers import lowered_of
from tflite_builder import BO, BOPT, T

import tvm_ethos
from ethos_arch.ops import Op
from planner.graph import part_operator
from tests.helpers.tflite_oracle import inputs_for, oracle, tflm_oracle
from tvm_ethos.backends.ethos_u.ops_movement import RING_KINDS
from tvm_ethos.backends.ethos_u.stream_ops import (
    REDUCE_OVER_DEPTH,
    SOLITARY_OPS,
    STREAM_OPS,
    WHOLE_OUTPUT_OPS,
    Extent,
    Form,
)
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.emulator.part_matchers import match_subgraph

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def _i32(g: Graph, values) -> int:
    arr = np.asarray(values, np.int32)
    return g._add(T(list(arr.shape), "int32", data=arr))


def _like(g: Graph, x: int, shape) -> int:
    """An output of ``shape`` with ``x``'s quantization (the copies do not requantize)."""
    t = g.tensors[x]
    return g._add(T(list(shape), "int8", scale=t.scale[0], zp=int(t.zp[0])))


def reverse(axis: int):
    def add(g: Graph, x: int) -> int:
        y = _like(g, x, g.shape(x))
        g.ops.append((BO.REVERSE_V2, 0, None, [x, _i32(g, [axis])], [y]))
        return y
    return add


def mirror_pad(g: Graph, x: int) -> int:
    """REFLECT mode (SYMMETRIC is the same copies, each one index along)."""
    pads = [[0, 0], [2, 1], [1, 2], [0, 0]]
    y = _like(g, x, [n + a + b for n, (a, b) in zip(g.shape(x), pads)])

    def opts(b):
        tflite.MirrorPadOptionsStart(b)
        tflite.MirrorPadOptionsAddMode(b, tflite.MirrorPadMode.REFLECT)
        return tflite.MirrorPadOptionsEnd(b)

    g.ops.append((BO.MIRROR_PAD, BOPT.MirrorPadOptions, opts, [x, _i32(g, pads)], [y]))
    return y


def transpose_hw(g: Graph, x: int) -> int:
    n, h, w, c = g.shape(x)
    y = _like(g, x, (n, w, h, c))
    g.ops.append((BO.TRANSPOSE, 0, None, [x, _i32(g, [0, 2, 1, 3])], [y]))
    return y


def tile_h(g: Graph, x: int) -> int:
    n, h, w, c = g.shape(x)
    y = _like(g, x, (n, 2 * h, w, c))
    g.ops.append((BO.TILE, 0, None, [x, _i32(g, [1, 2, 1, 1])], [y]))
    return y


MIDDLES = {"reverse_h": reverse(1), "reverse_w": reverse(2), "mirror_pad": mirror_pad,
           "tile": tile_h, "transpose": transpose_hw}
#: the reference each chain's outputs must equal (TFLite Micro has no TILE kernel)
ORACLES = {"tile": oracle}


def chain(middle, seed: int = 0, shape=(1, 24, 20, 8), c: int = 16, convs: int = 1) -> bytes:
    """``convs`` convolutions, ``middle``, one more convolution."""
    g = Graph(np.random.RandomState(seed))
    x = g.input(shape)
    for _ in range(convs):
        x = g.conv2d(x, c)
    return g.build([g.conv2d(middle(g, x), 8)])


def _check(data: bytes, budget="smallest", seed: int = 1, reference=tflm_oracle):
    """``data`` compiled for the Ethos-U at ``budget``: every operator on the NPU, its
    stream realizing the plan, two random inputs run equal to ``reference``'s, and the one
    operator that is no convolution in a cascade of its own."""
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, budget=budget)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, \
        [(p.placed_on, p.why) for p in cm.placement]
    (entry,) = cm.plan_report["streams"].values()
    assert entry["schedule"] == "plan", entry
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), reference(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)
    cascades: dict[int, set] = {}
    for row in cm.plan_report["layers"]:
        cascades.setdefault(row["cascade"], set()).add(row["part"])
    (middle,) = [c for c in cascades.values() if any("conv2d" not in p for p in c)]
    assert len(middle) == 1, cascades


@pytest.mark.parametrize("name", sorted(MIDDLES))
def test_a_solitary_operator_between_convolutions_stays_on_the_npu_at_the_least_memory(name):
    _check(chain(MIDDLES[name]), reference=ORACLES.get(name, tflm_oracle))


@settings(max_examples=10, deadline=None)
@given(name=st.sampled_from(sorted(MIDDLES)), seed=st.integers(0, 2**16),
       h=st.integers(6, 24), w=st.integers(4, 16), c=st.integers(1, 12),
       convs=st.integers(1, 2), budget=st.sampled_from(["smallest", "system", None]))
def test_any_chain_through_a_solitary_operator_runs_wholly_on_the_npu(name, seed, h, w, c,
                                                                      convs, budget):
    _check(chain(MIDDLES[name], seed, (1, h, w, c), 8, convs), budget, seed,
           ORACLES.get(name, tflm_oracle))


def test_the_set_is_the_stream_table_s_whole_operand_copies_and_sequences():
    """Every MOVEMENT or SEQUENCE row without a ring form is solitary, but computations
    emitted only whole (SOFTMAX); the ring movements (PAD, CONCATENATION, SPLIT), boxed
    sequences and block operations are not; the Ethos-U planner device carries the set and
    the Ethos-N one none."""
    assert {Op.REVERSE, Op.MIRROR_PAD, Op.TILE, Op.TRANSPOSE, Op.PRELU} <= SOLITARY_OPS
    assert Op.SOFTMAX not in SOLITARY_OPS
    for op, em in STREAM_OPS.items():
        ringed = op in RING_KINDS or em.ring is not None or em.boxed
        whole = em.extent is Extent.WHOLE and not op.info.data_move
        if em.form in (Form.BLOCK, Form.ALIAS) or ringed or whole:
            assert op not in SOLITARY_OPS, op
        else:
            assert op in SOLITARY_OPS, op
    u = get_registry().get("ethos-u").planner_device({"accelerator_config": "ethos-u55-128"},
                                                    {"sram": {"size": 1 << 20}})
    assert u.solitary == SOLITARY_OPS | {Op.SPLIT}   # SPLIT: a slice of a batch's Part
    n = get_registry().get("ethos-n").planner_device({"variant": "n78", "tops": 4})
    assert n.solitary == frozenset()


_MODELS = {r.operator: r.model for r in read_table()}


@pytest.mark.parametrize("op", sorted(SOLITARY_OPS))
def test_every_solitary_operator_s_part_names_it(op):
    """The compile path's Part of each solitary operator's one-operator model names that
    operator (``part_operator``), so the planner finds it in the set: a new operator whose
    Part kind is coarser (a PAD, a RESIZE) must name itself in its ``op`` attribute."""
    name = op.info.tflite_name
    model = operator_models.MODELS[_MODELS.get(name, name.lower())]()
    kinds = {part_operator(p) for lw in lowered_of(model) for p in match_subgraph(lw).graph.parts}
    assert op in kinds, (op, kinds)


def softmax(g: Graph, x: int) -> int:
    """A SOFTMAX over the depth of a 4-D feature map (TFLite's int8 output quantization)."""
    y = g._add(T(list(g.shape(x)), "int8", scale=1 / 256, zp=-128))

    def opts(b):
        tflite.SoftmaxOptionsStart(b)
        tflite.SoftmaxOptionsAddBeta(b, 1.0)
        return tflite.SoftmaxOptionsEnd(b)

    g.ops.append((BO.SOFTMAX, BOPT.SoftmaxOptions, opts, [x], [y]))
    return y


def reduce_min(g: Graph, x: int) -> int:
    """REDUCE_MIN over height and width, kept as a 1x1 map (quantized as its input)."""
    n, _, _, c = g.shape(x)
    y = _like(g, x, (n, 1, 1, c))

    def opts(b):
        tflite.ReducerOptionsStart(b)
        tflite.ReducerOptionsAddKeepDims(b, True)
        return tflite.ReducerOptionsEnd(b)

    g.ops.append((BO.REDUCE_MIN, BOPT.ReducerOptions, opts, [x, _i32(g, [1, 2])], [y]))
    return y


def reduce_max(g: Graph, x: int) -> int:
    """REDUCE_MAX over the depth, kept as one channel (quantized as its input)."""
    n, h, w, _ = g.shape(x)
    y = _like(g, x, (n, h, w, 1))

    def opts(b):
        tflite.ReducerOptionsStart(b)
        tflite.ReducerOptionsAddKeepDims(b, True)
        return tflite.ReducerOptionsEnd(b)

    g.ops.append((BO.REDUCE_MAX, BOPT.ReducerOptions, opts, [x, _i32(g, [3])], [y]))
    return y


#: computations the stream emits only over their whole output (``WHOLE_OUTPUT_OPS``)
WHOLE = {"softmax": softmax, "reduce_min": reduce_min, "reduce_max": reduce_max}


def compiled_on_the_npu(data: bytes, **options) -> tuple[tvm_ethos.CompiledModel, dict]:
    """``data`` compiled for the Ethos-U with ``options``, every operator on the NPU and its
    one stream realizing the plan and touching the planned peak; the model and the stream's
    plan entry."""
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, **options)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, \
        [(p.placed_on, p.why) for p in cm.placement]
    (entry,) = cm.plan_report["streams"].values()
    assert entry["schedule"] == "plan" and entry["realizes_plan"], entry
    assert entry["sram_high_water_bytes"] + entry["untouched_top_bytes"] \
        == entry["planned_peak_bytes"], entry
    return cm, entry


def _check_whole(data: bytes, op: str, budget, seed: int) -> list[dict]:
    """``data`` compiled for the Ethos-U at ``budget`` as ``compiled_on_the_npu`` checks it
    (REDUCE_MIN's working memory planned), two random inputs run equal to TFLite Micro's,
    and ``op`` computed in one stripe; the plan's rows."""
    cm, _ = compiled_on_the_npu(data, budget=budget)
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)
    rows = cm.plan_report["layers"]
    (row,) = [r for r in rows if r["part"].endswith(op)]
    assert row["stripes"] == 1, row
    return rows


@pytest.mark.parametrize("name", sorted(WHOLE))
def test_a_4d_softmax_or_reduce_min_between_convolutions_stays_on_the_npu_at_the_least_memory(
        name):
    """At the least memory the convolutions around it are striped; the SOFTMAX (REDUCE_MIN)
    is not (``Device.whole_output``: the stream refuses a striped one, which would send the
    whole subgraph back to TFLite Micro)."""
    rows = _check_whole(chain(WHOLE[name]), name, "smallest", 1)
    assert any(r["stripes"] > 1 for r in rows if r["operator"] == "conv2d"), rows


@settings(max_examples=8, deadline=None)
@given(name=st.sampled_from(sorted(WHOLE)), seed=st.integers(0, 2**16),
       h=st.integers(4, 20), w=st.integers(2, 14), c=st.integers(2, 12),
       convs=st.integers(1, 2), budget=st.sampled_from(["smallest", "system", None]))
def test_any_chain_through_a_whole_output_computation_runs_wholly_on_the_npu(name, seed, h, w,
                                                                           c, convs, budget):
    _check_whole(chain(WHOLE[name], seed, (1, h, w, c), 8, convs), name, budget, seed)


def test_the_whole_output_set_is_the_whole_computations_left_out_of_the_solitary_set():
    """SOFTMAX, REDUCE_MIN, REDUCE_MAX (over the depth: its Part's kind is its own, one over
    height and width is a MEAN Part) and the LSTM: emitted over whole tensors and no data
    movement, so not solitary (a flat SOFTMAX stays in the cascade that holds it whole), but
    never striped; the Ethos-U planner device carries the set and the Ethos-N one none."""
    assert WHOLE_OUTPUT_OPS == {Op.SOFTMAX, Op.REDUCE_MIN, Op.REDUCE_MAX, Op.LSTM}
    assert not WHOLE_OUTPUT_OPS & SOLITARY_OPS
    for op in WHOLE_OUTPUT_OPS:
        em = REDUCE_OVER_DEPTH.get(op, STREAM_OPS[op])
        assert em.extent is Extent.WHOLE and not op.info.data_move
    u = get_registry().get("ethos-u").planner_device({"accelerator_config": "ethos-u55-128"},
                                                    {"sram": {"size": 1 << 20}})
    assert u.whole_output == WHOLE_OUTPUT_OPS and u.solitary == SOLITARY_OPS | {Op.SPLIT}
    n = get_registry().get("ethos-n").planner_device({"variant": "n78", "tops": 4})
    assert n.whole_output == frozenset()
