"""The arena a TFLite Micro application gives an Ethos-U ``.tflite`` in all: the ``ethos-u``
operators' arena the file lays out (their scratch stretches and the tensors they read and
write, which TFLite Micro places where the file's offline plan says), plus what TFLite
Micro's own planner needs for the operators left on the CPU. Vela's "Total SRAM used" counts
only the first; a file whose SVDFs stay on the CPU (Vela's) keeps their states and their
int32 scratch in the second.

The CPU part follows one rule, the same for every file: each CPU operator is given to
TFLite Micro's interpreter alone (``TfliteGraph``'s one-operator models) and its recording
allocator says what it plans: the operator's variable tensors (persistent: an SVDF's state,
kept from one invocation to the next, so summed over the operators) and the "head" (its
input and output tensors and the scratch buffers its kernel asks for, all live at once).
Of the head, the bytes of tensors an ``ethos-u`` operator also reads or writes are taken
off (they lie in the ethos-u operators' arena already); the largest rest over the CPU
operators is added (TFLite Micro reuses that memory from one operator to the next). Left
out on both sides: TFLite Micro's bookkeeping (its tensor and node structures, which grow
with the operators and tensors of the file) and any overlap TFLite Micro's planner finds
between the CPU operators' tensors and the ethos-u operators' arena.
"""
from __future__ import annotations

import os
import re
import tempfile
from typing import NamedTuple

import numpy as np

from ethosu_stream.tflite_custom_op import EthosUOp
from ethosu_stream.tflite_graph import TfliteGraph

_HEAD = re.compile(r"Arena allocation head (\d+) bytes")
_VARIABLES = re.compile(r"'TfLiteTensor variable buffer data' used (\d+) bytes")


class TflmArena(NamedTuple):
    """Bytes of one file's TFLite Micro arena: ``npu`` the ethos-u operators' arena,
    ``states`` the CPU operators' variable tensors, ``cpu`` the largest CPU operator's
    tensors and scratch outside the ethos-u operators' arena."""

    npu: int
    states: int
    cpu: int

    @property
    def total(self) -> int:
        return self.npu + self.states + self.cpu


class _Planned(NamedTuple):
    head: int
    variables: int


def tflm_arena(graph: TfliteGraph) -> TflmArena:
    """``graph``'s arena by the rule of this module's docstring."""
    npu = [s for s in graph.steps if isinstance(s, EthosUOp)]
    held: dict[int, int] = {}   # tensor -> bytes, for every tensor an ethos-u operator holds
    arena = 0
    for op in npu:
        for slot in op.inputs + op.outputs:
            n = int(np.prod(slot.shape)) * slot.dtype.itemsize
            held[slot.index] = n
            arena = max(arena, slot.arena_offset + n)
        arena = max(arena, op.scratch_bytes)
    states = cpu = 0
    for step in graph.steps:
        if isinstance(step, EthosUOp):
            continue
        planned = _planned(step.interpreter)
        states += planned.variables
        shared = sum(held.get(t, 0) for t in dict.fromkeys(step.inputs + step.outputs))
        cpu = max(cpu, planned.head - shared)
    return TflmArena(arena, states, max(cpu, 0))


def _planned(interpreter) -> _Planned:
    """What TFLite Micro's recording allocator reports for ``interpreter``'s model (it
    prints to the process's stderr, so that is read from a temporary file)."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 2)
        try:
            interpreter.print_allocations()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        f.seek(0)
        text = f.read().decode(errors="replace")
    head, variables = _HEAD.search(text), _VARIABLES.search(text)
    if head is None:
        raise RuntimeError(f"TFLite Micro's allocator report has no arena head: {text[:200]!r}")
    return _Planned(int(head.group(1)), int(variables.group(1)) if variables else 0)
