"""The .tflite a Relax module was imported from, so that a model compiled from
``load_model(path)`` can still be written as a TFLite Micro file (``export_tflite``) without
being handed its source again.

The module carries the source's SHA-256 as an attribute (a short string: the module's text,
its cache key and its printing stay small); the bytes stay in this process, the last few
sources by digest. A module that outlives them (saved and read back in another process) has
no source here, and the exporter asks for it by name.
"""
from __future__ import annotations

import hashlib
import os
from collections import OrderedDict

#: the IRModule attribute naming the source .tflite's SHA-256
SOURCE_ATTR = "tvm_ethos.source_tflite_sha256"
_KEPT = 16
_SOURCES: OrderedDict[str, bytes] = OrderedDict()


def keep_source(mod, data: bytes):
    """``mod`` with the digest of ``data`` (the .tflite it was imported from) attached; the
    bytes are kept for :func:`source_of`."""
    digest = hashlib.sha256(data).hexdigest()
    _SOURCES[digest] = bytes(data)
    _SOURCES.move_to_end(digest)
    while len(_SOURCES) > _KEPT:
        _SOURCES.popitem(last=False)
    return mod.with_attr(SOURCE_ATTR, digest)


def source_of(model) -> bytes | None:
    """The .tflite bytes ``model`` is or came from: its bytes, a .tflite path, or a module
    :func:`keep_source` marked while its source is still kept; None otherwise."""
    if isinstance(model, (bytes, bytearray, memoryview)):
        data = bytes(model)
        return data if data[4:8] == b"TFL3" else None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as f:
            data = f.read()
        return data if data[4:8] == b"TFL3" else None
    attrs = getattr(model, "attrs", None)
    if attrs is None or SOURCE_ATTR not in attrs:
        return None
    return _SOURCES.get(str(attrs[SOURCE_ATTR]))
