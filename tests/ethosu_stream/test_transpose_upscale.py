"""IFM_UPSCALE's zero-inserting mode, as Vela lowers TRANSPOSE_CONV: a stride-1 convolution
over the IFM with a zero row and column after each element, the weights rotated and its own
padding. Vela's streams of TRANSPOSE_CONV models run on the functional model equal TFLite
Micro's outputs (Hypothesis over shapes, strides, SAME/VALID, kernels and quantization)."""
import numpy as np
import pytest
import tflite_builder as B
from hypothesis import given, settings
from hypothesis import strategies as st

from ethosu_stream.tflite_graph import TfliteGraph
from tests.helpers.tflite_oracle import tflm_oracle
from tests.helpers.vela_cli import vela_compile

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

@st.composite
def _cases(draw):
    h, w, c = draw(st.integers(1, 6)), draw(st.integers(1, 6)), draw(st.integers(1, 8))
    stride = draw(st.sampled_from([(2, 2), (1, 1)]))
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    low = stride[0]   # Vela takes a stride-2 kernel of 2 or more (OFM = IFM * 2 + k - 2)
    kernel = (draw(st.integers(low, 4)), draw(st.integers(low, 4)))
    return dict(shape=(1, h, w, c), cout=draw(st.integers(1, 8)), kernel=kernel,
                stride=stride, padding=padding, seed=draw(st.integers(0, 1000)),
                per_channel=draw(st.booleans()), bias=draw(st.booleans()),
                act=draw(st.sampled_from([None, "relu"])),
                in_q=(draw(st.floats(0.005, 0.5)), draw(st.integers(-128, 127))),
                out_q=(draw(st.floats(0.01, 1.0)), draw(st.integers(-128, 127))))


@settings(max_examples=8, deadline=None)
@given(case=_cases(), config=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_velas_transpose_conv_streams_equal_tflite_micro(case, config):
    model = B.transpose_conv(**case)
    graph = TfliteGraph(vela_compile(model, config), config)
    assert graph.cpu_operators == [], "Vela left the TRANSPOSE_CONV on the CPU"
    rs = np.random.RandomState(case["seed"])
    x = rs.randint(-128, 128, case["shape"]).astype(np.int8)
    (got,), _ = graph.run([x])
    (want,) = tflm_oracle(model, [x])
    assert np.array_equal(got, want), f"{np.count_nonzero(got != want)} of {want.size} differ"


def test_a_stride_2_stream_uses_the_zero_inserting_upscale():
    """The case the rest stands on: Vela's stride-2 TRANSPOSE_CONV is an upscaled convolution,
    so the functional model must run IFM_UPSCALE mode 2, not refuse it."""
    model = B.transpose_conv((1, 4, 4, 4), 6, (3, 3), (2, 2), "SAME", per_channel=True)
    data = vela_compile(model, "ethos-u55-128")
    x = np.random.RandomState(1).randint(-128, 128, (1, 4, 4, 4)).astype(np.int8)
    (got,), _ = TfliteGraph(data, "ethos-u55-128").run([x])
    assert np.array_equal(got, tflm_oracle(model, [x])[0])
