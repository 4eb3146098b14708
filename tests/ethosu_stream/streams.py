"""Hand-built command streams for the tests: words from names, so a test reads as the stream
it builds."""
from __future__ import annotations

from ethosu.vela.ethos_u55_regs.ethos_u55_regs import cmd0, cmd1


def c0(name: str, param: int = 0) -> list[int]:
    return [getattr(cmd0, name).value | ((param & 0xFFFF) << 16)]


def c1(name: str, payload: int, param: int = 0) -> list[int]:
    return [getattr(cmd1, name).value | 0x4000 | ((param & 0xFFFF) << 16), payload & 0xFFFFFFFF]


def stop() -> list[int]:
    return c0("NPU_OP_STOP", 0xFFFF)


def dma(src_region: int, src: int, dst_region: int, dst: int, length: int) -> list[int]:
    return (c0("NPU_SET_DMA0_SRC_REGION", src_region) + c1("NPU_SET_DMA0_SRC", src)
            + c0("NPU_SET_DMA0_DST_REGION", dst_region) + c1("NPU_SET_DMA0_DST", dst)
            + c1("NPU_SET_DMA0_LEN", length) + c0("NPU_OP_DMA_START"))
