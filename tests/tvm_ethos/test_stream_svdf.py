"""SVDF on the Ethos-U (``backends/ethos_u/ops_svdf.py`` reads it, ``stream_svdf.py`` writes
its step, ``backends/tflite_micro/graph_operators.py`` routes it): every output equal to
TFLite Micro's over consecutive invocations (the state carried over in both), for SVDFs of
any shape, rank, memory and quantization, SVDFs in a row, and keyword_scrambled_8bit; the
variants the stream does not reproduce stay TFLite operators, each with its reason.
"""
from __future__ import annotations

import dataclasses

import flatbuffers
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from svdf_models import NONE, SvdfCase, svdf_cases, svdf_model, svdf_stack

import tvm_ethos
from benchmarks.real_models import vela_size
from benchmarks.tflm_arena import tflm_arena
from ethosu_stream.tflite_graph import TfliteGraph
from tests.helpers.models import model_path
from tvm_ethos.backends.ethos_u import stream_svdf
from tvm_ethos.backends.ethos_u.ops_svdf import read_svdf
from tvm_ethos.backends.ethos_u.stream_base import ALIGN, UnsupportedOperatorError
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph, read_source
from tvm_ethos.compute.quant import quantize_multiplier
from tvm_ethos.reports import vela_summary
from tvm_ethos.vela_options import read_system

runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")
pytest.importorskip("ethosu.vela")

#: TFLite Micro's arena for the test models (its default, ten times the file, is too small
#: for 256 batches)
_TFLM_ARENA = 1 << 20


def _assert_runs_as_tflm(data: bytes, accelerator: str = "ethos-u55-128", runs: int = 4,
                         seed: int = 0, inputs=None):
    """``runs`` invocations in a row of the model compiled for ``accelerator`` and of TFLite
    Micro's interpreter (the states carried over in both), every output equal, every
    operator on the NPU; then after ``reset`` the first invocation again, as a fresh
    interpreter gives it. The compiled model is returned."""
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.placement_table
    _assert_placed_as_reported(cm)
    rs = np.random.RandomState(seed)
    spec = cm.inputs[0]
    xs = inputs or [rs.randint(-128, 128, size=spec.shape).astype(np.int8)
                    for _ in range(runs)]
    interpreter = runtime.Interpreter.from_bytes(data, arena_size=_TFLM_ARENA)
    for k, x in enumerate(xs):
        got = cm.run(x)
        interpreter.set_input(x, 0)
        interpreter.invoke()
        for j, g in enumerate(got):
            want = interpreter.get_output(j)
            assert np.array_equal(g.reshape(want.shape), want), (
                f"run {k}, output {j}: {g.ravel()[:12]} vs TFLite Micro {want.ravel()[:12]}")
    cm.reset()
    fresh = runtime.Interpreter.from_bytes(data, arena_size=_TFLM_ARENA)
    fresh.set_input(xs[0], 0)
    fresh.invoke()
    want = fresh.get_output(0)
    assert np.array_equal(cm.run(xs[0])[0].reshape(want.shape), want)
    return cm


def _assert_placed_as_reported(cm) -> None:
    """Every SVDF on the NPU says how it runs there, as its plan report does (a graph-level
    NPU operator planned alone, ``svdf_plan``), not why TVM's importer has no converter."""
    svdfs = [p for p in cm.placement if p.kind == "SVDF"]
    assert svdfs
    for p in svdfs:
        reason = cm.plan_report["subgraphs"][p.operator]["reason"]
        assert p.why == reason and "planned alone" in p.why, (p, reason)
        assert "refuse" not in p.why, p


_CASES = svdf_cases(input_size=24, units=8, memory=10)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_CASES)
def test_any_svdf_equals_tflite_micro(case):
    """Batches, input size, units, rank, memory, every zero point, both effective scales
    (from a few codes to far past the state's and the output's range), bias range and
    fused activation (which TFLite Micro's integer kernel ignores): four invocations in a
    row."""
    _assert_runs_as_tflm(svdf_model(case), runs=4, seed=case.seed)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=svdf_cases(input_size=64, units=32, memory=16),
       accelerator=st.sampled_from(["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"]))
def test_any_svdf_equals_tflite_micro_on_every_accelerator(case, accelerator):
    _assert_runs_as_tflm(svdf_model(case), accelerator, runs=6, seed=case.seed)


def test_every_input_code_through_both_requantizations():
    """Brute force over the int8 input: 256 batches of one input, each a different code,
    so every code goes through the new column's requantization (into the state, clamped
    and wrapped) and, a step later, through the output's, for filters of both signs; the
    codes move one batch at each of four invocations."""
    case = SvdfCase(batches=256, input_size=1, units=3, rank=2, memory=2, input_q=(0.03, 11),
                    state_zp=-37, output_zp=9, feature_scale=0.37, time_scale=0.011,
                    activation=NONE, seed=4)
    codes = np.arange(-128, 128, dtype=np.int8)
    xs = [np.roll(codes, k).reshape(256, 1) for k in range(4)]
    _assert_runs_as_tflm(svdf_model(case), inputs=xs)


def test_the_new_column_wraps_as_tflite_micro_stores_it():
    """TFLite Micro clamps the new column's value to int8 before adding the state's zero
    point and stores the sum as int8: at zero point -120 a value below -8 wraps to the top
    of the range. The case reaches that (checked here on TFLite Micro's own arithmetic)
    and the NPU's state then holds what TFLite Micro's holds."""
    case = SvdfCase(input_size=8, units=6, memory=3, state_zp=-120, feature_scale=0.5,
                    seed=3)
    data = svdf_model(case)
    svdf = read_svdf(SourceGraph(read_source(data)), 0)
    x = np.random.RandomState(3).randint(-128, 128, size=(4, 1, 8))
    m, shift = quantize_multiplier(svdf.feature_scale)
    acc = (x - svdf.input_q.zero_point) @ svdf.weights_feature.T.astype(np.int64)
    requant = np.round(acc * (m / 2.0 ** (31 - shift)))   # near enough to see the range
    assert (np.clip(requant, -128, 127) + case.state_zp < -128).any()
    _assert_runs_as_tflm(data, inputs=list(x.astype(np.int8)))


def test_time_weights_are_the_rank_sum_of_the_filter_dot_products():
    """The time step's one FULLY_CONNECTED against TFLite Micro's loops: per filter the dot
    product of its state row with its weights_time row, summed over each unit's rank
    filters."""
    case = SvdfCase(input_size=3, units=4, rank=3, memory=5, seed=8)
    svdf = read_svdf(SourceGraph(read_source(svdf_model(case))), 0)
    state = np.random.RandomState(0).randint(-128, 128, size=(svdf.filters, svdf.memory))
    want = np.zeros(svdf.units, np.int64)
    for i in range(svdf.filters):
        want[i // svdf.rank] += sum(int(svdf.weights_time[i, j]) * int(state[i, j])
                                    for j in range(svdf.memory))
    got = stream_svdf.time_weights(svdf).astype(np.int64) @ state.ravel()
    assert np.array_equal(got, want)


@pytest.mark.parametrize("fully_connected_after", [-1, 0])
def test_svdfs_in_a_row_keep_each_others_state(fully_connected_after):
    """Four SVDFs, each reading the one before (and once a FULLY_CONNECTED between two):
    ethos-u operators whose stretches share a tensor each, none over another's state."""
    data = svdf_stack(SvdfCase(batches=2, units=5, rank=2, memory=4, seed=2), (6, 3, 4),
                      fully_connected_after)
    cm = _assert_runs_as_tflm(data, runs=5)
    assert cm.partition_summary == {"ethos-u": 4 if fully_connected_after < 0 else 5}


def test_the_same_svdf_compiles_to_the_same_bytes():
    data = svdf_stack(SvdfCase(memory=5, seed=6), (4,), 0)
    first, again = (tvm_ethos.compile(data, "ethos-u", cache_dir=False).tflite
                    for _ in range(2))
    assert first == again


def _with_svdf_outputs(source: bytes) -> bytes:
    """``source`` with every SVDF's output a graph output too."""
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(source), 0)
    g = model.subgraphs[0]
    svdf = schema.BuiltinOperator.SVDF
    g.outputs = list(g.outputs) + [op.outputs[0] for op in g.operators
                                   if model.operatorCodes[op.opcodeIndex].builtinCode == svdf]
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output())


def test_keyword_scrambled_runs_its_svdfs_on_the_npu():
    """Its seven SVDFs on the NPU (Vela 5.2 keeps them on the CPU), and its int16 -> int32
    QUANTIZE (test_quantize32.py): nothing stays on the CPU, where Vela's keeps 8, in no
    more TFLite Micro arena in all than Vela Size's file (its SRAM plus its SVDFs' states
    and scratch on the CPU); the file's output equals TFLite Micro's over two invocations
    (four, and every SVDF's output, under slow)."""
    path = model_path("tflite-micro/keyword_scrambled_8bit")
    source = path.read_bytes()
    cm = tvm_ethos.compile(path, "ethos-u", cache_dir=False)
    kept = [p.kind for p in cm.placement if p.placed_on != "ethos-u"]
    assert kept == [], cm.placement_table
    vela = vela_size(str(path), "ethos-u55-128")
    assert len(kept) < vela["cpu"] == 8
    ours = tflm_arena(TfliteGraph(cm.tflite, "ethos-u55-128"))
    theirs = tflm_arena(TfliteGraph(vela["tflite"], "ethos-u55-128"))
    assert theirs.states == 5120 and ours.states == 0
    assert ours.total <= theirs.total, (ours, theirs)
    _assert_file_runs_as_tflm(cm, source, runs=2)
    _assert_svdfs_are_planned(cm, source)


def _assert_svdfs_are_planned(cm, source: bytes) -> None:
    """Every SVDF planned alone (none "not planned"): its report carries its plan's cycles
    and MACs (estimated; the MACs those the functional model counts running its stream),
    the report's total cycles and Vela's summary count them (estimated)."""
    svdf_lines = [line for line in cm.plan_table.splitlines() if "_svdf on ethos-u" in line]
    assert len(svdf_lines) == 7 and all("planned alone" in line for line in svdf_lines)
    assert "not planned" not in cm.plan_table
    rep = cm.plan_report
    svdfs = {name: sub for name, sub in rep["subgraphs"].items() if name.endswith("_svdf")}
    assert len(svdfs) == 7
    for name, sub in svdfs.items():
        assert sub["cycles"] > 0 and sub["macs"] == rep["streams"][name]["macs"], name
    assert rep["cycles"] == sum(sub["cycles"] for sub in rep["subgraphs"].values())
    summary, _ = vela_summary.summarize(cm, "keyword_scrambled_8bit", source,
                                        read_system("ethos-u55-128"))
    assert summary.cycles == rep["cycles"]
    macs = sum(sub["macs"] for sub in svdfs.values())
    assert summary.graph_operator_macs == macs
    assert f"Graph-level operators' macs (estimated)  {macs:12d} MACs/batch" in summary.text()


@pytest.mark.slow
@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"])
def test_keyword_scrambled_s_every_svdf_output_equals_tflite_micro(accelerator):
    """Every SVDF's output made a graph output too: each equal to TFLite Micro's. (Its
    weights are scrambled: its SVDFs' outputs sit at the int8 extremes, so the synthetic
    SVDFs above are what test the arithmetic; this tests the seven streams, their chain of
    stretches and their states in one file.)"""
    source = _with_svdf_outputs(model_path("tflite-micro/keyword_scrambled_8bit").read_bytes())
    cm = tvm_ethos.compile(source, f"ethos-u -accelerator_config={accelerator}",
                           cache_dir=False)
    assert len(cm.outputs) == 8
    assert {p.placed_on for p in cm.placement if p.kind == "SVDF"} == {"ethos-u"}
    _assert_file_runs_as_tflm(cm, source)


def _assert_file_runs_as_tflm(cm, source: bytes, runs: int = 4) -> None:
    """Every output of ``runs`` int16 inputs in a row equal to TFLite Micro's."""
    rs = np.random.RandomState(3)
    interpreter = runtime.Interpreter.from_bytes(source, arena_size=_TFLM_ARENA)
    for _ in range(runs):
        x = rs.randint(-2000, 2000, size=(1, 96)).astype(np.int16)
        interpreter.set_input(x, 0)
        interpreter.invoke()
        for j, got in enumerate(cm.run(x)):
            want = interpreter.get_output(j)
            assert np.array_equal(got.reshape(want.shape), want), j


def _assert_kept_runs_as_tflm(cm, data: bytes, seed: int, runs: int = 3) -> None:
    """The first output of ``runs`` int8 inputs in a row equal to TFLite Micro's on ``data``
    (the SVDF kept as a TFLite operator carries its state over as TFLite Micro does)."""
    interpreter = runtime.Interpreter.from_bytes(data, arena_size=_TFLM_ARENA)
    rs = np.random.RandomState(seed)
    for _ in range(runs):
        x = rs.randint(-128, 128, size=cm.inputs[0].shape).astype(np.int8)
        interpreter.set_input(x, 0)
        interpreter.invoke()
        want = interpreter.get_output(0)
        assert np.array_equal(cm.run(x)[0].reshape(want.shape), want)


REFUSED = [  # (variant, words of the reason, whether TFLite Micro runs the model)
    (dict(state_dtype="int16", state_zp=0), "the NPU's weights are 8-bit", True),
    (dict(no_bias=True), "no bias", False),
    (dict(float_input=True), "float32", False),
    (dict(feature_scale=1.5), "effective scale", True),
    (dict(units=256, memory=300, input_size=2, bias_range=10), "along one axis", True),
]


@pytest.mark.parametrize("variant, words, tflm_runs", REFUSED, ids=[r[1] for r in REFUSED])
def test_variants_the_stream_does_not_reproduce_stay_tflite_operators(variant, words,
                                                                      tflm_runs):
    """Each stays a TFLite operator with one line saying why; where TFLite Micro runs it,
    the file's output is TFLite Micro's (an int16 SVDF's state carried over on the CPU)."""
    data = svdf_model(dataclasses.replace(SvdfCase(), **variant))
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro"
    assert "the Ethos-U does not take it from the graph" in placed.why and words in placed.why, \
        placed.why
    assert "\n" not in placed.why
    if tflm_runs:
        _assert_kept_runs_as_tflm(cm, data, seed=1)


def test_the_tflm_arena_of_an_svdf_on_the_cpu_is_its_state_tensors_and_scratch():
    """An SVDF TFLite Micro runs (an int16 one, which stays on the CPU): its state is the
    file's persistent arena (filters x memory int16 values a batch), the rest its
    input, output and the two int32 scratch buffers its kernel asks for (a value a filter
    and batch, a value a unit and batch), each 16-byte aligned, as TFLite Micro's
    SVDF kernel and planner lay them out."""
    case = SvdfCase(batches=2, input_size=5, units=3, rank=2, memory=7, state_dtype="int16",
                    state_zp=0)
    cm = tvm_ethos.compile(svdf_model(case), "ethos-u", cache_dir=False)
    assert cm.partition_summary == {"tflite-micro": 1}
    b, f, u = case.batches, case.units * case.rank, case.units

    def up(n):
        return -(-n // 16) * 16

    assert tflm_arena(TfliteGraph(cm.tflite, "ethos-u55-128")) == (
        0, up(2 * b * f * case.memory), up(b * case.input_size) + up(b * u) + up(4 * b * f)
        + up(4 * b * u))


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=svdf_cases(input_size=16, units=6, memory=6, state_dtype="int16"))
def test_any_int16_svdf_stays_a_tflite_operator_as_tflite_micro_runs_it(case):
    """The other state type TFLite Micro takes: int16 (with int16 weights_time) stays on
    the CPU, its state carried over by TFLite Micro in the written file."""
    data = svdf_model(case)
    cm = tvm_ethos.compile(data, "ethos-u", cache_dir=False)
    (placed,) = cm.placement
    assert placed.placed_on == "tflite-micro" and "8-bit" in placed.why
    _assert_kept_runs_as_tflm(cm, data, seed=case.seed)


def test_a_state_of_another_type_than_weights_time_is_refused_by_name():
    """TFLite Micro reads the state as weights_time's type: the two must agree (an int8
    model whose state is made int16)."""
    from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

    model = schema.ModelT.InitFromPackedBuf(bytearray(svdf_model(SvdfCase())), 0)
    model.subgraphs[0].tensors[4].type = schema.TensorType.INT16
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    with pytest.raises(UnsupportedOperatorError, match="TFLite Micro reads both as one type"):
        read_svdf(SourceGraph(read_source(bytes(b.Output()))), 0)


# ------------------------------------------------------------------------ the stretch's layout
@settings(max_examples=40, deadline=None)
@given(case=_CASES, data=st.data())
def test_the_state_lies_clear_of_the_neighbours_and_theirs_of_it(case, data):
    """For any neighbours (the writer of its input, the reader of its output: where the
    shared tensor lies in their stretches, how long those are, what they keep), any floor
    (where the states placed before it start, relative to its input) and whether its input
    is read after it, the layout puts every tensor at the neighbour's phase, inside the
    stretch, the input, the state and the working buffers apart (the output may lie over
    the working buffers, done with when the last operation writes it, and over the input
    where nothing reads it after), the state out of the neighbours' stretches and under the
    floor, and nothing it writes over what they keep; or it refuses by name."""
    svdf = read_svdf(SourceGraph(read_source(svdf_model(case))), 0)
    sizes = stream_svdf._Sizes.of(svdf)

    def neighbour(shared: int):
        if not data.draw(st.booleans()):
            return None
        offset = data.draw(st.integers(0, 4000))
        size = data.draw(st.integers(offset + shared, offset + shared + 4000))
        keeps = data.draw(st.lists(st.tuples(st.integers(0, size), st.integers(1, 600)),
                                   max_size=2))
        return stream_svdf.Neighbour(offset, size, tuple(keeps))

    before, after = neighbour(sizes.input), neighbour(sizes.output)
    floor = data.draw(st.none() | st.integers(-4000, 4000))
    kept = data.draw(st.booleans())
    try:
        arena = stream_svdf.SvdfArena.of(svdf, before, after, floor, kept)
    except UnsupportedOperatorError as err:
        assert "keeps its state clear" in str(err)
        return
    assert arena.column == arena.shifted   # the new column over the shift's buffer
    spans = {"input": (arena.input, sizes.input), "output": (arena.output, sizes.output),
             "state": (arena.state, sizes.state), "work": (arena.column, sizes.work)}
    for name, (at, n) in spans.items():
        assert 0 <= at and at + n <= arena.bytes, name
    apart = [(at, at + n) for name, (at, n) in spans.items() if n and name != "output"]
    apart.sort()
    assert all(a[1] <= b[0] for a, b in zip(apart, apart[1:])), apart
    y = (arena.output, arena.output + sizes.output)
    for name in ("input", "state") if kept else ("state",):
        at, n = spans[name]
        assert y[1] <= at or at + n <= y[0], name
    state = (arena.state, arena.state + sizes.state)
    if floor is not None:
        assert state[1] <= arena.input + floor
    written = [state, y, (arena.column, arena.column + sizes.work)]
    for at, theirs in ((arena.input, before), (arena.output, after)):
        if theirs is None:
            continue
        assert at % ALIGN == theirs.offset % ALIGN
        base = at - theirs.offset
        assert state[1] <= base or base + theirs.stretch_bytes <= state[0]
        for off, n in theirs.keeps:
            assert all(base + off + n <= lo or hi <= base + off for lo, hi in written)


def test_the_shift_goes_a_few_rows_at_a_time_as_tflite_micro_shifts():
    """A state of 64 rows of memory 10 (576 bytes to shift) goes in three pairs of copies,
    the last of fewer rows, through a buffer of at most SHIFT_BUFFER_BYTES: four
    invocations equal TFLite Micro's."""
    case = SvdfCase(batches=2, input_size=5, units=16, rank=2, memory=10, seed=9)
    svdf = read_svdf(SourceGraph(read_source(svdf_model(case))), 0)
    rows = stream_svdf.shift_rows(svdf)
    assert 1 < -(-svdf.batches * svdf.filters // rows) and (64 % rows)
    assert stream_svdf._Sizes.of(svdf).shifted <= stream_svdf.SHIFT_BUFFER_BYTES
    _assert_runs_as_tflm(svdf_model(case), runs=4, seed=9)


def test_svdfs_in_a_row_share_their_working_buffers():
    """Four SVDFs in a row, a FULLY_CONNECTED between two: the file's arena (emulated, the
    functional model's high-water mark) holds every state but less than every SVDF's
    working buffers besides (the shift's and the new column's bytes lie where each SVDF's
    tensors pass, the same for all), and the outputs equal TFLite Micro's."""
    first = SvdfCase(batches=1, units=6, rank=1, memory=24, seed=5)
    data = svdf_stack(first, (6, 6, 6), 1)
    graph = SourceGraph(read_source(data))
    svdfs = [read_svdf(graph, i) for i, k in enumerate(graph.kinds) if k == "SVDF"]
    states = sum(s.batches * s.state_size for s in svdfs)
    work = sum(stream_svdf._Sizes.of(s).work for s in svdfs)
    cm = _assert_runs_as_tflm(data, runs=3)
    x = np.zeros(cm.inputs[0].shape, np.int8)
    arena = TfliteGraph(cm.tflite, "ethos-u55-128").run([x])[1].high_water[1]
    assert states <= arena < states + work, (arena, states, work)


def test_the_output_lies_over_an_input_nothing_reads_after():
    """The input is done with once the new column is formed; the output, written last,
    takes its place unless something reads the input after the SVDF."""
    svdf = read_svdf(SourceGraph(read_source(svdf_model(SvdfCase(input_size=20)))), 0)
    free = stream_svdf.SvdfArena.of(svdf, input_kept=False)
    kept = stream_svdf.SvdfArena.of(svdf)
    assert free.output == free.input
    assert kept.output >= kept.input + svdf.batches * svdf.input_size
