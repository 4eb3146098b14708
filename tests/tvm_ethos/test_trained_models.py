"""TFLite Micro's trained int8 models (``tflite-micro/`` beside the shipped models, provenance
in its README) through ``load_model`` and ``compile``: the ones whose operators the importer
converts run bit-exact against TFLite Micro on every target (and against LiteRT's reference
kernels on the host where LiteRT takes the model); the others are refused in one line that
names the operator and the target that takes it. Each model is compiled once per target."""
from __future__ import annotations

import contextlib
import io
import struct

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from ai_edge_litert.interpreter import Interpreter, OpResolverType
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from tflite_micro.python.tflite_micro import runtime

import tvm_ethos
from benchmarks.real_models import vela_size
from ethosu_stream.tflite_custom_op import payload_accelerator
from tests.helpers.models import MODELS_DIR
from tests.helpers.tflite_oracle import oracle, tflm_oracle, tflm_random_inputs
from tests.helpers.tflite_split import (
    SoftmaxTail,
    final_softmax,
    needs_split,
    split_before_softmax,
    tflm_aborts_on,
    tflm_isolated,
)
from tvm_ethos.cli import main
from tvm_ethos.compute.fixed_point import softmax_8bit
from tvm_ethos.compute.quant import mbqm_np, quantize_multiplier
from tvm_ethos.errors import ModelLoadError, UnsupportedModelError
from tvm_ethos.frontend import OperatorSupport, operator_support

TRAINED = MODELS_DIR / "tflite-micro"


def trained(name: str) -> bytes:
    p = TRAINED / f"{name}.tflite"
    if not p.exists():
        pytest.skip(f"trained model {p} not available (set TVM_ETHOS_MODELS)")
    return p.read_bytes()


def grey_bmp(name: str) -> np.ndarray:
    """A 96x96 8-bit grey BMP as person_detect's input: rows top-down, the pixel bytes
    reinterpreted as int8 (tflite-micro's own test convention, no -128 shift)."""
    p = TRAINED / name
    if not p.exists():
        pytest.skip(f"test image {p} not available")
    raw = p.read_bytes()
    offset = struct.unpack_from("<I", raw, 10)[0]
    width, height = struct.unpack_from("<ii", raw, 18)
    rows = np.frombuffer(raw, np.uint8, width * abs(height), offset).reshape(abs(height), width)
    if height > 0:                          # stored bottom-up
        rows = rows[::-1]
    return np.ascontiguousarray(rows).view(np.int8).reshape(1, height, width, 1)


def litert_takes(data: bytes) -> bool:
    try:
        Interpreter(model_content=data).allocate_tensors()
    except (RuntimeError, ValueError):
        return False
    return True


def assert_matches_references(cm, data: bytes, inputs: list[list[np.ndarray]], host: bool):
    """``cm`` gives TFLite Micro's outputs on every input list, and LiteRT's reference kernels'
    on a host-only target where LiteRT takes the model; the outputs must vary with the
    inputs (a constant output would check nothing)."""
    seen = []
    with_litert = host and litert_takes(data)
    for xs in inputs:
        got = cm.run(*xs)
        want = tflm_oracle(data, xs)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g.reshape(w.shape), w)
        if with_litert:
            for g, r in zip(got, oracle(data, xs)):
                np.testing.assert_array_equal(g.reshape(r.shape), r)
        seen.append(np.concatenate([g.ravel() for g in got]))
    assert len({s.tobytes() for s in seen}) > 1, "the outputs do not follow the inputs"


# ------------------------------------------------------------------ micro_speech, every target
@pytest.fixture(scope="module", params=[
    "llvm", "ethos-u,llvm", "ethos-n,llvm",
    pytest.param("opencl", marks=pytest.mark.slow),
    pytest.param("ethos-n,opencl", marks=pytest.mark.slow),
])
def micro_speech(request):
    if "opencl" in request.param:
        pytest.importorskip("pyopencl")
    data = trained("micro_speech_quantized")
    return request.param, data, tvm_ethos.compile(data, target=request.param)


def test_micro_speech_bit_exact(micro_speech):
    """FULLY_CONNECTED on a 4-D input (1x25x20x8 against 4000x4 weights): TFLite reads it as
    rows of the weights' depth."""
    target, data, cm = micro_speech
    rs = np.random.RandomState(7)
    inputs = [tflm_random_inputs(data, rs) for _ in range(4)]
    assert_matches_references(cm, data, inputs, host="," not in target)
    npu = target.split(",")[0]
    if "," in target:
        assert cm.partition_summary.get(npu, 0) >= 3, cm.partition_summary


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u55-256", "ethos-u65-256"])
def test_micro_speech_flatten_is_an_alias_in_the_stream(accelerator):
    """The RESHAPEs around the conv (1960 -> 49x40x1, 25x20x8 -> 4000 rows) are the same
    bytes: planned alone, the stream gives each its input's address and no copy, so no
    moment holds the conv's 4,000 B twice (Vela Size holds 1,960 + 4,000)."""
    data = trained("micro_speech_quantized")
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={accelerator},llvm",
                           npu_runtime="stream", cache_dir=False)
    (stream,) = cm.plan_report["streams"].values()
    assert stream["generated"] and stream["realizes_plan"], stream
    assert stream["sram_high_water_bytes"] == stream["planned_peak_bytes"] < 2 * 4000
    rs = np.random.RandomState(3)
    assert_matches_references(cm, data, [tflm_random_inputs(data, rs) for _ in range(3)],
                              host=False)


def test_micro_speech_exports_as_compiled_and_is_refused_back(micro_speech, tmp_path):
    """Our own Ethos-U .tflite holds 'ethos-u' custom operators: load_model refuses it in one
    line that says it is already compiled and how to run it."""
    target, data, cm = micro_speech
    if target != "ethos-u,llvm":
        pytest.skip("the .tflite export is Ethos-U's")
    out = tmp_path / "micro_speech_vela.tflite"
    cm.export_tflite(out, model=data)
    with pytest.raises(UnsupportedModelError, match="already compiled for Ethos-U") as err:
        tvm_ethos.load_model(out)
    assert "\n" not in str(err.value) and "tvmc run" in str(err.value)


# ------------------------------------------------------------------ person_detect
PERSON = {"person.bmp": [-113, 113], "no_person.bmp": [57, -57]}    # tflite-micro's README


@pytest.fixture(scope="module", params=[
    "llvm",
    pytest.param("ethos-u,llvm", marks=pytest.mark.slow),
    pytest.param("ethos-n,llvm", marks=pytest.mark.slow),
    pytest.param("opencl", marks=pytest.mark.slow),
    pytest.param("ethos-n,opencl", marks=pytest.mark.slow),
])
def person_detect(request):
    if "opencl" in request.param:
        pytest.importorskip("pyopencl")
    data = trained("person_detect")
    return request.param, data, tvm_ethos.compile(data, target=request.param)


def test_person_detect_classifies_its_test_images(person_detect):
    """Per-channel bias scales along quantized_dimension 3 of a 1-D bias (TFLite Micro ignores
    the axis; LiteRT refuses the file): imported, and the two test images give TFLite Micro's
    scores, which are the README's."""
    target, data, cm = person_detect
    for image, scores in PERSON.items():
        x = grey_bmp(image)
        got = cm.run(x)[0]
        np.testing.assert_array_equal(tflm_oracle(data, [x])[0], np.array([scores], np.int8))
        np.testing.assert_array_equal(got.reshape(1, 2), np.array([scores], np.int8))
    images = [[grey_bmp(image)] for image in PERSON]
    noise = tflm_random_inputs(data, np.random.RandomState(3))
    assert_matches_references(cm, data, images + [noise], host="," not in target)


# ------------------------------------------------------------------ hello_world (slow)
@pytest.mark.slow
@pytest.mark.parametrize("target", ["llvm", "ethos-u,llvm", "ethos-n,llvm"])
def test_hello_world_bit_exact(target):
    data = trained("hello_world_int8")
    cm = tvm_ethos.compile(data, target=target)
    inputs = [[np.array([[v]], np.int8)] for v in (-128, -60, 0, 37, 127)]
    assert_matches_references(cm, data, inputs, host=target == "llvm")


# ------------------------------------------------------------------ what the importer refuses
REFUSED = {   # model -> (first operator no host target runs, every builtin the tflite-micro
    #             host's cut does not import)
    "keyword_scrambled_8bit": ("operator 1 (SVDF)", {"SVDF"}),
    # imported for an ethos-u package (test_lstm_emulator.py), refused by the partition
    "trained_lstm_int8": ("(UNIDIRECTIONAL_SEQUENCE_LSTM)", {"UNIDIRECTIONAL_SEQUENCE_LSTM"}),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
@pytest.mark.parametrize("host", ["llvm", "opencl"])
def test_unconvertible_operators_refused_for_host_targets(name, host):
    """TFLite Micro runs these; no host target can: one line naming the operator and the target
    (ethos-u, keeping it a TFLite operator) that takes it."""
    first, _ = REFUSED[name]
    with pytest.raises(UnsupportedModelError) as err:
        tvm_ethos.compile(trained(name), target=host)
    msg = str(err.value)
    assert "\n" not in msg
    assert first in msg and "no host target" in msg and "ethos-u" in msg, msg


def test_operator_support_per_trained_model():
    """The public per-operator verdicts the Ethos-U TFLite path asks for."""
    for name in ("hello_world_int8", "micro_speech_quantized", "person_detect"):
        verdicts = operator_support(trained(name))
        assert verdicts and all(v.importable and not v.reason for v in verdicts), name
    speech = operator_support(trained("micro_speech_quantized"))
    assert [v.builtin for v in speech] == ["RESHAPE", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED",
                                           "SOFTMAX"]
    assert [v.index for v in speech] == [0, 1, 2, 3]
    for name, (_, refused) in REFUSED.items():
        verdicts = operator_support(trained(name))
        assert all(isinstance(v, OperatorSupport) for v in verdicts)
        assert {v.builtin for v in verdicts if not v.importable} == refused, name
        assert all(v.reason and "\n" not in v.reason for v in verdicts if not v.importable)
        assert any(v.importable for v in verdicts)      # FULLY_CONNECTED, RESHAPE, ...


def test_operator_support_refuses_a_damaged_file():
    with pytest.raises(ModelLoadError, match="truncated or corrupt"):
        operator_support(trained("person_detect")[:5000])


def test_vela_compiled_model_refused_in_one_line():
    with pytest.raises(UnsupportedModelError, match="already compiled for Ethos-U") as err:
        tvm_ethos.load_model(trained("person_detect_vela"))
    assert "\n" not in str(err.value)


def test_vela_compiled_model_compiles_for_ethos_u_as_it_is(tmp_path):
    """A file whose NPU part is compiled already (tflite-micro's person_detect_vela): compiling
    it for the ethos-u target keeps its ethos-u operator as it is, as Vela does (Vela counts
    it a CPU operator; so does the placement), and the file written runs as the source."""
    source = trained("person_detect_vela")
    built_for = payload_accelerator(source)
    assert built_for == "ethos-u55-256"    # as ../shared/models/README.md says
    cm = tvm_ethos.compile(source, f"ethos-u -accelerator_config={built_for}", cache_dir=False)
    assert cm.tflite == source
    assert [(p.kind, p.placed_on) for p in cm.placement] == [("ethos-u", "tflite-micro")]
    assert "compiled for Ethos-U already" in cm.placement[0].why
    assert "compiled already, kept as it is" in cm.plan_table
    out = tmp_path / "kept.tflite"
    rc, text, err = _tvmc(["compile", str(TRAINED / "person_detect_vela.tflite"), "--target",
                           f"ethos-u -accelerator_config={built_for}", "-o", str(out),
                           "--no-progress"])
    assert rc == 0 and out.read_bytes() == source, err
    rc, text, err = _tvmc(["run", str(out), "--fill-mode", "ones"])
    assert rc == 0 and "1 ethos-u operator emulated" in text, (text, err)


@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_vela_compiled_model_for_another_accelerator_is_refused(accelerator):
    """Its stream is for an ethos-u55-256 (the driver payload's config word), which the
    Ethos-U driver checks against the hardware: kept for another accelerator it would never
    run, so the compile says so in one line and names both ways out."""
    with pytest.raises(UnsupportedModelError) as err:
        tvm_ethos.compile(trained("person_detect_vela"),
                          f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    msg = str(err.value)
    assert "\n" not in msg and "for ethos-u55-256" in msg and accelerator in msg, msg
    assert "-accelerator_config=ethos-u55-256" in msg and "original .tflite" in msg, msg


def test_model_partly_compiled_by_vela_names_what_the_npu_would_take():
    """Vela Size's keyword_scrambled_8bit keeps its SVDFs on the CPU beside its ethos-u
    operators; our NPU takes SVDFs, but a new stream cannot share the old streams' offline
    arena plan: one line naming the operators, and what to compile instead."""
    vela = vela_size(str(TRAINED / "keyword_scrambled_8bit.tflite"), "ethos-u55-128")
    with pytest.raises(UnsupportedModelError) as err:
        tvm_ethos.compile(vela["tflite"], "ethos-u", cache_dir=False)
    msg = str(err.value)
    assert "\n" not in msg and "already compiled for Ethos-U" in msg, msg
    assert "(SVDF)" in msg and "compile the original .tflite" in msg, msg


def _tvmc(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("model, words", [
    ("trained_lstm_int8", ("UNIDIRECTIONAL_SEQUENCE_LSTM", "ethos-u")),
    ("cut", ("truncated or corrupt",)),
])
def test_tvmc_compile_refusals_are_one_line_exit_2(model, words, tmp_path):
    if model == "cut":
        path = tmp_path / "cut.tflite"
        path.write_bytes(trained("micro_speech_quantized")[:3000])   # TFLite Micro refuses it
    else:
        trained(model)
        path = TRAINED / f"{model}.tflite"
    rc, out, err = _tvmc(["compile", str(path), "--target", "llvm", "-o",
                          str(tmp_path / "m.tar"), "--no-progress"])
    assert rc == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tvmc compile: error:"), err
    assert all(w in lines[0] for w in words), lines[0]


# ------------------------------------------------------------------ LiteRT vs TFLite Micro
def _resnet8_tie():
    """ResNet-8 and an input on which LiteRT's reference kernels and TFLite Micro differ
    (rfcs/0002, section 4: uniform int8 images of RandomState(11), the second one)."""
    p = MODELS_DIR / "resnet8_cifar.tflite"
    if not p.exists():
        pytest.skip(f"model {p} not available (set TVM_ETHOS_MODELS)")
    rs = np.random.RandomState(11)
    rs.randint(-128, 128, (1, 32, 32, 3))
    return p.read_bytes(), rs.randint(-128, 128, (1, 32, 32, 3)).astype(np.int8)


def test_resnet8_references_differ_only_in_fully_connected_rounding():
    """The first tensor that differs is FULLY_CONNECTED's output (operator 13), and each side
    is its own rounding of the same accumulators: LiteRT's once, TFLite Micro's twice."""
    data, x = _resnet8_tie()
    lr = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=True)
    lr.allocate_tensors()
    lr.set_tensor(lr.get_input_details()[0]["index"], x)
    lr.invoke()
    tm = runtime.Interpreter.from_bytes(
        data, intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
    tm.set_input(x, 0)
    tm.invoke()
    assert not np.array_equal(lr.get_tensor(lr.get_output_details()[0]["index"]),
                              tm.get_output(0))
    sg = tflite.Model.GetRootAs(data, 0).Subgraphs(0)
    model = tflite.Model.GetRootAs(data, 0)
    first = None
    for o in range(sg.OperatorsLength()):
        t = int(sg.Operators(o).OutputsAsNumpy()[0])
        a = lr.get_tensor(t).ravel()
        b = np.asarray(tm.GetTensor(t, 0)["tensor_data"]).ravel()
        if not np.array_equal(a, b):
            first = o
            break
    op = sg.Operators(first)
    code = model.OperatorCodes(op.OpcodeIndex())
    assert max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) == \
        tflite.BuiltinOperator.FULLY_CONNECTED
    xi, wi = (int(i) for i in op.InputsAsNumpy()[:2])
    out = int(op.OutputsAsNumpy()[0])

    def qp(t):
        q = sg.Tensors(t).Quantization()
        return q.ScaleAsNumpy().astype(np.float64), q.ZeroPointAsNumpy().astype(np.int64)

    (sx, zx), (sw, _), (so, zo) = qp(xi), qp(wi), qp(out)
    wt = sg.Tensors(wi)
    w = model.Buffers(wt.Buffer()).DataAsNumpy().view(np.int8).reshape(wt.ShapeAsNumpy())
    acc = w.astype(np.int64) @ (lr.get_tensor(xi).ravel().astype(np.int64) - zx[0])
    ms = [quantize_multiplier(float(sx[0] * s / so[0])) for s in sw]
    m = np.array([v for v, _ in ms], np.int64)
    shift = np.array([v for _, v in ms], np.int64)
    once = ((acc * m + (np.int64(1) << (30 - shift))) >> (31 - shift)) + zo[0]
    twice = mbqm_np(acc, m, shift) + zo[0]
    np.testing.assert_array_equal(np.clip(once, -128, 127), lr.get_tensor(out).ravel())
    np.testing.assert_array_equal(np.clip(twice, -128, 127),
                                  np.asarray(tm.GetTensor(out, 0)["tensor_data"]).ravel())
    assert not np.array_equal(once, twice)


@pytest.mark.slow
@pytest.mark.parametrize("target", ["llvm", "ethos-u,llvm"])
def test_resnet8_paths_match_their_reference_on_the_fully_connected_tie(target):
    """A host rounds FULLY_CONNECTED once: on the tie it gives LiteRT's output; the Ethos-U
    rounds twice and gives TFLite Micro's, its oracle (rfcs/0002 records it)."""
    data, x = _resnet8_tie()
    got = tvm_ethos.compile(data, target=target).run(x)[0].reshape(1, 10)
    litert, tflm = oracle(data, [x])[0].reshape(1, 10), tflm_oracle(data, [x])[0].reshape(1, 10)
    want, other = (tflm, litert) if target.startswith("ethos-u") else (litert, tflm)
    np.testing.assert_array_equal(got, want)
    assert not np.array_equal(got, other)


# ------------------------------------------------------------------ MobileNetV1-224's SOFTMAX
def _mobilenet_softmax() -> tuple[bytes, SoftmaxTail]:
    """MobileNetV1-224's final SOFTMAX alone (its 1000-wide row, input scale and beta)."""
    path = MODELS_DIR / "mobilenet_v1_1.0_224.tflite"
    if not path.exists():
        pytest.skip(f"{path} not available (set TVM_ETHOS_MODELS)")
    tail = final_softmax(path.read_bytes())
    return tb.softmax(None, shape=(1, tail.row), beta=tail.beta, in_q=(tail.in_scale, 4)), tail


def _rows_about_the_check(rs, n: int, width: int) -> list[np.ndarray]:
    """Rows of ``width`` int8 values: most near -128, a few at 127, so that the sum of
    exponentials falls on both sides of 512 when ``width`` is 1000."""
    rows = []
    for k in range(n):
        row = rs.randint(-128, -128 + 1 + 25 * (k % 5), size=(1, width))
        row[0, rs.randint(0, width, size=rs.randint(1, 40))] = 127
        rows.append(row.astype(np.int8))
    return rows


def test_tflm_softmax_aborts_exactly_where_its_output_shift_passes_31():
    """TFLite Micro's reference int8 SOFTMAX (run in worker processes) aborts on a row exactly
    when ``tflm_aborts_on`` says (its Q12.19 sum of exponentials reaches 512: the output
    shift is 32), and on every other row gives ``fixed_point.softmax_8bit``'s output: on
    MobileNetV1-224's 1000-wide rows and on shorter rows with the same parameters."""
    model, tail = _mobilenet_softmax()
    rs = np.random.RandomState(30)
    rows = _rows_about_the_check(rs, 10, tail.row)
    got = tflm_isolated(model, rows)
    aborted = [g is None for g in got]
    assert aborted == [tflm_aborts_on(r, tail.in_scale, tail.beta) for r in rows]
    assert 0 < sum(aborted) < len(rows)
    ran = [(r, g) for r, g in zip(rows, got) if g is not None]
    for r, g in ran:
        np.testing.assert_array_equal(g.reshape(r.shape),
                                      softmax_8bit(r, tail.in_scale, tail.beta))
    assert any((g == -127).any() for _, g in ran)   # a row whose output is not all -128
    short = tb.softmax(None, shape=(1, 120), beta=tail.beta, in_q=(tail.in_scale, 4))
    rows = [rs.randint(-128, 128, size=(1, 120)).astype(np.int8) for _ in range(3)]
    for r, g in zip(rows, tflm_isolated(short, rows)):
        assert g is not None
        np.testing.assert_array_equal(g.reshape(r.shape),
                                      softmax_8bit(r, tail.in_scale, tail.beta))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.integers(0, 255), highs=st.integers(0, 999))
def test_softmax_where_tflm_aborts_is_the_rounded_softmax(seed, spread, highs):
    """Where TFLite Micro's check fires, every probability is below 1/512, so the 8-bit
    output is all -128: ``softmax_8bit`` (TFLite Micro's arithmetic carried on at a 32-bit
    shift) gives exactly that, the float softmax rounded to the output's 1/256 steps."""
    tail = SoftmaxTail(0.003055321518331766, 1.0, 1000)
    rs = np.random.RandomState(seed)
    row = rs.randint(127 - spread, 128, size=(1, tail.row))
    row[0, rs.randint(0, tail.row, size=highs)] = -128
    row = row.astype(np.int8)
    assume(tflm_aborts_on(row, tail.in_scale, tail.beta))
    real = np.exp(tail.in_scale * (row.astype(np.float64) - row.max()))
    rounded = np.round(256 * real / real.sum()) - 128
    np.testing.assert_array_equal(softmax_8bit(row, tail.in_scale, tail.beta), rounded)
    assert (rounded == -128).all()


def test_npu_softmax_gives_tflm_arithmetic_where_tflm_aborts():
    """The Ethos-U stream runs MobileNetV1-224's SOFTMAX on every row, those TFLite Micro's
    kernel aborts on included, and gives TFLite Micro's arithmetic (``softmax_8bit``)."""
    model, tail = _mobilenet_softmax()
    cm = tvm_ethos.compile(model, "ethos-u -accelerator_config=ethos-u55-128", cache_dir=False)
    assert cm.partition_summary == {"ethos-u": 1}
    rows = _rows_about_the_check(np.random.RandomState(31), 8, tail.row)
    aborts = {tflm_aborts_on(r, tail.in_scale, tail.beta) for r in rows}
    assert aborts == {True, False}
    for r in rows:
        np.testing.assert_array_equal(cm.run(r)[0].reshape(r.shape),
                                      softmax_8bit(r, tail.in_scale, tail.beta))


@pytest.mark.slow
@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
def test_mobilenet_v1_224_matches_tflite_micro(accelerator):
    """MobileNetV1-224 compiled for the Ethos-U to a ``.tflite`` gives TFLite Micro's outputs
    (its interpreter up to the logits, its SOFTMAX arithmetic after: ``tflm_oracle``), while
    TFLite Micro's interpreter on the whole model aborts. Its weights are random, so every
    input gives the same logits and an all -128 output; the SOFTMAX's arithmetic itself is
    checked on varied rows above."""
    path = MODELS_DIR / "mobilenet_v1_1.0_224.tflite"
    if not path.exists():
        pytest.skip(f"{path} not available (set TVM_ETHOS_MODELS)")
    data = path.read_bytes()
    assert needs_split(data)
    cm = tvm_ethos.compile(data, f"ethos-u -accelerator_config={accelerator}", cache_dir=False)
    rs = np.random.RandomState(0)
    inputs = [rs.randint(-128, 128, size=(1, 224, 224, 3)).astype(np.int8) for _ in range(3)]
    for x in inputs:
        want = tflm_oracle(data, [x])
        np.testing.assert_array_equal(cm.run(x)[0].reshape(want[0].shape), want[0])
    split = split_before_softmax(data)
    logits = tflm_oracle(split.logits, [inputs[0]])[0]
    assert tflm_aborts_on(logits, split.softmax.in_scale, split.softmax.beta)
    assert tflm_isolated(data, inputs[:1]) == [None]
