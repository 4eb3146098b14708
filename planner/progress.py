"""The progress bar of the planner's and tvmc's long steps (a sweep, a plan, a compile), in a
module of its own: tvmc compile and run show it without loading the sweep's machinery (its
process pools, Dask, Vela reference points).

A bar on a terminal keeps its elapsed time moving from a thread of its own, and tvm-ethos
forks (a plan search asked for several processes, the weights encoded ahead) only from a
process that runs one thread (a fork copies only the forking thread; a lock another thread
held, stderr's among them, stays held in the child for good). So a bar's thread stops while
the process forks (:func:`paused_for_fork`) and starts again after: work still forks under a
bar, which the thread would otherwise forbid (:func:`refresher_threads` says how many running
threads are such pausable ones).
"""
from __future__ import annotations

import contextlib
import functools
import sys
import threading
import time
from collections.abc import Iterator

#: the bars whose refresher thread is running, in the order they started
_RUNNING: list[Progress] = []
_RUNNING_LOCK = threading.Lock()


class Progress:
    """A tqdm bar on stderr that appears only once work has run for ``delay`` seconds; a
    thread refreshes it so the elapsed time moves while a long task runs. Only on a terminal:
    in a log file or a pipe a bar is carriage-return noise, so it stays off there."""

    def __init__(self, total: int | None, desc: str, enabled: bool = True,
                 delay: float = 1.0, unit: str = "task") -> None:
        self.total, self.desc, self.unit, self.delay = total, desc, unit, delay
        self.enabled = enabled
        self.n = 0
        self._bar = None
        self._shows_at = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "Progress":
        self.enabled = self.enabled and getattr(sys.stderr, "isatty", lambda: False)()
        if self.enabled:
            self._shows_at = time.monotonic() + self.delay
            self._start_thread()
        return self

    def _start_thread(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._tick, daemon=True,
                                        name=f"progress: {self.desc}")
        with _RUNNING_LOCK:
            _RUNNING.append(self)
        self._thread.start()

    def _stop_thread(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with _RUNNING_LOCK:
            if self in _RUNNING:
                _RUNNING.remove(self)

    def _tick(self) -> None:
        if self._bar is None:
            if self._stop.wait(max(0.0, self._shows_at - time.monotonic())):
                return
            with self._lock:
                fmt = None if self.total else "{desc}: {elapsed}{postfix}"
                self._bar = _bar_class()(total=self.total, desc=self.desc, unit=self.unit,
                                         file=sys.stderr, bar_format=fmt, leave=False,
                                         dynamic_ncols=True)
                self._bar.update(self.n)
        while not self._stop.wait(0.5):   # keep the elapsed time moving
            with self._lock:
                self._bar.refresh()

    def update(self, n: int = 1, postfix: str = "") -> None:
        with self._lock:
            self.n += n
            if self._bar is not None:
                if postfix:
                    self._bar.set_postfix_str(postfix, refresh=False)
                self._bar.update(n)

    def __exit__(self, *exc) -> None:
        self._stop_thread()
        if self._bar is not None:
            self._bar.close()


@functools.cache
def _bar_class():
    from tqdm import tqdm  # lazy: optional extra (tqdm)

    class Bar(tqdm):
        # no monitor thread: tqdm's outlives the bar and would keep the search from forking
        monitor_interval = 0
    return Bar


def refresher_threads() -> int:
    """How many of the running threads are bars' refreshers, which stop for a fork."""
    with _RUNNING_LOCK:
        return len(_RUNNING)


@contextlib.contextmanager
def paused_for_fork() -> Iterator[None]:
    """Stop every bar's refresher thread for the duration (a fork in it copies no lock they
    held), then start them again."""
    with _RUNNING_LOCK:
        paused = list(_RUNNING)
    for bar in paused:
        bar._stop_thread()
    try:
        yield
    finally:
        for bar in paused:
            bar._start_thread()
