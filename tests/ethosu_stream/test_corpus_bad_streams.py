"""Each kind of bad stream or bad Vela file ends in one StreamError that says where (the
command's index, or the operator and tensor) and what is wrong: a Vela stream (ds_cnn_kws
for ethos-u55-128) with one thing broken at a time."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import flatbuffers
import numpy as np
import pytest
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

from ethosu_stream import StreamError, decode_stream
from ethosu_stream.registers import PARAM_MAX, opcode_tables
from ethosu_stream.run import BLOCK_MAX
from ethosu_stream.tflite_custom_op import MAX_ARENA_BYTES, read_ethos_u_ops
from ethosu_stream.tflite_graph import TfliteGraph

CONFIG = "ethos-u55-128"


@pytest.fixture(scope="module")
def vela_file(tmp_path_factory, models_dir):
    out = tmp_path_factory.mktemp("bad")
    vela = Path(sys.executable).parent / "vela"
    subprocess.run([str(vela), str(models_dir / "ds_cnn_kws.tflite"), "--accelerator-config",
                    CONFIG, "--output-dir", str(out)], check=True, capture_output=True)
    return (out / "ds_cnn_kws_vela.tflite").read_bytes()


def _input(op):
    return [np.random.RandomState(0).randint(-128, 128, s.shape).astype(s.dtype)
            for s in op.inputs]


def _run(op, words):
    return replace(op, words=np.asarray(words, np.int64)).run(_input(op), CONFIG)


def _first(cmds, name, after=0):
    return next(c for c in cmds if c.name == name and c.index >= after)


def _next_operation(cmds, after, names=("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL",
                                        "NPU_OP_ELEMENTWISE")):
    return next(c for c in cmds if c.index > after and c.name in names)


def _with_param(words, cmd, param):
    words = np.asarray(words, np.int64).copy()
    words[cmd.word] = (int(words[cmd.word]) & 0xFFFF) | (param << 16)
    return words


def test_the_unbroken_stream_runs(vela_file):
    op = read_ethos_u_ops(vela_file)[0]
    outs, stats = _run(op, op.words)
    assert stats.commands["NPU_OP_STOP"] == 1 and outs[0].size


def test_an_unknown_opcode_names_the_command(vela_file):
    op = read_ethos_u_ops(vela_file)[0]
    cmds = decode_stream(op.words)
    unused = next(o for o in range(0x3FF) if o not in opcode_tables()[0])
    target = cmds[len(cmds) // 2]
    words = op.words.copy()
    words[target.word] = unused  # a cmd0 word with an opcode no register has
    with pytest.raises(StreamError, match=rf"^command #{target.index}: unknown cmd0 opcode "
                                          rf"0x{unused:03x}"):
        _run(op, words)


def test_a_register_value_out_of_range_names_the_operation(vela_file):
    op = read_ethos_u_ops(vela_file)[0]
    cmds = decode_stream(op.words)
    reg = _first(cmds, "NPU_SET_IFM_REGION")
    user = _next_operation(cmds, reg.index)
    words = _with_param(op.words, reg, PARAM_MAX["IFM_REGION"] + 1)
    with pytest.raises(StreamError, match=rf"^command #{user.index} \({user.name}\): register "
                                          r"value out of range: NPU_SET_IFM_REGION is 8, past 7"):
        _run(op, words)


def test_an_address_past_its_region_names_the_operation(vela_file):
    op = read_ethos_u_ops(vela_file)[0]
    cmds = decode_stream(op.words)
    base = _first(cmds, "NPU_SET_OFM_BASE0")
    user = _next_operation(cmds, base.index)
    words = op.words.copy()
    words[base.word + 1] = 0x7FFF0000  # the payload: an OFM far past the scratch arena
    with pytest.raises(StreamError, match=rf"^command #{user.index} \({user.name}\): .*the OFM "
                                          r".*past its end"):
        _run(op, words)


@pytest.mark.parametrize("cut", ["mid-cmd1", "before-stop"])
def test_a_stream_cut_short_names_the_command(vela_file, cut):
    op = read_ethos_u_ops(vela_file)[0]
    cmds = decode_stream(op.words)
    if cut == "mid-cmd1":  # a cmd1 without its payload word
        last = [c for c in cmds if c.is_cmd1][-1]
        words, index = op.words[:last.word + 1], last.index
    else:
        words, index = op.words[:-1], len(cmds) - 2
    with pytest.raises(StreamError, match=rf"^command #{index} .*cut short"):
        _run(op, words)


@pytest.mark.parametrize("register,param,what", [
    ("NPU_SET_OFM_BLK_DEPTH_M1", BLOCK_MAX[2], r"gives 129, past the NPU's largest OFM block"),
    ("NPU_SET_OFM_BLK_HEIGHT_M1", BLOCK_MAX[0], r"gives 33, past the NPU's largest OFM block"),
    ("NPU_SET_OFM_BLK_DEPTH_M1", 4, r"depth 5 is not a multiple of .*micro-block depth 8"),
    ("NPU_SET_AB_START", 200, r"accumulators start at SHRAM bank 200, past"),
    ("NPU_SET_IFM_IB_END", 60, r"input buffer ends at SHRAM bank 60, after the accumulators"),
])
def test_an_illegal_block_config_names_the_operation(vela_file, register, param, what):
    op = read_ethos_u_ops(vela_file)[0]
    cmds = decode_stream(op.words)
    reg = _first(cmds, register)
    user = _next_operation(cmds, reg.index)
    with pytest.raises(StreamError, match=rf"^command #{user.index} \({user.name}\): illegal "
                                          rf"block config: .*{what}"):
        _run(op, _with_param(op.words, reg, param))


def _edit(data: bytes, change) -> bytes:
    """``data`` with ``change(model, subgraph, ethos-u operator)`` applied (object API)."""
    model = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
    g = model.subgraphs[0]
    op = next(o for o in g.operators
              if model.operatorCodes[o.opcodeIndex].customCode == b"ethos-u")
    change(model, g, op)
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_a_repacked_file_still_runs(vela_file):
    """The editing below changes only what each test breaks."""
    x = _input(read_ethos_u_ops(vela_file)[0])
    want, _ = TfliteGraph(vela_file, CONFIG).run(x)
    got, _ = TfliteGraph(_edit(vela_file, lambda m, g, op: None), CONFIG).run(x)
    assert np.array_equal(got[0], want[0])


def _drop_metadata(m, g, op):
    m.metadata = [md for md in m.metadata if md.name != b"OfflineMemoryAllocation"]


def _short_metadata(m, g, op):
    md = next(md for md in m.metadata if md.name == b"OfflineMemoryAllocation")
    m.buffers[md.buffer].data = m.buffers[md.buffer].data[:-4]


def _stream_type(m, g, op):
    g.tensors[op.inputs[0]].type = schema.TensorType.INT8


def _fm_type(m, g, op):
    g.tensors[op.inputs[4]].type = schema.TensorType.FLOAT32


def _few_inputs(m, g, op):
    op.inputs = op.inputs[:3]


def _huge_scratch(m, g, op):
    g.tensors[op.inputs[2]].shape = [MAX_ARENA_BYTES + 1]


def _huge_input(m, g, op):
    g.tensors[op.inputs[4]].shape = [1, 65536, 65536, 1]


@pytest.mark.parametrize("change,message", [
    (_drop_metadata, r"no OfflineMemoryAllocation metadata"),
    (_short_metadata, r"OfflineMemoryAllocation metadata announces \d+ offsets but holds"),
    (_stream_type, r"ethos-u operator 0: its command stream tensor \d+ has TFLite type 9, "
                   r"not UINT8"),
    (_fm_type, r"ethos-u operator 0: feature map tensor \d+ .* has TFLite type 0"),
    (_few_inputs, r"ethos-u operator 0 has 3 input\(s\) and 1 output\(s\); Vela's has 4"),
    (_huge_scratch, rf"ethos-u operator 0: the scratch tensor \d+ of shape "
                    rf"\[{MAX_ARENA_BYTES + 1}\] needs more than the \d+-byte limit "
                    r"\(MAX_ARENA_BYTES\)"),
    (_huge_input, r"feature map tensor \d+ .* needs more than the \d+-byte limit "
                  r"\(MAX_ARENA_BYTES\)"),
])
def test_a_bad_ethos_u_operator_is_refused(vela_file, change, message):
    with pytest.raises(StreamError, match=message):
        TfliteGraph(_edit(vela_file, change), CONFIG)


@pytest.mark.parametrize("cut", [0, 7, 100, 1000])
def test_a_cut_file_is_refused(vela_file, cut):
    with pytest.raises(StreamError, match=r"\.tflite|TFL3|cut short|payload"):
        TfliteGraph(vela_file[:cut], CONFIG).run(_input(read_ethos_u_ops(vela_file)[0]))
