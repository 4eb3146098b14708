"""Running an :class:`EthosUPayload` on the functional model (``ethosu_stream``): the regions
laid out as the Ethos-U driver maps them, the inputs at their arena offsets."""

from __future__ import annotations

import numpy as np

from tvm_ethos.backends.ethos_u.payload import EthosUPayload


def run_payload(payload: EthosUPayload, inputs, trace=None, *,
                compute: bool = True, spans: dict | None = None
                ) -> tuple[list[np.ndarray], object]:
    """(outputs in ``payload.outputs`` order, the run's ``StreamStats``); ``trace`` and
    ``compute`` as ``ethosu_stream.run_stream`` takes them (``compute=False``: a dry run, the
    same statistics without computing the outputs, which are then meaningless); ``spans``:
    a dict that receives the byte span of every write, by region (``Memory.spans``)."""
    # lazy: the functional model loads when a stream runs; this module loads with the ethos-u
    # plugin (payload_format) at every tvmc start
    from ethosu_stream import Memory, run_stream
    from ethosu_stream.accelerator import accelerator_info
    from ethosu_stream.memory import SHRAM_REGION
    from ethosu_stream.tflite_custom_op import (
        FLASH_REGION,
        SCRATCH_FAST_REGION,
        SCRATCH_REGION,
        command_words,
    )

    if len(inputs) != len(payload.inputs):
        raise ValueError(
            f"the NPU subgraph takes {len(payload.inputs)} input(s), got {len(inputs)}"
        )
    mem = Memory(
        {
            FLASH_REGION: payload.flash,
            SCRATCH_REGION: payload.scratch_bytes,
            SCRATCH_FAST_REGION: max(payload.fast_scratch_bytes, 1),
            SHRAM_REGION: accelerator_info(payload.accelerator).shram_bytes,
        }
    )
    mem.spans = spans
    arena = mem.regions[SCRATCH_REGION]
    for spec, x in zip(payload.inputs, inputs):
        x = np.ascontiguousarray(x)
        if str(x.dtype) != spec.dtype or x.size != int(np.prod(spec.shape)):
            raise ValueError(
                f"input {spec.name!r} must be {spec.dtype} with shape {spec.shape}, "
                f"got {x.dtype} {x.shape}"
            )
        raw = x.reshape(-1).view(np.uint8)
        arena[spec.offset : spec.offset + raw.size] = raw
    stats = run_stream(command_words(payload.driver_payload), mem, payload.accelerator, trace,
                       compute=compute)
    outs = []
    for spec in payload.outputs:
        n = int(np.prod(spec.shape)) * np.dtype(spec.dtype).itemsize
        outs.append(
            arena[spec.offset : spec.offset + n].copy().view(spec.dtype).reshape(spec.shape)
        )
    return outs, stats


def arena_writes(payload: EthosUPayload) -> tuple[tuple[int, int], ...]:
    """The [lo, hi) byte spans of the arena (region 1) the stream writes, merged and in
    order: a dry run, since which bytes an operation writes follows from its registers
    alone. What lies outside them (an input read again after the operator) the stream leaves
    as it found it."""
    spans: dict = {}
    run_payload(payload, [np.zeros(a.shape, a.dtype) for a in payload.inputs],
                compute=False, spans=spans)
    merged: list[list[int]] = []
    for lo, hi in sorted(spans.get(1, ())):
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)


def stream_report(payload: EthosUPayload, planned_peak: int | None) -> dict:
    """What the stream does on the functional model, beside the plan's predicted peak, as the
    plan report keeps it (JSON values): the highest byte touched in the arena (region 1), the
    fast scratch (region 2) and the one of them that holds the plan's SRAM (``sram_region``),
    and how many operations run the planner's block (``block_configs``). A dry run: the
    statistics (commands, MACs, DMA bytes, the high-water marks) follow from the registers
    alone, so nothing is computed."""
    zeros = [np.zeros(a.shape, a.dtype) for a in payload.inputs]
    _outs, stats = run_payload(payload, zeros, compute=False)
    return {
        "generated": True,
        "schedule": payload.schedule,
        "command_stream_bytes": len(payload.driver_payload),
        "flash_bytes": len(payload.flash),
        "scratch_high_water_bytes": int(stats.high_water.get(1, 0)),
        "fast_scratch_bytes": payload.fast_scratch_bytes,
        "fast_scratch_high_water_bytes": int(stats.high_water.get(2, 0)),
        "sram_region": payload.sram_region,
        "sram_high_water_bytes": int(stats.high_water.get(payload.sram_region, 0)),
        "work_bytes": payload.work_bytes,
        "untouched_top_bytes": payload.untouched_top_bytes,
        "weight_dma_bytes": payload.weight_dma_bytes,
        "weights_left_in_flash_bytes": payload.weights_left_in_flash,
        "planned_peak_bytes": planned_peak,
        "macs": int(stats.macs),
        "dma_bytes": {f"{s}->{d}": int(n) for (s, d), n in stats.dma_bytes.items()},
        "commands": {k: int(v) for k, v in stats.commands.items()},
        "block_configs": dict(payload.block_configs),
    }
