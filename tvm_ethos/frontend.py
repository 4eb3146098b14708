"""Model import: TFLite (primary), ONNX (QDQ) and PyTorch (torch.export) into a Relax IRModule.

``load_model`` picks the importer from the object type, the file's magic bytes and its suffix,
validates the file before TVM sees it, and turns every failure into a
:class:`~tvm_ethos.errors.ModelLoadError` or :class:`~tvm_ethos.errors.UnsupportedModelError`
that names the file and the problem.

Int8 TFLite models import as QDQ Relax: ``R.dequantize`` / ``R.quantize`` around float
operators, the int32 bias dequantized and added, fused activations as ``R.clip`` in the
integer domain. ``tvm_ethos.patterns`` matches those regions back into quantized operators.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tvm_ethos.errors import ModelLoadError, UnsupportedModelError

TFLITE_MAGIC = b"TFL3"
_TFLITE_SUFFIXES = {".tflite", ".tfl", ".lite"}
_ONNX_SUFFIXES = {".onnx"}
_TORCH_SUFFIXES = {".pt2", ".pt", ".pth"}


def load_model(path_or_module: Any, shape_dict: dict | None = None):
    """Import a model into a Relax ``tvm.IRModule``.

    ``path_or_module`` may be a path (str / Path), the file's bytes, a ``tvm.IRModule``
    (returned as is), an ``onnx.ModelProto``, a ``torch.export.ExportedProgram``, or a
    ``(torch.nn.Module, example_inputs)`` pair.
    """
    import tvm  # noqa: F401  (import cost paid only here)

    obj = path_or_module
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
        return _load_bytes(data, name=str(path), suffix=path.suffix.lower(), shape_dict=shape_dict)
    mod_name = type(obj).__module__ or ""
    if mod_name.startswith("onnx"):
        return _import_onnx(obj, "<onnx.ModelProto>", shape_dict)
    if mod_name.startswith("torch") or (isinstance(obj, tuple) and len(obj) == 2):
        return _import_torch(obj, "<torch object>")
    raise UnsupportedModelError(
        f"cannot import an object of type {type(obj).__name__}: pass a .tflite/.onnx/.pt2 path, "
        "the file's bytes, a tvm.IRModule, an onnx.ModelProto or a torch ExportedProgram"
    )


def _load_bytes(data: bytes, name: str, suffix: str, shape_dict):
    if len(data) == 0:
        raise ModelLoadError(f"{name}: the file is empty")
    if len(data) >= 8 and data[4:8] == TFLITE_MAGIC:
        return _import_tflite(data, name, shape_dict)
    if suffix in _TFLITE_SUFFIXES:
        raise ModelLoadError(
            f"{name}: not a TFLite flatbuffer (file identifier {data[4:8]!r}, expected {TFLITE_MAGIC!r})"
        )
    if suffix in _ONNX_SUFFIXES:
        return _import_onnx(data, name, shape_dict)
    if suffix in _TORCH_SUFFIXES or data[:2] == b"PK":
        return _import_torch(data, name)
    raise ModelLoadError(
        f"{name}: not a recognised model file (no TFLite identifier 'TFL3'; "
        f"suffix {suffix or '(none)'!r} is none of .tflite, .onnx, .pt2)"
    )


# ---------------------------------------------------------------- TFLite
def _validate_tflite(data: bytes, name: str):
    """Walk the flatbuffer and touch every table and vector, so that a truncated or corrupt
    file fails here with a clear message instead of deep inside the importer."""
    import tflite

    n = len(data)
    try:
        model = tflite.Model.GetRootAsModel(data, 0)
        if model.SubgraphsLength() < 1:
            raise ModelLoadError(f"{name}: the TFLite model has no subgraph")
        for b in range(model.BuffersLength()):
            buf = model.Buffers(b)
            if buf.DataLength() > 0:
                buf.DataAsNumpy()
            off = buf.Offset() if hasattr(buf, "Offset") else 0
            size = buf.Size() if hasattr(buf, "Size") else 0
            if off > 1 and off + size > n:
                raise ModelLoadError(
                    f"{name}: truncated: buffer {b} lies at bytes {off}..{off + size} "
                    f"but the file has {n} bytes"
                )
        for s in range(model.SubgraphsLength()):
            sg = model.Subgraphs(s)
            for t in range(sg.TensorsLength()):
                ten = sg.Tensors(t)
                ten.ShapeAsNumpy() if ten.ShapeLength() else None
                ten.Name()
                if ten.Buffer() >= model.BuffersLength():
                    raise ModelLoadError(f"{name}: tensor {t} names buffer {ten.Buffer()} which does not exist")
                q = ten.Quantization()
                if q is not None:
                    if q.ScaleLength():
                        q.ScaleAsNumpy()
                    if q.ZeroPointLength():
                        q.ZeroPointAsNumpy()
            for o in range(sg.OperatorsLength()):
                op = sg.Operators(o)
                if op.InputsLength():
                    op.InputsAsNumpy()
                if op.OutputsLength():
                    op.OutputsAsNumpy()
                if op.OpcodeIndex() >= model.OperatorCodesLength():
                    raise ModelLoadError(f"{name}: operator {o} uses opcode {op.OpcodeIndex()} which does not exist")
        for c in range(model.OperatorCodesLength()):
            model.OperatorCodes(c).BuiltinCode()
    except ModelLoadError:
        raise
    except Exception as err:  # struct.error, ValueError, IndexError from a cut flatbuffer
        raise ModelLoadError(
            f"{name}: truncated or corrupt TFLite file ({len(data)} bytes): {type(err).__name__}: {err}"
        ) from None
    return model


def _import_tflite(data: bytes, name: str, shape_dict):
    try:
        import tflite  # noqa: F401
        from tvm.relax.frontend.tflite import from_tflite
    except ImportError as err:  # pragma: no cover - tflite is a hard dependency
        raise UnsupportedModelError(f"{name}: TFLite import needs the 'tflite' package ({err})") from None
    model = _validate_tflite(data, name)
    try:
        mod = from_tflite(model, shape_dict=shape_dict)
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise UnsupportedModelError(
            f"{name}: the TFLite importer cannot convert this model: {msg[-1] if msg else type(err).__name__}"
        ) from None
    mod = _finish(mod)
    mod = mod.with_attr("tvm_ethos.source_format", "tflite")
    return mod


# ---------------------------------------------------------------- ONNX
def _import_onnx(data_or_model, name: str, shape_dict):
    try:
        import onnx
    except ImportError:
        raise UnsupportedModelError(
            f"{name}: ONNX import needs the optional 'onnx' package (pip install onnx)"
        ) from None
    from tvm.relax.frontend.onnx import from_onnx

    if isinstance(data_or_model, (bytes, bytearray)):
        try:
            model = onnx.load_model_from_string(bytes(data_or_model))
            onnx.checker.check_model(model)
        except Exception as err:
            raise ModelLoadError(f"{name}: not a valid ONNX model: {err}") from None
    else:
        model = data_or_model
    try:
        mod = from_onnx(model, shape_dict=shape_dict)
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise UnsupportedModelError(
            f"{name}: the ONNX importer cannot convert this model: {msg[-1] if msg else type(err).__name__}"
        ) from None
    return _finish(mod).with_attr("tvm_ethos.source_format", "onnx")


# ---------------------------------------------------------------- PyTorch
def _import_torch(obj, name: str):
    try:
        import torch
    except ImportError:
        raise UnsupportedModelError(
            f"{name}: PyTorch import needs the optional 'torch' package"
        ) from None
    from tvm.relax.frontend.torch import from_exported_program

    try:
        if isinstance(obj, (bytes, bytearray)):
            import io

            prog = torch.export.load(io.BytesIO(bytes(obj)))
        elif isinstance(obj, tuple):
            module, example = obj
            prog = torch.export.export(module, tuple(example))
        else:
            prog = obj
    except Exception as err:
        raise ModelLoadError(f"{name}: cannot load a torch.export program: {err}") from None
    try:
        mod = from_exported_program(prog)
    except Exception as err:
        msg = str(err).strip().splitlines()
        raise UnsupportedModelError(
            f"{name}: the PyTorch importer cannot convert this program: {msg[-1] if msg else err}"
        ) from None
    return _finish(mod).with_attr("tvm_ethos.source_format", "torch")


def _finish(mod):
    """Normalise an imported module: dataflow blocks everywhere (FuseOpsByPattern needs them)."""
    from tvm import relax

    return relax.transform.ConvertToDataflow()(mod)
