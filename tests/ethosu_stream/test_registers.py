"""Decoding and the errors bad streams end in."""
import numpy as np
import pytest
from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1
from ethosu.vela.register_command_stream_generator import CommandStreamEmitter
from hypothesis import given, settings
from hypothesis import strategies as st

from ethosu_stream import Memory, RegisterState, StreamError, decode_stream, run_stream

from .streams import c0, c1, dma, stop

SET0 = [e.name for e in cmd0 if e.name.startswith("NPU_SET_")]
SET1 = [e.name for e in cmd1]

commands = st.one_of(
    st.tuples(st.just(0), st.sampled_from(SET0), st.integers(0, 0xFFFF), st.just(0)),
    st.tuples(st.just(1), st.sampled_from(SET1), st.integers(0, 0xFF), st.integers(0, 2**32 - 1)))


def _words(cmds):
    out = []
    for kind, name, param, payload in cmds:
        out += c0(name, param) if kind == 0 else c1(name, payload, param)
    return out + stop()


@settings(max_examples=60, deadline=None)
@given(st.lists(commands, max_size=30))
def test_decode_recovers_every_command(cmds):
    decoded = decode_stream(_words(cmds))
    assert [(c.name.startswith("NPU_SET") and c.name) for c in decoded[:-1]] == [
        n for _, n, _, _ in cmds
    ]
    for c, (kind, name, param, payload) in zip(decoded, cmds):
        assert (c.is_cmd1, c.param) == (kind == 1, param)
        if kind:
            assert c.payload == payload
    assert decoded[-1].name == "NPU_OP_STOP"


@settings(max_examples=60, deadline=None)
@given(st.lists(commands, max_size=30))
def test_register_state_keeps_the_last_write(cmds):
    state = RegisterState()
    for c in decode_stream(_words(cmds)):
        if not c.is_operation:
            state.apply(c)
    last = {}
    for kind, name, param, payload in cmds:
        last[name[len("NPU_SET_"):]] = (kind, param, payload)
    for reg, (kind, param, payload) in last.items():
        assert state.param(reg) == param
        if kind:
            assert state.address(reg) == payload | (param << 32)


@settings(max_examples=60, deadline=None)
@given(st.integers(-(2**39), 2**39 - 1),
       st.sampled_from(["IFM_STRIDE_X", "IFM_STRIDE_Y", "OFM_STRIDE_Y", "OFM_STRIDE_X",
                        "IFM2_STRIDE_C"]))
def test_a_stride_reads_back_as_the_signed_value_velas_emitter_wrote(stride, reg):
    """Vela's emitter writes a stride as a 40-bit address (the legacy core sets the whole
    parameter to its bits 32-47, the C++ core only bits 32-39): either way a negative stride
    (MIRROR_PAD's mirrored copies) reads back negative, and an address stays unsigned."""
    emit = CommandStreamEmitter()
    emit.cmd1_with_address(getattr(cmd1, f"NPU_SET_{reg}"), stride)
    (legacy,) = emit.cmd_stream
    cpp = c1(f"NPU_SET_{reg}", stride, (stride >> 32) & 0xFF)
    for words in (list(legacy), cpp):
        state = RegisterState()
        state.apply(decode_stream(words + stop())[0])
        assert state.stride(reg) == stride
        assert state.address(reg) == stride % 2**40


@settings(max_examples=60, deadline=None)
@given(st.lists(commands, min_size=1, max_size=20), st.data())
def test_any_cut_short_stream_names_a_command(cmds, data):
    words = _words(cmds)
    cut = data.draw(st.integers(1, len(words) - 1))
    with pytest.raises(StreamError, match=r"command #\d+.*cut short"):
        decode_stream(words[:cut])


def test_unknown_opcode_names_its_index():
    words = c0("NPU_SET_IFM_PAD_TOP", 1) + [0x0003F] + stop()  # 0x03F is no cmd0 opcode
    with pytest.raises(StreamError, match=r"command #1: unknown cmd0 opcode 0x03f"):
        decode_stream(words)
    with pytest.raises(StreamError, match=r"command #0: unknown cmd1 opcode"):
        decode_stream([0x4000 | 0x3F, 0] + stop())


def test_reserved_bits_and_words_after_stop():
    with pytest.raises(StreamError, match=r"command #0: word 0 .* reserved bits"):
        decode_stream([0x0C00] + stop())
    with pytest.raises(StreamError, match=r"command #0 \(NPU_OP_STOP\).*follow NPU_OP_STOP"):
        decode_stream(stop() + [0])


def test_dma_copies_and_counts_bytes():
    mem = Memory({0: np.arange(64, dtype=np.uint8), 1: 64})
    stats = run_stream(dma(0, 16, 1, 32, 8) + stop(), mem)
    assert list(mem.regions[1][32:40]) == list(range(16, 24))
    assert stats.dma_bytes == {(0, 1): 8}
    assert stats.high_water[1] == 40
    assert stats.commands["NPU_OP_DMA_START"] == 1


def test_address_past_a_region_end_names_the_command():
    mem = Memory({0: 64, 1: 64})
    words = dma(0, 0, 1, 0, 8) + dma(0, 60, 1, 0, 8) + stop()
    with pytest.raises(StreamError, match=r"command #11 \(NPU_OP_DMA_START\): the DMA source "
                                          r"reaches bytes \[60, 68\) of region 0, past its end"):
        run_stream(words, mem)


def test_unmapped_region_names_the_command():
    with pytest.raises(
        StreamError, match=r"command #5 \(NPU_OP_DMA_START\): region 5 is not mapped"
    ):
        run_stream(dma(5, 0, 1, 0, 8) + stop(), Memory({1: 64}))


def test_operation_on_an_unmapped_ifm_region_is_one_error():
    words = (c0("NPU_SET_IFM_REGION", 6) + c0("NPU_SET_OFM_REGION", 1) + c0("NPU_OP_POOL", 0)
             + stop())
    with pytest.raises(StreamError, match=r"command #2 \(NPU_OP_POOL\): region 6 is not mapped"):
        run_stream(words, Memory({1: 64}))


@settings(max_examples=30, deadline=None)
@given(st.lists(commands, max_size=30))
def test_driver_payload_yields_the_stream_vela_wrapped(cmds):
    from ethosu.vela.api import NpuAccelerator, npu_create_driver_payload

    from ethosu_stream.tflite_custom_op import command_words

    words = _words(cmds)
    payload = npu_create_driver_payload(words, NpuAccelerator.Ethos_U55_128)
    assert command_words(payload).tolist() == words
    with pytest.raises(StreamError, match="cut short"):
        command_words(payload[:-4])


def test_driver_payload_must_be_cop1():
    from ethosu_stream.tflite_custom_op import command_words

    with pytest.raises(StreamError, match="does not start with 'COP1'"):
        command_words(b"COP2" + bytes(12))
    with pytest.raises(StreamError, match="unknown driver action 9"):
        command_words(b"COP1" + (9).to_bytes(4, "little"))
