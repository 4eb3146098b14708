"""One BLAS thread while a stream runs.

A stream's matrix products are many and small (one per operation, a stripe's rows by its
depth). OpenBLAS's worker threads wait for work between them, and where the cores are shared
(or a TVM process holds them) handing each product to two threads is several times slower
than computing it on one. The thread count is process-wide, so it is lowered only for the
run and restored after; it decides speed only, never a result. Where numpy's OpenBLAS cannot
be found (another BLAS, another platform) nothing changes.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
from typing import Callable, Iterator


@functools.lru_cache(maxsize=None)
def _openblas_threads() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get, set) of the thread count of the OpenBLAS loaded in this process (numpy's first)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f
                     if "openblas" in line.lower() and line.split()[-1].startswith("/")}
    except OSError:
        return None
    for path in sorted(paths, key=lambda p: ("numpy" not in p, p)):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in ("scipy_", ""):
            for suffix in ("64_", ""):
                get = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}", None)
                put = getattr(lib, f"{prefix}openblas_set_num_threads{suffix}", None)
                if get is not None and put is not None:
                    get.restype, get.argtypes = ctypes.c_int, []
                    put.restype, put.argtypes = None, [ctypes.c_int]
                    return get, put
    return None


@contextlib.contextmanager
def single_blas_thread() -> Iterator[None]:
    controls = _openblas_threads()
    threads = controls[0]() if controls else 1
    if threads <= 1:
        yield
        return
    controls[1](1)
    try:
        yield
    finally:
        controls[1](threads)
