"""benchmarks/stream_registers.py: where a command stream's bytes go, read off Vela 5.2's own
stream of a corpus model. Its counts must add up to the stream, and what it finds must hold
for Vela's generator: no register written with the value it holds, and no write unread by
the functional model but the few registers the model does not read (rfcs/0007, "Stream bytes
per operation")."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.stream_registers import (
    count,
    group,
    operation_bytes,
    sizes_table,
    stream_operation_bytes,
    table,
    unread_writes,
)
from ethosu_stream.registers import decode_stream
from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from ethosu_stream.vela_defs import regs
from tests.ethosu_stream.corpus import NOT_BUILT, compiled_cases

pytest.importorskip("ethosu.vela")

#: registers the functional model does not read before some operations: how far an operation
#: overlaps the one before, the IFM depth of a depthwise, pool or elementwise operation
#: (their OFM's), the IFM2 buffer start of a scalar elementwise, the accumulator format
UNREAD = {"BLOCKDEP", "IFM_DEPTH_M1", "IFM2_IB_START", "ACC_FORMAT"}


def _vela_file(model: str, optimise: str) -> bytes:
    for case, path in compiled_cases():
        if (case.version, case.model, case.config, case.optimise) == (
                "5.2.0", model, "ethos-u55-128", optimise):
            return path.read_bytes()
    pytest.skip(NOT_BUILT)


@pytest.mark.parametrize("optimise", ["Size", "Performance"])
def test_vela_writes_no_register_twice_and_leaves_none_unread(optimise):
    data = _vela_file("resnet8_cifar", optimise)
    c = count(data)
    streams = [op.words for op in read_ethos_u_ops(data)]
    assert sum(c.bytes.values()) == sum(4 * len(w) for w in streams)
    assert c.operations == sum(cmd.name in ("NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL",
                                            "NPU_OP_ELEMENTWISE")
                               for w in streams for cmd in decode_stream(w))
    assert c.same_value_writes == 0
    assert all(group(name) != "other" for name in c.bytes), sorted(c.bytes)
    unread = unread_writes(data, "ethos-u55-128")
    assert {reg for reg, _ in unread} <= UNREAD, unread
    assert "total" in table(c, c, registers=True)


_COMMANDS = ("NPU_SET_IFM_PAD_TOP", "NPU_SET_BLOCKDEP", "NPU_OP_DMA_START", "NPU_OP_DMA_WAIT",
             "NPU_SET_IFM_BASE0", "NPU_SET_DMA0_SRC", "NPU_OP_CONV", "NPU_OP_ELEMENTWISE")


@given(names=st.lists(st.sampled_from(_COMMANDS), max_size=40), param=st.integers(0, 0xFFFF))
@settings(max_examples=100, deadline=None)
def test_each_operation_takes_the_commands_since_the_one_before(names, param):
    """Encoded by hand (a cmd0 is one word, a cmd1 two), every command up to a kernel
    operation counts toward it; the commands after the last one, NPU_OP_STOP included,
    toward none."""
    r = regs()
    words, want, pending = [], [], 0
    for name in names:
        if hasattr(r.cmd1, name):
            words += [getattr(r.cmd1, name).value | 0x4000 | param << 16, param]
            pending += 8
        else:
            words.append(getattr(r.cmd0, name).value | param << 16)
            pending += 4
        if name in ("NPU_OP_CONV", "NPU_OP_ELEMENTWISE"):
            want.append(pending)
            pending = 0
    words.append(r.cmd0.NPU_OP_STOP.value)
    assert stream_operation_bytes(words) == want
    lines = sizes_table(want, []).splitlines()[2:]
    assert sum(int(line.split()[-4]) for line in lines) == len(want)
    assert sum(int(line.split()[-3].replace(",", "")) for line in lines) == sum(want)


def test_vela_sizes_add_up_to_its_operations():
    data = _vela_file("resnet8_cifar", "Size")
    sizes = operation_bytes(data)
    assert len(sizes) == count(data).operations
    assert min(sizes) >= 4 + 8  # an operation and at least one address of its own
