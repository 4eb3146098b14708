"""``tvmc run`` on a ``.tflite`` with ``ethos-u`` operators (tvm-ethos's or Vela's): the
streams on the functional Ethos-U model, the operators left on the host through the
interpreter ``ethosu_stream.tflite_graph`` uses, as TFLite Micro runs the file on a board.

Which Ethos-U runs it: ``--accelerator-config``, else the one the file's driver payload names
(its config word: the product, U55 or U65, and the MACs per cycle), else an error asking for
the flag. TVM is not imported.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import tflite

from ethosu_stream.accelerator import ACCELERATORS as MODELLED
from ethosu_stream.tflite_custom_op import CUSTOM_CODE, payload_accelerator
from ethosu_stream.tflite_graph import TfliteGraph
from tvm_ethos.cli import CliError
from tvm_ethos.vela_options import vela_installed

#: TFLite's file identifier, at bytes 4..8 of every flatbuffer model.
TFLITE_MAGIC = b"TFL3"
_DTYPES = {9: "int8", 3: "uint8", 7: "int16", 2: "int32", 0: "float32", 4: "int64"}


class Spec(NamedTuple):
    name: str
    shape: tuple
    dtype: str


def is_tflite(path: str) -> bool:
    """Whether ``path`` holds a TFLite flatbuffer (whatever its name)."""
    with open(path, "rb") as f:
        head = f.read(8)
    return head[4:8] == TFLITE_MAGIC


def has_ethos_u(data: bytes) -> bool:
    """Whether the model has an ``ethos-u`` custom operator."""
    model = tflite.Model.GetRootAsModel(data, 0)
    return any(model.OperatorCodes(i).CustomCode() == CUSTOM_CODE
               for i in range(model.OperatorCodesLength()))


def inputs_of(data: bytes) -> list[Spec]:
    """The model's inputs (name, shape, dtype), in order."""
    g = tflite.Model.GetRootAsModel(data, 0).Subgraphs(0)
    out = []
    for t in g.InputsAsNumpy().tolist():
        tens = g.Tensors(t)
        out.append(Spec(tens.Name().decode(), tuple(int(d) for d in tens.ShapeAsNumpy()),
                        _DTYPES.get(tens.Type(), str(tens.Type()))))
    return out


class TfliteRun(NamedTuple):
    """One inference: the outputs and what ran where (the streams' stats: emulated)."""

    outputs: list
    accelerator: str
    npu_operators: int
    cpu_operators: int
    stats: object


class Prepared(NamedTuple):
    """A ``.tflite`` ready to run: its graph, the Ethos-U running it and its inputs."""

    graph: TfliteGraph
    accelerator: str
    inputs: list[Spec]


def prepare(data: bytes, path: str, accelerator: str | None) -> Prepared:
    """The file ready to run; a CliError naming what is wrong otherwise."""
    try:
        ethos_u, found, specs = has_ethos_u(data), payload_accelerator(data), inputs_of(data)
    except Exception as err:   # a damaged flatbuffer fails anywhere in the generated readers
        raise CliError(f"{path} is not a readable TFLite model ({type(err).__name__}: "
                       f"{' '.join(str(err).split())})") from None
    if not ethos_u:
        raise CliError(f"{path} has no ethos-u operator: compile it first, e.g. tvmc compile "
                       f"{path} --target ethos-u,llvm -o model.tflite (or with Vela)")
    if accelerator is None:
        accelerator = found
    if accelerator is None:
        raise CliError(f"{path}: the file does not say which Ethos-U it was compiled for; give "
                       "--accelerator-config, e.g. ethos-u55-128")
    if accelerator not in MODELLED:
        raise CliError(f"--accelerator-config {accelerator!r}: the functional model runs "
                       f"{', '.join(sorted(MODELLED))}")
    if found is not None and found != accelerator:
        raise CliError(f"{path} was compiled for {found}, not {accelerator}: drop "
                       "--accelerator-config or give the file's")
    if not vela_installed():
        raise CliError(f"running {path}'s ethos-u operators needs Vela's register definitions:"
                       " pip install 'tvm-ethos[vela]'")
    try:
        graph = TfliteGraph(data, accelerator)
    except ValueError as err:
        raise CliError(f"{path}: cannot run it: {' '.join(str(err).split())}") from None
    except ImportError as err:   # host operators run through LiteRT's interpreter
        raise CliError(f"{path} has host operators, and the interpreter that runs them is not "
                       f"installed (no module {err.name!r})") from None
    return Prepared(graph, accelerator, specs)


def run(prepared: Prepared, xs: list[np.ndarray]) -> TfliteRun:
    """One inference on the prepared file (a CliError naming the operator the interpreter or
    the functional model could not run)."""
    try:
        outs, stats = prepared.graph.run(list(xs))
    except (ValueError, RuntimeError) as err:   # StreamError is a ValueError
        raise CliError(f"cannot run the .tflite: {' '.join(str(err).split())}") from None
    cpu = len(prepared.graph.cpu_operators)
    return TfliteRun(list(outs), prepared.accelerator, len(prepared.graph.steps) - cpu, cpu,
                     stats)


def note(r: TfliteRun) -> str:
    """The line saying what ran where, and that the NPU was emulated."""
    return (f"ran the .tflite: {r.npu_operators} ethos-u operator"
            f"{'s' if r.npu_operators != 1 else ''} emulated on the functional {r.accelerator} "
            f"model (bit-exact command-stream execution; no NPU here), {r.cpu_operators} host "
            f"operator{'s' if r.cpu_operators != 1 else ''} through the TFLite interpreter")
