"""A group's layers as the :class:`~tvm_ethos.compute.lowered.LoweredSubgraph` the stream
generator walks, without TVM: the same layer and tensor names, operand order and constants
(in the order, with the names and the values) as ``compute.subgraph.lower_function`` gives
an NPU subgraph through ``te_ops``; its tensors are :class:`GraphTensor`, not TE tensors,
and it has no PrimFunc (nothing is scheduled for a ``.tflite`` output)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ethos_arch.ops import Op
from tvm_ethos.compute import fixed_point
from tvm_ethos.compute.lowered import LoweredSubgraph
from tvm_ethos.compute.requant_constants import bias_of, conv_multipliers, fc_multipliers
from tvm_ethos.tflite_direct.operators import DirectLayer


@dataclass(frozen=True)
class GraphTensor:
    """A tensor of the lowered group, named as ``te_ops`` names its TE tensor."""

    name: str
    shape: tuple[int, ...]
    dtype: str

    @property
    def op(self) -> GraphTensor:
        """Itself: the stream generator and the planner name a tensor ``t.op.name``, as a
        TE tensor is named by the stage that computes it."""
        return self

    @property
    def input_tensors(self) -> tuple:
        """None: every tensor is a layer's output or a group input, never a copy stage the
        stream generator follows back to its source (``stream_gen.output_source``)."""
        return ()


#: the int32 stages ``te_ops`` computes inside each kind's Part before its output (the
#: accumulators the emulator holds one element of; ``planned_memory``)
INTERNAL_STAGES = {
    Op.CONV2D: ("acc",), Op.DEPTHWISE_CONV2D: ("acc",), Op.FULLY_CONNECTED: ("acc",),
    Op.ADD: ("in0", "in1"), Op.AVG_POOL2D: ("sum",), Op.MAX_POOL2D: ("max",),
    Op.MEAN: ("sum",), Op.RESHAPE: (),
    Op.SOFTMAX: ("max", "sum", "bits", "recip0", "recip1", "recip2", "recip3"),
}


def _constants(q, name: str) -> list[tuple[str, np.ndarray]]:
    """(name suffix, array) of each constant ``te_ops`` adds for layer ``q``, in its order."""
    if q.kind in (Op.CONV2D, Op.DEPTHWISE_CONV2D):
        mult, shift = conv_multipliers(q)
        return [("w", q.weights), ("bias", bias_of(q, q.weights.shape[3])), ("mult", mult),
                ("shift", shift)]
    if q.kind == Op.FULLY_CONNECTED:
        mult, shift = fc_multipliers(q)
        return [("w", q.weights), ("bias", bias_of(q, q.weights.shape[0])), ("mult", mult),
                ("shift", shift)]
    if q.kind == Op.SOFTMAX:
        return [("exp", fixed_point.exp_table(q.in_q[0][0], q.attrs.get("beta", 1.0)))]
    return []


def lower_layers(layers: list[DirectLayer], inputs: list[int], outputs: list[int],
                 symbol: str) -> LoweredSubgraph:
    """The group of ``layers`` (source order) reading source tensors ``inputs`` and giving
    ``outputs``, as NPU subgraph ``symbol``."""
    by_source: dict[int, GraphTensor] = {}
    input_tensors = []
    for k, t in enumerate(inputs):
        consumer = next(la for la in layers if t in la.inputs)
        pos = consumer.inputs.index(t)
        ph = GraphTensor(f"input{k}", tuple(consumer.qop.in_shapes[pos]),
                         consumer.qop.in_dtypes[pos])
        by_source[t] = ph
        input_tensors.append(ph)
    consts, const_tensors = [], []
    qops, tensors, layer_inputs = [], {}, []
    for la in layers:
        q = la.qop
        name = f"l{len(qops)}_{q.kind}"
        ins = [by_source[t] for t in la.inputs]
        for suffix, array in _constants(q, name):
            array = np.ascontiguousarray(array)
            const_tensors.append(GraphTensor(f"c{len(consts)}_{name}_{suffix}",
                                             tuple(int(d) for d in array.shape),
                                             str(array.dtype)))
            consts.append(array)
        out = GraphTensor(f"{name}_out", tuple(q.out_shape), q.out_dtype)
        qops.append(q)
        layer_inputs.append(ins)
        tensors[name] = out
        by_source[la.output] = out
    return LoweredSubgraph(symbol=symbol, primfunc=None, consts=consts,
                           num_inputs=len(inputs), layers=qops, tensors=tensors,
                           outputs=[by_source[t] for t in outputs],
                           input_tensors=input_tensors, const_tensors=const_tensors,
                           layer_inputs=layer_inputs)
