"""The BLAS thread count is lowered for a run and restored after it, fault or not."""
import pytest

from ethosu_stream.blas import _openblas_threads, single_blas_thread


def test_the_thread_count_is_one_during_a_run_and_restored_after():
    controls = _openblas_threads()
    if controls is None:
        pytest.skip("numpy's OpenBLAS is not found in this process")
    get, put = controls
    before = get()
    try:
        put(2)
        with single_blas_thread():
            assert get() == 1
        assert get() == 2
        with pytest.raises(RuntimeError), single_blas_thread():
            raise RuntimeError("a fault inside the run")
        assert get() == 2
    finally:
        put(before)
