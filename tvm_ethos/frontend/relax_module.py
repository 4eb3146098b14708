"""What every importer does to the Relax module it hands back."""
from __future__ import annotations

import numpy as np

#: Module attributes with the source model's output names and shapes (compiler.py reads them).
OUTPUT_NAMES_ATTR = "tvm_ethos.output_names"
OUTPUT_SHAPES_ATTR = "tvm_ethos.output_shapes"


def with_output_specs(mod, names: list[str], shapes: list[list[int]]):
    """Record the source model's output names and shapes on ``mod``. TVM 0.27's TFLite
    importer names no outputs and keeps FULLY_CONNECTED's input rank (a (1,1,1,64) input gives
    (1,1,1,10) where TFLite, with keep_num_dims false, gives (1,10)); the compiled model hands
    its outputs back under these names and shapes (same elements, a reshape)."""
    return mod.with_attr(OUTPUT_NAMES_ATTR, list(names)).with_attr(
        OUTPUT_SHAPES_ATTR, [list(s) for s in shapes]
    )


def reshape_outputs(mod):
    """``mod`` with ``main`` returning the source model's output shapes (recorded by
    :func:`with_output_specs`), by a closing reshape of each output whose shape differs (same
    elements). Applied after partitioning, so the reshape is a host view and never an NPU
    subgraph of its own; a module without the record is returned as it is."""
    from tvm import relax

    attrs = mod.attrs
    if attrs is None or OUTPUT_SHAPES_ATTR not in attrs:
        return mod
    shapes = [[int(d) for d in s] for s in attrs[OUTPUT_SHAPES_ATTR]]
    main = mod["main"]
    ret = main.body.body
    tuple_out = isinstance(ret, relax.Tuple)
    fields = list(ret.fields) if tuple_out else [ret]
    if len(fields) != len(shapes):
        return mod
    bindings, outs = [], []
    for i, (e, shape) in enumerate(zip(fields, shapes)):
        ty = e.ty
        have = [int(d) for d in ty.shape.values] if getattr(ty, "shape", None) is not None else None
        if have is None or have == shape or int(np.prod(have)) != int(np.prod(shape)):
            outs.append(e)
            continue
        v = relax.Var(f"output{i}", relax.TensorType(shape, ty.dtype))
        bindings.append(relax.VarBinding(v, relax.op.reshape(e, shape)))
        outs.append(v)
    if not bindings:
        return mod
    body = relax.Tuple(outs) if tuple_out else outs[0]
    ret_ty = relax.TupleType([o.ty for o in outs]) if tuple_out else outs[0].ty
    seq = relax.SeqExpr(list(main.body.blocks) + [relax.BindingBlock(bindings)], body)
    out = mod.with_attr(OUTPUT_SHAPES_ATTR, attrs[OUTPUT_SHAPES_ATTR])  # a copy of the module
    out["main"] = relax.Function(main.params, seq, ret_ty, main.is_pure, main.attrs)
    return relax.transform.Normalize()(out)


def finish(mod):
    """Normalise an imported module: dataflow blocks everywhere (FuseOpsByPattern needs them)."""
    from tvm import relax

    return relax.transform.ConvertToDataflow()(mod)
