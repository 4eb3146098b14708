"""Vela 5.2's own SUM, REDUCE_MAX and REDUCE_MIN over the depth on the functional model,
equal to TFLite Micro's.

Vela (its Regor graph optimiser) lowers SUM over the depth to a 1x1 convolution into one
channel (the IFM zero point subtracted, TFLite's ``s_in / s_out`` scale), REDUCE_MAX to a max
pool over each pixel's channels (the NHWC input read as ``pixels x C x 1``, kernel ``1 x C``)
and REDUCE_MIN to the same between two elementwise SUBs from -1 (bitwise NOT); ours emits the
same forms (``tvm_ethos.backends.ethos_u.ops_reduce_depth``). Vela's SUM rounds once
(NATURAL), TFLite Micro twice: its file is off by one code on a few outputs, where ours rounds
TFL."""
import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import _opts

from ethosu_stream.ops_common import rounding_mode
from ethosu_stream.rounding import NATURAL
from ethosu_stream.tflite_graph import TfliteGraph
from tests.helpers.tflite_oracle import tflm_oracle
from tests.helpers.vela_cli import vela_compile

pytest.importorskip("tflite_micro")

#: the operations Vela's stream runs for each, by command
VELA_OPERATIONS = {"SUM": {"NPU_OP_CONV": 1}, "REDUCE_MAX": {"NPU_OP_POOL": 1},
                   "REDUCE_MIN": {"NPU_OP_ELEMENTWISE": 2, "NPU_OP_POOL": 1}}
CODES = {"REDUCE_MAX": tb.BO.REDUCE_MAX, "REDUCE_MIN": tb.BO.REDUCE_MIN, "SUM": tb.BO.SUM}


def _over_depth(name: str, shape, in_q, out_q) -> bytes:
    """One int8 ``name`` over the depth of ``shape``, kept as one channel (``out_q`` None:
    the input's quantization, as REDUCE_MAX and REDUCE_MIN require)."""
    out_q = in_q if out_q is None else out_q
    x = tb.T(list(shape), "int8", scale=in_q[0], zp=in_q[1])
    y = tb.T(list(shape[:3]) + [1], "int8", scale=out_q[0], zp=out_q[1])
    axis = tb.T([1], "int32", data=np.asarray([3], np.int32))
    otype, ofn = _opts("ReducerOptions", KeepDims=True)
    return tb.serialize([x, y, axis], [(CODES[name], otype, ofn, [0, 2], [1])], [0], [1])


def _vela_against_tflite_micro(name: str, shape, in_q, out_q, seed: int = 0):
    """Vela's file of the reduction over the depth, wholly on the NPU, run on the functional
    model on uniform and tied inputs: (its outputs, TFLite Micro's on the source, the
    operations its stream ran by command, the rounding modes of its operations)."""
    model = _over_depth(name, shape, in_q, out_q)
    vela = vela_compile(model)
    graph = TfliteGraph(vela, "ethos-u55-128")
    assert graph.cpu_operators == []
    rs = np.random.RandomState(seed)
    got, want, modes = [], [], set()

    def trace(cmd, state, memory):
        if cmd.name != "NPU_OP_DMA_START":
            modes.add(rounding_mode(state))

    stats = None
    for x in (rs.randint(-128, 128, shape).astype(np.int8),
              np.repeat(rs.randint(-128, 128, shape[:3] + (1,)), shape[3], 3).astype(np.int8)):
        (w,) = tflm_oracle(model, [x])
        (g,), stats = graph.run([x], trace)
        got.append(g.reshape(w.shape))
        want.append(w)
    ops = {k: v for k, v in stats.commands.items()
           if k in ("NPU_OP_CONV", "NPU_OP_POOL", "NPU_OP_ELEMENTWISE")}
    return np.stack(got), np.stack(want), ops, modes


@pytest.mark.parametrize("name", ["REDUCE_MAX",
                                  pytest.param("REDUCE_MIN", marks=pytest.mark.slow)])
def test_velas_reduce_max_and_min_over_the_depth_equal_tflite_micro(name):
    got, want, ops, _ = _vela_against_tflite_micro(name, (1, 4, 5, 11), (0.05, 3), None)
    assert np.array_equal(got, want)
    assert ops == VELA_OPERATIONS[name]


def test_velas_sum_over_the_depth_rounds_once_where_tflite_micro_rounds_twice():
    """Vela's convolution rounds NATURAL (one rounding, ties up) where TFLite Micro's SUM
    rounds twice (``MultiplyByQuantizedMultiplier``): its file is off by one code on a few
    outputs; ours rounds TFL and is exact (tests/tvm_ethos/test_tflite_reduce_depth.py)."""
    got, want, ops, modes = _vela_against_tflite_micro("SUM", (1, 4, 5, 11), (0.05, 3),
                                                       (0.4, -9))
    assert ops == VELA_OPERATIONS["SUM"] and modes == {NATURAL}
    diff = np.abs(got.astype(np.int64) - want)
    assert diff.max() == 1 and np.count_nonzero(diff) < diff.size // 10, diff.ravel()


@pytest.mark.slow
@settings(max_examples=10, deadline=None)
@given(shape=st.tuples(st.just(1), st.integers(1, 8), st.integers(1, 8), st.integers(2, 64)),
       name=st.sampled_from(sorted(VELA_OPERATIONS)),
       in_q=st.tuples(st.floats(0.002, 0.5), st.integers(-128, 127)),
       out_q=st.tuples(st.floats(0.01, 8.0), st.integers(-128, 127)))
def test_velas_reductions_over_the_depth_across_shapes(shape, name, in_q, out_q):
    """REDUCE_MAX / REDUCE_MIN equal TFLite Micro's; SUM within one code of it."""
    got, want, _, _ = _vela_against_tflite_micro(name, shape, in_q,
                                                 out_q if name == "SUM" else None)
    if name == "SUM":
        assert np.abs(got.astype(np.int64) - want).max() <= 1
    else:
        assert np.array_equal(got, want)
