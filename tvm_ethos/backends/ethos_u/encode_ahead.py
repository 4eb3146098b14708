"""Vela's weight encoder (``npu_encode_weights``) for a stream generation, with the largest
encodings done ahead by one forked child on the idle core.

The encoder is C code that holds the GIL, so threads cannot share its work; a second process
can. Its time goes with the weights, and a few large layers take most of it (a network's last
pointwise and FULLY_CONNECTED layers, asked for back to back at the end of the emission). The
plan says which they are before any emission: a layer whose weights are not staged asks for
its whole weights at the block depth its Part was planned with. So the generation predicts
those requests (:class:`EncodeRequest`), and a child forked at the start of the emission
encodes them, largest first, sending each (digest, bytes) back while this process emits
(:func:`encoding_ahead`). Every encoding goes through one door (:func:`encode_weights`): a
request whose digest was predicted is taken from the child (waiting for it if the child is
on it); any other, and any the child did not send (it failed or died), is encoded here. A
prediction decides only where an encoding runs, never its bytes.
"""
from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np

from planner.forked import Forked
from planner.sink_walks import second_process_pays
from tvm_ethos.backends.ethos_u.stream_base import vela_api

#: A request is predicted only with at least this many weights. The child's encodings are
#: the critical path (it has the largest, and this process emits meanwhile): a smaller
#: request would add to them and, asked for earlier in the emission than the child reaches
#: it, keep this process waiting for what it would encode here in a few tens of
#: milliseconds (the encoder takes about 0.2 us a weight).
AHEAD_MIN_REQUEST = 400_000

#: The child is forked only when the predicted requests have at least this many weights in
#: all (about 0.2 s of encoding): below it the fork, the child's start-up and the second
#: core's slower running (two busy vCPUs run slower than one) take much of what it saves.
AHEAD_MIN_WEIGHTS = 1_000_000

#: When a list, each generation that forked a child appends (predicted, taken from the
#: child) once its emission is done (tests and benchmarks read it).
TAKEN: list | None = None


@dataclass(frozen=True, eq=False)
class EncodeRequest:
    """One call of ``npu_encode_weights``: OHWI int16 weights, (x, y) dilation, the IFM's
    element bits, the block depth the stream runs, whether depthwise, the traversal."""

    accelerator: Any
    weights: np.ndarray
    dilation: tuple[int, int]
    ifm_bits: int
    block_depth: int
    depthwise: bool
    traversal: Any

    def encode(self) -> bytes:
        return bytes(vela_api().npu_encode_weights(
            self.accelerator, self.weights, self.dilation, self.ifm_bits, self.block_depth,
            self.depthwise, self.traversal))

    def digest(self) -> bytes:
        """A digest of everything the encoder reads: equal requests, equal digests."""
        w = np.ascontiguousarray(self.weights)
        h = hashlib.blake2b(repr((str(self.accelerator), w.shape, w.dtype.str,
                                  tuple(int(d) for d in self.dilation), int(self.ifm_bits),
                                  int(self.block_depth), bool(self.depthwise),
                                  str(self.traversal))).encode(), digest_size=16)
        h.update(w.data)
        return h.digest()


class _Ahead:
    """This process's side of one generation: the predicted digests (by weight count, so
    that most requests are told apart without hashing), and what the child has sent."""

    def __init__(self, stream, predicted: Sequence[EncodeRequest]) -> None:
        self.stream = stream
        self.sizes = {r.weights.size for r in predicted}
        self.waiting = {r.digest() for r in predicted}
        self.arrived: dict[bytes, bytes] = {}
        self.ended = False
        self.taken = 0

    def _receive(self) -> None:
        try:
            digest, encoded = self.stream.recv()
        except (EOFError, OSError):     # the child has ended: done, failed or died
            self.ended = True
            return
        self.arrived[digest] = encoded

    def encode(self, request: EncodeRequest) -> bytes:
        while not self.ended and self.stream.poll():   # take what has come: it waits for us
            self._receive()
        if request.weights.size in self.sizes:
            digest = request.digest()
            if digest in self.waiting:
                while digest not in self.arrived and not self.ended:
                    self._receive()
                if digest in self.arrived:
                    self.waiting.discard(digest)
                    self.taken += 1
                    return self.arrived.pop(digest)
        return request.encode()


_AHEAD: ContextVar[_Ahead | None] = ContextVar("ethos_u_encode_ahead", default=None)


def encode_request(request: EncodeRequest) -> bytes:
    """``npu_encode_weights``' bytes for ``request``: the forked child's where it was
    predicted (:func:`encoding_ahead`), else encoded here."""
    ahead = _AHEAD.get()
    return request.encode() if ahead is None else ahead.encode(request)


def encode_weights(accelerator, weights: np.ndarray, dilation: tuple[int, int], ifm_bits: int,
                   block_depth: int, depthwise: bool, traversal) -> bytes:
    """:func:`encode_request` of ``npu_encode_weights``' arguments."""
    return encode_request(EncodeRequest(accelerator, weights, tuple(dilation), ifm_bits,
                                        block_depth, depthwise, traversal))


def worth_ahead(predicted: Sequence[EncodeRequest]) -> list[EncodeRequest]:
    """The requests a child should encode, largest first: those of at least
    AHEAD_MIN_REQUEST weights, when they have AHEAD_MIN_WEIGHTS in all and a second process
    pays (the plan search's rules, ``planner.sink_walks.second_process_pays``); else none."""
    large = sorted((r for r in predicted if r.weights.size >= AHEAD_MIN_REQUEST),
                   key=lambda r: -r.weights.size)
    if sum(r.weights.size for r in large) < AHEAD_MIN_WEIGHTS or not second_process_pays():
        return []
    return large


def _child(requests: Sequence[EncodeRequest], outbox) -> None:
    """The forked child: each request encoded and sent, in the order given."""
    for r in requests:
        outbox.send((r.digest(), r.encode()))


@contextlib.contextmanager
def encoding_ahead(requests: Sequence[EncodeRequest]) -> Iterator[None]:
    """Within the block, ``requests`` (already chosen: :func:`worth_ahead`) are encoded by a
    forked child, in their order, and taken by :func:`encode_weights` when asked for; with
    none, or inside a block already encoding ahead, everything is encoded here. Leaving the
    block ends the child."""
    if not requests or _AHEAD.get() is not None:
        yield
        return
    with Forked() as forked:
        ahead = _Ahead(forked.start_streamed(_child, list(requests)), requests)
        token = _AHEAD.set(ahead)
        try:
            yield
        finally:
            _AHEAD.reset(token)
        if TAKEN is not None:
            TAKEN.append((len(requests), ahead.taken))
