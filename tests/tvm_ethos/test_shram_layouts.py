"""Vela's shared-buffer layouts asked once per distinct block in a generation
(``shram_layouts``): every answer is the one Vela's own function gives the operation, an equal
question goes to Vela once, and a stream's words are the same with the memo as without."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers.param_variants import neighbourhoods
from tvm_ethos.backends.ethos_u import shram_layouts, stream_memo
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot
from tvm_ethos.backends.ethos_u.stream_base import npu_accelerator, vela_api
from tvm_ethos.backends.ethos_u.stream_cascade import identity_copy
from tvm_ethos.backends.ethos_u.stream_payload import driver_payload

pytest.importorskip("ethosu.vela")
from ethosu.vela import register_command_stream_generator as generator  # noqa: E402
from ethosu.vela.architecture_features import Accelerator, create_default_arch  # noqa: E402

ACCELS = ("ethos-u55-128", "ethos-u55-64", "ethos-u65-256")
VELA = generator.get_arch_block_config


def _fm(api, h, w, c, dtype, scaled, at):
    fm = api.NpuFeatureMap()
    fm.data_type = dtype
    fm.region = 1
    fm.shape = api.NpuShape3D(h, w, c)
    fm.tiles = api.NpuTileBox(h, 0, w, [at, 0, 0, 0])
    fm.quantization = api.NpuQuantization(0.5 if scaled else None, at % 7)
    return fm


#: each parameter of a drawn operation and the values it takes; the operations asked in one
#: generation differ from one another in a parameter or two (``param_variants``), which is
#: where a question that left out what Vela reads would be answered wrongly
PARAMS = {
    "kind": ("conv", "depthwise", "pool", "reduce_sum", "add"),
    "traversal": ("DEPTH_FIRST", "PART_KERNEL_FIRST"), "pool": ("MAX", "AVERAGE"),
    "h": (1, 2, 4, 8), "w": (2, 4, 8), "c": (8, 16, 32, 64), "dtype": ("INT8", "INT16"),
    "at": (0, 4096, 8192), "ifm_scaled": (True, False), "ofm_scaled": (True, False),
    "ifm2": ("scalar", "full", "row"), "ifm2_scaled": (True, False), "kernel": (1, 3),
    "stride": (1, 2), "dilation": (1, 2), "padding": (0, 1), "upscale": ("NONE", "NEAREST"),
    "activation": (None, "NONE_OR_RELU", "TABLE_LOOKUP"), "block_h": (1, 2, 4, 8),
    "block_w": (2, 4, 8), "block_d": (8, 16, 32),
}



def build(p: dict):
    """The block operation of parameters ``p`` (:data:`PARAMS`)."""
    api = vela_api()
    kind, h, w, c, at = p["kind"], p["h"], p["w"], p["c"], p["at"]
    dtype = getattr(api.NpuDataType, p["dtype"])
    if kind == "conv":
        op = api.NpuConv2DOperation()
        op.block_traversal = getattr(api.NpuBlockTraversal, p["traversal"])
    elif kind == "depthwise":
        op = api.NpuConvDepthWiseOperation()
    elif kind in ("pool", "reduce_sum"):
        op = api.NpuPoolingOperation(api.NpuPoolingOp.REDUCE_SUM if kind == "reduce_sum"
                                     else getattr(api.NpuPoolingOp, p["pool"]))
    else:
        op = api.NpuElementWiseOperation(api.NpuElementWiseOp.ADD)
    op.ifm = _fm(api, h, w, c, dtype, p["ifm_scaled"], at)
    op.ofm = _fm(api, h, w, 1 if kind == "reduce_sum" else c, api.NpuDataType.INT8,
                 p["ofm_scaled"], at + 65536)
    if kind == "add":
        if p["ifm2"] == "scalar":
            op.ifm2_scalar = 3
            op.ifm2 = _fm(api, 1, 1, 1, dtype, p["ifm2_scaled"], 0)
        else:
            op.ifm2 = _fm(api, 1 if p["ifm2"] == "row" else h, w, c, dtype, p["ifm2_scaled"],
                          at + 32768)
    else:
        k = p["kernel"]
        op.kernel = api.NpuKernel(k, k, p["stride"], 1, p["dilation"], 1)
        op.padding = api.NpuPadding(p["padding"], 0, p["padding"], 0)
    op.ifm_upscale = getattr(api.NpuResamplingMode, p["upscale"])
    if p["activation"]:
        op.activation = api.NpuActivation(getattr(api.NpuActivationOp, p["activation"]))
    op.block_config = api.NpuShape3D(p["block_h"], p["block_w"], p["block_d"])
    return op


def _traversal(api, op):
    return getattr(op, "block_traversal", None) or api.NpuBlockTraversal.DEPTH_FIRST


def _vela(op, traversal, arch):
    """Vela's own answer: the layout's fields, or None where it refuses the block."""
    try:
        return _vela_fields(VELA(op, traversal, arch))
    except AssertionError:
        return None


@settings(max_examples=150, deadline=None)
@given(st.sampled_from(ACCELS), neighbourhoods(PARAMS))
def test_every_answer_is_vela_s_own(accel, params):
    """Asked in turn within one generation, each operation gets the answer Vela's function
    gives it alone: no two operations with different answers share a question."""
    api = vela_api()
    ops = [build(p) for p in params]
    arch = create_default_arch(Accelerator.from_npu_accelerator(npu_accelerator(accel)))
    with stream_memo.generating() as memo:
        for op in ops:
            got = shram_layouts.fitting_layout(op, _traversal(api, op), arch)
            want = _vela(op, _traversal(api, op), arch)
            assert (None if got is None else _vela_fields(got)) == want
    keys = {shram_layouts.layout_key(op, _traversal(api, op), arch) for op in ops}
    assert memo.asked == len(keys)


def _vela_fields(layout):
    return (layout.layout.ib_end, layout.layout.ib_start2, layout.layout.ab_start,
            layout.acc_type, tuple(layout.ofm_block.as_list()),
            tuple(layout.ifm_block.as_list()), layout.is_partkernel)


def test_outside_a_generation_vela_is_asked_every_time(monkeypatch):
    asked = []
    monkeypatch.setattr(shram_layouts, "_ask", lambda *a: asked.append(a) or "layout")
    api = vela_api()
    op = identity_copy(FmSlot(1, 0, (8, 8, 16), "int8", None, 0),
                       FmSlot(1, 4096, (8, 8, 16), "int8", None, 0), "test")
    op.block_config = api.NpuShape3D(2, 2, 16)
    arch = create_default_arch(Accelerator.from_npu_accelerator(npu_accelerator(ACCELS[0])))
    for _ in range(2):
        shram_layouts.fitting_layout(op, api.NpuBlockTraversal.DEPTH_FIRST, arch)
    with stream_memo.generating():
        for _ in range(2):
            shram_layouts.fitting_layout(op, api.NpuBlockTraversal.DEPTH_FIRST, arch)
    assert len(asked) == 3


def test_the_stream_is_the_same_without_the_memo(monkeypatch):
    """A run of copies of repeating shapes, made into a payload with the layouts remembered
    and with every layout asked of Vela: the same bytes, and Vela's function is back in place
    after either."""
    api = vela_api()
    acc = npu_accelerator(ACCELS[0])

    def ops():
        out = []
        for k in range(12):
            h = (2, 4, 8)[k % 3]
            op = identity_copy(FmSlot(1, 1024 * k, (h, 8, 16), "int8", None, 0),
                               FmSlot(1, 65536 + 1024 * k, (h, 8, 16), "int8", None, 0),
                               "test")
            op.block_config = api.NpuShape3D(2, 4, 16)
            out.append(op)
        return out

    with stream_memo.generating() as memo:
        remembered = driver_payload(ops(), acc)
    assert len(memo.answers["shram layouts"]) == 3 and generator.get_arch_block_config is VELA
    monkeypatch.setattr(shram_layouts, "remembered", lambda table, key, ask: ask())
    with stream_memo.generating():
        plain = driver_payload(ops(), acc)
    assert remembered == plain and generator.get_arch_block_config is VELA
