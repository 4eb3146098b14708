"""A model cut before its final int8 SOFTMAX, for the TFLite Micro oracle.

TFLite Micro's reference int8 SOFTMAX aborts the process (``TFLITE_CHECK(0 <= exponent &&
exponent <= 31)`` in ``reference_ops::Softmax``) on a row whose Q12.19 sum of exponentials
reaches 512: the output shift ``num_bits_over_unit + 23`` is then 32 or more. Only a row of
at least 512 values can get there (each exponential is at most 1), as MobileNetV1-224's 1000
logits do. There TFLite Micro runs the network up to the logits (the model this module cuts)
and its own integer SOFTMAX algorithm, stated in numpy by ``fixed_point.softmax_8bit`` and
checked against TFLite Micro on every row where it runs, gives the last step (rfcs/0002).
"""
from __future__ import annotations

import select
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import flatbuffers
import numpy as np
from tflite_micro.python.tflite_micro import runtime
from tflite_micro.tensorflow.lite.micro.python import schema_py_generated as schema

from tvm_ethos.compute.fixed_point import (
    SUM_INTEGER_BITS,
    exp_table,
    rdbpot,
    reciprocal,
    softmax_8bit,
)

#: the shortest row on which TFLite Micro's check can fire: a Q12.19 sum of 512 is 2**28
ABORTING_ROW = 512


class SoftmaxTail(NamedTuple):
    """The quantization of a model's final SOFTMAX: what its integer algorithm depends on."""

    in_scale: float
    beta: float
    row: int


class LogitsSplit(NamedTuple):
    """A model as the network up to its final SOFTMAX's input (``logits``, a ``.tflite``)
    and that SOFTMAX."""

    logits: bytes
    softmax: SoftmaxTail

    def finish(self, logits: np.ndarray) -> np.ndarray:
        """The model's output from the logits' values: TFLite Micro's integer SOFTMAX."""
        return softmax_8bit(logits, self.softmax.in_scale, self.softmax.beta, "int8")


def _builtin(model, op) -> int:
    code = model.operatorCodes[op.opcodeIndex]
    return max(code.builtinCode, code.deprecatedBuiltinCode)


def final_softmax(data: bytes) -> SoftmaxTail | None:
    """The final operator of ``data``'s main subgraph when it is an int8 SOFTMAX giving the
    model's only output, else None."""
    model = schema.ModelT.InitFromPackedBuf(bytes(data), 0)
    sg = model.subgraphs[0]
    if not sg.operators or len(sg.outputs) != 1:
        return None
    op = sg.operators[-1]
    if _builtin(model, op) != schema.BuiltinOperator.SOFTMAX or op.outputs[0] != sg.outputs[0]:
        return None
    x, y = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
    if x.type != schema.TensorType.INT8 or y.type != schema.TensorType.INT8:
        return None
    return SoftmaxTail(float(x.quantization.scale[0]), float(op.builtinOptions.beta),
                       int(x.shape[-1]))


@lru_cache(maxsize=4)
def split_before_softmax(data: bytes) -> LogitsSplit:
    """``data`` as the network up to its final int8 SOFTMAX (whose input becomes the output)
    and that SOFTMAX's parameters. A model without such an ending cannot be split."""
    tail = final_softmax(data)
    if tail is None:
        raise ValueError("the model does not end in an int8 SOFTMAX giving its only output: "
                         "there is nothing to split off; run TFLite Micro on the whole model")
    model = schema.ModelT.InitFromPackedBuf(bytes(data), 0)
    sg = model.subgraphs[0]
    last = sg.operators.pop()
    sg.outputs = [last.inputs[0]]
    b = flatbuffers.Builder(len(data) + 4096)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return LogitsSplit(bytes(b.Output()), tail)


def needs_split(data: bytes) -> bool:
    """Whether TFLite Micro's reference SOFTMAX can abort on ``data``'s final operator: an
    int8 SOFTMAX over a row of :data:`ABORTING_ROW` values or more."""
    tail = final_softmax(data)
    return tail is not None and tail.row >= ABORTING_ROW


def tflm_aborts_on(row: np.ndarray, in_scale: float, beta: float) -> bool:
    """Whether TFLite Micro's reference int8 SOFTMAX aborts on ``row``: its output shift
    (``num_bits_over_unit + 23``, from the Q12.19 sum of exponentials) is above 31."""
    row = np.asarray(row, np.int64).ravel()
    table = exp_table(in_scale, beta).astype(np.int64)
    total = sum(rdbpot(int(v), SUM_INTEGER_BITS) for v in table[row - row.max() + 255])
    return reciprocal(total)[1] > 31


def tflm_isolated(data: bytes, rows: list[np.ndarray], timeout: float = 120.0
                  ) -> list[np.ndarray | None]:
    """TFLite Micro's int8 output for each of ``rows`` (inputs of a one-input, one-output
    model), each invoked in a worker process so that an abort costs only the worker: None
    where the worker died or gave nothing within ``timeout`` seconds."""
    root = Path(__file__).resolve().parents[2]
    out: list[np.ndarray | None] = []
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "model.tflite").write_bytes(bytes(data))
        np.save(Path(tmp, "rows.npy"), np.stack([np.asarray(r, np.int8) for r in rows]))
        while len(out) < len(rows):
            proc = subprocess.Popen(
                [sys.executable, "-m", "tests.helpers.tflite_split", tmp, str(len(out))],
                cwd=root, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            while len(out) < len(rows):
                line = "-"
                while line and not line.startswith("R "):   # skipping TFLite Micro's logs
                    ready, _, _ = select.select([proc.stdout], [], [], timeout)
                    line = proc.stdout.readline() if ready else ""
                if not line:
                    out.append(None)
                    break
                out.append(np.frombuffer(bytes.fromhex(line[2:].strip()), np.int8))
            proc.kill()
            proc.stdout.close()
            proc.wait()
    return out


def _worker(folder: str, start: int) -> None:
    data = Path(folder, "model.tflite").read_bytes()
    rows = np.load(Path(folder, "rows.npy"))
    it = runtime.Interpreter.from_bytes(data)
    for row in rows[start:]:
        it.set_input(row, 0)
        it.invoke()
        sys.stdout.write("R " + np.asarray(it.get_output(0), np.int8).tobytes().hex() + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]))
