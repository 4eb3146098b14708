"""MIRROR_PAD as mirrored bands (``ethos_u.mirror_bands``): the middle one copy, each padded
band of an axis one copy written backwards through a negative stride, as Vela 5.2 writes the
bands of height and width; the stream waits (BLOCKDEP 0) wherever a copy reads what the copy
before it wrote backwards (``ethos_u.blockdep_guard``)."""
from __future__ import annotations

import numpy as np
import pytest
import tflite
from hypothesis import given, settings
from hypothesis import strategies as st
from operator_models import mirror_pad_of as _model
from test_solitary_movement import compiled_on_the_npu

from ethosu_stream.feature_map import from_registers
from ethosu_stream.registers import RegisterState, decode_stream
from ethosu_stream.run import KERNEL_OPERATIONS
from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from planner.vela_run import run_vela
from tests.helpers.tflite_oracle import inputs_for, oracle, tflm_oracle
from tvm_ethos.backends.ethos_u.mirror_bands import mirror_pad_copies

REFLECT, SYMMETRIC = tflite.MirrorPadMode.REFLECT, tflite.MirrorPadMode.SYMMETRIC


def _run_copies(dims, pads, symmetric: bool, esize: int) -> np.ndarray:
    """The copies executed element by element on index arrays: each output element written
    once, each copy reading only elements already written."""
    x = np.arange(int(np.prod(dims)), dtype=np.int64)
    outs = [n + b + a for n, (b, a) in zip(dims, pads)]
    out = np.full(int(np.prod(outs)), -1, np.int64)
    for cp in mirror_pad_copies(dims, pads, symmetric, esize):
        assert cp.src.shape == cp.dst.shape
        h, w, c = cp.src.shape
        ys, xs, cs = np.arange(h)[:, None, None], np.arange(w)[None, :, None], \
            np.arange(c)[None, None, :]

        def at(box):
            byte = box.offset + ys * box.strides[0] + xs * box.strides[1] + cs * esize
            assert (byte % esize == 0).all()
            return byte // esize

        src, dst = (x if cp.from_input else out)[at(cp.src)], at(cp.dst)
        assert (src >= 0).all(), "a copy reads an element no copy has written"
        assert (out[dst] == -1).all(), "two copies write one element"
        out[dst] = src
    return out.reshape(outs)


@st.composite
def _padded(draw, max_rank: int = 5):
    """A shape of 1 to ``max_rank`` axes, a mode and paddings of every axis (REFLECT: each
    at most the dimension less one; SYMMETRIC: at most the dimension)."""
    symmetric = draw(st.booleans())
    edge = 0 if symmetric else 1
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=max_rank))
    pads = [(draw(st.integers(0, n - edge)), draw(st.integers(0, n - edge))) for n in shape]
    return shape, pads, symmetric


@settings(max_examples=40, deadline=None)
@given(case=_padded(), esize=st.sampled_from([1, 2]))
def test_the_copies_are_numpys_mirror_padding(case, esize):
    shape, pads, symmetric = case
    want = np.pad(np.arange(int(np.prod(shape))).reshape(shape), pads,
                  mode="symmetric" if symmetric else "reflect")
    assert np.array_equal(_run_copies(shape, pads, symmetric, esize), want)


@settings(max_examples=40, deadline=None)
@given(case=_padded(max_rank=3), batch=st.booleans())
def test_every_padded_band_of_up_to_three_axes_is_one_copy(case, batch):
    """Vela's form: the middle and one copy per padded band (its 5 for height and width
    padded on both sides), for any three axes of one batch, whatever their sizes."""
    shape, pads, symmetric = case
    if batch:
        shape, pads = [1] + shape, [(0, 0)] + pads
    bands = sum((b > 0) + (a > 0) for b, a in pads)
    assert len(mirror_pad_copies(shape, pads, symmetric, 1)) == 1 + bands


def _stream(cm, tmp_path) -> list:
    """(BLOCKDEP, bytes read, bytes written, backwards) of each kernel operation of the
    compiled file's one ``ethos-u`` operator."""
    path = tmp_path / "m.tflite"
    cm.export_tflite(path)
    (op,) = read_ethos_u_ops(path.read_bytes())
    state, out = RegisterState(), []
    for cmd in decode_stream(op.words):
        state.apply(cmd)
        if cmd.name not in KERNEL_OPERATIONS:
            continue
        h, w, c = (state.param(f"OFM_{n}_M1") + 1 for n in ("HEIGHT", "WIDTH", "DEPTH"))
        ifm, ofm = from_registers(state, "IFM"), from_registers(state, "OFM")
        read = {(ifm.region, int(a)) for a in ifm.grid(h, w, c).ravel()}
        written = {(ofm.region, int(a)) for a in ofm.grid(h, w, c).ravel()}
        backwards = min(ofm.stride_x, ofm.stride_y, ifm.stride_x, ifm.stride_y) < 0
        out.append((state.param("BLOCKDEP"), read, written, backwards))
    return out


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_the_stream_is_the_bands_and_waits_for_each_band_it_reads(dtype, tmp_path):
    """Height, width and depth padded (SYMMETRIC): 7 copies, each band after the first
    axis's read from the output the copies before wrote backwards, so the copy right after
    such a band waits for it; equal to TFLite Micro (int8) or LiteRT's reference (int16,
    which TFLite Micro's kernel does not take); the stream touching the planned peak."""
    shape, pads = (1, 5, 4, 6), [(0, 0), (2, 1), (1, 3), (2, 2)]
    data = _model(shape, pads, SYMMETRIC, dtype, 0 if dtype == "int16" else 3)
    cm, _ = compiled_on_the_npu(data)
    xs = inputs_for(cm.inputs, np.random.RandomState(5))
    (got,), (want,) = cm.run(*xs), (tflm_oracle if dtype == "int8" else oracle)(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)
    ops = _stream(cm, tmp_path)
    assert len(ops) == len(mirror_pad_copies(shape, pads, True, np.dtype(dtype).itemsize)) == 7
    waits = 0
    for (_, _, written, wrote_back), (blockdep, read, _, reads_back) in zip(ops, ops[1:]):
        if (wrote_back or reads_back) and read & written:
            assert blockdep == 0
            waits += 1
    assert waits >= 2



def _kernel_operations(entry: dict) -> int:
    return sum(n for k, n in entry["commands"].items() if k in KERNEL_OPERATIONS)


@pytest.mark.slow
@settings(max_examples=30, deadline=None)
@given(case=_padded(), dtype=st.sampled_from(["int8", "int16"]), seed=st.integers(0, 2**16))
def test_any_mirror_pad_is_its_bands_planned_as_touched_and_exact(case, dtype, seed):
    """Any rank to 5, either mode, int8 or int16: on the NPU, one operation per copy, the
    stream touching the planned peak, equal to TFLite Micro (int8) or LiteRT's reference
    (int16)."""
    shape, pads, symmetric = case
    data = _model(shape, pads, SYMMETRIC if symmetric else REFLECT, dtype,
                  0 if dtype == "int16" else 3)
    cm, entry = compiled_on_the_npu(data)
    esize = np.dtype(dtype).itemsize
    assert _kernel_operations(entry) == len(mirror_pad_copies(shape, pads, symmetric, esize))
    rs = np.random.RandomState(seed)
    xs = inputs_for(cm.inputs, rs)
    (got,), (want,) = cm.run(*xs), (tflm_oracle if dtype == "int8" else oracle)(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)


# forms whose padding Vela 5.2's stream writes exactly: height and width (its depth and batch
# bands are left unwritten: tests/ethosu_stream/test_vela_mirror_pad.py)
VELA_FORMS = {
    "symmetric_hw": ((1, 8, 8, 8), [(0, 0), (2, 1), (1, 3), (0, 0)], SYMMETRIC),
    "reflect_hw_batch2": ((2, 6, 7, 5), [(0, 0), (3, 1), (0, 4), (0, 0)], REFLECT),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VELA_FORMS))
def test_no_more_operations_or_sram_than_velas_size_build(name, tmp_path):
    """Against Vela 5.2 ``--optimise Size``: no more NPU operations than its passes, no
    more SRAM (touched, emulated) than its "Total SRAM used"; equal to TFLite Micro."""
    shape, pads, mode = VELA_FORMS[name]
    data = _model(shape, pads, mode)
    path = tmp_path / "m.tflite"
    path.write_bytes(data)
    vela = run_vela(str(path), "ethos-u55-128", "--optimise", "Size")
    cm, entry = compiled_on_the_npu(data)
    xs = inputs_for(cm.inputs, np.random.RandomState(7))
    (got,), (want,) = cm.run(*xs), tflm_oracle(data, xs)
    assert np.array_equal(got.reshape(want.shape), want)
    assert _kernel_operations(entry) <= int(float(vela.summary["passes_after_fusing"]))
    assert entry["sram_high_water_bytes"] <= vela.sram_bytes
