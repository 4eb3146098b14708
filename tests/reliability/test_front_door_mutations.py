"""The front door on hand-made copies of the long run's findings on ``trained_lstm_int8``
(UNIDIRECTIONAL_SEQUENCE_LSTM -> RESHAPE -> FULLY_CONNECTED -> SOFTMAX): TFLite Micro and
``load_model`` judge each, and must agree (``front_door_cases.disagreement``).

* An operator TFLite Micro has no kernel for (the SOFTMAX's code made GELU's): LiteRT's
  reference kernels are the judge, and they run it.
"""
from __future__ import annotations

import struct

import pytest

from tests.helpers.tflite_oracle import NO_KERNEL, runs, tflm_verdicts
from tests.reliability.front_door_cases import TRAINED_DIR, disagreement, front_door

GELU = 150


@pytest.fixture(scope="module")
def lstm():
    """The model's bytes and its ``tflite.Model``."""
    import tflite

    path = TRAINED_DIR / "trained_lstm_int8.tflite"
    if not path.exists():
        pytest.skip(f"{path} not available (set TVM_ETHOS_MODELS)")
    data = path.read_bytes()
    return data, tflite.Model.GetRootAs(data, 0)


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


def test_operator_without_a_tflite_micro_kernel_is_judged_by_litert(lstm):
    data, model = lstm
    codes = [model.OperatorCodes(c).BuiltinCode() for c in range(model.OperatorCodesLength())]
    softmax = codes.index(25)
    (tflm, ours), = _judged([_with_builtin_code(data, model, softmax, GELU)])
    assert tflm.startswith(f"{NO_KERNEL}: GELU; LiteRT: "), tflm
    assert runs(tflm) and ours.outcome == "validated", (tflm, ours)
