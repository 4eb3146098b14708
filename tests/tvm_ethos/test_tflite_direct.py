"""The TVM-free ``.tflite`` path (``tvm_ethos.tflite_direct``, issue 27) writes what the TVM
path writes: the same file, plan reports and placement, for every group it takes; it imports
no TVM; and a form it does not read goes through TVM instead."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import operator_models
import pytest
import tflite_builder as tb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tvm_ethos.backends.tflite_micro.compile as tflm_compile
from tests.helpers.models import MODELS_DIR, model_path
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph, read_source
from tvm_ethos.errors import TvmEthosError
from tvm_ethos.frontend.tflite_support import CONVERTED_QUANTIZED
from tvm_ethos.tflite_direct.group import DirectGroup, compile_group
from tvm_ethos.tflite_direct.operators import Declined, read_layers

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _compile(data: bytes, direct: bool, monkeypatch, **options):
    """``data`` compiled for ``ethos-u``, every group through the TVM-free path where it
    takes it (``direct``), else every group through TVM; a refusal is its message."""
    with monkeypatch.context() as m:
        if not direct:
            m.setattr(tflm_compile, "compile_group", lambda *a: Declined("the TVM path"))
        try:
            return tflm_compile.compile_tflite(data, "ethos-u", **options)
        except TvmEthosError as err:
            return f"{type(err).__name__}: {err}"


def _same(data: bytes, monkeypatch, **options) -> None:
    """Both paths write the same file, plan reports and placement (or refuse alike)."""
    mine = _compile(data, True, monkeypatch, **options)
    theirs = _compile(data, False, monkeypatch, **options)
    if isinstance(theirs, str) or isinstance(mine, str):
        assert mine == theirs
        return
    assert mine.tflite == theirs.tflite
    assert json.dumps(mine.plan_reports, sort_keys=True, default=str) == \
        json.dumps(theirs.plan_reports, sort_keys=True, default=str)
    assert mine.placement == theirs.placement


def _taken(data: bytes, **options) -> DirectGroup | Declined:
    """The TVM-free compile of the whole model as one group."""
    return compile_group(data, "ethos-u -accelerator_config=ethos-u55-128,llvm", options)


def test_a_resnet8_compile_imports_no_tvm():
    """``tvm_ethos.compile(path, "ethos-u")`` of ResNet-8 in a fresh process: the file is
    written and no ``tvm`` module is loaded (test_startup.py: nor tvm_ffi, through tvmc)."""
    code = (
        "import sys, tvm_ethos\n"
        f"tm = tvm_ethos.compile({str(model_path('resnet8_cifar'))!r}, target='ethos-u')\n"
        "assert len(tm.tflite) > 1000 and tm.partition_summary == {'ethos-u': 15}, "
        "tm.partition_summary\n"
        "print(sorted(m for m in sys.modules if m == 'tvm' or m.startswith('tvm.')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_importer_check_knows_what_the_converter_takes():
    """The operators the importer check takes as converted without asking TVM's converter
    are ones it converts, quantized too."""
    from tvm_ethos.frontend.tflite_support import _converter_names

    names, quantized = _converter_names()
    assert CONVERTED_QUANTIZED <= names & quantized


@pytest.mark.parametrize("builder", ["mul", "concatenation", "transpose"])
def test_an_operator_it_does_not_read_is_declined(builder):
    """A group with an operator the reader does not know is declined by name (TVM decides
    it), not refused."""
    data = getattr(operator_models, builder)()
    graph = SourceGraph(read_source(data))
    made = read_layers(graph, range(len(graph.kinds)))
    assert isinstance(made, Declined)
    assert graph.kinds[0] in made.why


def test_a_form_it_does_not_read_is_declined():
    """A SOFTMAX quantized other than TFLite's 1/256 output is declined with the reason."""
    data = tb.softmax(np.random.RandomState(0), out_q=(1 / 128, -128))
    made = _taken(data)
    assert isinstance(made, Declined) and "1/256" in made.why


@pytest.mark.slow
@pytest.mark.parametrize("builder,taken", [
    ("conv2d", True), ("depthwise", True), ("avg_pool", True), ("max_pool", True),
    ("mean", True), ("softmax", True), ("add", True), ("fully_connected", True),
    ("reshape", False)])
def test_one_operator_models_match_the_tvm_path(builder, taken, monkeypatch):
    """rfcs/0010's one-operator models of the kinds it reads: taken without TVM (a RESHAPE
    that regroups axes is declined), and the same bytes as through TVM."""
    data = getattr(operator_models, builder)()
    assert isinstance(_taken(data), DirectGroup) is taken
    _same(data, monkeypatch)


def _shipped() -> list[str]:
    found = sorted(p.relative_to(MODELS_DIR).as_posix() for p in MODELS_DIR.rglob("*.tflite")
                   if not p.name.endswith("_vela.tflite"))
    return found or ["(no models)"]


@pytest.mark.slow
@pytest.mark.parametrize("budget", [None, "smallest"])
@pytest.mark.parametrize("accelerator", ["ethos-u55-128", "ethos-u65-256"])
@pytest.mark.parametrize("model", _shipped())
def test_shipped_models_match_the_tvm_path(model, accelerator, budget, monkeypatch):
    """Every shipped model, configuration and budget: the same file, plan reports and
    placement through either path (a model whose groups it declines compiles through TVM
    both times)."""
    path = MODELS_DIR / model
    if not path.exists():
        pytest.skip(f"no models in {MODELS_DIR} (set TVM_ETHOS_MODELS)")
    options = {"accelerator_config": accelerator}
    if budget:
        options["budget"] = budget
    _same(path.read_bytes(), monkeypatch, **options)


_ACTS = st.sampled_from([None, "relu", "relu6", "relu_n1_to_1"])


@st.composite
def _windowed(draw):
    """A random int8 convolution, depthwise convolution or pool the reader takes."""
    rs = np.random.RandomState(draw(st.integers(0, 2**16)))
    kind = draw(st.sampled_from(["conv", "depthwise", "avg", "max"]))
    h, w = draw(st.integers(3, 12)), draw(st.integers(3, 12))
    c = draw(st.integers(1, 9))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    if kind in ("avg", "max"):
        return tb.pool(rs, kind, in_shape=(1, h, w, c), size=k, stride=s, padding=padding)
    return tb.conv2d(rs, in_shape=(1, h, w, c), cout=c if kind == "depthwise" else
                     draw(st.integers(1, 9)), kernel=k, stride=s, padding=padding,
                     act=draw(_ACTS), depthwise=kind == "depthwise")


@st.composite
def _added(draw):
    """A random int8 ADD of two feature maps of one shape, with any fused activation."""
    rs = np.random.RandomState(draw(st.integers(0, 2**16)))
    shape = (1, draw(st.integers(1, 9)), draw(st.integers(1, 9)), draw(st.integers(1, 20)))
    return tb.binary(rs, "add", a_shape=shape, b_shape=shape, act=draw(_ACTS))


@st.composite
def _reductions(draw):
    """A random int8 MEAN over H and W, or SOFTMAX of one row (2-D or 1x1x1xN)."""
    rs = np.random.RandomState(draw(st.integers(0, 2**16)))
    if draw(st.booleans()):
        shape = (1, draw(st.integers(1, 8)), draw(st.integers(1, 8)), draw(st.integers(1, 24)))
        return tb.mean(rs, in_shape=shape)
    n = draw(st.integers(2, 40))
    shape = draw(st.sampled_from([(1, n), (1, 1, 1, n)]))
    return tb.softmax(rs, shape=shape, beta=draw(st.sampled_from([1.0, 0.5, 2.0])))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(data=st.one_of(_windowed(), _added(), _reductions()))
def test_random_forms_match_the_tvm_path(data, monkeypatch):
    """Every form it reads (convolutions, pools, ADDs with any fused activation, MEANs,
    SOFTMAXes): taken without TVM (unless the Ethos-U's checks reject it, then both paths go
    through TVM), the TVM path's bytes."""
    made = _taken(data)
    assert isinstance(made, DirectGroup) or "Ethos-U rejects" in made.why, made
    _same(data, monkeypatch)
