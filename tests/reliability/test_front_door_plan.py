"""``tvmc plan`` applies the front door's rules: a model ``tvmc compile`` refuses at the front
door (``planner.tflite_check``) is refused by ``tvmc plan`` with exit status 2 and the same
line, never planned and never a traceback.

Each rule is broken by one model: a defect the test builder writes (``builder_models``), or
one case of the front-door mutation campaign (``front_door_cases.mutation``, campaign 0),
named by its index. Each case first shows it breaks the rule it stands for (the front door's
message matches the rule's words), so a change in the mutators cannot leave a rule untested
unnoticed.

``tvmc compile --target ethos-u,llvm`` (a package: every operator through TVM's importer)
refuses every one of them. ``tvmc compile --target ethos-u`` (the tflite-micro host) refuses
the invalid and self-contradicting files the same way, but keeps an operator with a
*finding* (content TVM's importer cannot take) as a TFLite operator for TFLite Micro; the
planner plans every operator for the NPU, so ``tvmc plan`` refuses those models with the
package's line.

The property test draws further cases of the campaign: whenever the front door refuses a
model, ``planner.tflite.load_tflite`` refuses it with the same message and the matching
kind (invalid file / cannot import); whenever it passes, the planner's error (if any) is
none of the front door's.
"""
from __future__ import annotations

import contextlib
import io
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.errors import InvalidModelError, PlannerError, UnimportableModelError
from planner.tflite import load_tflite
from tests.helpers.models import model_path
from tests.reliability.front_door_cases import mutation, seed_models, valid_seeds
from tests.reliability.tflite_mutator import builder_models, layout
from tvm_ethos.cli import main
from tvm_ethos.errors import ModelLoadError, TvmEthosError
from tvm_ethos.frontend.tflite_check import check_tflite, refusing_findings

#: the campaign's valid seeds when every trained and shipped model is present (the case
#: indices below pick among them)
_SEEDS = 17

#: (rule, the case breaking it: its bytes, a builder defect's name or a campaign index, words
#: of the front door's message). Files no runtime reads:
INVALID = [
    ("a file at all", b"", "the file is empty"),
    ("TFLite identifier", bytes(16), "not a TFLite flatbuffer (file identifier b'\\x00"),
    ("vector past the end", 5, "a vector of 2147483647 elements at byte 436 runs past"),
    ("vtable outside the file", 34, "the vtable of the table at byte 540 lies outside"),
    ("reference past the end", 134, "a reference at byte 500 points past the end"),
    ("table outside the file", 167, "a table at byte 8323628 lies outside the file"),
    ("vtable of an invalid size", 211, "has an invalid size 32526"),
]
#: content that contradicts the schema or itself:
CONTRADICTORY = [
    ("scale out of range", "conv2d/t0:scale_zero", "scales must be finite, positive"),
    ("zero point out of range", "conv2d/t0:zp_out_of_range", "zero point(s) [1000] outside"),
    ("scales and zero points", "conv2d/t0:zp_count", "1 quantization scales but 3 zero"),
    ("zero points without scales", 100, "has 1 zero points but no scales"),
    ("per-channel scale count", "conv2d/t1:scale_count", "5 per-channel scales along dim"),
    ("quantized_dimension", "conv2d/t1:quant_axis", "along quantized_dimension 6, out of"),
    ("negative dimension", "conv2d/t0:negative_dim", "has a negative dimension in [-1,"),
    ("constant's buffer size", "conv2d/t1:absurd_dim", "which needs 57982058496 bytes"),
    ("4-D input", "conv2d/t0:rank_plus_one", "input 0 has rank 5; CONV_2D needs a 4-D"),
    ("4-D output", "conv2d/t3:rank_plus_one", "the output has rank 5; CONV_2D produces"),
    ("operand rank", "conv2d/t2:rank_plus_one", "input 2 has rank 2, expected 1"),
    ("graph input index", 1, "graph input 0 refers to tensor 5; the subgraph has 4"),
    ("graph output index", 243, "graph output 0 refers to tensor -2147483648"),
    ("graph output produced", 240, "graph output 0 (tensor 3, 't3') is produced by no"),
    ("operator input index", 3, "input 1 refers to tensor 2147483647; the subgraph has 35"),
    ("operator output index", 143, "output 0 refers to tensor 5; the subgraph has 4"),
    ("operator writes a constant", 2, "writes tensor 1 ('MatMul_bias'), which is a constant"),
    ("operator reads undefined", 20, "which is no graph input, constant or output of an"),
    ("one producer", 2282, "tensor 2 is the output of both operator 1 and operator 2"),
    ("number of inputs", 39, "operator 0 (MEAN) has 3 inputs; MEAN takes 2"),
    ("buffer index", 17, "refers to buffer 2147483648; the model has 32"),
    ("operator code index", 168, "operator 1 uses operator code 32767; the model has 5"),
    ("operator code consistent", 47, "builtin_code 3, deprecated_builtin_code 1"),
    ("builtin defined", 48, "builtin operator 255, which this TFLite schema does not"),
    ("options type defined", 8, "has options of type 127, which TFLite does not define"),
    ("options of the operator", 6, "carries ReducerOptions, expected Pool2DOptions"),
    ("required options", 60, "operator 1 (FULLY_CONNECTED) has no FullyConnectedOptions"),
    ("option minimum", 109, "StrideW is -2147483648, must be at least 1"),
    ("fused activation", 261, "fused activation -1 is not a TFLite ActivationFunction"),
    ("padding", 877, "padding -1 is neither SAME (0) nor VALID (1)"),
    ("intermediate empty", 570, "intermediate 3 (tensor 21, 'input_to_output_intermedi"),
    ("schema version", 1087, "schema version 2130706435, expected 3"),
    ("UTF-8 name", 2374, "tensor 2 has a name that is not UTF-8"),
]
#: findings: well-formed content TVM's importer cannot take
FINDINGS = [
    ("no quantization", "conv2d/t0:no_quantization", "is INT8 but has no quantization"),
    ("tensor size", "conv2d/t0:absurd_dim", "tensors are limited to 2,147,483,648 bytes"),
    ("empty dimension", "conv2d/t0:zero_dim", "has an empty dimension in [0, 8, 8, 4]"),
    ("dynamic shape", 399, "has a dynamic shape (signature [-1, 16])"),
    ("one tensor type", "conv2d/t0:float32", "mixes tensor types (input 0 FLOAT32, output"),
    ("weights' type", 128, "INT8 activations with BOOL weights"),
    ("bias type", 305, "INT8 activations with a INT4 bias"),
    ("per-channel zero points", "conv2d/t2:zp_out_of_range", "per channel with non-zero zero"),
    ("depthwise weights", "depthwise/t0:absurd_dim", "disagree with depth_multiplier 2"),
    ("importable type", 369, "is INT4, which TVM's TFLite importer cannot represent"),
    ("readable name", 64, "tensor 1's name cannot be read"),
    ("softmax beta", 408, "beta 0.0 with input scale 0.00152093"),
    ("computed input 0", 473, "input 0 ('sequential/dense_1/BiasAdd/ReadVariableOp') is a"),
    ("constant weights", 3571, "input 1 ('t0') is not a constant; tvm-ethos needs constant"),
]


@lru_cache(maxsize=1)
def _campaign():
    valid = valid_seeds(seed_models())
    return valid, {name: layout(data) for name, data in valid}


@lru_cache(maxsize=1)
def _defects() -> dict[str, bytes]:
    return dict(builder_models())


def _case(case) -> bytes:
    if isinstance(case, bytes):
        return case
    if isinstance(case, str):
        return _defects()[case]
    valid, layouts = _campaign()
    if len(valid) != _SEEDS:
        pytest.skip("the campaign's trained and shipped models are not all available "
                    "(set TVM_ETHOS_MODELS)")
    return mutation(valid, layouts, case)[1]


def _tvmc(*argv: str) -> tuple[int, str]:
    """tvmc's exit status and its stderr, in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(list(argv))
    return rc, err.getvalue()


def _line(stderr: str, command: str) -> str:
    """The one error line of ``tvmc COMMAND``, its prefix removed."""
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    prefix = f"tvmc {command}: error: "
    assert stderr.startswith(prefix), stderr
    return stderr[len(prefix):].rstrip("\n")


def _refused_alike(tmp_path, case, words, targets) -> None:
    path = tmp_path / "model.tflite"
    path.write_bytes(_case(case))
    rc, plan = _tvmc("plan", str(path), "--target", "ethos-u", "--no-progress")
    assert rc == 2, plan
    line = _line(plan, "plan")
    assert line.startswith(f"{path}: ") and words in line, line
    for target in targets:
        out = tmp_path / ("out.tflite" if target == "ethos-u" else "out.tvmethos")
        rc, compiled = _tvmc("compile", str(path), "--target", target, "--no-progress",
                             "-o", str(out))
        assert rc == 2, (target, compiled)
        assert _line(compiled, "compile") == line, target


@pytest.mark.parametrize("rule, case, words", INVALID + CONTRADICTORY,
                         ids=[r[0] for r in INVALID + CONTRADICTORY])
def test_plan_refuses_a_file_compile_refuses_with_its_line(tmp_path, rule, case, words):
    _refused_alike(tmp_path, case, words, ("ethos-u,llvm", "ethos-u"))


@pytest.mark.parametrize("rule, case, words", FINDINGS, ids=[r[0] for r in FINDINGS])
def test_plan_refuses_what_the_importer_cannot_take_with_compile_s_line(tmp_path, rule, case,
                                                                        words):
    _refused_alike(tmp_path, case, words, ("ethos-u,llvm",))
    # the tflite-micro host keeps the operator for TFLite Micro: a file, no traceback
    rc, compiled = _tvmc("compile", str(tmp_path / "model.tflite"), "--target", "ethos-u",
                         "--no-progress", "-o", str(tmp_path / "out.tflite"))
    assert rc == 0 and "Traceback" not in compiled, compiled


def test_plan_refuses_a_compiled_file_naming_what_to_plan(tmp_path):
    """A .tflite Vela compiled (person_detect's, shipped) holds an 'ethos-u' operator whose
    command-stream tensor breaks the rules for layers; the planner cannot plan the operator,
    and says so first, naming the file to plan instead: one line, exit 2, not the tensor
    rule its stream tensor breaks."""
    path = model_path("tflite-micro/person_detect_vela")
    rc, err = _tvmc("plan", str(path), "--target", "ethos-u", "--no-progress", "--no-vela")
    assert rc == 2
    line = _line(err, "plan")
    assert line.startswith(f"{path}: the model is compiled for Ethos-U already"), line
    assert "operator 0 is an 'ethos-u' operator" in line and \
        "plan the .tflite it was compiled from" in line, line
    with pytest.raises(UnimportableModelError, match="compiled for Ethos-U already"):
        load_tflite(path.read_bytes())


def _front_door(data: bytes) -> tuple[type | None, str]:
    """The TVM side's verdict: its error class and line, (None, "") when the model passes."""
    try:
        checked = check_tflite(data, "<bytes>")
    except TvmEthosError as err:
        return type(err), str(err)
    refusing = refusing_findings(checked)
    return (UnimportableModelError, f"<bytes>: {refusing[0].message}") if refusing \
        else (None, "")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(k=st.integers(0, 10 ** 6))
def test_plan_and_compile_agree_on_the_front_door(k):
    valid, layouts = _campaign()
    name, data = mutation(valid, layouts, k, campaign=1)
    kind, line = _front_door(data)
    try:
        load_tflite(data)
        planned = None
    except PlannerError as err:
        planned = err
    if kind is None:
        assert not isinstance(planned, (InvalidModelError, UnimportableModelError)), \
            (name, planned)
        return
    assert planned is not None, f"{name}: the front door refuses it ({line}), plan plans it"
    assert str(planned) == line, name
    want = InvalidModelError if kind is ModelLoadError else UnimportableModelError
    assert isinstance(planned, want), (name, type(planned))
