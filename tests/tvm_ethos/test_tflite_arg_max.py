"""TFLite's quantized ARG_MAX through the importer: on the Ethos-U as Vela lowers it (a code
and reversed channel packed into int16, a max pool through an int16 table, a cast to int32:
``ops_argmax``), exact with TFLite Micro, ties included (the first maximum); on the llvm host
as the integer kernel at any depth; what the NPU does not take stays a TFLite operator,
naming why."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_oracle

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def _equal(data: bytes, cm, dtype: str, reference=tflm_oracle, seed: int = 0) -> None:
    """The compiled model's outputs equal ``reference``'s on uniform inputs, inputs of two
    codes and inputs of one code (every channel tied)."""
    shape = cm.inputs[0].shape
    rs = np.random.RandomState(seed)
    info = np.iinfo(dtype)
    for x in (rs.randint(info.min, info.max + 1, shape).astype(dtype),
              tb.tied_codes(shape, dtype, rs, 2), tb.tied_codes(shape, dtype, rs, 1)):
        (got,), (want,) = cm.run(x), reference(data, [x])
        assert got.dtype == want.dtype
        assert np.array_equal(got.reshape(want.shape), want), (x.ravel()[:8], got.ravel()[:8],
                                                                want.ravel()[:8])


_shapes = st.one_of(
    st.tuples(st.just(1), st.integers(1, 9), st.integers(1, 9), st.integers(1, 127)),
    st.tuples(st.integers(1, 9), st.integers(1, 9), st.integers(1, 127)),
    st.tuples(st.integers(1, 9), st.integers(1, 127)))


@settings(max_examples=8, deadline=None)
@given(shape=_shapes, scale=st.floats(0.002, 2.0), zp=st.integers(-128, 127))
def test_arg_max_is_npu_operations_exact_with_tflite_micro(shape, scale, zp):
    data = tb.arg_max(shape, "int8", (scale, zp))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _equal(data, cm, "int8")


def test_a_uint8_arg_max_on_the_npu_equals_litert():
    """TFLite Micro's kernel refuses uint8 input at run time; LiteRT's reference runs it."""
    data = tb.arg_max((1, 4, 6, 127), "uint8", (0.1, 128))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    _equal(data, cm, "uint8", oracle)


@pytest.mark.parametrize("dtype,out,depth", [("int8", "int32", 200), ("int8", "int64", 9),
                                             ("uint8", "int32", 130)])
def test_the_llvm_hosts_integer_kernel_is_tflites_at_any_depth(dtype, out, depth):
    """``llvm`` runs the TE kernel (``te_ops.lower_arg_max``): any depth and int64 too."""
    data = tb.arg_max((1, 3, 5, depth), dtype, (0.05, 7), out)
    cm = tvm_ethos.compile(data, "llvm", cache_dir=False)
    assert cm.partition_summary == {"llvm": 1}
    _equal(data, cm, dtype, tflm_oracle if (dtype, out) == ("int8", "int32") else oracle)


@pytest.mark.parametrize("shape,out,why", [
    ((1, 2, 3, 128), "int32", "ARG_MAX over a depth of 128; the NPU packs the index into 7 "
                              "bits, at most 127 channels"),
    ((1, 2, 3, 8), "int64", "ARG_MAX into int64; the stream writes int32 indices"),
])
def test_what_the_npu_does_not_take_stays_a_tflite_operator_naming_why(shape, out, why):
    data = tb.arg_max(shape, "int8", (0.05, 3), out)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert why in report, report
    if out == "int32":
        _equal(data, cm, "int8")


def test_an_arg_max_along_another_axis_stays_a_tflite_operator():
    x = tb.T([1, 4, 5, 6], "int8", scale=0.05, zp=3)
    y = tb.T([1, 5, 6], "int32")
    axis = tb.T([1], "int32", data=np.asarray([1], np.int32))

    def options(b):
        tflite.ArgMaxOptionsStart(b)
        tflite.ArgMaxOptionsAddOutputType(b, tflite.TensorType.INT32)
        return tflite.ArgMaxOptionsEnd(b)

    data = tb.serialize([x, y, axis], [(tb.BO.ARG_MAX, tb.BOPT.ArgMaxOptions, options,
                                        [0, 2], [1])], [0], [1])
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "ARG_MAX along axis 1 of a 4-D tensor" in report, report
    _equal(data, cm, "int8")


def _conv_arg_max(rs, shape=(1, 24, 20, 8), cout=16) -> bytes:
    """CONV_2D -> CONV_2D -> ARG_MAX over the channels."""
    x = tb.T(list(shape), "int8", scale=0.05, zp=3)
    w, b, y = tb._conv_tensors(rs, x, cout)
    w2, b2, y2 = tb._conv_tensors(rs, y, cout)
    out = tb.T(list(shape[:3]), "int32")
    axis = tb.T([1], "int32", data=np.asarray([3], np.int32))

    def options(bb):
        tflite.ArgMaxOptionsStart(bb)
        tflite.ArgMaxOptionsAddOutputType(bb, tflite.TensorType.INT32)
        return tflite.ArgMaxOptionsEnd(bb)

    ops = [tb._conv_op([0, 1, 2], [3]), tb._conv_op([3, 4, 5], [6]),
           (tb.BO.ARG_MAX, tb.BOPT.ArgMaxOptions, options, [6, 8], [7])]
    return tb.serialize([x, w, b, y, w2, b2, y2, out, axis], ops, [0], [7])


@pytest.mark.parametrize("budget", ["smallest", None])
def test_arg_max_after_convolutions_is_in_the_same_planned_ethos_u_operator(budget):
    """The ARG_MAX's input another NPU operation's output in the plan's arena, its working
    memory beside it, the cascades the planner chose (its Part: Vela's three operations)."""
    data = _conv_arg_max(np.random.RandomState(0))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False,
                           **({"budget": budget} if budget else {}))
    assert [p.placed_on for p in cm.placement] == ["ethos-u"] * 3
    assert len({p.operator for p in cm.placement}) == 1
    assert "arg_max" in cm.plan_table
    _equal(data, cm, "int8", seed=3)
