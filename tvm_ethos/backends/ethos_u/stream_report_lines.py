"""The plan table's lines about an Ethos-U command stream: what it did on the functional model
beside what the plan predicted (``EthosUBackend.stream_report_lines``)."""
from __future__ import annotations

from tvm_ethos.backends.npu_common import no_stream_lines

#: region numbers of a stream's DMA, as the report names them (``ethosu_stream.memory``)
_REGION_NAMES = {0: "flash", 1: "scratch", 2: "scratch_fast", (1 << 8) | 3: "LUT"}
_OP_NAMES = {"NPU_OP_CONV": "conv", "NPU_OP_DEPTHWISE": "depthwise", "NPU_OP_POOL": "pool",
             "NPU_OP_ELEMENTWISE": "elementwise"}


def stream_report_lines(entry: dict) -> list[str]:
    """What a subgraph's command stream did on the functional model, beside the plan: the
    figures a board would show (stream and constant sizes, operations, DMA, MACs), so a user
    reads them without opening the JSON report."""
    if not entry.get("generated"):
        return no_stream_lines(entry)
    ops = entry.get("commands", {})
    kinds = ", ".join(f"{name} {ops[k]:,}" for k, name in _OP_NAMES.items() if ops.get(k))
    n = sum(ops.get(k, 0) for k in _OP_NAMES)
    dmas = ops.get("NPU_OP_DMA_START", 0)

    def region(r: str) -> str:
        return _REGION_NAMES.get(int(r), f"region {r}")

    dma = "; ".join(f"{region(a)}->{region(b)} {v:,} B"
                    for a, b, v in sorted((*k.split("->"), v)
                                          for k, v in entry.get("dma_bytes", {}).items()))
    touched = entry.get("sram_high_water_bytes", entry["scratch_high_water_bytes"])
    peak = entry.get("planned_peak_bytes")
    where = _REGION_NAMES[entry.get("sram_region", 1)]
    vs = ""
    if peak is not None:
        vs = " = the plan's peak" if touched + (entry.get("untouched_top_bytes") or 0) == peak \
            else f" (the plan's peak: {peak:,} B)"
    form = entry.get("schedule", "layer by layer").replace("plan", "the plan's stripes", 1)
    lines = [f"   command stream ({form}): "
             f"{entry['command_stream_bytes']:,} B, {n:,} NPU operations ({kinds}) and "
             f"{dmas:,} DMA{'s' if dmas != 1 else ''}; "
             f"flash {entry['flash_bytes']:,} B (encoded weights, biases, LUTs)",
             f"   on the functional model: {where} touched {touched:,} B{vs}; "
             f"DMA {dma or 'none'}; {entry['macs']:,} MACs"]
    blocks = entry.get("block_configs") or {}
    if blocks:
        lines.append("   block configs: " + "; ".join(f"{why} {n:,}"
                                                     for why, n in sorted(blocks.items())))
    return lines
