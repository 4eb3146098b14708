"""TFLite's int8 TRANSPOSE_CONV through the importer (``conv2d_transpose`` of dequantized
codes): the exact host kernel (``te_ops.lower_transpose_conv2d``) equal to TFLite Micro's over
shapes, strides 1 and 2, SAME and VALID, kernel sizes, per-tensor and per-channel weights, a
bias or none and a fused activation."""
from __future__ import annotations

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from tvm import relax

import tvm_ethos
from ethos_arch.ops import Op
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle
from tvm_ethos.frontend.tflite_import import import_tflite
from tvm_ethos.partition import partition
from tvm_ethos.patterns import qop_from_composite

pytest.importorskip("tflite_micro")



def _check(data: bytes, target: str, seed: int = 0):
    """The compiled model's outputs on two random inputs, equal to TFLite Micro's."""
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want), (got.ravel()[:8], want.ravel()[:8])
    return cm


def _composites(mod):
    """The composite functions of a partitioned module, inside its backend functions."""
    found = []

    def visit(expr):
        if isinstance(expr, relax.Function) and expr.attrs is not None \
                and "Composite" in expr.attrs:
            found.append(expr)

    for _, func in mod.functions.items():
        if isinstance(func, relax.Function):
            relax.analysis.post_order_visit(func, visit)
    return found


@st.composite
def _cases(draw):
    h, w, c = draw(st.integers(1, 5)), draw(st.integers(1, 5)), draw(st.integers(1, 6))
    stride = draw(st.sampled_from([(1, 1), (2, 2), (1, 2), (2, 1)]))
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    # SAME with a kernel below the stride: TVM's importer gives a smaller output (left undone)
    low = stride if padding == "SAME" else (1, 1)
    kernel = (draw(st.integers(low[0], 4)), draw(st.integers(low[1], 4)))
    return dict(shape=(1, h, w, c), cout=draw(st.integers(1, 6)), kernel=kernel, stride=stride,
                padding=padding, seed=draw(st.integers(0, 1000)),
                per_channel=draw(st.booleans()), bias=draw(st.booleans()),
                bias_q=draw(st.booleans()),
                act=draw(st.sampled_from([None, "relu", "relu6"])),
                in_q=(draw(st.floats(0.005, 0.5)), draw(st.integers(-128, 127))),
                out_q=(draw(st.floats(0.01, 1.0)), draw(st.integers(-128, 127))))


@settings(max_examples=10, deadline=None)
@given(case=_cases())
def test_the_llvm_host_runs_transpose_conv_exactly(case):
    cm = _check(tb.transpose_conv(**case), "llvm")
    assert cm.partition_summary == {"llvm": 1}


def test_the_ethos_u_emulator_target_runs_it_on_the_host_exactly():
    data = tb.transpose_conv((1, 3, 4, 5), 4, (3, 3), (2, 2), "SAME", per_channel=True)
    cm = _check(data, "ethos-u,llvm", seed=1)
    assert set(cm.partition_summary) == {"llvm"}


def test_the_imported_operator_reads_as_a_transpose_conv_with_hwio_weights():
    """The pattern's reading: the kind, TFLite's SAME padding (the odd pad after) and the OHWI
    weights as HWIO, which the conv's requantization reads."""
    data = tb.transpose_conv((1, 2, 3, 2), 3, (3, 2), (2, 2), "SAME", bias=True)
    mod, _ = partition(import_tflite(data, "tc", None), "llvm")
    qops = [qop_from_composite(f) for f in _composites(mod)]
    assert [q.kind for q in qops] == [Op.TRANSPOSE_CONV2D]
    (q,) = qops
    assert q.weights.shape == (3, 2, 2, 3)
    assert q.attrs["strides"] == (2, 2) and q.attrs["padding"] == (0, 0, 1, 0)
    assert not q.problems
