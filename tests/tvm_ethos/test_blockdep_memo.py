"""BLOCKDEP worked out once per distinct pair of operations in a generation
(``blockdep_guard.blockdep_key``): every value is the one Vela's ``calc_blockdep`` gives the
pair, over pairs that differ from one another in one parameter (where a key that left out
something Vela reads would answer wrongly), and an equal pair goes to Vela once."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.param_variants import neighbourhoods
from tvm_ethos.backends.ethos_u import blockdep_guard, stream_memo
from tvm_ethos.backends.ethos_u.stream_base import npu_accelerator, vela_api

pytest.importorskip("ethosu.vela")
from ethosu.vela import register_command_stream_generator as generator  # noqa: E402
from ethosu.vela import register_command_stream_util as util  # noqa: E402
from ethosu.vela.architecture_features import Accelerator, create_default_arch  # noqa: E402

ACCELS = ("ethos-u55-128", "ethos-u55-32", "ethos-u65-256")
#: each parameter of a drawn pair (the previous operation writes its OFM at offset 0 of
#: region 1; the operation reads its IFM, and an ADD its IFM2, at the offsets drawn)
PARAMS = {
    "kind": ("conv", "depthwise", "pool", "add"), "prev_lut": (False, True),
    "lut": (False, True), "h": (2, 4, 8), "w": (4, 8), "c": (16, 32), "ofm_c": (16, 32),
    "prev_h": (2, 4, 8), "ifm_at": (0, 128, 1024, 8192), "ifm_region": (1, 2),
    "ifm2_at": (0, 512, 16384), "ifm2_scalar": (False, True), "layout": ("NHWC", "NHCWB16"),
    "dtype": ("INT8", "INT16"), "block_h": (2, 4), "block_w": (4, 8), "block_d": (8, 16),
    "prev_block_h": (2, 4), "prev_block_d": (8, 16), "kernel": (1, 3), "stride": (1, 2),
    "padding": (0, 1), "tile_h0": ("whole", "half"), "row_stride": (None, 512),
}


def _fm(api, region, at, h, w, c, p):
    fm = api.NpuFeatureMap()
    fm.region = region
    fm.data_type = getattr(api.NpuDataType, p["dtype"])
    fm.layout = getattr(api.NpuLayout, p["layout"])
    fm.shape = api.NpuShape3D(h, w, c)
    h0 = h if p["tile_h0"] == "whole" else max(1, h // 2)
    fm.tiles = api.NpuTileBox(h0, 0, w, [at, 0, at + 4096 if h0 < h else 0, 0])
    if p["row_stride"] is not None and p["layout"] == "NHWC":
        e = 2 if p["dtype"] == "INT16" else 1
        fm.strides = api.NpuShape3D(p["row_stride"], c * e, e)
    fm.quantization = api.NpuQuantization(0.5, 0)
    return fm


def _op(api, kind, p):
    if kind == "conv":
        return api.NpuConv2DOperation()
    if kind == "depthwise":
        return api.NpuConvDepthWiseOperation()
    if kind == "pool":
        return api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    return api.NpuElementWiseOperation(api.NpuElementWiseOp.ADD)


def build(p: dict):
    """(previous operation, operation) of parameters ``p`` (:data:`PARAMS`)."""
    api = vela_api()
    prev = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    prev.ifm = _fm(api, 1, 65536, p["prev_h"], p["w"], p["c"], p)
    prev.ofm = _fm(api, 1, 0, p["prev_h"], p["w"], p["c"], p)
    prev.kernel = api.NpuKernel(1, 1)
    prev.block_config = api.NpuShape3D(p["prev_block_h"], 4, p["prev_block_d"])
    if p["prev_lut"]:
        prev.activation = api.NpuActivation(api.NpuActivationOp.TABLE_LOOKUP)
    op = _op(api, p["kind"], p)
    op.ifm = _fm(api, p["ifm_region"], p["ifm_at"], p["h"], p["w"], p["c"], p)
    op.ofm = _fm(api, 1, 32768, p["h"], p["w"], p["ofm_c"], p)
    if p["kind"] == "add":
        if p["ifm2_scalar"]:
            op.ifm2_scalar = 1
        op.ifm2 = _fm(api, 1, p["ifm2_at"], p["h"], p["w"], p["c"], p)
    else:
        k = p["kernel"]
        op.kernel = api.NpuKernel(k, k, p["stride"], p["stride"])
        op.padding = api.NpuPadding(p["padding"], p["padding"], 0, 0)
    if p["lut"]:
        op.activation = api.NpuActivation(api.NpuActivationOp.TABLE_LOOKUP)
    op.block_config = api.NpuShape3D(p["block_h"], p["block_w"], p["block_d"])
    return prev, op



@settings(max_examples=150, deadline=None)
@given(st.sampled_from(ACCELS), neighbourhoods(PARAMS))
def test_every_blockdep_is_vela_s_own(accel, params):
    arch = create_default_arch(Accelerator.from_npu_accelerator(npu_accelerator(accel)))
    pairs = [build(p) for p in params]
    with stream_memo.generating() as memo, blockdep_guard._guarded_blockdep():
        for prev, op in pairs:
            assert generator.calc_blockdep(arch, prev, op) == util.calc_blockdep(arch, prev, op)
    keys = {blockdep_guard.blockdep_key(arch, prev, op) for prev, op in pairs}
    assert memo.asked == len(keys)


def test_vela_s_function_is_back_after_the_stream():
    api = vela_api()
    prev, op = build({k: v[0] for k, v in PARAMS.items()})
    prev.ifm, op.ifm = op.ifm, prev.ofm
    with stream_memo.generating():
        blockdep_guard.register_command_stream([prev, op], npu_accelerator(ACCELS[0]))
    assert generator.calc_blockdep is util.calc_blockdep and api is vela_api()
