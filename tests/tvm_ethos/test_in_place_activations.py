"""An activation written over its own input (``planner.aliases.in_place``): as Vela lets an
elementwise operation's OFM take its IFM's live range, a lone LOGISTIC, TANH, RELU6, ... on
the Ethos-U55 holds its tensor once (Vela 5.2 Size's SRAM, not twice it). Safe because the
NPU reads every element of a block before it writes that block's output, at the same
addresses: on the functional model, for every block configuration Vela lists, the operation
in place equals it out of place; compiled, the file's input and output share one arena
offset and TFLite Micro runs it exactly."""
from __future__ import annotations

import numpy as np
import operator_models
import pytest
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tflite_exp_log16 import model as float_table16_model

import tvm_ethos
from ethos_arch.ops import Op
from ethosu_stream import Memory, run_stream
from ethosu_stream.accelerator import accelerator_info
from ethosu_stream.memory import SHRAM_REGION
from ethosu_stream.run import KERNEL_OPERATIONS
from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from tests.helpers.tflite_oracle import inputs_for, oracle, tflm_oracle
from tvm_ethos.backends.ethos_u import ops_lut
from tvm_ethos.backends.ethos_u.npu_ops import FmSlot
from tvm_ethos.backends.ethos_u.stream_base import Flash, lut_address, npu_accelerator, vela_api
from tvm_ethos.compute.int16_activation import int16_lut
from tvm_ethos.patterns import QOp

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")


def _table_op_on_the_functional_model(x: np.ndarray, kind: Op, accelerator: str,
                                      out_at: int, pick) -> np.ndarray:
    """``kind``'s table operation (``ops_lut``) over ``x`` at offset 0 of the scratch, its
    output at ``out_at`` (0: in place), the block configuration ``pick`` chooses from those
    Vela lists; the output's bytes."""
    api = vela_api()
    h, w, c = x.shape
    q = QOp(kind=kind, inputs=[], in_shapes=[(1, h, w, c)], in_dtypes=["int8"],
            out_shape=(1, h, w, c), out_dtype="int8", in_q=[(0.05, 3)],
            out_q=(1 / 256, -128) if kind == Op.SIGMOID else (1 / 128, 0),
            attrs={"alpha": 0.2, "approximate": False})
    flash = Flash()
    dma = ops_lut.lut_dma(q, flash, lut_address(accelerator))
    npu = ops_lut.npu_op(q, FmSlot(1, 0, (h, w, c), "int8", 0.05, 3),
                         FmSlot(1, out_at, (h, w, c), "int8", *q.out_q))
    acc = npu_accelerator(accelerator)
    npu.block_config = pick(api.npu_find_block_configs(npu, acc))
    scratch = np.zeros(out_at + x.nbytes, np.uint8)
    scratch[:x.nbytes] = x.reshape(-1).view(np.uint8)
    mem = Memory({0: np.frombuffer(bytes(flash.data), np.uint8).copy(), 1: scratch,
                  SHRAM_REGION: np.zeros(accelerator_info(accelerator).shram_bytes, np.uint8)})
    run_stream(api.npu_generate_register_command_stream([dma, npu], acc), mem, accelerator)
    return mem.regions[1][out_at:out_at + x.nbytes].view(np.int8).reshape(x.shape).copy()


@settings(max_examples=12, deadline=None)
@given(h=st.integers(1, 24), w=st.integers(1, 24), c=st.integers(1, 70),
       kind=st.sampled_from([Op.SIGMOID, Op.TANH, Op.HARD_SWISH, Op.LEAKY_RELU, Op.EXP, Op.LOG,
                             Op.GELU, Op.RSQRT]),
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]),
       data=st.data())
def test_a_table_operation_over_its_own_input_equals_it_out_of_place(h, w, c, kind,
                                                                   accelerator, data):
    x = np.random.RandomState(h * 100 + w).randint(-128, 128, (h, w, c)).astype(np.int8)
    index = data.draw(st.integers(0, 1 << 16))

    def pick(configs):
        return configs[index % len(configs)]

    apart = _table_op_on_the_functional_model(x, kind, accelerator, -(-x.nbytes // 16) * 16,
                                              pick)
    assert np.array_equal(_table_op_on_the_functional_model(x, kind, accelerator, 0, pick),
                          apart)


#: the int16 LOGISTIC / TANH quantizations (the kernels' special case 2**-12, output 2**-15)
_IN16_Q, _OUT16_Q = (2.0**-12, 0), (2.0**-15, 0)


def _activation16_q(kind: Op, shape) -> QOp:
    return QOp(kind=kind, inputs=[], in_shapes=[(1, *shape)], in_dtypes=["int16"],
               out_shape=(1, *shape), out_dtype="int16", in_q=[_IN16_Q], out_q=_OUT16_Q)


def _activation16_on_the_functional_model(x: np.ndarray, kind: Op, accelerator: str,
                                          out_at: int, pick) -> np.ndarray:
    """An int16 LOGISTIC / TANH (``ops_lut.activation16_op``) over ``x`` at offset 0 of the
    scratch, its output at ``out_at`` (0: in place), the block configuration ``pick``
    chooses from those Vela lists; the output's codes."""
    api = vela_api()
    npu = ops_lut.activation16_op(_activation16_q(kind, x.shape),
                                  FmSlot(1, 0, x.shape, "int16", *_IN16_Q),
                                  FmSlot(1, out_at, x.shape, "int16", *_OUT16_Q))
    acc = npu_accelerator(accelerator)
    npu.block_config = pick(api.npu_find_block_configs(npu, acc))
    scratch = np.zeros(out_at + x.nbytes, np.uint8)
    scratch[:x.nbytes] = x.reshape(-1).view(np.uint8)
    mem = Memory({1: scratch,
                  SHRAM_REGION: np.zeros(accelerator_info(accelerator).shram_bytes, np.uint8)})
    run_stream(api.npu_generate_register_command_stream([npu], acc), mem, accelerator)
    return mem.regions[1][out_at:out_at + x.nbytes].view(np.int16).reshape(x.shape).copy()


@settings(max_examples=8, deadline=None)
@given(h=st.integers(1, 24), w=st.integers(1, 24), c=st.integers(1, 70),
       kind=st.sampled_from([Op.SIGMOID, Op.TANH]),
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]),
       data=st.data())
def test_an_int16_activation_over_its_own_input_equals_it_out_of_place(h, w, c, kind,
                                                                     accelerator, data):
    x = np.random.RandomState(h * 100 + w).randint(-32768, 32768, (h, w, c)).astype(np.int16)
    index = data.draw(st.integers(0, 1 << 16))

    def pick(configs):
        return configs[index % len(configs)]

    apart = _activation16_on_the_functional_model(x, kind, accelerator,
                                                  -(-x.nbytes // 16) * 16, pick)
    assert np.array_equal(apart, int16_lut(kind, _IN16_Q, _OUT16_Q)[x.astype(np.int64) + 32768])
    assert np.array_equal(_activation16_on_the_functional_model(x, kind, accelerator, 0, pick),
                          apart)


#: the one-operator models the int16 forms are read from (the table's own test's shapes)
_INT16 = {"exp_int16": (Op.EXP, (2e-4, 0), (3e-3, 0)), "log_int16": (Op.LOG, (1e-3, 0), (2e-4, 0))}
#: int16 LOGISTIC / TANH models (``tb.activation``'s kinds)
_ACTIVATION16 = {"logistic_int16": "sigmoid", "tanh_int16": "tanh"}


@pytest.mark.parametrize("name,budget,ref", [
    ("logistic", "smallest", "tflm"), ("tanh", "smallest", "tflm"),
    ("relu6", "smallest", "tflm"), ("relu6", None, "tflm"), ("relu", "smallest", "tflm"),
    ("hard_swish", None, "tflm"), ("leaky_relu", "smallest", "tflm"),
    ("rsqrt", "smallest", "tflm"), ("exp", "smallest", "litert"),
    ("log", "smallest", "litert"), ("gelu", "smallest", "litert"),
    ("exp_int16", "smallest", "litert"), ("log_int16", "smallest", "litert"),
    ("logistic_int16", "smallest", "tflm"), ("tanh_int16", None, "tflm")])
def test_a_lone_activation_holds_its_tensor_once_and_equals_tflite_micro(name, budget, ref):
    """On an Ethos-U55 the stream writes the output over the input: the SRAM touched is the
    tensor's bytes (Vela 5.2 Size's), the file's input and output share one arena offset,
    and the oracle runs the file exactly: TFLite Micro, or LiteRT's reference kernels for
    the operators TFLite Micro has no int8 / int16 kernel of (EXP, LOG, GELU)."""
    if name in _INT16:
        kind, in_q, out_q = _INT16[name]
        data = float_table16_model(kind, in_q, out_q, (1, 8, 8, 8))
    elif name in _ACTIVATION16:
        data = tb.activation(_ACTIVATION16[name], (1, 8, 8, 8), _IN16_Q, _OUT16_Q, dtype="int16")
    else:
        data = getattr(operator_models, name)()
    kw = {"budget": budget} if budget else {}
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, **kw)
    (entry,) = cm.plan_report["streams"].values()
    nbytes = int(np.prod(cm.inputs[0].shape)) * np.dtype(cm.inputs[0].dtype).itemsize
    assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"] == nbytes, entry
    # one operation over the whole tensor, as Vela runs it (planner.whole_on_a_tie)
    assert sum(n for k, n in entry["commands"].items() if k in KERNEL_OPERATIONS) == 1, entry
    (op,) = read_ethos_u_ops(cm.tflite)
    assert [s.arena_offset for s in op.inputs] == [s.arena_offset for s in op.outputs] == [0]
    assert op.scratch_bytes == nbytes
    rs = np.random.RandomState(1)
    for _ in range(2):
        xs = inputs_for(cm.inputs, rs)
        want = (tflm_oracle(data, xs) if ref == "tflm" else oracle(data, xs))[0]
        assert np.array_equal(cm.run(*xs)[0].reshape(want.shape), want)


def _block_by_block(scratch: np.ndarray, shape, block, out_at: int, table: np.ndarray,
                    dtype=np.int8) -> None:
    """The NPU's order for a 1x1 operation of NHWC maps of ``dtype``: OFM blocks (height,
    width, depth) of ``block``, rows, then columns, then depth slices; each reads its IFM box
    (the same box: 1x1, stride 1, no padding) from memory as it is at that moment, then
    writes its OFM box at byte ``out_at``, each code ``v`` as ``table[v - min]`` (the
    functional model computes an operation whole, so the order is modelled here)."""
    h, w, c = shape
    bh, bw, bc = block
    size, low = np.dtype(dtype).itemsize, int(np.iinfo(dtype).min)

    def view(at):
        return np.lib.stride_tricks.as_strided(scratch[at:].view(dtype), (h, w, c),
                                               (w * c * size, c * size, size))

    for y in range(0, h, bh):
        for x in range(0, w, bw):
            for z in range(0, c, bc):
                box = (slice(y, y + bh), slice(x, x + bw), slice(z, z + bc))
                codes = view(0)[box].astype(np.int64) - low
                view(out_at)[box] = table[codes]


@settings(max_examples=30, deadline=None)
@given(h=st.integers(1, 24), w=st.integers(1, 24), c=st.integers(1, 70), data=st.data())
def test_every_block_reads_its_input_before_any_block_writes_over_it(h, w, c, data):
    """In place, block by block in the NPU's order and for every OFM block Vela lists for
    the table operation, the output is the table of the input: each block writes only the
    bytes it has just read."""
    api = vela_api()
    acc = "ethos-u55-128"
    q = QOp(kind=Op.SIGMOID, inputs=[], in_shapes=[(1, h, w, c)], in_dtypes=["int8"],
            out_shape=(1, h, w, c), out_dtype="int8", in_q=[(0.05, 3)], out_q=(1 / 256, -128))
    npu = ops_lut.npu_op(q, FmSlot(1, 0, (h, w, c), "int8", 0.05, 3),
                         FmSlot(1, 0, (h, w, c), "int8", 1 / 256, -128))
    configs = api.npu_find_block_configs(npu, npu_accelerator(acc))
    b = configs[data.draw(st.integers(0, len(configs) - 1))]
    table = ops_lut.table(q).astype(np.int8)
    x = np.random.RandomState(c).randint(-128, 128, (h, w, c)).astype(np.int8)
    scratch = np.zeros(x.nbytes + c, np.uint8)
    scratch[:x.nbytes] = x.reshape(-1).view(np.uint8)
    _block_by_block(scratch, (h, w, c), (b.height, b.width, b.depth), 0, table)
    assert np.array_equal(scratch[:x.nbytes].view(np.int8).reshape(x.shape),
                          table[x.astype(np.int16) + 128])


@settings(max_examples=30, deadline=None)
@given(h=st.integers(1, 24), w=st.integers(1, 24), c=st.integers(1, 70),
       kind=st.sampled_from([Op.SIGMOID, Op.TANH]), data=st.data())
def test_every_int16_activation_block_reads_its_input_before_any_block_writes_over_it(
        h, w, c, kind, data):
    """The same for an int16 LOGISTIC / TANH (one pool carrying the output unit's
    activation) and every OFM block Vela lists for it: two bytes an element in both maps,
    each block writes only the bytes it has just read."""
    api = vela_api()
    q = _activation16_q(kind, (h, w, c))
    npu = ops_lut.activation16_op(q, FmSlot(1, 0, (h, w, c), "int16", *_IN16_Q),
                                  FmSlot(1, 0, (h, w, c), "int16", *_OUT16_Q))
    configs = api.npu_find_block_configs(npu, npu_accelerator("ethos-u55-128"))
    b = configs[data.draw(st.integers(0, len(configs) - 1))]
    table = int16_lut(kind, _IN16_Q, _OUT16_Q)
    x = np.random.RandomState(c).randint(-32768, 32768, (h, w, c)).astype(np.int16)
    scratch = np.zeros(x.nbytes + 2 * c, np.uint8)
    scratch[:x.nbytes] = x.reshape(-1).view(np.uint8)
    _block_by_block(scratch, (h, w, c), (b.height, b.width, b.depth), 0, table, np.int16)
    assert np.array_equal(scratch[:x.nbytes].view(np.int16).reshape(x.shape),
                          table[x.astype(np.int64) + 32768])


def test_the_block_model_catches_an_output_one_pixel_past_its_input():
    """The same blocks with the output one pixel further on: a block overwrites the next
    pixel before its block reads it, so the order matters and the model shows it."""
    x = np.arange(-128, 128, dtype=np.int16).reshape(4, 8, 8).astype(np.int8)
    table = np.roll(np.arange(-128, 128, dtype=np.int16), 7).astype(np.int8)
    scratch = np.zeros(x.nbytes + 8, np.uint8)
    scratch[:x.nbytes] = x.reshape(-1).view(np.uint8)
    _block_by_block(scratch, x.shape, (2, 2, 8), 8, table)
    got = scratch[8:8 + x.nbytes].view(np.int8).reshape(x.shape)
    assert not np.array_equal(got, table[x.astype(np.int16) + 128])
