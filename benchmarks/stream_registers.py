"""Where command-stream bytes go, register by register: two compiled ``.tflite`` files side by
side, ours and Vela's (issue 27: "stream bytes per NPU operation <= Vela's").

Each file's ``ethos-u`` operators' command streams are decoded
(``ethosu_stream.registers.decode_stream``) and every command counted: its writes and bytes,
by register and by group of registers (the feature maps' and constants' addresses, strides,
tile sizes, shapes with kernel and padding, weight and scale lengths and regions, block and
SHRAM layout, quantization and precision, DMA and waits, the operations themselves), each
per NPU kernel operation (convolution, depthwise, pool, elementwise). It also counts the
writes of a value the register already holds (none where Vela's generator wrote the stream:
it writes a register only when its value changes).

``--unread`` also runs each stream on the functional model (zero inputs) and counts, per
register and per the kind of the operation that followed, the writes no operation read
before the register was written again or the stream ended: what a generator could still
leave out as far as the model's reads tell. The model reads the block and SHRAM registers
only to check them, and not BLOCKDEP (how far an operation may overlap the one before, which
it does not model); the Linux driver's command-stream validator also reads IFM_DEPTH_M1 for
every operation. So writes counted here are not all free to drop.

``--sizes`` also counts the NPU kernel operations by their bytes (each with every command
since the kernel operation before it, DMAs and waits included): a stripe continuing the
layer of the operation before writes little more than its feature maps' base addresses
(20-28 B), an operation switching layer writes that layer's shapes, strides, weights and
quantization too. Bytes per operation follow from how many of each a plan makes.

  python benchmarks/stream_registers.py OURS.tflite VELA.tflite [--accelerator NAME]
      [--registers] [--unread] [--sizes]

``benchmarks/compile_speed.py --out DIR`` leaves both files for each model it measures:
``DIR/tvmc/Size/NAME.tflite`` and ``DIR/vela/Size/NAME_vela.tflite`` (``Performance`` for
Vela's default).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections import Counter
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ethosu_stream.registers import RegisterState, decode_stream  # noqa: E402
from ethosu_stream.run import KERNEL_OPERATIONS  # noqa: E402
from ethosu_stream.tflite_custom_op import payload_accelerator, read_ethos_u_ops  # noqa: E402

#: register groups, the first whose key occurs in a command's name taking it
GROUPS = (
    ("addresses", ("_BASE",)),
    ("DMA and waits", ("DMA0", "NPU_OP_DMA", "KERNEL_WAIT")),
    ("tile sizes", ("HEIGHT0", "HEIGHT1", "WIDTH0")),
    ("strides", ("STRIDE_X", "STRIDE_Y", "STRIDE_C")),
    ("shape, kernel, padding", ("_HEIGHT_M1", "_WIDTH_M1", "DEPTH_M1", "KERNEL_", "PAD_",
                                "UPSCALE")),
    ("weight/scale length, region", ("WEIGHT", "SCALE_LENGTH", "SCALE_REGION")),
    ("block and SHRAM", ("BLK_", "IB_END", "AB_START", "IB_START", "BLOCKDEP")),
    ("quantization, precision", ("ZERO_POINT", "SCALE", "ACTIVATION", "PRECISION",
                                 "BROADCAST", "ACC_FORMAT", "SCALAR", "PARALLEL")),
    ("feature map regions", ("_REGION",)),
    ("operations", ("NPU_OP_",)),
)
#: the RegisterState methods through which an operation reads a register
_READERS = ("has", "param", "signed", "payload", "address", "stride")


def group(name: str) -> str:
    """The group of the command ``name`` (``NPU_SET_*`` or ``NPU_OP_*``)."""
    for label, keys in GROUPS:
        if any(k in name for k in keys):
            return label
    return "other"


class StreamCount(NamedTuple):
    """One file's streams counted: bytes and writes per command, NPU kernel operations, and
    writes of the value the register already held."""

    bytes: Counter
    writes: Counter
    operations: int
    same_value_writes: int


def count(data: bytes) -> StreamCount:
    """Every command of every ``ethos-u`` operator's stream in ``data`` (a ``.tflite``)."""
    size, writes = Counter(), Counter()
    ops = same = 0
    for op in read_ethos_u_ops(data):
        held: dict[str, tuple] = {}
        for cmd in decode_stream(op.words):
            size[cmd.name] += 8 if cmd.is_cmd1 else 4
            writes[cmd.name] += 1
            ops += cmd.name in KERNEL_OPERATIONS
            if cmd.name.startswith("NPU_SET_"):
                value = (cmd.param, cmd.payload)
                same += held.get(cmd.name) == value
                held[cmd.name] = value
    return StreamCount(size, writes, ops, same)


@contextlib.contextmanager
def _reads_recorded(reads: list[set]) -> Iterator[None]:
    """While the context is open, every register read through ``RegisterState`` is added to
    ``reads[-1]`` (the set of the operation running; nothing before the first)."""
    saved = {m: getattr(RegisterState, m) for m in _READERS}

    def recording(method):
        def read(self, name, *args, **kwargs):
            if reads:
                reads[-1].add(name)
            return method(self, name, *args, **kwargs)
        return read

    for m, method in saved.items():
        setattr(RegisterState, m, recording(method))
    try:
        yield
    finally:
        for m, method in saved.items():
            setattr(RegisterState, m, method)


def unread_writes(data: bytes, accelerator: str) -> Counter:
    """(register, the next operation's kind) -> writes no operation read before the register
    was written again or the stream ended, running each stream on zero inputs."""
    out: Counter = Counter()
    for op in read_ethos_u_ops(data):
        reads: list[set] = []       # per NPU_OP_ command, in stream order

        def trace(cmd, state, mem, reads=reads):
            state.derived.clear()   # what an operation derives from registers, it reads anew
            reads.append(set())

        with _reads_recorded(reads):
            op.run([np.zeros(s.shape, s.dtype) for s in op.inputs], accelerator, trace)
        pending: dict[str, list] = {}   # register -> [kind of the next operation]
        index = 0
        for cmd in decode_stream(op.words):
            if cmd.name.startswith("NPU_SET_"):
                reg = cmd.name[len("NPU_SET_"):]
                if reg in pending:
                    out[reg, pending[reg][0] or "-"] += 1
                pending[reg] = [None]
            elif cmd.name.startswith("NPU_OP_"):
                for reg in reads[index]:
                    pending.pop(reg, None)
                if "WAIT" not in cmd.name:
                    for p in pending.values():
                        p[0] = p[0] or cmd.name[len("NPU_OP_"):]
                index += 1
        for reg, (kind,) in pending.items():
            out[reg, kind or "-"] += 1
    return out


def _per(n: float, ops: int) -> str:
    return f"{n / ops:7.1f}" if ops else f"{'-':>7}"


def table(ours: StreamCount, vela: StreamCount, registers: bool) -> str:
    """Bytes per NPU operation by group (and by register), ours beside Vela's."""
    def by_group(c: StreamCount) -> Counter:
        g: Counter = Counter()
        for name, n in c.bytes.items():
            g[group(name)] += n
        return g

    go, gv = by_group(ours), by_group(vela)
    head = (f"{'':34} {'ours B':>8} {'B/op':>7} {'Vela B':>8} {'B/op':>7} {'ours - Vela':>11}")
    lines = [head, "-" * len(head)]
    rows = sorted(set(go) | set(gv), key=lambda k: -(go[k] / max(ours.operations, 1)
                                                      - gv[k] / max(vela.operations, 1)))
    for k in rows:
        lines.append(f"{k:34} {go[k]:>8,} {_per(go[k], ours.operations)} {gv[k]:>8,} "
                     f"{_per(gv[k], vela.operations)} "
                     f"{go[k] / max(ours.operations, 1) - gv[k] / max(vela.operations, 1):>11.1f}")
    to, tv = sum(ours.bytes.values()), sum(vela.bytes.values())
    lines.append(f"{'total':34} {to:>8,} {_per(to, ours.operations)} {tv:>8,} "
                 f"{_per(tv, vela.operations)} "
                 f"{to / max(ours.operations, 1) - tv / max(vela.operations, 1):>11.1f}")
    lines.append(f"NPU operations: ours {ours.operations}, Vela {vela.operations}; writes of "
                 f"the value held: ours {ours.same_value_writes}, Vela "
                 f"{vela.same_value_writes}")
    if registers:
        lines += ["", f"{'command':34} {'ours n':>8} {'B/op':>7} {'Vela n':>8} {'B/op':>7}"]
        names = sorted(set(ours.bytes) | set(vela.bytes),
                       key=lambda k: -(ours.bytes[k] / max(ours.operations, 1)
                                       - vela.bytes[k] / max(vela.operations, 1)))
        for k in names:
            lines.append(f"{k:34} {ours.writes[k]:>8} {_per(ours.bytes[k], ours.operations)} "
                         f"{vela.writes[k]:>8} {_per(vela.bytes[k], vela.operations)}")
    return "\n".join(lines)


#: (upper bound in bytes, label) of the ``--sizes`` rows; the last row takes the rest
SIZE_ROWS = ((28, "<= 28 B (base addresses)"), (64, "29-64 B"), (128, "65-128 B"),
             (None, "> 128 B"))


def stream_operation_bytes(words) -> list[int]:
    """The bytes of each NPU kernel operation of one command stream, in stream order: its own
    command and every command since the kernel operation before it (the commands after the
    last kernel operation belong to none)."""
    out = []
    pending = 0
    for cmd in decode_stream(words):
        pending += 8 if cmd.is_cmd1 else 4
        if cmd.name in KERNEL_OPERATIONS:
            out.append(pending)
            pending = 0
    return out


def operation_bytes(data: bytes) -> list[int]:
    """``stream_operation_bytes`` of every ``ethos-u`` operator's stream in ``data``."""
    return [n for op in read_ethos_u_ops(data) for n in stream_operation_bytes(op.words)]


def sizes_table(ours: list[int], vela: list[int]) -> str:
    """Operations and their bytes per row of ``SIZE_ROWS``, ours beside Vela's."""
    def row_of(n: int) -> str:
        return next(label for bound, label in SIZE_ROWS if bound is None or n <= bound)

    head = f"{'bytes per operation':26} {'ours ops':>8} {'bytes':>8} {'Vela ops':>8} {'bytes':>8}"
    lines = [head, "-" * len(head)]
    for _, label in SIZE_ROWS:
        o = [n for n in ours if row_of(n) == label]
        v = [n for n in vela if row_of(n) == label]
        lines.append(f"{label:26} {len(o):>8} {sum(o):>8,} {len(v):>8} {sum(v):>8,}")
    return "\n".join(lines)


def unread_table(ours: Counter, vela: Counter) -> str:
    head = f"{'register, next operation':44} {'ours':>6} {'Vela':>6}"
    lines = ["writes no operation read before the next write (functional model, zero inputs)",
             head, "-" * len(head)]
    for key in sorted(set(ours) | set(vela), key=lambda k: (-ours[k] - vela[k], k)):
        lines.append(f"{key[0] + ', ' + key[1]:44} {ours[key]:>6} {vela[key]:>6}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ours")
    ap.add_argument("vela")
    ap.add_argument("--accelerator", default=None,
                    help="the Ethos-U the files run on (default: the one the file names)")
    ap.add_argument("--registers", action="store_true", help="also one row per command")
    ap.add_argument("--unread", action="store_true",
                    help="also the writes no operation reads (runs the streams)")
    ap.add_argument("--sizes", action="store_true",
                    help="also the operations counted by their bytes")
    args = ap.parse_args(argv)
    with open(args.ours, "rb") as f:
        ours = f.read()
    with open(args.vela, "rb") as f:
        vela = f.read()
    print(table(count(ours), count(vela), args.registers))
    if args.sizes:
        print()
        print(sizes_table(operation_bytes(ours), operation_bytes(vela)))
    if args.unread:
        accelerator = args.accelerator or payload_accelerator(ours) or payload_accelerator(vela)
        if accelerator is None:
            ap.error("the files do not name their Ethos-U: give --accelerator")
        print()
        print(unread_table(unread_writes(ours, accelerator), unread_writes(vela, accelerator)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
