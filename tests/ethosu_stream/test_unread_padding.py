"""Bottom and right padding that no window reads. The NPU has no IFM height or width register
(the tile registers only place the IFM's tiles): it takes the IFM's extent from the OFM size,
the stride, the dilated kernel and all four pads, so a trailing pad beyond what the last
window reaches makes it read fewer rows or columns, the rest as padding. The functional model
does the same (the brute force here is that rule, written out); Vela never writes such a pad
(``calc_explicit_padding`` cuts a folded PAD's, and a stripe's bottom pad is what its last
window reaches), which every Vela release here shows on models that ask for one."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
from ethosu.vela import api
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from test_pad_fold import pad_conv_model

from ethosu_stream import Memory, run_stream
from ethosu_stream.ops_common import padding
from ethosu_stream.registers import RegisterState, decode_stream
from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from ethosu_stream.tflite_graph import run_vela_model

from .conftest import VELA
from .corpus import tflm
from .reference import nhwc_bytes
from .test_older_vela import _old_vela
from .test_ops import ACC, ACC_NAME, FLASH, OFM_BASE, SCRATCH, _conv_reference, _fm, _read_ofm

CONV, DEPTHWISE, MAX_POOL = "conv", "depthwise", "max_pool"


def _extent(out: int, k: int, stride: int, before: int, after: int) -> int:
    """The IFM rows (or columns) the NPU reads: the windows' span less both pads."""
    return (out - 1) * stride + k - before - after


def _read_after(n: int, out: int, k: int, stride: int, before: int) -> int:
    """The trailing pad the last window reaches past an IFM of ``n``."""
    return max(0, (out - 1) * stride + k - before - n)


def _run_block_op(kind, x, k, stride, pads, oh, ow, seed):
    """``kind`` over ``x`` (h, w, c) with ``pads`` (top, left, bottom, right) through Vela's
    register generator, run on the functional model; returns (OFM, the brute force over the
    IFM rows and columns the registers give the NPU, the brute force over the whole IFM)."""
    h, w, c = x.shape
    rs = np.random.RandomState(seed)
    top, left, bottom, right = pads
    cout = c if kind != CONV else int(rs.randint(1, 9))
    if kind == MAX_POOL:
        op = api.NpuPoolingOperation(api.NpuPoolingOp.MAX)
    else:
        op = api.NpuConvDepthWiseOperation() if kind == DEPTHWISE else api.NpuConv2DOperation()
    op.ifm = _fm(h, w, c, api.NpuLayout.NHWC, 0, 0 if kind == MAX_POOL else 3)
    op.ofm = _fm(oh, ow, cout, api.NpuLayout.NHWC, OFM_BASE, 0 if kind == MAX_POOL else -2)
    op.kernel = api.NpuKernel(k, k, stride, stride)
    op.padding = api.NpuPadding(top=top, left=left, bottom=bottom, right=right)
    if kind == CONV:
        op.block_traversal = api.NpuBlockTraversal.DEPTH_FIRST
    op.block_config = api.npu_find_block_configs(op, ACC)[0]
    flash = bytes(16)
    if kind != MAX_POOL:
        wts = rs.randint(-127, 128, (cout, k, k, 1 if kind == DEPTHWISE else c)).astype(np.int16)
        bias = rs.randint(-500, 500, cout)
        scales = [(int(rs.randint(1 << 30, 1 << 31)), 38) for _ in range(cout)]
        enc = bytes(api.npu_encode_weights(ACC, wts, (1, 1), 8, op.block_config.depth,
                                           kind == DEPTHWISE, api.NpuBlockTraversal.DEPTH_FIRST))
        biases = b"".join(bytes(api.npu_encode_bias(np.int64(b), m, s))
                          for b, (m, s) in zip(bias, scales))
        biases += bytes(-len(biases) % 16)
        flash = enc + biases
        op.weights = [api.NpuAddressRange(FLASH, 0, len(enc))]
        op.biases = [api.NpuAddressRange(FLASH, len(enc), len(biases))]
    scratch = np.zeros(OFM_BASE * 2, np.uint8)
    raw = nhwc_bytes(x)
    scratch[: raw.size] = raw
    mem = Memory({FLASH: flash, SCRATCH: scratch})
    run_stream(api.npu_generate_register_command_stream([op], ACC), mem, ACC_NAME)
    got = _read_ofm(mem, oh, ow, cout, False)
    seen = x[:_extent(oh, k, stride, top, bottom), :_extent(ow, k, stride, left, right)]

    def brute(ifm):
        if kind != MAX_POOL:
            return _conv_reference(ifm, 3, wts, bias, scales, -2, stride, top, left, oh, ow,
                                   kind == DEPTHWISE)
        out = np.full((oh, ow, c), -128, np.int64)
        for oy in range(oh):
            for ox in range(ow):
                y0, x0 = oy * stride - top, ox * stride - left
                out[oy, ox] = ifm[max(0, y0):y0 + k, max(0, x0):x0 + k].reshape(-1, c).max(0)
        return out

    return got, brute(seen), brute(x)


@settings(max_examples=20, deadline=None)
@given(kind=st.sampled_from([CONV, DEPTHWISE, MAX_POOL]), k=st.integers(1, 4),
       stride=st.integers(1, 3), data=st.data())
def test_the_npu_reads_the_ifm_extent_its_padding_registers_give(kind, k, stride, data):
    """Over kernels, strides and leading pads, with trailing pads from exactly what the last
    window reads to more: the functional model computes over the rows and columns the
    registers give (the windows' span less the pads), and over the whole IFM when the
    trailing pads are the ones read."""
    d = data.draw
    h, w, c = d(st.integers(k, 9)), d(st.integers(k, 9)), d(st.integers(1, 6))
    top, left = d(st.integers(0, k - 1)), d(st.integers(0, k - 1))
    oh = (h + top - k) // stride + 1 + d(st.integers(0, 1))
    ow = (w + left - k) // stride + 1 + d(st.integers(0, 1))
    bottom, right = _read_after(h, oh, k, stride, top), _read_after(w, ow, k, stride, left)
    assume(bottom < k and right < k)  # else the last window is all padding
    # unread trailing pads, leaving the last window one real row and column
    extra_b = min(d(st.integers(0, 2)), k - 1 - bottom,
                  _extent(oh, k, stride, top, bottom) - 1)
    extra_r = min(d(st.integers(0, 2)), k - 1 - right,
                  _extent(ow, k, stride, left, right) - 1)
    seed = d(st.integers(0, 2 ** 31 - 1))
    x = np.random.RandomState(seed).randint(-128, 128, (h, w, c)).astype(np.int8)
    pads = (top, left, bottom + extra_b, right + extra_r)
    got, spec, whole = _run_block_op(kind, x, k, stride, pads, oh, ow, seed)
    assert np.array_equal(got, spec), (kind, pads, oh, ow)
    if not (extra_b or extra_r):  # the pads Vela writes: the whole IFM, as TFLite computes
        assert np.array_equal(got, whole), (kind, pads, oh, ow)


@pytest.mark.parametrize("kind", [CONV, DEPTHWISE, MAX_POOL])
@pytest.mark.parametrize("side", ["bottom", "right"])
def test_an_unread_trailing_pad_turns_the_last_ifm_row_or_column_into_padding(kind, side):
    """4x4 IFM, 2x2 window of stride 2 (every element read once): one pad row or column more
    and the NPU reads a 3-wide (or 3-high) IFM, its last window half padding; the rest of the
    OFM is unchanged."""
    x = np.random.RandomState(5).randint(-100, 100, (4, 4, 3)).astype(np.int8)
    pads = (0, 0, 1, 0) if side == "bottom" else (0, 0, 0, 1)
    got, spec, whole = _run_block_op(kind, x, 2, 2, pads, 2, 2, 7)
    assert np.array_equal(got, spec)
    last = (slice(-1, None), slice(None)) if side == "bottom" else (slice(None), slice(-1, None))
    keep = (slice(0, -1), slice(None)) if side == "bottom" else (slice(None), slice(0, -1))
    assert np.array_equal(got[keep], whole[keep])
    assert not np.array_equal(got[last], whole[last])


# PAD (top, bottom, left, right) then a VALID convolution whose windows never reach the PAD's
# trailing rows and columns (2x2 of stride 2 over an even size) or reach only some of them
VELA_PAD_CASES = [
    ((8, 8), (0, 1, 0, 1), (2, 2), (2, 2), False),
    ((8, 8), (0, 1, 0, 1), (2, 2), (2, 2), True),
    ((8, 6), (1, 1, 1, 1), (3, 3), (2, 2), False),
    ((6, 8), (0, 1, 1, 1), (2, 3), (2, 2), True),
    ((7, 7), (1, 1, 1, 1), (3, 3), (2, 2), False),
    ((8, 8), (2, 2, 2, 2), (5, 5), (2, 2), True),
]


def _vela(version: str):
    return VELA if version == "5.2.0" else _old_vela(version)


def _trailing_pads(words) -> list[tuple[int, int]]:
    """(bottom, right) of each convolution of a stream."""
    state, pads = RegisterState(), []
    for cmd in decode_stream(words):
        if cmd.name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE"):
            pads.append(padding(state.snapshot())[2:])
        elif not cmd.name.startswith("NPU_OP_"):
            state.apply(cmd)
    return pads


@pytest.mark.parametrize("version", ["5.2.0", "4.5.0", "3.11.0"])
@pytest.mark.parametrize("case", VELA_PAD_CASES,
                         ids=[f"case{i}" for i in range(len(VELA_PAD_CASES))])
def test_velas_streams_pad_only_what_the_last_window_reads(tmp_path, version, case):
    """Every Vela release here folds the PAD into the convolution's padding with the trailing
    pads cut to what the last window reads; its stream runs on the functional model exactly
    as TFLite Micro runs the source model."""
    exe = _vela(version)
    if exe is None:
        pytest.skip(f"no Vela {version} venv (set TVM_ETHOS_VELA_VENVS or run `make corpus`)")
    (h, w), pads, kernel, stride, depthwise = case
    rs = np.random.RandomState(11)
    src = tmp_path / "pad_conv.tflite"
    src.write_bytes(pad_conv_model(rs, (1, h, w, 4), pads, kernel, stride, depthwise=depthwise))
    subprocess.run([str(exe), str(src), "--accelerator-config", "ethos-u55-128",
                    "--output-dir", str(tmp_path / "out")], check=True, capture_output=True)
    data = (tmp_path / "out" / "pad_conv_vela.tflite").read_bytes()
    (npu,) = read_ethos_u_ops(data)
    t, b, lft, r = pads
    oh = (h + t + b - kernel[0]) // stride[0] + 1
    ow = (w + lft + r - kernel[1]) // stride[1] + 1
    want_pads = (_read_after(h, oh, kernel[0], stride[0], t),
                 _read_after(w, ow, kernel[1], stride[1], lft))
    trailing = _trailing_pads(npu.words)
    # a stripe above the last has no bottom pad, one left of the last no right pad
    allowed = {(b, r) for b in {0, want_pads[0]} for r in {0, want_pads[1]}}
    assert trailing and set(trailing) <= allowed, (trailing, want_pads)
    for seed in (1, 2):
        x = np.random.RandomState(seed).randint(-128, 128, (1, h, w, 4)).astype(np.int8)
        got, _ = run_vela_model(data, [x], "ethos-u55-128")
        interp = tflm(src.read_bytes())
        interp.set_input(x, 0)
        interp.invoke()
        assert np.array_equal(got[0].reshape(-1), interp.get_output(0).reshape(-1))
