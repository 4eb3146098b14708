"""Decoding a compressed weight stream back to an OHWI volume.

``mlw_codec.decode`` returns the weights in the order the hardware consumes them, an
interleaving that depends on the accelerator's micro-block depths, the OFM block depth, the
block traversal, the IFM bit depth and the kernel decomposition. Rather than restating that
order, it is measured: the codec's own ``reorder_encode`` is run on volumes whose entries
encode their own index (base-255 digits, never zero, so the zeros the reorder pads with stand
out), and decoding those tells where each element went. The result is cached per shape.
"""
from __future__ import annotations

import functools
import hashlib
import os

import numpy as np

from . import isolated_decode
from .vela_defs import mlw_codec

_SUBKERNEL_MAX = 8  # Vela's ArchitectureFeatures.SubKernelMax height and width
_BASE = 255


@functools.lru_cache(maxsize=256)
def element_order(shape_ohwi: tuple[int, int, int, int], ifm_ublock: int, ofm_ublock: int,
                  block_depth: int, depthwise: bool, part_kernel: bool, ifm_bits: int,
                  dilation: tuple[int, int]) -> np.ndarray:
    """For each decoded position, the flat OHWI index it holds, or -1 for padding."""
    codec = mlw_codec()
    n = int(np.prod(shape_ohwi))
    index = np.arange(n, dtype=np.int64)
    order = None
    digits = 1
    while _BASE ** digits < n:
        digits += 1
    for d in range(digits):
        vol = ((index // _BASE ** d) % _BASE + 1).astype(np.int16).reshape(shape_ohwi)
        encoded, _ = codec.reorder_encode(ifm_ublock, ofm_ublock, vol, block_depth, depthwise,
                                          part_kernel, ifm_bits, _SUBKERNEL_MAX // dilation[1],
                                          _SUBKERNEL_MAX // dilation[0])
        dec = np.asarray(codec.decode(bytearray(encoded)), np.int64)
        if order is None:
            order = np.zeros(dec.size, np.int64)
            pad = dec == 0
        order += np.where(dec > 0, dec - 1, 0) * _BASE ** d
    order[pad] = -1
    return order


def decode_weights(stream: bytes, shape_ohwi: tuple[int, int, int, int], *, ifm_ublock: int,
                   ofm_ublock: int, block_depth: int, depthwise: bool, part_kernel: bool,
                   ifm_bits: int, dilation: tuple[int, int]) -> np.ndarray:
    """The OHWI int64 weights ``stream`` holds (already zero-point corrected by Vela)."""
    dec = _decode_isolated(bytes(stream))
    if int(np.prod(shape_ohwi)) > dec.size:
        raise ValueError(f"the weight stream decodes to {dec.size} values, fewer than an OHWI "
                         f"volume of {shape_ohwi} holds (WEIGHT_LENGTH, kernel or depth "
                         "registers disagree with the stream)")
    order = element_order(tuple(shape_ohwi), ifm_ublock, ofm_ublock, block_depth, depthwise,
                          part_kernel, ifm_bits, tuple(dilation))
    if dec.size != order.size:
        raise ValueError(f"the weight stream decodes to {dec.size} values; an OHWI volume of "
                         f"{shape_ohwi} with block depth {block_depth} needs {order.size} "
                         "(WEIGHT_LENGTH, kernel or depth registers disagree with the stream)")
    out = np.zeros(int(np.prod(shape_ohwi)), np.int64)
    keep = order >= 0
    out[order[keep]] = dec[keep]
    return out.reshape(shape_ohwi)


_decoded: dict[bytes, np.ndarray] = {}


def _decode_isolated(stream: bytes) -> np.ndarray:
    """``mlw_codec.decode`` ends the whole process (C ``exit``) on a stream that runs out of
    bits, so a stream from an untrusted command stream is decoded in another process
    (``isolated_decode``); a failure becomes a ValueError. Results are memoised by content."""
    key = hashlib.sha256(stream).digest()
    if key in _decoded:
        return _decoded[key]
    if not hasattr(os, "fork"):  # pragma: no cover - no fork: decode in-process
        out = np.asarray(mlw_codec().decode(bytearray(stream)), np.int64)
    else:
        values = isolated_decode.decode(stream)
        if values is None:
            raise ValueError("the weight stream does not decode (mlw_codec runs out of bits or "
                             "rejects it): WEIGHT_BASE/WEIGHT_LENGTH do not point at an encoded "
                             "stream")
        out = np.frombuffer(values, np.int16).astype(np.int64)
    if len(_decoded) >= 1024:
        _decoded.clear()
    _decoded[key] = out
    return out
