"""DMA: a one-dimensional copy between regions (Vela emits only that mode)."""
from __future__ import annotations

from .errors import StreamError
from .memory import Memory
from .registers import RegisterState


def run_dma(mem: Memory, state: RegisterState, param: int) -> tuple[int, int, int]:
    """Copies DMA0_LEN bytes; returns (source region, destination region, bytes)."""
    if param & 0xF:
        raise StreamError(f"DMA mode {param & 0xF} is not modelled (only 1-D copies, mode 0)")
    # a base-pointer index, or 0x103 (bit 8 set) for the NPU's internal SHRAM (LUTs)
    src_region = state.param("DMA0_SRC_REGION")
    dst_region = state.param("DMA0_DST_REGION")
    length = state.address("DMA0_LEN")
    data = mem.read_bytes(src_region, state.address("DMA0_SRC"), length, "the DMA source")
    mem.write_bytes(dst_region, state.address("DMA0_DST"), data, "the DMA destination",
                    length=max(length, 0))
    return src_region, dst_region, length
