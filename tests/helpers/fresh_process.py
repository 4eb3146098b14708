"""Run a function in a fresh interpreter and hand back what it returns (or raise what it raised).

Tests of the planner's forked search make it fork on purpose (``workers=2``). A fork is safe
only from a process that runs no other thread: the child gets just the forking thread, and a
lock another thread held stays held in it. A pytest-xdist worker runs execnet's receiver
thread, which ``threading.active_count()`` does not see (it is started through ``_thread``),
so such a test runs its forking part in a spawned process, whose only thread is its main one.
``fn`` and its arguments and result must pickle: a module-level function of plain values."""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable


def in_fresh_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a spawned process. Not a multiprocessing pool: a pool's workers are
    daemonic and may not start processes of their own, which ``fn`` does."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()
