"""The GPU schedule of the OpenCL kernels (tvm_ethos/host/opencl/gpu_schedule.py): bit-exact with
TFLite's reference kernels on PoCL for any convolution geometry, and actually register-tiled."""

import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from tvm_ethos.host.opencl import gpu_schedule
from tvm_ethos.host.opencl.gpu_schedule import GpuTiling

pytest.importorskip("pyopencl")


def _opencl(model):
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="opencl")
    assert [sg.device for sg in cm.program.subgraphs] == ["opencl"]
    return cm


@settings(max_examples=8, deadline=None)
@given(
    cin=st.integers(2, 24),  # 1: the builder's depthwise is per-tensor, which the importer refuses
    cout=st.integers(1, 24),
    hw=st.tuples(st.integers(3, 9), st.integers(3, 9)),
    kernel=st.sampled_from([(1, 1), (3, 3), (5, 3)]),
    stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]),
    padding=st.sampled_from(["SAME", "VALID"]),
    depthwise=st.booleans(),
    act=st.sampled_from([None, "relu6"]),
    seed=st.integers(0, 1000),
)
def test_conv_any_geometry_bit_exact_on_opencl(
    cin, cout, hw, kernel, stride, padding, depthwise, act, seed
):
    """Widths and channel counts that the tile does not divide fall back to narrower tiles."""
    if padding == "VALID" and (hw[0] < kernel[0] or hw[1] < kernel[1]):
        hw = (max(hw[0], kernel[0]), max(hw[1], kernel[1]))
    rs = np.random.RandomState(seed)
    model = tb.conv2d(
        rs,
        in_shape=(1, *hw, cin),
        cout=cout,
        kernel=kernel,
        stride=stride,
        padding=padding,
        act=act,
        depthwise=depthwise,
    )
    assert_bit_exact(_opencl(model), model, n_inputs=2, seed=seed)


@pytest.mark.parametrize(
    "make",
    [
        lambda rs: tb.pool(rs, "avg", in_shape=(1, 9, 9, 8), padding="SAME"),
        lambda rs: tb.pool(rs, "max", in_shape=(1, 9, 9, 12)),
        lambda rs: tb.fully_connected(rs, k=40, n=12, act="relu"),
        lambda rs: tb.binary(rs, "add", a_shape=(1, 5, 5, 8), b_shape=(1, 5, 5, 8)),
        lambda rs: tb.mean(rs, in_shape=(1, 6, 6, 8)),
        lambda rs: tb.softmax(rs, n=37),
    ],
    ids=["avgpool", "maxpool", "fc", "add", "mean", "softmax"],
)
def test_other_kernels_bit_exact_on_opencl(make):
    model = make(np.random.RandomState(5))
    assert_bit_exact(_opencl(model), model, n_inputs=2)


def test_conv_is_register_tiled(monkeypatch):
    """Each work-item computes a tile of columns x channels: the launch has tile-times fewer
    work-items than outputs, work-groups of ``threads``, and the accumulator is a local array
    of one tile (not the int32 feature map)."""
    seen = []
    real = gpu_schedule.schedule_for_gpu

    def spy(prim, *a, **k):
        out = real(prim, *a, **k)
        seen.append(out)
        return out

    monkeypatch.setattr(gpu_schedule, "schedule_for_gpu", spy)
    model = tb.conv2d(np.random.RandomState(4), in_shape=(1, 8, 8, 16), cout=32)
    cm = _opencl(model)
    assert len(seen) == 1
    t = gpu_schedule.DEFAULT_TILING
    (func,) = cm.program.opencl.functions.values()
    (launch,) = func.launches
    assert launch.local_size == (t.threads,)
    assert launch.global_size == (8 * 8 * 32 // (t.columns * t.lanes),)
    assert f"acc_local_ptr[{t.columns * t.lanes}]" in cm.program.opencl.source
    assert not func.workspaces
    assert_bit_exact(cm, model, n_inputs=2)


@pytest.mark.parametrize("tiling", [GpuTiling(32, 1, 1), GpuTiling(128, 4, 8), GpuTiling(64, 2, 4)])
def test_tilings_agree_with_the_unscheduled_kernel(tiling):
    """Any tiling computes what TVM's plain lowering of the same PrimFunc computes (an oracle
    with no schedule at all: built for llvm), on a geometry none of them divides evenly."""
    import tvm

    from tvm_ethos.host.opencl.gpu_tir_pipeline import GPU_PIPELINE_NAME
    from tvm_ethos.host.opencl.opencl_extraction import extract_opencl
    from tvm_ethos.pipeline import network_build
    from tvm_ethos.runtime.opencl_device import OpenCLDevice

    model = tb.conv2d(np.random.RandomState(9), in_shape=(1, 7, 10, 12), cout=20, stride=(1, 1))
    captured = {}
    real = network_build.opencl_kernels

    def grab(fused, program, *rest):
        captured["fused"], captured["program"] = fused, program
        return real(fused, program, *rest)

    network_build.opencl_kernels = grab
    try:
        _opencl(model)
    finally:
        network_build.opencl_kernels = real
    program = captured["program"]
    (step,) = [s for sg in program.subgraphs for s in sg.steps]
    prim = captured["fused"][step.func]
    rs = np.random.RandomState(1)
    args = []
    for kind, ref in step.args:
        if kind == "c":
            args.append(np.ascontiguousarray(program.constants[ref]))
        else:
            t = program.tensors[ref]
            args.append(rs.randint(-128, 128, size=t.shape).astype(t.dtype))
    out_t = program.tensors[step.outs[0]]
    want = tvm.runtime.tensor(np.zeros(out_t.shape, out_t.dtype))
    tvm.compile(tvm.IRModule({"main": prim}), target="llvm")["main"](
        *[tvm.runtime.tensor(a) for a in args], want
    )
    spec = extract_opencl(
        tvm.IRModule(
            {
                step.func: gpu_schedule.schedule_for_gpu(prim, tiling).with_attr(
                    "global_symbol", step.func
                )
            }
        ),
        "opencl",
        tir_pipeline=GPU_PIPELINE_NAME,
    )
    got = np.zeros(out_t.shape, out_t.dtype)
    OpenCLDevice().build(spec)[step.func](*args, got)
    np.testing.assert_array_equal(got, want.numpy())


@pytest.mark.parametrize("bad", [dict(threads=48), dict(columns=0), dict(lanes=3)])
def test_tiling_must_be_powers_of_two(bad):
    with pytest.raises(ValueError, match="power of two"):
        GpuTiling(**bad)


@pytest.mark.parametrize(
    "options, launch",
    [
        ({"tiling": "128x1x1"}, (128, 1, 1)),
        ({}, (64, 2, 4)),
    ],
    ids=["keyword", "default"],
)
def test_tiling_option_reaches_the_kernels(options, launch):
    """The opencl target's ``tiling`` option sets the launch; the results stay bit-exact."""
    threads, columns, lanes = launch
    model = tb.conv2d(np.random.RandomState(6), in_shape=(1, 8, 8, 16), cout=16)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="opencl", **options)
    (func,) = cm.program.opencl.functions.values()
    (got,) = func.launches
    assert got.local_size == (threads,)
    assert got.global_size == (8 * 8 * 16 // (columns * lanes),)
    assert_bit_exact(cm, model, n_inputs=1)


def test_inline_tiling_option():
    model = tb.conv2d(np.random.RandomState(6), in_shape=(1, 8, 8, 16), cout=16)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="opencl -tiling=32x2x2")
    (func,) = cm.program.opencl.functions.values()
    assert func.launches[0].local_size == (32,)
    assert func.launches[0].global_size == (8 * 8 * 16 // 4,)


@pytest.mark.parametrize("bad", ["64x2", "64x3x4", "big", "0x1x1"])
def test_bad_tiling_option_is_one_clear_error(bad):
    model = tb.conv2d(np.random.RandomState(6), in_shape=(1, 4, 4, 8), cout=8)
    with pytest.raises(tvm_ethos.OptionError, match="tiling.*64x2x4"):
        tvm_ethos.compile(tvm_ethos.load_model(model), target="opencl", tiling=bad)
