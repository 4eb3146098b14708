"""FULLY_CONNECTED on a host rounds as LiteRT's reference kernel does: once
(``te_ops.mbqm_single_rounding``), where conv, pooling and elementwise round twice; on the
Ethos-U (its stream and its "tir" emulator) it rounds twice, as TFLite Micro, the Ethos-U's
oracle, and Vela's TFL rounding do. A wide layer has a few outputs on which the two differ; the
case below is checked to contain some (so each assertion fails under the other rounding) and
every path must give its reference's values there."""

import numpy as np
import pytest
import tflite
import tflite_builder as tb

import tvm_ethos
from tests.helpers.tflite_oracle import oracle, random_inputs, tflm_oracle
from tvm_ethos.compute.quant import f32, mbqm_np, quantize_multiplier

K, N, SEED = 256, 4096, 2


@pytest.fixture(scope="module")
def case():
    model = tb.fully_connected(np.random.RandomState(SEED), k=K, n=N)
    xs = [random_inputs(model, np.random.RandomState(s)) for s in range(3)]
    return model, xs, [oracle(model, x)[0].reshape(-1) for x in xs]


def _double_rounding(model, x):
    """The layer requantized with MultiplyByQuantizedMultiplier's double rounding."""
    g = tflite.Model.GetRootAsModel(model, 0).Subgraphs(0)
    m = tflite.Model.GetRootAsModel(model, 0)

    def q(i):
        t = g.Tensors(i).Quantization()
        return float(t.ScaleAsNumpy()[0]), int(t.ZeroPointAsNumpy()[0])

    def data(i):
        return m.Buffers(g.Tensors(i).Buffer()).DataAsNumpy()

    (xs, xz), (ws, _), _, (ys, yz) = q(0), q(1), q(2), q(3)
    w = data(1).view(np.int8).reshape(N, K).astype(np.int64)
    acc = w @ (x.reshape(-1).astype(np.int64) - xz) + data(2).view(np.int32)
    mult, shift = quantize_multiplier(float(np.float32(f32(xs)) * np.float32(f32(ws))) / ys)
    return np.clip(mbqm_np(acc, mult, shift) + yz, -128, 127)


def test_the_case_tells_single_from_double_rounding(case):
    model, xs, refs = case
    differ = sum(int((_double_rounding(model, x[0]) != r).sum()) for x, r in zip(xs, refs))
    assert differ >= 3


def test_double_rounding_is_tflite_micros(case):
    """The Ethos-U paths' reference below is TFLite Micro's own output."""
    model, xs, _ = case
    for x in xs:
        np.testing.assert_array_equal(_double_rounding(model, x[0]),
                                      tflm_oracle(model, x)[0].reshape(-1))


@pytest.mark.parametrize("target, options", [
    ("llvm", {}),
    ("ethos-u,llvm", {"npu_runtime": "tir"}),
    ("ethos-u,llvm", {"npu_runtime": "stream"}),
    ("opencl", {}),
], ids=["llvm", "ethos-u-tir", "ethos-u-stream", "opencl"])
def test_fully_connected_is_bit_exact_on_every_output(case, target, options):
    model, xs, refs = case
    if target.startswith("ethos-u"):   # TFLite Micro's double rounding
        refs = [_double_rounding(model, x[0]) for x in xs]
    cm = tvm_ethos.compile(model, target=target, cache_dir=False, **options)
    for x, r in zip(xs, refs):
        got = cm.run(*x)[0].reshape(-1)
        assert np.array_equal(got, r), np.nonzero(got != r)[0][:5]
