"""TFLite's int16 EXP and LOG on the Ethos-U: LiteRT's interpolated 513-entry float table
(``compute.float_lut16``) as the NPU's 16-bit LUT, as Vela 5.2 runs them. TFLite Micro's EXP
and LOG are float only, so LiteRT's reference kernel (BUILTIN_REF) is the oracle, on every one
of the 65,536 int16 codes; its int16 kernels take zero points 0 only, and any other stays a
TFLite operator naming that."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from ethos_arch.ops import Op
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite
from tests.helpers.tflite_oracle import oracle
from tvm_ethos.compute import float_lut16
from tvm_ethos.frontend.tflite_support import operator_support

pytest.importorskip("ethosu.vela")

KINDS = {Op.EXP: tb.BO.EXP, Op.LOG: tb.BO.LOG}
#: every int16 code once, as a 4-D map an NPU stripe can cut
EVERY_CODE = np.arange(-32768, 32768, dtype=np.int16).reshape(1, 8, 64, 128)
scales = st.floats(1e-6, 0.1).map(lambda v: float(np.float32(v)))


def model(kind: Op, in_q, out_q, shape=(1, 8, 64, 128)) -> bytes:
    x = tb.T(list(shape), "int16", scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), "int16", scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(KINDS[kind], 0, None, [0], [1])], [0], [1])


def litert(kind: Op, in_q, out_q) -> np.ndarray:
    return oracle(model(kind, in_q, out_q), [EVERY_CODE])[0].ravel()


@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(list(KINDS)), in_scale=scales, out_scale=scales)
@example(kind=Op.EXP, in_scale=2e-4, out_scale=3e-3)        # Vela's stream test's model
@example(kind=Op.EXP, in_scale=0.0090913, out_scale=4.41e-4)  # exp overflows float32: NaN entries
@example(kind=Op.LOG, in_scale=1e-3, out_scale=2e-4)
@example(kind=Op.LOG, in_scale=0.078, out_scale=0.0099)
def test_the_table_is_litert_reference_kernel_on_every_code(kind, in_scale, out_scale):
    in_q, out_q = (in_scale, 0), (out_scale, 0)
    np.testing.assert_array_equal(float_lut16.every_code(kind, in_q, out_q),
                                  litert(kind, in_q, out_q))


@settings(max_examples=3, deadline=None)
@given(kind=st.sampled_from(list(KINDS)), in_scale=scales, out_scale=scales,
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
@example(kind=Op.EXP, in_scale=2e-4, out_scale=3e-3, accelerator="ethos-u55-128")
@example(kind=Op.LOG, in_scale=1e-3, out_scale=2e-4, accelerator="ethos-u65-256")
@example(kind=Op.EXP, in_scale=0.0625, out_scale=0.0625, accelerator="ethos-u55-128")  # wraps
def test_the_npu_runs_it_as_litert_on_every_code(kind, in_scale, out_scale, accelerator):
    """On the functional model of the stream (``ethos-u``, a TFLite Micro file, and
    ``ethos-u,llvm``) and on the TensorIR emulator (``npu_runtime="tir"``): one NPU operator,
    LiteRT's output on every code; the llvm host's kernel gathers the same table. Where the
    NPU's saturating lookup cannot give it (``npu_refusal``) the llvm host runs it, as
    exactly."""
    in_q, out_q = (in_scale, 0), (out_scale, 0)
    source = model(kind, in_q, out_q)
    want = litert(kind, in_q, out_q)
    on_npu = not float_lut16.npu_refusal(kind, in_q, out_q)
    for host, options in (("", {}), (",llvm", {}), (",llvm", {"npu_runtime": "tir"})):
        target = f"ethos-u -accelerator_config={accelerator}{host}"
        cm = tvm_ethos.compile(source, target, cache_dir=False, **options)
        assert ("ethos-u" in cm.partition_summary) == on_npu, (target, cm.partition_summary)
        if not on_npu and not host:
            continue    # a TFLite operator TFLite Micro cannot run (its EXP is float only)
        np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].ravel(), want,
                                      err_msg=f"{target} {options}")
    cm = tvm_ethos.compile(source, "llvm", cache_dir=False)
    np.testing.assert_array_equal(cm.run(EVERY_CODE)[0].ravel(), want, err_msg="llvm")


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_planner_counts_the_2_kib_table(kind):
    (part,) = load_tflite(model(kind, (1e-3, 0), (2e-3, 0), shape=(1, 4, 8, 8))).parts
    (npu,) = lower_part(part, part.output.shape)
    assert npu.lut_bytes == 2048, npu


def test_the_stream_loads_the_16_bit_table(tmp_path):
    cm = tvm_ethos.compile(model(Op.EXP, (2e-4, 0), (3e-3, 0)), "ethos-u", cache_dir=False)
    cm.export_tflite(tmp_path / "exp16.tflite")
    data = (tmp_path / "exp16.tflite").read_bytes()
    words = float_lut16.npu_words(Op.EXP, (2e-4, 0), (3e-3, 0)).astype("<u4").tobytes()
    assert len(words) == 2048 and words in data


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("in_zp,out_zp", [(5, 0), (0, -3)])
def test_a_zero_point_litert_refuses_stays_a_tflite_operator_naming_it(kind, in_zp, out_zp):
    source = model(kind, (1e-3, in_zp), (2e-3, out_zp))
    with pytest.raises(RuntimeError):   # the oracle's kernel fails to prepare
        oracle(source, [EVERY_CODE])
    (verdict,) = operator_support(source)
    assert not verdict.importable
    assert "zero point" in verdict.reason and ("5" in verdict.reason or "-3" in verdict.reason)
    cm = tvm_ethos.compile(source, "ethos-u", cache_dir=False)
    assert "ethos-u" not in cm.partition_summary


def test_a_table_whose_tflite_lookup_wraps_stays_off_the_npu_naming_it():
    """EXP of inputs up to 2048 overflows float32 inside the input range: LiteRT's table
    jumps from -32768 to 0, its int16 lookup wraps there and the NPU's saturates."""
    q = (0.0625, 0)
    why = float_lut16.npu_refusal(Op.EXP, q, q)
    assert "wraps past int16 on 127 codes (from 1281)" in why and "0.0625" in why
    assert float_lut16.npu_refusal(Op.EXP, (2e-4, 0), (3e-3, 0)) == ""
    cm = tvm_ethos.compile(model(Op.EXP, q, q), "ethos-u", cache_dir=False)
    assert "ethos-u" not in cm.partition_summary
    (placed,) = cm.placement
    assert "wraps past int16" in placed.why, placed


def test_a_bad_quantization_is_one_error_naming_the_zero_point():
    with pytest.raises(ValueError, match="output zero point of 7"):
        float_lut16.table(Op.LOG, (1e-3, 0), (1e-3, 7))
