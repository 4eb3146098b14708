"""The output unit's int16 tanh and sigmoid (ACTIVATION function 3 and 4, rfcs/0007 section 7
rule 11) against TFLite Micro's int16 TANH / LOGISTIC kernels: the forms Vela writes (an
identity average pool scaled to 1/(3 * 4096), an LSTM gate's ADD with the activation fused,
and Vela's own lowering of a one-operator model), every int16 input at the power-of-two input
scales TFLite Micro special-cases, Hypothesis over the other scales; and the forms the model
does not know refused by name."""

import flatbuffers
import numpy as np
import pytest
from ethosu.vela import api
from hypothesis import given, settings
from hypothesis import strategies as st
from tflite_micro.python.tflite_micro import runtime
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

from ethosu_stream import Memory, StreamError, decode_stream, run_stream
from ethosu_stream.tflite_custom_op import read_ethos_u_ops
from ethosu_stream.tflite_graph import run_vela_model
from tests.helpers.vela_cli import vela_compile

from .streams import c0

ACC = api.NpuAccelerator.Ethos_U55_128
ACC_NAME = "ethos-u55-128"
FLASH, SCRATCH = 0, 1
INT16 = (-(1 << 15), (1 << 15) - 1)
Q15 = 1 / 32768
#: kind -> (TFLite builtin, Vela API activation, ACTIVATION function field)
OPS = {"tanh": (schema.BuiltinOperator.TANH, api.NpuActivationOp.TANH, 3),
       "sigmoid": (schema.BuiltinOperator.LOGISTIC, api.NpuActivationOp.SIGMOID, 4)}


# ------------------------------------------------------------------ TFLite Micro's side
def _tensor(shape, scale):
    t = schema.TensorT()
    t.shape, t.type, t.buffer = list(shape), schema.TensorType.INT16, 0
    t.quantization = schema.QuantizationParametersT()
    t.quantization.scale, t.quantization.zeroPoint = [scale], [0]
    return t


def _model(tensors, ops, inputs, outputs) -> bytes:
    """A model of int16 ``tensors`` and ``ops`` ((builtin, inputs, outputs), in order)."""
    m = schema.ModelT()
    m.version, m.buffers = 3, [schema.BufferT()]
    codes = list(dict.fromkeys(code for code, _, _ in ops))
    m.operatorCodes = []
    for code in codes:
        oc = schema.OperatorCodeT()
        oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = code, min(code, 127), 1
        m.operatorCodes.append(oc)
    g = schema.SubGraphT()
    g.tensors, g.inputs, g.outputs, g.operators = tensors, inputs, outputs, []
    for code, ins, outs in ops:
        op = schema.OperatorT()
        op.opcodeIndex, op.inputs, op.outputs = codes.index(code), ins, outs
        g.operators.append(op)
    m.subgraphs = [g]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _activation_model(kind: str, n: int, scale: float) -> bytes:
    return _model([_tensor((1, n), scale), _tensor((1, n), Q15)],
                  [(OPS[kind][0], [0], [1])], [0], [1])


def _oracle(model: bytes, xs) -> np.ndarray:
    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 22)
    for i, x in enumerate(xs):
        it.set_input(np.asarray(x, np.int16).reshape(1, -1), i)
    it.invoke()
    return np.asarray(it.get_output(0)).ravel().astype(np.int64)


# ------------------------------------------------------------------ the stream's side
def _fm(n: int, address: int, scale: float) -> api.NpuFeatureMap:
    fm = api.NpuFeatureMap()
    fm.data_type = api.NpuDataType.INT16
    fm.shape = api.NpuShape3D(1, 1, n)
    fm.layout = api.NpuLayout.NHWC
    fm.region = SCRATCH
    fm.quantization = api.NpuQuantization(scale_f32=scale, zero_point=0)
    fm.tiles = api.NpuTileBox(1, 0, 1, [address, 0, 0, 0])
    return fm


def _activation(kind: str, lo=None, hi=None) -> api.NpuActivation:
    act = api.NpuActivation(OPS[kind][1])
    act.min, act.max = lo, hi
    return act


def _identity_pool(kind: str, n: int, scale: float) -> api.NpuPoolingOperation:
    """Vela's form of a lone TANH / LOGISTIC: a 1x1 average pool with the activation fused;
    the register generator rescales the IFM to 1/(3 * 4096)."""
    op = api.NpuPoolingOperation(api.NpuPoolingOp.AVERAGE)
    op.kernel, op.padding = api.NpuKernel(1, 1), api.NpuPadding(0, 0, 0, 0)
    op.ifm, op.ofm = _fm(n, 0, scale), _fm(n, 4 * n, Q15)
    op.activation = _activation(kind, *((-1.0, 1.0) if kind == "tanh" else (0.0, 1.0)))
    return op


def _words(op) -> list[int]:
    op.block_config = api.npu_find_block_configs(op, ACC)[0]
    return api.npu_generate_register_command_stream([op], ACC)


def _run(words, n: int, *operands) -> np.ndarray:
    """The stream on int16 ``operands`` at 0, 2n (, ...) bytes; the OFM at 4n bytes."""
    scratch = np.zeros(6 * n, np.uint8)
    for k, x in enumerate(operands):
        raw = np.asarray(x, "<i2").view(np.uint8)
        scratch[2 * n * k:2 * n * k + raw.size] = raw
    mem = Memory({FLASH: 16, SCRATCH: scratch})
    run_stream(words, mem, ACC_NAME)
    return mem.regions[SCRATCH][4 * n:6 * n].view("<i2").astype(np.int64)


ALL_INT16 = np.arange(INT16[0], INT16[1] + 1, dtype=np.int64)


@pytest.mark.parametrize("kind,scale", [("tanh", 2.0 ** -12), ("tanh", 2.0 ** -11),
                                        ("sigmoid", 2.0 ** -12), ("sigmoid", 2.0 ** -11),
                                        ("tanh", 0.001), ("sigmoid", 3e-5)])
def test_every_int16_input_matches_tflite_micro(kind, scale):
    """Every int16 value through the identity pool, at the power-of-two scales (OFM_SCALE 3 or
    6, shift 0) and a general one (a 15-bit multiplier and a right shift): each of the table's
    256 entries and every interpolation step is read."""
    n = ALL_INT16.size
    got = _run(_words(_identity_pool(kind, n, scale)), n, ALL_INT16)
    want = _oracle(_activation_model(kind, n, scale), [ALL_INT16])
    assert np.array_equal(got, want), f"{np.count_nonzero(got != want)} of {n} differ"
    assert len(np.unique(want)) > 1000  # the function, not a saturated constant


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(OPS)), st.floats(1e-6, 0.5),
       st.lists(st.integers(*INT16), min_size=1, max_size=64))
def test_any_input_scale_matches_tflite_micro(kind, scale, values):
    scale = float(np.float32(scale))  # what a .tflite holds
    x = np.array(values, np.int64)
    got = _run(_words(_identity_pool(kind, x.size, scale)), x.size, x)
    assert got.tolist() == _oracle(_activation_model(kind, x.size, scale), [x]).tolist()


# an LSTM gate: two int16 fully-connected results at 2**-12 added, the activation fused
GATE_SCALE = 2.0 ** -12
#: the int16 range sigmoid reaches on TFLite's int16 inputs, which Vela's LSTM clamps the
#: gate to (the NPU's sum is not saturated to int16 first)
SIGMOID_GATE_RANGE = {"sigmoid": (11 / 0x3000, 32757 / 0x3000), "tanh": (None, None)}


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(OPS)),
       st.lists(st.tuples(st.integers(*INT16), st.integers(*INT16)), min_size=1, max_size=64))
def test_an_lstm_gate_add_matches_tflite_micro(kind, pairs):
    """ADD with the activation fused (Vela's LSTM gates: output scale 1/0x3000, sigmoid
    clamped to 11..32757) against TFLite Micro's ADD then TANH / LOGISTIC on the same int16
    operands: equal also where the sum leaves int16, which TFLite saturates first."""
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    n = a.size
    op = api.NpuElementWiseOperation(api.NpuElementWiseOp.ADD)
    op.ifm, op.ifm2 = _fm(n, 0, GATE_SCALE), _fm(n, 2 * n, GATE_SCALE)
    op.ofm = _fm(n, 4 * n, 1 / 0x3000)  # the scale Vela's LSTM lowering gives the clamp
    op.activation = _activation(kind, *SIGMOID_GATE_RANGE[kind])
    got = _run(_words(op), n, a, b)
    model = _model([_tensor((1, n), GATE_SCALE), _tensor((1, n), GATE_SCALE),
                    _tensor((1, n), GATE_SCALE), _tensor((1, n), Q15)],
                   [(schema.BuiltinOperator.ADD, [0, 1], [2]), (OPS[kind][0], [2], [3])],
                   [0, 1], [3])
    assert got.tolist() == _oracle(model, [a, b]).tolist()


@pytest.mark.parametrize("kind,scale", [("tanh", 2.0 ** -11), ("sigmoid", 0.0007)])
def test_vela_lowers_a_lone_int16_activation_to_what_the_model_runs(kind, scale):
    """Vela's CLI on a one-operator int16 model: its stream uses the activation function
    (not a LUT) and runs bit-exact with TFLite Micro on inputs across the range."""
    n = 4096
    model = _activation_model(kind, n, scale)
    data = vela_compile(model, ACC_NAME)
    x = np.random.RandomState(0).randint(INT16[0], INT16[1] + 1, (1, n)).astype(np.int16)
    functions = {c.param & 0xFFF for op in read_ethos_u_ops(data)
                 for c in decode_stream(op.words) if c.name == "NPU_SET_ACTIVATION"}
    assert functions == {OPS[kind][2]}
    got, _ = run_vela_model(data, [x], ACC_NAME)
    want = _oracle(model, [x])
    assert np.array_equal(np.asarray(got[0]).ravel(), want)
    assert len(np.unique(want)) > 100


def _patched(words, name: str, param: int) -> list[int]:
    """``words`` with every ``name`` command's parameter replaced by ``param``."""
    out = [int(w) for w in words]
    for c in decode_stream(words):
        if c.name == name:
            out[c.word] = c0(name, param)[0]
    return out


def _ofm_precision(words) -> int:
    return [c.param for c in decode_stream(words) if c.name == "NPU_SET_OFM_PRECISION"][-1]


@pytest.mark.parametrize("patch,message", [
    (lambda w: _patched(w, "NPU_SET_OFM_ZERO_POINT", 5),
     r"tanh with OFM_ZERO_POINT 5 is not modelled"),
    (lambda w: _patched(w, "NPU_SET_ACTIVATION", 3 | 1 << 12),
     r"activation clip range 1 \(ACTIVATION bits 12-15\) with tanh is not modelled"),
    (lambda w: _patched(w, "NPU_SET_OFM_PRECISION", _ofm_precision(w) & ~0b110 | 2 << 1),
     r"activation function 3 \(tanh\) on a int32 OFM is not modelled"),
], ids=["zero-point", "clip-range", "int32-ofm"])
@pytest.mark.parametrize("compute", [True, False], ids=["run", "dry"])
def test_a_tanh_form_the_model_does_not_know_names_the_command(patch, message, compute):
    words = _words(_identity_pool("tanh", 8, 2.0 ** -12))
    _run(words, 8, np.arange(8))  # unpatched, it runs
    words = patch(words)
    op_index = [c.index for c in decode_stream(words) if c.name.startswith("NPU_OP_")][0]
    mem = Memory({FLASH: 16, SCRATCH: np.zeros(64, np.uint8)})
    with pytest.raises(StreamError, match=rf"command #{op_index} \(NPU_OP_POOL\): {message}"):
        run_stream(words, mem, ACC_NAME, compute=compute)
