"""TFLite's int16 and uint8 PRELU through the importer, on the Ethos-U (``ops_prelu``'s four
operations in the tensors' type) and on the llvm host (``te_ops.lower_prelu``), equal to
their kernels: TFLite Micro's int16 one (int16 codes, int8 alpha codes, any zero points) and,
TFLite Micro having no uint8 PRELU, LiteRT's uint8 one (uint8 alpha codes) under its
reference kernels. The forms no kernel defines (an int16 alpha, a uint8 PRELU's int8 alpha)
are refused naming why; a quantization whose int32 left shift wraps in the kernel stays off
the NPU, and the llvm host wraps as the kernel does."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_tflite_prelu import ALPHA_AXES

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, tflm_oracle
from tvm_ethos.compute import prelu as prelu_kernel
from tvm_ethos.errors import TvmEthosError
from tvm_ethos.frontend.tflite_support import operator_support

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

#: the alpha type each input type's kernel reads, and the oracle defining it
ALPHA_TYPE = {"int8": "int8", "int16": "int8", "uint8": "uint8"}
ORACLE = {"int8": tflm_oracle, "int16": tflm_oracle, "uint8": oracle}


def prelu_model(dtype: str, shape, alpha: np.ndarray, in_q, alpha_q, out_q,
                alpha_dtype: str | None = None) -> bytes:
    """One PRELU of ``dtype`` codes of ``shape`` with the constant ``alpha`` codes (of the
    kernel's alpha type unless ``alpha_dtype`` says otherwise)."""
    alpha_dtype = alpha_dtype or ALPHA_TYPE[dtype]
    x = tb.T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    a = tb.T(list(alpha.shape), alpha_dtype, scale=alpha_q[0], zp=alpha_q[1],
             data=alpha.astype(alpha_dtype))
    y = tb.T(list(shape), dtype, scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, a, y], [(tb.BO.PRELU, 0, None, [0, 1], [2])], [0], [2])


def _inputs(shape, dtype: str, zp: int, rs) -> list[np.ndarray]:
    """Two inputs: codes over the whole range, and codes drawn from the extremes (both ends,
    and either side of the zero point) at every position."""
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    extremes = np.clip([lo, lo + 1, zp - 1, zp, zp + 1, hi - 1, hi], lo, hi)
    return [rs.randint(lo, hi + 1, shape).astype(dtype),
            rs.choice(extremes, shape).astype(dtype)]


def _alpha(dtype: str, hwc, axes, rs) -> np.ndarray:
    info = np.iinfo(ALPHA_TYPE[dtype])
    return rs.randint(info.min, info.max + 1, tuple(n if a else 1 for n, a in zip(hwc, axes)))


def _exact(data: bytes, dtype: str, shape, zp_in: int, target: str, seed: int = 0,
           **options):
    """``data`` compiled for ``target``, its outputs equal to the kernel's on random and
    extreme inputs; the compiled model returned for placement checks."""
    cm = tvm_ethos.compile(data, target, cache_dir=False, **options)
    for x in _inputs(shape, dtype, zp_in, np.random.RandomState(seed)):
        want = ORACLE[dtype](data, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)
    return cm


def _placed(cm) -> tuple[str, str]:
    """Where the one PRELU went and why (the tflite-micro host's placement, or a package's
    partition report: why not on the NPU)."""
    if hasattr(cm, "placement"):
        (p,) = cm.placement
        return p.placed_on, str(p.why)
    (d,) = cm.partition_report.operators
    return d.placed_on, str(d.rejections.get("ethos-u", ""))


def _q(dtype: str):
    """(scale, zero point) of an activation: int16 scales about the 2**-12 of TFLite's 16x8
    quantization, uint8 ones about int8's."""
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    scales = st.floats(2.0**-15, 2.0**-8) if dtype == "int16" else st.floats(0.002, 0.5)
    return st.tuples(scales, st.integers(lo, hi))


@st.composite
def _forms(draw, dtypes=("int16", "uint8")):
    dtype = draw(st.sampled_from(dtypes))
    alpha_lo, alpha_hi = np.iinfo(ALPHA_TYPE[dtype]).min, np.iinfo(ALPHA_TYPE[dtype]).max
    return dict(dtype=dtype, hwc=draw(st.tuples(st.integers(1, 5), st.integers(1, 5),
                                                st.integers(1, 10))),
                axes=draw(st.sampled_from(ALPHA_AXES)), in_q=draw(_q(dtype)),
                out_q=draw(_q(dtype)),
                alpha_q=draw(st.tuples(st.floats(0.001, 0.1),
                                       st.integers(alpha_lo, alpha_hi))),
                seed=draw(st.integers(0, 2**16)))


def _sweep(form: dict, target: str, **options):
    """One drawn form on ``target``: on the NPU exactly where its kernel's shifts do not wrap
    (``compute.prelu.npu_refusal``), on the host (or a TFLite operator) and exact elsewhere."""
    dtype, hwc, seed = form["dtype"], form["hwc"], form["seed"]
    alpha = _alpha(dtype, hwc, form["axes"], np.random.RandomState(seed))
    why = prelu_kernel.npu_refusal(dtype, form["in_q"], form["alpha_q"], form["out_q"],
                                   alpha)
    # TFLite Micro runs no uint8 PRELU: a file keeping one as a TFLite operator cannot run
    assume(not (why and dtype == "uint8" and target == "ethos-u"))
    data = prelu_model(dtype, (1, *hwc), alpha, form["in_q"], form["alpha_q"], form["out_q"])
    cm = _exact(data, dtype, (1, *hwc), form["in_q"][1], target, seed % 7, **options)
    where, placed_why = _placed(cm)
    assert (where == "ethos-u") == (not why), (why, placed_why)


@settings(max_examples=6, deadline=None)
@given(form=_forms())
def test_int16_and_uint8_prelu_are_on_the_npu_exactly(form):
    _sweep(form, "ethos-u")


@pytest.mark.parametrize("dtype, runtime", [("int16", "stream"), ("uint8", "tir")])
def test_the_llvm_hosts_npu_runs_it_exactly(dtype, runtime):
    """A per-channel alpha and a full map, in an ethos-u package: the stream on the
    functional model (``stream``) or the emulator's lowering (``tir``; the slow sweep
    below runs both for both types)."""
    rs = np.random.RandomState(4)
    q = {"int16": ((2.0**-12, 37), (0.02, -9), (2.0**-11, -1200)),
         "uint8": ((0.05, 131), (0.01, 120), (0.04, 97))}[dtype]
    for axes in ((False, False, True), (True, True, True)):
        alpha = _alpha(dtype, (3, 4, 6), axes, rs)
        data = prelu_model(dtype, (1, 3, 4, 6), alpha, *q)
        cm = _exact(data, dtype, (1, 3, 4, 6), q[0][1], "ethos-u,llvm", npu_runtime=runtime)
        assert cm.partition_summary == {"ethos-u": 1}, cm.partition_summary


@pytest.mark.parametrize("dtype", ["int16", "uint8"])
def test_the_llvm_host_runs_it_exactly(dtype):
    rs = np.random.RandomState(8)
    q = {"int16": ((2.0**-13, -300), (0.03, 5), (2.0**-12, 11)),
         "uint8": ((0.03, 100), (0.02, 140), (0.05, 12))}[dtype]
    alpha = _alpha(dtype, (5, 3, 6), (True, True, False), rs)
    cm = _exact(prelu_model(dtype, (1, 5, 3, 6), alpha, *q), dtype, (1, 5, 3, 6), q[0][1],
                "llvm")
    assert cm.partition_summary == {"llvm": 1}, cm.partition_summary


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(form=_forms(), runtime=st.sampled_from(["tir", "stream"]))
def test_every_form_is_exact_in_an_ethos_u_package_too(form, runtime):
    _sweep(form, "ethos-u,llvm", npu_runtime=runtime)


@pytest.mark.parametrize("dtype", ["int16", "uint8"])
def test_every_input_code_is_exact_on_the_npu(dtype):
    """Brute force: every input code beside every alpha code for uint8 (all 65,536 pairs);
    for int16 all 65,536 input codes beside eight alpha codes (both ends of alpha's range,
    its zero point and the codes around it and around 0), the stream on the functional
    model."""
    lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
    if dtype == "uint8":
        alpha = np.arange(256).reshape(1, 1, 256)
        shape, x = (1, 1, 256, 256), np.repeat(np.arange(lo, hi + 1), 256).reshape(1, 1, 256, 256)
        q = ((0.05, 131), (0.01, 120), (0.04, 97))
    else:
        alpha = np.array([-128, -127, -2, -1, 0, 1, 126, 127]).reshape(1, 1, 8)
        shape = (1, 256, 256, 8)
        x = np.repeat(np.arange(lo, hi + 1), 8).reshape(shape)
        q = ((2.0**-12, 37), (0.02, -1), (2.0**-11, -1200))
    data = prelu_model(dtype, shape, alpha, *q)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    x = x.astype(dtype)
    want = ORACLE[dtype](data, [x])[0]
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


@pytest.mark.parametrize("dtype, q, alpha, codes", [
    # alpha multiplier 2**11 (a left shift of 12): -32768 * 127 << 12 leaves int32
    ("int16", ((2.0**-4, 0), (1.0, 0), (2.0**-15, 0)), [127, -128, 3, 0], (-32768, 127)),
    # 2**17 (a shift of 18): -128 * 127 << 18 leaves it; the int8 kernel's own form
    ("int8", ((1.0, 0), (1.0, 0), (2.0**-17, 0)), [127, -128, 3, 0], (-128, 127)),
    ("uint8", ((1.0, 128), (1.0, 128), (2.0**-17, 128)), [255, 0, 131, 128], (0, 255)),
])
def test_a_shift_that_wraps_the_kernels_int32_stays_off_the_npu_and_the_host_wraps_too(
        dtype, q, alpha, codes):
    """The lowest code times alpha's largest offset, shifted left, leaves int32 in the
    kernel, which goes on with the wrapped value; the NPU's wider product would not wrap, so
    the NPU refuses the quantization and the llvm host's kernel wraps as TFLite's does."""
    alpha = np.array([[alpha]])
    why = prelu_kernel.npu_refusal(dtype, *q, alpha)
    assert f"wraps for input code {codes[0]} and alpha code {codes[1]}" in why, why
    data = prelu_model(dtype, (1, 2, 3, 4), alpha, *q)
    cm = _exact(data, dtype, (1, 2, 3, 4), q[0][1], "ethos-u,llvm")
    (decision,) = cm.partition_report.operators
    assert (decision.placed_on, decision.via) == ("llvm", "kernel"), decision
    assert "wraps" in _placed(cm)[1], decision.rejections
    if dtype != "uint8":          # TFLite Micro runs the TFLite operator (it has no uint8 one)
        where, why = _placed(_exact(data, dtype, (1, 2, 3, 4), q[0][1], "ethos-u"))
        assert where == "tflite-micro" and "wraps" in why, why


@pytest.mark.parametrize("branch, q, wraps", [
    # identity branch: 2**15 (shift 16) keeps 32767 within int32, a zero point of -1
    # makes the largest offset 32768, which leaves it (alpha's: 32768 * 100 << 9 does not)
    ("identity", ((1.0, 0), (0.01, 0), (2.0**-15, 0)), False),
    ("identity", ((1.0, -1), (0.01, 0), (2.0**-15, 0)), True),
    # alpha branch: 2**-4 * 2**-6 / 2**-15 = 2**5 (shift 6), 32768 * 100 << 6 < 2**28;
    # an alpha scale 2**4 larger shifts by 10: above 2**31
    ("alpha", ((2.0**-4, 0), (2.0**-6, 0), (2.0**-15, 0)), False),
    ("alpha", ((2.0**-4, 0), (2.0**-2, 0), (2.0**-15, 0)), True),
])
def test_the_wrap_is_found_exactly_where_the_largest_operand_leaves_int32(branch, q, wraps):
    found = prelu_kernel.wrapping_shifts("int16", *q, np.array([-100, 5]))
    assert [w.branch for w in found] == ([branch] if wraps else []), found


@pytest.mark.parametrize("dtype, alpha_dtype, words", [
    ("int16", "int16", "TFLite Micro's int16 kernel takes an INT8 alpha only"),
    ("uint8", "int8", "reads the alpha's bytes as uint8 codes"),
])
def test_an_alpha_type_no_kernel_defines_is_refused_naming_why(dtype, alpha_dtype, words):
    """TFLite Micro refuses an int16 PRELU's int16 alpha at prepare, and LiteRT reads any
    alpha's bytes as the codes of its kernel's alpha type: neither defines these forms."""
    alpha = np.array([[[3, -1, 7, 2]]]) + (0 if alpha_dtype != "uint8" else 128)
    q = ((2.0**-12, 0), (0.01, 0), (2.0**-11, 0)) if dtype == "int16" else \
        ((0.05, 128), (0.01, 0), (0.04, 120))
    data = prelu_model(dtype, (1, 2, 2, 4), alpha, *q, alpha_dtype=alpha_dtype)
    (support,) = operator_support(data)
    assert not support.importable
    assert words in support.reason and "no kernel defines its result" in support.reason, \
        support.reason
    with pytest.raises(TvmEthosError, match="no kernel defines its result"):
        tvm_ethos.compile(data, "llvm", cache_dir=False)


def test_the_kernels_forms_import_and_a_mixed_output_type_does_not():
    alpha = np.array([[[3, -1, 7, 2]]])
    q16 = ((2.0**-12, 0), (0.01, 0), (2.0**-11, 0))
    assert operator_support(prelu_model("int16", (1, 2, 2, 4), alpha, *q16))[0].importable
    assert operator_support(prelu_model("uint8", (1, 2, 2, 4), alpha + 128, (0.05, 128),
                                        (0.01, 128), (0.04, 120)))[0].importable
    x = tb.T([1, 2, 2, 4], "int16", scale=2.0**-12, zp=0)
    a = tb.T([1, 1, 4], "int8", scale=0.01, zp=0, data=alpha.astype(np.int8))
    y = tb.T([1, 2, 2, 4], "int8", scale=0.05, zp=0)
    data = tb.serialize([x, a, y], [(tb.BO.PRELU, 0, None, [0, 1], [2])], [0], [2])
    (support,) = operator_support(data)
    assert "a PRELU of INT16 codes with INT8 output codes" in support.reason, support.reason
