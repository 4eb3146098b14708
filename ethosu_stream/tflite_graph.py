"""Running a whole Ethos-U ``.tflite``: its ``ethos-u`` operators on the functional model and
every operator left to the CPU through TFLite Micro's interpreter, in the file's operator
order (which TFLite requires to be an execution order), as TFLite Micro runs the file beside
the NPU on a board.

A CPU operator runs as a model of its own: the file with only that operator in its subgraph
and its non-constant inputs as the subgraph's inputs, so TFLite Micro's kernels (the oracle
the tests use) compute it from exactly the bytes the NPU wrote. TFLite Micro
(``tflite-micro``, the ``tflm`` extra) is imported only when a file has CPU operators.
"""
from __future__ import annotations

from collections import Counter
from typing import Callable

import numpy as np

from .errors import StreamError
from .run import StreamStats
from .tflite_custom_op import (
    CUSTOM_CODE,
    FM_DTYPES,
    MAX_ARENA_BYTES,
    checked_nbytes,
    parse_model,
    read_ethos_u_ops,
    reading,
)

#: bytes of TFLite Micro arena beyond four times an operator's tensors (its bookkeeping)
_ARENA_SLACK = 64 << 10
#: inputs (optional ones as -1) of the builtins whose TFLite Micro kernel reads them by
#: position without checking how many there are: fewer would have it read past the list
_FIXED_INPUTS = {"SVDF": 5, "UNIDIRECTIONAL_SEQUENCE_LSTM": 24}
#: bytes per element of each TFLite tensor type (schema ``TensorType``)
_ITEMSIZE = {0: 4, 1: 2, 2: 4, 3: 1, 4: 8, 6: 1, 7: 2, 8: 8, 9: 1, 10: 8, 11: 16, 12: 8,
             15: 4, 16: 2, 17: 1}


class TfliteGraph:
    """A Vela-layout ``.tflite`` ready to run; CPU operators are prepared once. A file this
    model cannot run (malformed, or an ``ethos-u`` operator whose tensors or metadata are
    wrong) raises :class:`StreamError` naming what is wrong."""

    def __init__(self, data: bytes, accelerator: str):
        self.accelerator = accelerator
        model = parse_model(data)
        with reading("its subgraph"):
            if model.SubgraphsLength() != 1:
                raise StreamError(f"the .tflite has {model.SubgraphsLength()} subgraphs; only "
                                  "files with one are run (a corrupt file?)")
            g = model.Subgraphs(0)
            self.inputs = [int(t) for t in g.InputsAsNumpy()] if g.InputsLength() else []
            self.outputs = [int(t) for t in g.OutputsAsNumpy()] if g.OutputsLength() else []
            #: variable tensors (an LSTM's state an ethos-u operator updates in place) as
            #: TFLite Micro's ResetVariableTensors leaves them until a run writes them: an
            #: int8 one filled with its zero point (the real value 0), any other with 0
            self._variables = {}
            for t in range(g.TensorsLength()):
                tens = g.Tensors(t)
                if tens.IsVariable() and tens.Type() in FM_DTYPES:
                    shape = tuple(int(d) for d in tens.ShapeAsNumpy()) if tens.ShapeLength() \
                        else ()
                    dtype = np.dtype(FM_DTYPES[tens.Type()])
                    checked_nbytes(shape, dtype.itemsize, f"variable tensor {t}")
                    self._variables[t] = np.full(shape, _reset_value(tens), dtype)
            self._state = dict(self._variables)
            ncodes = model.OperatorCodesLength()
            codes = []
            for i in range(g.OperatorsLength()):
                k = g.Operators(i).OpcodeIndex()
                if not 0 <= k < ncodes:
                    raise StreamError(f"operator {i} names operator code {k}, but the file "
                                      f"has {ncodes}")
                codes.append(model.OperatorCodes(k).CustomCode())
        npu = ({op.op_index: op for op in read_ethos_u_ops(data)}
               if CUSTOM_CODE in codes else {})
        self.steps: list = []
        parsed = None  # the file as an object tree, read once for every CPU operator
        for i in range(len(codes)):
            if codes[i] == CUSTOM_CODE:
                self.steps.append(npu[i])
                continue
            if parsed is None:
                from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

                with reading("its operators"):
                    parsed = schema.ModelT.InitFromPackedBuf(bytearray(data), 0)
            with reading(f"operator {i}"):
                self.steps.append(_CpuOperator(parsed, i))

    @property
    def cpu_operators(self) -> list[str]:
        return [s.name for s in self.steps if isinstance(s, _CpuOperator)]

    def reset(self) -> None:
        """Forgets the state operators keep between runs (an SVDF's or LSTM's, on the CPU or
        in the arena), as a fresh interpreter would start."""
        self._state = dict(self._variables)
        for s in self.steps:
            if isinstance(s, _CpuOperator):
                s.reset()

    def run(self, inputs: list[np.ndarray], trace: Callable | None = None,
            tensors: dict | None = None) -> tuple[list[np.ndarray], StreamStats]:
        """The graph's outputs for ``inputs`` (in the graph's input order) and what the
        ``ethos-u`` operators' streams did, together (:func:`merge_stats`). Operators with
        state keep it from the previous run, as on a board (:meth:`reset` forgets it).
        ``trace`` goes to every stream (as in :func:`run_stream`); ``tensors``, when given,
        receives every tensor value the run computed (tensor index -> array)."""
        if len(inputs) != len(self.inputs):
            raise StreamError(f"the model takes {len(self.inputs)} input(s), got {len(inputs)}")
        values = {**self._state, **dict(zip(self.inputs, inputs))}
        stats = []
        for step in self.steps:
            if isinstance(step, _CpuOperator):
                outs = step.run(values)
                values.update(zip(step.outputs, outs))
                continue
            missing = [s.name for s in step.inputs if s.index not in values]
            if missing:
                raise StreamError(f"ethos-u operator {step.op_index} reads {missing}, which no "
                                  "earlier operator writes")
            after: dict = {}
            outs, st = step.run([values[s.index] for s in step.inputs], self.accelerator,
                                trace, after=after)
            values.update(zip((s.index for s in step.outputs), outs))
            for t in self._variables:
                if t in after:
                    values[t] = self._state[t] = after[t]
            stats.append(st)
        missing = [t for t in self.outputs if t not in values]
        if missing:
            raise StreamError(f"the graph's output tensor(s) {missing} are written by no "
                              "operator")
        if tensors is not None:
            tensors.update(values)
        return [values[t] for t in self.outputs], merge_stats(stats)


def _reset_value(tensor) -> int:
    """What TFLite Micro fills variable tensor ``tensor`` (flatbuffer ``Tensor``) with: its
    zero point for int8, else 0."""
    q = tensor.Quantization()
    if tensor.Type() != 9 or q is None or not q.ZeroPointLength():
        return 0
    return int(q.ZeroPointAsNumpy()[0])


def _tensor_bytes(tensor, owner: str) -> int:
    """The bytes of a tensor (an object-API ``TensorT``), refused past ``MAX_ARENA_BYTES``."""
    shape = [int(d) for d in (tensor.shape if tensor.shape is not None else [])]
    if any(d < 0 for d in shape):
        raise StreamError(f"{owner}: tensor {tensor.name!r} has shape {shape}, with a "
                          "negative dimension")
    n = _ITEMSIZE.get(int(tensor.type), 8)
    for d in shape:
        n *= d
        if n > MAX_ARENA_BYTES:
            raise StreamError(f"{owner}: tensor {tensor.name!r} of shape {shape} needs more "
                              f"than MAX_ARENA_BYTES ({MAX_ARENA_BYTES} bytes)")
    return n


class _CpuOperator:
    """One CPU operator of the file as a one-operator model for TFLite Micro's interpreter."""

    def __init__(self, model, index: int):
        """``model``: the file's ``ModelT``; its subgraph and metadata are set for this
        operator while it is packed, then put back."""
        import flatbuffers
        from tflite_micro.python.tflite_micro import runtime
        from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

        g = model.subgraphs[0]
        op = g.operators[index]
        if not 0 <= op.opcodeIndex < len(model.operatorCodes or []):
            raise StreamError(f"operator {index} names operator code {op.opcodeIndex}, but the "
                              f"file has {len(model.operatorCodes or [])}")
        code = model.operatorCodes[op.opcodeIndex]
        self.name = f"{_builtin_name(schema, code)} (operator {index})"
        fixed = _FIXED_INPUTS.get(self.name.split(" ")[0])
        if fixed is not None and len(op.inputs if op.inputs is not None else []) != fixed:
            raise StreamError(f"{self.name} has {len(op.inputs)} inputs; TFLite Micro's kernel "
                              f"reads {fixed}")
        if op.outputs is None or not len(op.outputs):
            raise StreamError(f"{self.name} has no output")
        _check_options(schema, op, self.name)
        n = len(g.tensors or [])
        between = [int(t) for t in (op.intermediates if op.intermediates is not None else [])]
        named = [int(t) for t in list(op.inputs if op.inputs is not None else []) +
                 list(op.outputs if op.outputs is not None else [])]
        used = [t for t in named if t >= 0]
        bad = [t for t in named if not -1 <= t < n]  # -1: an optional input left out
        bad += [t for t in between if not 0 <= t < n]
        if bad:
            raise StreamError(f"{self.name} names tensor(s) {bad}, but the subgraph has {n}")
        nbuf = len(model.buffers or [])
        for t in used + between:
            if not 0 <= g.tensors[t].buffer < nbuf:
                raise StreamError(f"{self.name}: tensor {t} names buffer {g.tensors[t].buffer}, "
                                  f"but the file has {nbuf}")
            if model.buffers[g.tensors[t].buffer].offset or g.tensors[t].sparsity is not None:
                raise StreamError(f"{self.name}: tensor {t} is sparse or kept outside the "
                                  "flatbuffer (a buffer offset), which Vela never writes")

        def held(t: int) -> bool:  # a constant: its bytes are in the file
            b = g.tensors[t].buffer
            return model.buffers[b].data is not None and len(model.buffers[b].data) > 0

        # a variable tensor (an SVDF's or LSTM's state) belongs to the operator, not to the
        # graph: the interpreter keeps it between invocations, as on a board
        self.inputs = list(dict.fromkeys(int(t) for t in op.inputs if t >= 0 and not held(int(t))
                                         and not g.tensors[int(t)].isVariable))
        self.outputs = [int(t) for t in op.outputs]
        sizes = {t: _tensor_bytes(g.tensors[t], self.name) for t in used}
        for t in used:
            _check_tensor(g.tensors[t], t, sizes[t], model.buffers[g.tensors[t].buffer].data
                          if held(t) else None, self.name)
        arena = _ARENA_SLACK + 4 * sum(sizes.values())
        # only the operator's own tensors, renumbered: TFLite Micro plans memory for every
        # tensor of a subgraph, and the file's other tensors include the NPU's arenas
        own = list(dict.fromkeys(used + between))
        new = {t: i for i, t in enumerate(own)}
        kept = (g.tensors, g.operators, g.inputs, g.outputs, op.inputs, op.outputs,
                op.intermediates, model.metadata, model.signatureDefs)
        g.tensors = [g.tensors[t] for t in own]
        op.inputs = [new.get(int(t), -1) for t in op.inputs]
        op.outputs = [new[int(t)] for t in op.outputs]
        op.intermediates = [new[t] for t in between]
        g.operators = [op]
        g.inputs, g.outputs = [new[t] for t in self.inputs], [new[t] for t in self.outputs]
        model.metadata = None  # the arena offsets are the NPU's, not this operator's
        model.signatureDefs = None
        b = flatbuffers.Builder(1024)
        try:
            b.Finish(model.Pack(b), file_identifier=b"TFL3")
        finally:
            (g.tensors, g.operators, g.inputs, g.outputs, op.inputs, op.outputs,
             op.intermediates, model.metadata, model.signatureDefs) = kept
        try:
            self._it = runtime.Interpreter.from_bytes(bytes(b.Output()), arena_size=arena)
        except RuntimeError as exc:
            raise StreamError(f"TFLite Micro refuses {self.name}: {exc}") from None

    @property
    def interpreter(self):
        """TFLite Micro's interpreter of this operator alone (what its allocator reports
        of the operator, for one)."""
        return self._it

    def run(self, values: dict) -> list[np.ndarray]:
        for i, t in enumerate(self.inputs):
            if t not in values:
                raise StreamError(f"{self.name} reads tensor {t}, which no earlier operator "
                                  "writes")
            self._it.set_input(np.asarray(values[t]), i)
        try:
            self._it.invoke()
        except RuntimeError as exc:
            raise StreamError(f"TFLite Micro fails running {self.name}: {exc}") from None
        return [np.asarray(self._it.get_output(i)).copy() for i in range(len(self.outputs))]

    def reset(self) -> None:
        """Forgets the state the operator keeps between invocations."""
        self._it.reset()


def _check_tensor(tensor, t: int, nbytes: int, data, owner: str) -> None:
    """Refuses what TFLite Micro's kernels would read past (they trust the file): constant
    bytes that do not fill the tensor's shape, quantization with a count of scales or zero
    points that fits no axis."""
    if data is not None and len(data) != nbytes:
        raise StreamError(f"{owner}: constant tensor {t} holds {len(data)} bytes, but its "
                          f"shape {list(tensor.shape if tensor.shape is not None else [])} "
                          f"needs {nbytes}")
    q = tensor.quantization
    if q is None:
        return
    shape = list(tensor.shape if tensor.shape is not None else [])
    scales = 0 if q.scale is None else len(q.scale)
    zeros = 0 if q.zeroPoint is None else len(q.zeroPoint)
    axis = int(q.quantizedDimension)
    if scales > 1 or zeros > 1:
        if not 0 <= axis < len(shape) or max(scales, zeros) != shape[axis] \
                or min(scales, zeros) not in (0, 1, shape[axis]):
            raise StreamError(f"{owner}: tensor {t} has {scales} scale(s) and {zeros} zero "
                              f"point(s) along axis {axis} of shape {shape}")


def _normal(name: str) -> str:
    return name.replace("_", "").lower()


def _check_options(schema, op, owner: str) -> None:
    """Refuses options of another operator's kind (TFLite Micro's kernels read them as their
    own; none at all gets the defaults) and an SVDF of rank 0 (its kernel divides by the
    rank)."""
    kinds = {v: k for k, v in vars(schema.BuiltinOptions).items() if not k.startswith("_")}
    kind = _normal(owner.split(" ")[0])
    own = [v for v, k in kinds.items() if _normal(k) == kind + "options"]
    got = int(op.builtinOptionsType)
    if own and got not in (own[0], schema.BuiltinOptions.NONE):
        raise StreamError(f"{owner} carries {kinds.get(got, got)} options, not "
                          f"{kinds[own[0]]}")
    if kind == "svdf" and op.builtinOptions is not None and op.builtinOptions.rank < 1:
        raise StreamError(f"{owner} has rank {op.builtinOptions.rank}; an SVDF's is at least 1")


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


def run_vela_model(data: bytes, inputs: list[np.ndarray], accelerator: str
                   ) -> tuple[list[np.ndarray], StreamStats]:
    """Runs a Vela-layout ``.tflite``: its ``ethos-u`` operators on the functional model, the
    operators left on the CPU through TFLite Micro's interpreter.
    Returns the graph's outputs and what the streams did together."""
    return TfliteGraph(data, accelerator).run(inputs)
