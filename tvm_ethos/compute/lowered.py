"""``LoweredSubgraph``: one NPU subgraph as the planner's part matcher and the command-stream
generators read it: its operators (QOps) in order, the tensors each reads and writes, and its
constants. ``subgraph.lower_function`` fills it from a Relax function with TE tensors (and
the PrimFunc the emulator builds); the TVM-free ``.tflite`` path (``tvm_ethos.tflite_direct``)
fills it from the TFLite operators with plain named tensors and no PrimFunc. A reader needs of
a tensor only its ``op.name``, ``shape`` and ``dtype``."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tvm_ethos.qop import QOp


@dataclass
class LoweredSubgraph:
    symbol: str
    primfunc: object | None  # unscheduled tvm.tirx.PrimFunc; None: lowered without one
    consts: list[np.ndarray]
    num_inputs: int
    layers: list[QOp] = field(default_factory=list)
    tensors: dict = field(default_factory=dict)  # TE tensors by layer name, for part matchers
    outputs: list = field(default_factory=list)
    input_tensors: list = field(default_factory=list)  # TE placeholders of the activation inputs
    const_tensors: list = field(default_factory=list)  # TE placeholders of ``consts``, same order
    #: per layer, the TE tensors it reads in operand order (inputs, constants or earlier
    #: layers' outputs): the dataflow a command-stream generator walks
    layer_inputs: list = field(default_factory=list)
    #: positions in ``consts`` of the variables the kernel writes back in place (an LSTM's
    #: states, ``ConstPool.add_state``): their arrays are the reset values
    state_consts: tuple[int, ...] = ()


def subgraph_symbol(backend_id: str, index: int) -> str:
    """The symbol of a module's ``index``-th NPU subgraph of ``backend_id``."""
    return f"tvm_ethos_{backend_id.replace('-', '_')}_sg{index}"
