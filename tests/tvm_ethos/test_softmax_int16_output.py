"""SOFTMAX of int8 codes to int16 ones (TFLite's 8-bit kernel with a wider output, what
keyword_scrambled_8bit ends with): the numpy statement, the NPU's stream, the TIR emulator and
the llvm host, each equal to TFLite Micro's kernel, and the trained model's operators on the CPU
as many as Vela 5.2 leaves there."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from benchmarks.real_models import vela_size
from tests.helpers.models import MODELS_DIR
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle
from tvm_ethos.backends.ethos_u import npu_softmax
from tvm_ethos.compute import fixed_point
from tvm_ethos.errors import UnsupportedModelError

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

#: TFLite's int8 -> int16 SOFTMAX output quantization
OUT_Q = (1 / 65536, -32768)


def softmax16_model(shape, in_q, beta=1.0, out_q=OUT_Q) -> bytes:
    """One SOFTMAX over the last axis of ``shape``, int8 in, int16 out."""
    x = tb.T(list(shape), "int8", scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape), "int16", scale=out_q[0], zp=out_q[1])

    def opts(b):
        tflite.SoftmaxOptionsStart(b)
        tflite.SoftmaxOptionsAddBeta(b, beta)
        return tflite.SoftmaxOptionsEnd(b)

    return tb.build([x, y], [0], [1], tb.BO.SOFTMAX, tb.BOPT.SoftmaxOptions, opts)


def _row_inputs(shape, rs) -> list[np.ndarray]:
    """Random rows, one all equal (a sum that is a power of two) and one with a single
    non-minimal code (every other exponential 0 or tiny)."""
    xs = [rs.randint(-128, 128, size=shape).astype(np.int8) for _ in range(2)]
    xs.append(np.full(shape, 7, np.int8))
    peak = np.full(shape, -128, np.int8)
    peak[..., 0] = 127
    return xs + [peak]


_shapes = st.tuples(st.integers(1, 3), st.integers(1, 40)).map(lambda s: (1,) + s)
_in_q = st.tuples(st.floats(0.02, 0.5), st.integers(-128, 127))


@settings(max_examples=60, deadline=None)
@given(shape=_shapes, in_q=_in_q, beta=st.sampled_from([1.0, 0.5, 2.0]), seed=st.integers(0, 99))
def test_the_numpy_statement_is_tflite_micros_kernel(shape, in_q, beta, seed):
    data = softmax16_model(shape, in_q, beta)
    for x in _row_inputs(shape, np.random.RandomState(seed)):
        want = tflm_oracle(data, [x])[0]
        got = fixed_point.softmax_8bit(x, in_q[0], beta, "int16")
        np.testing.assert_array_equal(got, want.reshape(got.shape))


@settings(max_examples=4, deadline=None)
@given(shape=_shapes, in_q=_in_q, beta=st.sampled_from([1.0, 0.5]),
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_the_npu_stream_is_tflite_micros_kernel(shape, in_q, beta, accelerator):
    data = softmax16_model(shape, in_q, beta)
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why
    for x in _row_inputs(shape, np.random.RandomState(1)):
        want = tflm_oracle(data, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


@pytest.mark.parametrize("target", ["ethos-u,llvm", "llvm"])
def test_the_emulator_and_the_llvm_host_are_tflite_micros_kernel(target):
    shape, in_q = (1, 3, 12), (0.07, 2)
    data = softmax16_model(shape, in_q)
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    assert set(cm.partition_summary) == {target.split(",")[0]}
    for x in _row_inputs(shape, np.random.RandomState(2)):
        want = tflm_oracle(data, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


def test_an_int16_output_quantized_unlike_tflites_is_refused_in_one_line():
    """TFLite Micro requires (1/65536, -32768); with another scale the model is no TFLite
    model, and the importer keeps refusing its INT16 tensors."""
    data = softmax16_model((1, 10), (0.1, 0), out_q=(1 / 32768, -32768))
    with pytest.raises(UnsupportedModelError, match="SOFTMAX has INT16 tensors") as err:
        tvm_ethos.load_model(data)
    assert "\n" not in str(err.value)


def test_the_npu_lowering_names_what_it_cannot_express():
    q = tvm_ethos.patterns.QOp("softmax", [], [(1, 10)], ["int8"], (1, 10), "int16",
                               in_q=[(0.1, 0)], out_q=(1 / 65536, 0))
    with pytest.raises(npu_softmax.UnsupportedOperatorError, match=r"\(1/65536, -32768\)"):
        npu_softmax.geometry(q)
    q.in_dtypes = ["int16"]
    with pytest.raises(npu_softmax.UnsupportedOperatorError, match="int8 -> int16"):
        npu_softmax.geometry(q)


def test_keyword_scrambled_leaves_nothing_on_the_cpu():
    """Its last SOFTMAX (int8 -> int16) and the int16 -> int32 QUANTIZE after it go to the
    NPU, as do its SVDFs (test_stream_svdf.py): nothing stays on the CPU, where Vela 5.2 leaves
    8 operators (the SVDFs and that QUANTIZE), and the file's outputs are TFLite Micro's."""
    path = MODELS_DIR / "tflite-micro" / "keyword_scrambled_8bit.tflite"
    if not path.exists():
        pytest.skip(f"model {path} not available (set TVM_ETHOS_MODELS)")
    source = path.read_bytes()
    cm = tvm_ethos.compile(source, "ethos-u -accelerator_config=ethos-u55-128", cache_dir=False)
    placed = {p.kind: set() for p in cm.placement}
    for p in cm.placement:
        placed[p.kind].add(p.placed_on)
    assert placed["SOFTMAX"] == {"ethos-u"}
    kept = [p.kind for p in cm.placement if p.placed_on == "tflite-micro"]
    assert kept == [] and vela_size(str(path), "ethos-u55-128")["cpu"] == 8
    rs = np.random.RandomState(3)
    for _ in range(3):   # one interpreter per input: the SVDFs' state starts alike
        xs = inputs_for(cm.inputs, rs)
        want = tflm_oracle(source, xs)[0]
        np.testing.assert_array_equal(cm.run(*xs)[0].reshape(want.shape), want)
