"""SOFTMAX of int16 codes on the llvm host (and on ``ethos-u,llvm`` where the NPU refuses it):
TFLite's int16 kernel as integer TE (``te_ops.lower_softmax16``), equal to LiteRT's reference
kernels (BUILTIN_REF, the host's oracle). LiteRT and TFLite Micro build the kernel's tables
and input multiplier in different precisions (``compute.softmax16``), so they are one code
apart on some rows: the host follows LiteRT, the Ethos-U (its stream and its emulator)
TFLite Micro. What the kernel cannot compute is refused in one line. The int16 LOGISTIC and TANH
the host already computes are LiteRT's on every code too."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.compute import softmax16
from tvm_ethos.compute.softmax16 import Kernel
from tvm_ethos.errors import UnsupportedModelError

pytest.importorskip("ai_edge_litert")
pytest.importorskip("tflite_micro")

Q15 = (1 / 32768, 0)


def softmax16_model(shape, scale, beta=1.0, in_zp=0) -> bytes:
    return tb.softmax(None, shape=list(shape), in_q=(scale, in_zp), dtype="int16", out_q=Q15,
                      beta=beta)


def _inputs(shape, seed) -> list[np.ndarray]:
    """Codes over the whole range, the same narrowed (differences the exp table resolves),
    and a row all equal."""
    rs = np.random.RandomState(seed)
    wide = rs.randint(-32768, 32768, shape)
    return [wide.astype(np.int16), (wide // rs.randint(2, 3000)).astype(np.int16),
            np.full(shape, -7, np.int16)]


_shapes = st.tuples(st.just(1), st.integers(1, 4), st.integers(1, 70))
_scales = st.floats(1e-5, 0.05).map(lambda v: float(np.float32(v)))
#: powers of two (the float32 and double products of scale and beta agree) and others
_betas = st.one_of(st.sampled_from([1.0, 0.5, 2.0]),
                   st.floats(0.05, 3.0).map(lambda v: float(np.float32(v))))


@settings(max_examples=60, deadline=None)
@given(shape=_shapes, scale=_scales, beta=_betas, seed=st.integers(0, 99))
def test_the_numpy_statement_with_litert_tables_is_litert(shape, scale, beta, seed):
    data = softmax16_model(shape, scale, beta)
    for x in _inputs(shape, seed):
        want = oracle(data, [x])[0].reshape(shape)
        np.testing.assert_array_equal(softmax16.softmax_int16(x, scale, beta,
                                                              kernel=Kernel.LITERT), want)


@settings(max_examples=3, deadline=None)
@given(shape=_shapes, scale=_scales, beta=_betas, seed=st.integers(0, 99))
@example(shape=(1, 1, 57), scale=2.5117e-4, beta=0.5, seed=0)
@example(shape=(2, 3, 5, 1), scale=0.03125, beta=1.0, seed=0)   # one value a row: 32767
def test_the_llvm_host_is_litert(shape, scale, beta, seed):
    _host_is_litert("llvm", shape, scale, beta, seed)


def _host_is_litert(target: str, shape, scale, beta, seed) -> None:
    data = softmax16_model(shape, scale, beta)
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    assert cm.partition_summary == {target: 1}, cm.partition_summary
    for x in _inputs(shape, seed):
        want = oracle(data, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


def test_the_opencl_host_is_litert():
    pytest.importorskip("pyopencl")
    _host_is_litert("opencl", (2, 3, 5, 17), 1.1913733760593459e-4, 1.5569413900375366, 3)


def _where_references_differ():
    """(model, input, LiteRT's output, TFLite Micro's output) for rows on which the two
    runtimes' int16 SOFTMAX differ: one through the reciprocal table (entries 160 and 294),
    one through the input multiplier (scale x beta in float32 against double)."""
    out = []
    # the reciprocal tables: a beta of 0.5, so both multipliers agree
    shape, scale, beta = (1, 1, 57), 2.5117e-4, 0.5
    rs = np.random.RandomState(0)
    for _ in range(2000):
        x = rs.randint(-32768, 32768, shape).astype(np.int16)
        lite = softmax16.softmax_int16(x, scale, beta, kernel=Kernel.LITERT)
        if (lite != softmax16.softmax_int16(x, scale, beta)).any():
            out.append((softmax16_model(shape, scale, beta), x))
            break
    # the multiplier: rows [0, -d] under a scale x beta whose two products round apart
    scale, beta = 1.1913733760593459e-4, 1.5569413900375366
    assert (softmax16.input_multiplier(scale, beta, Kernel.LITERT)
            != softmax16.input_multiplier(scale, beta, Kernel.TFLITE_MICRO))
    d = np.arange(1, 32768)
    rows = np.stack([np.zeros_like(d), -d], 1).astype(np.int16)[:, None, :]
    exp, reciprocal = softmax16.tables(Kernel.LITERT)
    apart = (softmax16.softmax_int16(rows, scale, beta, exp, reciprocal, Kernel.LITERT)
             != softmax16.softmax_int16(rows, scale, beta, exp, reciprocal,
                                        Kernel.TFLITE_MICRO)).reshape(len(d), -1).any(1)
    assert apart.any()
    out.append((softmax16_model((1, 1, 2), scale, beta),
                rows[np.argmax(apart)].reshape(1, 1, 2)))
    assert len(out) == 2, "no row reads the entries where the reciprocal tables differ"
    return out


def test_where_litert_and_tflite_micro_differ_each_target_follows_its_reference():
    for data, x in _where_references_differ():
        lite, micro = oracle(data, [x])[0], tflm_oracle(data, [x])[0]
        assert (lite != micro).any(), (lite, micro)
        host = tvm_ethos.compile(data, "llvm", cache_dir=False).run(x)[0]
        np.testing.assert_array_equal(host.reshape(lite.shape), lite)
        npu = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
        assert [p.placed_on for p in npu.placement] == ["ethos-u"]
        np.testing.assert_array_equal(npu.run(x)[0].reshape(micro.shape), micro)
        emulated = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
        assert emulated.partition_summary == {"ethos-u": 1}, emulated.partition_summary
        np.testing.assert_array_equal(emulated.run(x)[0].reshape(micro.shape), micro)


def test_on_ethos_u_llvm_what_the_npu_refuses_runs_on_the_host_equal_to_litert():
    """Rows longer than the Ethos-U's int16 SOFTMAX takes (``ops_softmax16.refusals``) but
    within the kernel's: the check leaves it to the host, saying why, which computes
    LiteRT's kernel (the NPU's, TFLite Micro's, in tests/tvm_ethos/test_softmax16_npu.py)."""
    shape = (1, 3, 4100)
    data = softmax16_model(shape, 7.3e-4, 0.7)
    cm = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    assert cm.partition_summary == {"llvm": 1}, cm.partition_summary
    why = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "rejected by ethos-u" in why and "a depth of 4100" in why, why
    for x in _inputs(shape, 4):
        want = oracle(data, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


@pytest.mark.parametrize("model,words", [
    (softmax16_model((1, 8), 8.0), "which overflows past 15"),
    (softmax16_model((1, 70000), 1e-3), "over 65536 values"),
    (softmax16_model((1, 8), 1e-3, in_zp=3), "input zero point 3"),
], ids=["overflow", "depth", "input-zero-point"])
def test_what_the_kernel_cannot_compute_is_refused_in_one_line(model, words):
    with pytest.raises(UnsupportedModelError, match="SOFTMAX") as err:
        tvm_ethos.compile(model, "llvm", cache_dir=False)
    assert words in str(err.value) and "\n" not in str(err.value), str(err.value)


EVERY_CODE = np.arange(-32768, 32768).astype(np.int16).reshape(1, 256, 256)
_ACTIVATIONS = {"LOGISTIC": tb.BO.LOGISTIC, "TANH": tb.BO.TANH}


@settings(max_examples=3, deadline=None)
@given(kind=st.sampled_from(sorted(_ACTIVATIONS)),
       in_scale=st.one_of(st.sampled_from([2.0**-12, 2.0**-11]),
                          st.floats(1e-5, 2e-2).map(lambda v: float(np.float32(v)))))
def test_int16_logistic_and_tanh_on_the_llvm_host_are_litert_on_every_code(kind, in_scale):
    x = tb.T([1, 256, 256], "int16", scale=in_scale, zp=0)
    y = tb.T([1, 256, 256], "int16", scale=Q15[0], zp=0)
    data = tb.serialize([x, y], [(_ACTIVATIONS[kind], 0, None, [0], [1])], [0], [1])
    cm = tvm_ethos.compile(data, "llvm", cache_dir=False)
    want = oracle(data, [EVERY_CODE])[0]
    np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].reshape(want.shape), want)
