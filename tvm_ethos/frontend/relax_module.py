"""What every importer does to the Relax module it hands back."""
from __future__ import annotations

#: Module attributes with the source model's output names and shapes (compiler.py reads them).
OUTPUT_NAMES_ATTR = "tvm_ethos.output_names"
OUTPUT_SHAPES_ATTR = "tvm_ethos.output_shapes"


def with_output_specs(mod, names: list[str], shapes: list[list[int]]):
    """Record the source model's output names and shapes on ``mod``. TVM 0.27's TFLite
    importer names no outputs and keeps FULLY_CONNECTED's input rank (a (1,1,1,64) input gives
    (1,1,1,10) where TFLite, with keep_num_dims false, gives (1,10)); the compiled model hands
    its outputs back under these names and shapes (same elements, a reshape)."""
    return mod.with_attr(OUTPUT_NAMES_ATTR, list(names)).with_attr(OUTPUT_SHAPES_ATTR, [list(s) for s in shapes])


def finish(mod):
    """Normalise an imported module: dataflow blocks everywhere (FuseOpsByPattern needs them)."""
    from tvm import relax

    return relax.transform.ConvertToDataflow()(mod)
