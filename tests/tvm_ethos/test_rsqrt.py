"""RSQRT (int8) from a .tflite: TFLite Micro's kernel (a fixed-point Newton-Raphson for
1 / sqrt(v), then its double-precision output multiplier) as a 256-entry table
(``compute.rsqrt``) that the llvm host and the TIR emulator gather from and the Ethos-U applies
as its LUT, as Vela 5.2 does; on every input code TFLite Micro defines (the codes at or above
the input zero point: below it, a negative real input, TFLite Micro fails the invocation),
equal to TFLite Micro's. The planner reads it as a unary LUT Part."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from planner.perf.ethos_u import lower_part
from planner.tflite import load_tflite
from tests.helpers.tflite_oracle import tflm_oracle
from tvm_ethos.compute.rsqrt import inv_sqrt_multiplier, rsqrt_lut
from tvm_ethos.frontend import operator_support

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

ACCELERATORS = ["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]
scales = st.floats(1e-4, 10.0).map(lambda v: float(np.float32(v)))
zero_points = st.integers(-128, 127)


def rsqrt_model(in_q, out_q, shape=(1, 256), dtype="int8") -> bytes:
    x = tb.T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), dtype, scale=out_q[0], zp=out_q[1])
    return tb.serialize([x, y], [(tb.BO.RSQRT, 0, None, [0], [1])], [0], [1])


def defined_codes(zp_in: int, size: int = 256) -> np.ndarray:
    """``size`` int8 codes: every code from the zero point up, then the zero point again."""
    codes = np.full(size, zp_in, np.int8)
    every = np.arange(zp_in, 128, dtype=np.int8)
    codes[:every.size] = every
    return codes


@settings(max_examples=60, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points))
@example(in_q=(0.05, -128), out_q=(0.04, -128))   # the operator table's model
@example(in_q=(1e-4, -128), out_q=(1e-4, 0))      # every code saturates high
@example(in_q=(10.0, 127), out_q=(0.5, -128))     # only v = 0: the kernel's largest code
@example(in_q=(0.001, -128), out_q=(10.0, 127))   # every code saturates low
def test_the_table_is_tflite_micros_kernel_on_every_defined_code(in_q, out_q):
    codes = defined_codes(in_q[1])
    want = tflm_oracle(rsqrt_model(in_q, out_q), [codes.reshape(1, 256)])[0].ravel()
    np.testing.assert_array_equal(rsqrt_lut("int8", in_q, out_q)[codes.astype(int) + 128],
                                  want)


def test_the_inverse_square_root_multiplier_is_one_over_sqrt():
    """The Newton-Raphson's (multiplier, shift) is 1 / sqrt(v) within its Q3 precision (a
    check of the fixed-point steps independent of the oracle), and 1 for v <= 1."""
    assert inv_sqrt_multiplier(1) == (2**31 - 1, 0)
    for v in [2, 3, 4, 17, 255, 4096, 1 << 20, (1 << 29) + 5, 2**31 - 1]:
        m, s = inv_sqrt_multiplier(v)
        assert abs(m * 2.0 ** (s - 31) * np.sqrt(v) - 1) < 1e-5, v


@settings(max_examples=4, deadline=None)
@given(in_q=st.tuples(scales, zero_points), out_q=st.tuples(scales, zero_points),
       accelerator=st.sampled_from(ACCELERATORS))
@example(in_q=(0.05, -128), out_q=(0.04, -128), accelerator="ethos-u65-256")
def test_the_npu_runs_rsqrt_as_a_lut_equal_to_tflite_micro(in_q, out_q, accelerator):
    model = rsqrt_model(in_q, out_q, shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    x = defined_codes(in_q[1]).reshape(1, 4, 8, 8)
    want = tflm_oracle(model, [x])[0]
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


@pytest.mark.parametrize("target", ["llvm", "ethos-u,llvm"])
def test_the_llvm_host_and_the_emulator_are_tflite_micros_kernel(target):
    model = rsqrt_model((0.02, -20), (0.03, 5), shape=(1, 4, 8, 8))
    cm = tvm_ethos.compile(model, target, cache_dir=False)
    assert set(cm.partition_summary) == {target.split(",")[0]}, cm.partition_summary
    x = defined_codes(-20).reshape(1, 4, 8, 8)
    want = tflm_oracle(model, [x])[0]
    np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


def test_an_int16_rsqrt_stays_a_tflite_operator():
    """The front door keeps int16 tensors it has no exact kernel for away from the importer,
    in one line (why there is none: the next test)."""
    (verdict,) = operator_support(rsqrt_model((0.001, 0), (0.002, 0), dtype="int16"))
    assert not verdict.importable and "INT16" in verdict.reason and "\n" not in verdict.reason
    with pytest.raises(ValueError, match="int16; the RSQRT table is computed for int8"):
        rsqrt_lut("int16", (0.001, 0), (0.002, 0))


def _linear_within(values: np.ndarray) -> bool:
    """Whether one entry of the NPU's 16-bit LUT (``ethosu_stream.lut16``: base + slope *
    fraction / 128, rounded half up, over 128 codes) gives ``values``: the base is the first
    value, and some int16 slope must give every other."""
    base, lo, hi = int(values[0]), -32768, 32767
    for f in range(1, 128):
        d = int(values[f]) - base
        lo, hi = max(lo, -(-(128 * d - 64) // f)), min(hi, (128 * d + 63) // f)
    return lo <= hi


def test_no_16_bit_npu_table_is_tflite_micros_int16_rsqrt():
    """TFLite Micro runs RSQRT on int16 (zero points 0; a negative code fails the
    invocation): its Newton-Raphson on each of the 32,768 non-negative codes. The NPU's
    16-bit LUT is linear within each interval of 128 codes; on the audit's quantization
    (benchmarks/vela_superset_audit.py: 2**-12 in, 2**-10 out) 247 of the 256 non-negative
    intervals hold values no entry gives (brute force over every slope), so no NPU form is
    exact and the operator stays TFLite Micro's."""
    model = rsqrt_model((2.0**-12, 0), (2.0**-10, 0), shape=(1, 32768), dtype="int16")
    codes = np.arange(32768, dtype=np.int16).reshape(1, 32768)
    want = tflm_oracle(model, [codes])[0].ravel().astype(np.int64)
    assert want[0] == 32767 and np.all(np.diff(want) <= 0)   # 1 / sqrt, saturated at 0
    bad = [k for k in range(256) if not _linear_within(want[128 * k:128 * (k + 1)])]
    assert len(bad) == 247 and bad[:3] == [0, 1, 2]
    (placed,) = tvm_ethos.compile(model, "ethos-u", cache_dir=False).placement
    assert placed.placed_on == "tflite-micro" and "INT16" in placed.why


def test_the_planner_reads_rsqrt_as_a_lut_part():
    graph = load_tflite(rsqrt_model((0.05, -128), (0.04, -128), shape=(1, 4, 8, 8)))
    (part,) = graph.parts
    assert (part.kind, part.attr("op")) == ("unary", "rsqrt")
    (npu,) = lower_part(part, part.output.shape)
    assert npu.lut_bytes == 256, npu
