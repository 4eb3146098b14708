"""Model import: TFLite (primary), ONNX (QDQ) and PyTorch (torch.export) into a Relax IRModule.

``load_model`` picks the importer from the object type, the file's magic bytes and its suffix,
validates the file before TVM sees it, and turns every failure into a
:class:`~tvm_ethos.errors.ModelLoadError` or :class:`~tvm_ethos.errors.UnsupportedModelError`
that names the file and the problem.

Int8 TFLite models import as QDQ Relax: ``R.dequantize`` / ``R.quantize`` around float
operators, the int32 bias dequantized and added, fused activations as ``R.clip`` in the
integer domain; data-movement operators (reshape, split, depth-to-space, nearest resize) act on
the codes directly (TVM's converter is extended for the quantized ones it refuses:
``tvm_ethos.tflite_converter``). ``tvm_ethos.patterns`` matches those regions back into
quantized operators.

One module per job: ``tflite_check`` (the flatbuffer check), ``tflite_support`` (which
operators the importer converts: :func:`operator_support`), ``tflite_import``,
``onnx_import``, ``torch_import``, ``relax_module`` (what every importer does to its result)
and ``messages`` (an importer's failure as one line). This module only dispatches.
"""
from __future__ import annotations

import numbers
import os
from pathlib import Path
from typing import Any

from planner.tflite_check import source_label
from planner.tflite_format import FILE_IDENTIFIER, TFLITE_SUFFIXES
from tvm_ethos.errors import ModelLoadError, OptionError, UnsupportedModelError
from tvm_ethos.frontend.onnx_import import import_onnx
from tvm_ethos.frontend.relax_module import OUTPUT_NAMES_ATTR, OUTPUT_SHAPES_ATTR
from tvm_ethos.frontend.tflite_check import check_identifier
from tvm_ethos.frontend.tflite_import import import_tflite
from tvm_ethos.frontend.tflite_support import OperatorSupport, operator_support
from tvm_ethos.frontend.torch_import import import_torch, is_torch_object
from tvm_ethos.tflite_source import keep_source

__all__ = ["load_model", "operator_support", "OperatorSupport", "OUTPUT_NAMES_ATTR",
           "OUTPUT_SHAPES_ATTR"]

_ONNX_SUFFIXES = {".onnx"}
_TORCH_SUFFIXES = {".pt2", ".pt", ".pth"}


def load_model(path_or_module: Any, shape_dict: dict | None = None, example_inputs: Any = None):
    """Import a model into a Relax ``tvm.IRModule``.

    ``path_or_module`` may be a path (str / Path), the file's bytes, a ``tvm.IRModule``
    (returned as is), an ``onnx.ModelProto``, a ``torch.export.ExportedProgram``, a
    ``torch.nn.Module`` with ``example_inputs`` (a tuple of tensors, exported with
    ``torch.export.export``), or a ``(torch.nn.Module, example_inputs)`` pair.
    """
    shape_dict = _check_shape_dict(shape_dict)
    import tvm  # noqa: F401  (import cost paid only here)

    obj = path_or_module
    if example_inputs is not None:
        return import_torch((obj, example_inputs), "<torch object>")
    if is_torch_object(obj):
        return import_torch(obj, "<torch object>")
    if isinstance(obj, tvm.IRModule):
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        return _load_bytes(data, name="<bytes>", suffix="", shape_dict=shape_dict)
    if isinstance(obj, (str, os.PathLike)):
        path = Path(obj)
        if not path.exists():
            raise ModelLoadError(f"model file not found: {path}")
        if path.is_dir():
            raise ModelLoadError(f"model path is a directory, not a file: {path}")
        try:
            data = path.read_bytes()
        except OSError as err:
            raise ModelLoadError(f"cannot read model file {path}: {err.strerror}") from None
        return _load_bytes(data, name=source_label(obj), suffix=path.suffix.lower(),
                           shape_dict=shape_dict)
    mod_name = type(obj).__module__ or ""
    if mod_name.startswith("onnx"):
        return import_onnx(obj, "<onnx.ModelProto>", shape_dict)
    if mod_name.startswith("torch") or (isinstance(obj, tuple) and len(obj) == 2):
        return import_torch(obj, "<torch object>")
    raise UnsupportedModelError(
        f"cannot import an object of type {type(obj).__name__}: pass a .tflite/.onnx/.pt2 path, "
        "the file's bytes, a tvm.IRModule, an onnx.ModelProto or a torch ExportedProgram"
    )


def _check_shape_dict(shape_dict):
    """``shape_dict``: None, or input name -> shape (positive ints); an OptionError otherwise."""
    if shape_dict is None:
        return None
    if not isinstance(shape_dict, dict):
        raise OptionError(f"option 'shape_dict': bad value of type {type(shape_dict).__name__}; "
                          "allowed: None or a dict of input name -> shape, e.g. "
                          "{'input': (1, 224, 224, 3)}")
    out = {}
    for key, shape in shape_dict.items():
        if not isinstance(key, str):
            raise OptionError(f"option 'shape_dict': key {key!r} is not an input name (a str)")
        dims = None if isinstance(shape, (str, bytes)) or not hasattr(shape, "__iter__") \
            else list(shape)
        if dims is None or any(isinstance(d, bool) or not isinstance(d, numbers.Integral)
                               or d < 1 for d in dims):
            raise OptionError(f"option 'shape_dict': bad shape {shape!r} for input {key!r}; "
                              "allowed: a sequence of integers >= 1")
        out[key] = tuple(int(d) for d in dims)
    return out


def _load_bytes(data: bytes, name: str, suffix: str, shape_dict):
    if len(data) >= 8 and data[4:8] == FILE_IDENTIFIER:
        return keep_source(import_tflite(data, name, shape_dict), data)
    if not data or suffix in TFLITE_SUFFIXES:
        check_identifier(data, name)   # raises: empty, or no TFLite identifier
    if suffix in _ONNX_SUFFIXES:
        return import_onnx(data, name, shape_dict)
    if suffix in _TORCH_SUFFIXES or data[:2] == b"PK":
        return import_torch(data, name)
    raise ModelLoadError(
        f"{name}: not a recognised model file (no TFLite identifier 'TFL3'; "
        f"suffix {suffix or '(none)'!r} is none of .tflite, .onnx, .pt2)"
    )
