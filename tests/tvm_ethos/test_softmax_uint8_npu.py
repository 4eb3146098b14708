"""A uint8 SOFTMAX on the Ethos-U (``npu_softmax``: the 8-bit lowering reading uint8 codes and
writing uint8 ones, output (1/256, 0)) and on the llvm host (``te_ops.lower_softmax``), each
equal to LiteRT BUILTIN_REF's uint8 kernel (``reference_ops::Softmax``; TFLite Micro has no
uint8 SOFTMAX) on random codes and the extremes, for a Hypothesis sample of quantizations,
betas and depths. Rows stay under 512 values, where LiteRT's kernel itself can abort
(``tests/helpers/tflite_split.py``)."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from benchmarks.vela_superset_probes import PROBES
from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.tflite_oracle import oracle, tflm_accepts
from tests.helpers.vela_cli import VELA, vela_compile
from tvm_ethos.backends.ethos_u import npu_softmax
from tvm_ethos.patterns import QOp

pytest.importorskip("ai_edge_litert")


def _rows(shape, rs) -> np.ndarray:
    """Uniform uint8 codes, the first rows (as many as there are) the extremes: all 0, all
    255, one 255 among 0s, 0 and 255 alternating, one 0 among 255s."""
    x = rs.randint(0, 256, size=shape).astype(np.uint8)
    rows = x.reshape(-1, shape[-1])
    extremes = [np.zeros(shape[-1]), np.full(shape[-1], 255), np.eye(1, shape[-1])[0] * 255,
                np.arange(shape[-1]) % 2 * 255, 255 - np.eye(1, shape[-1], shape[-1] - 1)[0] * 255]
    for row, value in zip(rows, extremes):
        row[:] = value
    return x


def _matches(data: bytes, target: str, shape, seed: int):
    """``data`` compiled for ``target``, its outputs on the extremes and random codes equal to
    LiteRT BUILTIN_REF's; the compiled model back."""
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    rs = np.random.RandomState(seed)
    for _ in range(2):
        x = _rows(shape, rs)
        want = oracle(data, [x])[0]
        assert np.array_equal(cm.run(x)[0].reshape(want.shape), want)
    return cm


_scales = st.floats(-12, 1).map(lambda e: float(np.float32(2.0 ** e)))
_betas = st.sampled_from([1.0, 0.5, 2.0, 0.1, 1.7, 0.03])
_shapes = st.one_of(
    st.tuples(st.integers(1, 3), st.integers(1, 511)),
    st.tuples(st.integers(1, 2), st.integers(1, 4), st.integers(1, 5), st.integers(1, 40)))
_targets = st.sampled_from(["ethos-u", "ethos-u,llvm", "llvm"])


def _on_its_target(shape, s_in, z_in, beta, target, seed):
    """On ``ethos-u`` and ``ethos-u,llvm`` one generated stream on the NPU; on ``llvm`` the
    host's kernel: each equal to LiteRT's uint8 kernel."""
    data = tb.softmax(None, shape=shape, beta=beta, in_q=(s_in, z_in), dtype="uint8")
    cm = _matches(data, target, shape, seed)
    device = "llvm" if target == "llvm" else "ethos-u"
    assert cm.partition_summary == {device: 1}, cm.partition_summary
    if device == "ethos-u":
        (entry,) = cm.plan_report["streams"].values()
        assert entry["generated"], entry


@settings(max_examples=4, deadline=None)
@given(shape=_shapes, s_in=_scales, z_in=st.integers(0, 255), beta=_betas, target=_targets,
       seed=st.integers(0, 2**16))
@example(shape=(1, 10), s_in=0.05, z_in=128, beta=1.0, target="ethos-u", seed=0)
@example(shape=(2, 3, 5, 40), s_in=2.0, z_in=0, beta=0.03, target="ethos-u,llvm", seed=1)
@example(shape=(3, 511), s_in=2.0 ** -12, z_in=255, beta=2.0, target="ethos-u", seed=2)
@example(shape=(2, 1), s_in=0.5, z_in=7, beta=1.7, target="llvm", seed=3)
def test_it_is_litert_on_every_target(shape, s_in, z_in, beta, target, seed):
    _on_its_target(shape, s_in, z_in, beta, target, seed)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(shape=_shapes, s_in=_scales, z_in=st.integers(0, 255), beta=_betas, target=_targets,
       seed=st.integers(0, 2**16))
def test_a_wider_sample_is_litert_on_every_target(shape, s_in, z_in, beta, target, seed):
    _on_its_target(shape, s_in, z_in, beta, target, seed)


def test_the_audits_uint8_probe_runs_on_the_npu_as_litert():
    """The form ``benchmarks/vela_superset_audit.py`` found Vela 5.2 taking and ours not: one
    ``ethos-u`` operator in the TFLite Micro file, where the source's SOFTMAX is one TFLite
    Micro cannot run (it has no uint8 kernel)."""
    (probe,) = [p for p in PROBES if (p.operator, p.name) == ("SOFTMAX", "uint8")]
    data = probe.build()
    assert tflm_accepts(data) != "ok"
    cm = _matches(data, "ethos-u -accelerator_config=ethos-u55-128", (1, 10), 0)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], cm.placement


@pytest.mark.skipif(not VELA.exists(), reason="Vela 5.2 (the 'vela' extra) is not installed")
def test_velas_uint8_stream_on_the_functional_model_is_litert_too():
    """Vela 5.2's own uint8 SOFTMAX stream, run by our functional model, equals LiteRT as
    ours does: the functional model reads the uint8 maps as Vela's stream means them."""
    shape = (2, 4, 5, 40)
    data = tb.softmax(None, shape=shape, beta=0.5, in_q=(0.3, 200), dtype="uint8")
    x = _rows(shape, np.random.RandomState(4))
    got = run_vela_model(vela_compile(data), [x], "ethos-u55-128")[0][0]
    want = oracle(data, [x])[0]
    assert np.array_equal(got.reshape(want.shape), want)


def test_uint8_to_int16_and_other_output_quantization_are_named():
    """LiteRT also writes uint8 to int16; Vela 5.2 and TFLite Micro do not, and neither does
    the NPU lowering; a uint8 output is (1/256, 0) in TFLite. The lowering names both."""
    q = QOp("softmax", [], [(1, 10)], ["uint8"], (1, 10), "int16", in_q=[(0.1, 0)],
            out_q=(1 / 65536, -32768))
    with pytest.raises(npu_softmax.UnsupportedOperatorError, match="uint8 -> uint8"):
        npu_softmax.geometry(q)
    q.out_dtype, q.out_q = "uint8", (1 / 256, 3)
    with pytest.raises(npu_softmax.UnsupportedOperatorError, match=r"\(1/256, 0\)"):
        npu_softmax.geometry(q)
    q.out_q = (1 / 256, 0)
    assert npu_softmax.geometry(q) == (1, 10)
