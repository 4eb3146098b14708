"""The progress bar of the planner's and tvmc's long steps (a sweep, a plan, a compile), in a
module of its own: tvmc compile and run show it without loading the sweep's machinery (its
process pools, Dask, Vela reference points)."""
from __future__ import annotations

import sys
import threading


class Progress:
    """A tqdm bar on stderr that appears only once work has run for ``delay`` seconds; a
    thread refreshes it so the elapsed time moves while a long task runs. Only on a terminal:
    in a log file or a pipe a bar is carriage-return noise, so it stays off there."""

    def __init__(self, total: int | None, desc: str, enabled: bool = True,
                 delay: float = 1.0, unit: str = "task") -> None:
        self.total, self.desc, self.unit, self.delay = total, desc, unit, delay
        self.enabled = enabled
        self.n = 0
        self.postfix = ""
        self._bar = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = None

    def __enter__(self) -> "Progress":
        self.enabled = self.enabled and getattr(sys.stderr, "isatty", lambda: False)()
        if self.enabled:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def _tick(self) -> None:
        if self._stop.wait(self.delay):
            return
        from tqdm import tqdm  # lazy: optional extra (tqdm)
        with self._lock:
            fmt = None if self.total else "{desc}: {elapsed}{postfix}"
            self._bar = tqdm(total=self.total, desc=self.desc, unit=self.unit, file=sys.stderr,
                             bar_format=fmt, leave=False, dynamic_ncols=True)
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
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self._bar is not None:
            self._bar.close()
