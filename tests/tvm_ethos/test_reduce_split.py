"""Reductions and pools too large for one NPU operation, as Vela 5.2 takes them (issue 28):
SUM, MEAN, REDUCE_MAX and REDUCE_MIN over more rows or elements than one kernel takes are
pools of bands of rows and their combination (``ops_reduce_split``; over the depth too:
SUM's channel sums and a REDUCE_SUM, REDUCE_MAX / REDUCE_MIN's last pool, ``ops_reduce_depth``,
``ethos_arch.pool_bands``); a pool of one output
row (or column) takes any stride along it (``npu_ops.pool_strides``). Each equals TFLite
Micro (LiteRT's reference kernels for uint8 and for int16 REDUCE_MAX, which TFLite Micro
lacks) on ``ethos-u`` and on the stream of ``ethos-u,llvm``, on random inputs and on the
extremes (every input code its type's least or greatest, or alternating)."""
from types import SimpleNamespace

import numpy as np
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from benchmarks.vela_superset_probes import BO, pool
from ethos_arch.ops import Op
from tests.helpers.tflite_oracle import inputs_for, oracle, tflm_oracle
from tvm_ethos.backends.ethos_u import ops_reduce_split

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

U55 = "ethos-u55-128"
_CODES = {"SUM": tb.BO.SUM, "MEAN": tb.BO.MEAN, "REDUCE_MAX": tb.BO.REDUCE_MAX,
          "REDUCE_MIN": tb.BO.REDUCE_MIN}


def reduce_model(kind, shape, axes, keep=True, dtype="int8", in_q=(0.05, 3),
                 out_q=(0.04, -2)) -> bytes:
    """One ``kind`` reduction of a ``dtype`` tensor of ``shape`` over ``axes``;
    REDUCE_MAX / REDUCE_MIN quantized as their input (TFLite's kernels require it)."""
    if kind in ("REDUCE_MAX", "REDUCE_MIN"):
        out_q = in_q
    rank = len(shape)
    reduced = {a % rank for a in axes}
    out = [1 if i in reduced else d for i, d in enumerate(shape)] if keep else \
        [d for i, d in enumerate(shape) if i not in reduced]
    x = tb.T(list(shape), dtype, scale=in_q[0], zp=in_q[1])
    axis = tb.T([len(axes)], "int32", data=np.array(axes, np.int32))
    y = tb.T(out, dtype, scale=out_q[0], zp=out_q[1])

    def opts(b):
        tb.tflite.ReducerOptionsStart(b)
        tb.tflite.ReducerOptionsAddKeepDims(b, keep)
        return tb.tflite.ReducerOptionsEnd(b)

    return tb.build([x, axis, y], [0], [2], _CODES[kind], tb.BOPT.ReducerOptions, opts,
                    op_inputs=[0, 1])


def _inputs(cm, seed: int) -> list[np.ndarray]:
    """Two random inputs, then the extremes: every code the least, the greatest, and the
    two alternating."""
    (spec,) = cm.inputs
    info = np.iinfo(np.dtype(spec.dtype))
    rs = np.random.RandomState(seed)
    alternating = np.resize(np.array([info.min, info.max]), int(np.prod(spec.shape)))
    return [inputs_for(cm.inputs, rs)[0] for _ in range(2)] + [
        np.full(spec.shape, v, spec.dtype) for v in (info.min, info.max)] + [
        alternating.reshape(spec.shape).astype(spec.dtype)]


def _exact(cm, model, seed, reference) -> None:
    for x in _inputs(cm, seed):
        want = reference(model, [x])[0]
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want.shape), want)


def _reference(model: bytes, dtype: str, kind: str):
    """TFLite Micro, or LiteRT's reference kernels where TFLite Micro has none (uint8; an
    int16 REDUCE_MAX / REDUCE_MIN)."""
    if dtype == "uint8" or dtype == "int16" and kind in ("REDUCE_MAX", "REDUCE_MIN"):
        return oracle
    return tflm_oracle


def check_both_targets(model, seed=0, reference=tflm_oracle):
    """Every operator an ``ethos-u`` one on the tflite-micro host; on ``ethos-u,llvm`` the
    stream is generated, realizes its plan and touches the planned peak; both exact."""
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={U55}", cache_dir=False)
    assert [p.placed_on for p in cm.placement] == ["ethos-u"], \
        [(p.placed_on, p.why) for p in cm.placement]
    _exact(cm, model, seed, reference)
    cm = tvm_ethos.compile(model, f"ethos-u -accelerator_config={U55},llvm",
                           npu_runtime="stream", cache_dir=False)
    (entry,) = cm.plan_report["streams"].values()
    assert entry["generated"] and entry["realizes_plan"], entry
    assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"], entry
    _exact(cm, model, seed, reference)
    assert any(t.startswith("stream ") for t in cm.last_run_stats.trace)
    return entry


# --- the bands: a rule over every reduction's window (no TVM)
def _q(kind, shape, axes, dtype="int8"):
    return SimpleNamespace(kind=kind, in_shapes=[shape], attrs={"axis": axes},
                           in_dtypes=[dtype], tflite_name=kind.value)


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from([Op.REDUCE_SUM, Op.MEAN, Op.REDUCE_MAX, Op.REDUCE_MIN]),
       h=st.integers(1, 5000), w=st.integers(1, 3000), c=st.integers(1, 16))
def test_bands_cover_the_rows_once_each_within_one_pool(kind, h, w, c):
    b = ops_reduce_split.bands(_q(kind, (1, h, w, c), (1, 2)))
    one_kernel = (h <= 64 and h * w <= 4096) if kind in (Op.REDUCE_SUM, Op.MEAN) else \
        (h <= 256 and h * w <= 65536)
    if kind == Op.MEAN and h > 64 and h * w <= 4096:
        one_kernel = True   # read as one row of h * w (ethos_arch.mean_window)
    assert (b is None) == one_kernel
    if b is None:
        return
    rows = [b.band(i) for i in range(b.count)]
    assert [first for first, _ in rows] == list(np.cumsum([0] + [n for _, n in rows])[:-1])
    assert sum(n for _, n in rows) == h
    assert all(1 <= n <= 256 and n * w <= 65536 for _, n in rows)
    assert b.out_view == (1, 1, c)


# --- one of each form: one pool, several bands, a kept axis, each reduction and type
FORMS = {
    "sum-600x4-three-bands": ("SUM", (1, 600, 4, 8), (1, 2), "int8"),
    "mean-height-100-width-kept": ("MEAN", (1, 100, 4, 8), (1,), "int8"),
    "max-300x4": ("REDUCE_MAX", (1, 300, 4, 8), (1, 2), "int8"),
    "min-600x3": ("REDUCE_MIN", (1, 600, 3, 5), (1, 2), "int8"),
    "sum-over-depth-600-rows-width-kept": ("SUM", (1, 600, 3, 5), (1, 3), "int8"),
    "max-over-depth-257-rows-width-kept": ("REDUCE_MAX", (1, 257, 3, 2), (1, 3), "int8"),
}
#: more of them, heavier
MORE_FORMS = {
    "sum-100x8-one-pool": ("SUM", (1, 100, 8, 8), (1, 2), "int8"),
    "mean-70x70-one-pool": ("MEAN", (1, 70, 70, 4), (1, 2), "int8"),
    "mean-rank3-300-rows-uint8": ("MEAN", (300, 5, 3), (0,), "uint8"),
    "mean-int16-600x30": ("MEAN", (1, 600, 30, 2), (1, 2), "int16"),
    "max-int16-300x2": ("REDUCE_MAX", (1, 300, 2, 3), (1, 2), "int16"),
    "max-600x1-depth-300": ("REDUCE_MAX", (1, 600, 1, 300), (1, 2), "int8"),
    "sum-whole-100x4x4-one-pool": ("SUM", (1, 100, 4, 4), (1, 2, 3), "int8"),
    "sum-whole-600x3x5": ("SUM", (1, 600, 3, 5), (1, 2, 3), "int8"),
    "sum-over-depth-width-5000-rows-kept": ("SUM", (1, 3, 5000, 2), (2, 3), "int8"),
    "min-whole-300x300x2": ("REDUCE_MIN", (1, 300, 300, 2), (1, 2, 3), "int8"),
    "max-whole-600x200x2": ("REDUCE_MAX", (1, 600, 200, 2), (1, 2, 3), "int8"),
}


@pytest.mark.parametrize("case", sorted(FORMS))
def test_one_form_of_each_split_equals_tflite_micro(case):
    _form_is_exact(*FORMS[case])


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(MORE_FORMS))
def test_more_forms_of_the_splits_equal_tflite_micro(case):
    _form_is_exact(*MORE_FORMS[case])


def _form_is_exact(kind, shape, axes, dtype):
    q = {"int16": ((2.0**-12, 0), (2.0**-11, 0)), "uint8": ((0.05, 130), (0.04, 120))}.get(
        dtype, ((0.05, 3), (2.0 if kind == "SUM" else 0.04, -2)))
    model = reduce_model(kind, shape, axes, dtype=dtype, in_q=q[0], out_q=q[1])
    entry = check_both_targets(model, reference=_reference(model, dtype, kind))
    # pools, not the one-kernel forms (a depthwise convolution, a convolution over the depth)
    assert not {"NPU_OP_DEPTHWISE", "NPU_OP_CONV"} & set(entry["commands"]), entry["commands"]


@st.composite
def big_reductions(draw):
    """A reduction past one kernel: more than 64 (SUM, MEAN) or 256 (REDUCE_MAX, MIN) rows,
    over height and width (MEAN: or the height alone; SUM, REDUCE_MAX, REDUCE_MIN: or with
    the depth, the width kept or not), any quantization (REDUCE_MAX / REDUCE_MIN quantized as
    their input)."""
    kind = draw(st.sampled_from(sorted(_CODES)))
    tall = 257 if kind in ("REDUCE_MAX", "REDUCE_MIN") else 65
    h = draw(st.integers(tall, 700))
    w = draw(st.integers(1, 12))
    c = draw(st.integers(1, 6))
    axes = draw(st.sampled_from({"MEAN": [(1,), (1, 2)], "SUM": [(1, 2), (1, 2, 3), (1, 3)]}.get(
        kind, [(1, 2), (1, 2, 3), (1, 3)])))
    dtype = draw(st.sampled_from(["int8", "uint8"])) if kind == "MEAN" else "int8"
    info = np.iinfo(dtype)
    in_q = (draw(st.floats(0.002, 0.5)), draw(st.integers(int(info.min), int(info.max))))
    out_q = (draw(st.floats(0.002 if kind != "SUM" else 0.5, 0.5 if kind != "SUM" else 50)),
             draw(st.integers(int(info.min), int(info.max))))
    return kind, (1, h, w, c), axes, draw(st.booleans()), dtype, in_q, out_q


@pytest.mark.slow
@settings(max_examples=25, deadline=None)
@given(case=big_reductions(), seed=st.integers(0, 2**16))
def test_reductions_past_one_kernel_equal_tflite_micro(case, seed):
    kind, shape, axes, keep, dtype, in_q, out_q = case
    model = reduce_model(kind, shape, axes, keep, dtype, in_q, out_q)
    check_both_targets(model, seed, _reference(model, dtype, kind))


@pytest.mark.parametrize("shape,kind,why", [
    ((1, 200, 200, 1), "MEAN", "an int16 MEAN of 40000 elements, whose sum may leave 32 bits"),
    ((1, 300, 65535, 1), "REDUCE_MAX", "300 bands of 1 rows; the max pool over their maxima "
                                       "takes at most 256"),
], ids=["int16-mean-past-32-bits", "max-of-more-than-256-bands"])
def test_a_reduction_the_pools_cannot_take_is_refused_by_name(shape, kind, why):
    dtype = "int16" if kind == "MEAN" else "int8"
    q = ((2.0**-12, 0), (2.0**-11, 0)) if dtype == "int16" else ((0.05, 3), (0.05, 3))
    model = reduce_model(kind, shape, (1, 2), dtype=dtype, in_q=q[0], out_q=q[1])
    report = str(tvm_ethos.partition_report(tvm_ethos.load_model(model), "ethos-u,llvm"))
    assert why in report, report


# --- a pool of one output row or column: any stride along it
@pytest.mark.parametrize("code,shape,size,stride", [
    (BO.AVERAGE_POOL_2D, (1, 6, 8, 8), (4, 2), (5, 1)),
    (BO.AVERAGE_POOL_2D, (1, 7, 9, 8), (3, 3), (6, 4)),
    (BO.MAX_POOL_2D, (1, 6, 8, 8), (4, 2), (5, 2)),
    (BO.MAX_POOL_2D, (1, 7, 8, 8), (3, 3), (2, 6)),
], ids=["avg-one-row-stride-5", "avg-one-row-stride-6x4", "max-one-row-stride-5",
        "max-one-column-stride-6"])
def test_a_pool_of_one_output_row_takes_any_stride_along_it(code, shape, size, stride):
    check_both_targets(pool(code, shape, size, stride))
