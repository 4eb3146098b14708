"""Relocation: a stream moved to other places in its regions runs the same operations on the
same data there, on Vela's own streams (with and without a fast scratch)."""
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ethosu_stream import StreamError, decode_stream
from ethosu_stream.relocate import ADDRESS_REGISTERS, relocate
from ethosu_stream.tflite_custom_op import read_ethos_u_ops

from .streams import c0, c1, stop


def _moved(op, flash: int, arena: int, fast: int):
    """``op`` with its stream relocated and its data placed ``flash``/``arena``/``fast``
    bytes further into regions 0/1/2."""
    words = relocate(op.words, {0: flash, 1: arena, 2: fast})
    return replace(
        op, words=words, flash=bytes(flash) + op.flash,
        scratch_bytes=op.scratch_bytes + arena,
        scratch_fast_bytes=op.scratch_fast_bytes + fast,
        inputs=tuple(replace(s, arena_offset=s.arena_offset + arena) for s in op.inputs),
        outputs=tuple(replace(s, arena_offset=s.arena_offset + arena) for s in op.outputs))


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(config=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]),
       flash=st.integers(0, 4096).map(lambda v: 16 * v),
       arena=st.integers(0, 4096).map(lambda v: 16 * v),
       fast=st.integers(0, 4096).map(lambda v: 16 * v))
def test_a_moved_vela_stream_computes_the_same(vela_out, config, flash, arena, fast):
    data, _ = vela_out("ds_cnn_kws", config)
    op = read_ethos_u_ops(data)[0]
    x = np.random.RandomState(0).randint(-128, 128, op.inputs[0].shape).astype(np.int8)
    want, base = op.run([x], config)
    got, stats = _moved(op, flash, arena, fast).run([x], config)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))
    assert stats.macs == base.macs and stats.dma_bytes == base.dma_bytes
    # the data moved with the stream: every region's high-water mark moved by its offset
    for region, shift in ((0, flash), (1, arena), (2, fast)):
        if region in base.high_water and base.high_water[region]:
            assert stats.high_water[region] == base.high_water[region] + shift
    # only address writes differ
    ops = [(c.name, c.param, c.payload) for c in decode_stream(op.words)
           if c.name[len("NPU_SET_"):] not in ADDRESS_REGISTERS]
    moved = [(c.name, c.param, c.payload) for c in decode_stream(_moved(op, flash, arena,
                                                                        fast).words)
             if c.name[len("NPU_SET_"):] not in ADDRESS_REGISTERS]
    assert ops == moved


def test_a_base_left_from_another_region_moves_with_the_region_in_force():
    """One IFM_BASE0 write read by two operations, the first in region 1, the second in region
    0: each gets its own region's offset."""
    words = (c1("NPU_SET_IFM_BASE0", 64) + c0("NPU_SET_IFM_REGION", 1) + c0("NPU_OP_POOL")
             + c0("NPU_SET_IFM_REGION", 0) + c0("NPU_OP_POOL") + stop())
    cmds = decode_stream(relocate(words, {0: 1000, 1: 16}))
    bases = [c.payload for c in cmds if c.name == "NPU_SET_IFM_BASE0"]
    assert bases == [80, 1064]
    assert [c.name for c in cmds if c.is_operation] == ["NPU_OP_POOL"] * 2 + ["NPU_OP_STOP"]


def test_a_forty_bit_address_keeps_its_high_byte():
    words = c1("NPU_SET_OFM_BASE0", 0xFFFFFFF0, param=0x01) + c0("NPU_SET_OFM_REGION", 1) + \
        c0("NPU_OP_POOL") + stop()
    (cmd,) = [c for c in decode_stream(relocate(words, {1: 0x20})) if c.name.endswith("BASE0")]
    assert ((cmd.param & 0xFF) << 32 | cmd.payload) == 0x1_FFFF_FFF0 + 0x20


def test_an_address_moved_out_of_range_names_the_command():
    words = c1("NPU_SET_DMA0_SRC", 0, param=0xFF) + c1("NPU_SET_DMA0_SRC", 0xFFFFFFFF, 0xFF) \
        + c0("NPU_SET_DMA0_SRC_REGION", 0) + c0("NPU_OP_DMA_START") + stop()
    with pytest.raises(StreamError, match=r"command #3 \(NPU_OP_DMA_START\).*40-bit"):
        relocate(words, {0: 1})
