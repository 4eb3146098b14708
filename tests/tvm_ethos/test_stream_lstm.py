"""UNIDIRECTIONAL_SEQUENCE_LSTM on the Ethos-U (``backends/ethos_u/ops_lstm.py``, its
stream table row, emitted from a Plan by ``stream_lstm``; routed by
``backends/tflite_micro/graph_operators.py`` alone and by ``lstm_cascade`` with the NPU
group after it, as one operator): every output equal to TFLite Micro's, the state carried
from one invocation to the next as TFLite Micro carries it, over the trained model and LSTMs
of any shape and quantization; the variants the stream does not express stay TFLite
operators, each with its reason.
"""
from __future__ import annotations

import collections
import dataclasses

import lstm_models
import numpy as np
import pytest
import tflite
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lstm_models import (
    RELU,
    LstmCase,
    fully_connected_then_lstm,
    lstm_cases,
    lstm_model,
    lstm_then_fully_connected,
    stacked_lstms,
)

import tvm_ethos
from ethos_arch.ops import Op
from planner import parts as planner_parts
from planner.devices import get_device
from planner.graph import Tensor
from planner.perf.ethos_u import lower_part
from planner.proposals import ProposalSearch
from planner.tflite import load_tflite
from tests.helpers.models import model_path
from tvm_ethos.backends.ethos_u import ops_lstm, stream_lstm
from tvm_ethos.backends.ethos_u.arena_layout import CpuStep, NpuStep, Slot, arena_bases
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError
from tvm_ethos.backends.ethos_u.stream_ops import STREAM_OPS
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph, read_source
from tvm_ethos.backends.tflite_micro.cut import cut_model
from tvm_ethos.backends.tflite_micro.graph_operators import GRAPH_NPU_OPERATORS

runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
pytest.importorskip("ethosu.vela")


def _lstm_alone(source: bytes) -> bytes:
    """The trained model's LSTM as a model of its own: the cut's inputs are the sequence
    and the two state tensors; the states are the operator's, so only the sequence stays a
    graph input."""
    import flatbuffers
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

    cut = cut_model(source, SourceGraph(read_source(source)), (0,)).data
    model = schema.ModelT.InitFromPackedBuf(bytearray(cut), 0)
    g = model.subgraphs[0]
    g.inputs = [t for t in g.inputs if not g.tensors[t].isVariable]
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def _assert_runs_as_tflm(data: bytes, accelerator: str, runs: int, seed: int = 0):
    """``runs`` invocations in a row of the model compiled for ``accelerator`` and of TFLite
    Micro's interpreter (state carried over in both), every output equal, every operator
    on the NPU; the compiled model is returned."""
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.placement_table
    interpreter = runtime.Interpreter.from_bytes(data)
    rs = np.random.RandomState(seed)
    spec = cm.inputs[0]
    for k in range(runs):
        x = rs.randint(-128, 128, size=spec.shape).astype(np.int8)
        got = cm.run(x)[0]
        interpreter.set_input(x, 0)
        interpreter.invoke()
        want = interpreter.get_output(0)
        assert np.array_equal(got.reshape(want.shape), want), (
            f"run {k}: {got.ravel()[:12]} vs TFLite Micro {want.ravel()[:12]}")
    return cm


@pytest.mark.parametrize("accelerator", [
    "ethos-u55-128",
    pytest.param("ethos-u55-256", marks=pytest.mark.slow),
    pytest.param("ethos-u65-256", marks=pytest.mark.slow),
])
def test_trained_lstm_equals_tflite_micro_over_20_runs(accelerator):
    source = model_path("tflite-micro/trained_lstm_int8").read_bytes()
    _assert_runs_as_tflm(_lstm_alone(source), accelerator, runs=20)


def test_a_time_major_lstm_equals_tflite_micro():
    """A time-major sequence, (time, batch, features), of three batches: each step reads
    its rows in (time, batch) order, so a stream reading (batch, time) rows differs."""
    case = LstmCase(batches=3, steps=4, features=6, cells=5, cell_clip=3.5, seed=7,
                    time_major=True)
    cm = _assert_runs_as_tflm(lstm_model(case), "ethos-u55-128", runs=4, seed=3)
    assert cm.inputs[0].shape == (4, 3, 6)


@pytest.mark.parametrize("with_group", [False, True])
def test_the_same_lstm_compiles_to_the_same_bytes(with_group):
    """Alone, or one operator with the FULLY_CONNECTED after it."""
    case = LstmCase(batches=2, cell_clip=2.0)
    data = lstm_then_fully_connected(case, 7) if with_group else lstm_model(case)
    first, again = (tvm_ethos.compile(data, "ethos-u", cache_dir=False).tflite
                    for _ in range(2))
    assert first == again


_CASES = lstm_cases(features=40, cells=24)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_CASES)
def test_any_lstm_equals_tflite_micro(case):
    """Sizes, batches, quantization (zero points of the sequence and the hidden state, the
    cell scale, a cell clip), weight and bias ranges, batch- or time-major sequences: four
    invocations in a row."""
    _assert_runs_as_tflm(lstm_model(case), "ethos-u55-128", runs=4, seed=case.seed)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_CASES, accelerator=st.sampled_from(["ethos-u55-256", "ethos-u65-256"]))
def test_any_lstm_equals_tflite_micro_on_the_larger_accelerators(case, accelerator):
    _assert_runs_as_tflm(lstm_model(case), accelerator, runs=4, seed=case.seed)


@pytest.mark.parametrize("accelerator", [
    "ethos-u55-128", "ethos-u65-256", pytest.param("ethos-u55-256", marks=pytest.mark.slow)])
def test_the_trained_model_is_one_operator_planned_and_streamed_as_one(accelerator):
    """The LSTM and RESHAPE, FULLY_CONNECTED, SOFTMAX after it are one ethos-u operator (as
    Vela writes it): one plan (the LSTM's Part first), one stream touching exactly the
    plan's peak; its inputs are the sequence and the LSTM's states. On an Ethos-U55 the
    peak is the whole model's least memory as ``planner.tflite`` plans it, within Vela
    Size's 1.7 KiB; on an Ethos-U65 the plan's SRAM is the fast scratch, a cache, and the
    states live in the arena with the sequence."""
    source = model_path("tflite-micro/trained_lstm_int8").read_bytes()
    cm = _assert_runs_as_tflm(source, accelerator, runs=5)
    assert cm.partition_summary == {"ethos-u": 4}
    assert cm.placement[0].kind == "UNIDIRECTIONAL_SEQUENCE_LSTM"
    (payload,) = cm.program.payloads.values()
    graph = SourceGraph(read_source(source))
    assert [a.name for a in payload.inputs] == [
        graph.g.Tensors(t).Name().decode() for t in ops_lstm.state_and_sequence_tensors(graph, 0)]
    assert tflite.Model.GetRootAsModel(cm.tflite, 0).Subgraphs(0).OperatorsLength() == 1
    rows = [(r["cascade"], r["operator"]) for r in cm.plan_report["layers"]]
    assert rows[0] == (0, "lstm") and [op for _, op in rows[1:]] == [
        "reshape", "fully_connected", "softmax"]
    (entry,) = cm.plan_report["streams"].values()
    peak = cm.plan_report["peak_memory_bytes"]
    assert entry["schedule"] == "plan" and entry["realizes_plan"]
    assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"] == peak
    assert f"touched {peak:,} B = the plan's peak" in cm.plan_table
    if accelerator.startswith("ethos-u65"):
        assert payload.fast_scratch_bytes == peak
        assert all(a.offset + np.dtype(a.dtype).itemsize * np.prod(a.shape)
                   <= payload.scratch_bytes for a in payload.inputs)
        return
    whole = ProposalSearch(load_tflite(source), get_device(accelerator)).proposal(0)
    assert peak == whole.memory_bytes <= 1.7 * 1024


def _lstm_stream(cm) -> dict:
    """The stream report of the compiled model's one LSTM."""
    (entry,) = (e for r in cm.plan_reports if r.get("graph_operator")
                for e in r["streams"].values())
    return entry


def _up(n: int) -> int:
    return -(-n // 16) * 16


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_CASES)
def test_a_lone_lstm_touches_what_the_planner_plans(case):
    """The LSTM alone on an Ethos-U55: the arena its stream touches is the planner's peak
    for its Part (``planner.parts.lstm``) plus the padding that starts each sequence on a
    16-byte boundary; the NPU operations it runs are the ones the planner's performance
    model costs (``planner.perf.ethos_u.lower_part``)."""
    cm = tvm_ethos.compile(lstm_model(case), "ethos-u", cache_dir=False)
    entry = _lstm_stream(cm)
    b, t, f, n = case.batches, case.steps, case.features, case.cells
    pads = _up(b * t * n) - b * t * n + _up(b * t * f) - b * t * f + _up(2 * n) - 2 * n
    assert entry["scratch_high_water_bytes"] == entry["planned_peak_bytes"] + pads
    x = Tensor("x", (t, b, f) if case.time_major else (b, t, f))
    part = planner_parts.lstm("lstm", x, n, time_major=case.time_major)
    costed = collections.Counter(_COMMANDS[op.npu] for op in lower_part(part, part.output.shape))
    ran = {k: v for k, v in entry["commands"].items() if k in _COMMANDS.values()}
    assert ran == dict(costed)


def _read(data: bytes) -> ops_lstm.Lstm:
    return ops_lstm.read_lstm(SourceGraph(read_source(data)), 0)


@settings(max_examples=10, deadline=None)
@given(case=_CASES, accelerator=st.sampled_from(["ethos-u55-128", "ethos-u65-256"]))
def test_the_plan_holds_the_blocks_the_stream_table_row_needs(case, accelerator):
    """The LSTM's Plan (``planner.parts.lstm`` planned alone) holds its output sequence,
    ``<part>:work`` and ``<part>:state`` at exactly the bytes the stream lays out, and the
    stream table's row states the same working memory."""
    lstm = _read(lstm_model(case))
    planned = stream_lstm.plan_lstm(lstm, accelerator)
    assert stream_lstm.plan_blocks(planned.plan) == ops_lstm.LstmBlocks.of(lstm)
    assert STREAM_OPS[Op.LSTM].work_bytes(lstm) == planned_work_bytes(planned.plan)


def planned_work_bytes(plan) -> int:
    (n,) = (tc.buffer_bytes for tc in plan.tensor_configs if tc.tensor.endswith(":work"))
    return n


def test_the_stream_lies_where_the_plan_s_blocks_are(monkeypatch):
    """A Plan holding larger blocks than the stream needs moves the stream's buffers (the
    input after the larger working memory, the states after the larger output): the stream
    follows the Plan, and stays exact."""
    case = LstmCase(steps=4, cells=6, seed=5)
    data = lstm_model(case)
    need = ops_lstm.LstmBlocks.of(_read(data))
    grown = need._replace(output=need.output + 48, work=need.work + 32)
    monkeypatch.setattr(stream_lstm, "plan_blocks", lambda plan: grown)
    cm = _assert_runs_as_tflm(data, "ethos-u55-128", runs=3)
    entry = _lstm_stream(cm)
    assert entry["work_bytes"] == need.work   # the gates and scratch row the stream uses
    plain = ops_lstm.LstmArena.of(_read(data))
    arena = ops_lstm.LstmArena.of(_read(data), grown)
    assert arena.input == plain.input + 48 + 32 and arena.hidden == plain.hidden + 80
    (payload,) = cm.program.payloads.values()
    assert [a.offset for a in payload.inputs] == [arena.input, arena.hidden, arena.cell]


def test_a_plan_holding_less_than_the_stream_needs_is_refused_by_name():
    lstm = _read(lstm_model(LstmCase(cells=6)))
    need = ops_lstm.LstmBlocks.of(lstm)
    with pytest.raises(UnsupportedOperatorError, match=r"work 60 B < 76 B") as err:
        ops_lstm.LstmArena.of(lstm, need._replace(work=need.work - 16))
    assert "\n" not in str(err.value)


def test_an_lstm_alone_on_an_ethos_u65_keeps_its_working_memory_in_the_fast_scratch():
    """An Ethos-U65's plan is in its fast scratch, a cache: the gate buffers go there (all
    its stream touches of it, the plan's peak), the sequences and the states, which
    persist, in the arena."""
    data = lstm_model(LstmCase(batches=2, steps=3, cells=6, cell_clip=2.0))
    lstm = _read(data)
    cm = _assert_runs_as_tflm(data, "ethos-u65-256", runs=3)
    entry = _lstm_stream(cm)
    (payload,) = cm.program.payloads.values()
    assert payload.fast_scratch_bytes == ops_lstm.work_bytes(lstm) == \
        entry["planned_peak_bytes"] == entry["sram_high_water_bytes"]
    assert payload.scratch_bytes == ops_lstm.LstmArena.of(lstm, work_apart=True).bytes
    assert f"touched {payload.fast_scratch_bytes:,} B = the plan's peak" in cm.plan_table


#: the stream's operation commands by the performance model's kinds of NPU operation
_COMMANDS = {"conv": "NPU_OP_CONV", "depthwise": "NPU_OP_DEPTHWISE", "pooling": "NPU_OP_POOL",
             "elementwise": "NPU_OP_ELEMENTWISE"}


@pytest.mark.parametrize("planned", [True, False])
@pytest.mark.parametrize("units", [8, 600])
def test_an_lstm_beside_another_ethos_u_operator_keeps_its_state(units, planned):
    """The LSTM's output read by a FULLY_CONNECTED group on the NPU, however large (600
    units: larger than the LSTM's own arena): planned, one operator whose plan holds the
    states under every Plan; unplanned (``plan=False``), two, the group's stretch starting
    where the LSTM's output lies (aligned), clear of the LSTM's state."""
    data = lstm_then_fully_connected(LstmCase(steps=4, cells=6, seed=5), units)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False, plan=planned)
    assert cm.partition_summary == {"ethos-u": 3}
    assert len(cm.program.payloads) == (1 if planned else 2)
    if not planned:
        assert "planned apart from the operators after it" in cm.placement[0].why
    interpreter = runtime.Interpreter.from_bytes(data)
    rs = np.random.RandomState(0)
    for _ in range(4):
        x = rs.randint(-128, 128, size=cm.inputs[0].shape).astype(np.int8)
        interpreter.set_input(x, 0)
        interpreter.invoke()
        want = interpreter.get_output(0)
        assert np.array_equal(cm.run(x)[0].reshape(want.shape), want)


_THEN_FC = st.builds(
    LstmCase,
    batches=st.integers(1, 2), steps=st.integers(1, 4), features=st.integers(1, 24),
    cells=st.integers(1, 16),
    input_q=st.tuples(st.floats(0.002, 0.1), st.integers(-128, 127)),
    hidden_q=st.tuples(st.floats(0.002, 0.05), st.integers(-20, 20)),
    cell_power=st.integers(-14, -8), cell_clip=st.sampled_from([0.0, 3.5]),
    seed=st.integers(0, 2 ** 16), time_major=st.booleans())


def _check_one_operator(case: LstmCase, units: int, accelerator: str, budget,
                        before: bool = False) -> None:
    """The LSTM and the FULLY_CONNECTED after it (``before``: before it, reading ``units``
    values a row): one operator, exact over three invocations, its stream touching the
    plan's peak where its layout fits it."""
    data = fully_connected_then_lstm(case, units) if before else \
        lstm_then_fully_connected(case, units)
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={accelerator}",
                           cache_dir=False, budget=budget)
    assert len(cm.program.payloads) == 1, cm.placement[0].why
    interpreter = runtime.Interpreter.from_bytes(data)
    rs = np.random.RandomState(case.seed)
    for _ in range(3):
        x = rs.randint(-128, 128, size=cm.inputs[0].shape).astype(np.int8)
        interpreter.set_input(x, 0)
        interpreter.invoke()
        want = interpreter.get_output(0)
        assert np.array_equal(cm.run(x)[0].reshape(want.shape), want)
    (entry,) = cm.plan_report["streams"].values()
    if entry["schedule"] == "plan":
        assert entry["sram_high_water_bytes"] == entry["planned_peak_bytes"]
    else:   # its aligned blocks found no layout within the peak: said, and larger
        assert "UNIDIRECTIONAL_SEQUENCE_LSTM beyond its memory" in entry["schedule"]
        assert entry["sram_high_water_bytes"] > entry["planned_peak_bytes"]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_THEN_FC, units=st.integers(1, 40), before=st.booleans())
def test_any_lstm_and_the_operators_beside_it_are_one_exact_operator(case, units, before):
    _check_one_operator(case, units, "ethos-u55-128", None, before)


@pytest.mark.slow
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_THEN_FC, units=st.integers(1, 300),
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]),
       budget=st.sampled_from([None, "smallest", "size"]), before=st.booleans())
def test_any_lstm_and_the_operators_beside_it_at_any_budget(case, units, accelerator, budget,
                                                            before):
    _check_one_operator(case, units, accelerator, budget, before)


def test_stacked_lstms_keep_each_others_state():
    """Two LSTMs, the second reading the first's output: two ethos-u operators whose
    stretches share that sequence, neither over the other's state."""
    cm = _assert_runs_as_tflm(stacked_lstms(LstmCase(steps=4, cells=6, seed=5), 7),
                              "ethos-u55-128", runs=4)
    assert cm.partition_summary == {"ethos-u": 2}


def test_an_lstm_the_arena_cannot_hold_stays_a_tflite_operator(monkeypatch):
    """Where the file cannot be written with the LSTM as an ethos-u operator (its state
    has no place in the arena beside the others), it is written with the LSTM a TFLite
    operator, the layout's refusal its reason, not refused whole."""
    from tvm_ethos.backends.tflite_micro import compile as tflm_compile
    from tvm_ethos.errors import UnsupportedModelError

    real = tflm_compile.write_tflite

    def no_graph_parts(data, npu, groups):
        if any("unidirectional_sequence_lstm" in name for name, _ in npu):
            raise UnsupportedModelError("its stream would overwrite tensor 'state'")
        return real(data, npu, groups)

    monkeypatch.setattr(tflm_compile, "write_tflite", no_graph_parts)
    # unplanned, the LSTM is an operator of its own
    cm = tvm_ethos.compile(lstm_then_fully_connected(LstmCase(), 8), "ethos-u",
                           cache_dir=False, plan=False)
    assert cm.partition_summary == {"ethos-u": 2, "tflite-micro": 1}
    assert "does not fit the arena's layout: its stream would overwrite" in cm.placement[0].why
    assert not any(r.get("graph_operator") for r in cm.plan_reports)


REFUSED = [  # (variant, words of the reason)
    (dict(activation=RELU), "cell activation"),
    *lstm_models.REFUSED,
    (dict(float_input=True), "float32"),
]


@pytest.mark.parametrize("variant, words", REFUSED, ids=[w for _, w in REFUSED])
def test_variants_the_stream_does_not_express_stay_tflite_operators(variant, words):
    data = lstm_model(dataclasses.replace(LstmCase(), **variant))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "the Ethos-U does not take it from the graph" in placed.why and words in placed.why, \
        placed.why
    assert "\n" not in placed.why


def test_the_graph_level_table_names_its_builtins():
    assert set(GRAPH_NPU_OPERATORS) == {"UNIDIRECTIONAL_SEQUENCE_LSTM", "SVDF"}
    for builtin, entry in GRAPH_NPU_OPERATORS.items():
        assert entry.builtin == builtin


def test_a_persistent_tensor_keeps_its_bytes_from_every_other_stretch():
    """An LSTM's state (tensor 3) lives across invocations: the next ethos-u operator's
    stretch, which would start at 0 over the LSTM's dead bytes, must not cover it."""
    lstm = NpuStep("lstm", (Slot(1, 100, 20), Slot(3, 0, 20)), (Slot(2, 40, 20),), 120)
    host = CpuStep((2,), (5,))
    after = NpuStep("next", (Slot(5, 0, 10),), (Slot(6, 10, 10),), 64)
    plain = arena_bases([lstm, host, after], {6}, {})
    kept = arena_bases([lstm, host, after], {6}, {}, frozenset({3}))
    assert plain["next"] == 0          # the state's bytes reused: wrong across invocations
    assert kept["next"] >= 20          # clear of the state
