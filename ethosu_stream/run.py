"""Running a decoded stream: register writes update the state, operations execute on the
memory, and what the stream did is tallied."""
from __future__ import annotations

import hashlib
from collections import Counter, OrderedDict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ethos_arch.accelerators import DEFAULT_ACCELERATOR

from .accelerator import accelerator_info
from .blas import single_blas_thread
from .errors import StreamError
from .memory import Memory
from .ops_common import ShramInfo
from .ops_conv import run_conv
from .ops_dma import run_dma
from .ops_elementwise import run_elementwise
from .ops_pool import run_pool
from .registers import Command, RegisterState, check_ranges, decode_stream


@dataclass(frozen=True)
class StreamStats:
    """What one run did. ``macs`` counts as Vela's ``nn_macs`` does: multiply-accumulates of
    CONV/DEPTHWISE plus the window elements of every POOL; ``dma_bytes`` is keyed by
    (source region, destination region); ``high_water`` is the highest byte address
    (exclusive) touched per region."""

    commands: dict[str, int]
    macs: int
    dma_bytes: dict[tuple[int, int], int]
    high_water: dict[int, int]
    bytes_read: dict[int, int]
    bytes_written: dict[int, int]


#: the largest OFM block the NPU has (height, width, depth; Vela's ``ofm_block_max``)
BLOCK_MAX = (32, 64, 128)
_BLOCK_REGISTERS = ("OFM_BLK_HEIGHT_M1", "OFM_BLK_WIDTH_M1", "OFM_BLK_DEPTH_M1")
#: the kernel operations: the commands that run a block-by-block NPU operation (DMAs and
#: waits are not)
KERNEL_OPERATIONS = frozenset({"NPU_OP_CONV", "NPU_OP_DEPTHWISE", "NPU_OP_POOL",
                               "NPU_OP_ELEMENTWISE"})
_SHRAM_BANK_BYTES = 1024


def check_block_config(state: RegisterState, info) -> None:
    """Refuses a block config the NPU cannot hold: an OFM block past ``BLOCK_MAX``, a depth
    that is not a whole number of micro-blocks, or a SHRAM split (input buffer end,
    accumulator start) out of order or past the SHRAM. Registers a stream never wrote are
    not checked (hand-built test streams leave them)."""
    h, w, d = (state.param(r) + 1 for r in _BLOCK_REGISTERS)
    for value, limit, reg in zip((h, w, d), BLOCK_MAX, _BLOCK_REGISTERS):
        if state.has(reg) and value > limit:
            raise StreamError(f"illegal block config: NPU_SET_{reg} gives {value}, past the "
                              f"NPU's largest OFM block "
                              f"({'x'.join(map(str, BLOCK_MAX))}, height x width x depth)")
    if state.has(_BLOCK_REGISTERS[2]) and d % info.ofm_ublock_depth:
        raise StreamError(f"illegal block config: OFM block depth {d} is not a multiple of "
                          f"{info.name}'s micro-block depth {info.ofm_ublock_depth}")
    banks = info.shram_bytes // _SHRAM_BANK_BYTES
    ib_end, ab_start = state.param("IFM_IB_END"), state.param("AB_START")
    if state.has("AB_START") and ab_start > banks:
        raise StreamError(f"illegal block config: the accumulators start at SHRAM bank "
                          f"{ab_start}, past {info.name}'s {banks} banks")
    if state.has("IFM_IB_END") and state.has("AB_START") and ib_end > ab_start:
        raise StreamError(f"illegal block config: the input buffer ends at SHRAM bank {ib_end}, "
                          f"after the accumulators start ({ab_start})")


def operation_count(commands: dict[str, int]) -> int:
    """NPU operations among ``commands`` (per-kind counts, as ``StreamStats.commands``): every
    ``NPU_OP_*`` command but the closing STOP."""
    return sum(n for k, n in commands.items() if k.startswith("NPU_OP_") and k != "NPU_OP_STOP")


def run_stream(
    words,
    memory: Memory,
    accelerator: str = DEFAULT_ACCELERATOR.name,
    trace: Callable[[Command, RegisterState, Memory], None] | None = None,
    *,
    compute: bool = True,
) -> StreamStats:
    """Decodes ``words`` and executes them on ``memory`` (modified in place). Any fault ends in
    one :class:`StreamError` naming the command. ``trace`` is called before each operation
    executes, with the registers it will run with (to inspect its inputs).

    ``compute=False`` is a dry run: every operation checks its registers and records the
    bytes it would read and write, but no data moves and nothing is computed (``memory``
    keeps its contents). The statistics are those of a full run; what a dry run cannot find
    are faults in the data itself (a weight stream that does not decode)."""
    memory.dry = not compute
    try:
        with single_blas_thread():
            return _run(words, memory, accelerator, trace)
    finally:
        memory.dry = False


@dataclass(frozen=True)
class _Program:
    """A decoded stream ready to run: each operation with the registers in force when it
    starts (a snapshot, so what operations derive from them is derived once), and the
    commands per kind (fixed by the words)."""

    operations: tuple[tuple[Command, RegisterState], ...]
    kinds: dict[str, int]


def _prepare(words) -> _Program:
    state = RegisterState()
    operations = []
    kinds: Counter = Counter()
    for cmd in decode_stream(words):
        kinds[cmd.name] += 1
        if cmd.name.startswith("NPU_OP_"):
            operations.append((cmd, state.snapshot()))
        else:
            state.apply(cmd)
    return _Program(tuple(operations), dict(sorted(kinds.items())))


_PROGRAMS: OrderedDict[bytes, _Program] = OrderedDict()
_PROGRAMS_KEPT = 4


def _program(words) -> _Program:
    """``_prepare(words)``, remembered for the last few word arrays (a model's stream runs
    again at every inference)."""
    if not (isinstance(words, np.ndarray) and words.dtype.kind in "iu"):
        return _prepare(words)
    key = hashlib.sha256(words.dtype.str.encode() + words.tobytes()).digest()
    program = _PROGRAMS.get(key)
    if program is None:
        program = _PROGRAMS[key] = _prepare(words)
        if len(_PROGRAMS) > _PROGRAMS_KEPT:
            _PROGRAMS.popitem(last=False)
    else:
        _PROGRAMS.move_to_end(key)
    return program


def _run(words, memory: Memory, accelerator: str, trace) -> StreamStats:
    program = _program(words)
    info = accelerator_info(accelerator)
    shram = ShramInfo(info.lut_address, info.lut_slot_size)
    dma: Counter = Counter()
    macs = 0
    for cmd, state in program.operations:
        if trace is not None:
            trace(cmd, state, memory)
        try:
            macs += _execute(cmd, memory, state, info, shram, dma)
        except StreamError as exc:
            if exc.index is not None:
                raise
            raise StreamError(str(exc), cmd.index, cmd.name) from None
        except (ValueError, IndexError, OverflowError) as exc:
            raise StreamError(f"the registers describe an operation the model cannot run: "
                              f"{exc}", cmd.index, cmd.name) from None
    acc = memory.access
    return StreamStats(dict(program.kinds), macs, dict(sorted(dma.items())),
                       {r: a.high_water for r, a in sorted(acc.items())},
                       {r: a.read for r, a in sorted(acc.items())},
                       {r: a.written for r, a in sorted(acc.items())})


def _execute(cmd: Command, mem: Memory, state: RegisterState, info, shram, dma) -> int:
    name = cmd.name
    if name in KERNEL_OPERATIONS:
        check_ranges(state)
        check_block_config(state, info)
    if name == "NPU_OP_CONV":
        return run_conv(mem, state, info, shram, depthwise=False)
    if name == "NPU_OP_DEPTHWISE":
        return run_conv(mem, state, info, shram, depthwise=True)
    if name == "NPU_OP_POOL":
        return run_pool(mem, state, cmd.param, shram)
    if name == "NPU_OP_ELEMENTWISE":
        run_elementwise(mem, state, cmd.param, shram)
        return 0
    if name == "NPU_OP_DMA_START":
        src, dst, n = run_dma(mem, state, cmd.param)
        dma[(src, dst)] += n
        return 0
    # STOP, IRQ, and the waits: the model runs each command to completion, so a wait has
    # nothing left to wait for
    return 0
