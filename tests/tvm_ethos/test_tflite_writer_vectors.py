"""The TFLite writer copies a vector's bytes in at once: the same bytes the flatbuffers
builder writes element by element with its own ``Prepend`` calls, wherever the builder's head
stands (so every alignment is exercised)."""
from __future__ import annotations

import flatbuffers
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tvm_ethos.backends.ethos_u.tflite_writer import _Writer

_PREPEND = {4: "PrependInt32", 8: "PrependInt64"}
#: bytes written before the vector, so that it starts at every offset modulo 8
_LEAD = st.binary(max_size=11)


def _by_element(lead: bytes, values, prepend: str, width: int) -> bytes:
    b = flatbuffers.Builder(16)
    b.CreateByteVector(lead)
    b.StartVector(width, len(values), width)
    for v in reversed(values):
        getattr(b, prepend)(v)
    b.EndVector()
    return bytes(b.Bytes[b.Head():])


def _at_once(lead: bytes, write) -> bytes:
    w = _Writer()
    w.b = flatbuffers.Builder(16)
    w.b.CreateByteVector(lead)
    write(w)
    return bytes(w.b.Bytes[w.b.Head():])


@given(lead=_LEAD, width=st.sampled_from([4, 8]),
       values=st.lists(st.integers(-(1 << 31), (1 << 31) - 1), max_size=40))
def test_ints_are_the_builders_elements(lead, width, values):
    assert _at_once(lead, lambda w: w._ints(values, width)) == \
        _by_element(lead, values, _PREPEND[width], width)


@given(lead=_LEAD, values=st.lists(st.floats(width=32, allow_nan=False), max_size=40))
def test_float32_arrays_are_the_builders_elements(lead, values):
    arr = np.asarray(values, np.float32)
    assert _at_once(lead, lambda w: w._array(arr.astype("<f4"))) == \
        _by_element(lead, [float(v) for v in arr], "PrependFloat32", 4)


@given(lead=_LEAD, values=st.lists(st.integers(-(1 << 63), (1 << 63) - 1), max_size=40))
def test_int64_arrays_are_the_builders_elements(lead, values):
    arr = np.asarray(values, "<i8")
    assert _at_once(lead, lambda w: w._array(arr)) == \
        _by_element(lead, values, "PrependInt64", 8)


def test_an_int_too_wide_for_its_vector_is_refused_not_wrapped():
    with pytest.raises(OverflowError):
        _Writer()._ints([1 << 31])
