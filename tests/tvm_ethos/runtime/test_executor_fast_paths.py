"""The executor's per-inference shortcuts give what the numpy calls they replace give."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tvm_ethos.runtime.executor import CPU_ALIGNMENT, _address, _aligned_output, _TensorPlan


@settings(max_examples=40, deadline=None)
@given(size=st.integers(1, 300), start=st.integers(0, 70),
       dtype=st.sampled_from(["int8", "uint8", "int16", "int32", "float32"]))
def test_address_is_ctypes_data(size, start, dtype):
    raw = np.empty(size + 80, np.uint8)
    view = raw[start:start + size]
    assert _address(view) == view.ctypes.data
    typed = np.empty(size, dtype)
    assert _address(typed) == typed.ctypes.data


def test_address_of_an_empty_or_read_only_array():
    empty = np.empty(0, np.int8)
    assert _address(empty) == empty.ctypes.data
    ro = np.zeros(8, np.int8)
    ro.flags.writeable = False
    assert _address(ro) == ro.ctypes.data


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
       dtype=st.sampled_from(["int8", "int16", "int32", "float32"]))
def test_aligned_output_shape_dtype_alignment(shape, dtype):
    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    plan = _TensorPlan(0, "t", tuple(shape), dtype, nbytes, 0, "llvm", "cpu", [], True)
    out = _aligned_output(plan)
    assert out.shape == tuple(shape) and out.dtype == np.dtype(dtype)
    assert out.ctypes.data % CPU_ALIGNMENT == 0 and out.flags.c_contiguous
    assert out.flags.writeable
