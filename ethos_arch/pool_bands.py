"""How a reduction over more rows or elements than one Ethos-U pool's window takes is cut
into bands of rows, one pool each.

One pool's window spans at most 256 rows and 65536 elements. A window of ``rows x columns``
past that is cut into bands of whole rows, each within both limits; their results (maxima,
or int32 sums) are combined by one more operation. The planner (working memory) and the
stream generator (the pools) read the same rule from here; this module imports nothing of
the project.
"""
from __future__ import annotations

from typing import NamedTuple

#: one pool's window: at most 256 rows and 65536 elements
MAX_POOL_ROWS, MAX_POOL_AREA = 256, 65536


class PoolBands(NamedTuple):
    """``count`` bands of at most ``rows`` rows each (the last one the rest)."""

    rows: int
    count: int


def one_pool(rows: int, columns: int) -> bool:
    """Whether one pool's window takes ``rows x columns``."""
    return rows <= MAX_POOL_ROWS and rows * columns <= MAX_POOL_AREA


def pool_bands(rows: int, columns: int) -> PoolBands:
    """The bands of a ``rows x columns`` window: as many rows each as both limits allow
    (at least one: a row past 65536 columns is for the caller to refuse)."""
    per_band = max(1, min(MAX_POOL_ROWS, MAX_POOL_AREA // max(columns, 1), rows))
    return PoolBands(per_band, -(-rows // per_band))
