"""Named compile stages, timed: ``-v`` logs each one's time as it ends, and a listener (tvmc's
progress bar) hears each one end, so a long compile shows where it is rather than one line at
its end."""
from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

#: called with (stage name, seconds) as each stage ends, in the order they were added
_LISTENERS: list[Callable[[str, float], None]] = []


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Time the block as stage ``name``: logged (INFO) and told to the listeners when it ends
    normally; a stage that raises is neither (its error says what happened)."""
    t0 = time.perf_counter()
    yield
    seconds = time.perf_counter() - t0
    log.info("stage %s: %.2f s", name, seconds)
    for listener in list(_LISTENERS):
        listener(name, seconds)


@contextlib.contextmanager
def listening(listener: Callable[[str, float], None]) -> Iterator[None]:
    """Tell ``listener`` every stage that ends inside the block."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)
