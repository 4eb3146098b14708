"""The objects alive when a stage starts, left out of the cyclic garbage collector's passes
while it runs.

A compile's later stages run beside what the earlier ones built and keep to the end (the
planner's graph and proposals, the lowered subgraph, Vela's and numpy's modules): a few
hundred thousand objects. The command-stream stage makes many small short-lived objects for
every NPU operation, and each older-generation collection they set off walks all of those
long-lived objects again, to free none of them. Frozen (``gc.freeze``) for the stage's
length, they are skipped; what the stage itself leaves as garbage is collected as before,
and whatever was frozen is collected as usual once the stage is over. Nothing the stage
computes depends on when the collector runs.
"""
from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """The objects alive now kept out of the collector's passes until the block ends. Where
    some are frozen already (the host application's own ``gc.freeze``, or an enclosing
    block), the collector is left as it is: unfreezing would undo the host's freeze."""
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
