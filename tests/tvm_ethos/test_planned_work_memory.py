"""Operators the Ethos-U stream lowers to several NPU operations through working memory of
their own (a TRANSPOSE of several rotations, RESIZE_BILINEAR's enlargements, an int16
LEAKY_RELU's identity branch, REDUCE_MIN's NOT, SOFTMAX's int32 maps) carry it on their
planner Parts (``stream_ops.planned_work``, ``planner.work_memory``), so their Plans hold it:
the planned stream realizes its plan and touches exactly the planned peak, the planner's
figure for each Part (over the stripes it planned) is the working memory the stream lays out,
and every output is TFLite Micro's."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
from graph_builder import Graph
from hypothesis import given, settings
from hypothesis import strategies as st
from test_int16_leaky_relu_relu6 import _leaky_chain
from test_part_matchers import lowered_of
from test_solitary_movement import _i32, _like, chain, compiled_on_the_npu, reduce_min, softmax
from tflite_builder import BO, BOPT

from ethos_arch.ops import Op
from planner.work_memory import WORK_ATTR, WorkMemory, stripe_work_bytes
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle
from tvm_ethos.backends.ethos_u import ops_lut
from tvm_ethos.backends.ethos_u.ops_movement import transpose_steps
from tvm_ethos.backends.ethos_u.stream_ops import STREAM_OPS, WORK_OUTSIDE_PLAN, planned_work
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.emulator.part_matchers import match_subgraph

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def transpose(perm):
    def add(g: Graph, x: int) -> int:
        y = _like(g, x, [g.shape(x)[a] for a in perm])
        g.ops.append((BO.TRANSPOSE, 0, None, [x, _i32(g, perm)], [y]))
        return y
    return add


def resize_bilinear(factor: int):
    def add(g: Graph, x: int) -> int:
        n, h, w, c = g.shape(x)
        y = _like(g, x, (n, h * factor, w * factor, c))

        def opts(b):
            tflite.ResizeBilinearOptionsStart(b)
            tflite.ResizeBilinearOptionsAddAlignCorners(b, False)
            tflite.ResizeBilinearOptionsAddHalfPixelCenters(b, False)
            return tflite.ResizeBilinearOptionsEnd(b)

        g.ops.append((BO.RESIZE_BILINEAR, BOPT.ResizeBilinearOptions, opts,
                      [x, _i32(g, [h * factor, w * factor])], [y]))
        return y
    return add


#: a CONV_2D -> X -> CONV_2D chain for each operator, X needing working memory
CHAINS = {
    "transpose_two_rotations": lambda seed, shape: chain(transpose((0, 3, 2, 1)), seed, shape),
    "transpose_three_rotations": lambda seed, shape: chain(transpose((0, 1, 3, 2)), seed,
                                                           shape),
    "resize_bilinear_2x": lambda seed, shape: chain(resize_bilinear(2), seed, shape),
    "resize_bilinear_4x": lambda seed, shape: chain(resize_bilinear(4), seed, shape),
    "softmax_4d": lambda seed, shape: chain(softmax, seed, shape),
    "reduce_min": lambda seed, shape: chain(reduce_min, seed, shape),
}


def _planner_work(data: bytes, rows: list[dict]) -> int:
    """The working memory the planner holds: each Part's ``work`` over the stripe the plan
    computes it in (the plan report's rows)."""
    backend = get_registry().get("ethos-u")
    stripe = {r["part"]: tuple(r["stripe"]) for r in rows}
    total = 0
    for lw in lowered_of(data):
        for p in match_subgraph(lw, work=backend.planner_work).graph.parts:
            total += stripe_work_bytes(p, stripe[p.name])
    return total


def _check(data: bytes, accelerator: str, budget, seed: int = 0) -> dict:
    """``data`` wholly on the NPU, its stream realizing the plan and touching the planned
    peak, the planner's working memory the stream's, outputs TFLite Micro's; the entry."""
    cm, entry = compiled_on_the_npu(data, accelerator_config=accelerator, budget=budget)
    assert entry["work_bytes"] > 0
    assert _planner_work(data, cm.plan_report["layers"]) == entry["work_bytes"]
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        got, want = cm.run(*xs), tflm_oracle(data, xs)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g).reshape(w.shape), w)
    return entry


@pytest.mark.parametrize("name, accelerator", [
    ("transpose_two_rotations", "ethos-u55-128"), ("transpose_three_rotations", "ethos-u65-256"),
    ("resize_bilinear_2x", "ethos-u65-256"), ("resize_bilinear_4x", "ethos-u55-128"),
    ("softmax_4d", "ethos-u55-128"), ("reduce_min", "ethos-u65-256")])
def test_a_chain_at_the_least_memory_holds_the_working_memory_in_its_plan(name, accelerator):
    _check(CHAINS[name](0, (1, 12, 10, 8)), accelerator, "smallest")


def test_the_int16_leaky_relu_holds_one_stripe_of_working_memory():
    """Striped at the least memory, each LEAKY_RELU Part holds the working memory of its
    stripe (``WorkMemory.per_element``), and the stream lays out just that."""
    entry = _check(_leaky_chain(), "ethos-u65-256", "smallest")
    assert entry["work_bytes"] < 2 * 16 * 16 * 2, entry["work_bytes"]   # one stripe each


@pytest.mark.slow
@settings(max_examples=12, deadline=None)
@given(name=st.sampled_from(sorted(CHAINS)), seed=st.integers(0, 2**16),
       h=st.integers(3, 14), w=st.integers(2, 12), c=st.integers(1, 9),
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]),
       budget=st.sampled_from(["smallest", "system", None]))
def test_any_chain_at_any_budget_touches_the_planned_peak(name, seed, h, w, c, accelerator,
                                                          budget):
    _check(CHAINS[name](seed, (1, h, w, c)), accelerator, budget, seed)


class _Layer:
    """The fields ``planned_work`` reads of a lowered operator."""

    def __init__(self, kind, in_shape, out_shape, dtype="int8", attrs=None):
        self.kind, self.in_shapes, self.out_shape = kind, [in_shape], out_shape
        self.in_dtypes, self.out_dtype, self.attrs = [dtype], dtype, attrs or {}
        self.tflite_name = kind.name


@given(a=st.integers(1, 9), b=st.integers(1, 9), c=st.integers(1, 9),
       perm=st.permutations([1, 2, 3]))
def test_a_transpose_plans_one_copy_of_its_tensor_when_it_takes_several_rotations(a, b, c,
                                                                                 perm):
    q = _Layer(Op.TRANSPOSE, (1, a, b, c), None, attrs={"perm": (0, *perm)})
    got = planned_work(q)
    if len(transpose_steps(q.in_shapes[0], q.attrs["perm"])) < 2:
        assert got is None
    else:
        assert got == WorkMemory(a * b * c)


@given(h=st.integers(1, 40), w=st.integers(1, 40), c=st.integers(1, 40))
def test_the_int16_leaky_relu_plans_two_bytes_an_element_of_its_stripe(h, w, c):
    q = _Layer(Op.LEAKY_RELU, (1, 40, 40, 40), (1, 40, 40, 40), "int16", {"alpha": 0.1})
    work = planned_work(q)
    assert work.for_stripe((1, h, w, c)) == 2 * h * w * c \
        == ops_lut.leaky_relu16_work_bytes(q, (1, h, w, c))
    assert planned_work(_Layer(Op.LEAKY_RELU, (1, 4, 4, 4), (1, 4, 4, 4),
                               attrs={"alpha": 0.1})) is None   # int8: one table


def test_every_row_with_working_memory_is_planned():
    """Each stream row with ``work_bytes`` but PRELU's (``WORK_OUTSIDE_PLAN``) gives its Parts
    a ``work``; a chain's Part carries the stream's figure, and without the backend's
    ``planner_work`` no Part carries one."""
    rows = {op for op, em in STREAM_OPS.items() if em.work_bytes is not None}
    assert {Op.TRANSPOSE, Op.RESIZE_BILINEAR, Op.SOFTMAX, Op.REDUCE_MIN, Op.PRELU} <= rows
    assert WORK_OUTSIDE_PLAN == {Op.PRELU}
    backend = get_registry().get("ethos-u")
    data = chain(resize_bilinear(2), 0, (1, 4, 4, 2))
    (lw,) = lowered_of(data)
    parts = match_subgraph(lw, work=backend.planner_work).graph.parts
    works = {p.name: p.attr(WORK_ATTR) for p in parts if p.attr(WORK_ATTR) is not None}
    assert len(works) == 1 and list(works.values())[0].fixed == 8 * 8 * 16, works
    assert all(p.attr(WORK_ATTR) is None for p in match_subgraph(lw).graph.parts)
