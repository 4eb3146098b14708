"""A pattern match the backend rejects leaves its operators unfused, and the operators the NPU
does take must still be named right: ``FuseOpsByPattern`` names each call of a new composite
afresh, from the sequence the importer named the operators with, so the names shift past an
unfused operator (``partition_op_ids``). A RESHAPE -> TRANSPOSE -> RESHAPE chain, read as a
DEPTH_TO_SPACE that the Ethos-U rejects, then put every operator of the chain in the NPU's
subgraph in the partition report, and the TFLite Micro file in an ``ethos-u`` operator that
read the untransposed input. Here: such chains are exact against TFLite Micro on ``ethos-u``
and ``ethos-u,llvm``, and for any rejected match the partition report names each operator
once and every composite in an NPU subgraph computes the operator the report names."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from conftest import model_path
from hypothesis import given, settings
from hypothesis import strategies as st
from tvm import relax

import tvm_ethos
from ethos_arch.ops import Op
from tests.helpers.tflite_oracle import compiled_matches, oracle
from tvm_ethos.backends.ethos_u import CHECKS
from tvm_ethos.partition import composite_op_id, partition
from tvm_ethos.tflite_source import SOURCE_ATTR

pytest.importorskip("tflite_micro")

Q = (0.05, 3)


def chain_model(shape, mid, perm, out, split: tuple[int, int] | None = None) -> bytes:
    """RESHAPE ``shape -> mid``, TRANSPOSE by ``perm``, RESHAPE to ``out``, then (``split``:
    (axis, parts)) a SPLIT of it; int8, one quantization throughout."""
    tensors = [tb.T(list(shape), "int8", scale=Q[0], zp=Q[1])]
    ops = []

    def add(t: tb.T) -> int:
        tensors.append(t)
        return len(tensors) - 1

    def reshape(src: int, new) -> int:
        s = add(tb.T([len(new)], "int32", data=np.asarray(new, np.int32)))
        y = add(tb.T(list(new), "int8", scale=Q[0], zp=Q[1]))
        ops.append((tb.BO.RESHAPE, 0, None, [src, s], [y]))
        return y

    a = reshape(0, mid)
    p = add(tb.T([len(perm)], "int32", data=np.asarray(perm, np.int32)))
    t = add(tb.T([mid[k] for k in perm], "int8", scale=Q[0], zp=Q[1]))
    ops.append((tb.BO.TRANSPOSE, 0, None, [a, p], [t]))
    y = reshape(t, out)
    outputs = [y]
    if split is not None:
        axis, parts = split
        ax = add(tb.T([], "int32", data=np.array(axis, np.int32)))
        piece = list(out)
        piece[axis] //= parts
        outputs = [add(tb.T(piece, "int8", scale=Q[0], zp=Q[1])) for _ in range(parts)]

        def opts(b):
            tb.tflite.SplitOptionsStart(b)
            tb.tflite.SplitOptionsAddNumSplits(b, parts)
            return tb.tflite.SplitOptionsEnd(b)

        ops.append((tb.BO.SPLIT, tb.BOPT.SplitOptions, opts, [ax, y], outputs))
    return tb.serialize(tensors, ops, [0], outputs)


# ----------------------------------------------------------------- the report against the module
def _shape(var) -> tuple:
    shape = getattr(var.ty, "shape", None)
    return tuple(int(d) for d in getattr(shape, "values", None) or ())


def _source_ops(mod) -> dict[str, tuple[str, tuple]]:
    """Each binding of ``main`` -> (its operator, its output shape)."""
    out = {}
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and hasattr(v.op, "name"):
                out[b.var.name] = (v.op.name, _shape(b.var))
    return out


def _computed(func) -> set[tuple[str, tuple]]:
    """(operator, output shape) of every call inside a composite function."""
    return {(b.value.op.name, _shape(b.var))
            for block in func.body.blocks for b in block.bindings
            if isinstance(b.value, relax.Call) and hasattr(b.value.op, "name")}


def assert_report_is_the_module(mod, target: str) -> tuple:
    """Partition ``mod`` for ``target``: each operator is in the report once, and the
    composites of each NPU subgraph are exactly the operators the report puts there, each
    computing the operator (and output shape) of the source binding it is named after.
    Returns (partitioned module, report)."""
    source = _source_ops(relax.transform.ConvertToDataflow()(mod))
    pmod, report = partition(mod, target)
    ids = [op.op_id for op in report.operators]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    on_npu = {}
    for _, func in pmod.functions.items():
        attrs = func.attrs if isinstance(func, relax.Function) else None
        if attrs is None or "Codegen" not in attrs or "tvm_ethos.subgraph" not in attrs:
            continue
        for block in func.body.blocks:
            for b in block.bindings:
                if isinstance(b.value, relax.Function):
                    # an operator of constants only is constant folding, never the NPU's
                    assert b.value.params, b.value
                    oid = composite_op_id(b.value)
                    assert oid in source, oid
                    assert source[oid] in _computed(b.value), (oid, source[oid])
                    assert oid not in on_npu, oid
                    on_npu[oid] = str(attrs["tvm_ethos.subgraph"])
    reported = {op.op_id: op.subgraph for op in report.operators if op.via == "npu"}
    assert reported == on_npu
    return pmod, report


# ----------------------------------------------------------------- the chain that was wrong
def test_the_batch_2_chain_into_a_split_is_exact_and_reported_as_compiled():
    data = chain_model((2, 3, 4, 5), (6, 4, 5), (1, 0, 2), (8, 3, 5), split=(0, 4))
    cm = compiled_matches(data, "ethos-u")
    kinds = [(p.kind, p.placed_on) for p in cm.placement]
    # the RESHAPEs alias bytes (a batch of 2 too) and the SPLIT slices on the NPU; the
    # TRANSPOSE of a reshape is the model's own (the source's TRANSPOSE of a RESHAPE,
    # partition_chains.source_pairs), on the NPU too
    assert kinds == [("RESHAPE", "ethos-u"), ("TRANSPOSE", "ethos-u"),
                     ("RESHAPE", "ethos-u"), ("SPLIT", "ethos-u")], cm.placement
    compiled_matches(data, "ethos-u,llvm")
    _, report = assert_report_is_the_module(tvm_ethos.load_model(data), "ethos-u,llvm")
    assert [(op.tflite_name, op.placed_on) for op in report.operators] == [
        ("RESHAPE", "ethos-u"), ("TRANSPOSE", "ethos-u"), ("RESHAPE", "ethos-u")] + \
        [("SPLIT", "ethos-u")] * 4


@st.composite
def factorisations(draw, total: int, ranks: tuple[int, int]):
    """A shape of ``total`` elements and a rank in ``ranks``."""
    rank = draw(st.integers(*ranks))
    dims, left = [], total
    for _ in range(rank - 1):
        d = draw(st.sampled_from([k for k in range(1, left + 1) if left % k == 0]))
        dims.append(d)
        left //= d
    return tuple(dims + [left])


@st.composite
def chains(draw):
    """A RESHAPE -> TRANSPOSE -> RESHAPE chain of random shapes and permutation (TFLite Micro's
    TRANSPOSE: at most 5-D), its last shape's first axis split when it divides."""
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=2, max_size=4)))
    total = int(np.prod(shape))
    mid = draw(factorisations(total, (2, 5)))
    perm = tuple(draw(st.permutations(range(len(mid)))))
    out = draw(factorisations(total, (2, 4)))
    parts = [k for k in (2, 3, 4) if out[0] % k == 0]
    split = (0, draw(st.sampled_from(parts))) if parts and draw(st.booleans()) else None
    return shape, mid, perm, out, split


@settings(max_examples=6, deadline=None)
@given(case=chains())
def test_reshape_transpose_reshape_chains_are_exact_on_both_hosts(case):
    data = chain_model(*case)
    for target in ("ethos-u", "ethos-u,llvm"):
        compiled_matches(data, target)
    assert_report_is_the_module(tvm_ethos.load_model(data), "ethos-u,llvm")


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(case=chains())
def test_reshape_transpose_reshape_chains_are_exact_on_both_hosts_many(case):
    test_reshape_transpose_reshape_chains_are_exact_on_both_hosts.hypothesis.inner_test(case)


# ----------------------------------------------------------------- the chains meant to match
@pytest.mark.parametrize("shape, block", [((1, 3, 4, 8), 2), ((1, 2, 2, 36), 3)])
def test_a_depth_to_space_chain_is_read_as_one_and_exact(shape, block):
    """The same chain as TVM writes DEPTH_TO_SPACE: its source says it is the model's own
    operators, which the Ethos-U takes (``partition_chains``); read without its source, on
    the Ethos-U (which has no DEPTH_TO_SPACE) the whole operator stays on the host; on the
    Ethos-N (block 2) it is one NPU operator; exact against LiteRT's reference kernels (a 6-D
    TRANSPOSE for TFLite Micro)."""
    n, h, w, c = shape
    d = c // (block * block)
    data = chain_model(shape, (n, h, w, block, block, d), (0, 1, 3, 2, 4, 5),
                       (n, h * block, w * block, d))
    mod = tvm_ethos.load_model(data)
    _, report = assert_report_is_the_module(mod, "ethos-u,llvm")
    assert sorted((op.tflite_name, op.placed_on) for op in report.operators) == [
        ("RESHAPE", "ethos-u"), ("RESHAPE", "ethos-u"), ("TRANSPOSE", "ethos-u")], report
    _, report = assert_report_is_the_module(mod.without_attr(SOURCE_ATTR), "ethos-u,llvm")
    d2s = [op for op in report.operators if op.tflite_name == "DEPTH_TO_SPACE"]
    assert len(d2s) == 1 and d2s[0].placed_on == "llvm", report
    assert "not supported" in d2s[0].rejections["ethos-u"][0]
    compiled_matches(data, "ethos-u,llvm", reference=oracle)
    _, report = assert_report_is_the_module(mod, "ethos-n,llvm")
    (d2s,) = [op for op in report.operators if op.tflite_name == "DEPTH_TO_SPACE"]
    assert d2s.placed_on == ("ethos-n" if block == 2 else "llvm"), report
    compiled_matches(data, "ethos-n,llvm", reference=oracle)


def test_a_tflite_depth_to_space_stays_a_tflite_operator_and_is_exact():
    data = tb.depth_to_space((1, 3, 4, 8), 2, Q)
    cm = compiled_matches(data, "ethos-u")
    assert [p.placed_on for p in cm.placement] == ["tflite-micro"], cm.placement


# ----------------------------------------------------------------- any rejected match
def _kinds_on(report) -> set[str]:
    return {op.tflite_name for op in report.operators}


@pytest.mark.parametrize("model", ["resnet8_cifar", "ds_cnn_kws"])
def test_every_rejected_kind_leaves_the_report_true_to_the_module(model, monkeypatch):
    """Each kind the Ethos-U takes in the model rejected in turn (its check refusing every
    match): none of its operators is in an NPU subgraph, nor part of one (a refused
    FULLY_CONNECTED's weight transpose), and the report is the module."""
    mod = tvm_ethos.load_model(model_path(model))
    _, report = assert_report_is_the_module(mod, "ethos-u,llvm")
    kinds = sorted({op.kind for op in report.operators if op.via == "npu"})
    assert len(kinds) >= 3, kinds
    for kind in kinds:
        with monkeypatch.context() as m:
            m.setitem(CHECKS, Op(kind), lambda q, o, kind=kind: [f"{kind} refused here"])
            _, rep = assert_report_is_the_module(mod, "ethos-u,llvm")
        refused = [op for op in rep.operators if op.kind == kind]
        assert refused and all(op.via != "npu" for op in refused), (kind, rep)
        assert all(op.rejections["ethos-u"] == [f"{kind} refused here"] for op in refused)
