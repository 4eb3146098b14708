"""Single operations built with Vela's Python API (its register generator, not ours), run on
the model and compared with plain-loop references: strides, padding, NHWC/NHCWB16, a tiled
IFM, per-channel scales, pooling, elementwise with broadcast and scalars, clamps."""
import numpy as np
import pytest
from ethosu.vela import api
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from ethosu_stream import Memory, run_stream

from .reference import from_nhcwb16, nhcwb16_bytes, nhwc_bytes, tflite_multiply

ACC = api.NpuAccelerator.Ethos_U55_128
ACC_NAME = "ethos-u55-128"
FLASH, SCRATCH = 0, 1
OFM_BASE = 8192


def _fm(h, w, c, layout, address, zp, tiles=None):
    fm = api.NpuFeatureMap()
    fm.data_type = api.NpuDataType.INT8
    fm.shape = api.NpuShape3D(h, w, c)
    fm.layout = layout
    fm.region = SCRATCH
    fm.quantization = api.NpuQuantization(scale_f32=0.05, zero_point=zp)
    fm.tiles = tiles or api.NpuTileBox(h, 0, w, [address, 0, 0, 0])
    return fm


def _layout(nhcwb16):
    return api.NpuLayout.NHCWB16 if nhcwb16 else api.NpuLayout.NHWC


def _read_ofm(mem, h, w, c, nhcwb16):
    raw = mem.regions[SCRATCH][OFM_BASE:]
    return from_nhcwb16(raw, h, w, c) if nhcwb16 else \
        raw[: h * w * c].view(np.int8).reshape(h, w, c)


def _run(op, mem):
    op.block_config = api.npu_find_block_configs(op, ACC)[0]
    return run_stream(api.npu_generate_register_command_stream([op], ACC), mem, ACC_NAME)


def _conv_reference(x, zp_in, w, bias, scales, zp_out, stride, top, left, oh, ow, depthwise):
    cout = w.shape[0]
    out = np.zeros((oh, ow, cout), np.int64)
    for oy in range(oh):
        for ox in range(ow):
            for o in range(cout):
                acc = int(bias[o])
                for ky in range(w.shape[1]):
                    for kx in range(w.shape[2]):
                        iy, ix = oy * stride - top + ky, ox * stride - left + kx
                        if 0 <= iy < x.shape[0] and 0 <= ix < x.shape[1]:
                            if depthwise:
                                acc += (int(x[iy, ix, o]) - zp_in) * int(w[o, ky, kx, 0])
                            else:
                                acc += int(((x[iy, ix].astype(np.int64) - zp_in)
                                            * w[o, ky, kx]).sum())
                m, s = scales[o]
                out[oy, ox, o] = min(127, max(-128, tflite_multiply(acc, m, s) + zp_out))
    return out


@settings(max_examples=12, deadline=None)
@given(st.data())
@pytest.mark.parametrize("depthwise", [False, True])
def test_conv_matches_a_plain_loop(depthwise, data):
    d = data.draw
    h, w_, cin = d(st.integers(3, 8)), d(st.integers(3, 8)), d(st.integers(1, 20))
    cout = cin if depthwise else d(st.integers(1, 20))
    k, stride = d(st.sampled_from([1, 3])), d(st.sampled_from([1, 2]))
    top, left = d(st.integers(0, k // 2)), d(st.integers(0, k // 2))
    # the OFM, then the far padding that exactly completes its last window (as Vela writes
    # it: the hardware takes the IFM extent from the OFM, the kernel and the padding)
    oh = (h + top - k) // stride + 1 + d(st.integers(0, 1))
    ow = (w_ + left - k) // stride + 1 + d(st.integers(0, 1))
    bottom = max(0, (oh - 1) * stride + k - h - top)
    right = max(0, (ow - 1) * stride + k - w_ - left)
    assume(bottom < k and right < k)
    in16, out16 = d(st.booleans()), d(st.booleans())
    rs = np.random.RandomState(d(st.integers(0, 2**31 - 1)))
    x = rs.randint(-128, 128, (h, w_, cin)).astype(np.int8)
    wts = rs.randint(-127, 128, (cout, k, k, 1 if depthwise else cin)).astype(np.int16)
    bias = rs.randint(-5000, 5000, cout)
    scales = [(int(rs.randint(1 << 30, 1 << 31)), int(rs.randint(36, 42))) for _ in range(cout)]
    zp_in, zp_out = int(rs.randint(-20, 20)), int(rs.randint(-20, 20))

    op = api.NpuConvDepthWiseOperation() if depthwise else api.NpuConv2DOperation()
    op.ifm = _fm(h, w_, cin, _layout(in16), 0, zp_in)
    op.ofm = _fm(oh, ow, cout, _layout(out16), OFM_BASE, zp_out)
    op.kernel = api.NpuKernel(k, k, stride, stride)
    op.padding = api.NpuPadding(top=top, left=left, bottom=bottom, right=right)
    if not depthwise:
        op.block_traversal = d(st.sampled_from([api.NpuBlockTraversal.DEPTH_FIRST,
                                                api.NpuBlockTraversal.PART_KERNEL_FIRST]))
    op.block_config = api.npu_find_block_configs(op, ACC)[0]
    encoded = api.npu_encode_weights(ACC, wts, (1, 1), 8, op.block_config.depth, depthwise,
                                     api.NpuBlockTraversal.DEPTH_FIRST if depthwise
                                     else op.block_traversal)
    biases = b"".join(
        bytes(api.npu_encode_bias(np.int64(b), m, s)) for b, (m, s) in zip(bias, scales)
    )
    biases += bytes(-len(biases) % 16)
    flash = bytes(encoded) + biases
    op.weights = [api.NpuAddressRange(FLASH, 0, len(encoded))]
    op.biases = [api.NpuAddressRange(FLASH, len(encoded), len(biases))]
    scratch = np.zeros(OFM_BASE * 2, np.uint8)
    raw = nhcwb16_bytes(x) if in16 else nhwc_bytes(x)
    scratch[: raw.size] = raw
    mem = Memory({FLASH: flash, SCRATCH: scratch})
    stats = run_stream(api.npu_generate_register_command_stream([op], ACC), mem, ACC_NAME)
    want = _conv_reference(
        x, zp_in, wts, bias, scales, zp_out, stride, top, left, oh, ow, depthwise
    )
    assert np.array_equal(_read_ofm(mem, oh, ow, cout, out16), want)
    assert stats.macs == oh * ow * cout * k * k * (1 if depthwise else cin)


@settings(max_examples=15, deadline=None)
@given(
    st.integers(2, 8),
    st.integers(1, 7),
    st.integers(1, 30),
    st.booleans(),
    st.integers(0, 2**31 - 1),
)
def test_tiled_ifm_max_pool_with_padding(h, split, c, out16, seed):
    """A 3x3/1 max pool, SAME padding, IFM in two tiles (rows from ``split`` live elsewhere)."""
    split = min(split, h - 1)
    rs = np.random.RandomState(seed)
    x = rs.randint(-128, 128, (h, 4, c)).astype(np.int8)
    low = 4096
    op = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    op.ifm = _fm(h, 4, c, api.NpuLayout.NHWC, 0, 0,
                 api.NpuTileBox(split, split, 4, [0, 0, low, 0]))
    op.ofm = _fm(h, 4, c, _layout(out16), OFM_BASE, 0)
    op.kernel = api.NpuKernel(3, 3)
    op.padding = api.NpuPadding(top=1, left=1, bottom=1, right=1)
    act = api.NpuActivation(api.NpuActivationOp.NONE_OR_RELU)
    act.min, act.max = -0.5, 3.0  # quantized -10 .. 60 at scale 0.05
    op.activation = act
    scratch = np.zeros(OFM_BASE * 2, np.uint8)
    scratch[: split * 4 * c] = nhwc_bytes(x[:split])
    scratch[low: low + (h - split) * 4 * c] = nhwc_bytes(x[split:])
    mem = Memory({FLASH: 16, SCRATCH: scratch})
    _run(op, mem)
    want = np.full((h, 4, c), -128, np.int64)
    for y in range(h):
        for xx in range(4):
            win = x[max(0, y - 1):y + 2, max(0, xx - 1):xx + 2].reshape(-1, c)
            want[y, xx] = win.max(axis=0)
    assert np.array_equal(_read_ofm(mem, h, 4, c, out16), np.clip(want, -10, 60))


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 5), st.integers(1, 5), st.integers(1, 24), st.sampled_from(["MIN", "MAX"]),
       st.sampled_from(["scalar", "channel", "full"]), st.integers(0, 2**31 - 1))
def test_min_max_with_broadcast_and_scalars(h, w, c, kind, ifm2_kind, seed):
    rs = np.random.RandomState(seed)
    a = rs.randint(-128, 128, (h, w, c)).astype(np.int8)
    shape2 = {"scalar": (1, 1, 1), "channel": (1, 1, c), "full": (h, w, c)}[ifm2_kind]
    b = rs.randint(-128, 128, shape2).astype(np.int8)
    op = api.NpuElementWiseOperation(getattr(api.NpuElementWiseOp, kind))
    op.ifm = _fm(h, w, c, api.NpuLayout.NHWC, 0, 0)
    op.ofm = _fm(h, w, c, api.NpuLayout.NHWC, OFM_BASE, 0)
    op.ifm2 = _fm(*shape2, api.NpuLayout.NHWC, 4096, 0)
    if ifm2_kind == "scalar":
        op.ifm2_scalar = float(b[0, 0, 0]) * 0.05
    scratch = np.zeros(OFM_BASE * 2, np.uint8)
    scratch[: a.size] = nhwc_bytes(a)
    scratch[4096: 4096 + b.size] = nhwc_bytes(b)
    mem = Memory({FLASH: 16, SCRATCH: scratch})
    _run(op, mem)
    want = (np.minimum if kind == "MIN" else np.maximum)(a, np.broadcast_to(b, a.shape))
    assert np.array_equal(_read_ofm(mem, h, w, c, False), want)


def test_average_pool_divides_by_the_window():
    """A 2x2/2 average pool, valid padding (Vela's global-scale path): TFLite rounds the mean
    half away from zero."""
    rs = np.random.RandomState(3)
    x = rs.randint(-128, 128, (6, 6, 5)).astype(np.int8)
    op = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
    op.ifm = _fm(6, 6, 5, api.NpuLayout.NHWC, 0, 0)
    op.ofm = _fm(3, 3, 5, api.NpuLayout.NHWC, OFM_BASE, 0)
    op.kernel = api.NpuKernel(2, 2, 2, 2)
    op.padding = api.NpuPadding(0, 0, 0, 0)
    scratch = np.zeros(OFM_BASE * 2, np.uint8)
    scratch[: x.size] = nhwc_bytes(x)
    mem = Memory({FLASH: 16, SCRATCH: scratch})
    _run(op, mem)
    s = x.astype(np.int64).reshape(3, 2, 3, 2, 5).sum(axis=(1, 3))
    want = np.where(s >= 0, (s + 2) // 4, -((-s + 2) // 4))
    assert np.array_equal(_read_ofm(mem, 3, 3, 5, False), want)
