"""Whose is a ``reshape -> permute_dims -> reshape`` chain in ``main``: an importer's single
operator (TVM writes DEPTH_TO_SPACE so, through a 6-D tensor), or the model's own RESHAPE,
TRANSPOSE and RESHAPE operators, which read the same in Relax.

An importer's operator goes to one place whole, so its reshapes are left to the chain
(``partition.CHAIN_RESHAPE``) and its permutation is no TRANSPOSE of its own. A model's own
chain is three operators, each taken as it is (Vela 5.2 runs one through 6-D on its NPU).
Relax cannot tell them apart; the ``.tflite`` the module came from can: its graph names each
operator's builtin. A 6-D chain is the model's own when the source has as many RESHAPE ->
TRANSPOSE -> RESHAPE operator chains of its form (shapes and permutation) as ``main`` has
chains of it, so no other operator (a DEPTH_TO_SPACE) wrote one of them. Likewise a
permutation of a reshape outside such a chain is the model's own TRANSPOSE when the source
has as many TRANSPOSEs of a RESHAPE's output of its form as ``main`` has permutations of a
reshape of it. Without its source (an ONNX or torch model, a module read back in another
process) every chain stays whole and every permutation of a reshape is tied.
"""
from __future__ import annotations

from collections import Counter
from typing import NamedTuple

import numpy as np
import tflite
from tvm import relax

from tvm_ethos.patterns import ChainForm, six_d_chains
from tvm_ethos.tflite_source import source_of


class ChainVerdict(NamedTuple):
    """What the partition treats as parts of an importer's operator in ``main``."""

    #: reshapes left to their chain: a RESHAPE alone refused (``partition.CHAIN_RESHAPE``)
    held: frozenset[str]
    #: names of the bindings of ``main`` that are reshapes
    reshapes: frozenset[str]
    #: the bindings of the model's own chains through 6-D (reshapes and permutation)
    own: frozenset[str]

    def tied(self, op_id: str, x) -> bool:
        """Whether the permutation ``op_id`` of ``x`` is no TRANSPOSE of its own (declined,
        unreported): ``x`` is a reshape (a binding, or a call TVM's converter left unbound
        inside an operator's expression) and the chain is not known to be the model's own."""
        if isinstance(x, relax.Call):
            of_reshape = getattr(x.op, "name", "") == "relax.reshape"
        else:
            of_reshape = getattr(x, "name", None) in self.reshapes
        return of_reshape and op_id not in self.own


def chain_verdict(mod) -> ChainVerdict:
    """The :class:`ChainVerdict` of ``mod["main"]``: every chain through 6-D held but the
    model's own (:func:`source_chains` of the source), and every permutation of a reshape
    tied but the model's own: an own chain's, or a TRANSPOSE of a RESHAPE
    (:func:`source_pairs`)."""
    func = mod["main"]
    chains = six_d_chains(func)
    own: set[str] = set()
    data = source_of(mod) if chains else None
    if data is not None:
        in_source = source_chains(data)
        in_main = Counter(chain.form for chain in chains)
        own = {name for chain in chains if in_main[chain.form] == in_source[chain.form]
               for name in chain.reshapes | {chain.transpose} if name is not None}
    held = frozenset(name for chain in chains for name in chain.reshapes if name not in own)
    reshapes = frozenset(b.var.name for block in func.body.blocks for b in block.bindings
                         if isinstance(b.value, relax.Call)
                         and getattr(b.value.op, "name", "") == "relax.reshape")
    in_chains = {chain.transpose for chain in chains}
    pairs = [(form, name) for form, name in reshape_permutations(func)
             if name not in in_chains]
    data = source_of(mod) if pairs and data is None else data
    if pairs and data is not None:
        in_source = source_pairs(data)
        in_main = Counter(form for form, _ in pairs)
        own |= {name for form, name in pairs if in_main[form] == in_source[form]}
    return ChainVerdict(held, reshapes, frozenset(own))


def reshape_permutations(func: relax.Function) -> list[tuple[ChainForm, str]]:
    """Every bound ``permute_dims`` of a bound ``reshape`` in ``func``, in binding order: its
    form (the reshape's input and output shapes and the permutation; no output shape) and its
    binding's name."""
    var2val = {b.var: b.value for block in func.body.blocks for b in block.bindings}
    out = []
    for var, value in var2val.items():
        if not (isinstance(value, relax.Call)
                and getattr(value.op, "name", "") == "relax.permute_dims"):
            continue
        src = var2val.get(value.args[0])
        if not (isinstance(src, relax.Call) and getattr(src.op, "name", "") == "relax.reshape"):
            continue
        mid = _static_shape(value.args[0])
        axes = value.attrs.axes
        perm = tuple(int(a) for a in axes) if axes is not None else tuple(range(len(mid)))[::-1]
        start = _static_shape(src.args[0])
        out.append((ChainForm(start, mid, perm, ()), var.name))
    return out


def source_chains(data: bytes) -> Counter[ChainForm]:
    """How many RESHAPE -> TRANSPOSE -> RESHAPE chains of operators the first subgraph of the
    ``.tflite`` ``data`` has, by form (one per RESHAPE reading a TRANSPOSE of a RESHAPE's
    output, as Relax counts its chains)."""
    model, g, kinds, writer, readers = _operators(data)

    out: Counter[ChainForm] = Counter()
    for j, kind in enumerate(kinds):
        op = g.Operators(j)
        if kind != tflite.BuiltinOperator.TRANSPOSE or op.InputsLength() < 2:
            continue
        src, perm_t, mid_out = int(op.Inputs(0)), int(op.Inputs(1)), int(op.Outputs(0))
        first = writer.get(src)
        perm = _constant_ints(model, g, perm_t)
        if first is None or kinds[first] != tflite.BuiltinOperator.RESHAPE or perm is None:
            continue
        start = int(g.Operators(first).Inputs(0))
        for k in readers.get(mid_out, ()):
            if kinds[k] == tflite.BuiltinOperator.RESHAPE and int(g.Operators(k).Inputs(0)) \
                    == mid_out:
                out[ChainForm(_shape(g, start), _shape(g, src), perm,
                              _shape(g, int(g.Operators(k).Outputs(0))))] += 1
    return out


def _static_shape(expr) -> tuple:
    """``expr``'s shape, its symbolic dimensions as they are (no source shape equals one)."""
    dims = expr.ty.shape.values
    return tuple(int(d) if isinstance(d, int) or hasattr(d, "value") else d for d in dims)


def source_pairs(data: bytes) -> Counter[ChainForm]:
    """How many TRANSPOSE operators of a RESHAPE's output the first subgraph of the
    ``.tflite`` ``data`` has, by form (:func:`reshape_permutations`' forms)."""
    model, g, kinds, writer, _ = _operators(data)

    out: Counter[ChainForm] = Counter()
    for j, kind in enumerate(kinds):
        op = g.Operators(j)
        if kind != tflite.BuiltinOperator.TRANSPOSE or op.InputsLength() < 2:
            continue
        src = int(op.Inputs(0))
        first = writer.get(src)
        perm = _constant_ints(model, g, int(op.Inputs(1)))
        if first is None or kinds[first] != tflite.BuiltinOperator.RESHAPE or perm is None:
            continue
        out[ChainForm(_shape(g, int(g.Operators(first).Inputs(0))), _shape(g, src), perm, ())] += 1
    return out


def _operators(data: bytes):
    """(model, first subgraph, each operator's builtin code, the operator writing each tensor,
    the operators reading each tensor) of the ``.tflite`` ``data``."""
    model = tflite.Model.GetRootAsModel(data, 0)
    g = model.Subgraphs(0)
    kinds, writer, readers = [], {}, {}
    for i in range(g.OperatorsLength()):
        op = g.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        kinds.append(max(code.BuiltinCode(), code.DeprecatedBuiltinCode()))
        for t in op.OutputsAsNumpy() if op.OutputsLength() else ():
            writer[int(t)] = i
        for t in op.InputsAsNumpy() if op.InputsLength() else ():
            readers.setdefault(int(t), []).append(i)
    return model, g, kinds, writer, readers


def _shape(g, t: int) -> tuple[int, ...]:
    return tuple(int(d) for d in g.Tensors(t).ShapeAsNumpy()) if g.Tensors(t).ShapeLength() \
        else ()


def _constant_ints(model, g, t: int) -> tuple[int, ...] | None:
    """The values of the constant int32 or int64 tensor ``t``, or None when it is computed."""
    tensor = g.Tensors(t)
    raw = model.Buffers(tensor.Buffer()).DataAsNumpy()
    if isinstance(raw, int) or raw.size == 0:
        return None
    dtype = {tflite.TensorType.INT32: np.int32, tflite.TensorType.INT64: np.int64}.get(
        tensor.Type())
    return None if dtype is None else tuple(int(v) for v in raw.view(dtype))
