"""Vela's answers to the questions one stream generation asks again, kept for that
generation only.

A plan's stripes repeat a few operation shapes many times, and each operation asks Vela's
block search (``npu_find_block_configs``) which blocks are legal for it; the answer depends
only on what the search reads of the operation (``npu_ops.legal_blocks`` names it), so
equal questions are answered once; so are the shared-buffer layouts (``shram_layouts``) and
BLOCKDEP values (``blockdep_guard``) Vela's register generator works out. The answers live
in a :class:`StreamMemo` while one stream is generated (:func:`generating`, on each
generator's entry point), so nothing grows from one compile to the next; outside a
generation every question goes to Vela.

The memo is reached through a context variable rather than an argument: the block search
is asked from every operator's builder (``ops_*``, through ``Emission.block``), which would
otherwise each take the memo to pass it on.
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Hashable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")


@dataclass
class StreamMemo:
    """Vela's answers during one stream generation, by question: ``answers[table][key]``;
    ``asked``: how many questions went to Vela (the rest were answered here)."""

    answers: dict[str, dict] = field(default_factory=dict)
    asked: int = 0

    def answer(self, table: str, key: Hashable, ask: Callable[[], T]) -> T:
        """``ask()``'s answer, asked once per ``key`` of ``table``."""
        known = self.answers.setdefault(table, {})
        if key not in known:
            known[key] = ask()
            self.asked += 1
        return known[key]


_CURRENT: ContextVar[StreamMemo | None] = ContextVar("ethos_u_stream_memo", default=None)


def current() -> StreamMemo | None:
    """The memo of the generation under way, or None outside one."""
    return _CURRENT.get()


def remembered(table: str, key: Callable[[], Hashable], ask: Callable[[], T]) -> T:
    """``ask()``'s answer, remembered by ``key()`` in ``table`` of the current generation's
    memo; asked every time outside a generation (``key`` is then not computed)."""
    memo = _CURRENT.get()
    if memo is None:
        return ask()
    return memo.answer(table, key(), ask)


@contextlib.contextmanager
def generating() -> Iterator[StreamMemo]:
    """The memo of one stream generation: a new one, dropped at the end, unless a
    generation is already under way (a joined LSTM's stream inside a cascade's), whose
    memo it shares."""
    memo = _CURRENT.get()
    if memo is not None:
        yield memo
        return
    memo = StreamMemo()
    token = _CURRENT.set(memo)
    try:
        yield memo
    finally:
        _CURRENT.reset(token)


def generator(fn: Callable[..., T]) -> Callable[..., T]:
    """``fn``, a stream generator's entry point, run within :func:`generating`."""

    @functools.wraps(fn)
    def run(*args, **kwargs) -> T:
        with generating():
            return fn(*args, **kwargs)
    return run
