"""What one Ethos-U NPU subgraph hands the device: the value the command-stream generator makes
and the TFLite Micro exporter writes.

It mirrors the inputs of Vela's ``ethos-u`` custom operator (the driver payload, the read-only
flash buffer, the scratch arena and the fast scratch), so an exporter only has to lay it out,
and the functional model in ``ethosu_stream`` can run it without knowing who made it.
"""
from __future__ import annotations

from dataclasses import dataclass

from ethos_arch.accelerators import Family


@dataclass(frozen=True)
class ArenaTensor:
    """Where one subgraph input or output lives in the scratch arena.

    Invariants: ``offset + size(shape, dtype) <= EthosUPayload.scratch_bytes``; ``name`` is the
    Relax/TFLite tensor name the subgraph boundary had.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    offset: int


@dataclass(frozen=True)
class EthosUPayload:
    """One NPU subgraph's command stream and memory, as TFLite Micro's Ethos-U kernel wants it.

    Invariants: ``driver_payload`` is what ``npu_create_driver_payload`` returns (``COP1``
    header, whole 32-bit words); region 0 is ``flash`` (weights, biases, LUTs: read-only),
    region 1 the scratch arena of ``scratch_bytes`` (inputs, outputs, and on an Ethos-U55 every
    intermediate), region 2 the fast scratch of ``fast_scratch_bytes`` (the planner's SRAM
    on an Ethos-U65, every buffer of the plan; 0 on an Ethos-U55, where the arena itself is
    SRAM, and for a layer-by-layer stream, which has no plan). ``inputs``/``outputs`` are in
    the subgraph's parameter/result order. ``work_bytes`` is arena the stream needs beyond
    the plan's tensors: the intermediates of operators lowered to several NPU operations
    (SOFTMAX, an int16 LEAKY_RELU, a TRANSPOSE of several rotations), which a planned
    stream places in the blocks their Plans hold (``planner.work_memory``). ``schedule`` is
    ``"plan"`` for a stream that executes the planner's Proposal (stripes, rings, its arena
    layout within the plan's peak), ``"plan, SOFTMAX beyond its memory"`` (naming the
    operators) when those intermediates did not fit in it, ``"layer by layer"`` for one
    operation per operator (an unplanned subgraph).
    """

    accelerator: str
    driver_payload: bytes
    flash: bytes
    scratch_bytes: int
    fast_scratch_bytes: int
    inputs: tuple[ArenaTensor, ...]
    outputs: tuple[ArenaTensor, ...]
    work_bytes: int = 0
    schedule: str = "layer by layer"
    #: reserved bytes at the top of a planned arena that the stream never touches (the plan's
    #: weight buffers, where no layout puts a feature map highest; 0 on every shipped model)
    untouched_top_bytes: int = 0
    #: encoded weight and bias/scale bytes the stream DMAs from flash into the plan's weight
    #: blocks, and the encoded bytes of copied Parts that found no room there (read in place)
    weight_dma_bytes: int = 0
    weights_left_in_flash: int = 0
    #: (why, operations) pairs: how many operations run the block the planner's performance
    #: model costed them with and how many fall back to Vela's (``npu_ops.chosen_block``);
    #: empty for a layer-by-layer stream (every block Vela's)
    block_configs: tuple[tuple[str, int], ...] = ()

    @property
    def sram_region(self) -> int:
        """The region holding what the plan puts in SRAM: the fast scratch (2) where there
        is one (a planned Ethos-U65 stream, even one whose plan keeps nothing in SRAM), else
        the arena (1)."""
        planned_u65 = self.schedule != "layer by layer" and \
            self.accelerator.startswith(Family.ETHOS_U65.value)
        return 2 if self.fast_scratch_bytes or planned_u65 else 1
