"""Vela 5.2's own AVERAGE_POOL_2D of width stride 4 and CONV_2D of dilation 3x2 on the
functional model, equal to TFLite Micro's.

The NPU's strides are 1 to 3 and its dilations 1 or 2. Vela runs the pool as one 1x1-output
pool per output element (its window's columns read from where they lie) and the dilation as
one convolution of a kernel spread with zero taps along the height (3 = 3 x 1) and the NPU's
dilation 2 along the width: a 7x3 kernel dilated 1x2 for a 3x3 one. Ours runs the same
convolution and the pool as one pool per output column
(tests/tvm_ethos/test_wide_stride_dilation.py)."""
import numpy as np
import pytest
import tflite

from benchmarks.vela_superset_probes import PROBES
from ethosu_stream.ops_common import kernel, ofm_shape
from ethosu_stream.tflite_graph import TfliteGraph
from tests.helpers.tflite_oracle import tflm_oracle
from tests.helpers.vela_cli import vela_compile

pytest.importorskip("tflite_micro")

PROBED = {(p.operator, p.name): p for p in PROBES}


def _vela_run(form):
    """Vela's file of the probe, wholly on the NPU, run on the functional model: (the
    (command, kernel, OFM shape) of each block operation, whether it equals TFLite Micro)."""
    model = PROBED[form].build()
    graph = TfliteGraph(vela_compile(model, options=["--optimise", "Size"]), "ethos-u55-128")
    assert graph.cpu_operators == []
    ran = []

    def trace(cmd, state, memory):
        if cmd.name in ("NPU_OP_POOL", "NPU_OP_CONV"):
            k = kernel(state)
            ran.append((cmd.name, (k.height, k.width, k.stride_y, k.stride_x, k.dilation_y,
                                   k.dilation_x), ofm_shape(state)))

    sg = tflite.Model.GetRootAsModel(model, 0).Subgraphs(0)
    shape = tuple(sg.Tensors(sg.Inputs(0)).ShapeAsNumpy())
    xs = [np.random.RandomState(0).randint(-128, 128, shape).astype(np.int8)]
    (got,), _ = graph.run(xs, trace)
    (want,) = tflm_oracle(model, xs)
    return ran, np.array_equal(got.reshape(want.shape), want)


@pytest.mark.slow
def test_velas_stride_4_pool_is_one_pool_per_output_element():
    ran, equal = _vela_run(("AVERAGE_POOL_2D", "stride width 4 VALID"))
    assert equal
    assert ran == [("NPU_OP_POOL", (1, 4, 1, 1, 1, 1), (1, 1, 8))] * 16


@pytest.mark.slow
def test_velas_3x2_dilation_is_a_7x3_kernel_dilated_1x2():
    ran, equal = _vela_run(("CONV_2D", "dilation 3x2 VALID"))
    assert equal
    assert ran == [("NPU_OP_CONV", (7, 3, 1, 1, 1, 2), (6, 8, 6))]
