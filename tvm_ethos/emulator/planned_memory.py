"""What a Proposal allocates, as the emulator's scheduled TIR must allocate it: the Plans'
SRAM buffers and the tensors between Plans, and one accumulator element per internal
stage of each Part in ``local``. No TVM: a compile that schedules no TIR (a ``.tflite``
output, with or without TVM) reports these figures, and ``schedule.measure`` checks the
scheduled TIR against them."""
from __future__ import annotations

from collections.abc import Iterable

from tvm_ethos.errors import CompileError

SRAM_SCOPE = "global.npu_sram"
ACC_SCOPE = "local"
DTYPE_BYTES = {"int8": 1, "uint8": 1, "int16": 2, "int32": 4, "int64": 8, "float32": 4}


class MemoryMismatchError(CompileError):
    """The scheduled TIR allocates other bytes than the Plan predicts."""


def planned_bytes(match, proposal) -> dict:
    """What the Proposal predicts the scheduled TIR allocates, per scope: the Plans' buffers
    (intermediates, weight copies) and the tensors between Plans in SRAM; one accumulator
    element per reduction stage in ``local``. ``match``: its ``graph`` and ``parts`` (each
    with the ``stages`` inside its Part, which have a ``dtype``)."""
    outputs = {t.name for t in match.graph.outputs}
    sram = sum(p.memory_bytes for p in proposal.plans)
    for plan in proposal.plans:
        out = plan.output
        if out not in outputs:
            sram += match.graph.tensor(out).bytes
    local = sum(_stage_bytes(mp.stages) for mp in match.parts)
    res = {}
    if sram:
        res[SRAM_SCOPE] = sram
    if local:
        res[ACC_SCOPE] = local
    return res


def _stage_bytes(stages: Iterable) -> int:
    return sum(DTYPE_BYTES.get(str(s.dtype), 4) for s in stages)
