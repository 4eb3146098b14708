"""The TFLite oracle: ai-edge-litert's interpreter with the reference kernels, random inputs
for a model, and the bit-exact comparison of a compiled model against it."""
from __future__ import annotations

import numpy as np


def oracle(model, inputs, reference=True):
    """Outputs of ai-edge-litert's interpreter. ``reference=True`` selects TFLite's reference
    kernels (BUILTIN_REF): the integer arithmetic the NPU emulator reproduces. The default
    resolver adds XNNPack, whose int8 requantization is float-based and differs by 1 LSB."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = (OpResolverType.BUILTIN_REF if reference
            else OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    if isinstance(model, (bytes, bytearray)):
        it = Interpreter(model_content=bytes(model), experimental_op_resolver_type=kind)
    else:
        it = Interpreter(model_path=str(model), experimental_op_resolver_type=kind)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], x)
    it.invoke()
    return [it.get_tensor(d["index"]).copy() for d in it.get_output_details()]


def random_inputs(model, rs):
    from ai_edge_litert.interpreter import Interpreter

    if isinstance(model, (bytes, bytearray)):
        it = Interpreter(model_content=bytes(model))
    else:
        it = Interpreter(model_path=str(model))
    out = []
    for d in it.get_input_details():
        if np.issubdtype(d["dtype"], np.integer):
            info = np.iinfo(d["dtype"])
            out.append(rs.randint(info.min, info.max + 1, size=d["shape"]).astype(d["dtype"]))
        else:
            out.append(rs.randn(*d["shape"]).astype(d["dtype"]))
    return out


def assert_bit_exact(compiled, model, n_inputs=3, seed=0, reference=True):
    rs = np.random.RandomState(seed)
    for _ in range(n_inputs):
        xs = random_inputs(model, rs)
        got = compiled.run(*xs)
        ref = oracle(model, xs, reference=reference)
        assert len(got) == len(ref)
        for g, r in zip(got, ref):
            assert g.size == r.size
            g = g.reshape(r.shape)
            diff = np.abs(g.astype(np.int64) - r.astype(np.int64))
            assert diff.max() == 0, f"max diff {diff.max()} at {np.argwhere(diff)[:5].tolist()}"
