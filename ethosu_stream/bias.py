"""The per-channel bias/scale stream: one 10-byte entry per output channel, little endian,
a signed 40-bit bias, an unsigned 32-bit multiplier and a 6-bit shift (Vela's
``encode_bias`` layout)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ENTRY_BYTES = 10


@dataclass(frozen=True)
class ChannelScales:
    bias: np.ndarray
    scale: np.ndarray
    shift: np.ndarray


def decode_bias_stream(raw: np.ndarray, channels: int) -> ChannelScales:
    """The first ``channels`` entries of ``raw`` (bytes)."""
    raw = np.asarray(raw, np.uint8)
    if raw.size < channels * ENTRY_BYTES:
        raise ValueError(f"the scale stream holds {raw.size // ENTRY_BYTES} entries, "
                         f"the operation needs {channels} (SCALE_LENGTH too short)")
    e = raw[: channels * ENTRY_BYTES].reshape(channels, ENTRY_BYTES).astype(np.int64)
    bias = sum(e[:, i] << (8 * i) for i in range(5))
    bias = np.where(bias >= 1 << 39, bias - (1 << 40), bias)
    scale = sum(e[:, 5 + i] << (8 * i) for i in range(4))
    shift = e[:, 9] & 0x3F
    return ChannelScales(bias, scale, shift)
