"""A model input that an ethos-u operator reads and another operator (a TFLite operator, or
another ethos-u operator) reads after it, on the tflite-micro host (issue 28): the file is
written with the input where the first operator's stream writes nothing (its written arena
spans, ``stream_run.arena_writes``), or, where a group's plan reuses the input's place, the
group compiled one operator per ethos-u operator; every output equal to TFLite Micro's on
the source, and no more operators on the CPU than Vela 5.2 leaves there."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import given, settings
from hypothesis import strategies as st

import tvm_ethos
from benchmarks.real_models import vela_size
from tvm_ethos.backends.ethos_u.stream_run import arena_writes
from tvm_ethos.backends.tflite_micro.reference import TflmReference

pytest.importorskip("ethosu.vela")
pytest.importorskip("tflite_micro")

BO = tflite.BuiltinOperator


def _l2(x: int, out: int):
    """TFLite Micro's int8 L2_NORMALIZATION, which no importer converts: a TFLite operator
    whatever the NPU takes."""
    return (BO.L2_NORMALIZATION, 0, None, [x], [out])


def _add(a: int, b: int, out: int):
    return (BO.ADD, 0, None, [a, b], [out])


def _model(form: str, shape: tuple, seed: int) -> bytes:
    """``form`` of input x (tensor 0), ``shape`` NHWC:

    * ``host_after``: CONV_2D(x) and L2_NORMALIZATION(x), both outputs;
    * ``npu_after``: ADD(x, L2_NORMALIZATION(CONV_2D(x))): x read by a second ethos-u
      operator after a TFLite one;
    * ``host_first``: ADD(CONV_2D(x), L2_NORMALIZATION(x)), the TFLite operator first;
    * ``group``: CONV_2D(CONV_2D(x)) and L2_NORMALIZATION(x): one group of two operators,
      whose plan may reuse x's place after the first."""
    rs = np.random.RandomState(seed)
    x = tb._qact(rs, list(shape))
    w, b, y = tb._conv_tensors(rs, x, shape[-1])
    norm = tb.T(list(shape), "int8", scale=1 / 128, zp=0)
    out = tb.T(list(shape), "int8", scale=0.2, zp=3)
    conv = tb._conv_op([0, 1, 2], [3])
    if form == "host_after":
        return tb.serialize([x, w, b, y, norm], [conv, _l2(0, 4)], [0], [3, 4])
    if form == "npu_after":
        return tb.serialize([x, w, b, y, norm, out], [conv, _l2(3, 4), _add(0, 4, 5)],
                            [0], [5])
    if form == "host_first":
        return tb.serialize([x, w, b, y, norm, out], [_l2(0, 4), conv, _add(3, 4, 5)],
                            [0], [5])
    w2, b2, y2 = tb._conv_tensors(rs, y, shape[-1])
    return tb.serialize([x, w, b, y, w2, b2, y2, norm],
                        [conv, tb._conv_op([3, 4, 5], [6]), _l2(0, 7)], [0], [6, 7])


FORMS = ("host_after", "npu_after", "host_first", "group")
#: every form's TFLite operators: its L2_NORMALIZATION alone
HOST = 1


def _compile_and_compare(model: bytes, runs: int = 3):
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    ref = TflmReference(model)
    shape = cm.inputs[0].shape
    for k in range(runs):
        x = np.random.RandomState(k).randint(-128, 128, shape).astype(np.int8)
        got, want = cm.run(x), ref.run([x])
        assert len(got) == len(want)
        for g, w in zip(got, want):
            np.testing.assert_array_equal(np.asarray(g).reshape(w.shape), w)
    return cm


def _cpu(cm) -> int:
    return sum(p.placed_on != "ethos-u" for p in cm.placement)


@pytest.mark.parametrize("form", FORMS)
def test_an_input_read_again_after_an_ethos_u_operator_compiles_equal_to_tflite_micro(form):
    cm = _compile_and_compare(_model(form, (1, 6, 6, 8), 0))
    assert _cpu(cm) == HOST, cm.placement


def test_a_streams_written_spans_are_its_ofm_and_never_its_input():
    """``arena_writes`` (a dry run recording each write's span) on one CONV_2D: the OFM's
    bytes are written whole, the IFM's none, whatever else the stream writes (weights it
    copies in)."""
    cm = tvm_ethos.compile(_model("host_after", (1, 6, 6, 8), 0), "ethos-u", cache_dir=False)
    (payload,) = cm.program.payloads.values()
    spans = arena_writes(payload)
    assert spans == tuple(sorted(spans)) and all(lo < hi for lo, hi in spans)
    assert all(a[1] < b[0] for a, b in zip(spans, spans[1:]))   # merged
    (ifm,), (ofm,) = payload.inputs, payload.outputs
    n = 6 * 6 * 8
    assert any(lo <= ofm.offset and ofm.offset + n <= hi for lo, hi in spans), spans
    assert not any(lo < ifm.offset + n and ifm.offset < hi for lo, hi in spans), spans


def test_a_group_whose_plan_reuses_the_inputs_place_is_one_operator_per_ethos_u_operator():
    """Both convolutions of ``group`` as one stream reuse x's place for the second one's
    output (x is dead within the group): each is then an ethos-u operator of its own."""
    cm = _compile_and_compare(_model("group", (1, 6, 6, 8), 0), runs=1)
    npu = [p.operator for p in cm.placement if p.placed_on == "ethos-u"]
    assert len(npu) == 2 and len(set(npu)) == 2, cm.placement


def test_a_second_ethos_u_operator_that_reads_the_input_out_of_alignment_stays_tflite():
    """``npu_after``'s ADD reads x where the first operator's stretch placed it; with 9 B
    tensors its stream's offset of x puts its own start off the 16 B alignment that a
    stream's relocation needs: the ADD stays a TFLite operator, the reason naming x."""
    cm = _compile_and_compare(_model("npu_after", (1, 3, 3, 1), 0), runs=1)
    assert [p.placed_on for p in cm.placement] == ["ethos-u", "tflite-micro", "tflite-micro"]
    assert "not 16-aligned: its stream reads 't0'" in cm.placement[2].why, cm.placement


@pytest.mark.slow
@settings(max_examples=20, deadline=None)
@given(form=st.sampled_from(FORMS), h=st.integers(3, 10), w=st.integers(3, 10),
       c=st.sampled_from([1, 4, 8, 16]), seed=st.integers(0, 2**16))
def test_every_form_and_shape_equals_tflite_micro(form, h, w, c, seed):
    """Every output equal to TFLite Micro's; with 16 channels (every tensor a whole number
    of 16 B) every convolution and ADD on the Ethos-U, else any that stayed a TFLite
    operator did so for the alignment of a tensor two ethos-u operators share (the test
    above)."""
    cm = _compile_and_compare(_model(form, (1, h, w, c), seed), runs=2)
    if c == 16:
        assert _cpu(cm) == HOST, cm.placement
    extra = [p for p in cm.placement
             if p.placed_on != "ethos-u" and p.kind != "L2_NORMALIZATION"]
    assert all("16-aligned" in p.why for p in extra), extra


@pytest.mark.slow
@pytest.mark.parametrize("form", FORMS)
def test_ours_leaves_no_more_operators_on_the_cpu_than_vela(form):
    model = _model(form, (1, 6, 6, 8), 0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.tflite"
        path.write_bytes(model)
        vela = vela_size(str(path), "ethos-u55-128")
    assert "why" not in vela, vela
    cm = tvm_ethos.compile(model, "ethos-u", cache_dir=False)
    assert _cpu(cm) <= vela["cpu"], (form, _cpu(cm), vela["cpu"])
