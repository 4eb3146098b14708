"""The one error a bad command stream ends in."""
from __future__ import annotations


class StreamError(ValueError):
    """A command stream the model refuses to run. ``index`` is the command's position in the
    stream (commands, not words: a two-word cmd1 counts once) so the message points at the
    offending command; ``None`` when the fault is not tied to one command."""

    def __init__(self, message: str, index: int | None = None, name: str | None = None):
        where = "" if index is None else f"command #{index}" + (f" ({name})" if name else "") + ": "
        super().__init__(where + message)
        self.index = index
        self.name = name
