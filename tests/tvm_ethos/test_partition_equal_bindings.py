"""Two equal bindings of ``main`` (one tensor reshaped alike twice), one left on the host and
one fused for the NPU, are each named after themselves in the partition report
(``partition_op_ids``). A DEPTH_TO_SPACE and a model's own RESHAPE -> TRANSPOSE -> RESHAPE of
one input both reshape it to the same 6-D shape first; the DEPTH_TO_SPACE's reshape stays with
its chain on the host and the model's own goes to the NPU. The fused reshape, named afresh by
``FuseOpsByPattern``, once took the host reshape's name, so its TRANSPOSE read a binding no
source binding computes and ``ethos-u,llvm`` failed to compile a valid model. Here: both paths
compile it, exact against LiteRT's reference kernels (TFLite Micro's TRANSPOSE takes at most
5-D), and the report names every operator once, each NPU composite computing the operator it is
named after."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from mixed_models import Dtype, Kind, Recipe, Step, build
from test_partition_rejected_matches import assert_report_is_the_module

import tvm_ethos
from tests.helpers.tflite_oracle import compiled_matches, oracle

pytest.importorskip("tflite_micro")

Q = (0.05, 3)
#: the permutation TVM's DEPTH_TO_SPACE applies to its 6-D reshape
D2S_PERM = (0, 1, 3, 2, 4, 5)


def d2s_and_chain_model(shape, block: int, perm, chain_first: bool = False) -> bytes:
    """Two outputs of one int8 input of ``shape``: its DEPTH_TO_SPACE by ``block``, and the
    model's own RESHAPE to DEPTH_TO_SPACE's 6-D shape -> TRANSPOSE by ``perm`` -> RESHAPE to
    4-D (the middle four axes merged in pairs); ``chain_first``: the chain's operators come
    first in the model (and in Relax's ``main``)."""
    n, h, w, c = shape
    d = c // (block * block)
    mid = (n, h, w, block, block, d)
    moved = [mid[k] for k in perm]
    out = (moved[0], moved[1] * moved[2], moved[3] * moved[4], moved[5])
    tensors = [tb.T(list(shape), "int8", scale=Q[0], zp=Q[1]),
               tb.T([n, h * block, w * block, d], "int8", scale=Q[0], zp=Q[1])]

    def opts(b):
        tflite.DepthToSpaceOptionsStart(b)
        tflite.DepthToSpaceOptionsAddBlockSize(b, block)
        return tflite.DepthToSpaceOptionsEnd(b)

    d2s = [(tb.BO.DEPTH_TO_SPACE, tb.BOPT.DepthToSpaceOptions, opts, [0], [1])]
    chain = []
    src = 0
    for kind, operand, result in ((tb.BO.RESHAPE, mid, mid), (tb.BO.TRANSPOSE, perm, moved),
                                  (tb.BO.RESHAPE, out, out)):
        tensors += [tb.T([len(operand)], "int32", data=np.asarray(operand, np.int32)),
                    tb.T(list(result), "int8", scale=Q[0], zp=Q[1])]
        chain.append((kind, 0, None, [src, len(tensors) - 2], [len(tensors) - 1]))
        src = len(tensors) - 1
    ops = chain + d2s if chain_first else d2s + chain
    return tb.serialize(tensors, ops, [0], [1, src])


def assert_named_and_exact(data: bytes, seed: int, tflite_path: bool = True) -> None:
    """The DEPTH_TO_SPACE on the host and the chain on the NPU, on ``ethos-u,llvm`` and
    (``tflite_path``) ``ethos-u``, the outputs exact against LiteRT's reference kernels, and
    the report the partitioned module. The ``ethos-u`` path cannot write a model whose
    ethos-u operator reads the model's input before a TFLite operator reads it again (the
    stream may reuse its place, ``arena_layout``), a chain first in the model among them."""
    if tflite_path:
        cm = compiled_matches(data, "ethos-u", reference=oracle, seed=seed)
        assert sorted((p.kind, p.placed_on) for p in cm.placement) == [
            ("DEPTH_TO_SPACE", "tflite-micro"), ("RESHAPE", "ethos-u"), ("RESHAPE", "ethos-u"),
            ("TRANSPOSE", "ethos-u")], cm.placement
    cm = compiled_matches(data, "ethos-u,llvm", reference=oracle, seed=seed + 1)
    assert cm.partition_summary == {"ethos-u": 3, "llvm": 1}, cm.partition_report
    _, report = assert_report_is_the_module(tvm_ethos.load_model(data), "ethos-u,llvm")
    assert sorted((op.tflite_name, op.placed_on) for op in report.operators) == [
        ("DEPTH_TO_SPACE", "llvm"), ("RESHAPE", "ethos-u"), ("RESHAPE", "ethos-u"),
        ("TRANSPOSE", "ethos-u")], str(report)


@pytest.mark.parametrize("chain_first", [False, True], ids=["host_reshape_first",
                                                            "npu_reshape_first"])
def test_a_chain_reshaping_a_depth_to_spaces_input_alike_is_named_and_exact(chain_first):
    """The smallest case: a (1, 2, 2, 8) input split to (1, 2, 2, 2, 2, 2) by both, the
    chain's TRANSPOSE swapping the first two spatial axes; whichever reshape comes first in
    ``main``, each is named after itself."""
    data = d2s_and_chain_model((1, 2, 2, 8), 2, (0, 2, 1, 3, 4, 5), chain_first)
    assert_named_and_exact(data, seed=1, tflite_path=not chain_first)


@st.composite
def _d2s_and_chains(draw):
    """A DEPTH_TO_SPACE's input (block 2 or 3) and a permutation other than DEPTH_TO_SPACE's
    (which would make both chains read as DEPTH_TO_SPACE), either first in the model."""
    block = draw(st.sampled_from([2, 3]))
    shape = (1, draw(st.integers(1, 3)), draw(st.integers(1, 3)),
             block * block * draw(st.integers(1, 2)))
    perm = tuple(draw(st.permutations(range(6)).filter(lambda p: tuple(p) != D2S_PERM)))
    return shape, block, perm, draw(st.booleans())


@settings(max_examples=3, deadline=None)
@given(case=_d2s_and_chains())
def test_one_of_two_equal_reshapes_taken_is_named_and_exact(case):
    """For any such pair, the reshape left on the host and the one taken by the NPU are
    each named after themselves, and both paths are exact."""
    shape, block, perm, chain_first = case
    assert_named_and_exact(d2s_and_chain_model(shape, block, perm, chain_first), seed=3,
                           tflite_path=not chain_first)


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(case=_d2s_and_chains())
def test_one_of_two_equal_reshapes_taken_is_named_and_exact_many(case):
    test_one_of_two_equal_reshapes_taken_is_named_and_exact.hypothesis.inner_test(case)


# ------------------------------------------------ one tensor read twice, by two equal composites
@pytest.mark.parametrize("kind", [Kind.MINIMUM, Kind.MAXIMUM])
@settings(max_examples=3, deadline=None)
@given(dtype=st.sampled_from(list(Dtype)), seed=st.integers(0, 2**16),
       shape=st.tuples(st.just(1), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3)))
def test_two_equal_composites_each_reading_one_tensor_twice_are_named(kind, dtype, seed, shape):
    """``op(x, x)`` then ``op(y, y)`` of its result, quantized as its input (so the two
    composites are equal, and ``FuseOpsByPattern`` shares one function between them): each
    dequantizes its one input twice, two equal bindings in one composite. The second call's
    two were both named after the same source binding, its operator then read a binding no
    source binding computes, and ``ethos-u,llvm`` did not compile (issue 28). Every operator
    is on the NPU, named once, each composite computing what it is named after."""
    model = build(Recipe(shape, seed, (Step(kind, (None,), 0), Step(kind, (None,), 1)), dtype))
    _, report = assert_report_is_the_module(tvm_ethos.load_model(model), "ethos-u,llvm")
    assert [(op.tflite_name, op.placed_on) for op in report.operators] == [
        (kind.value, "ethos-u")] * 2, str(report)
