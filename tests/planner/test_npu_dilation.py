"""The kernel the Ethos-U runs for a dilation past 2 (``planner.npu_dilation``) and the cost
model's operations for an average pool whose width stride is past 3 (TVM-free): what the
stream generator emits, so that the planner prices what runs."""
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.vela_superset_probes import BO, conv, pool
from planner.npu_dilation import NPU_DILATIONS, npu_kernel
from planner.perf.ethos_u import NPU_MAX_STRIDE, lower_part
from planner.tflite import load_tflite


@given(kernel=st.tuples(st.integers(1, 9), st.integers(1, 9)),
       dilation=st.tuples(st.integers(1, 12), st.integers(1, 12)))
def test_the_npu_kernel_reads_the_source_taps_and_only_zeros_between(kernel, dilation):
    """Source tap i of an axis sits at i * spread of the NPU's kernel, which the NPU dilates
    by 1 or 2: the taps land on the same input rows and columns, the dilated span is the
    source's, and a dilation of 1 or 2 is left to the NPU."""
    run = npu_kernel(kernel, dilation)
    for k, d, nk, nd, s in zip(kernel, dilation, run.kernel, run.dilation, run.spread):
        assert nd in NPU_DILATIONS and nd * s == d
        assert (nk - 1) * nd + 1 == (k - 1) * d + 1
        assert [i * s * nd for i in range(k)] == [i * d for i in range(k)]
        assert (d in NPU_DILATIONS) == (s == 1 and nk == k)


def test_a_3x2_dilation_runs_as_vela_s_7x3_kernel_dilated_by_1x2():
    assert npu_kernel((3, 3), (3, 2)) == ((7, 3), (1, 2), (3, 1))


def _only_part(model: bytes):
    (part,) = load_tflite(model).parts
    return part


@settings(max_examples=10, deadline=None)
@given(h=st.integers(1, 9), ow=st.integers(1, 9), kw=st.integers(1, 6), sh=st.integers(1, 3),
       sw=st.integers(NPU_MAX_STRIDE + 1, 7))
def test_a_wide_stride_pool_costs_one_pool_per_output_column(h, ow, kw, sh, sw):
    w = (ow - 1) * sw + kw
    part = _only_part(pool(BO.AVERAGE_POOL_2D, (1, h, w, 8), (1, kw), (sh, sw)))
    assert part.output.shape[2] == ow
    ops = lower_part(part, part.output.shape)
    assert len(ops) == ow
    for op in ops:
        assert op.ofm[2] == 1 and op.ifm[2] == kw and op.stride[1] == 1, op


def test_a_dilated_convolution_costs_the_spread_kernel():
    part = _only_part(conv((1, 12, 12, 4), dilation=(3, 2), padding="VALID"))
    (op,) = lower_part(part, part.output.shape)
    assert (op.kernel, op.dilation) == ((7, 3), (1, 2))
