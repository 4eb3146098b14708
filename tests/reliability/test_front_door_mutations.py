"""The front door on hand-made copies of the long run's findings on ``trained_lstm_int8``
(UNIDIRECTIONAL_SEQUENCE_LSTM -> RESHAPE -> FULLY_CONNECTED -> SOFTMAX): TFLite Micro and
``load_model`` judge each, and must agree (``front_door_cases.disagreement``).

* An operator's intermediate tensor that holds data (the LSTM's five have shape [0]; a
  scalar, or a type TFLite Micro cannot size): TFLite Micro's allocator refuses the model, so
  the check does, naming the operator, the intermediate and the shape it expects.
* An LSTM whose output is not of its input's type (int8): TFLite Micro's kernel fails to
  prepare, and the LSTM's form check refuses it.
* A RESHAPE whose output is not of its input's type: TFLite Micro's Prepare refuses it, so
  the check does (as for the other operators that copy or compute in one type).
* Another schema version: TFLite Micro's interpreter runs it, so it is no invalid file
  (an UnsupportedModelError, not a ModelLoadError).
* An operator TFLite Micro has no kernel for (the SOFTMAX's code made GELU's): LiteRT's
  reference kernels are the judge, and they run it.
"""
from __future__ import annotations

import struct

import pytest

from tests.helpers.tflite_oracle import NO_KERNEL, runs, tflm_verdicts
from tests.reliability.front_door_cases import TRAINED_DIR, disagreement, front_door
from tvm_ethos.backends.ethos_u.ops_lstm import read_lstm
from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError
from tvm_ethos.backends.ethos_u.tflite_export import SourceGraph, read_source

GELU = 150
STRING, VARIANT, INT32, UINT8 = 5, 14, 2, 3


@pytest.fixture(scope="module")
def lstm():
    """The model's bytes and its ``tflite.Model``."""
    import tflite

    path = TRAINED_DIR / "trained_lstm_int8.tflite"
    if not path.exists():
        pytest.skip(f"{path} not available (set TVM_ETHOS_MODELS)")
    data = path.read_bytes()
    return data, tflite.Model.GetRootAs(data, 0)


def _intermediates(model) -> list[int]:
    sg = model.Subgraphs(0)
    ops = [sg.Operators(o) for o in range(sg.OperatorsLength())]
    return [op.Intermediates(k) for op in ops for k in range(op.IntermediatesLength())]


def _with_rank_zero(data: bytes, model, t: int) -> bytes:
    """``data`` with tensor ``t``'s shape vector emptied (a scalar)."""
    ten = model.Subgraphs(0).Tensors(t)
    d = bytearray(data)
    struct.pack_into("<I", d, ten._tab.Vector(ten._tab.Offset(4)) - 4, 0)
    return bytes(d)


def _with_type(data: bytes, model, t: int, ttype: int) -> bytes:
    """``data`` with tensor ``t``'s (stored) type field set to ``ttype``."""
    ten = model.Subgraphs(0).Tensors(t)
    slot = ten._tab.Offset(6)
    assert slot, f"tensor {t} stores no type field"
    d = bytearray(data)
    d[ten._tab.Pos + slot] = ttype
    return bytes(d)


def _with_builtin_code(data: bytes, model, code: int, builtin: int) -> bytes:
    """``data`` with operator code ``code``'s builtin_code set to ``builtin`` (its
    deprecated_builtin_code kept)."""
    oc = model.OperatorCodes(code)
    d = bytearray(data)
    struct.pack_into("<i", d, oc._tab.Pos + oc._tab.Offset(10), builtin)
    return bytes(d)


def _judged(cases: list[bytes]):
    """(TFLite Micro's verdict, ``load_model``'s) per case, each pair in agreement."""
    out = []
    for data, tflm in zip(cases, tflm_verdicts(cases)):
        ours = front_door(data, full=False)
        assert disagreement(tflm, ours) is None, (tflm, ours)
        out.append((tflm, ours))
    return out


def test_intermediate_holding_data_is_refused_as_tflite_micro_refuses_it(lstm):
    data, model = lstm
    mids = _intermediates(model)
    assert len(mids) == 5
    # the one intermediate whose type is stored (INT8): the others default to FLOAT32
    typed = [t for t in mids if model.Subgraphs(0).Tensors(t)._tab.Offset(6)]
    cases = ([data] + [_with_rank_zero(data, model, t) for t in mids]
             + [_with_type(data, model, t, tt) for t in typed for tt in (STRING, VARIANT)])
    (seed_tflm, seed_ours), *mutated = _judged(cases)
    assert runs(seed_tflm) and seed_ours.outcome == "validated"
    labels = [(k, t) for k, t in enumerate(mids)] + [(mids.index(t), t) for t in typed
                                                      for _ in (STRING, VARIANT)]
    for (k, t), (tflm, ours) in zip(labels, mutated):
        assert not runs(tflm), tflm
        assert ours.outcome == "UnsupportedModelError", ours
        name = model.Subgraphs(0).Tensors(t).Name().decode()
        assert (f"operator 0 (UNIDIRECTIONAL_SEQUENCE_LSTM) intermediate {k} (tensor {t}, "
                f"{name!r})") in ours.message, ours.message
        assert "expected" in ours.message and "such as [0]" in ours.message, ours.message


def test_operator_without_a_tflite_micro_kernel_is_judged_by_litert(lstm):
    data, model = lstm
    codes = [model.OperatorCodes(c).BuiltinCode() for c in range(model.OperatorCodesLength())]
    softmax = codes.index(25)
    (tflm, ours), = _judged([_with_builtin_code(data, model, softmax, GELU)])
    assert tflm.startswith(f"{NO_KERNEL}: GELU; LiteRT: "), tflm
    assert runs(tflm) and ours.outcome == "validated", (tflm, ours)


def test_lstm_output_of_another_type_is_refused_as_tflite_micro_refuses_it(lstm):
    """TFLite Micro's LSTM writes its input's type (int8 here): another output type fails its
    Prepare; the LSTM's form check (``ops_lstm.read_lstm``) refuses it, naming it (in this
    model the RESHAPE reading it refuses the mixed types first)."""
    data, model = lstm
    out = model.Subgraphs(0).Operators(0).Outputs(0)
    types = {INT32: "int32", UINT8: "uint8"}
    cases = [_with_type(data, model, out, tt) for tt in types]
    for data, tflm, got in zip(cases, tflm_verdicts(cases), types.values()):
        ours = front_door(data, full=True)
        assert disagreement(tflm, ours) is None, (tflm, ours)
        assert not runs(tflm) and ours.outcome == "UnsupportedModelError", (tflm, ours)
        with pytest.raises(UnsupportedOperatorError) as err:
            read_lstm(SourceGraph(read_source(data)), 0)
        assert str(err.value).endswith(
            f"operator 0 (UNIDIRECTIONAL_SEQUENCE_LSTM): the output is {got}; TFLite Micro's "
            "LSTM writes its input's type, int8"), err.value


def test_reshape_mixing_types_is_refused_as_tflite_micro_refuses_it(lstm):
    """TFLite Micro's RESHAPE copies bytes: its Prepare wants the output of the input's type."""
    data, model = lstm
    out = model.Subgraphs(0).Operators(1).Outputs(0)
    cases = [_with_type(data, model, out, tt) for tt in (INT32, UINT8)]
    for tflm, ours in _judged(cases):
        assert not runs(tflm) and ours.outcome == "UnsupportedModelError", (tflm, ours)
        assert "operator 1 (RESHAPE) mixes tensor types" in ours.message, ours


def test_another_schema_version_is_no_invalid_file(lstm):
    """TFLite Micro's interpreter runs a model whatever its schema version says: tvm-ethos
    does not import it, but does not call it invalid either."""
    data, model = lstm
    d = bytearray(data)
    struct.pack_into("<I", d, model._tab.Pos + model._tab.Offset(4), 2)
    ((tflm, ours),) = _judged([bytes(d)])
    assert runs(tflm), tflm
    assert ours.outcome == "UnsupportedModelError", ours
    assert "schema version 2, expected 3" in ours.message, ours


def test_fully_connected_bias_scale_off_the_product_is_refused_as_tflite_micro_refuses_it(lstm):
    """TFLite Micro's FULLY_CONNECTED with one weight scale refuses a bias scale further than
    0.02 x the output scale from input scale x weight scale, and runs any nearer one."""
    data, model = lstm
    bias = model.Subgraphs(0).Tensors(model.Subgraphs(0).Operators(2).Inputs(2))
    q = bias.Quantization()
    pos = q._tab.Vector(q._tab.Offset(8))
    product = struct.unpack_from("<f", data, pos)[0]     # the converter wrote the product
    cases = []
    for scale in (2 * product, 1.0):
        d = bytearray(data)
        struct.pack_into("<f", d, pos, scale)
        cases.append(bytes(d))
    (near_tflm, near_ours), (far_tflm, far_ours) = _judged(cases)
    assert runs(near_tflm) and near_ours.outcome == "validated", (near_tflm, near_ours)
    assert not runs(far_tflm) and far_ours.outcome == "UnsupportedModelError", (far_tflm, far_ours)
    assert "operator 2 (FULLY_CONNECTED): bias scale 1 is not input scale x weight scale" in \
        far_ours.message, far_ours
