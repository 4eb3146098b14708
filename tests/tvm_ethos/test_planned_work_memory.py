"""Operators the Ethos-U stream lowers to several NPU operations through working memory of
their own (a TRANSPOSE of several rotations, RESIZE_BILINEAR's enlargements, an int16
LEAKY_RELU's identity branch, REDUCE_MIN's NOT, SOFTMAX's int32 maps, PRELU's clamped copies,
BATCH_MATMUL's transposed operands and int32 products) carry it on their planner Parts
(``stream_ops.planned_work``, ``planner.work_memory``), so their Plans hold it: the planned
stream realizes its plan and touches exactly the planned peak, the planner's figure for each
Part (over the stripes it planned) is the working memory the stream lays out, and every
output is TFLite Micro's; over one stripe, the operations touch exactly that figure."""
from __future__ import annotations

import math

import numpy as np
import pytest
import tflite
from graph_builder import Graph
from hypothesis import example, given, settings
from hypothesis import strategies as st
from operator_models import _opts
from test_int16_leaky_relu_relu6 import _leaky_chain
from test_part_matchers import lowered_of
from test_solitary_movement import _i32, _like, chain, compiled_on_the_npu, reduce_min, softmax
from tflite_builder import BO, BOPT, T

import tvm_ethos
from ethos_arch.ops import Op
from ethosu_stream import Memory, run_stream
from planner.work_memory import WORK_ATTR, WorkMemory, stripe_work_bytes
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle
from tvm_ethos.backends.ethos_u import ops_batch_matmul, ops_lut, ops_prelu
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot, block_config
from tvm_ethos.backends.ethos_u.ops_movement import TransposeForm, copy_steps, transpose_form
from tvm_ethos.backends.ethos_u.stream_base import (
    FLASH_REGION,
    SCRATCH_REGION,
    Flash,
    vela_api,
)
from tvm_ethos.backends.ethos_u.stream_ops import STREAM_OPS, Emission, planned_work
from tvm_ethos.backends.registry import get_registry
from tvm_ethos.emulator.part_matchers import match_subgraph
from tvm_ethos.patterns import QOp

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


def prelu(g: Graph, x: int) -> int:
    """PRELU by one alpha code per channel (a constant)."""
    shape = g.shape(x)
    alpha = g._add(T([1, 1, shape[3]], "int8", scale=0.01, zp=3,
                     data=g.rs.randint(-128, 128, (1, 1, shape[3])).astype(np.int8)))
    y = g._act(shape)
    g.ops.append((BO.PRELU, 0, None, [x, alpha], [y]))
    return y


def batch_matmul(n: int):
    """BATCH_MATMUL of the map (batches: its rows; matrices: its columns by its channels) by
    a constant ``channels x n`` matrix: b transposed into working memory, int32 products per
    output column."""
    def add(g: Graph, x: int) -> int:
        _, h, w, c = g.shape(x)
        b = g._add(T([c, n], "int8", scale=0.02, zp=-5,
                     data=g.rs.randint(-128, 128, (c, n)).astype(np.int8)))
        y = g._act((1, h, w, n))
        g.ops.append((BO.BATCH_MATMUL, *_opts("BatchMatMulOptions", AdjX=False, AdjY=False),
                      [x, b], [y]))
        return y
    return add


#: a CONV_2D -> X -> CONV_2D chain for each operator, X needing working memory
#: (a TRANSPOSE of these shapes is strided copies, with none: test_tflite_transpose)
CHAINS = {
    "resize_bilinear_2x": lambda seed, shape: chain(resize_bilinear(2), seed, shape),
    "resize_bilinear_4x": lambda seed, shape: chain(resize_bilinear(4), seed, shape),
    "softmax_4d": lambda seed, shape: chain(softmax, seed, shape),
    "reduce_min": lambda seed, shape: chain(reduce_min, seed, shape),
    "prelu": lambda seed, shape: chain(prelu, seed, shape),
    "batch_matmul": lambda seed, shape: chain(batch_matmul(5), seed, shape),
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


def _check(data: bytes, accelerator: str, budget, seed: int = 0
           ) -> tuple[tvm_ethos.CompiledModel, dict]:
    """``data`` wholly on the NPU, its stream realizing the plan and touching the planned
    peak, the planner's working memory the stream's, outputs TFLite Micro's; the model and
    its stream's entry."""
    cm, entry = compiled_on_the_npu(data, accelerator_config=accelerator, budget=budget)
    assert entry["work_bytes"] > 0
    assert _planner_work(data, cm.plan_report["layers"]) == entry["work_bytes"]
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        got, want = cm.run(*xs), tflm_oracle(data, xs)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g).reshape(w.shape), w)
    return cm, entry


@pytest.mark.parametrize("name, accelerator", [
    ("resize_bilinear_2x", "ethos-u65-256"), ("resize_bilinear_4x", "ethos-u55-128"),
    ("softmax_4d", "ethos-u55-128"), ("reduce_min", "ethos-u65-256"),
    ("prelu", "ethos-u55-128"), ("batch_matmul", "ethos-u65-256")])
def test_a_chain_at_the_least_memory_holds_the_working_memory_in_its_plan(name, accelerator):
    _check(CHAINS[name](0, (1, 12, 10, 8)), accelerator, "smallest")


@pytest.mark.parametrize("name", ["prelu", "batch_matmul"])
def test_a_striped_operator_holds_the_working_memory_of_its_stripe(name):
    """At the least memory a PRELU's and a BATCH_MATMUL's Plan is striped, and the stream's
    working memory is the stripe's: less than the whole output's."""
    data = CHAINS[name](0, (1, 24, 20, 16))
    cm, entry = _check(data, "ethos-u55-128", "smallest")
    rows = [r for r in cm.plan_report["layers"] if r["part"].endswith(name)]
    assert len(rows) == 1 and rows[0]["stripes"] > 1, rows
    # the whole output's: three int8 maps; b^T (5 x 16, 80 B) and 16 int32 products a position
    whole = {"prelu": 3 * 24 * 20 * 16, "batch_matmul": 80 + 4 * 16 * 24 * 20}[name]
    assert entry["work_bytes"] < whole, entry["work_bytes"]


def test_the_int16_leaky_relu_holds_one_stripe_of_working_memory():
    """Striped at the least memory, each LEAKY_RELU Part holds the working memory of its
    stripe (``WorkMemory.per_element``), and the stream lays out just that."""
    _, entry = _check(_leaky_chain(), "ethos-u65-256", "smallest")
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


@st.composite
def _transposes(draw):
    rank = draw(st.integers(3, 7))
    shape = tuple(draw(st.lists(st.integers(1, 5), min_size=rank, max_size=rank)))
    return shape, tuple(draw(st.permutations(range(rank))))


@settings(max_examples=200)
@given(case=_transposes(), dtype=st.sampled_from(["int8", "int16", "int32"]))
@example(case=((4,) * 7, (6, 5, 4, 3, 2, 1, 0)), dtype="int8")   # 1024 strided copies
@example(case=((5,) * 6, (5, 4, 3, 2, 1, 0)), dtype="int32")
def test_a_transpose_plans_one_copy_of_its_tensor_only_for_several_rotations(case, dtype):
    """Strided copies (every one of a few hundred) and a single rotation need no working
    memory; rotations past that alternate through one copy of the tensor."""
    shape, perm = case
    q = _Layer(Op.TRANSPOSE, shape, None, dtype, attrs={"perm": perm})
    got = planned_work(q)
    rotations = transpose_form(shape, perm, dtype) is TransposeForm.ROTATIONS
    if rotations and len(copy_steps(shape, perm, dtype)) > 1:
        assert got == WorkMemory(math.prod(shape) * np.dtype(dtype).itemsize)
    else:
        assert got is None


@given(h=st.integers(1, 40), w=st.integers(1, 40), c=st.integers(1, 40))
def test_the_int16_leaky_relu_plans_two_bytes_an_element_of_its_stripe(h, w, c):
    q = _Layer(Op.LEAKY_RELU, (1, 40, 40, 40), (1, 40, 40, 40), "int16", {"alpha": 0.1})
    work = planned_work(q)
    assert work.for_stripe((1, h, w, c)) == 2 * h * w * c \
        == ops_lut.leaky_relu16_work_bytes(q, (1, h, w, c))
    assert planned_work(_Layer(Op.LEAKY_RELU, (1, 4, 4, 4), (1, 4, 4, 4),
                               attrs={"alpha": 0.1})) is None   # int8: one table


def test_every_row_with_working_memory_is_planned():
    """Each stream row with ``work_bytes`` gives its Parts a ``work`` (over the stripe where
    its row has ``work``); a chain's Part carries the stream's figure, and without the
    backend's ``planner_work`` no Part carries one."""
    rows = {op for op, em in STREAM_OPS.items() if em.work_bytes is not None}
    assert {Op.TRANSPOSE, Op.RESIZE_BILINEAR, Op.SOFTMAX, Op.REDUCE_MIN, Op.PRELU,
            Op.BATCH_MATMUL, Op.SQUARED_DIFFERENCE} <= rows
    striped = {op for op, em in STREAM_OPS.items() if em.work is not None}
    assert striped == {Op.PRELU, Op.BATCH_MATMUL, Op.SQUARED_DIFFERENCE}
    backend = get_registry().get("ethos-u")
    data = chain(resize_bilinear(2), 0, (1, 4, 4, 2))
    (lw,) = lowered_of(data)
    parts = match_subgraph(lw, work=backend.planner_work).graph.parts
    works = {p.name: p.attr(WORK_ATTR) for p in parts if p.attr(WORK_ATTR) is not None}
    assert len(works) == 1 and list(works.values())[0].fixed == 8 * 8 * 16, works
    assert all(p.attr(WORK_ATTR) is None for p in match_subgraph(lw).graph.parts)


def _work_touched(ops: list, flash: Flash, work: int, arena: int) -> int:
    """Bytes from ``work`` up to the highest arena byte ``ops`` touch (a dry run on the
    functional model, the arena ``arena`` bytes, every operand below ``work``)."""
    api = vela_api()
    words = api.npu_generate_register_command_stream(ops, api.NpuAccelerator.Ethos_U55_128)
    stats = run_stream(words, Memory({FLASH_REGION: bytes(flash.data) or 16,
                                      SCRATCH_REGION: arena}), "ethos-u55-128", compute=False)
    return stats.high_water[SCRATCH_REGION] - work


def _box(data, extent: int) -> tuple[int, int]:
    lo = data.draw(st.integers(0, extent - 1))
    return lo, data.draw(st.integers(lo + 1, extent))


def _emission(flash: Flash, work: int) -> Emission:
    acc = vela_api().NpuAccelerator.Ethos_U55_128
    return Emission(flash, 0, lambda npu: block_config(npu, acc), work)


@settings(max_examples=20, deadline=None)
@given(h=st.integers(1, 12), w=st.integers(1, 12), c=st.integers(1, 20),
       whole=st.booleans(), axes=st.tuples(st.booleans(), st.booleans()),
       dtype=st.sampled_from(["int8", "int16", "uint8"]), data=st.data())
def test_a_prelu_stripe_touches_the_working_memory_its_part_plans(h, w, c, whole, axes, dtype,
                                                                  data):
    """Over any box of its output (a stripe, or all of it), PRELU's four operations touch
    exactly the working memory the planner holds for a stripe of that shape, alpha per
    channel or a map along the height and / or width (its box read from flash); three
    intermediates of the tensors' type (int8, int16 or uint8)."""
    (y0, y1), (x0, x1) = ((0, h), (0, w)) if whole else (_box(data, h), _box(data, w))
    ashape = (h if axes[0] else 1, w if axes[1] else 1, c)
    alpha = np.arange(int(np.prod(ashape))) % 200 - (0 if dtype == "uint8" else 100)
    zp = {"int8": (3, -1, -2), "int16": (300, -1, -20), "uint8": (131, 120, 97)}[dtype]
    attrs = {"alpha": alpha, "alpha_q": (0.01, zp[1])}
    if any(axes):
        attrs["alpha_shape"] = ashape
    q = QOp(kind="prelu", inputs=[], in_shapes=[(1, h, w, c), ashape],
            in_dtypes=[dtype, "uint8" if dtype == "uint8" else "int8"], out_shape=(1, h, w, c),
            out_dtype=dtype, in_q=[(0.05, zp[0]), (0.01, zp[1])], out_q=(0.04, zp[2]),
            attrs=attrs)
    size = np.dtype(dtype).itemsize
    n = h * w * c * size
    flash, work = Flash(), 2 * n
    ops = ops_prelu.prelu_ops(q, [FmSlot(SCRATCH_REGION, 0, (h, w, c), dtype, 0.05, zp[0])],
                              FmSlot(SCRATCH_REGION, n, (h, w, c), dtype, 0.04, zp[2]),
                              _emission(flash, work), None if whole else ((y0, y1), (x0, x1)))
    stripe = (1, y1 - y0, x1 - x0, c)
    planned = planned_work(q).for_stripe(stripe)
    assert planned == ops_prelu.prelu_work_bytes(q, stripe) == 3 * size * math.prod(stripe)
    assert _work_touched(ops, flash, work, work + 3 * n) == planned


@settings(max_examples=20, deadline=None)
@given(outer=st.integers(1, 3), rows=st.integers(1, 4), m=st.integers(1, 6),
       k=st.integers(1, 9), n=st.integers(1, 5), adj=st.tuples(st.booleans(), st.booleans()),
       b_batched=st.booleans(), whole=st.booleans(), data=st.data())
def test_a_batch_matmul_stripe_touches_the_working_memory_its_part_plans(
        outer, rows, m, k, n, adj, b_batched, whole, data):
    """Over any box of its output (rows of its inner batch dimension by matrix rows, or all
    of it), BATCH_MATMUL's operations touch exactly the working memory the planner holds for
    a stripe of that shape: the operands laid out anew, then K int32 products per position
    of the stripe (each outer batch's apart when the box cuts the rows)."""
    (y0, y1), (x0, x1) = ((0, rows), (0, m)) if whole else (_box(data, rows), _box(data, m))
    batches = (outer, rows)
    a_shape, b_shape = ((*batches, *((k, m) if adj[0] else (m, k))),
                        (*(batches if b_batched else ()), *((n, k) if adj[1] else (k, n))))
    out_shape = (*batches, m, n)
    q = QOp(kind="batch_matmul", inputs=[], in_shapes=[a_shape, b_shape],
            in_dtypes=["int8", "int8"], out_shape=out_shape, out_dtype="int8",
            in_q=[(0.05, 3), (0.03, -4)], out_q=(0.2, 1), attrs={"adj_x": adj[0],
                                                                  "adj_y": adj[1]})
    sizes = [math.prod(a_shape), math.prod(b_shape), math.prod(out_shape)]
    at = np.cumsum([0] + sizes).tolist()
    flash, work = Flash(), -(-at[3] // 16) * 16
    ops = ops_batch_matmul.batch_matmul_ops(
        q, [FmSlot(SCRATCH_REGION, at[0], (1, 1, sizes[0]), "int8", 0.05, 3),
            FmSlot(SCRATCH_REGION, at[1], (1, 1, sizes[1]), "int8", 0.03, -4)],
        FmSlot(SCRATCH_REGION, at[2], (1, 1, sizes[2]), "int8", 0.2, 1),
        _emission(flash, work), None if whole else ((y0, y1), (x0, x1)))
    stripe = (outer, y1 - y0, x1 - x0, n)
    planned = planned_work(q).for_stripe(stripe)
    assert planned == ops_batch_matmul.work_bytes(q, stripe)
    assert _work_touched(ops, flash, work, work + ops_batch_matmul.work_bytes(q)) == planned
