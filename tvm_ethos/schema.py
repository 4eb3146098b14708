"""Typed readers for the JSON a package carries (``meta.json``, ``program.json``, the manifest).

A package's JSON is read before any of its native code is loaded, and whatever is wrong with it
must surface as one line naming the field (``program.json: subgraphs[2].steps[0].args[1]: a
tensor id, got 'x'``), not as a ``KeyError`` or ``TypeError`` from deep in the loader. The
readers here check a type and a range and say where; the modules that own a document build their
immutable descriptions from them. Plain Python: no dependency, nothing imported from TVM.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

#: The element types a tensor of a package may have (what tvm-ethos compiles, and numpy reads).
DTYPES = ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64")
_ITEMSIZE = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4,
             "uint32": 4, "int64": 8, "uint64": 8, "float16": 2, "float32": 4, "float64": 8}
#: The largest tensor a package may describe: TFLite's own limit (a flatbuffer cannot hold more),
#: so a shape that would allocate terabytes is refused as a field error instead.
MAX_TENSOR_BYTES = 2**31
MAX_RANK = 8


class SchemaError(ValueError):
    """A JSON document of a package that does not have the shape tvm-ethos writes; the message
    is ``<where>: <what was expected>, got <what was found>``."""


def parse_json(data: bytes, where: str) -> dict:
    """``data`` as a JSON object (UTF-8); SchemaError otherwise."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise SchemaError(f"{where}: not valid JSON ({_short(err)})") from None
    if not isinstance(value, dict):
        raise SchemaError(f"{where}: a JSON object, got {_kind(value)}")
    return value


class Node:
    """A JSON value and where it is; its methods read one child and check it."""

    __slots__ = ("value", "where")

    def __init__(self, value: Any, where: str):
        self.value, self.where = value, where

    # ---- children
    def _child(self, key: str | int) -> "Node":
        if isinstance(key, int):
            return Node(self.value[key], f"{self.where}[{key}]")
        if not isinstance(self.value, dict):
            raise self.error(f"a JSON object, got {_kind(self.value)}")
        if key not in self.value:
            raise SchemaError(f"{self.where}: missing field {key!r}")
        return Node(self.value[key], f"{self.where}.{key}")

    def get(self, key: str) -> "Node":
        return self._child(key)

    def opt(self, key: str) -> "Node | None":
        """The child ``key``, or None where it is absent or null."""
        if isinstance(self.value, dict) and self.value.get(key) is None:
            return None
        return self._child(key)

    def error(self, what: str) -> SchemaError:
        return SchemaError(f"{self.where}: {what}")

    # ---- this value as a type
    def obj(self, allowed: tuple[str, ...] | None = None) -> "Node":
        """This value, checked to be an object (with no key outside ``allowed`` when given)."""
        if not isinstance(self.value, dict):
            raise self.error(f"a JSON object, got {_kind(self.value)}")
        if allowed is not None:
            extra = sorted(k for k in self.value if k not in allowed)
            if extra:
                raise self.error(f"unknown field {extra[0]!r}; the fields are "
                                 f"{', '.join(allowed)}")
        return self

    def items(self, length: int | None = None, max_len: int | None = None) -> Iterator["Node"]:
        """The elements of this list (exactly ``length`` of them when given)."""
        if not isinstance(self.value, list):
            raise self.error(f"a JSON list, got {_kind(self.value)}")
        if length is not None and len(self.value) != length:
            raise self.error(f"a list of {length}, got {len(self.value)} element(s)")
        if max_len is not None and len(self.value) > max_len:
            raise self.error(f"at most {max_len} elements, got {len(self.value)}")
        return (self._child(i) for i in range(len(self.value)))

    def entries(self) -> Iterator[tuple[str, "Node"]]:
        """The (key, value) pairs of this object."""
        self.obj()
        return ((k, Node(v, f"{self.where}.{k}")) for k, v in self.value.items())

    def int(self, lo: int = 0, hi: int | None = None) -> int:
        v = self.value
        if not isinstance(v, int) or isinstance(v, bool):
            raise self.error(f"an integer, got {_kind(v)}")
        if v < lo or (hi is not None and v > hi):
            bound = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
            raise self.error(f"an integer {bound}, got {v}")
        return v

    def str(self, choices: tuple[str, ...] | None = None, nonempty: bool = False) -> str:
        v = self.value
        if not isinstance(v, str):
            raise self.error(f"a string, got {_kind(v)}")
        if choices is not None and v not in choices:
            raise self.error(f"one of {', '.join(choices)}, got {v[:60]!r}")
        if nonempty and not v:
            raise self.error("a non-empty string")
        return v

    def bool(self) -> bool:
        if not isinstance(self.value, bool):
            raise self.error(f"true or false, got {_kind(self.value)}")
        return self.value

    def dtype(self) -> str:
        return self.str(DTYPES)

    def shape(self) -> tuple[int, ...]:
        """A tensor shape: at most MAX_RANK dimensions, each >= 0."""
        return tuple(d.int(0, MAX_TENSOR_BYTES) for d in self.items(max_len=MAX_RANK))


def tensor_bytes(shape: tuple[int, ...], dtype: str) -> int:
    n = _ITEMSIZE[dtype]
    for d in shape:
        n *= d
    return n


def check_tensor_size(shape: tuple[int, ...], dtype: str, where: str) -> int:
    """The tensor's size in bytes; SchemaError naming ``where`` above MAX_TENSOR_BYTES."""
    n = tensor_bytes(shape, dtype)
    if n > MAX_TENSOR_BYTES:
        raise SchemaError(f"{where}: a {'x'.join(map(str, shape))} {dtype} tensor is "
                          f"{n:,} bytes, more than the {MAX_TENSOR_BYTES:,} a package may hold")
    return n


def _kind(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"a boolean ({str(v).lower()})"
    if isinstance(v, (int, float)):
        return f"a number ({v})"
    if isinstance(v, str):
        return f"a string ({v[:40]!r})"
    if isinstance(v, list):
        return f"a list of {len(v)}"
    return "an object"


def _short(err: Exception) -> str:
    return " ".join(str(err).split())[:120] or type(err).__name__
