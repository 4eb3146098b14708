"""The output unit's 16-bit table lookup (ACTIVATION 16-23 on a signed 16-bit OFM): a
piecewise linear function of the clamped int16 value, read from a 2 KiB table in SHRAM.

The table is 512 little-endian 32-bit entries, one per interval of 128 inputs: bits 0-15 the
interval's base (the output at its first input), bits 16-31 its slope (the rise over the
interval), both signed. The input's high nine bits (offset by 256 so -32768 is entry 0) pick
the entry and its low seven bits interpolate along it, rounding half up. That is how Vela
writes the tables (``lut.create_lut_int16_op`` stores ``value[i]`` and
``value[i + 1] - value[i]``; its int16 softmax stores TensorFlow Lite's exp and 1/(1 + x)
tables so) and what TensorFlow Lite's 513-entry int16 lookup computes
(``lut_lookup_with_interpolation``). The rounding is **inferred** (rfcs/0007 section 7,
rule 12): it is what makes Vela's int16 streams bit-exact with TFLite Micro."""
from __future__ import annotations

import numpy as np

#: entries of a 16-bit table, and the bytes they take (every one of SHRAM's 8 LUT slots)
ENTRIES = 512
TABLE_BYTES = 4 * ENTRIES
#: low input bits that interpolate within an entry
FRACTION_BITS = 7


def decode(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(base, slope) of each entry of a table's ``TABLE_BYTES`` bytes, as int64."""
    words = np.ascontiguousarray(raw, np.uint8).view("<u4").astype(np.int64)
    base = ((words & 0xFFFF) ^ 0x8000) - 0x8000
    slope = ((words >> 16) ^ 0x8000) - 0x8000
    return base, slope


def lookup(base: np.ndarray, slope: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The table at int16 values ``x``: base + slope * fraction / 128, rounded half up.
    The result is not saturated (a table whose slope leaves int16 is the writer's fault;
    the OFM store clamps it)."""
    x = np.asarray(x, np.int64)
    index = (x >> FRACTION_BITS) + ENTRIES // 2
    fraction = x & ((1 << FRACTION_BITS) - 1)
    half = 1 << (FRACTION_BITS - 1)
    return base[index] + ((slope[index] * fraction + half) >> FRACTION_BITS)
