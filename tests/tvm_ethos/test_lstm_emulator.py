"""The int8 UNIDIRECTIONAL_SEQUENCE_LSTM on ``--target ethos-u,llvm`` (issue 28): imported by
``tflite_converter.convert_quantized_lstm``, claimed by the Ethos-U, planned as
``planner.parts.lstm`` and run by the emulator's kernel (``compute.lstm``): every output equal
to TFLite Micro's, run after run, the states carried from one run to the next as the
interpreter's variable tensors are until ``reset()`` (in a compiled model, a loaded package,
the requests of ``start_async``); the forms the Ethos-U does not take, and an LSTM no target of
the list takes, refused in one line.
"""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import tvm
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lstm_models import (
    REFUSED,
    LstmCase,
    lstm_cases,
    lstm_model,
    lstm_then_fully_connected,
)
from tvm import relax

import tvm_ethos
from ethos_arch.ops import Op
from planner.parts import lstm_state_bytes, lstm_work_bytes
from tests.helpers.models import model_path
from tvm_ethos.cli import main
from tvm_ethos.compute.lstm import LstmQuantization
from tvm_ethos.errors import UnsupportedModelError

runtime = pytest.importorskip("tflite_micro.python.tflite_micro.runtime")

TRAINED = "tflite-micro/trained_lstm_int8"


def _tflm_in_a_row(data: bytes, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """TFLite Micro's first output for each of ``inputs``, invoked in a row without a reset
    (its variable tensors carried from one invocation to the next)."""
    interpreter = runtime.Interpreter.from_bytes(data)
    out = []
    for x in inputs:
        interpreter.set_input(x, 0)
        interpreter.invoke()
        out.append(interpreter.get_output(0).copy())
    return out


def _assert_runs_equal(run, inputs: list[np.ndarray], want: list[np.ndarray], what: str):
    for k, (x, w) in enumerate(zip(inputs, want)):
        got = run(x)[0]
        assert np.array_equal(got.reshape(w.shape), w), (
            f"{what}, run {k}: {got.ravel()[:12]} vs TFLite Micro {w.ravel()[:12]}")


def _assert_equals_tflm(data: bytes, inputs: list[np.ndarray], target: str = "ethos-u,llvm"):
    """``data`` compiled for ``target`` gives TFLite Micro's output for ``inputs`` run in a
    row (no reset between), and after ``reset()`` what a fresh interpreter gives for them;
    every operator on the Ethos-U; the compiled model is returned."""
    cm = tvm_ethos.compile(data, target, cache_dir=False)
    assert set(cm.partition_summary) == {"ethos-u"}, cm.partition_summary
    want = _tflm_in_a_row(data, inputs)
    _assert_runs_equal(cm.run, inputs, want, "in a row")
    cm.reset()
    _assert_runs_equal(cm.run, inputs, want, "after reset()")
    return cm


def _random_inputs(cm_shape, n: int, seed: int) -> list[np.ndarray]:
    rs = np.random.RandomState(seed)
    return [rs.randint(-128, 128, size=cm_shape).astype(np.int8) for _ in range(n)]


def _lstm_output_model() -> bytes:
    """The trained model's LSTM alone (its output sequence the model's output, so every
    hidden state is compared, not only the classes after it)."""
    from test_stream_lstm import _lstm_alone

    return _lstm_alone(model_path(TRAINED).read_bytes())


def test_trained_lstm_int8_on_ethos_u_llvm_equals_tflite_micro():
    """The whole model (LSTM, RESHAPE, FULLY_CONNECTED, SOFTMAX) as one NPU subgraph; the
    model ships no test input, so three random sequences and an all-lowest one, in a row."""
    data = model_path(TRAINED).read_bytes()
    inputs = _random_inputs((1, 28, 28), 3, seed=28) + [np.full((1, 28, 28), -128, np.int8)]
    cm = _assert_equals_tflm(data, inputs)
    layers = cm.plan_report["layers"]
    assert [r["operator"] for r in layers][0] == Op.LSTM.value
    # the emulator ran it: the stream's row needs the states' slots of the graph route
    (stream,) = cm.plan_report["streams"].values()
    assert not stream["generated"] and "runs on the emulator" in stream["reason"], stream


def test_the_trained_lstm_s_every_hidden_state_equals_tflite_micro():
    _assert_equals_tflm(_lstm_output_model(), _random_inputs((1, 28, 28), 3, seed=3))


def test_the_states_go_on_from_run_to_run_and_reset_restores_them():
    """The second run of an input differs from its first (the state it starts from is the
    run before's, so a package that reset it per run would give the first again), and equals
    TFLite Micro's second invocation; the states are the program's two variables."""
    data = _lstm_output_model()
    cm = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    x = _random_inputs((1, 28, 28), 1, seed=12)[0]
    want = _tflm_in_a_row(data, [x, x])
    assert not np.array_equal(want[0], want[1])
    _assert_runs_equal(cm.run, [x, x], want, "the same input twice")
    states = [cm.program.constants[c] for c in cm.program.states]
    assert [(a.dtype, a.shape) for a in states] == [(np.int8, (1, 20)), (np.int16, (1, 20))]
    cm.reset()
    _assert_runs_equal(cm.run, [x], want, "after reset()")
    cm.unload()   # a new loaded network starts from the reset values too
    _assert_runs_equal(cm.run, [x, x], want, "after unload()")


def test_async_requests_go_on_from_the_state_of_the_one_before():
    data = _lstm_output_model()
    cm = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    inputs = _random_inputs((1, 28, 28), 3, seed=13)
    want = _tflm_in_a_row(data, inputs)
    _assert_runs_equal(lambda x: cm.start_async(x).wait(), inputs, want, "start_async")


def test_a_loaded_package_keeps_its_states_and_starts_from_the_reset_values(tmp_path):
    """Saved after runs, the package holds the reset values (the same bytes as before the
    runs); loaded, it goes on in a row as TFLite Micro does, and ``reset()`` starts again.
    Its program is version 2 (a reader of version 1 would drop the states); a model without
    states still writes version 1."""
    data = _lstm_output_model()
    cm = tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    inputs = _random_inputs((1, 28, 28), 3, seed=14)
    cm.save(tmp_path / "before.zip")
    cm.run(inputs[0])
    cm.save(tmp_path / "after.zip")
    assert (tmp_path / "before.zip").read_bytes() == (tmp_path / "after.zip").read_bytes()
    loaded = tvm_ethos.load(tmp_path / "after.zip")
    assert loaded.program.states == cm.program.states
    want = _tflm_in_a_row(data, inputs)
    _assert_runs_equal(loaded.run, inputs, want, "loaded, in a row")
    loaded.reset()
    _assert_runs_equal(loaded.run, inputs[:1], want, "loaded, after reset()")
    assert json.loads(cm.program.to_json())["version"] == 2
    assert dataclasses.replace(cm.program, states=()).to_json().startswith('{"version": 1,')


def test_the_package_plans_the_lstm_as_planner_parts_lstm():
    """The planner's own Part (``planner.parts.lstm``): the plan's peak is the sequence in
    (28 x 28 B), the sequence out (28 x 20 B), the Part's gate buffers and its states, and
    the emulator's scheduled TIR was checked against it (a MemoryMismatchError would have
    failed the compile)."""
    report = tvm_ethos.compile(_lstm_output_model(), "ethos-u,llvm", cache_dir=False).plan_report
    (layer,) = report["layers"]
    assert layer["operator"] == Op.LSTM.value and layer["stripes"] == 1
    assert report["peak_memory_bytes"] == \
        28 * 28 + 28 * 20 + lstm_work_bytes(20) + lstm_state_bytes(1, 20)


@pytest.mark.slow
def test_the_package_is_the_same_bytes_and_runs_the_same_once_loaded(tmp_path):
    data = model_path(TRAINED).read_bytes()
    first, again = (tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False) for _ in range(2))
    first.save(tmp_path / "a.zip")
    again.save(tmp_path / "b.zip")
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    loaded = tvm_ethos.load(tmp_path / "a.zip")
    for x in _random_inputs((1, 28, 28), 2, seed=9):   # both in a row from the reset values
        assert np.array_equal(loaded.run(x)[0], first.run(x)[0])


_CASES = lstm_cases(features=24, cells=16)


def _check_case(case: LstmCase, then_fc: int | None = None) -> None:
    data = lstm_model(case) if then_fc is None else lstm_then_fully_connected(case, then_fc)
    shape = ((case.steps, case.batches, case.features) if case.time_major
             else (case.batches, case.steps, case.features))
    _assert_equals_tflm(data, _random_inputs(shape, 3, seed=case.seed))


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_CASES)
def test_any_small_lstm_on_ethos_u_llvm_equals_tflite_micro(case):
    """Sizes, batches, quantization (the sequence's and hidden state's zero points, the cell
    scale, a cell clip), weight and bias ranges, batch- or time-major sequences; three runs
    in a row, then three after ``reset()``."""
    _check_case(case)


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_CASES, then_fc=st.one_of(st.none(), st.integers(1, 12)))
def test_any_lstm_alone_or_before_a_fully_connected_on_ethos_u_llvm(case, then_fc):
    _check_case(case, then_fc)


@given(q=st.builds(
    LstmQuantization, st.tuples(st.floats(1e-4, 1.0), st.integers(-128, 127)),
    st.tuples(st.floats(1e-4, 1.0), st.integers(-128, 127)),
    st.sampled_from([2.0 ** p for p in range(-18, -4)]),
    st.one_of(st.none(), st.integers(0, 32767)), st.booleans(),
    st.tuples(*[st.floats(1e-4, 1.0)] * 4), st.tuples(*[st.floats(1e-4, 1.0)] * 4)))
def test_the_quantization_survives_the_relax_constant(q):
    """The importer's float64 vector gives back every field exactly."""
    assert LstmQuantization.from_params(q.to_params()) == q




@pytest.mark.parametrize("variant, words", REFUSED, ids=[w for _, w in REFUSED])
def test_forms_the_ethos_u_refuses_are_one_line_on_ethos_u_llvm(variant, words):
    data = lstm_model(dataclasses.replace(LstmCase(), **variant))
    with pytest.raises(UnsupportedModelError) as err:
        tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False)
    msg = str(err.value)
    assert "\n" not in msg and words in msg, msg
    assert "the llvm host has no quantized LSTM kernel" in msg, msg


def test_an_npu_without_the_lstm_passes_it_on_to_the_ethos_u():
    """ethos-n first: its pass leaves the LSTM to the Ethos-U's (the FULLY_CONNECTED after it
    goes to the Ethos-N), every output TFLite Micro's."""
    case = LstmCase(batches=1, steps=3, features=5, cells=4, seed=5)
    data = lstm_then_fully_connected(case, 6)
    cm = tvm_ethos.compile(data, "ethos-n,ethos-u,llvm", cache_dir=False)
    assert cm.partition_summary.get("ethos-u") == 1, cm.partition_summary
    inputs = _random_inputs((1, 3, 5), 2, seed=5)
    _assert_runs_equal(cm.run, inputs, _tflm_in_a_row(data, inputs), "in a row")


@pytest.mark.parametrize("target", ["llvm", "ethos-n,llvm"])
def test_an_lstm_no_target_takes_is_one_line(target):
    with pytest.raises(UnsupportedModelError) as err:
        tvm_ethos.compile(lstm_model(LstmCase()), target, cache_dir=False)
    msg = str(err.value)
    assert "\n" not in msg and "UNIDIRECTIONAL_SEQUENCE_LSTM" in msg, msg
    assert f"no target of '{target}' takes it" in msg, msg
    assert "no host target (llvm, opencl) has a quantized LSTM kernel" in msg, msg
    assert "ethos-u,llvm" in msg, msg


def test_tvmc_run_prints_the_first_run_s_outputs_and_times_the_runs_after(tmp_path, capsys):
    """``--print-time --repeat 3`` runs four times; the outputs written are the first run's,
    from the reset values (a fresh interpreter's), not the fourth's."""
    data = _lstm_output_model()
    tvm_ethos.compile(data, "ethos-u,llvm", cache_dir=False).save(tmp_path / "m.zip")
    x = _random_inputs((1, 28, 28), 1, seed=15)[0]
    np.save(tmp_path / "x.npy", x)
    rc = main(["run", str(tmp_path / "m.zip"), "--inputs", str(tmp_path / "x.npy"),
               "--print-time", "--repeat", "3", "--outputs", str(tmp_path / "out.npz"),
               "--no-progress"])
    assert rc == 0, capsys.readouterr().err
    want = _tflm_in_a_row(data, [x] * 4)
    assert not np.array_equal(want[0], want[3])
    got = np.load(tmp_path / "out.npz")["output_0"]
    assert np.array_equal(got.reshape(want[0].shape), want[0])


def test_the_tvm_way_s_vm_goes_on_from_run_to_run_too():
    """``partition_for_ethos_u`` then a plain ``tvm.compile``: the VM's kernel keeps the
    states in the executable's constants, so its runs in a row are TFLite Micro's in a row."""
    data = _lstm_output_model()
    ex = tvm.compile(tvm_ethos.partition_for_ethos_u(tvm_ethos.load_model(data)), target="llvm")
    vm = relax.VirtualMachine(ex, tvm.cpu())
    inputs = _random_inputs((1, 28, 28), 2, seed=16)
    _assert_runs_equal(lambda x: [vm["main"](tvm.runtime.tensor(x)).numpy()], inputs,
                       _tflm_in_a_row(data, inputs), "the VM, in a row")
