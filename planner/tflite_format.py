"""Facts about the TFLite flatbuffer format that both TFLite readers share.

Two readers walk the same files: :mod:`planner.tflite` (TFLite -> PlannerGraph, no TVM) and
the validator that ``tvm_ethos.frontend`` runs before TVM's importer. They must agree on the
file identifier, on what each TensorType is and on when a file counts as truncated, so that a
file one of them calls corrupt is corrupt to the other for the same reason. This module holds
those facts; it imports neither TVM nor the ``tflite`` package (the planner must import
without it).
"""
from __future__ import annotations

import struct
from typing import Any

__all__ = ["FILE_IDENTIFIER", "TFLITE_SUFFIXES", "TENSOR_TYPES", "Truncated", "DECODING_ERRORS",
           "enum_names", "check_external_buffer", "describe_decoding_error"]

#: The flatbuffer file identifier at bytes 4..8 of every TFLite model.
FILE_IDENTIFIER = b"TFL3"
#: The suffixes of a file that says it is a TFLite model (one without the identifier is refused
#: as no TFLite flatbuffer, not tried as another format).
TFLITE_SUFFIXES = frozenset({".tflite", ".tfl", ".lite"})

#: TensorType (tensorflow/lite/schema.fbs) -> (name, bytes per element; None where the width
#: varies or is below a byte).
TENSOR_TYPES: dict[int, tuple[str, int | None]] = {
    0: ("FLOAT32", 4), 1: ("FLOAT16", 2), 2: ("INT32", 4), 3: ("UINT8", 1), 4: ("INT64", 8),
    5: ("STRING", None), 6: ("BOOL", 1), 7: ("INT16", 2), 8: ("COMPLEX64", 8), 9: ("INT8", 1),
    10: ("FLOAT64", 8), 11: ("COMPLEX128", 16), 12: ("UINT64", 8), 13: ("RESOURCE", None),
    14: ("VARIANT", None), 15: ("UINT32", 4), 16: ("UINT16", 2), 17: ("INT4", None),
    18: ("BFLOAT16", 2)}


class Truncated(Exception):
    """A read that would fall outside the file: the file is cut short or an offset is bad."""


#: What reading a cut or damaged flatbuffer raises: our own bounds checks (:class:`Truncated`),
#: ``struct`` past the end, and the generated accessors and ``numpy.frombuffer``, which check
#: nothing and fail with whatever their arithmetic hits.
DECODING_ERRORS = (Truncated, struct.error, IndexError, ValueError, TypeError, OverflowError,
                   MemoryError)


def enum_names(enum_class: Any) -> dict[int, str]:
    """Value -> name of a generated flatbuffer enum class (``tflite.BuiltinOperator``)."""
    return {v: k for k, v in vars(enum_class).items()
            if not k.startswith("_") and isinstance(v, int)}


def check_external_buffer(index: int, offset: int, size: int, file_size: int) -> None:
    """Raise :class:`Truncated` when buffer ``index``'s data, stored after the flatbuffer
    (models over 2 GiB; schema.fbs: an ``offset`` above 1 means outside), ends past the file."""
    if offset > 1 and offset + size > file_size:
        raise Truncated(f"buffer {index} lies at bytes {offset}..{offset + size}, past the end "
                        f"of the file ({file_size} bytes)")


def describe_decoding_error(err: BaseException) -> str:
    """One line on what a decoding failure says about the file, for the reader's error."""
    if isinstance(err, Truncated):
        return str(err)
    if isinstance(err, struct.error):
        return "a field lies past the end of the data"
    text = str(err).splitlines()[0] if str(err) else ""
    if text.startswith("bad number"):            # flatbuffers refusing a negative position
        return "an offset points outside the data"
    if "smaller than requested size" in text:    # numpy.frombuffer past the end
        return "a vector runs past the end of the data"
    return f"{type(err).__name__}: {text}" if text else type(err).__name__
