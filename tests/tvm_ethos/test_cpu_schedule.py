"""The CPU schedule of the exact host kernels (tvm_ethos/host/cpu/cpu_schedule.py): bit-exact with
TFLite's reference kernels for any convolution geometry, and actually parallel and vectorized."""
import numpy as np
import pytest
import tflite_builder as tb
from conftest import assert_bit_exact
from hypothesis import example, given, settings
from hypothesis import strategies as st

import tvm_ethos
from tests.helpers.host_cpu import target_or_skip
from tvm_ethos.host.cpu import cpu_schedule


def _captured(monkeypatch, name="schedule_for_cpu"):
    """Record every (before, after) PrimFunc pair that ``cpu_schedule.<name>`` makes."""
    seen = []
    real = getattr(cpu_schedule, name)

    def spy(prim, *a, **k):
        out = real(prim, *a, **k)
        seen.append((prim, out))
        return out

    monkeypatch.setattr(cpu_schedule, name, spy)
    return seen


@settings(max_examples=12, deadline=None)
# a one-channel depthwise: its single weight scale names axis 3, which TVM's importer refused
@example(cin=1, cout=1, hw=(3, 3), kernel=(1, 1), stride=(1, 1), padding="SAME",
         depthwise=True, act=None, seed=0)
@given(
    cin=st.integers(1, 40),
    cout=st.integers(1, 40),
    hw=st.tuples(st.integers(3, 11), st.integers(3, 11)),
    kernel=st.sampled_from([(1, 1), (3, 3), (5, 3)]),
    stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]),
    padding=st.sampled_from(["SAME", "VALID"]),
    depthwise=st.booleans(),
    act=st.sampled_from([None, "relu", "relu6"]),
    seed=st.integers(0, 1000),
)
def test_conv_any_geometry_bit_exact(cin, cout, hw, kernel, stride, padding, depthwise, act, seed):
    if padding == "VALID" and (hw[0] < kernel[0] or hw[1] < kernel[1]):
        hw = (max(hw[0], kernel[0]), max(hw[1], kernel[1]))
    rs = np.random.RandomState(seed)
    model = tb.conv2d(rs, in_shape=(1, *hw, cin), cout=cout, kernel=kernel, stride=stride,
                      padding=padding, act=act, depthwise=depthwise)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    assert_bit_exact(cm, model, n_inputs=2, seed=seed)


@pytest.mark.parametrize("make", [
    lambda rs: tb.conv2d(rs, in_shape=(1, 6, 6, 16), cout=32),
    lambda rs: tb.conv2d(rs, in_shape=(1, 6, 6, 32), depthwise=True),
    lambda rs: tb.pool(rs, "avg", in_shape=(1, 6, 6, 16)),
    lambda rs: tb.binary(rs, "add", a_shape=(1, 4, 4, 16), b_shape=(1, 4, 4, 16)),
])
def test_kernels_are_parallel_and_vectorized(make, monkeypatch):
    monkeypatch.setattr(cpu_schedule, "PARALLEL_MIN_WORK", 0)  # small kernels run serial
    seen = _captured(monkeypatch)
    model = make(np.random.RandomState(3))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    assert seen, "the llvm build scheduled no host kernel"
    for before, after in seen:
        text_before, text_after = before.script(), after.script()
        assert "T.parallel" not in text_before and "T.vectorized" not in text_before
        assert "T.parallel" in text_after and "T.vectorized" in text_after
    assert_bit_exact(cm, model, n_inputs=2)


@pytest.mark.parametrize("make, parallel", [
    (lambda rs: tb.conv2d(rs, in_shape=(1, 25, 5, 64), depthwise=True), False),  # DS-CNN's
    (lambda rs: tb.binary(rs, "add", a_shape=(1, 8, 8, 16), b_shape=(1, 8, 8, 16)), False),
    (lambda rs: tb.conv2d(rs, in_shape=(1, 32, 32, 16), cout=32), True),  # 4.7M products
])
def test_small_kernels_run_on_the_calling_thread(make, parallel, monkeypatch):
    """A kernel with less work than ``PARALLEL_MIN_WORK`` has no parallel loop (the thread
    pool's start and join cost more than it saves); a large one keeps its rows parallel."""
    seen = _captured(monkeypatch)
    model = make(np.random.RandomState(3))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert ("T.parallel" in after.script()) == parallel
    assert "T.vectorized" in after.script()
    assert_bit_exact(cm, model, n_inputs=2)


def test_accumulator_is_one_register_tile(monkeypatch):
    """The conv accumulator lives inside the parallel row loop, one tile of output columns x
    channel vector in the local scope (after the TIR pipeline's buffer compaction), not as the
    whole int32 feature map."""
    from tvm_ethos.host.cpu.cpu_schedule import COLUMN_TILE, VECTOR_LANES

    _int32_kernels(monkeypatch)  # VNNI's tile: test_vnni_accumulator_tile; AVX2's: x86_avx2
    seen = _captured(monkeypatch)
    model = tb.conv2d(np.random.RandomState(4), in_shape=(1, 8, 8, 16), cout=32)
    tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert _local_accumulator(after) == f"(1, 1, {COLUMN_TILE}, {VECTOR_LANES})"


def _local_accumulator(prim) -> str:
    """The shape of the conv accumulator's allocation after the TIR pipeline's compaction."""
    import re

    import tvm
    from tvm import s_tir

    mod = tvm.IRModule({"main": prim})
    mod = tvm.ir.transform.Sequential([
        s_tir.transform.LowerInitBlock(),
        s_tir.transform.PlanAndUpdateBufferAllocationLocation(),
        s_tir.transform.ConvertBlocksToOpaque(),
        s_tir.transform.CompactBufferAllocation(),
    ])(mod)
    text = mod["main"].script()
    acc = [line for line in text.splitlines() if "_acc" in line and "alloc" in line]
    assert len(acc) == 1, text
    assert 'scope="local"' in acc[0], acc
    return re.search(r"\(\d+(, \d+)*\)", acc[0]).group(0)


@pytest.mark.parametrize("make, channel_blocks", [
    # fewer pixels than output channels: channel blocks outside the rows, in parallel
    (lambda rs: tb.conv2d(rs, in_shape=(1, 3, 5, 24), cout=64, kernel=(1, 1)), 4),
    (lambda rs: tb.conv2d(rs, in_shape=(1, 5, 3, 16), cout=48, kernel=(3, 3)), 3),
    (lambda rs: tb.conv2d(rs, in_shape=(1, 3, 3, 32), depthwise=True), 2),
    # more pixels than channels: rows in parallel
    (lambda rs: tb.conv2d(rs, in_shape=(1, 7, 7, 16), cout=32, kernel=(1, 1)), 0),
])
def test_odd_widths_and_deep_layers_exact(make, channel_blocks, monkeypatch):
    """Widths the column tile does not divide (a predicated last tile) and layers with fewer
    pixels than channels (channel blocks in parallel outside the rows) stay bit-exact."""
    _int32_kernels(monkeypatch)  # 16-channel blocks (VNNI's are 32)
    monkeypatch.setattr(cpu_schedule, "PARALLEL_MIN_WORK", 0)
    seen = _captured(monkeypatch)
    model = make(np.random.RandomState(6))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    parallel = [line for line in after.script().splitlines() if "T.parallel" in line]
    assert parallel, after.script()
    if channel_blocks:
        assert f"T.parallel({channel_blocks})" in parallel[0], parallel
    else:
        assert "T.parallel(7)" in parallel[0], parallel  # the rows
    assert_bit_exact(cm, model, n_inputs=3)


@pytest.mark.parametrize("make", [
    lambda rs: tb.conv2d(rs, in_shape=(1, 12, 12, 32), cout=32, kernel=(1, 1)),
    lambda rs: tb.conv2d(rs, in_shape=(1, 12, 12, 32), depthwise=True, stride=(2, 2)),
    lambda rs: tb.pool(rs, "avg", in_shape=(1, 9, 9, 16)),
])
def test_emulator_stripes_vectorized_and_exact(make, monkeypatch):
    """The emulator builds the checked schedule with its accumulators on vectors; the plan is
    still exact (planned == scheduled bytes) and the outputs bit-exact with TFLite."""
    seen = _captured(monkeypatch, "vectorize_stripes")
    model = make(np.random.RandomState(5))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="ethos-u,llvm")
    assert cm.partition_summary == {"ethos-u": 1}
    (before, after), = seen
    assert "T.vectorized" not in before.script()
    assert "T.vectorized" in after.script()
    for sub in cm.plan_report["subgraphs"].values():
        assert sub["planned_bytes"] == sub["scheduled_bytes"]
    assert_bit_exact(cm, model, n_inputs=2, seed=6)


# ---------------------------------------------------------------- AVX-512 VNNI (x86_dot)
def _vnni_host() -> bool:
    from tvm_ethos.host.cpu.x86_dot import has_vnni

    return has_vnni(cpu_schedule.host_target())


needs_vnni = pytest.mark.skipif(not _vnni_host(), reason="this CPU has no AVX-512 VNNI")


def _without_vnni(monkeypatch):
    """Build the host kernels for an AVX2 CPU without AVX-512 (so no VNNI, and AVX2's tiles)
    that this machine can run (Zen 3 on a Zen 4, Haswell on a Cascade Lake; the test is skipped
    where there is none): the vpmaddwd
    kernels of ``x86_avx2`` where a conv or fully connected layer takes them, int32
    multiply-adds elsewhere."""
    target = target_or_skip(has=("avx2",), lacks=("avx512f",))
    monkeypatch.setattr(cpu_schedule, "host_target", lambda: dict(target))


def _int32_kernels(monkeypatch):
    """No dot-product form at all: every accumulator in the int32 multiply-add form (a CPU
    with neither VNNI nor AVX2, or an OpenCL build), on a CPU without AVX-512 that this
    machine can run."""
    from tvm_ethos.pipeline import codegen

    target = target_or_skip(lacks=("avx512f",))
    monkeypatch.setattr(cpu_schedule, "host_target", lambda: dict(target))
    monkeypatch.setattr(codegen, "host_kernels_avx2", lambda tl: False)


def test_has_vnni_reads_mcpu_and_mattr():
    from tvm_ethos.host.cpu.x86_dot import has_vnni

    assert has_vnni({"kind": "llvm", "mcpu": "znver4"})
    assert has_vnni({"kind": "llvm", "mcpu": "cascadelake"})
    assert not has_vnni({"kind": "llvm", "mcpu": "znver3"})
    assert not has_vnni({"kind": "llvm", "mcpu": "znver4", "mattr": ["-avx512vnni"]})
    assert not has_vnni("c")


def test_has_avx2_reads_mcpu_and_mtriple():
    from tvm_ethos.host.cpu.x86_avx2 import has_avx2

    assert has_avx2({"kind": "llvm", "mcpu": "znver3"})
    assert has_avx2({"kind": "llvm", "mcpu": "haswell"})
    assert not has_avx2({"kind": "llvm", "mcpu": "x86-64"})
    assert not has_avx2({"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72"})
    assert not has_avx2("c")


def _assert_vpdpbusd_exact(make, monkeypatch, seed):
    """The model ``make`` builds compiles for llvm to a kernel with vpdpbusd in it and runs
    bit-exact with TFLite's reference kernels."""
    seen = _captured(monkeypatch)
    model = make(np.random.RandomState(seed))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert "vpdpbusd" in after.script()
    assert_bit_exact(cm, model, n_inputs=3, seed=seed)


@needs_vnni
@pytest.mark.parametrize("make", [
    lambda rs: tb.conv2d(rs, in_shape=(1, 7, 7, 16), cout=32, kernel=(1, 1)),  # odd width
    lambda rs: tb.conv2d(rs, in_shape=(1, 3, 5, 24), cout=64, kernel=(1, 1)),  # channel blocks
    lambda rs: tb.conv2d(rs, in_shape=(1, 9, 9, 8), cout=16, kernel=(1, 1), stride=(2, 2),
                         act="relu6"),
])
def test_pointwise_conv_runs_vpdpbusd_exact(make, monkeypatch):
    """On a VNNI host a 1x1 conv's accumulator is one vpdpbusd per 16 channels x 4 inputs
    (weights re-laid out at compile time, the +128 shift taken out of the bias) and stays
    bit-exact with TFLite's reference kernels."""
    _assert_vpdpbusd_exact(make, monkeypatch, seed=8)


@needs_vnni
@pytest.mark.parametrize("shape, cout, tile", [
    ((1, 8, 8, 16), 32, "(1, 1, 8, 32)"),  # 8 columns x 2 vectors of 16 channels
    ((1, 14, 14, 16), 48, "(1, 1, 7, 16)"),  # 7 divides 14; 48 channels: vectors of 16
    ((1, 5, 11, 16), 32, "(1, 1, 8, 32)"),  # no tile of 4..8 divides 11: a predicated tail
])
def test_vnni_accumulator_tile(shape, cout, tile, monkeypatch):
    """A VNNI conv accumulator tile: up to 8 columns (the widest of at least 4 dividing the
    width) x 32 channels, 16 zmm registers, in the local scope."""
    seen = _captured(monkeypatch)
    model = tb.conv2d(np.random.RandomState(4), in_shape=shape, cout=cout, kernel=(1, 1))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert _local_accumulator(after) == tile
    assert_bit_exact(cm, model, n_inputs=2, seed=4)


@pytest.mark.parametrize("make", [
    lambda rs: tb.conv2d(rs, in_shape=(1, 7, 7, 16), cout=32, kernel=(1, 1)),
    lambda rs: tb.conv2d(rs, in_shape=(1, 3, 5, 24), cout=64, kernel=(1, 1)),
])
@pytest.mark.parametrize("form", ["avx2", "int32"])
def test_pointwise_conv_without_vnni_exact(make, form, monkeypatch):
    """A target without VNNI (CI's AVX2 machines) runs the conv on vpmaddwd (``x86_avx2``),
    or, without that form, on int32 multiply-adds; bit-exact either way."""
    (_without_vnni if form == "avx2" else _int32_kernels)(monkeypatch)
    seen = _captured(monkeypatch)
    model = make(np.random.RandomState(9))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert "vpdpbusd" not in after.script()
    assert "_wvnni" not in after.script()
    assert ("pmadd.wd" in after.script()) == (form == "avx2")
    assert_bit_exact(cm, model, n_inputs=3, seed=9)


@needs_vnni
@settings(max_examples=10, deadline=None)
@given(
    cin4=st.integers(1, 20),
    cout=st.integers(1, 70),
    hw=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]),
    act=st.sampled_from([None, "relu", "relu6"]),
    per_channel=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_pointwise_conv_vnni_any_geometry_bit_exact(cin4, cout, hw, stride, act, per_channel,
                                                    seed):
    rs = np.random.RandomState(seed)
    model = tb.conv2d(rs, in_shape=(1, *hw, 4 * cin4), cout=cout, kernel=(1, 1),
                      stride=stride, act=act, per_channel=per_channel)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    assert_bit_exact(cm, model, n_inputs=2, seed=seed)


@needs_vnni
@pytest.mark.parametrize("make", [
    lambda rs: tb.fully_connected(rs, k=64, n=10),
    lambda rs: tb.fully_connected(rs, k=256, n=37, act="relu"),
    # output channels padded to whole vectors: the accumulator outside its consumer
    lambda rs: tb.conv2d(rs, in_shape=(1, 1, 1, 64), cout=21, kernel=(1, 1)),
    lambda rs: tb.conv2d(rs, in_shape=(1, 5, 3, 8), cout=24, kernel=(1, 1)),
])
def test_fully_connected_and_padded_outputs_run_vpdpbusd_exact(make, monkeypatch):
    _assert_vpdpbusd_exact(make, monkeypatch, seed=1)


@needs_vnni
def test_pointwise_conv_vnni_extreme_codes_exact():
    """Inputs at -128 and 127 (the shifted byte at 0 and 255) and weights at -127 and 127: the
    widest products vpdpbusd sums, and the bias correction at its largest."""
    from conftest import oracle

    rs = np.random.RandomState(2)
    model = tb.conv2d(rs, in_shape=(1, 4, 4, 64), cout=32, kernel=(1, 1))
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    for fill in (-128, 127):
        x = np.full((1, 4, 4, 64), fill, np.int8)
        x[0, 0, 0] = -fill - 1
        (got,), (ref,) = cm.run(x), oracle(model, [x])
        assert np.array_equal(np.asarray(got).reshape(ref.shape), ref)


# ------------------------------------------ VNNI depthwise and KxK convolutions (x86_dot)
@needs_vnni
@settings(max_examples=14, deadline=None)
@example(cin=3, cout=32, hw=(11, 11), kernel=(3, 3), stride=(2, 2), padding="SAME",
         depthwise=False, multiplier=1, dilation=(1, 1), seed=0)  # MobileNet's first layer
@example(cin=1, cout=20, hw=(13, 7), kernel=(10, 4), stride=(2, 2), padding="SAME",
         depthwise=False, multiplier=1, dilation=(1, 1), seed=1)  # DS-CNN's first layer
@example(cin=24, cout=24, hw=(9, 5), kernel=(5, 5), stride=(1, 1), padding="SAME",
         depthwise=True, multiplier=1, dilation=(1, 1), seed=2)  # two groups of 4 taps
@given(
    cin=st.integers(1, 40),
    cout=st.integers(1, 40),
    hw=st.tuples(st.integers(3, 12), st.integers(3, 12)),
    kernel=st.sampled_from([(3, 3), (5, 3), (1, 3), (3, 1), (2, 2), (1, 1)]),
    stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]),
    padding=st.sampled_from(["SAME", "VALID"]),
    depthwise=st.booleans(),
    multiplier=st.sampled_from([1, 1, 2]),
    dilation=st.sampled_from([(1, 1), (1, 1), (2, 1)]),
    seed=st.integers(0, 1000),
)
def test_window_conv_vnni_any_geometry_bit_exact(cin, cout, hw, kernel, stride, padding,
                                                 depthwise, multiplier, dilation, seed):
    """On a VNNI host every int8 depthwise conv and every full conv (any kernel, stride,
    padding, dilation, channel count) runs its accumulator on vpdpbusd and stays bit-exact with
    TFLite's reference kernels."""
    if padding == "VALID":
        need = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
        hw = (max(hw[0], need[0]), max(hw[1], need[1]))
    if depthwise and cin * multiplier > 48:
        multiplier = 1
    rs = np.random.RandomState(seed)
    model = tb.conv2d(rs, in_shape=(1, *hw, cin), cout=cout, kernel=kernel, stride=stride,
                      padding=padding, depthwise=depthwise, multiplier=multiplier,
                      dilation=dilation)
    with pytest.MonkeyPatch.context() as mp:
        seen = _captured(mp)
        cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert "vpdpbusd" in after.script()
    assert_bit_exact(cm, model, n_inputs=2, seed=seed)


@needs_vnni
@pytest.mark.parametrize("shape, kw, stage", [
    ((1, 12, 12, 32), dict(depthwise=True), "_taps"),
    ((1, 12, 12, 16), dict(depthwise=True, stride=(2, 2)), "_taps"),
    ((1, 12, 12, 16), dict(cout=32), "_pad"),
    ((1, 12, 12, 3), dict(cout=32, stride=(2, 2)), "_rows"),
    ((1, 12, 12, 3), dict(cout=16, dilation=(1, 2)), "_im2col"),
])
def test_window_conv_vnni_extreme_codes_exact(shape, kw, stage, monkeypatch):
    """Inputs at -128 and 127 (the shifted bytes at 0 and 255, the padded ones at the zero
    point) against TFLite's reference kernels, and the source stage the form reads from."""
    from conftest import oracle

    seen = _captured(monkeypatch)
    model = tb.conv2d(np.random.RandomState(2), in_shape=shape, **kw)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert stage in after.script() and "vpdpbusd" in after.script()
    for fill in (-128, 127):
        x = np.full(shape, fill, np.int8)
        x[0, 0, 0] = -fill - 1
        (got,), (ref,) = cm.run(x), oracle(model, [x])
        assert np.array_equal(np.asarray(got).reshape(ref.shape), ref)


@needs_vnni
@pytest.mark.parametrize("shape, kw, stage, steps", [
    ((1, 10, 10, 16), dict(cout=16), "_pad", (3, 12)),  # ResNet-8's 32x32x16 layers
    ((1, 10, 10, 16), dict(cout=32, stride=(2, 2)), "_pad", (3, 12)),
    ((1, 9, 9, 3), dict(cout=16), "_rows", (3, 3)),  # a window row: 3 x 3 channels + 3
    ((1, 9, 9, 3), dict(cout=16, dilation=(1, 2)), "_im2col", (3, 3)),
    ((1, 11, 7, 1), dict(cout=16, kernel=(10, 4), stride=(2, 2)), "_rows", (10, 1)),  # DS-CNN
    ((1, 7, 9, 8), dict(cout=16, kernel=(5, 3)), "_pad", (5, 6)),
])
def test_window_conv_source_holds_shifted_bytes(shape, kw, stage, steps, monkeypatch):
    """The source stage of a KxK conv stores ``x + 128`` as uint8, so the kernel broadcasts
    it without the per-step sign flip, and the reduction runs as window rows x steps along
    the row, so a step's source address is affine in its loops; bit-exact with TFLite."""
    import re

    seen = _captured(monkeypatch)
    model = tb.conv2d(np.random.RandomState(5), in_shape=shape, **kw)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    text = after.script()
    alloc = next(line for line in text.splitlines() if stage in line and "alloc" in line)
    assert '"uint8"' in alloc, alloc
    assert "vpdpbusd" in text and "^ -2139062144" not in text  # no sign flip left
    # a serial stage keeps its row and column loops (fused, it divides the index per pixel)
    assert "n_i_j_fused" not in text
    rows, per_row = steps
    split = rf"\w+ \* {per_row} \+ \w+" if per_row > 1 else r"\w+"  # one step a row: one loop
    assert re.search(rf"T\.axis\.reduce\({rows * per_row}, {split}\)", text), text
    assert_bit_exact(cm, model, n_inputs=2, seed=5)


def test_unpadded_window_conv_keeps_the_sign_flip(monkeypatch):
    """A conv whose windows stay inside its input reads the input itself (no source stage):
    the kernel flips the sign bits of each broadcast word instead."""
    if not _vnni_host():
        pytest.skip("this CPU has no AVX-512 VNNI")
    seen = _captured(monkeypatch)
    model = tb.conv2d(np.random.RandomState(6), in_shape=(1, 8, 8, 16), cout=16,
                      padding="VALID")
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    text = after.script()
    assert "_pad" not in text and "^ -2139062144" in text
    assert_bit_exact(cm, model, n_inputs=2, seed=6)


@settings(max_examples=8, deadline=None)
@given(
    cin=st.integers(1, 24),
    cout=st.integers(1, 24),
    hw=st.tuples(st.integers(3, 9), st.integers(3, 9)),
    kernel=st.sampled_from([(3, 3), (5, 3)]),
    stride=st.sampled_from([(1, 1), (2, 2)]),
    padding=st.sampled_from(["SAME", "VALID"]),
    depthwise=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_window_conv_int32_bit_exact(cin, cout, hw, kernel, stride, padding, depthwise, seed):
    """Without a dot-product form (no VNNI, no AVX2 form) the int32 multiply-add kernels run
    the same shapes bit-exact, with no VNNI stage or instruction."""
    if padding == "VALID":
        hw = (max(hw[0], kernel[0]), max(hw[1], kernel[1]))
    rs = np.random.RandomState(seed)
    model = tb.conv2d(rs, in_shape=(1, *hw, cin), cout=cout, kernel=kernel, stride=stride,
                      padding=padding, depthwise=depthwise)
    with pytest.MonkeyPatch.context() as mp:
        _int32_kernels(mp)
        seen = _captured(mp)
        cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert "vpdpbusd" not in after.script() and "_wvnni" not in after.script()
    assert "pmadd" not in after.script()
    assert_bit_exact(cm, model, n_inputs=2, seed=seed)


@needs_vnni
@settings(max_examples=12, deadline=None)
@given(
    shapes=st.sampled_from([((1, 5, 7, 16), (1, 5, 7, 16)), ((1, 4, 4, 8), (1, 1, 1, 8)),
                            ((1, 3, 9, 12), (1, 3, 9, 12)), ((1, 8, 8, 32), (1, 8, 1, 32))]),
    act=st.sampled_from([None, "relu", "relu6"]),
    seed=st.integers(0, 1000),
)
def test_add_vnni_host_is_one_stage_and_exact(shapes, act, seed):
    """On an AVX-512 host ADD's three rescales are one stage (mbqm_one_shift reads its operand
    once), bit-exact with TFLite's reference kernel, extreme codes included."""
    from conftest import oracle

    rs = np.random.RandomState(seed)
    model = tb.binary(rs, "add", a_shape=shapes[0], b_shape=shapes[1], act=act)
    with pytest.MonkeyPatch.context() as mp:
        seen = _captured(mp)
        cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert "_add_in0" not in after.script() and "_add_in1" not in after.script()
    assert_bit_exact(cm, model, n_inputs=2, seed=seed)
    for fa, fb in ((-128, 127), (127, 127), (-128, -128)):
        xa, xb = np.full(shapes[0], fa, np.int8), np.full(shapes[1], fb, np.int8)
        got, ref = cm.run(xa, xb)[0], oracle(model, [xa, xb])[0]
        assert np.array_equal(np.asarray(got).reshape(ref.shape), ref)


# ------------------------------------------------- AVX2 vpmaddwd kernels (x86_avx2, Zen 3)
def _assert_vpmaddwd_exact(model, seed, n_inputs=2):
    """``model`` compiles for an AVX2-only llvm host to kernels with vpmaddwd in them and runs
    bit-exact with TFLite's reference kernels."""
    with pytest.MonkeyPatch.context() as mp:
        _without_vnni(mp)
        seen = _captured(mp)
        cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert "llvm.x86.avx2.pmadd.wd" in after.script() and "vpdpbusd" not in after.script()
    assert_bit_exact(cm, model, n_inputs=n_inputs, seed=seed)
    return cm, after


@settings(max_examples=14, deadline=None)
@example(cin=3, cout=32, hw=(11, 11), kernel=(3, 3), stride=(2, 2), padding="SAME",
         dilation=(1, 1), seed=0)  # MobileNet's first layer: im2col of an odd depth
@example(cin=1, cout=20, hw=(13, 7), kernel=(10, 4), stride=(2, 2), padding="SAME",
         dilation=(1, 1), seed=1)  # DS-CNN's first layer
@example(cin=16, cout=16, hw=(8, 8), kernel=(3, 3), stride=(1, 1), padding="SAME",
         dilation=(1, 1), seed=2)  # ResNet-8's: the zero-point padded int16 source
@given(
    cin=st.integers(1, 40),
    cout=st.integers(1, 40),
    hw=st.tuples(st.integers(1, 12), st.integers(1, 12)),
    kernel=st.sampled_from([(1, 1), (3, 3), (5, 3), (1, 3), (3, 1), (2, 2)]),
    stride=st.sampled_from([(1, 1), (2, 2), (1, 2)]),
    padding=st.sampled_from(["SAME", "VALID"]),
    dilation=st.sampled_from([(1, 1), (1, 1), (2, 1)]),
    seed=st.integers(0, 1000),
)
def test_conv_avx2_any_geometry_bit_exact(cin, cout, hw, kernel, stride, padding, dilation,
                                          seed):
    """On an AVX2 host without VNNI every int8 full conv (any kernel, stride, padding,
    dilation, depth, width: the tile follows the width) runs its accumulator on vpmaddwd and
    stays bit-exact with TFLite's reference kernels."""
    if padding == "VALID":
        need = [(k - 1) * d + 1 for k, d in zip(kernel, dilation)]
        hw = (max(hw[0], need[0]), max(hw[1], need[1]))
    rs = np.random.RandomState(seed)
    model = tb.conv2d(rs, in_shape=(1, *hw, cin), cout=cout, kernel=kernel, stride=stride,
                      padding=padding, dilation=dilation)
    _assert_vpmaddwd_exact(model, seed)


@pytest.mark.parametrize("make", [
    lambda rs: tb.fully_connected(rs, k=64, n=10),
    lambda rs: tb.fully_connected(rs, k=256, n=37, act="relu"),
    lambda rs: tb.conv2d(rs, in_shape=(1, 1, 1, 64), cout=21, kernel=(1, 1)),  # padded outputs
])
def test_fully_connected_and_padded_outputs_run_vpmaddwd_exact(make):
    _assert_vpmaddwd_exact(make(np.random.RandomState(1)), seed=1, n_inputs=3)


@settings(max_examples=10, deadline=None)
@given(k=st.integers(1, 300), n=st.integers(1, 70), act=st.sampled_from([None, "relu"]),
       seed=st.integers(0, 1000))
def test_fully_connected_avx2_any_shape_bit_exact(k, n, act, seed):
    """Fully connected layers of any depth and width on an AVX2 host: vpmaddwd where the depth
    is even (outputs padded to vectors of 8), int32 where it is odd; bit-exact either way."""
    model = tb.fully_connected(np.random.RandomState(seed), k=k, n=n, act=act)
    with pytest.MonkeyPatch.context() as mp:
        _without_vnni(mp)
        seen = _captured(mp)
        cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert ("pmadd.wd" in after.script()) == (k % 2 == 0)
    assert_bit_exact(cm, model, n_inputs=3, seed=seed)


def test_fully_connected_odd_depth_keeps_int32_exact(monkeypatch):
    """A fully connected layer whose input depth is odd (a pair would straddle two rows) keeps
    the int32 kernel, bit-exact."""
    _without_vnni(monkeypatch)
    seen = _captured(monkeypatch)
    model = tb.fully_connected(np.random.RandomState(3), k=63, n=20)
    cm = tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert "pmadd" not in after.script()
    assert_bit_exact(cm, model, n_inputs=3, seed=3)


@pytest.mark.parametrize("shape, kw, stage", [
    ((1, 8, 8, 64), dict(cout=32, kernel=(1, 1)), "_x16"),
    ((1, 12, 12, 16), dict(cout=32), "_pad16"),
    ((1, 12, 12, 3), dict(cout=32, stride=(2, 2)), "_im2col16"),
])
def test_conv_avx2_extreme_codes_exact(shape, kw, stage):
    """Inputs at -128 and 127 (the widest int16 pairs vpmaddwd sums, and the bias correction
    ``x_zp * sum(w)`` against padded positions that hold the zero point) against TFLite's
    reference kernels, and the int16 source stage the form reads from."""
    from conftest import oracle

    model = tb.conv2d(np.random.RandomState(2), in_shape=shape, **kw)
    cm, after = _assert_vpmaddwd_exact(model, seed=2)
    assert stage in after.script()
    for fill in (-128, 127):
        x = np.full(shape, fill, np.int8)
        x[0, 0, 0] = -fill - 1
        (got,), (ref,) = cm.run(x), oracle(model, [x])
        assert np.array_equal(np.asarray(got).reshape(ref.shape), ref)


@pytest.mark.parametrize("width, tile", [
    (16, "(1, 1, 4, 16)"),  # 4 columns x 16 channels: 8 ymm accumulators
    (14, "(1, 1, 7, 8)"),  # 4 does not divide 14: 7 columns x 8 channels, no predicated tail
    (22, "(1, 1, 2, 32)"),
    (11, "(1, 1, 1, 32)"),
])
def test_avx2_accumulator_tile(width, tile, monkeypatch):
    """The vpmaddwd accumulator tile follows the width (``x86_avx2.madd_tile``), in the local
    scope."""
    _without_vnni(monkeypatch)
    seen = _captured(monkeypatch)
    model = tb.conv2d(np.random.RandomState(4), in_shape=(1, 2, width, 16), cout=32,
                      kernel=(1, 1))
    tvm_ethos.compile(tvm_ethos.load_model(model), target="llvm")
    (_before, after), = seen
    assert _local_accumulator(after) == tile


@settings(max_examples=200, deadline=None)
@given(width=st.integers(1, 300))
def test_avx2_tile_fits_the_registers_and_divides_the_width(width):
    """Every tile is whole columns of the width (no predicated tail) or 4 columns, and its
    accumulators plus one weight vector per 8 channels and a broadcast fit AVX2's 16 ymm."""
    from tvm_ethos.host.cpu.x86_avx2 import MADD_LANES, madd_tile

    channels, columns = madd_tile(width)
    assert width % columns == 0
    vectors = channels // MADD_LANES
    assert columns * vectors + vectors + 1 <= 16


@pytest.mark.parametrize("name", [   # the MobileNets' depthwise-separable layers are ds_cnn's
    "ds_cnn_kws",
    "resnet8_cifar",
    pytest.param("mobilenet_v1_0.25_96", marks=pytest.mark.slow),
    pytest.param("mobilenet_v1_1.0_224", marks=pytest.mark.slow),
])
def test_shipped_models_on_avx2_bit_exact(name, monkeypatch):
    """Every shipped model built for an AVX2-only host (Zen 3): its convolutions and fully
    connected layers on vpmaddwd, bit-exact with TFLite's reference kernels (MobileNetV1-224:
    the builtin kernels, test_models.py says why)."""
    from conftest import model_path

    _without_vnni(monkeypatch)
    seen = _captured(monkeypatch)
    path = model_path(name)
    cm = tvm_ethos.compile(tvm_ethos.load_model(path), target="llvm")
    assert any("pmadd.wd" in after.script() for _before, after in seen)
    assert_bit_exact(cm, path, n_inputs=3, reference=name != "mobilenet_v1_1.0_224")
