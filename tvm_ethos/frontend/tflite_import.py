"""TFLite -> Relax: TVM's importer with tvm-ethos's converters, then what it loses put back
(SOFTMAX's beta, the source's output names and shapes)."""
from __future__ import annotations

from tvm_ethos.errors import OptionError, UnsupportedModelError
from tvm_ethos.frontend.messages import one_line
from tvm_ethos.frontend.relax_module import finish, with_output_specs
from tvm_ethos.frontend.tflite_check import already_compiled, check_tflite, refusing_findings
from tvm_ethos.frontend.tflite_support import (
    TFLM_TARGET_HINT,
    int16_zero_point_refusal,
    kernel_form_refusal,
    softmax16_quantization_refusal,
)


def import_tflite(data: bytes, name: str, shape_dict):
    """Check ``data`` (tflite_check.py), then convert it; ``shape_dict`` may only name the
    model's inputs. ``name`` labels every error."""
    try:
        import tflite  # noqa: F401
        from tvm.relax.frontend.tflite import from_tflite

        from tvm_ethos.tflite_converter import EthosOperatorConverter
    except ImportError as err:  # pragma: no cover - tflite is a hard dependency
        raise UnsupportedModelError(
            f"{name}: TFLite import needs the 'tflite' package ({err})"
        ) from None
    model = _checked_model(data, name)
    patched = _single_scale_axis_zero(model, data)
    if patched is not data:
        import tflite

        model = tflite.Model.GetRootAsModel(patched, 0)
    if shape_dict:
        sg = model.Subgraphs(0)
        inputs = []
        for i in sg.InputsAsNumpy():
            raw = sg.Tensors(int(i)).Name()
            inputs.append(raw.decode("utf-8") if raw is not None else f"tvmgen_tensor_{i}")
        for key in shape_dict:
            if key not in inputs:
                raise OptionError(f"option 'shape_dict': {key!r} is no input of {name}; its "
                                  f"inputs are {', '.join(map(repr, inputs)) or '(none)'}")
    try:
        mod = from_tflite(model, shape_dict=shape_dict, op_converter=EthosOperatorConverter)
    except Exception as err:
        raise UnsupportedModelError(
            f"{name}: the TFLite importer cannot convert this model: {_importer_failure(err)}"
        ) from None
    mod = _restore_softmax_beta(finish(mod), _softmax_betas(model), name)
    mod = mod.with_attr("tvm_ethos.source_format", "tflite")
    return with_output_specs(mod, *_tflite_outputs(model))



def _checked_model(data: bytes, name: str):
    """The ``tflite.Model`` of ``data`` once checked; refused in one line when an operator has
    no converter (naming it and the target that takes it; none where TFLite's own kernels
    refuse it too), else at the check's first finding."""
    checked = check_tflite(data, name)
    if any(already_compiled(op.name) for op in checked.operators):
        raise UnsupportedModelError(
            f"{name}: the model is already compiled for Ethos-U (its 'ethos-u' custom operator "
            "holds an NPU command stream, as Vela and tvm-ethos's .tflite output write it): "
            "'tvmc run' runs it on the functional model; compiling it for the ethos-u target "
            "(a TFLite Micro file) keeps that operator as it is, or compile the original "
            ".tflite for a package")
    for op in checked.operators:
        where = f"subgraph {op.subgraph} " if op.subgraph else ""
        invalid = int16_zero_point_refusal(checked, op)
        if invalid:
            raise UnsupportedModelError(
                f"{name}: {where}operator {op.index} ({op.name}) cannot be imported: {invalid}")
        reason = (softmax16_quantization_refusal(checked, op)
                  or kernel_form_refusal(checked, op))
        if reason:
            raise UnsupportedModelError(
                f"{name}: {where}operator {op.index} ({op.name}) cannot be imported: {reason}; "
                f"no host target (llvm, opencl) runs it; {TFLM_TARGET_HINT}")
    findings = refusing_findings(checked)
    if findings:
        raise UnsupportedModelError(f"{name}: {findings[0].message}")
    return checked.model


def _single_scale_axis_zero(model, data: bytes) -> bytes:
    """``data`` with the quantized dimension of every one-scale quantization, and of every 1-D
    tensor's, set to 0.

    One scale quantizes the whole tensor whatever axis is named, and the TFLite runtime ignores
    the axis then; TVM's importer refuses a per-tensor depthwise weight whose axis is not 0
    (a depthwise convolution with one channel, as converters write it: axis 3). A 1-D tensor's
    scales run along its only dimension: converters copy a depthwise weight's axis 3 onto its
    bias (the bias's scales are the input's times the weight's, read by no TFLite runtime). The
    field is rewritten in place, so no other byte of the model moves; ``data`` itself is
    returned when nothing needs it."""
    fixes = []
    for s in range(model.SubgraphsLength()):
        sg = model.Subgraphs(s)
        for t in range(sg.TensorsLength()):
            ten = sg.Tensors(t)
            q = ten.Quantization()
            if q is None or q.QuantizedDimension() == 0 or not (
                    q.ScaleLength() == 1 or ten.ShapeLength() == 1):
                continue
            fixes.append(q._tab.Pos + q._tab.Offset(16))  # field 6: quantized_dimension
    if not fixes:
        return data
    out = bytearray(data)
    for at in fixes:
        out[at:at + 4] = (0).to_bytes(4, "little")
    return bytes(out)


def _tflite_outputs(model) -> tuple[list[str], list[list[int]]]:
    """The main subgraph's output tensor names and declared shapes."""
    sg = model.Subgraphs(0)
    names, shapes = [], []
    for i in sg.OutputsAsNumpy():
        t = sg.Tensors(int(i))
        raw = t.Name()
        names.append(raw.decode("utf-8") if raw is not None else f"tvmgen_tensor_{i}")
        shapes.append([int(d) for d in t.ShapeAsNumpy()] if t.ShapeLength() else [])
    return names, shapes




def _softmax_betas(model) -> list[float]:
    """The ``beta`` of every SOFTMAX of the main subgraph, in operator order (0 where it has no
    SoftmaxOptions, as TFLite reads it)."""
    import tflite

    sg = model.Subgraphs(0)
    betas = []
    for i in range(sg.OperatorsLength()):
        op = sg.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        if max(code.BuiltinCode(), code.DeprecatedBuiltinCode()) != tflite.BuiltinOperator.SOFTMAX:
            continue
        beta = 0.0                      # TFLite's without SoftmaxOptions (the schema default)
        table = op.BuiltinOptions()
        if table is not None and op.BuiltinOptionsType() == tflite.BuiltinOptions.SoftmaxOptions:
            opts = tflite.SoftmaxOptions()
            opts.Init(table.Bytes, table.Pos)
            beta = float(opts.Beta())
        betas.append(beta)
    return betas


def _restore_softmax_beta(mod, betas: list[float], name: str):
    """TVM's TFLite importer drops SOFTMAX's ``beta`` (it emits ``softmax(x)`` for
    ``softmax(beta * x)``): put it back as ``softmax(multiply(x, beta))`` on each softmax whose
    beta is not 1. The importer converts operators in order, so the k-th ``relax.nn.softmax``
    of ``main`` is the k-th SOFTMAX."""
    if all(b == 1.0 for b in betas):
        return mod
    from tvm import relax

    calls = []
    for block in mod["main"].body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and getattr(v.op, "name", "") == "relax.nn.softmax":
                calls.append(v)
    if len(calls) != len(betas):
        raise UnsupportedModelError(
            f"{name}: found {len(calls)} softmax operators in the imported module for "
            f"{len(betas)} SOFTMAX operators with beta {betas}; cannot restore beta"
        )
    scaled = {c: b for c, b in zip(calls, betas) if b != 1.0}

    @relax.expr_functor.mutator
    class _AddBeta(relax.PyExprMutator):
        def visit_call_(self, call):
            new = super().visit_call_(call)
            beta = scaled.get(call)
            if beta is None:
                return new
            arg = new.args[0]
            dtype = str(arg.ty.dtype)
            k = self.builder_.emit(relax.op.multiply(arg, relax.const(beta, dtype)))
            return relax.Call(new.op, [k], new.attrs)

    mutator = _AddBeta(mod)
    mod["main"] = mutator.visit_expr(mod["main"])
    return finish(mod)


def _importer_failure(err: BaseException) -> str:
    """One line about an exception from TVM's TFLite importer: the operator it was converting
    (found in the traceback) and the error's own message, or its type when it has none."""
    op = ""
    tb = err.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        if frame.f_code.co_name == "convert_op_to_relax" and "op_idx" in frame.f_locals:
            code = frame.f_locals.get("op_code_str")
            op = f"operator {frame.f_locals['op_idx']}" + (f" ({code})" if code else "") + ": "
        tb = tb.tb_next
    return op + one_line(err)
