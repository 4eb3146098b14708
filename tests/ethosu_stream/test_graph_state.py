"""State carried between runs, as on a board: the corpus's LSTM streams (the state in the
``ethos-u`` operator's variable tensors) and an SVDF Vela leaves on the CPU (the state in its
TFLite Micro interpreter) run several inputs in sequence without a reset, bit-exact with one
TFLite Micro interpreter invoked on the same sequence; and a reset forgets the state as a
fresh interpreter would."""
from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

from ethosu_stream.tflite_graph import TfliteGraph
from tests.ethosu_stream.corpus import (
    NOT_BUILT,
    _io_counts,
    compiled_cases,
    ifm_reads,
    intermediates,
    random_inputs,
    source_model,
    tflm,
)
from tests.helpers.vela_cli import vela_compile

STEPS = (0, 1, 2)
#: one stream per Vela release (the others differ in striping, not in where state lives)
STATEFUL = [("trained_lstm_int8", "ethos-u55-128", "Size")]


def _params():
    cases = [(c, p) for c, p in compiled_cases()
             if (c.name, c.config, c.optimise) in STATEFUL]
    if not cases:
        return [pytest.param(None, None, id="corpus-not-built")]
    return [pytest.param(c, p, id=c.id) for c, p in cases]


def _invoke(it, xs, n_out: int) -> list[np.ndarray]:
    for i, x in enumerate(xs):
        it.set_input(x, i)
    it.invoke()
    return [np.asarray(it.get_output(i)).copy() for i in range(n_out)]


def _first_output(source: bytes) -> bytes:
    """The source model cut after its first operator (the LSTM): its output, every time
    step's hidden state, shows the state directly (the classifier after it may not)."""
    return list(intermediates(source))[-1][1]


@pytest.mark.parametrize("case,path", _params())
def test_state_carries_between_runs_as_in_tflite_micro(case, path):
    if case is None:
        pytest.skip(NOT_BUILT)
    source = source_model(case).read_bytes()
    lstm = _first_output(source)
    graph = TfliteGraph(path.read_bytes(), case.config)
    whole, cut = tflm(source), tflm(lstm)
    n_out = _io_counts(source)[1]
    for step in STEPS:
        xs = random_inputs(source, step)
        got, computed = _run(graph, xs)
        want = _invoke(whole, xs, n_out)
        assert all(np.array_equal(g.reshape(w.shape), w) for g, w in zip(got, want)), step
        hidden = _invoke(cut, xs, 1)[0].ravel()
        assert _found(hidden, computed), f"step {step}: the LSTM's output is not computed"
    # the state matters: the last input alone, from a fresh start, gives other hidden states
    fresh = _invoke(tflm(lstm), xs, 1)[0].ravel()
    assert not np.array_equal(fresh, hidden)
    graph.reset()
    assert _found(fresh, _run(graph, xs)[1]), "a reset does not forget the state"


def _run(graph: TfliteGraph, xs) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The graph's outputs, and every IFM its streams read and tensor it computed."""
    keep, seen = ifm_reads()
    tensors: dict = {}
    got, _ = graph.run(xs, keep, tensors)
    return got, seen + [np.ravel(v) for v in tensors.values()]


def _found(want: np.ndarray, computed: list[np.ndarray]) -> bool:
    return any(c.size == want.size and np.array_equal(c.ravel(), want.ravel()) for c in computed)


# ------------------------------------------------------------------ an SVDF on the CPU
def _tensor(shape, ttype, scale, zp=0, data=None, variable=False):
    t = schema.TensorT()
    t.shape, t.type, t.isVariable = list(shape), ttype, variable
    t.quantization = schema.QuantizationParametersT()
    t.quantization.scale, t.quantization.zeroPoint = [scale], [zp]
    t.buffer = 0 if data is None else data
    return t


def _svdf_add_model(seed: int) -> bytes:
    """SVDF (int8, int16 state of memory 4, 8 units) -> ADD with a second input: Vela keeps
    the SVDF on the CPU and runs the ADD on the NPU."""
    rs = np.random.RandomState(seed)
    T = schema.TensorType
    consts = [rs.randint(-127, 128, (8, 16)).astype(np.int8),
              rs.randint(-3000, 3001, (8, 4)).astype(np.int16),
              rs.randint(-500, 501, 8).astype(np.int32)]
    m = schema.ModelT()
    m.version = 3
    m.buffers = [schema.BufferT()]
    for c in consts:
        b = schema.BufferT()
        b.data = list(c.tobytes())
        m.buffers.append(b)
    tensors = [
        _tensor((1, 16), T.INT8, 0.05, 3),                       # 0 input
        _tensor((8, 16), T.INT8, 0.02, data=1),                  # 1 weights_feature
        _tensor((8, 4), T.INT16, 0.0005, data=2),                # 2 weights_time
        _tensor((8,), T.INT32, 0.0005 * 0.01, data=3),           # 3 bias
        _tensor((1, 32), T.INT16, 0.01, variable=True),          # 4 state
        _tensor((1, 8), T.INT8, 1.0, -5),                        # 5 SVDF output
        _tensor((1, 8), T.INT8, 0.5, 0),                         # 6 second input
        _tensor((1, 8), T.INT8, 1.5, 1),                         # 7 output
    ]
    codes = []
    for builtin in (schema.BuiltinOperator.SVDF, schema.BuiltinOperator.ADD):
        oc = schema.OperatorCodeT()
        oc.builtinCode, oc.deprecatedBuiltinCode, oc.version = builtin, builtin, 1
        codes.append(oc)
    m.operatorCodes = codes
    svdf = schema.OperatorT()
    svdf.opcodeIndex, svdf.inputs, svdf.outputs = 0, [0, 1, 2, 3, 4], [5]
    svdf.builtinOptionsType = schema.BuiltinOptions.SVDFOptions
    svdf.builtinOptions = schema.SVDFOptionsT()
    svdf.builtinOptions.rank = 1
    add = schema.OperatorT()
    add.opcodeIndex, add.inputs, add.outputs = 1, [5, 6], [7]
    g = schema.SubGraphT()
    g.tensors, g.operators, g.inputs, g.outputs = tensors, [svdf, add], [0, 6], [7]
    m.subgraphs = [g]
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_a_cpu_svdf_keeps_its_state_between_runs():
    """The SVDF's variable state stays with its TFLite Micro interpreter between runs of the
    graph (the NPU's ADD reads what it computed), as one interpreter on the source model
    keeps it; a reset forgets it."""
    model = _svdf_add_model(0)
    graph = TfliteGraph(vela_compile(model, "ethos-u55-128"), "ethos-u55-128")
    assert graph.cpu_operators == ["SVDF (operator 0)"]
    source = tflm(model)
    rs = np.random.RandomState(1)
    seq = [[rs.randint(-128, 128, (1, 16)).astype(np.int8),
            rs.randint(-128, 128, (1, 8)).astype(np.int8)] for _ in range(4)]
    for step, xs in enumerate(seq):
        got, _ = graph.run(xs)
        want = _invoke(source, xs, 1)
        assert np.array_equal(got[0].reshape(want[0].shape), want[0]), step
    fresh = _invoke(tflm(model), seq[-1], 1)[0]
    assert not np.array_equal(fresh, want[0])  # the state shows in the output
    graph.reset()
    assert np.array_equal(graph.run(seq[-1])[0][0].reshape(fresh.shape), fresh)
