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
from hypothesis import example, given, settings
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
    kernel = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
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
    """What Vela takes: strides 1x1 and 2x2 (any kernel, below the stride too), a width
    stride of 2 over one row by a one-row kernel and a height stride of 2 over one column by
    a one-column kernel."""
    case = draw(_cases())
    n, h, w, c = case["shape"]
    (kh, kw), form = case["kernel"], draw(st.sampled_from(["square", "row", "column"]))
    if form == "row":
        return dict(case, shape=(n, 1, w, c), stride=(1, 2), kernel=(1, kw))
    if form == "column":
        return dict(case, shape=(n, h, 1, c), stride=(2, 1), kernel=(kh, 1))
    s = draw(st.sampled_from([1, 2]))
    return dict(case, stride=(s, s))


@settings(max_examples=14, deadline=None)
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


@pytest.mark.parametrize("shape, kernel, stride", [
    ((1, 3, 4, 2), (2, 2), (1, 2)),    # width stride 2 over several rows
    ((1, 1, 4, 2), (2, 1), (1, 2)),    # over one row, by a kernel of two rows
    ((1, 4, 2, 2), (1, 1), (2, 1)),    # height stride 2 over two columns
    ((1, 4, 1, 2), (1, 2), (2, 1)),    # over one column, by a kernel of two columns
], ids=["rows", "kernel_rows", "columns", "kernel_columns"])
def test_a_mixed_stride_vela_refuses_stays_a_tflite_operator_naming_its_strides(shape, kernel,
                                                                               stride):
    data = tb.transpose_conv(shape, 3, kernel, stride, "SAME")
    (placed,) = _check(data, "ethos-u").placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(data), "ethos-u,llvm"))
    assert (f"transpose conv strides {stride} (height, width) over a {shape[1]}x{shape[2]} "
            f"input by a {kernel[0]}x{kernel[1]} kernel; the NPU takes") in report, report


@pytest.mark.parametrize("kernel, stride", [((1, 1), (2, 2)), ((1, 2), (2, 2)),
                                            ((1, 1), (1, 2)), ((1, 1), (2, 1))])
def test_a_kernel_below_the_stride_gets_tflites_output_shape(kernel, stride):
    """SAME with a kernel below the stride: TFLite's output is input x stride (its last row
    or column the bias alone), one more than TVM's converter gives; the import gives the
    declared shape (``output_padding``) and the NPU runs it."""
    shape = (1, 1 if stride == (1, 2) else 3, 1 if stride == (2, 1) else 4, 2)
    data = tb.transpose_conv(shape, 3, kernel, stride, "SAME", seed=2)
    (placed,) = _check(data, "ethos-u", seed=2).placement
    assert placed.placed_on == "ethos-u", placed.why
    mod, _ = partition(import_tflite(data, "tc", None), "llvm")
    (q,) = [qop_from_composite(f) for f in _composites(mod)]
    assert q.out_shape == (1, shape[1] * stride[0], shape[2] * stride[1], 3)
    assert q.attrs["output_padding"] == tuple(s - k for s, k in zip(stride, kernel))


def test_an_output_the_upscale_cannot_give_stays_a_tflite_operator_naming_it():
    """VALID by a kernel below the stride, its output (in - 1) * stride + kernel (not what
    TFLite's converter writes, but a file TFLite runs): Vela refuses that shape, and so does
    the NPU check, naming both shapes the upscale gives."""
    short = tb.transpose_conv((1, 3, 4, 2), 3, (1, 1), (2, 2), "VALID", out_hw=(5, 7))
    (placed,) = _check(short, "ethos-u").placement
    assert placed.placed_on == "tflite-micro"
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(short), "ethos-u,llvm"))
    assert "transpose conv of 3x4 to 5x7 by strides (2, 2); the NPU's upscale gives 6x8" in \
        report, report


@settings(max_examples=6, deadline=None)
@example(h=5, w=4, k=1, budget="smallest", seed=3)   # stripes of inserted zeros alone
@given(h=st.integers(4, 16), w=st.integers(3, 12), k=st.integers(1, 4),
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
    # TFLite's output: the taps' reach, or up to the stride more (a kernel below the stride:
    # SAME's input x stride)
    out = (n - 1) * s + k - pt - pb + data.draw(st.integers(0, max(s - k, 0)))
    if out < 1 or k - 1 - pt < 0:
        return   # refused by the check (a kernel shorter than the cropping)
    o0 = data.draw(st.integers(0, out - 1))
    o1 = data.draw(st.integers(o0 + 1, out))
    q = SimpleNamespace(weights=np.zeros((k, 1, 1, 1)),
                        attrs={"strides": (s, s), "padding": (pt, 0, pb, 0)})
    (r0, r1), _, (top, _, bottom, _) = transpose_conv_window(q, (o0, o1), (0, 1), (n, 1))
    # TFLite's scatter: input row i, tap t lands on output row i * s - pt + t; the NPU's
    # kernel has zero taps after TFLite's up to the stride, which reach rows too
    kn = max(k, s)
    reached = {i for i in range(n) for t in range(kn) if o0 <= i * s - pt + t < o1}
    assert (r0, r1) == (min(reached), max(reached) + 1)
    assert top >= 0 and bottom >= 0
    extent = (o1 - o0) + kn - 1 - top - bottom   # the upscaled rows the NPU reads
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
