"""One operator of a source ``.tflite`` read for a graph-level stream (an LSTM's, an SVDF's):
its tensors by position, so the reader can name what it refuses by the operator's index."""
from __future__ import annotations

from typing import NamedTuple

from tvm_ethos.backends.ethos_u.stream_base import UnsupportedOperatorError


class SourceOperator(NamedTuple):
    """The flatbuffer ``Operator``, the name refusals carry, its input tensor indices padded
    with -1 to the kernel's input count (an absent optional input is -1 either way), and its
    output tensor indices."""

    op: object
    name: str
    inputs: list[int]
    outputs: list[int]


def source_operator(graph, index: int, kind: str, inputs: int) -> SourceOperator:
    """Operator ``index`` of ``graph`` (``tflite_export.SourceGraph``), which must be a
    ``kind`` operator, else UnsupportedOperatorError."""
    op = graph.g.Operators(index)
    name = f"operator {index} ({kind})"
    if graph.kinds[index] != kind:
        raise UnsupportedOperatorError(name, f"it is a {graph.kinds[index]}")
    ins = [int(t) for t in op.InputsAsNumpy()] if op.InputsLength() else []
    outs = [int(t) for t in op.OutputsAsNumpy()] if op.OutputsLength() else []
    return SourceOperator(op, name, ins + [-1] * (inputs - len(ins)), outs)
