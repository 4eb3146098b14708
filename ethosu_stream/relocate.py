"""Moving a command stream's data: every address it uses in a region, shifted by one offset.

A TFLite Micro model with several ``ethos-u`` operators gives them one flash tensor and one
scratch arena, so a stream generated with its constants and feature maps at offset 0 must
address them where the model places them. The stream is rewritten rather than regenerated:
an address register's meaning depends on the region register in force when an operation
starts, and a stream leaves registers unchanged between operations (an unused tile's base
may be a leftover of another region), so a written value cannot be shifted in place. Instead
the original address writes are dropped and, before each operation, the addresses that
operation reads are written again, shifted by the offset of the region in force then. The
result runs the same operations on the same data at the new places; only address writes
differ.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .errors import StreamError
from .registers import Command, RegisterState, decode_stream
from .vela_defs import regs

_FM_BASES = {prefix: tuple(f"{prefix}_BASE{i}" for i in range(4))
             for prefix in ("IFM", "IFM2", "OFM")}
#: (address register, the register naming its region) each operation kind reads
_ADDRESSES = {
    "NPU_OP_CONV": ("IFM", "OFM", "WEIGHTS"),
    "NPU_OP_DEPTHWISE": ("IFM", "OFM", "WEIGHTS"),
    "NPU_OP_POOL": ("IFM", "OFM"),
    "NPU_OP_ELEMENTWISE": ("IFM", "IFM2", "OFM"),
    "NPU_OP_DMA_START": ("DMA",),
}
_GROUPS = {
    **{p: tuple((b, f"{p}_REGION") for b in bases) for p, bases in _FM_BASES.items()},
    "WEIGHTS": (("WEIGHT_BASE", "WEIGHT_REGION"), ("WEIGHT1_BASE", "WEIGHT_REGION"),
                ("SCALE_BASE", "SCALE_REGION"), ("SCALE1_BASE", "SCALE_REGION")),
    "DMA": (("DMA0_SRC", "DMA0_SRC_REGION"), ("DMA0_DST", "DMA0_DST_REGION")),
}
ADDRESS_REGISTERS = frozenset(reg for group in _GROUPS.values() for reg, _ in group)
_MODE_CMD1 = 1 << 14
_ADDRESS_LIMIT = 1 << 40


def relocate(words, offsets: Mapping[int, int]) -> np.ndarray:
    """``words`` (a command stream) with every address in region ``r`` moved by
    ``offsets[r]`` bytes (regions not named stay). Raises :class:`StreamError` naming the
    command where a moved address would leave the 40-bit address space."""
    opcode = {e.name: e.value for e in regs().cmd1}
    state = RegisterState()
    written: dict[str, int] = {}
    out: list[int] = []
    for cmd in decode_stream(words):
        name = cmd.name[len("NPU_SET_"):] if cmd.name.startswith("NPU_SET_") else None
        if name in ADDRESS_REGISTERS:
            state.apply(cmd)
            continue
        if name is not None:
            state.apply(cmd)
        elif cmd.name in _ADDRESSES:
            for group in _ADDRESSES[cmd.name]:
                for reg, region_reg in _GROUPS[group]:
                    if not state.has(reg):
                        continue
                    value = state.address(reg) + int(offsets.get(state.param(region_reg), 0))
                    if not 0 <= value < _ADDRESS_LIMIT:
                        raise StreamError(f"{reg} moved to {value}, outside the 40-bit "
                                          "address space", cmd.index, cmd.name)
                    if written.get(reg) != value:
                        out += _address_write(opcode[f"NPU_SET_{reg}"], state.param(reg),
                                              value)
                        written[reg] = value
        out += _words(cmd)
    return np.asarray(out, np.uint32)


def _address_write(opcode: int, param: int, value: int) -> list[int]:
    """A cmd1 address write: bits 32-39 in the parameter's low byte, the rest of the
    parameter as it was."""
    param = (param & ~0xFF) | (value >> 32)
    return [opcode | _MODE_CMD1 | (param << 16), value & 0xFFFFFFFF]


def _words(cmd: Command) -> list[int]:
    first = cmd.opcode | (_MODE_CMD1 if cmd.is_cmd1 else 0) | (cmd.param << 16)
    return [first, cmd.payload] if cmd.is_cmd1 else [first]
