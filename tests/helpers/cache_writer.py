"""A process that stores one cache entry over and over, for the concurrent-writers test.

It lives apart from the test module so that a spawned process (a fresh interpreter: a test
must not fork, a pytest-xdist worker runs threads) imports only the cache, not the test's
TVM-side imports."""
from __future__ import annotations

from tvm_ethos.runtime import cache as model_cache


def store_many(args: tuple[str, str, bytes, int]) -> bool:
    """Store ``package`` under ``key`` in ``directory`` ``n`` times."""
    directory, key, package, n = args
    for _ in range(n):
        model_cache.store(directory, key, package)
    return True
