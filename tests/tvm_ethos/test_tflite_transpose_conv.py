"""TFLite's int8 TRANSPOSE_CONV through the importer (``conv2d_transpose`` of dequantized
codes): on the Ethos-U as Vela lowers it (``ops_transpose_conv``: a stride-1 convolution over
the zero-upscaled input, whole or per planner stripe) and on the llvm host
(``te_ops.lower_transpose_conv2d``), equal to TFLite Micro's over shapes, strides 1 and 2,
SAME and VALID, kernel sizes, per-tensor and per-channel weights, a bias or none and a fused
activation."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from tvm import relax

import tvm_ethos
from ethos_arch.ops import Op
from tests.helpers.tflite_oracle import inputs_for, tflm_oracle
from tvm_ethos.backends.ethos_u.ops_transpose_conv import transpose_conv_window
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


@st.composite
def _npu_cases(draw):
    """What the NPU takes: strides 1x1 and 2x2, a kernel at least the stride."""
    case = draw(_cases())
    s = draw(st.sampled_from([1, 2]))
    kernel = (draw(st.integers(s, 4)), draw(st.integers(s, 4)))
    return dict(case, stride=(s, s), kernel=kernel)


@settings(max_examples=10, deadline=None)
@given(case=_npu_cases())
def test_the_npu_runs_transpose_conv_exactly(case):
    """The Ethos-U stream (run by the functional model) equals TFLite Micro."""
    cm = _check(tb.transpose_conv(**case), "ethos-u")
    (placed,) = cm.placement
    assert placed.placed_on == "ethos-u", placed.why


def test_the_ethos_u_emulator_target_runs_it_on_the_npu_exactly():
    data = tb.transpose_conv((1, 3, 4, 5), 4, (3, 3), (2, 2), "SAME", per_channel=True)
    cm = _check(data, "ethos-u,llvm", seed=1)
    assert cm.partition_summary == {"ethos-u": 1}


def test_a_mixed_stride_stays_a_tflite_operator_naming_its_strides():
    data = tb.transpose_conv((1, 3, 4, 2), 3, (2, 2), (1, 2), "SAME")
    (placed,) = _check(data, "ethos-u").placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert "transpose conv strides (1, 2); the NPU takes 1x1 or 2x2" in report, report


@settings(max_examples=6, deadline=None)
@given(h=st.integers(4, 16), w=st.integers(3, 12), k=st.integers(2, 4),
       budget=st.sampled_from(["smallest", None]), seed=st.integers(0, 2 ** 16))
def test_an_upsampling_between_convolutions_is_planned_striped_and_exact(h, w, k, budget,
                                                                         seed):
    """CONV_2D, TRANSPOSE_CONV (stride 2), CONV_2D in one ethos-u operator, the plan's
    stripes of the transpose conv emitted as such (``transpose_conv_window``)."""
    data = tb.conv_transpose_conv(np.random.RandomState(seed), in_shape=(1, h, w, 4),
                                  kernel=(k, k))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, budget=budget)
    assert {p.placed_on for p in cm.placement} == {"ethos-u"}, \
        [(p.placed_on, p.why) for p in cm.placement]
    (entry,) = cm.plan_report["streams"].values()
    assert entry["schedule"] == "plan" and entry["realizes_plan"], entry
    rs = np.random.RandomState(seed)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
        assert np.array_equal(got.reshape(want.shape), want)
    (row,) = [r for r in cm.plan_report["layers"] if "transpose_conv2d" in r["part"]]
    if budget == "smallest":
        assert row["stripes"] > 1, row


@settings(max_examples=300, deadline=None)
@given(n=st.integers(1, 12), k=st.integers(1, 5), s=st.sampled_from([1, 2]),
       crop=st.tuples(st.integers(0, 4), st.integers(0, 4)), data=st.data())
def test_a_stripes_window_reads_exactly_the_input_rows_its_taps_reach(n, k, s, crop, data):
    """Brute force over one axis: the input rows a stripe of output rows reads through the
    NPU's convolution (stride 1 over the input upscaled by ``s``, kernel rotated) are every
    row one of its taps reaches and no other, and the NPU's extent under the stripe's pads
    (the window span less both pads) holds them, upscaled."""
    pt, pb = crop
    out = (n - 1) * s + k - pt - pb
    if k < s or out < 1 or min(k - 1 - pt, k - 1 - pb - (s - 1)) < 0:
        return   # refused by the check (a kernel shorter than the stride and cropping)
    o0 = data.draw(st.integers(0, out - 1))
    o1 = data.draw(st.integers(o0 + 1, out))
    q = SimpleNamespace(weights=np.zeros((k, 1, 1, 1)),
                        attrs={"strides": (s, s), "padding": (pt, 0, pb, 0)})
    (r0, r1), _, (top, _, bottom, _) = transpose_conv_window(q, (o0, o1), (0, 1), (n, 1))
    # TFLite's scatter: input row i, tap t lands on output row i * s - pt + t
    reached = {i for i in range(n) for t in range(k) if o0 <= i * s - pt + t < o1}
    assert (r0, r1) == (min(reached), max(reached) + 1)
    assert top >= 0 and bottom >= 0
    extent = (o1 - o0) + k - 1 - top - bottom   # the upscaled rows the NPU reads
    assert -(-extent // s) == r1 - r0 and extent >= (r1 - r0 - 1) * s + 1


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
