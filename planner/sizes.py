"""Memory sizes as people write them (``300KiB``, ``1.5MiB``, ``250kB``) read into bytes, by
one rule for every option that takes a size."""
from __future__ import annotations

import math
import numbers
import re

from planner.errors import PlannerError

#: The one rule for sizes: kB / MB / GB are powers of 1000, KiB / MiB / GiB of 1024 (any case);
#: a bare k / m / g says neither, so it is refused.
_UNITS = {"": 1, "b": 1, "kb": 1000, "mb": 1000 ** 2, "kib": 1024, "mib": 1024 ** 2,
          "gib": 1024 ** 3, "gb": 1000 ** 3}
_BARE = {"k": ("KiB", "kB"), "m": ("MiB", "MB"), "g": ("GiB", "GB")}


def parse_size(text: str | int, what: str | None = None) -> int:
    """'300KiB', '1.5MiB', '250kB', '4096' -> bytes (KiB = 1024, kB = 1000, any case; a bare
    '300k' is refused: it could mean either).

    ``what`` names the option in the error (``budget``)."""
    where = f"{what}: " if what else ""
    if isinstance(text, numbers.Real) and not isinstance(text, bool):
        if not math.isfinite(text) or text < 0:
            raise PlannerError(f"{where}a memory size must be a number of bytes >= 0, got "
                               f"{text!r}")
        return int(text)
    if not isinstance(text, str):
        raise PlannerError(f"{where}cannot read memory size {text!r} (a "
                           f"{type(text).__name__}); give bytes as a number or a string such "
                           "as 300KiB, 1MiB or 250kB")
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", str(text))
    if m and m.group(2).lower() in _BARE:
        unit = m.group(2)
        raise PlannerError(f"{where}memory size {text!r}: a bare {unit!r} says neither 1000 nor "
                           f"1024; write {m.group(1)}{_BARE[unit.lower()][0]} (x1024) or "
                           f"{m.group(1)}{_BARE[unit.lower()][1]} (x1000)")
    if not m or m.group(2).lower() not in _UNITS:
        raise PlannerError(f"{where}cannot read memory size {text!r}; write e.g. 300KiB, "
                           "1MiB, 250kB or a number of bytes")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
