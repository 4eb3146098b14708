"""Running a whole Ethos-U ``.tflite``: its ``ethos-u`` operators on the functional model and
every operator left to the CPU through the TFLite interpreter, in the file's operator order
(which TFLite requires to be an execution order), as TFLite Micro would run the file on a
board.

A CPU operator runs as a model of its own: the file with only that operator in its subgraph
and its non-constant inputs as the subgraph's inputs, so the reference kernels (LiteRT's
``BUILTIN_REF``, the oracle the tests use) compute it from exactly the bytes the NPU wrote.
LiteRT (``ai-edge-litert``, the ``test`` extra) is imported only when a file has CPU
operators.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from .run import StreamStats
from .tflite_custom_op import CUSTOM_CODE, read_ethos_u_ops


class TfliteGraph:
    """A Vela-layout ``.tflite`` ready to run; CPU operators are prepared once."""

    def __init__(self, data: bytes, accelerator: str):
        import tflite

        self.accelerator = accelerator
        model = tflite.Model.GetRootAsModel(data, 0)
        if model.SubgraphsLength() != 1:
            raise ValueError(f"the model has {model.SubgraphsLength()} subgraphs; one is run")
        g = model.Subgraphs(0)
        self.inputs = g.InputsAsNumpy().tolist()
        self.outputs = g.OutputsAsNumpy().tolist()
        codes = [model.OperatorCodes(g.Operators(i).OpcodeIndex()).CustomCode()
                 for i in range(g.OperatorsLength())]
        npu = ({op.op_index: op for op in read_ethos_u_ops(data)}
               if CUSTOM_CODE in codes else {})
        self.steps: list = []
        parsed = None  # the file as LiteRT's object API sees it, read once for every CPU operator
        for i in range(g.OperatorsLength()):
            if codes[i] == CUSTOM_CODE:
                self.steps.append(npu[i])
                continue
            if parsed is None:
                from ai_edge_litert import schema_py_generated as schema

                parsed = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
            self.steps.append(_CpuOperator(parsed, i))

    @property
    def cpu_operators(self) -> list[str]:
        return [s.name for s in self.steps if isinstance(s, _CpuOperator)]

    def run(self, inputs: list[np.ndarray]) -> tuple[list[np.ndarray], StreamStats]:
        """The graph's outputs for ``inputs`` (in the graph's input order) and what the
        ``ethos-u`` operators' streams did, together (:func:`merge_stats`)."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f"the model takes {len(self.inputs)} input(s), got {len(inputs)}")
        values = dict(zip(self.inputs, inputs))
        stats = []
        for step in self.steps:
            if isinstance(step, _CpuOperator):
                outs = step.run(values)
                values.update(zip(step.outputs, outs))
                continue
            missing = [s.name for s in step.inputs if s.index not in values]
            if missing:
                raise ValueError(f"ethos-u operator {step.op_index} reads {missing}, which no "
                                 "earlier operator writes")
            outs, st = step.run([values[s.index] for s in step.inputs], self.accelerator)
            values.update(zip((s.index for s in step.outputs), outs))
            stats.append(st)
        return [values[t] for t in self.outputs], merge_stats(stats)


class _CpuOperator:
    """One CPU operator of the file as a one-operator model for LiteRT's reference kernels."""

    def __init__(self, model, index: int):
        """``model``: the file's ``ModelT``; its subgraph and metadata are set for this
        operator while it is packed, then put back."""
        import flatbuffers
        from ai_edge_litert import schema_py_generated as schema
        from ai_edge_litert.interpreter import Interpreter, OpResolverType

        g = model.subgraphs[0]
        op = g.operators[index]
        code = model.operatorCodes[op.opcodeIndex]
        self.name = f"{_builtin_name(schema, code)} (operator {index})"
        constant = {t for t, tensor in enumerate(g.tensors)
                    if model.buffers[tensor.buffer].data is not None
                    and len(model.buffers[tensor.buffer].data)}
        self.inputs = [int(t) for t in op.inputs if t >= 0 and int(t) not in constant]
        self.outputs = [int(t) for t in op.outputs]
        kept = (g.operators, g.inputs, g.outputs, model.metadata, model.signatureDefs)
        g.operators, g.inputs, g.outputs = [op], self.inputs, self.outputs
        model.metadata = None  # the arena offsets are TFLite Micro's, not the interpreter's
        model.signatureDefs = None
        b = flatbuffers.Builder(1024)
        try:
            b.Finish(model.Pack(b), file_identifier=b"TFL3")
        finally:
            g.operators, g.inputs, g.outputs, model.metadata, model.signatureDefs = kept
        self._it = Interpreter(model_content=bytes(b.Output()),
                               experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
        self._it.allocate_tensors()
        self._in = [d["index"] for d in self._it.get_input_details()]
        self._out = [d["index"] for d in self._it.get_output_details()]

    def run(self, values: dict) -> list[np.ndarray]:
        for t, idx in zip(self.inputs, self._in):
            if t not in values:
                raise ValueError(f"{self.name} reads tensor {t}, which no earlier operator "
                                 "writes")
            self._it.set_tensor(idx, np.asarray(values[t]))
        self._it.invoke()
        return [self._it.get_tensor(idx).copy() for idx in self._out]


def _builtin_name(schema, code) -> str:
    builtin = max(code.builtinCode, code.deprecatedBuiltinCode)
    names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
    return names.get(builtin, str(builtin))


def merge_stats(stats: list[StreamStats]) -> StreamStats:
    """What several streams did together: counts and bytes add up, high-water marks are the
    highest of any (each operator's data sits in the same regions)."""
    commands, dma = Counter(), Counter()
    high, read, written = Counter(), Counter(), Counter()
    macs = 0
    for s in stats:
        commands.update(s.commands)
        dma.update(s.dma_bytes)
        read.update(s.bytes_read)
        written.update(s.bytes_written)
        for r, v in s.high_water.items():
            high[r] = max(high[r], v)
        macs += s.macs
    return StreamStats(dict(sorted(commands.items())), macs, dict(sorted(dma.items())),
                       dict(sorted(high.items())), dict(sorted(read.items())),
                       dict(sorted(written.items())))
