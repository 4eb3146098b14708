"""Decoding the 32-bit command words and keeping the register state they set.

Word layout (Vela's ``CommandStreamEmitter``): bits 0-9 opcode, bits 14-15 the payload mode
(0: cmd0, the 16-bit parameter in bits 16-31 is the whole value; 1: cmd1, one more 32-bit
word follows), bits 10-13 zero. Address registers (cmd1) carry bits 32-39 in the parameter,
which is how Ethos-U65's 40-bit addresses fit.
"""
from __future__ import annotations

import functools
from typing import Iterable, NamedTuple, Sequence

import numpy as np

from .errors import StreamError
from .vela_defs import regs


class Command(NamedTuple):
    """One decoded command: ``index`` counts commands, ``word`` is its first word's offset.
    (A named tuple: a long stream decodes into tens of thousands of them.)"""

    index: int
    word: int
    name: str
    opcode: int
    is_cmd1: bool
    param: int
    payload: int | None = None

    @property
    def is_operation(self) -> bool:
        return self.name.startswith("NPU_OP_")


@functools.lru_cache(maxsize=None)
def opcode_tables() -> tuple[dict[int, str], dict[int, str]]:
    """(cmd0 opcode -> name, cmd1 opcode -> name) from Vela's register definitions."""
    r = regs()
    return ({e.value: e.name for e in r.cmd0}, {e.value: e.name for e in r.cmd1})


def decode_stream(words: Sequence[int] | Iterable[int]) -> list[Command]:
    """Split ``words`` into commands. The stream must end with ``NPU_OP_STOP``; an unknown
    opcode, a set reserved bit, a cmd1 without its payload word, a stream that stops short of
    ``NPU_OP_STOP`` or words after it raise :class:`StreamError` naming the command."""
    if isinstance(words, np.ndarray) and words.dtype.kind in "iu":
        words = words.tolist()
    else:
        words = [int(w) for w in words]
    cmd0_names, cmd1_names = opcode_tables()
    out: list[Command] = []
    append = out.append
    n = len(words)
    i = 0
    while i < n:
        w = words[i]
        index = len(out)
        if not 0 <= w < 1 << 32:
            raise StreamError(f"word {i} ({w}) is not a 32-bit unsigned value", index)
        # bits 10-13 reserved, bits 14-15 the mode: cmd0 (0) or cmd1 (1)
        if w & 0x3C00 or w & 0x8000:
            raise StreamError(f"word {i} (0x{w:08x}) has reserved bits set: not a command word "
                              "(is the stream misaligned, or a payload word read as a command?)",
                              index)
        opcode, param = w & 0x3FF, w >> 16
        if not w & 0x4000:
            name = cmd0_names.get(opcode)
            if name is None:
                raise StreamError(
                    f"unknown cmd0 opcode 0x{opcode:03x} (word {i}, 0x{w:08x})", index
                )
            append(Command(index, i, name, opcode, False, param))
            i += 1
            if name == "NPU_OP_STOP":
                if i != n:
                    raise StreamError(f"{n - i} word(s) follow NPU_OP_STOP; the stream "
                                      "must end there", index, name)
                return out
        else:
            name = cmd1_names.get(opcode)
            if name is None:
                raise StreamError(
                    f"unknown cmd1 opcode 0x{opcode:03x} (word {i}, 0x{w:08x})", index
                )
            if i + 1 >= n:
                raise StreamError(
                    "the stream is cut short: this cmd1 has no payload word", index, name
                )
            append(Command(index, i, name, opcode, True, param, words[i + 1]))
            i += 2
    raise StreamError("the stream is cut short: it ends without NPU_OP_STOP",
                      len(out) - 1 if out else 0, out[-1].name if out else None)


#: registers whose parameter is a field narrower than 16 bits: its largest value. A region
#: register names one of the eight base pointers (the DMA region registers also carry mode
#: bits, so they are not here).
PARAM_MAX = {f"{r}_REGION": 7 for r in ("IFM", "IFM2", "OFM", "WEIGHT", "SCALE")}


def check_ranges(state: "RegisterState") -> None:
    """Refuses a register an operation would read whose value is past its field
    (``PARAM_MAX``); the caller names the operation."""
    for name, limit in PARAM_MAX.items():
        if state.param(name) > limit:
            raise StreamError(f"register value out of range: NPU_SET_{name} is "
                              f"{state.param(name)}, past {limit}, the largest it holds")


#: the 40-bit address space of an address or stride register, and its sign bit
_ADDRESS_SPACE = 1 << 40
_ADDRESS_SIGN = 1 << 39


def _signed16(v: int) -> int:
    return v - (1 << 16) if v & 0x8000 else v


class RegisterState:
    """The value each ``NPU_SET_*`` command last wrote; names drop the ``NPU_SET_`` prefix."""

    def __init__(self) -> None:
        self._params: dict[str, int] = {}
        self._payloads: dict[str, int] = {}
        #: values computed from the registers (feature maps), forgotten at the next write
        self.derived: dict = {}

    def apply(self, cmd: Command) -> None:
        name = cmd.name[len("NPU_SET_"):]
        self._params[name] = cmd.param
        if cmd.is_cmd1:
            self._payloads[name] = cmd.payload
        if self.derived:
            self.derived.clear()

    def snapshot(self) -> "RegisterState":
        """A copy that later writes to this state leave alone."""
        copy = RegisterState()
        copy._params = dict(self._params)
        copy._payloads = dict(self._payloads)
        return copy

    def has(self, name: str) -> bool:
        return name in self._params

    def param(self, name: str, default: int = 0) -> int:
        """The unsigned 16-bit parameter."""
        return self._params.get(name, default)

    def signed(self, name: str, default: int = 0) -> int:
        """The parameter as a signed 16-bit value (zero points, clamps, scalars)."""
        return _signed16(self._params[name]) if name in self._params else default

    def payload(self, name: str, default: int = 0) -> int:
        """A cmd1 register's 32-bit payload."""
        return self._payloads.get(name, default)

    def address(self, name: str) -> int:
        """A cmd1 address/stride/length: payload plus bits 32-39 from the parameter."""
        return self._payloads.get(name, 0) | ((self._params.get(name, 0) & 0xFF) << 32)

    def stride(self, name: str) -> int:
        """A cmd1 stride as the signed 40-bit value it is: the NPU adds strides to a base
        in address arithmetic that wraps, so a stride written as the 40-bit two's
        complement of ``-s`` steps back ``s`` bytes. Vela writes its negative strides
        so (a mirrored copy: MIRROR_PAD writes the mirrored rows and columns through a
        negative OFM stride)."""
        v = self.address(name)
        return v - _ADDRESS_SPACE if v & _ADDRESS_SIGN else v
