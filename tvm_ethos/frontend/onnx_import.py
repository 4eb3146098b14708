"""ONNX (QDQ) -> Relax through TVM's importer, after the checks that importer lacks."""
from __future__ import annotations

from tvm_ethos.errors import ModelLoadError, UnsupportedModelError
from tvm_ethos.frontend.messages import one_line
from tvm_ethos.frontend.relax_module import finish, with_output_specs


def import_onnx(data_or_model, name: str, shape_dict):
    """``data_or_model``: the file's bytes (checked first) or an ``onnx.ModelProto`` (taken as
    the caller built it); ``name`` labels every error."""
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
            raise ModelLoadError(f"{name}: not a valid ONNX model: {one_line(err, last=False)}") \
                from None
        # the checker lets undefined element types through; TVM's importer then fails on a
        # KeyError of the type's number
        known = set(onnx.TensorProto.DataType.values())
        g = model.graph
        for t in g.initializer:
            if t.data_type not in known or t.data_type == 0:
                raise ModelLoadError(f"{name}: not a valid ONNX model: initializer {t.name!r} "
                                     f"has data type {t.data_type}, which ONNX does not define")
        for v in list(g.input) + list(g.output) + list(g.value_info):
            if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type not in known:
                raise ModelLoadError(f"{name}: not a valid ONNX model: {v.name!r} has element "
                                     f"type {v.type.tensor_type.elem_type}, which ONNX does not "
                                     "define")
        # window attributes the checker does not range-check (TVM divides by them)
        for k, node in enumerate(g.node):
            if node.op_type not in ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"):
                continue
            for a in node.attribute:
                bad = (a.name in ("strides", "dilations", "kernel_shape") and
                       any(v < 1 for v in a.ints)) or \
                    (a.name in ("pads", "output_padding") and any(v < 0 for v in a.ints)) or \
                    (a.name == "group" and a.i < 1)
                if bad:
                    value = a.i if a.name == "group" else list(a.ints)
                    raise ModelLoadError(f"{name}: not a valid ONNX model: node {k} "
                                         f"({node.op_type} {node.name!r}): {a.name} {value} is "
                                         "out of range")
    else:
        model = data_or_model
    try:
        mod = from_onnx(model, shape_dict=shape_dict)
    except Exception as err:
        raise UnsupportedModelError(
            f"{name}: the ONNX importer cannot convert this model: {one_line(err)}"
        ) from None
    g = model.graph
    shapes = [[int(d.dim_value) for d in v.type.tensor_type.shape.dim] for v in g.output]
    return with_output_specs(finish(mod).with_attr("tvm_ethos.source_format", "onnx"),
                             [v.name for v in g.output], shapes)
