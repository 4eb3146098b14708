"""Decoding untrusted weight streams where the codec's ``exit`` cannot take anything with it.

``mlw_codec.decode`` ends its process with C ``exit`` on a stream that runs out of bits, so
each stream is decoded in a child process that may die. That child is not forked from the
caller: C ``exit`` runs the thread-local destructors of the thread that forked, and in a
process where TVM's runtime has run, one of them destroys a condition variable TVM's worker
threads wait on; those threads do not exist in the child, so it waits for them for ever (a
hung ``make test`` worker showed this). The children are forked instead from a helper started
once per process: a fresh interpreter that imports the codec and nothing of the caller's, and
runs one thread.

The helper reads requests on its stdin (8-byte length, stream) and answers on its stdout
(status byte: 0 decoded, 1 refused; 8-byte length; the values as int16).
"""
from __future__ import annotations

import atexit
import os
import struct
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np

from .vela_defs import mlw_codec

_LENGTH = struct.Struct("<Q")
_DECODED, _REFUSED = 0, 1

_lock = threading.Lock()
_helper: tuple[int, subprocess.Popen] | None = None     # (the process it serves, the helper)


def decode(stream: bytes) -> bytes | None:
    """The int16 values (native byte order) ``stream`` decodes to, or None when the codec
    refuses it. Thread-safe; a process forked from this one starts a helper of its own."""
    with _lock:
        proc = _running_helper()
        proc.stdin.write(_LENGTH.pack(len(stream)) + stream)
        proc.stdin.flush()
        status = proc.stdout.read(1)
        head = proc.stdout.read(_LENGTH.size)
        if len(status) != 1 or len(head) != _LENGTH.size:
            raise RuntimeError("the weight-decoding helper process ended without an answer "
                               f"(exit status {proc.wait()})")
        values = proc.stdout.read(_LENGTH.unpack(head)[0])
    return values if status[0] == _DECODED else None


def _running_helper() -> subprocess.Popen:
    global _helper
    if _helper is None or _helper[0] != os.getpid() or _helper[1].poll() is not None:
        root = str(Path(__file__).resolve().parents[1])
        code = (f"import sys; sys.path.insert(0, {root!r}); "
                "from ethosu_stream.isolated_decode import serve; serve()")
        proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE)
        _helper = (os.getpid(), proc)
        atexit.register(_stop, proc, os.getpid())
    return _helper[1]


def _stop(proc: subprocess.Popen, owner: int) -> None:
    if os.getpid() == owner and proc.poll() is None:
        proc.stdin.close()          # the helper ends at the end of its input
        proc.wait()


def serve() -> None:
    """The helper's loop: one forked child per request, until its input ends."""
    codec = mlw_codec()
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    while len(head := requests.read(_LENGTH.size)) == _LENGTH.size:
        values = _decode_in_child(codec, requests.read(_LENGTH.unpack(head)[0]))
        status = _REFUSED if values is None else _DECODED
        values = values or b""
        answers.write(bytes([status]) + _LENGTH.pack(len(values)) + values)
        answers.flush()


def _decode_in_child(codec, stream: bytes) -> bytes | None:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: decode, send int16 values, exit without running parent cleanup
        status = 0
        try:
            os.close(read_end)
            devnull = os.open(os.devnull, os.O_WRONLY)  # the codec prints its complaint
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            data = np.asarray(codec.decode(bytearray(stream)), np.int16).tobytes()
            view = memoryview(data)
            while view:
                view = view[os.write(write_end, view):]
        except BaseException:
            status = 2
        finally:
            os._exit(status)
    os.close(write_end)
    chunks = []
    with os.fdopen(read_end, "rb") as f:
        while chunk := f.read(1 << 16):
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    return b"".join(chunks) if status == 0 else None
