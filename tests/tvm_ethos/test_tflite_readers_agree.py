"""The planner's TFLite reader and the frontend's check share planner/tflite_format.py: a file one
calls truncated is truncated to the other, for the same stated reason."""
import struct

import numpy as np
import pytest
import tflite
import tflite_builder as tb
from hypothesis import example, given
from hypothesis import strategies as st

from planner.errors import PlannerError
from planner.tflite import load_tflite
from planner.tflite_format import (
    TENSOR_TYPES,
    Truncated,
    check_external_buffer,
    describe_decoding_error,
)
from tvm_ethos.errors import ModelLoadError
from tvm_ethos.frontend.tflite_check import validate_tflite

_SIZES = st.integers(0, 1 << 40)


@given(offset=_SIZES, size=_SIZES, file_size=_SIZES)
@example(offset=1, size=10, file_size=0)        # offset 1 means "no external data"
@example(offset=2, size=8, file_size=10)        # ends exactly at the end of the file
def test_external_buffer_outside_the_file_is_truncation(offset, size, file_size):
    outside = offset > 1 and offset + size > file_size
    if outside:
        with pytest.raises(Truncated, match=f"buffer 3 lies at bytes {offset}.."):
            check_external_buffer(3, offset, size, file_size)
    else:
        check_external_buffer(3, offset, size, file_size)


def test_tensor_types_match_the_tflite_schema():
    """The shared table names every TensorType of the installed schema by its own name."""
    schema = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
    for code, name in schema.items():
        assert TENSOR_TYPES[code][0] == name


@pytest.mark.parametrize("err, detail", [
    (Truncated("a table at byte 9 lies outside the file"), "a table at byte 9 lies outside"),
    (struct.error("unpack_from requires a buffer"), "a field lies past the end of the data"),
    (ValueError("bad number -4 for type"), "an offset points outside the data"),
    (ValueError("buffer is smaller than requested size"), "a vector runs past the end"),
    (IndexError(), "IndexError"),
    (TypeError("odd"), "TypeError: odd"),
])
def test_decoding_errors_are_described(err, detail):
    assert describe_decoding_error(err).startswith(detail)


def _model_with_external_buffer(monkeypatch, offset: int, size: int) -> bytes:
    """A one-convolution model whose buffer 1 says its data lies at ``offset`` after the
    flatbuffer (Buffer fields 1 and 2, which the builder functions of this tflite package lack)."""
    built = []

    def buffer_start(b):
        b.StartObject(3)

    def buffer_end(b):
        if len(built) == 1:                                # buffer 1 (0 is the empty one)
            b.PrependUint64Slot(1, offset, 0)
            b.PrependUint64Slot(2, size, 0)
        built.append(None)
        return b.EndObject()

    with monkeypatch.context() as m:
        m.setattr(tflite, "BufferStart", buffer_start)
        m.setattr(tflite, "BufferEnd", buffer_end)
        return tb.conv2d(np.random.RandomState(0))


def test_both_readers_reject_an_external_buffer_past_the_end(monkeypatch):
    data = _model_with_external_buffer(monkeypatch, offset=1 << 20, size=216)
    want = f"buffer 1 lies at bytes {1 << 20}..{(1 << 20) + 216}, past the end of the file " \
           f"({len(data)} bytes)"
    with pytest.raises(PlannerError, match="truncated or corrupt") as planner_err:
        load_tflite(data)
    with pytest.raises(ModelLoadError, match="truncated or corrupt") as frontend_err:
        validate_tflite(data, "m.tflite")
    assert want in str(planner_err.value)
    assert want in str(frontend_err.value)


def test_one_scale_quantization_reaches_tvm_with_axis_zero():
    """A one-channel depthwise weight is quantized by one scale whose axis is 3 (as converters
    write it); TVM's importer wants axis 0 for one scale. Only that field changes, and
    TFLite computes the same on both files."""
    from tests.helpers.tflite_oracle import oracle, random_inputs
    from tvm_ethos.frontend.tflite_import import _single_scale_axis_zero

    data = tb.conv2d(np.random.RandomState(0), in_shape=(1, 5, 5, 1), cout=1, kernel=(3, 3),
                     stride=(1, 1), padding="SAME", act=None, depthwise=True)
    model = tflite.Model.GetRootAsModel(data, 0)
    fixed = _single_scale_axis_zero(model, data)
    g = tflite.Model.GetRootAsModel(fixed, 0).Subgraphs(0)
    dims = [g.Tensors(t).Quantization().QuantizedDimension() for t in range(g.TensorsLength())
            if g.Tensors(t).Quantization() is not None]
    assert 3 in [model.Subgraphs(0).Tensors(t).Quantization().QuantizedDimension()
                 for t in range(g.TensorsLength()) if g.Tensors(t).Quantization() is not None]
    assert set(dims) == {0} and len(fixed) == len(data)
    assert sum(a != b for a, b in zip(fixed, data)) <= 4
    xs = random_inputs(data, np.random.RandomState(1))
    assert all(np.array_equal(a, b) for a, b in zip(oracle(data, xs), oracle(fixed, xs)))
    # a model that needs nothing comes back as it is
    assert _single_scale_axis_zero(tflite.Model.GetRootAsModel(fixed, 0), fixed) is fixed
