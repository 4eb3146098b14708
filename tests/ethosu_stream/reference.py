"""Independent statements of the arithmetic the tests compare against (Python integers and
plain loops, nothing from ethosu_stream)."""
from __future__ import annotations

import numpy as np


def tflite_multiply(x: int, multiplier: int, shift: int) -> int:
    """TFLite's MultiplyByQuantizedMultiplier with Vela's (scale, shift): exponent 31 - shift."""
    exponent = 31 - shift
    x = x * (1 << max(exponent, 0))
    ab = x * multiplier
    nudge = (1 << 30) if ab >= 0 else 1 - (1 << 30)
    high = abs(ab + nudge) // (1 << 31) * (1 if ab + nudge >= 0 else -1)
    right = max(-exponent, 0)
    mask = (1 << right) - 1
    rem, threshold = high & mask, (mask >> 1) + (1 if high < 0 else 0)
    return (high >> right) + (1 if rem > threshold else 0)


def nhwc_bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def nhcwb16_bytes(a: np.ndarray) -> np.ndarray:
    """(h, w, c) int8 in NHCWB16: for each row, 16-channel bricks, each brick w x 16."""
    h, w, c = a.shape
    cp = (c + 15) // 16 * 16
    padded = np.zeros((h, w, cp), a.dtype)
    padded[..., :c] = a
    return padded.reshape(h, w, cp // 16, 16).transpose(0, 2, 1, 3).reshape(-1).view(np.uint8)


def from_nhcwb16(raw: np.ndarray, h: int, w: int, c: int) -> np.ndarray:
    cp = (c + 15) // 16 * 16
    return raw[: h * w * cp].view(np.int8).reshape(h, cp // 16, w, 16).transpose(0, 2, 1, 3) \
        .reshape(h, w, cp)[..., :c]
